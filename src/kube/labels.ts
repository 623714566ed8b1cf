// Kubernetes label selectors, one set of requirements for both forms: the `labelSelector` query syntax
// (`k=v`, `k==v`, `k!=v`, `k`, `!k`, `k in (a,b)`, `k notin (a,b)`; the node taint guard's
// --agent-selector, parsed when the flags are validated, sent to the API server verbatim and re-checked
// in memory) and the structured `matchLabels`/`matchExpressions` of a V1LabelSelector (the webhook
// configurations' selectors, checked on the live objects). Matching follows apimachinery.
import type { V1LabelSelector } from '@kubernetes/client-node';
import { isLabelValue, isQualifiedName } from '../kube/names.ts';

export type Requirement =
  | { key: string; op: 'in' | 'notin'; values: readonly string[] }
  | { key: string; op: 'exists' | 'doesnotexist' };

export interface LabelSelector {
  /** The selector text, normalised (requirements joined by ","). */
  readonly text: string;
  readonly requirements: readonly Requirement[];
}

export class SelectorError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'SelectorError';
  }
}

/** Splits on commas outside parentheses. */
function splitRequirements(text: string): string[] {
  const parts: string[] = [];
  let depth = 0;
  let start = 0;
  for (let i = 0; i < text.length; i++) {
    const ch = text[i];
    if (ch === '(') depth++;
    else if (ch === ')') depth--;
    else if (ch === ',' && depth === 0) {
      parts.push(text.slice(start, i));
      start = i + 1;
    }
    if (depth < 0 || depth > 1) throw new SelectorError('unbalanced parentheses');
  }
  if (depth !== 0) throw new SelectorError('unbalanced parentheses');
  parts.push(text.slice(start));
  return parts.map((p) => p.trim());
}

const NOT_EXISTS = /^!\s*([^\s=!(),]+)$/;
const SET = /^([^\s=!(),]+)\s+(in|notin)\s*\(([^()]*)\)$/;
const EQUALITY = /^([^\s=!(),]+)\s*(==|=|!=)\s*([^\s=!(),]*)$/;
const EXISTS = /^([^\s=!(),]+)$/;

function checkKey(key: string): string {
  if (!isQualifiedName(key)) throw new SelectorError(`invalid label key "${key}"`);
  return key;
}

function checkValue(value: string): string {
  if (!isLabelValue(value)) throw new SelectorError(`invalid label value "${value}"`);
  return value;
}

function parseRequirement(part: string): Requirement {
  let m = NOT_EXISTS.exec(part);
  if (m) return { key: checkKey(m[1]!), op: 'doesnotexist' };
  m = SET.exec(part);
  if (m) {
    if (m[3]!.trim() === '') throw new SelectorError(`"${part}": a set needs at least one value`);
    const values = m[3]!.split(',').map((v) => checkValue(v.trim()));
    return { key: checkKey(m[1]!), op: m[2] as 'in' | 'notin', values };
  }
  m = EQUALITY.exec(part);
  if (m) return { key: checkKey(m[1]!), op: m[2] === '!=' ? 'notin' : 'in', values: [checkValue(m[3]!)] };
  m = EXISTS.exec(part);
  if (m) return { key: checkKey(m[1]!), op: 'exists' };
  throw new SelectorError(`cannot parse requirement "${part}"`);
}

function format(r: Requirement): string {
  switch (r.op) {
    case 'exists':
      return r.key;
    case 'doesnotexist':
      return `!${r.key}`;
    case 'in':
      return r.values.length === 1 ? `${r.key}=${r.values[0]}` : `${r.key} in (${r.values.join(',')})`;
    case 'notin':
      return r.values.length === 1 ? `${r.key}!=${r.values[0]}` : `${r.key} notin (${r.values.join(',')})`;
  }
}

/** Parses a label selector; the empty string selects everything. Throws SelectorError. */
export function parseLabelSelector(text: string): LabelSelector {
  const trimmed = text.trim();
  if (trimmed === '') return { text: '', requirements: [] };
  const requirements = splitRequirements(trimmed).map((part) => {
    if (part === '') throw new SelectorError('empty requirement');
    return parseRequirement(part);
  });
  return { text: requirements.map(format).join(','), requirements };
}

/** Whether `labels` satisfy every requirement (apimachinery semantics: `notin` matches absent keys). */
export function matchesLabels(
  selector: LabelSelector,
  labels: Readonly<Record<string, string>> | undefined,
): boolean {
  const has = (key: string): boolean => labels !== undefined && Object.hasOwn(labels, key);
  for (const r of selector.requirements) {
    switch (r.op) {
      case 'exists':
        if (!has(r.key)) return false;
        break;
      case 'doesnotexist':
        if (has(r.key)) return false;
        break;
      case 'in':
        if (!has(r.key) || !r.values.includes(labels![r.key]!)) return false;
        break;
      case 'notin':
        if (has(r.key) && r.values.includes(labels![r.key]!)) return false;
        break;
    }
  }
  return true;
}

const OPERATORS: Record<string, Requirement['op']> = {
  In: 'in',
  NotIn: 'notin',
  Exists: 'exists',
  DoesNotExist: 'doesnotexist',
};

/**
 * Whether `labels` satisfy a structured selector (matchLabels AND every matchExpression), as the API
 * server applies it; no selector selects everything, an operator this code does not know selects nothing.
 */
export function matchesLabelSelector(
  selector: V1LabelSelector | undefined,
  labels: Readonly<Record<string, string>>,
): boolean {
  if (selector === undefined) return true;
  const requirements: Requirement[] = Object.entries(selector.matchLabels ?? {}).map(([key, value]) => ({
    key,
    op: 'in',
    values: [value],
  }));
  for (const e of selector.matchExpressions ?? []) {
    const op = OPERATORS[e.operator];
    if (op === undefined) return false;
    requirements.push(
      op === 'in' || op === 'notin' ? { key: e.key, op, values: e.values ?? [] } : { key: e.key, op },
    );
  }
  return matchesLabels({ text: '', requirements }, labels);
}
