import { describe, expect, it } from 'vitest';
import {
  isLabelValue,
  isQualifiedName,
  matchesLabels,
  parseLabelSelector,
} from '../../../src/nodetaint/selector.ts';

const matches = (selector: string, labels?: Record<string, string>) =>
  matchesLabels(parseLabelSelector(selector), labels);

describe('label selectors', () => {
  it('matches equality, inequality, existence and sets like apimachinery', () => {
    const labels = { 'app.kubernetes.io/name': 'aether-agent', tier: 'node' };
    expect(matches('app.kubernetes.io/name=aether-agent', labels)).toBe(true);
    expect(matches('app.kubernetes.io/name==aether-agent', labels)).toBe(true);
    expect(matches('app.kubernetes.io/name=other', labels)).toBe(false);
    expect(matches('app.kubernetes.io/name=aether-agent', undefined)).toBe(false);
    expect(matches('tier!=node', labels)).toBe(false);
    expect(matches('missing!=x', labels)).toBe(true);
    expect(matches('tier', labels)).toBe(true);
    expect(matches('!tier', labels)).toBe(false);
    expect(matches('!missing', labels)).toBe(true);
    expect(matches('tier in (node, edge)', labels)).toBe(true);
    expect(matches('tier notin (node)', labels)).toBe(false);
    expect(matches('missing notin (node)', labels)).toBe(true);
    expect(matches('tier in (edge),app.kubernetes.io/name=aether-agent', labels)).toBe(false);
    expect(matches('', labels)).toBe(true);
  });

  it('normalises the text sent to the API server', () => {
    expect(parseLabelSelector(' a = b , c in ( x , y ) , ! d ').text).toBe('a=b,c in (x,y),!d');
  });

  it.each(['a in (b', 'a in ()', 'a=b,,c', 'a b', 'Bad Key=x', 'a=b c', 'a=(b)', '-a=b'])(
    'rejects %j',
    (text) => {
      expect(() => parseLabelSelector(text)).toThrow();
    },
  );

  it('validates qualified names and label values', () => {
    expect(isQualifiedName('aether.io/agent-not-ready')).toBe(true);
    expect(isQualifiedName('agent')).toBe(true);
    expect(isQualifiedName('/agent')).toBe(false);
    expect(isQualifiedName('Aether.io/x')).toBe(false);
    expect(isQualifiedName(`${'a'.repeat(64)}`)).toBe(false);
    expect(isLabelValue('')).toBe(true);
    expect(isLabelValue('true')).toBe(true);
    expect(isLabelValue('-x')).toBe(false);
  });
});
