// Label and field selectors with kube-apiserver's syntax and semantics (k8s.io/apimachinery/pkg/labels
// and pkg/fields). Parse errors become 400 BadRequest Status errors, like the real server.
import { StatusError } from './types.ts';

export type Operator = 'in' | 'notin' | 'exists' | '!' | '=' | '!=' | 'gt' | 'lt';

export interface Requirement {
  key: string;
  operator: Operator;
  values: string[];
}

export type Selector = Requirement[];

const QUALIFIED_NAME =
  /^([a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*\/)?[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?$/;
const LABEL_VALUE = /^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$/;

const invalid = (message: string): StatusError =>
  new StatusError(400, 'BadRequest', `unable to parse requirement: ${message}`);

function checkKey(key: string): void {
  const name = key.includes('/') ? key.slice(key.indexOf('/') + 1) : key;
  if (!QUALIFIED_NAME.test(key) || name.length > 63 || key.length > 253 + 1 + 63) {
    throw invalid(
      `values[0][${key}]: Invalid value: "${key}": name part must consist of alphanumeric characters, '-', '_' or '.'`,
    );
  }
}

function checkValue(key: string, value: string): void {
  if (value.length > 63 || !LABEL_VALUE.test(value)) {
    throw invalid(
      `values[0][${key}]: Invalid value: "${value}": a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character`,
    );
  }
}

/** Splits on commas that are not inside parentheses. */
function splitTerms(input: string): string[] {
  const terms: string[] = [];
  let depth = 0;
  let start = 0;
  for (let i = 0; i < input.length; i++) {
    const c = input[i];
    if (c === '(') depth++;
    else if (c === ')') depth--;
    else if (c === ',' && depth === 0) {
      terms.push(input.slice(start, i));
      start = i + 1;
    }
  }
  terms.push(input.slice(start));
  return terms.map((t) => t.trim());
}

function parseSet(key: string, rest: string): string[] {
  const m = /^\((.*)\)$/.exec(rest.trim());
  if (!m) throw invalid(`found '${rest.trim()}', expected: '('`);
  const values = (m[1] ?? '')
    .split(',')
    .map((v) => v.trim())
    .filter((v, _i, all) => v !== '' || all.length === 1);
  for (const v of values) checkValue(key, v);
  return values;
}

/** Parses a label selector string such as `app=x,tier in (a,b),!legacy`. The empty string selects all. */
export function parseLabelSelector(input: string | undefined): Selector {
  if (input === undefined || input.trim() === '') return [];
  const requirements: Requirement[] = [];
  for (const term of splitTerms(input)) {
    if (term === '') throw invalid("found '', expected: !, identifier, or 'end of string'");
    let m = /^!\s*(\S+)$/.exec(term);
    if (m) {
      checkKey(m[1]!);
      requirements.push({ key: m[1]!, operator: '!', values: [] });
      continue;
    }
    m = /^(\S+?)\s+(in|notin)\s*(\(.*\))$/.exec(term);
    if (m) {
      checkKey(m[1]!);
      requirements.push({ key: m[1]!, operator: m[2] as Operator, values: parseSet(m[1]!, m[3]!) });
      continue;
    }
    m = /^([^=!<>\s]+)\s*(==|=|!=|<|>)\s*(.*)$/.exec(term);
    if (m) {
      const [, key, op, rawValue] = m as unknown as [string, string, string, string];
      const value = rawValue.trim();
      checkKey(key);
      if (op === '<' || op === '>') {
        if (!/^-?\d+$/.test(value)) throw invalid(`for 'Gt', 'Lt' operators, the value must be an integer`);
        requirements.push({ key, operator: op === '<' ? 'lt' : 'gt', values: [value] });
        continue;
      }
      checkValue(key, value);
      requirements.push({ key, operator: op === '!=' ? '!=' : '=', values: [value] });
      continue;
    }
    if (/^\S+$/.test(term)) {
      checkKey(term);
      requirements.push({ key: term, operator: 'exists', values: [] });
      continue;
    }
    throw invalid(`found '${term}', expected: in, notin, =, ==, !=, gt, lt`);
  }
  return requirements;
}

export function matchesRequirement(req: Requirement, labels: Record<string, string> | undefined): boolean {
  const has = labels !== undefined && Object.hasOwn(labels, req.key);
  const value = has ? labels[req.key] : undefined;
  switch (req.operator) {
    case 'exists':
      return has;
    case '!':
      return !has;
    case '=':
    case 'in':
      return has && req.values.includes(value as string);
    case '!=':
    case 'notin':
      return !has || !req.values.includes(value as string);
    case 'gt':
    case 'lt': {
      if (!has || !/^-?\d+$/.test(value as string)) return false;
      const n = Number(value);
      const bound = Number(req.values[0]);
      return req.operator === 'gt' ? n > bound : n < bound;
    }
  }
}

export function matchesSelector(selector: Selector, labels: Record<string, string> | undefined): boolean {
  for (const req of selector) if (!matchesRequirement(req, labels)) return false;
  return true;
}

/** metav1.LabelSelector as it appears in objects (webhook selectors, workload selectors). */
export interface LabelSelectorObject {
  matchLabels?: Record<string, string>;
  matchExpressions?: { key: string; operator: string; values?: string[] }[];
}

/**
 * Converts a metav1.LabelSelector into requirements (metav1.LabelSelectorAsSelector). An empty selector
 * matches everything; an unknown operator is an error, as in Kubernetes.
 */
export function labelSelectorFromObject(selector: LabelSelectorObject | undefined | null): Selector {
  if (!selector) return [];
  const requirements: Requirement[] = [];
  for (const [key, value] of Object.entries(selector.matchLabels ?? {})) {
    requirements.push({ key, operator: '=', values: [value] });
  }
  for (const expr of selector.matchExpressions ?? []) {
    const values = expr.values ?? [];
    switch (expr.operator) {
      case 'In':
        requirements.push({ key: expr.key, operator: 'in', values });
        break;
      case 'NotIn':
        requirements.push({ key: expr.key, operator: 'notin', values });
        break;
      case 'Exists':
        requirements.push({ key: expr.key, operator: 'exists', values: [] });
        break;
      case 'DoesNotExist':
        requirements.push({ key: expr.key, operator: '!', values: [] });
        break;
      default:
        throw new StatusError(400, 'BadRequest', `"${expr.operator}" is not a valid label selector operator`);
    }
  }
  return requirements;
}

export function matchesLabelSelectorObject(
  selector: LabelSelectorObject | undefined | null,
  labels: Record<string, string> | undefined,
): boolean {
  return matchesSelector(labelSelectorFromObject(selector), labels);
}

export interface FieldRequirement {
  field: string;
  value: string;
  negate: boolean;
}

/**
 * Parses a field selector (`a=b,c!=d`) and checks every field against the ones the resource supports;
 * an unsupported field is 400 like kube-apiserver's `field label not supported`.
 */
export function parseFieldSelector(
  input: string | undefined,
  supported: readonly string[],
): FieldRequirement[] {
  if (input === undefined || input.trim() === '') return [];
  const requirements: FieldRequirement[] = [];
  for (const term of input.split(',')) {
    const m = /^\s*([^=!\s]+)\s*(==|=|!=)\s*(.*?)\s*$/.exec(term);
    if (!m)
      throw new StatusError(400, 'BadRequest', `invalid selector: '${input}'; can't understand '${term}'`);
    const [, field, op, value] = m as unknown as [string, string, string, string];
    if (!supported.includes(field)) {
      throw new StatusError(400, 'BadRequest', `field label not supported: ${field}`);
    }
    requirements.push({ field, value, negate: op === '!=' });
  }
  return requirements;
}

/** Reads a dotted field path such as `spec.nodeName`; absent fields read as the empty string. */
export function fieldValue(obj: unknown, path: string): string {
  let cur: unknown = obj;
  for (const part of path.split('.')) {
    if (cur === null || typeof cur !== 'object') return '';
    cur = (cur as Record<string, unknown>)[part];
  }
  if (cur === undefined || cur === null) return '';
  return typeof cur === 'string' ? cur : String(cur);
}

export function matchesFields(requirements: FieldRequirement[], obj: unknown): boolean {
  for (const req of requirements) {
    const equal = fieldValue(obj, req.field) === req.value;
    if (equal === req.negate) return false;
  }
  return true;
}
