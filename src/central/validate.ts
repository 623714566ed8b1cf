// Request validation of the central lease API (docs/behaviour.md §3.4-§3.5), pure: decoding a
// body the way Go's json.Decoder with DisallowUnknownFields does (one value, case-insensitive field
// names, first error wins, null leaves a field unset), the per-operation field rules, and key rules.
import { isDnsLabel, isDnsSubdomain } from '../kube/names.ts';

export const MAX_BODY_BYTES = 4096;
export const MAX_HOLDER_BYTES = 253;

export type Operation = 'acquire' | 'renew' | 'release';

export interface LeaseRequest {
  holder: string;
  ttlSeconds: number;
  fencingToken: number;
}

type FieldKind = 'string' | 'int32';

interface BodyShape {
  goType: string;
  fields: Record<string, FieldKind>;
}

const SHAPES: Record<Operation, BodyShape> = {
  acquire: { goType: 'acquireRequest', fields: { holder: 'string', ttlSeconds: 'int32' } },
  renew: {
    goType: 'renewRequest',
    fields: { holder: 'string', fencingToken: 'int32', ttlSeconds: 'int32' },
  },
  release: { goType: 'releaseRequest', fields: { holder: 'string', fencingToken: 'int32' } },
};

export type Decoded<T> = { ok: true; value: T } | { ok: false; message: string };

const isJsonSpace = (c: string | undefined): boolean => c === ' ' || c === '\t' || c === '\n' || c === '\r';

/** End (exclusive) of the JSON value starting at `start`, or undefined when the input ends inside it. */
function valueEnd(text: string, start: number): number | undefined {
  const first = text[start];
  if (first === '{' || first === '[' || first === '"') {
    let depth = 0;
    let inString = false;
    for (let i = start; i < text.length; i++) {
      const c = text[i];
      if (inString) {
        if (c === '\\') i++;
        else if (c === '"') {
          inString = false;
          if (depth === 0) return i + 1;
        }
      } else if (c === '"') inString = true;
      else if (c === '{' || c === '[') depth++;
      else if (c === '}' || c === ']') {
        depth--;
        if (depth === 0) return i + 1;
      }
    }
    return undefined;
  }
  let i = start;
  while (i < text.length && !isJsonSpace(text[i]) && !'{}[],:"'.includes(text[i]!)) i++;
  return i === start ? start + 1 : i;
}

const goKind = (v: unknown): string =>
  Array.isArray(v)
    ? 'array'
    : typeof v === 'string'
      ? 'string'
      : typeof v === 'number'
        ? 'number'
        : typeof v === 'boolean'
          ? 'bool'
          : 'object';

function describe(v: unknown): string {
  return typeof v === 'number' ? `number ${String(v)}` : goKind(v);
}

/** Decodes one request body; messages are the 400 texts of §3.5 step 2. */
export function decodeBody(text: string, operation: Operation): Decoded<Partial<LeaseRequest>> {
  const shape = SHAPES[operation];
  let start = 0;
  while (isJsonSpace(text[start])) start++;
  if (start >= text.length) return { ok: false, message: 'invalid json body: EOF' };
  const end = valueEnd(text, start);
  if (end === undefined) return { ok: false, message: 'invalid json body: unexpected EOF' };
  let value: unknown;
  try {
    value = JSON.parse(text.slice(start, end));
  } catch (err) {
    return { ok: false, message: `invalid json body: ${(err as Error).message}` };
  }
  const out: Partial<Record<string, string | number>> = {};
  let firstError: string | undefined;
  if (value !== null && (typeof value !== 'object' || Array.isArray(value))) {
    firstError = `json: cannot unmarshal ${goKind(value)} into Go value of type api.${shape.goType}`;
  } else if (value !== null) {
    const names = Object.keys(shape.fields);
    for (const [raw, v] of Object.entries(value as Record<string, unknown>)) {
      const field = names.find((n) => n === raw) ?? names.find((n) => n.toLowerCase() === raw.toLowerCase());
      if (field === undefined) {
        firstError ??= `json: unknown field ${JSON.stringify(raw)}`;
        continue;
      }
      if (v === null) continue;
      const kind = shape.fields[field]!;
      const fits =
        kind === 'string'
          ? typeof v === 'string'
          : typeof v === 'number' && Number.isInteger(v) && v >= -2_147_483_648 && v <= 2_147_483_647;
      if (fits) out[field] = v as string | number;
      else
        firstError ??= `json: cannot unmarshal ${describe(v)} into Go struct field ${shape.goType}.${field} of type ${kind}`;
    }
  }
  if (firstError !== undefined) return { ok: false, message: `invalid json body: ${firstError}` };
  let rest = end;
  while (isJsonSpace(text[rest])) rest++;
  if (rest < text.length) return { ok: false, message: 'request body must contain one JSON object' };
  return { ok: true, value: out as Partial<LeaseRequest> };
}

/** §3.5 steps 3-4 on a decoded body: the holder, then ttlSeconds, then (renew) the token. */
export function validateRequest(operation: Operation, body: Partial<LeaseRequest>): Decoded<LeaseRequest> {
  const request: LeaseRequest = {
    holder: body.holder ?? '',
    ttlSeconds: body.ttlSeconds ?? 0,
    fencingToken: body.fencingToken ?? 0,
  };
  if (request.holder === '') return { ok: false, message: 'holder is required' };
  if (operation !== 'release') {
    if (Buffer.byteLength(request.holder, 'utf8') > MAX_HOLDER_BYTES)
      return { ok: false, message: `holder must be at most ${MAX_HOLDER_BYTES} bytes` };
    if (request.ttlSeconds <= 0) return { ok: false, message: 'ttlSeconds must be positive' };
  }
  if (operation === 'renew' && request.fencingToken === 0)
    return { ok: false, message: 'fencingToken must be non-zero' };
  return { ok: true, value: request };
}

export const MAX_KEY_LENGTH = 253;

/** §3.5 step 6: the namespace is a DNS label, the name a DNS subdomain, and both fit one object name. */
export function validateKey(namespace: string, name: string): string | undefined {
  if (!isDnsLabel(namespace))
    return `invalid namespace ${JSON.stringify(namespace)}: must be an RFC 1123 DNS label (at most 63 lower-case alphanumeric characters or '-', starting and ending with an alphanumeric character)`;
  if (!isDnsSubdomain(name))
    return `invalid name ${JSON.stringify(name)}: must be an RFC 1123 DNS subdomain (at most 253 lower-case alphanumeric characters, '-' or '.', starting and ending with an alphanumeric character)`;
  const joined = namespace.length + 1 + name.length;
  if (joined > MAX_KEY_LENGTH)
    return `invalid key ${namespace}/${name}: namespace and name joined with '.' must be at most ${MAX_KEY_LENGTH} characters, got ${joined}`;
  return undefined;
}
