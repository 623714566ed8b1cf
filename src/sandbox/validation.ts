// Field validation shared by the built-in strategies: object names, labels and annotations, with
// kube-apiserver's texts (k8s.io/apimachinery/pkg/util/validation).
import type { FieldCause, KubeObject } from './types.ts';

const DNS1123_LABEL = /^[a-z0-9]([-a-z0-9]*[a-z0-9])?$/;
const DNS1123_SUBDOMAIN = /^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$/;
const DNS1035_LABEL = /^[a-z]([-a-z0-9]*[a-z0-9])?$/;
const QUALIFIED_NAME_PART = /^([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]$/;
const LABEL_VALUE = /^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$/;

export type NameRule = 'subdomain' | 'label' | 'dns1035' | 'path';

export const invalidCause = (field: string, value: unknown, detail: string): FieldCause => ({
  reason: 'FieldValueInvalid',
  field,
  message: `Invalid value: ${JSON.stringify(value)}: ${detail}`,
});

export const requiredCause = (field: string, detail?: string): FieldCause => ({
  reason: 'FieldValueRequired',
  field,
  message: detail ? `Required value: ${detail}` : 'Required value',
});

export const forbiddenCause = (field: string, detail: string): FieldCause => ({
  reason: 'FieldValueForbidden',
  field,
  message: `Forbidden: ${detail}`,
});

export const immutableCause = (field: string, value: unknown): FieldCause =>
  invalidCause(field, value, 'field is immutable');

export function nameErrors(name: string, rule: NameRule, field = 'metadata.name'): FieldCause[] {
  switch (rule) {
    case 'label':
      if (name.length > 63) return [invalidCause(field, name, 'must be no more than 63 characters')];
      if (!DNS1123_LABEL.test(name)) {
        return [
          invalidCause(
            field,
            name,
            `a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and must start and end with an alphanumeric character (e.g. 'my-name',  or '123-abc', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?')`,
          ),
        ];
      }
      return [];
    case 'dns1035':
      if (name.length > 63) return [invalidCause(field, name, 'must be no more than 63 characters')];
      if (!DNS1035_LABEL.test(name)) {
        return [
          invalidCause(
            field,
            name,
            `a DNS-1035 label must consist of lower case alphanumeric characters or '-', start with an alphabetic character, and end with an alphanumeric character (e.g. 'my-name',  or 'abc-123', regex used for validation is '[a-z]([-a-z0-9]*[a-z0-9])?')`,
          ),
        ];
      }
      return [];
    case 'path':
      if (name === '.' || name === '..' || name.includes('/') || name.includes('%')) {
        return [invalidCause(field, name, `may not contain '/' or '%' and may not be '.' or '..'`)];
      }
      return [];
    case 'subdomain':
      if (name.length > 253) return [invalidCause(field, name, 'must be no more than 253 characters')];
      if (!DNS1123_SUBDOMAIN.test(name)) {
        return [
          invalidCause(
            field,
            name,
            `a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character (e.g. 'example.com', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')`,
          ),
        ];
      }
      return [];
  }
}

function qualifiedNameErrors(key: string, field: string): FieldCause[] {
  const slash = key.indexOf('/');
  const prefix = slash >= 0 ? key.slice(0, slash) : '';
  const name = slash >= 0 ? key.slice(slash + 1) : key;
  if (slash >= 0 && (prefix.length === 0 || prefix.length > 253 || !DNS1123_SUBDOMAIN.test(prefix))) {
    return [
      invalidCause(
        field,
        key,
        'prefix part a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters',
      ),
    ];
  }
  if (name.length === 0 || name.length > 63 || !QUALIFIED_NAME_PART.test(name)) {
    return [
      invalidCause(
        field,
        key,
        `name part must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for validation is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]')`,
      ),
    ];
  }
  return [];
}

export function metadataErrors(obj: KubeObject): FieldCause[] {
  const causes: FieldCause[] = [];
  const labels = obj.metadata.labels ?? {};
  for (const [key, value] of Object.entries(labels)) {
    causes.push(...qualifiedNameErrors(key, 'metadata.labels'));
    if (typeof value !== 'string' || value.length > 63 || !LABEL_VALUE.test(value)) {
      causes.push(
        invalidCause(
          'metadata.labels',
          value,
          `a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyValue',  or 'my_value',  or '12345', regex used for validation is '(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?')`,
        ),
      );
    }
  }
  let total = 0;
  for (const [key, value] of Object.entries(obj.metadata.annotations ?? {})) {
    causes.push(...qualifiedNameErrors(key.toLowerCase(), 'metadata.annotations'));
    total += key.length + (typeof value === 'string' ? value.length : 0);
  }
  if (total > 256 * 1024) {
    causes.push({
      reason: 'FieldValueTooLong',
      field: 'metadata.annotations',
      message: 'Too long: must have at most 262144 bytes',
    });
  }
  for (const [i, ref] of (obj.metadata.ownerReferences ?? []).entries()) {
    if (!ref.uid)
      causes.push(invalidCause(`metadata.ownerReferences[${i}].uid`, ref.uid ?? '', 'uid must not be empty'));
    if (!ref.name)
      causes.push(
        invalidCause(`metadata.ownerReferences[${i}].name`, ref.name ?? '', 'name must not be empty'),
      );
    if (!ref.kind)
      causes.push(
        invalidCause(`metadata.ownerReferences[${i}].kind`, ref.kind ?? '', 'kind must not be empty'),
      );
    if (!ref.apiVersion)
      causes.push(
        invalidCause(
          `metadata.ownerReferences[${i}].apiVersion`,
          ref.apiVersion ?? '',
          'version must not be empty',
        ),
      );
  }
  const controllers = (obj.metadata.ownerReferences ?? []).filter((r) => r.controller);
  if (controllers.length > 1) {
    causes.push(
      invalidCause(
        'metadata.ownerReferences',
        obj.metadata.ownerReferences,
        'Only one reference can have Controller set to true',
      ),
    );
  }
  return causes;
}
