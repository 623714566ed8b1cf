// Kubernetes' CEL environment for CRD `x-kubernetes-validations`, built on @marcbachmann/cel-js.
// Mirrors k8s.io/apiextensions-apiserver/pkg/apiserver/schema/cel: every schema node gets a CEL type
// (objects become typed messages so unknown fields fail to compile, maps `map<string, T>`, lists
// `list<T>`, int-or-string `dyn`, date-time/duration/byte strings timestamps/durations/bytes), and the
// Kubernetes function libraries the library lacks are registered here.
import { type ASTNode, Environment, Optional, type ParseResult, serialize } from '@marcbachmann/cel-js';
import type { Structural } from './schema.ts';
import type { JsonObject, JsonValue } from './types.ts';

/** One entry of `x-kubernetes-validations`. */
export interface ValidationRule {
  rule: string;
  message?: string;
  messageExpression?: string;
  reason?: string;
  fieldPath?: string;
  optionalOldSelf?: boolean;
}

/** A rule compiled against its node's CEL type. */
export interface CompiledRule {
  readonly source: ValidationRule;
  /** Transition rules are only evaluated when an old value exists (or optionalOldSelf is set). */
  readonly usesOldSelf: boolean;
  /** The rule's fieldPath as kube renders it (`foo[bar].baz`), '' when absent. */
  readonly fieldPath: string;
  readonly program: ParseResult;
  readonly messageProgram: ParseResult | undefined;
}

/** The CEL view of one schema node: how to convert its JSON value, and the rules declared on it. */
export interface CelNode {
  readonly toCel: (value: JsonValue) => unknown;
  readonly rules: readonly CompiledRule[];
}

/** A rule that does not compile, reported against the CRD field kube-apiserver names. */
export interface RuleCompileError {
  /** CRD path of the offending field, e.g. `...properties[spec].x-kubernetes-validations[0].rule`. */
  readonly path: string;
  readonly rule: ValidationRule;
  readonly detail: string;
  /** What kube prints as the bad value: the whole rule struct, the rule text, or the field itself. */
  readonly value: 'rule' | 'ruleText' | 'fieldPath' | 'optionalOldSelf' | 'none';
  readonly reason: 'FieldValueInvalid' | 'FieldValueRequired';
}

export type RuleOutcome =
  | { readonly ok: true }
  | { readonly ok: false; readonly kind: 'false'; readonly message: string | undefined }
  | { readonly ok: false; readonly kind: 'error'; readonly detail: string };

// ---------------------------------------------------------------------------------------------------
// Property-name escaping (k8s.io/apiserver/pkg/cel.Escape): CEL identifiers cannot hold '-', '.', '/',
// and keywords must be wrapped, so `x-y` is reachable as `self.x__dash__y`.

const CEL_RESERVED = new Set([
  'true',
  'false',
  'null',
  'in',
  'as',
  'break',
  'const',
  'continue',
  'else',
  'for',
  'function',
  'if',
  'import',
  'let',
  'loop',
  'package',
  'namespace',
  'return',
  'var',
  'void',
  'while',
]);

export function escapeName(name: string): string | undefined {
  if (name === '' || /^[0-9]/.test(name)) return undefined;
  if (CEL_RESERVED.has(name)) return `__${name}__`;
  let ok = true;
  const escaped = name.replace(/__|[-./]|[^a-zA-Z0-9\-./_]/g, (s) => {
    switch (s) {
      case '__':
        return '__underscores__';
      case '.':
        return '__dot__';
      case '-':
        return '__dash__';
      case '/':
        return '__slash__';
      default:
        ok = false;
        return '';
    }
  });
  return ok ? escaped : undefined;
}

// ---------------------------------------------------------------------------------------------------
// Kubernetes CEL libraries missing from @marcbachmann/cel-js. Registered once on a shared base
// environment that every CRD's environment is cloned from.

class UrlValue {
  readonly scheme: string;
  readonly host: string;
  readonly hostname: string;
  readonly port: string;
  readonly escapedPath: string;
  readonly query: Map<string, string[]>;
  constructor(raw: string) {
    const parsed = parseRequestUri(raw);
    this.scheme = parsed.scheme;
    this.host = parsed.host;
    [this.hostname, this.port] = splitHostPort(parsed.host);
    this.escapedPath = parsed.path;
    this.query = parseQuery(parsed.query);
  }
}

/** Go's URL.Hostname()/Port(): brackets stripped from IPv6 literals, the port only when numeric. */
function splitHostPort(host: string): [string, string] {
  const close = host.startsWith('[') ? host.indexOf(']') : -1;
  const colon = host.lastIndexOf(':');
  const hostname = close >= 0 ? host.slice(1, close) : colon >= 0 ? host.slice(0, colon) : host;
  const port = colon > close ? host.slice(colon + 1) : '';
  return [hostname, /^\d*$/.test(port) ? port : ''];
}

/** Go's url.ParseQuery, dropping malformed pairs as URL.Query() does. */
function parseQuery(query: string): Map<string, string[]> {
  const out = new Map<string, string[]>();
  for (const part of query.split('&')) {
    if (part === '') continue;
    const [k, v] = splitOnce(part, '=');
    try {
      const key = decodeURIComponent(k.replace(/\+/g, ' '));
      const list = out.get(key) ?? [];
      list.push(decodeURIComponent(v.replace(/\+/g, ' ')));
      out.set(key, list);
    } catch {
      // malformed escape: skipped
    }
  }
  return out;
}

/** Go's url.ParseRequestURI, reduced: an absolute URI or an absolute path, no fragment. */
function parseRequestUri(raw: string): { scheme: string; host: string; path: string; query: string } {
  const fail = (): never => {
    throw new Error(`URL parse error during conversion from string: parse "${raw}": invalid URI for request`);
  };
  if (raw === '' || /[\s]/.test(raw) || raw.includes('#')) fail();
  const [beforeQuery = '', query = ''] = splitOnce(raw, '?');
  if (beforeQuery.startsWith('/')) return { scheme: '', host: '', path: beforeQuery, query };
  const m = /^([a-zA-Z][a-zA-Z0-9+.-]*):(.*)$/.exec(beforeQuery);
  if (!m) return fail();
  const rest = m[2] ?? '';
  if (!rest.startsWith('//')) return { scheme: m[1] ?? '', host: '', path: rest, query };
  const authorityEnd = rest.indexOf('/', 2);
  const authority = authorityEnd < 0 ? rest.slice(2) : rest.slice(2, authorityEnd);
  const host = authority.includes('@') ? authority.slice(authority.lastIndexOf('@') + 1) : authority;
  return { scheme: m[1] ?? '', host, path: authorityEnd < 0 ? '' : rest.slice(authorityEnd), query };
}

function splitOnce(s: string, sep: string): [string, string] {
  const i = s.indexOf(sep);
  return i < 0 ? [s, ''] : [s.slice(0, i), s.slice(i + 1)];
}

/** A resource.Quantity held as an exact rational, so add/sub/compare never round. */
class QuantityValue {
  readonly num: bigint;
  readonly den: bigint;
  constructor(num: bigint, den: bigint) {
    const g = gcd(num < 0n ? -num : num, den);
    this.num = g > 1n ? num / g : num;
    this.den = g > 1n ? den / g : den;
  }
}

function gcd(a: bigint, b: bigint): bigint {
  let x = a;
  let y = b;
  while (y !== 0n) [x, y] = [y, x % y];
  return x === 0n ? 1n : x;
}

const QUANTITY_RE = /^([+-]?)(\d+\.?\d*|\.\d+)(Ki|Mi|Gi|Ti|Pi|Ei|n|u|m|k|M|G|T|P|E|[eE][+-]?\d+)?$/;
const BINARY_SUFFIX: Record<string, bigint> = {
  Ki: 2n ** 10n,
  Mi: 2n ** 20n,
  Gi: 2n ** 30n,
  Ti: 2n ** 40n,
  Pi: 2n ** 50n,
  Ei: 2n ** 60n,
};
const DECIMAL_SUFFIX: Record<string, number> = { n: -9, u: -6, m: -3, k: 3, M: 6, G: 9, T: 12, P: 15, E: 18 };

export function parseQuantity(raw: string): QuantityValue {
  const m = QUANTITY_RE.exec(raw);
  if (!m)
    throw new Error(
      "quantities must match the regular expression '^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$'",
    );
  const [, sign = '', digits = '', suffix = ''] = m;
  const [intPart = '', fracPart = ''] = digits.split('.');
  let num = BigInt(`${intPart || '0'}${fracPart}`) * (sign === '-' ? -1n : 1n);
  let den = 10n ** BigInt(fracPart.length);
  const binary = BINARY_SUFFIX[suffix];
  let exp = DECIMAL_SUFFIX[suffix] ?? 0;
  if (/^[eE]/.test(suffix)) exp = Number(suffix.slice(1));
  if (binary !== undefined) num *= binary;
  if (exp > 0) num *= 10n ** BigInt(exp);
  if (exp < 0) den *= 10n ** BigInt(-exp);
  return new QuantityValue(num, den);
}

const compareQuantity = (a: QuantityValue, b: QuantityValue): number => {
  const l = a.num * b.den;
  const r = b.num * a.den;
  return l < r ? -1 : l > r ? 1 : 0;
};
const INT64_MAX = 2n ** 63n - 1n;
const INT64_MIN = -(2n ** 63n);
const quantityIsInteger = (q: QuantityValue): boolean =>
  q.den === 1n && q.num <= INT64_MAX && q.num >= INT64_MIN;
const asQuantity = (v: QuantityValue | bigint): QuantityValue =>
  typeof v === 'bigint' ? new QuantityValue(v, 1n) : v;

/** IP addresses as bytes (k8s.io/apiserver/pkg/cel/library/ip.go and cidr.go). */
class IpValue {
  readonly bytes: readonly number[];
  constructor(bytes: readonly number[]) {
    this.bytes = bytes;
  }
  get family(): 4 | 6 {
    return this.bytes.length === 4 ? 4 : 6;
  }
  toString(): string {
    return formatIp(this.bytes);
  }
}

class CidrValue {
  readonly ip: IpValue;
  readonly prefix: number;
  constructor(ip: IpValue, prefix: number) {
    this.ip = ip;
    this.prefix = prefix;
  }
  toString(): string {
    return `${this.ip.toString()}/${this.prefix}`;
  }
}

function parseIpBytes(raw: string): number[] | undefined {
  if (/^\d+\.\d+\.\d+\.\d+$/.test(raw)) {
    const parts = raw.split('.').map((p) => (/^(0|[1-9]\d{0,2})$/.test(p) ? Number(p) : 256));
    return parts.every((p) => p <= 255) ? parts : undefined;
  }
  if (!raw.includes(':') || raw.includes('%')) return undefined;
  let text = raw;
  let tail: number[] = [];
  const v4 = /:(\d+\.\d+\.\d+\.\d+)$/.exec(text);
  if (v4?.[1]) {
    const b = parseIpBytes(v4[1]);
    if (!b) return undefined;
    tail = b;
    text = `${text.slice(0, v4.index)}:0:0`;
  }
  const halves = text.split('::');
  if (halves.length > 2) return undefined;
  const groups = (s: string): number[] | undefined =>
    s === '' ? [] : s.split(':').map((g) => (/^[0-9a-fA-F]{1,4}$/.test(g) ? Number.parseInt(g, 16) : -1));
  const head = groups(halves[0] ?? '');
  const rest = halves.length === 2 ? groups(halves[1] ?? '') : [];
  if (!head || !rest || head.includes(-1) || rest.includes(-1)) return undefined;
  const missing = 8 - head.length - rest.length;
  if ((halves.length === 1 && missing !== 0) || (halves.length === 2 && missing < 1)) return undefined;
  const all = [...head, ...new Array<number>(halves.length === 2 ? missing : 0).fill(0), ...rest];
  const bytes = all.flatMap((g) => [g >> 8, g & 0xff]);
  if (tail.length) bytes.splice(12, 4, ...tail);
  return bytes;
}

function formatIp(bytes: readonly number[]): string {
  if (bytes.length === 4) return bytes.join('.');
  const groups: number[] = [];
  for (let i = 0; i < 16; i += 2) groups.push(((bytes[i] ?? 0) << 8) | (bytes[i + 1] ?? 0));
  // RFC 5952: compress the longest run (≥2) of zero groups.
  let best = -1;
  let bestLen = 1;
  for (let i = 0; i < 8; ) {
    let j = i;
    while (j < 8 && groups[j] === 0) j++;
    if (j - i > bestLen) [best, bestLen] = [i, j - i];
    i = j > i ? j : i + 1;
  }
  const hex = groups.map((g) => g.toString(16));
  if (best < 0) return hex.join(':');
  return `${hex.slice(0, best).join(':')}::${hex.slice(best + bestLen).join(':')}`;
}

function parseIp(raw: string): IpValue {
  const bytes = parseIpBytes(raw);
  if (!bytes)
    throw new Error(
      `IP Address "${raw}" parse error during conversion from string: ParseAddr("${raw}"): unable to parse IP`,
    );
  if (
    bytes.length === 16 &&
    bytes.slice(0, 10).every((b) => b === 0) &&
    bytes[10] === 0xff &&
    bytes[11] === 0xff
  ) {
    throw new Error('IPv4-mapped IPv6 address is not allowed');
  }
  return new IpValue(bytes);
}

function parseCidr(raw: string): CidrValue {
  const [addr = '', prefix = ''] = splitOnce(raw, '/');
  const bytes = parseIpBytes(addr);
  const bits = /^(0|[1-9]\d*)$/.test(prefix) ? Number(prefix) : -1;
  if (!bytes || bits < 0 || bits > bytes.length * 8) {
    throw new Error(
      `network address parse error during conversion from string: netip.ParsePrefix("${raw}"): bad prefix`,
    );
  }
  return new CidrValue(new IpValue(bytes), bits);
}

function maskIp(ip: IpValue, prefix: number): IpValue {
  return new IpValue(
    ip.bytes.map((b, i) => b & (0xff << (8 - Math.min(8, Math.max(0, prefix - i * 8)))) & 0xff),
  );
}

const cidrContains = (c: CidrValue, ip: IpValue): boolean =>
  c.ip.family === ip.family &&
  formatIp(maskIp(c.ip, c.prefix).bytes) === formatIp(maskIp(ip, c.prefix).bytes);

class SetsNamespace {}
class StringsNamespace {}

function compareValues(a: unknown, b: unknown): number {
  if (a instanceof Date && b instanceof Date) return a.getTime() - b.getTime();
  if (typeof a === 'bigint' && typeof b === 'bigint') return a < b ? -1 : a > b ? 1 : 0;
  if (typeof a === 'number' && typeof b === 'number') return a - b;
  return String(a) < String(b) ? -1 : String(a) > String(b) ? 1 : 0;
}

const POSIX_CLASSES: Record<string, string> = {
  alnum: '0-9A-Za-z',
  alpha: 'A-Za-z',
  ascii: '\\x00-\\x7F',
  blank: '\\t ',
  cntrl: '\\x00-\\x1F\\x7F',
  digit: '0-9',
  graph: '!-~',
  lower: 'a-z',
  print: ' -~',
  punct: '!-\\/:-@[-`{-~',
  space: '\\t\\n\\v\\f\\r ',
  upper: 'A-Z',
  word: '0-9A-Za-z_',
  xdigit: '0-9A-Fa-f',
};

/** Translates the RE2 syntax JS lacks: leading inline flags, (?P<name>, \A, \z and [[:class:]]. */
function goRegExp(pattern: string): RegExp {
  const m = /^\(\?([imsU]+)\)/.exec(pattern);
  const flags = (m?.[1] ?? '').replace(/[^ims]/g, '');
  const body = (m ? pattern.slice(m[0].length) : pattern)
    .replace(/\(\?P</g, '(?<')
    .replace(/\\z/g, '$')
    .replace(/\\A/g, '^')
    .replace(/\[:(\^?)([a-z]+):\]/g, (all, neg: string, name: string) => {
      // Negated classes ([:^alpha:]) have no in-bracket JS equivalent; they are left as written.
      const cls = POSIX_CLASSES[name];
      return cls && !neg ? cls : all;
    });
  try {
    return new RegExp(body, `${flags}u`);
  } catch {
    return new RegExp(body, flags);
  }
}

/** Compiles a Go (RE2) pattern for use in JS; throws when the pattern is invalid in both dialects. */
export const compileGoRegExp = goRegExp;

function registerKubernetesLibraries(env: Environment): void {
  const fn = (sig: string, handler: (...args: never[]) => unknown): void => {
    env.registerFunction(sig, handler as (...args: unknown[]) => unknown);
  };

  // ext.Strings (v2) functions beyond the CEL core.
  fn('string.charAt(int): string', (s: string, i: bigint) => {
    const chars = [...s];
    if (i < 0n || i > BigInt(chars.length)) throw new Error(`index out of range: ${i}`);
    return chars[Number(i)] ?? '';
  });
  fn('string.replace(string, string): string', (s: string, a: string, b: string) => s.split(a).join(b));
  fn('string.replace(string, string, int): string', (s: string, a: string, b: string, n: bigint) => {
    if (n < 0n) return s.split(a).join(b);
    const parts = s.split(a);
    const count = Number(n);
    return parts.length - 1 <= count
      ? parts.join(b)
      : parts.slice(0, count + 1).join(b) + a + parts.slice(count + 1).join(a);
  });
  env
    .registerType('StringsNamespace', StringsNamespace)
    .registerConstant('strings', 'StringsNamespace', new StringsNamespace());
  fn('StringsNamespace.quote(string): string', (_: StringsNamespace, s: string) => JSON.stringify(s));

  // ext.Sets
  env
    .registerType('SetsNamespace', SetsNamespace)
    .registerConstant('sets', 'SetsNamespace', new SetsNamespace());
  const includes = (list: unknown[], v: unknown): boolean => list.some((x) => celEquals(x, v));
  fn('SetsNamespace.contains(list<A>, list<A>): bool', (_: SetsNamespace, a: unknown[], b: unknown[]) =>
    b.every((x) => includes(a, x)),
  );
  fn(
    'SetsNamespace.equivalent(list<A>, list<A>): bool',
    (_: SetsNamespace, a: unknown[], b: unknown[]) =>
      b.every((x) => includes(a, x)) && a.every((x) => includes(b, x)),
  );
  fn('SetsNamespace.intersects(list<A>, list<A>): bool', (_: SetsNamespace, a: unknown[], b: unknown[]) =>
    b.some((x) => includes(a, x)),
  );

  // Kubernetes list library.
  for (const t of ['int', 'double', 'string']) {
    fn(`list<${t}>.isSorted(): bool`, (l: unknown[]) =>
      l.every((v, i) => i === 0 || compareValues(l[i - 1], v) <= 0),
    );
    fn(`list<${t}>.min(): ${t}`, (l: unknown[]) => {
      if (l.length === 0) throw new Error('min called on empty list');
      return l.reduce((a, b) => (compareValues(b, a) < 0 ? b : a));
    });
    fn(`list<${t}>.max(): ${t}`, (l: unknown[]) => {
      if (l.length === 0) throw new Error('max called on empty list');
      return l.reduce((a, b) => (compareValues(b, a) > 0 ? b : a));
    });
  }
  fn('list<int>.sum(): int', (l: bigint[]) => l.reduce((a, b) => a + b, 0n));
  fn('list<double>.sum(): double', (l: number[]) => l.reduce((a, b) => a + b, 0));
  fn('list<A>.indexOf(A): int', (l: unknown[], v: unknown) => BigInt(l.findIndex((x) => celEquals(x, v))));
  fn('list<A>.lastIndexOf(A): int', (l: unknown[], v: unknown) =>
    BigInt(l.findLastIndex((x) => celEquals(x, v))),
  );

  // Kubernetes regex library.
  fn('string.find(string): string', (s: string, re: string) => goRegExp(re).exec(s)?.[0] ?? '');
  fn('string.findAll(string): list<string>', (s: string, re: string) =>
    [...s.matchAll(new RegExp(goRegExp(re).source, `${goRegExp(re).flags}g`))].map((m) => m[0]),
  );
  fn('string.findAll(string, int): list<string>', (s: string, re: string, n: bigint) => {
    const all = [...s.matchAll(new RegExp(goRegExp(re).source, `${goRegExp(re).flags}g`))].map((m) => m[0]);
    return n < 0n ? all : all.slice(0, Number(n));
  });

  // Kubernetes URL library.
  env.registerType('kubernetes.URL', UrlValue);
  fn('url(string): kubernetes.URL', (s: string) => new UrlValue(s));
  fn('isURL(string): bool', (s: string) => {
    try {
      new UrlValue(s);
      return true;
    } catch {
      return false;
    }
  });
  fn('kubernetes.URL.getScheme(): string', (u: UrlValue) => u.scheme);
  fn('kubernetes.URL.getHost(): string', (u: UrlValue) => u.host);
  fn('kubernetes.URL.getHostname(): string', (u: UrlValue) => u.hostname);
  fn('kubernetes.URL.getPort(): string', (u: UrlValue) => u.port);
  fn('kubernetes.URL.getEscapedPath(): string', (u: UrlValue) => u.escapedPath);
  fn('kubernetes.URL.getQuery(): map<string, list<string>>', (u: UrlValue) => u.query);

  // Kubernetes quantity library.
  env.registerType('kubernetes.Quantity', QuantityValue);
  env.registerOperator(
    'kubernetes.Quantity == kubernetes.Quantity',
    (a: QuantityValue, b: QuantityValue) => compareQuantity(a, b) === 0,
  );
  fn('quantity(string): kubernetes.Quantity', (s: string) => parseQuantity(s));
  fn('isQuantity(string): bool', (s: string) => QUANTITY_RE.test(s));
  fn('kubernetes.Quantity.sign(): int', (q: QuantityValue) => (q.num > 0n ? 1n : q.num < 0n ? -1n : 0n));
  fn('kubernetes.Quantity.isInteger(): bool', (q: QuantityValue) => quantityIsInteger(q));
  fn('kubernetes.Quantity.asInteger(): int', (q: QuantityValue) => {
    if (!quantityIsInteger(q)) throw new Error('cannot convert value to integer');
    return q.num;
  });
  fn('kubernetes.Quantity.asApproximateFloat(): double', (q: QuantityValue) => Number(q.num) / Number(q.den));
  fn(
    'kubernetes.Quantity.isGreaterThan(kubernetes.Quantity): bool',
    (a: QuantityValue, b: QuantityValue) => compareQuantity(a, b) > 0,
  );
  fn(
    'kubernetes.Quantity.isLessThan(kubernetes.Quantity): bool',
    (a: QuantityValue, b: QuantityValue) => compareQuantity(a, b) < 0,
  );
  fn('kubernetes.Quantity.compareTo(kubernetes.Quantity): int', (a: QuantityValue, b: QuantityValue) =>
    BigInt(compareQuantity(a, b)),
  );
  for (const arg of ['kubernetes.Quantity', 'int']) {
    fn(
      `kubernetes.Quantity.add(${arg}): kubernetes.Quantity`,
      (a: QuantityValue, b: QuantityValue | bigint) => {
        const q = asQuantity(b);
        return new QuantityValue(a.num * q.den + q.num * a.den, a.den * q.den);
      },
    );
    fn(
      `kubernetes.Quantity.sub(${arg}): kubernetes.Quantity`,
      (a: QuantityValue, b: QuantityValue | bigint) => {
        const q = asQuantity(b);
        return new QuantityValue(a.num * q.den - q.num * a.den, a.den * q.den);
      },
    );
  }

  // Kubernetes IP and CIDR libraries.
  env.registerType('net.IP', IpValue).registerType('net.CIDR', CidrValue);
  env.registerOperator(
    'net.IP == net.IP',
    (a: IpValue, b: IpValue) => formatIp(a.bytes) === formatIp(b.bytes),
  );
  env.registerOperator('net.CIDR == net.CIDR', (a: CidrValue, b: CidrValue) => a.toString() === b.toString());
  fn('ip(string): net.IP', (s: string) => parseIp(s));
  fn('isIP(string): bool', (s: string) => {
    try {
      parseIp(s);
      return true;
    } catch {
      return false;
    }
  });
  fn('net.IP.family(): int', (ip: IpValue) => BigInt(ip.family));
  fn('net.IP.isUnspecified(): bool', (ip: IpValue) => ip.bytes.every((b) => b === 0));
  fn('net.IP.isLoopback(): bool', (ip: IpValue) =>
    ip.family === 4 ? ip.bytes[0] === 127 : ip.bytes.slice(0, 15).every((b) => b === 0) && ip.bytes[15] === 1,
  );
  fn('net.IP.isLinkLocalMulticast(): bool', (ip: IpValue) =>
    ip.family === 4
      ? ip.bytes[0] === 224 && ip.bytes[1] === 0 && ip.bytes[2] === 0
      : ip.bytes[0] === 0xff && ((ip.bytes[1] ?? 0) & 0x0f) === 2,
  );
  fn('net.IP.isLinkLocalUnicast(): bool', (ip: IpValue) =>
    ip.family === 4
      ? ip.bytes[0] === 169 && ip.bytes[1] === 254
      : ip.bytes[0] === 0xfe && ((ip.bytes[1] ?? 0) & 0xc0) === 0x80,
  );
  fn('net.IP.isGlobalUnicast(): bool', (ip: IpValue) => {
    const b = ip.bytes;
    if (b.every((x) => x === 0)) return false;
    if (ip.family === 4)
      return !(
        b[0] === 127 ||
        b[0] === 0 ||
        (b[0] ?? 0) >= 224 ||
        (b[0] === 169 && b[1] === 254) ||
        b.every((x) => x === 255)
      );
    return !(
      b[0] === 0xff ||
      (b[0] === 0xfe && ((b[1] ?? 0) & 0xc0) === 0x80) ||
      (b.slice(0, 15).every((x) => x === 0) && b[15] === 1)
    );
  });
  fn('string(net.IP): string', (ip: IpValue) => ip.toString());
  fn('cidr(string): net.CIDR', (s: string) => parseCidr(s));
  fn('isCIDR(string): bool', (s: string) => {
    try {
      parseCidr(s);
      return true;
    } catch {
      return false;
    }
  });
  fn('net.CIDR.containsIP(net.IP): bool', (c: CidrValue, ip: IpValue) => cidrContains(c, ip));
  fn('net.CIDR.containsIP(string): bool', (c: CidrValue, ip: string) => cidrContains(c, parseIp(ip)));
  fn(
    'net.CIDR.containsCIDR(net.CIDR): bool',
    (c: CidrValue, o: CidrValue) => o.prefix >= c.prefix && cidrContains(c, o.ip),
  );
  fn('net.CIDR.containsCIDR(string): bool', (c: CidrValue, s: string) => {
    const o = parseCidr(s);
    return o.prefix >= c.prefix && cidrContains(c, o.ip);
  });
  fn('net.CIDR.ip(): net.IP', (c: CidrValue) => c.ip);
  fn('net.CIDR.masked(): net.CIDR', (c: CidrValue) => new CidrValue(maskIp(c.ip, c.prefix), c.prefix));
  fn('net.CIDR.prefixLength(): int', (c: CidrValue) => BigInt(c.prefix));
  fn('string(net.CIDR): string', (c: CidrValue) => c.toString());
}

const baseEnv = (() => {
  const env = new Environment({ enableOptionalTypes: true, homogeneousAggregateLiterals: false });
  registerKubernetesLibraries(env);
  return env;
})();

// The library keeps its Duration class private, so format: duration strings go through duration().
const durationOf = new Environment({ unlistedVariablesAreDyn: true }).parse('duration(s)');
const parseDurationValue = (s: string): unknown => durationOf({ s });

// ---------------------------------------------------------------------------------------------------
// Structural deep equality of CEL values, used for `==` on object types and sets.

export function celEquals(a: unknown, b: unknown): boolean {
  if (a === b) return true;
  if ((typeof a === 'bigint' || typeof a === 'number') && (typeof b === 'bigint' || typeof b === 'number')) {
    // biome-ignore lint/suspicious/noDoubleEquals: CEL compares int and double by value.
    return a == b;
  }
  if (a instanceof Date && b instanceof Date) return a.getTime() === b.getTime();
  if (a instanceof Uint8Array && b instanceof Uint8Array)
    return a.length === b.length && a.every((x, i) => x === b[i]);
  if (Array.isArray(a) && Array.isArray(b))
    return a.length === b.length && a.every((x, i) => celEquals(x, b[i]));
  if (a instanceof Map && b instanceof Map) {
    if (a.constructor !== b.constructor || a.size !== b.size) return false;
    for (const [k, v] of a) if (!b.has(k) || !celEquals(v, b.get(k))) return false;
    return true;
  }
  if (a instanceof QuantityValue && b instanceof QuantityValue) return compareQuantity(a, b) === 0;
  // Durations, IPs and CIDRs print canonically, so equal values print equal.
  if (
    a !== null &&
    b !== null &&
    typeof a === 'object' &&
    typeof b === 'object' &&
    a.constructor === b.constructor
  ) {
    return a.toString !== Object.prototype.toString && String(a) === String(b);
  }
  return false;
}

// ---------------------------------------------------------------------------------------------------
// Schema -> CEL declarations (model.SchemaDeclType).

type Decl =
  | {
      readonly kind: 'object';
      readonly celType: string;
      readonly ctor: new (entries: [string, unknown][]) => Map<string, unknown>;
      readonly fields: ReadonlyMap<string, { readonly celName: string; readonly decl: Decl }>;
    }
  | { readonly kind: 'map'; readonly celType: string; readonly value: Decl }
  | { readonly kind: 'list'; readonly celType: string; readonly item: Decl }
  | { readonly kind: 'scalar'; readonly celType: string; readonly format: string };

interface DeclContext {
  readonly env: Environment;
  readonly names: Set<string>;
  readonly fields: Map<string, ReadonlySet<string>>;
}

function uniqueTypeName(ctx: DeclContext, wanted: string): string {
  let name = wanted;
  for (let i = 1; ctx.names.has(name); i++) name = `${wanted}${i}`;
  ctx.names.add(name);
  return name;
}

function declFor(
  ctx: DeclContext,
  node: Structural,
  typeName: string,
  isResourceRoot: boolean,
): Decl | undefined {
  if (node.intOrString) return { kind: 'scalar', celType: 'dyn', format: 'int-or-string' };
  switch (node.type) {
    case 'array': {
      if (!node.items) return undefined;
      const item = declFor(ctx, node.items, `${typeName}._items`, node.items.embeddedResource);
      return item && { kind: 'list', celType: `list<${item.celType}>`, item };
    }
    case 'object': {
      const ap = node.additionalProperties;
      if (typeof ap === 'object') {
        const value = declFor(ctx, ap, `${typeName}._elem`, ap.embeddedResource);
        return value && { kind: 'map', celType: `map<string, ${value.celType}>`, value };
      }
      return objectDecl(ctx, node, typeName, isResourceRoot);
    }
    case 'string':
      switch (node.format) {
        case 'byte':
          return { kind: 'scalar', celType: 'bytes', format: 'byte' };
        case 'duration':
          return { kind: 'scalar', celType: 'google.protobuf.Duration', format: 'duration' };
        case 'date':
        case 'date-time':
          return { kind: 'scalar', celType: 'google.protobuf.Timestamp', format: node.format };
        default:
          return { kind: 'scalar', celType: 'string', format: '' };
      }
    case 'boolean':
      return { kind: 'scalar', celType: 'bool', format: '' };
    case 'number':
      return { kind: 'scalar', celType: 'double', format: '' };
    case 'integer':
      return { kind: 'scalar', celType: 'int', format: '' };
    default:
      return undefined;
  }
}

/** Resource roots (the CR and embedded resources) always expose apiVersion, kind and metadata.name/generateName. */
function withTypeAndObjectMeta(node: Structural): ReadonlyMap<string, Structural> {
  const props = new Map(node.properties ?? []);
  const str = (path: string): Structural => syntheticNode(path, 'string');
  const meta = props.get('metadata');
  const typed =
    props.get('kind')?.type === 'string' &&
    props.get('apiVersion')?.type === 'string' &&
    meta?.type === 'object' &&
    meta.properties?.get('name')?.type === 'string' &&
    meta.properties.get('generateName')?.type === 'string';
  if (typed) return props;
  props.set('kind', str(`${node.path}.properties[kind]`));
  props.set('apiVersion', str(`${node.path}.properties[apiVersion]`));
  props.set('metadata', {
    ...syntheticNode(`${node.path}.properties[metadata]`, 'object'),
    properties: new Map([
      ['name', str(`${node.path}.properties[metadata].properties[name]`)],
      ['generateName', str(`${node.path}.properties[metadata].properties[generateName]`)],
    ]),
  });
  return props;
}

function syntheticNode(path: string, type: string): Structural {
  return {
    path,
    type,
    format: '',
    knownFormat: '',
    nullable: false,
    intOrString: false,
    preserveUnknownFields: false,
    embeddedResource: false,
    properties: undefined,
    additionalProperties: undefined,
    items: undefined,
    required: [],
    enum: undefined,
    default: undefined,
    maximum: undefined,
    exclusiveMaximum: false,
    minimum: undefined,
    exclusiveMinimum: false,
    multipleOf: undefined,
    maxLength: undefined,
    minLength: undefined,
    pattern: undefined,
    maxItems: undefined,
    minItems: undefined,
    uniqueItems: false,
    maxProperties: undefined,
    minProperties: undefined,
    listType: undefined,
    listMapKeys: [],
    mapType: undefined,
    allOf: [],
    anyOf: [],
    oneOf: [],
    not: undefined,
    rules: [],
  };
}

function objectDecl(ctx: DeclContext, node: Structural, typeName: string, isResourceRoot: boolean): Decl {
  const props = isResourceRoot
    ? withTypeAndObjectMeta(node)
    : (node.properties ?? new Map<string, Structural>());
  const name = uniqueTypeName(ctx, typeName);
  const fields = new Map<string, { celName: string; decl: Decl }>();
  const celFields: Record<string, string> = {};
  for (const [prop, child] of props) {
    const celName = escapeName(prop);
    if (celName === undefined) continue;
    const decl = declFor(ctx, child, `${name}.${celName}`, child.embeddedResource);
    if (!decl) continue;
    fields.set(prop, { celName, decl });
    celFields[celName] = decl.celType;
  }
  // A distinct class per type: the library finds a value's CEL type by its constructor.
  const ctor = { [name]: class extends Map<string, unknown> {} }[name] as new (
    entries: [string, unknown][],
  ) => Map<string, unknown>;
  ctx.env.registerType(name, { ctor, fields: celFields });
  ctx.fields.set(name, new Set(Object.keys(celFields)));
  ctx.env.registerOperator(`${name} == ${name}`, (a: unknown, b: unknown) => celEquals(a, b));
  return { kind: 'object', celType: name, ctor, fields };
}

// ---------------------------------------------------------------------------------------------------
// JSON -> CEL values (UnstructuredToVal).

function toCel(decl: Decl, value: JsonValue): unknown {
  if (value === null) return null;
  switch (decl.kind) {
    case 'object': {
      if (typeof value !== 'object' || Array.isArray(value)) return value;
      const entries: [string, unknown][] = [];
      for (const [prop, field] of decl.fields) {
        const v = (value as JsonObject)[prop];
        if (v !== undefined) entries.push([field.celName, toCel(field.decl, v)]);
      }
      return new decl.ctor(entries);
    }
    case 'map':
      if (typeof value !== 'object' || Array.isArray(value)) return value;
      return new Map(Object.entries(value).map(([k, v]) => [k, toCel(decl.value, v)]));
    case 'list':
      return Array.isArray(value) ? value.map((v) => toCel(decl.item, v)) : value;
    case 'scalar':
      return scalarToCel(decl, value);
  }
}

function scalarToCel(decl: Decl & { kind: 'scalar' }, value: JsonValue): unknown {
  switch (decl.celType) {
    case 'int':
      return typeof value === 'number' && Number.isInteger(value) ? BigInt(value) : value;
    case 'dyn':
      return typeof value === 'number' && Number.isInteger(value) ? BigInt(value) : value;
    case 'bytes':
      return typeof value === 'string' ? new Uint8Array(Buffer.from(value, 'base64')) : value;
    case 'google.protobuf.Duration':
      return typeof value === 'string' ? parseDurationValue(value) : value;
    case 'google.protobuf.Timestamp':
      return typeof value === 'string'
        ? new Date(decl.format === 'date' ? `${value}T00:00:00Z` : value)
        : value;
    default:
      return value;
  }
}

// ---------------------------------------------------------------------------------------------------
// Rule compilation.

const BINARY_OPS: Record<string, string> = {
  '==': '_==_',
  '!=': '_!=_',
  '<': '_<_',
  '<=': '_<=_',
  '>': '_>_',
  '>=': '_>=_',
  '+': '_+_',
  '-': '_-_',
  '*': '_*_',
  '/': '_/_',
  '%': '_%_',
  in: '@in',
};

interface CompileContext {
  readonly decls: Map<Structural, Decl>;
  readonly env: Environment;
  /** Declared (escaped) field names of every object type, for has() checks. */
  readonly fields: ReadonlyMap<string, ReadonlySet<string>>;
  readonly nodes: Map<Structural, CelNode>;
  readonly errors: RuleCompileError[];
}

function referencesOldSelf(node: unknown): boolean {
  if (Array.isArray(node)) return node.some(referencesOldSelf);
  if (node === null || typeof node !== 'object' || !('op' in node)) return false;
  const ast = node as ASTNode;
  if (ast.op === 'id') return ast.args === 'oldSelf';
  return referencesOldSelf(ast.args);
}

/** Where cel-go anchors an error: the operator, the '.' of a select, the '(' of a call. */
function errorOffset(source: string, node: ASTNode | undefined, fallback: number): number {
  if (!node) return fallback;
  switch (node.op) {
    case '.':
    case '.?':
      return Math.max(0, source.indexOf('.', node.args[0].range.end));
    case 'call':
      return source.indexOf('(', node.range.start);
    case 'rcall':
      return source.indexOf('(', node.args[1].range.end);
    default: {
      if (!(node.op in BINARY_OPS)) return fallback;
      const [left, right] = node.args as [ASTNode, ASTNode];
      const at = source.indexOf(node.op, left.range.end);
      return at >= 0 && at < right.range.start ? at : fallback;
    }
  }
}

function celError(source: string, offset: number, summary: string): string {
  const before = source.slice(0, Math.max(0, offset)).split('\n');
  const line = before.length;
  const col = (before[before.length - 1] ?? '').length + 1;
  const text = source.split('\n')[line - 1] ?? '';
  return `ERROR: <input>:${line}:${col}: ${summary}\n | ${text}\n | ${'.'.repeat(col - 1)}^`;
}

/** Renders a library error the way cel-go does: `ERROR: <input>:1:6: found no matching overload ...`. */
function celCompileMessage(env: Environment, source: string, err: unknown): string {
  const e = err as { summary?: string; message?: string; range?: { start: number }; node?: ASTNode };
  let summary = e.summary ?? e.message ?? String(err);
  const overload = /^no such overload: (.+) (==|!=|<=|>=|<|>|\+|-|\*|\/|%|in) (.+)$/.exec(summary);
  if (overload) {
    const op = overload[2] ?? '';
    summary = `found no matching overload for '${BINARY_OPS[op] ?? op}' applied to '(${overload[1]}, ${overload[3]})'`;
  }
  const call = /^found no matching overload for '(?:(.+)\.)?([A-Za-z_][A-Za-z0-9_]*)\((.*)\)'$/.exec(summary);
  if (call) {
    const [, receiver, name = '', args = ''] = call;
    const known = env.getDefinitions().functions.some((f) => f.name === name);
    summary = known
      ? `found no matching overload for '${name}' applied to '${receiver ? `${receiver}.` : ''}(${args})'`
      : `undeclared reference to '${name}' (in container '')`;
  }
  const missingField = /^No such key: (.+)$/.exec(summary);
  if (missingField) summary = `undefined field '${missingField[1]}'`;
  return celError(source, errorOffset(source, e.node, e.range?.start ?? 0), summary);
}

/** The library accepts has() on any field; cel-go rejects fields the object type does not declare. */
function undeclaredHasField(
  ctx: CompileContext,
  env: Environment,
  source: string,
  node: unknown,
): string | undefined {
  if (Array.isArray(node)) {
    for (const child of node) {
      const found = undeclaredHasField(ctx, env, source, child);
      if (found) return found;
    }
    return undefined;
  }
  if (node === null || typeof node !== 'object' || !('op' in node)) return undefined;
  const ast = node as ASTNode;
  if (ast.op === 'call' && ast.args[0] === 'has' && ast.args[1].length === 1) {
    const sel = ast.args[1][0] as ASTNode;
    if (sel.op === '.') {
      const [operand, field] = sel.args;
      // Operands naming comprehension variables do not check on their own; those are left alone.
      const checked = env.check(serialize(operand));
      const declared = checked.valid && checked.type ? ctx.fields.get(checked.type) : undefined;
      if (declared && !declared.has(field)) {
        return celError(source, source.indexOf('(', ast.range.start), `undefined field '${field}'`);
      }
    }
  }
  return typeof ast.args === 'object' ? undeclaredHasField(ctx, env, source, ast.args) : undefined;
}

function compileExpression(
  ctx: CompileContext,
  env: Environment,
  source: string,
  want: 'bool' | 'string',
): { program: ParseResult } | { error: string } {
  let program: ParseResult;
  try {
    program = env.parse(source);
  } catch (err) {
    return { error: celCompileMessage(env, source, err) };
  }
  const checked = program.check();
  if (!checked.valid) return { error: celCompileMessage(env, source, checked.error) };
  const undeclared = undeclaredHasField(ctx, env, source, program.ast);
  if (undeclared) return { error: undeclared };
  if (checked.type !== want) {
    return {
      error: want === 'bool' ? 'cel expression must evaluate to a bool' : 'must evaluate to a string',
    };
  }
  return { program };
}

/** Normalises a rule's fieldPath (`.a['b'].c`) against the schema, as ValidFieldPath does. */
function normalizeFieldPath(fieldPath: string, node: Structural): string | { error: string } {
  let out = '';
  let cur: Structural | undefined = node;
  const re = /\.([^.[\]]+)|\['((?:[^'\\]|\\.)*)'\]/y;
  let pos = 0;
  while (pos < fieldPath.length) {
    re.lastIndex = pos;
    const m = re.exec(fieldPath);
    if (!m || !cur) return { error: 'fieldPath must be a valid path' };
    pos = re.lastIndex;
    const name = m[1] ?? (m[2] ?? '').replace(/\\(.)/g, '$1');
    if (cur.properties?.has(name)) {
      out += out === '' ? name : `.${name}`;
      cur = cur.properties.get(name);
    } else if (typeof cur.additionalProperties === 'object') {
      out += `[${name}]`;
      cur = cur.additionalProperties;
    } else {
      return { error: 'fieldPath must be a valid path' };
    }
  }
  return out;
}

/**
 * Builds the CEL view of every node of the schema and compiles every rule once. Nodes without a CEL
 * type (e.g. untyped preserve-unknown-fields) get no entry; rules on them cannot compile.
 */
export function compileCel(root: Structural): {
  nodes: Map<Structural, CelNode>;
  errors: RuleCompileError[];
} {
  const env = baseEnv.clone();
  const declContext: DeclContext = { env, names: new Set(), fields: new Map() };
  const decls = new Map<Structural, Decl>();
  // kube names the root type selfType<n>; nested types follow the property path.
  const rootDecl = declFor(declContext, root, 'selfType0', true);
  if (rootDecl) collectDecls(root, rootDecl, decls);
  const ctx: CompileContext = { decls, env, fields: declContext.fields, nodes: new Map(), errors: [] };
  walkCompile(ctx, root, undefined);
  return { nodes: ctx.nodes, errors: ctx.errors };
}

/** Records which Decl each schema node got, following the shape declFor built. */
function collectDecls(node: Structural, decl: Decl, out: Map<Structural, Decl>): void {
  out.set(node, decl);
  if (decl.kind === 'list' && node.items) collectDecls(node.items, decl.item, out);
  if (decl.kind === 'map' && typeof node.additionalProperties === 'object')
    collectDecls(node.additionalProperties, decl.value, out);
  if (decl.kind === 'object') {
    for (const [prop, field] of decl.fields) {
      const child = node.properties?.get(prop);
      if (child) collectDecls(child, field.decl, out);
    }
  }
}

function walkCompile(ctx: CompileContext, node: Structural, uncorrelatable: string | undefined): void {
  const decl = ctx.decls.get(node);
  const rules: CompiledRule[] = [];
  if (node.rules.length > 0 && !decl) {
    ctx.errors.push({
      path: `${node.path}.x-kubernetes-validations`,
      rule: node.rules[0] as ValidationRule,
      detail: `rule declared on schema that does not support validation rules type: '${node.type}' x-kubernetes-preserve-unknown-fields: '${node.preserveUnknownFields}'`,
      value: 'none',
      reason: 'FieldValueInvalid',
    });
  } else if (decl && node.rules.length > 0) {
    const plain = ctx.env
      .clone()
      .registerVariable('self', decl.celType)
      .registerVariable('oldSelf', decl.celType);
    let optional: Environment | undefined;
    node.rules.forEach((rule, i) => {
      if (rule.optionalOldSelf) {
        optional ??= ctx.env
          .clone()
          .registerVariable('self', decl.celType)
          .registerVariable('oldSelf', `optional<${decl.celType}>`);
      }
      const envs = { rule: rule.optionalOldSelf && optional ? optional : plain, message: plain };
      const compiled = compileRule(
        ctx,
        rule,
        node,
        envs,
        uncorrelatable,
        `${node.path}.x-kubernetes-validations[${i}]`,
      );
      if ('error' in compiled) ctx.errors.push(compiled.error);
      else rules.push(compiled.rule);
    });
  }
  if (decl) ctx.nodes.set(node, { toCel: (v) => toCel(decl, v), rules });
  for (const child of node.properties?.values() ?? []) walkCompile(ctx, child, uncorrelatable);
  if (typeof node.additionalProperties === 'object')
    walkCompile(ctx, node.additionalProperties, uncorrelatable);
  // Only list-type=map items can be matched to their old selves; kube names the first list that is not.
  if (node.items)
    walkCompile(ctx, node.items, uncorrelatable ?? (node.listType === 'map' ? undefined : node.items.path));
}

function compileRule(
  ctx: CompileContext,
  rule: ValidationRule,
  node: Structural,
  envs: { readonly rule: Environment; readonly message: Environment },
  uncorrelatable: string | undefined,
  path: string,
): { rule: CompiledRule } | { error: RuleCompileError } {
  const fail = (
    detail: string,
    field = 'rule',
    value: RuleCompileError['value'] = 'rule',
    reason: RuleCompileError['reason'] = 'FieldValueInvalid',
  ): { error: RuleCompileError } => ({ error: { path: `${path}.${field}`, rule, detail, value, reason } });
  if (rule.rule.trim() === '') return fail('rule is not specified', 'rule', 'none', 'FieldValueRequired');
  const compiled = compileExpression(ctx, envs.rule, rule.rule, 'bool');
  if ('error' in compiled)
    return fail(
      compiled.error.startsWith('ERROR') ? `compilation failed: ${compiled.error}` : compiled.error,
    );
  const usesOldSelf = referencesOldSelf(compiled.program.ast);
  if (usesOldSelf && uncorrelatable !== undefined) {
    return fail(
      `oldSelf cannot be used on the uncorrelatable portion of the schema within ${uncorrelatable}`,
      'rule',
      'ruleText',
    );
  }
  if (rule.optionalOldSelf !== undefined && !usesOldSelf) {
    return fail('may not be set if oldSelf is not used in rule', 'optionalOldSelf', 'optionalOldSelf');
  }
  let messageProgram: ParseResult | undefined;
  if (rule.messageExpression !== undefined && rule.messageExpression.trim() !== '') {
    const msg = compileExpression(ctx, envs.message, rule.messageExpression, 'string');
    if ('error' in msg) {
      const detail = msg.error.startsWith('ERROR')
        ? `messageExpression compilation failed: ${msg.error}`
        : msg.error;
      return fail(detail, 'messageExpression');
    }
    messageProgram = msg.program;
  }
  let fieldPath = '';
  if (rule.fieldPath) {
    const normalized = normalizeFieldPath(rule.fieldPath, node);
    if (typeof normalized !== 'string') return fail(normalized.error, 'fieldPath', 'fieldPath');
    fieldPath = normalized;
  }
  return { rule: { source: rule, usesOldSelf, fieldPath, program: compiled.program, messageProgram } };
}

// ---------------------------------------------------------------------------------------------------
// Evaluation.

const MAX_MESSAGE_EXPRESSION_BYTES = 5 * 1024;

/** The message kube reports for a failing rule without a usable messageExpression. */
export function ruleMessage(rule: ValidationRule): string {
  return rule.message ? rule.message.trim() : `failed rule: ${rule.rule.trim()}`;
}

const ruleErrorString = (rule: ValidationRule): string =>
  rule.message ? rule.message.trim() : rule.rule.trim();

/** cel-go's wording for runtime errors, which kube quotes in `<error> evaluating rule: <rule>`. */
function celRuntimeError(err: unknown): string {
  const e = err as { code?: string; summary?: string; message?: string };
  const summary = e.summary ?? e.message ?? String(err);
  const bounds = /index out of bounds, index (-?\d+) (?:>= size (\d+)|< 0)/.exec(summary);
  if (bounds) return `index '${bounds[1]}' out of range in list size '${bounds[2] ?? '0'}'`;
  if (e.code === 'no_such_key') return summary.replace(/^No such key/, 'no such key');
  if (e.code === 'optional_value_missing') return 'optional.none() dereference';
  return summary;
}

/**
 * Runs one rule against converted values. A transition rule is only called with `hasOld` (or with
 * optionalOldSelf, when oldSelf becomes an optional); errors come back in kube's wording.
 */
export function evaluateRule(
  rule: CompiledRule,
  self: unknown,
  oldSelf: unknown,
  hasOld: boolean,
): RuleOutcome {
  const activation: Record<string, unknown> = { self };
  if (rule.source.optionalOldSelf) activation.oldSelf = hasOld ? Optional.of(oldSelf) : Optional.none();
  else if (hasOld) activation.oldSelf = oldSelf;
  let result: unknown;
  try {
    result = rule.program(activation);
  } catch (err) {
    const text = celRuntimeError(err);
    if (text.startsWith('no such overload')) {
      return {
        ok: false,
        kind: 'error',
        detail: `'no such overload': call arguments did not match a supported operator, function or macro signature for rule: ${ruleErrorString(rule.source)}`,
      };
    }
    return { ok: false, kind: 'error', detail: `${text} evaluating rule: ${ruleErrorString(rule.source)}` };
  }
  if (result === true) return { ok: true };
  return { ok: false, kind: 'false', message: evaluateMessage(rule, self, oldSelf, hasOld) };
}

/** messageExpression runs without optional oldSelf; any failure falls back to the static message. */
function evaluateMessage(
  rule: CompiledRule,
  self: unknown,
  oldSelf: unknown,
  hasOld: boolean,
): string | undefined {
  if (!rule.messageProgram) return undefined;
  try {
    const out = rule.messageProgram(hasOld ? { self, oldSelf } : { self });
    if (typeof out !== 'string') return undefined;
    const trimmed = out.trim();
    if (trimmed === '' || trimmed.includes('\n') || Buffer.byteLength(trimmed) > MAX_MESSAGE_EXPRESSION_BYTES)
      return undefined;
    return trimmed;
  } catch {
    return undefined;
  }
}
