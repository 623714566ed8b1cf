import { describe, expect, it } from 'vitest';
import {
  dns1035LabelSchema,
  dnsLabelSchema,
  dnsSubdomainSchema,
  isDns1035Label,
  isDnsLabel,
  isDnsSubdomain,
  isLabelValue,
  isQualifiedName,
  optionalNamespaceSchema,
} from '../../../src/kube/names.ts';

describe('Kubernetes name rules', () => {
  it('accepts RFC 1123 labels up to 63 characters, alphanumeric at both ends', () => {
    expect(isDnsLabel('berth-system')).toBe(true);
    expect(isDnsLabel('a'.repeat(63))).toBe(true);
    expect(isDnsLabel('a'.repeat(64))).toBe(false);
    for (const bad of ['', 'Upper', '-lead', 'trail-', 'dot.ted', 'under_score'])
      expect(isDnsLabel(bad)).toBe(false);
  });

  it('accepts RFC 1123 subdomains up to 253 characters', () => {
    expect(isDnsSubdomain('berth-operator.webhooks')).toBe(true);
    expect(isDnsSubdomain(`${'a'.repeat(63)}.${'b'.repeat(63)}.${'c'.repeat(63)}.${'d'.repeat(61)}`)).toBe(
      true,
    );
    expect(isDnsSubdomain(`${'a'.repeat(63)}.${'b'.repeat(63)}.${'c'.repeat(63)}.${'d'.repeat(62)}`)).toBe(
      false,
    );
    for (const bad of ['', 'a..b', '.a', 'a.', 'A.b']) expect(isDnsSubdomain(bad)).toBe(false);
  });

  it('requires a Service name to start with a letter', () => {
    expect(isDns1035Label('webhook')).toBe(true);
    expect(isDns1035Label('9hook')).toBe(false);
    expect(isDns1035Label('a'.repeat(64))).toBe(false);
  });

  it('validates qualified names and label values', () => {
    expect(isQualifiedName('aether.io/agent-not-ready')).toBe(true);
    expect(isQualifiedName('agent')).toBe(true);
    expect(isQualifiedName('/agent')).toBe(false);
    expect(isQualifiedName('Aether.io/x')).toBe(false);
    expect(isQualifiedName(`${'a'.repeat(64)}`)).toBe(false);
    expect(isQualifiedName(`${'a'.repeat(254)}/x`)).toBe(false);
    expect(isLabelValue('')).toBe(true);
    expect(isLabelValue('true')).toBe(true);
    expect(isLabelValue('-x')).toBe(false);
    expect(isLabelValue('a'.repeat(64))).toBe(false);
  });

  it('gives flag schemas the same rules with one message each, length included', () => {
    const message = (schema: typeof dnsLabelSchema, value: string) =>
      schema.safeParse(value).error?.issues[0]?.message;
    expect(message(dnsLabelSchema, 'a'.repeat(64))).toMatch(/^must be a DNS label/);
    expect(message(dnsSubdomainSchema, 'Bad_Name')).toMatch(/^must be a DNS subdomain/);
    expect(message(dns1035LabelSchema, '9hook')).toMatch(/^must be a DNS-1035 label/);
    expect(optionalNamespaceSchema.safeParse('').success).toBe(true);
    expect(optionalNamespaceSchema.safeParse('UPPER').success).toBe(false);
  });
});
