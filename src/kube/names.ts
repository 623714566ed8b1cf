// Kubernetes' rules for names, keys and values (apimachinery's validation package), once: as predicates
// for code and as zod schemas for flags, so every flag, the central server and the label parser agree on
// what a namespace, a Service name or a label key is.
import { z } from 'zod';

const DNS_1123_LABEL = /^[a-z0-9]([-a-z0-9]*[a-z0-9])?$/;
const DNS_1123_SUBDOMAIN = /^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$/;
const DNS_1035_LABEL = /^[a-z]([-a-z0-9]*[a-z0-9])?$/;
const QUALIFIED_NAME_PART = /^([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]$/;
const LABEL_VALUE = /^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$/;

/** An RFC 1123 label (a namespace name): at most 63 lower-case alphanumerics or '-', alphanumeric at both ends. */
export function isDnsLabel(value: string): boolean {
  return value.length <= 63 && DNS_1123_LABEL.test(value);
}

/** An RFC 1123 subdomain (most object names): at most 253 characters, dot-separated labels. */
export function isDnsSubdomain(value: string): boolean {
  return value.length <= 253 && DNS_1123_SUBDOMAIN.test(value);
}

/** An RFC 1035 label (a Service name): an RFC 1123 label that starts with a letter. */
export function isDns1035Label(value: string): boolean {
  return value.length <= 63 && DNS_1035_LABEL.test(value);
}

/** A qualified name (label key, taint key): `[prefix/]name`, prefix a DNS subdomain, name <= 63. */
export function isQualifiedName(key: string): boolean {
  const slash = key.lastIndexOf('/');
  const prefix = slash < 0 ? undefined : key.slice(0, slash);
  const name = slash < 0 ? key : key.slice(slash + 1);
  if (prefix !== undefined && (prefix.length === 0 || !isDnsSubdomain(prefix))) return false;
  return name.length > 0 && name.length <= 63 && QUALIFIED_NAME_PART.test(name);
}

/** A label value (also a taint value): empty, or <= 63 alphanumerics with '-', '_', '.' inside. */
export function isLabelValue(value: string): boolean {
  return value.length <= 63 && LABEL_VALUE.test(value);
}

/** Flag schemas: the same rules, with the messages a usage error shows. */
export const dnsLabelSchema = z
  .string()
  .refine(isDnsLabel, 'must be a DNS label (lower-case letters, digits and "-", at most 63)');
export const dnsSubdomainSchema = z
  .string()
  .refine(isDnsSubdomain, 'must be a DNS subdomain (lower-case letters, digits, "-" and ".", at most 253)');
export const dns1035LabelSchema = z
  .string()
  .refine(isDns1035Label, 'must be a DNS-1035 label (a Service name: lower-case, starts with a letter)');
/** A namespace flag that may be left empty. */
export const optionalNamespaceSchema = z.union([z.literal(''), dnsLabelSchema]);
