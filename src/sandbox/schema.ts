// Structural-schema handling for custom resources, as kube-apiserver's apiextensions does it: pruning
// (schema/pruning), defaulting (schema/defaulting), OpenAPI value validation (k8s.io/kube-openapi
// validate, converted to field errors by apiserver/validation), list-type invariants (schema/listtype),
// then CEL x-kubernetes-validations (schema/cel). Errors carry kube's exact field paths and texts.
import {
  type CelNode,
  type CompiledRule,
  compileCel,
  compileGoRegExp,
  evaluateRule,
  parseQuantity,
  type RuleCompileError,
  ruleMessage,
  type ValidationRule,
} from './cel.ts';
import { type FieldCause, invalidError, type JsonObject, type JsonValue } from './types.ts';

/** One node of a structural schema, with unsupported formats already identified. */
export interface Structural {
  /** Where this node sits in the CRD, e.g. `spec.validation.openAPIV3Schema.properties[spec]`. */
  readonly path: string;
  readonly type: string;
  /** The declared format (CEL types follow it). */
  readonly format: string;
  /** The format the OpenAPI validator enforces: unsupported formats are dropped, as kube does. */
  readonly knownFormat: string;
  readonly nullable: boolean;
  readonly intOrString: boolean;
  readonly preserveUnknownFields: boolean;
  readonly embeddedResource: boolean;
  readonly properties: ReadonlyMap<string, Structural> | undefined;
  readonly additionalProperties: Structural | boolean | undefined;
  readonly items: Structural | undefined;
  readonly required: readonly string[];
  readonly enum: readonly JsonValue[] | undefined;
  readonly default: JsonValue | undefined;
  readonly maximum: number | undefined;
  readonly exclusiveMaximum: boolean;
  readonly minimum: number | undefined;
  readonly exclusiveMinimum: boolean;
  readonly multipleOf: number | undefined;
  readonly maxLength: number | undefined;
  readonly minLength: number | undefined;
  /** `re` is undefined when the pattern does not compile; `error` then says why. */
  readonly pattern:
    | { readonly source: string; readonly re: RegExp | undefined; readonly error?: string }
    | undefined;
  readonly maxItems: number | undefined;
  readonly minItems: number | undefined;
  readonly uniqueItems: boolean;
  readonly maxProperties: number | undefined;
  readonly minProperties: number | undefined;
  readonly listType: string | undefined;
  readonly listMapKeys: readonly string[];
  readonly mapType: string | undefined;
  readonly allOf: readonly Structural[];
  readonly anyOf: readonly Structural[];
  readonly oneOf: readonly Structural[];
  readonly not: Structural | undefined;
  readonly rules: readonly ValidationRule[];
}

export interface CompiledSchema {
  /**
   * Removes fields not declared by the structural schema (x-kubernetes-preserve-unknown-fields,
   * additionalProperties and embedded-resource metadata are kept; so are apiVersion/kind/metadata at
   * the root). Mutates. Returns the pruned paths, sorted (`spec.foo`, `spec.items[0].bar`), which a
   * server needs for fieldValidation=Strict/Warn.
   */
  prune(obj: JsonObject): string[];
  /**
   * Drops non-nullable nulls that have no default, then applies `default`s to absent (or null,
   * non-nullable) fields of present objects, as apiextensions' decoder does. Mutates.
   */
  applyDefaults(obj: JsonObject): void;
  /**
   * Validates the whole object and returns kube's causes: OpenAPI value validation, list-type
   * uniqueness, then CEL rules (skipped, with kube's notice, after a blocking error). With `old`, it is
   * an update: transition rules run, and errors on values unchanged from `old` are ratcheted away
   * (CRDValidationRatcheting, on by default since 1.30).
   */
  validate(obj: JsonObject, old?: JsonObject): FieldCause[];
}

export interface CompileOptions {
  /** CRD path of the schema, for compile errors; kube hoists a single version's schema to spec.validation. */
  basePath?: string;
  /** CRD name, for the 422 message. */
  crdName?: string;
}

/** Compiles an openAPIV3Schema; every CEL rule is compiled once here, and a rule that fails throws 422. */
export function compileSchema(openAPIV3Schema: JsonObject, options: CompileOptions = {}): CompiledSchema {
  const root = toStructural(openAPIV3Schema, options.basePath ?? 'spec.validation.openAPIV3Schema');
  const { nodes, errors } = compileCel(root);
  const causes = [...patternErrors(root), ...errors.map(compileErrorCause)];
  if (causes.length > 0) {
    throw invalidError(
      { group: 'apiextensions.k8s.io', kind: 'CustomResourceDefinition' },
      options.crdName ?? '',
      causes,
    );
  }
  return {
    prune: (obj) => pruneObject(obj, root),
    applyDefaults: (obj) => {
      pruneNonNullableNulls(obj, root);
      applyDefaultsTo(obj, root);
    },
    validate: (obj, old) => validateObject(root, nodes, obj, old),
  };
}

// ---------------------------------------------------------------------------------------------------
// Schema parsing.

const isObject = (v: unknown): v is JsonObject => typeof v === 'object' && v !== null && !Array.isArray(v);
const num = (v: JsonValue | undefined): number | undefined => (typeof v === 'number' ? v : undefined);
const str = (v: JsonValue | undefined): string | undefined => (typeof v === 'string' ? v : undefined);

// apiextensions' StripUnsupportedFormatsPostProcess: other formats are ignored, not rejected.
const SUPPORTED_STRING_FORMATS = new Set([
  'bsonobjectid',
  'uri',
  'email',
  'hostname',
  'ipv4',
  'ipv6',
  'cidr',
  'mac',
  'uuid',
  'uuid3',
  'uuid4',
  'uuid5',
  'isbn',
  'isbn10',
  'isbn13',
  'creditcard',
  'ssn',
  'hexcolor',
  'rgbcolor',
  'byte',
  'password',
  'date',
  'duration',
  'datetime',
  'quantity',
]);

function knownFormat(type: string, format: string): string {
  if (format === '') return '';
  if (type === '' || type === 'string')
    return SUPPORTED_STRING_FORMATS.has(format.replace(/-/g, '')) ? format : '';
  if (type === 'integer') return format === 'int32' || format === 'int64' ? format : '';
  if (type === 'number') return format === 'float' || format === 'double' ? format : '';
  return '';
}

function toRules(v: JsonValue | undefined): ValidationRule[] {
  if (!Array.isArray(v)) return [];
  return v.filter(isObject).map((r) => {
    const rule: ValidationRule = { rule: str(r.rule) ?? '' };
    if (typeof r.message === 'string') rule.message = r.message;
    if (typeof r.messageExpression === 'string') rule.messageExpression = r.messageExpression;
    if (typeof r.reason === 'string') rule.reason = r.reason;
    if (typeof r.fieldPath === 'string') rule.fieldPath = r.fieldPath;
    if (typeof r.optionalOldSelf === 'boolean') rule.optionalOldSelf = r.optionalOldSelf;
    return rule;
  });
}

function compilePattern(source: string | undefined): Structural['pattern'] {
  if (source === undefined) return undefined;
  try {
    return { source, re: compileGoRegExp(source) };
  } catch (err) {
    return { source, re: undefined, error: err instanceof Error ? err.message : String(err) };
  }
}

/** kube rejects CRDs whose patterns do not compile; the sandbox also rejects RE2 it cannot translate. */
function patternErrors(node: Structural): FieldCause[] {
  const own = node.pattern?.error
    ? [
        cause.invalid(
          `${node.path}.pattern`,
          node.pattern.source,
          `must be a valid regular expression, but isn't: ${node.pattern.error}`,
        ),
      ]
    : [];
  const children = [
    ...(node.properties?.values() ?? []),
    ...(typeof node.additionalProperties === 'object' ? [node.additionalProperties] : []),
    ...(node.items ? [node.items] : []),
    ...node.allOf,
    ...node.anyOf,
    ...node.oneOf,
    ...(node.not ? [node.not] : []),
  ];
  return [...own, ...children.flatMap(patternErrors)];
}

export function toStructural(raw: JsonObject, path: string): Structural {
  const type = str(raw.type) ?? '';
  const format = str(raw.format) ?? '';
  const props = isObject(raw.properties) ? raw.properties : undefined;
  const ap = raw.additionalProperties;
  const sub = (key: string): Structural[] =>
    Array.isArray(raw[key])
      ? (raw[key] as JsonValue[]).filter(isObject).map((s, i) => toStructural(s, `${path}.${key}[${i}]`))
      : [];
  return {
    path,
    type,
    format,
    knownFormat: knownFormat(type, format),
    nullable: raw.nullable === true,
    intOrString: raw['x-kubernetes-int-or-string'] === true,
    preserveUnknownFields: raw['x-kubernetes-preserve-unknown-fields'] === true,
    embeddedResource: raw['x-kubernetes-embedded-resource'] === true,
    properties: props
      ? new Map(
          Object.entries(props)
            .filter((e): e is [string, JsonObject] => isObject(e[1]))
            .map(([k, v]) => [k, toStructural(v, `${path}.properties[${k}]`)]),
        )
      : undefined,
    additionalProperties: isObject(ap)
      ? toStructural(ap, `${path}.additionalProperties`)
      : typeof ap === 'boolean'
        ? ap
        : undefined,
    items: isObject(raw.items) ? toStructural(raw.items, `${path}.items`) : undefined,
    required: Array.isArray(raw.required)
      ? raw.required.filter((r): r is string => typeof r === 'string')
      : [],
    enum: Array.isArray(raw.enum) ? raw.enum : undefined,
    default: raw.default,
    maximum: num(raw.maximum),
    exclusiveMaximum: raw.exclusiveMaximum === true,
    minimum: num(raw.minimum),
    exclusiveMinimum: raw.exclusiveMinimum === true,
    multipleOf: num(raw.multipleOf),
    maxLength: num(raw.maxLength),
    minLength: num(raw.minLength),
    pattern: compilePattern(str(raw.pattern)),
    maxItems: num(raw.maxItems),
    minItems: num(raw.minItems),
    uniqueItems: raw.uniqueItems === true,
    maxProperties: num(raw.maxProperties),
    minProperties: num(raw.minProperties),
    listType: str(raw['x-kubernetes-list-type']),
    listMapKeys: Array.isArray(raw['x-kubernetes-list-map-keys'])
      ? raw['x-kubernetes-list-map-keys'].filter((k): k is string => typeof k === 'string')
      : [],
    mapType: str(raw['x-kubernetes-map-type']),
    allOf: sub('allOf'),
    anyOf: sub('anyOf'),
    oneOf: sub('oneOf'),
    not: isObject(raw.not) ? toStructural(raw.not, `${path}.not`) : undefined,
    rules: toRules(raw['x-kubernetes-validations']),
  };
}

/** Go's %#v of apiextensions.ValidationRule, which kube prints as the invalid value of a rule. */
function goRule(rule: ValidationRule): string {
  const ptr = (type: string, set: boolean): string => `(*${type})(${set ? '0xc000000000' : 'nil'})`;
  return `apiextensions.ValidationRule{Rule:${goQuote(rule.rule)}, Message:${goQuote(rule.message ?? '')}, MessageExpression:${goQuote(rule.messageExpression ?? '')}, Reason:${ptr('apiextensions.FieldValueErrorReason', rule.reason !== undefined)}, FieldPath:${goQuote(rule.fieldPath ?? '')}, OptionalOldSelf:${ptr('bool', rule.optionalOldSelf !== undefined)}}`;
}

function compileErrorCause(e: RuleCompileError): FieldCause {
  if (e.reason === 'FieldValueRequired') return cause.required(e.path, e.detail);
  switch (e.value) {
    case 'ruleText':
      return cause.invalid(e.path, e.rule.rule, e.detail);
    case 'fieldPath':
      return cause.invalid(e.path, e.rule.fieldPath ?? '', e.detail);
    case 'optionalOldSelf':
      return cause.invalid(e.path, e.rule.optionalOldSelf ?? false, e.detail);
    case 'none':
      return { reason: 'InternalError', field: e.path, message: `Internal error: ${e.detail}` };
    default:
      return {
        reason: 'FieldValueInvalid',
        field: e.path,
        message: `Invalid value: ${goRule(e.rule)}: ${e.detail}`,
      };
  }
}

// ---------------------------------------------------------------------------------------------------
// Go value rendering (field.Error.ErrorBody): int64/float64/bool with %v, strings with %q, anything
// else with %#v, because kube's messages embed them verbatim.

export function goQuote(s: string): string {
  if (/^[\x20\x21\x23-\x5b\x5d-\x7e]*$/.test(s)) return `"${s}"`;
  let out = '"';
  for (const ch of s) {
    const c = ch.codePointAt(0) ?? 0;
    if (ch === '"' || ch === '\\') out += `\\${ch}`;
    else if (ch === '\n') out += '\\n';
    else if (ch === '\t') out += '\\t';
    else if (ch === '\r') out += '\\r';
    else if (ch === '\x07') out += '\\a';
    else if (ch === '\b') out += '\\b';
    else if (ch === '\f') out += '\\f';
    else if (ch === '\v') out += '\\v';
    else if (c < 0x20 || c === 0x7f) out += `\\x${c.toString(16).padStart(2, '0')}`;
    else if (/\p{C}/u.test(ch))
      out += c > 0xffff ? `\\U${c.toString(16).padStart(8, '0')}` : `\\u${c.toString(16).padStart(4, '0')}`;
    else out += ch;
  }
  return `${out}"`;
}

/** Go's strconv.FormatFloat(f, 'g', -1, 64), which %v uses for float64 (exponent form from 1e+06). */
export function goFloat(f: number): string {
  if (Number.isNaN(f)) return 'NaN';
  if (!Number.isFinite(f)) return f > 0 ? '+Inf' : '-Inf';
  if (f === 0) return Object.is(f, -0) ? '-0' : '0';
  const [mantissa = '', expText = '0'] = Math.abs(f).toExponential().split('e');
  const digits = mantissa.replace('.', '');
  const exp = Number(expText);
  const sign = f < 0 ? '-' : '';
  if (exp < -4 || exp >= 6) {
    const frac = digits.length > 1 ? `.${digits.slice(1)}` : '';
    return `${sign}${digits[0]}${frac}e${exp < 0 ? '-' : '+'}${String(Math.abs(exp)).padStart(2, '0')}`;
  }
  if (exp < 0) return `${sign}0.${'0'.repeat(-exp - 1)}${digits}`;
  if (digits.length <= exp + 1) return `${sign}${digits}${'0'.repeat(exp + 1 - digits.length)}`;
  return `${sign}${digits.slice(0, exp + 1)}.${digits.slice(exp + 1)}`;
}

const goNumber = (n: number): string => (Number.isInteger(n) ? String(n) : goFloat(n));

/** %#v of an unstructured value (map[string]interface {}, []interface {}, ...). */
function goSharpV(v: JsonValue): string {
  if (v === null) return 'interface {}(nil)';
  if (typeof v === 'string') return goQuote(v);
  if (typeof v === 'number') return goNumber(v);
  if (typeof v === 'boolean') return String(v);
  if (Array.isArray(v)) return `[]interface {}{${v.map(goSharpV).join(', ')}}`;
  const keys = Object.keys(v).sort();
  return `map[string]interface {}{${keys.map((k) => `${goQuote(k)}:${goSharpV(v[k] as JsonValue)}`).join(', ')}}`;
}

/** The bad value as field.Error.ErrorBody prints it. */
export function goValue(v: JsonValue): string {
  if (v === null) return '"null"';
  if (typeof v === 'string') return goQuote(v);
  if (typeof v === 'number') return goNumber(v);
  if (typeof v === 'boolean') return String(v);
  return goSharpV(v);
}

/** field.Error constructors, rendered the way the API server returns them in Status causes. */
const cause = {
  required: (field: string, detail = ''): FieldCause => ({
    reason: 'FieldValueRequired',
    field,
    message: detail ? `Required value: ${detail}` : 'Required value',
  }),
  invalid: (field: string, value: JsonValue, detail: string): FieldCause => ({
    reason: 'FieldValueInvalid',
    field,
    message: `Invalid value: ${goValue(value)}: ${detail}`,
  }),
  typeInvalid: (field: string, value: JsonValue, detail: string): FieldCause => ({
    reason: 'FieldValueTypeInvalid',
    field,
    message: `Invalid value: ${goValue(value)}: ${detail}`,
  }),
  notSupported: (field: string, value: JsonValue, values: string[]): FieldCause => ({
    reason: 'FieldValueNotSupported',
    field,
    message: `Unsupported value: ${goValue(value)}${values.length ? `: supported values: ${values.map(goQuote).join(', ')}` : ''}`,
  }),
  // Since 1.32 TooLong omits the value and counts bytes (field.TooLong).
  tooLong: (field: string, max: number): FieldCause => ({
    reason: 'FieldValueTooLong',
    field,
    message: `Too long: may not be more than ${max} ${max === 1 ? 'byte' : 'bytes'}`,
  }),
  tooMany: (field: string, actual: number, max: number): FieldCause => ({
    reason: 'FieldValueTooMany',
    field,
    message: `Too many: ${actual}: must have at most ${max} items`,
  }),
  duplicate: (field: string, value: JsonValue): FieldCause => ({
    reason: 'FieldValueDuplicate',
    field,
    message: `Duplicate value: ${goValue(value)}`,
  }),
  forbidden: (field: string, detail: string): FieldCause => ({
    reason: 'FieldValueForbidden',
    field,
    message: detail ? `Forbidden: ${detail}` : 'Forbidden',
  }),
};

// ---------------------------------------------------------------------------------------------------
// Pruning and defaulting.

const META_FIELDS = new Set(['apiVersion', 'kind', 'metadata']);

function joinKey(parent: string, key: string): string {
  return parent === '' ? key : `${parent}.${key}`;
}

function pruneObject(obj: JsonObject, root: Structural): string[] {
  const pruned: string[] = [];
  // The root is always treated as an embedded resource, so apiVersion/kind/metadata survive.
  prune(obj, { ...root, embeddedResource: true }, '', pruned);
  return pruned.sort();
}

function prune(x: JsonValue, s: Structural | undefined, path: string, pruned: string[]): void {
  if (s?.preserveUnknownFields) {
    skipPrune(x, s, path, pruned);
    return;
  }
  if (Array.isArray(x)) {
    x.forEach((v, i) => {
      prune(v, s?.items, `${path}[${i}]`, pruned);
    });
    return;
  }
  if (!isObject(x)) return;
  for (const k of Object.keys(x)) {
    if (s?.embeddedResource && META_FIELDS.has(k)) continue;
    const child = s?.properties?.get(k);
    if (s && child) prune(x[k] as JsonValue, child, joinKey(path, k), pruned);
    else if (s && s.additionalProperties !== undefined && s.additionalProperties !== false) {
      prune(
        x[k] as JsonValue,
        typeof s.additionalProperties === 'object' ? s.additionalProperties : undefined,
        joinKey(path, k),
        pruned,
      );
    } else {
      pruned.push(joinKey(path, k));
      delete x[k];
    }
  }
}

function skipPrune(x: JsonValue, s: Structural, path: string, pruned: string[]): void {
  if (Array.isArray(x)) {
    x.forEach((v, i) => {
      if (s.items) skipPrune(v, s.items, `${path}[${i}]`, pruned);
    });
    return;
  }
  if (!isObject(x)) return;
  for (const k of Object.keys(x)) {
    if (s.embeddedResource && META_FIELDS.has(k)) continue;
    const child = s.properties?.get(k);
    if (child) prune(x[k] as JsonValue, child, joinKey(path, k), pruned);
    else if (typeof s.additionalProperties === 'object')
      prune(x[k] as JsonValue, s.additionalProperties, joinKey(path, k), pruned);
  }
}

const childSchema = (s: Structural | undefined, key: string): Structural | undefined =>
  s?.properties?.get(key) ??
  (typeof s?.additionalProperties === 'object' ? s.additionalProperties : undefined);

function pruneNonNullableNulls(x: JsonValue, s: Structural | undefined): void {
  if (Array.isArray(x)) {
    for (const v of x) pruneNonNullableNulls(v, s?.items);
    return;
  }
  if (!isObject(x)) return;
  for (const k of Object.keys(x)) {
    const child = childSchema(s, k);
    if (x[k] === null && child && !child.nullable && child.default === undefined) delete x[k];
    else pruneNonNullableNulls(x[k] as JsonValue, child);
  }
}

const isNonNullableNull = (v: JsonValue | undefined, s: Structural | undefined): boolean =>
  v === null && s !== undefined && !s.nullable;

function applyDefaultsTo(x: JsonValue, s: Structural | undefined): void {
  if (!s) return;
  if (Array.isArray(x)) {
    x.forEach((v, i) => {
      if (isNonNullableNull(v, s.items) && s.items?.default !== undefined)
        x[i] = structuredClone(s.items.default);
      applyDefaultsTo(x[i] as JsonValue, s.items);
    });
    return;
  }
  if (!isObject(x)) return;
  for (const [k, prop] of s.properties ?? []) {
    if (prop.default === undefined) continue;
    if (!(k in x) || isNonNullableNull(x[k], prop)) x[k] = structuredClone(prop.default);
  }
  for (const k of Object.keys(x)) {
    const prop = s.properties?.get(k);
    if (prop) {
      applyDefaultsTo(x[k] as JsonValue, prop);
    } else if (typeof s.additionalProperties === 'object') {
      const ap = s.additionalProperties;
      if (isNonNullableNull(x[k], ap) && ap.default !== undefined) x[k] = structuredClone(ap.default);
      applyDefaultsTo(x[k] as JsonValue, ap);
    }
  }
}

// ---------------------------------------------------------------------------------------------------
// Equality helpers.

/** reflect.DeepEqual on decoded JSON (numbers compare by value, as int64/float64 conversions do). */
export function jsonEqual(a: JsonValue | undefined, b: JsonValue | undefined): boolean {
  if (a === b) return true;
  if (Array.isArray(a))
    return Array.isArray(b) && a.length === b.length && a.every((v, i) => jsonEqual(v, b[i]));
  if (isObject(a) && isObject(b)) {
    const ka = Object.keys(a);
    return ka.length === Object.keys(b).length && ka.every((k) => k in b && jsonEqual(a[k], b[k]));
  }
  return false;
}

/** json.Marshal with sorted keys: how kube compares compound set members. */
function canonicalJson(v: JsonValue): string {
  if (typeof v === 'string') return JSON.stringify(v);
  if (Array.isArray(v)) return `[${v.map(canonicalJson).join(',')}]`;
  if (isObject(v)) {
    return `{${Object.keys(v)
      .sort()
      .map((k) => `${JSON.stringify(k)}:${canonicalJson(v[k] as JsonValue)}`)
      .join(',')}}`;
  }
  return JSON.stringify(v);
}

// ---------------------------------------------------------------------------------------------------
// OpenAPI value validation (kube-openapi's SchemaValidator), emitting causes as
// kubeOpenAPIResultToFieldErrors converts them.

/** kube-openapi names a property `parent.name` and a map entry `parent.key`; the cause drops a leading dot. */
const errField = (name: string): string => (name === '' || name === '.' ? '<nil>' : name.replace(/^\./, ''));

interface Correlation {
  /** The old value correlated to this node (same key, or same list-map keys). */
  readonly old: JsonValue;
}

const schemaTypes = (s: Structural): string[] =>
  s.intOrString ? ['integer', 'string'] : s.type ? [s.type] : [];

/** The JSON type and Go-side format kube-openapi infers from a decoded value. */
function dataType(v: JsonValue): { type: string; format: string } {
  if (typeof v === 'boolean') return { type: 'boolean', format: '' };
  if (typeof v === 'string') return { type: 'string', format: '' };
  if (typeof v === 'number')
    return Number.isInteger(v) ? { type: 'integer', format: 'int64' } : { type: 'number', format: 'float64' };
  if (Array.isArray(v)) return { type: 'array', format: '' };
  return { type: 'object', format: '' };
}

type Emit = (c: FieldCause, own?: boolean) => void;

function typeErrors(s: Structural, v: JsonValue, name: string, emit: Emit): void {
  const types = schemaTypes(s);
  const fmt = s.knownFormat;
  if (types.length === 0 && fmt === '') return;
  const invalidType = (typeName: string, got: string): void => {
    emit(
      cause.typeInvalid(errField(name), got, `${name} in body must be of type ${typeName}: ${goQuote(got)}`),
    );
  };
  if (v === null) {
    if (types.length > 0 && !s.nullable) invalidType(types.join(','), 'null');
    return;
  }
  const { type, format } = dataType(v);
  const isStringOrSlice = typeof v === 'string' || Array.isArray(v);
  const isIntFloat = type === 'integer' && types.includes('number');
  if (!isStringOrSlice && fmt !== '' && !(types.includes(type) || format === fmt || isIntFloat)) {
    invalidType(fmt, format);
    return;
  }
  if (!(types.includes('number') || types.includes('integer')) && fmt !== '' && isStringOrSlice) return;
  if (!(types.includes(type) || isIntFloat)) invalidType(types.join(','), type);
}

function stringErrors(s: Structural, v: string, name: string, emit: Emit): void {
  const field = errField(name);
  const length = [...v].length;
  if (s.maxLength !== undefined && length > s.maxLength) {
    emit(cause.tooLong(field, s.maxLength));
    return;
  }
  if (s.minLength !== undefined && length < s.minLength) {
    emit(cause.invalid(field, v, `${name} in body should be at least ${s.minLength} chars long`));
    return;
  }
  if (s.pattern?.re && !s.pattern.re.test(v)) {
    emit(cause.invalid(field, v, `${name} in body should match '${s.pattern.source}'`));
  }
}

/** swag.IsFloat64AJSONInteger: integral within a relative epsilon. */
function isJsonInteger(f: number): boolean {
  if (!Number.isFinite(f)) return false;
  if (Number.isInteger(f)) return true;
  const g = Math.trunc(f);
  const diff = Math.abs(f - g);
  if (g === 0) return diff < 1e-9 * Number.MIN_VALUE;
  return diff / Math.min(Math.abs(f) + Math.abs(g), Number.MAX_VALUE) < 1e-9;
}

function numberErrors(s: Structural, v: number, name: string, emit: Emit): void {
  const field = errField(name);
  // kube-openapi validates integers natively, truncating float bounds to int64 first.
  const isInt = Number.isInteger(v);
  const bound = (b: number): number => (isInt ? Math.trunc(b) : b);
  if (s.multipleOf !== undefined) {
    const factor = bound(s.multipleOf);
    const ok = isInt
      ? factor !== 0 && v % factor === 0
      : isJsonInteger(factor < 1 ? (1 / factor) * v : v / factor);
    if (!ok) emit(cause.invalid(field, v, `${name} in body should be a multiple of ${goNumber(factor)}`));
  }
  if (s.minimum !== undefined) {
    const min = bound(s.minimum);
    if (s.exclusiveMinimum ? v <= min : v < min) {
      emit(
        cause.invalid(
          field,
          v,
          `${name} in body should be greater than ${s.exclusiveMinimum ? '' : 'or equal to '}${goNumber(min)}`,
        ),
      );
    }
  }
  if (s.maximum !== undefined) {
    const max = bound(s.maximum);
    if (s.exclusiveMaximum ? v >= max : v > max) {
      emit(
        cause.invalid(
          field,
          v,
          `${name} in body should be less than ${s.exclusiveMaximum ? '' : 'or equal to '}${goNumber(max)}`,
        ),
      );
    }
  }
}

function enumErrors(s: Structural, v: JsonValue, name: string, emit: Emit): void {
  if (!s.enum || s.enum.length === 0) return;
  if (v !== null && s.enum.some((e) => jsonEqual(e, v))) return;
  const values = s.enum.map((e) => (typeof e === 'string' ? e : JSON.stringify(e)));
  emit(cause.notSupported(errField(name), v, values));
}

function schemaPropsErrors(s: Structural, v: JsonValue, name: string, emit: Emit): void {
  if (s.allOf.length + s.anyOf.length + s.oneOf.length === 0 && !s.not) return;
  const quoted = goQuote(name);
  const run = (sub: Structural): FieldCause[] => {
    const out: FieldCause[] = [];
    validateValue(sub, v, name, undefined, out);
    return out;
  };
  if (s.allOf.length > 0) {
    const results = s.allOf.map(run);
    for (const r of results) for (const c of r) emit(c);
    if (results.some((r) => r.length > 0))
      emit(cause.invalid('<nil>', '', `${quoted} must validate all the schemas (allOf)`));
  }
  if (s.anyOf.length > 0) {
    const results = s.anyOf.map(run);
    if (!results.some((r) => r.length === 0)) {
      emit(cause.invalid('<nil>', '', `${quoted} must validate at least one schema (anyOf)`));
      for (const c of results[0] ?? []) emit(c);
    }
  }
  if (s.oneOf.length > 0) {
    const results = s.oneOf.map(run);
    const valid = results.filter((r) => r.length === 0).length;
    if (valid !== 1) {
      const why = valid === 0 ? 'Found none valid' : `Found ${valid} valid alternatives`;
      emit(cause.invalid('<nil>', '', `${quoted} must validate one and only one schema (oneOf). ${why}`));
      if (valid === 0) for (const c of results[0] ?? []) emit(c);
    }
  }
  if (s.not && run(s.not).length === 0)
    emit(cause.invalid('<nil>', '', `${quoted} must not validate the schema (not)`));
}

/** Finds, for an item of a list-type=map list, the old item with the same key values (MakeMapList). */
function listMapCorrelator(
  s: Structural,
  oldList: JsonValue | undefined,
): (item: JsonValue) => JsonValue | undefined {
  if (s.listType !== 'map' || !Array.isArray(oldList)) return () => undefined;
  const keyOf = (x: JsonObject): string =>
    canonicalJson(s.listMapKeys.map((k) => (k in x ? [x[k] as JsonValue] : [])));
  const byKey = new Map<string, JsonValue>();
  for (const o of oldList) if (isObject(o) && !byKey.has(keyOf(o))) byKey.set(keyOf(o), o);
  return (item) => (isObject(item) ? byKey.get(keyOf(item)) : undefined);
}

function correlateKey(
  s: Structural,
  corr: Correlation | undefined,
  v: JsonObject,
  key: string,
): Correlation | undefined {
  if (!corr || !isObject(corr.old) || !(key in corr.old) || !(key in v)) return undefined;
  if (!s.properties?.has(key) && typeof s.additionalProperties !== 'object') return undefined;
  return { old: corr.old[key] as JsonValue };
}

function sliceErrors(
  s: Structural,
  v: JsonValue[],
  name: string,
  corr: Correlation | undefined,
  emit: Emit,
  out: FieldCause[],
): void {
  const field = errField(name);
  if (s.items) {
    const correlate = listMapCorrelator(s, corr?.old);
    v.forEach((item, i) => {
      const old = correlate(item);
      validateValue(
        s.items as Structural,
        item,
        `${name}[${i}]`,
        old === undefined ? undefined : { old },
        out,
      );
    });
  }
  if (s.minItems !== undefined && v.length < s.minItems) {
    emit(cause.invalid(field, v.length, `${name} in body should have at least ${s.minItems} items`));
  }
  if (s.maxItems !== undefined && v.length > s.maxItems) emit(cause.tooMany(field, v.length, s.maxItems));
  if (s.uniqueItems && new Set(v.map(canonicalJson)).size !== v.length) {
    emit(cause.invalid(field, '', `${name} in body shouldn't contain duplicates`));
  }
}

function objectErrors(
  s: Structural,
  v: JsonObject,
  name: string,
  corr: Correlation | undefined,
  emit: Emit,
  out: FieldCause[],
): void {
  const field = errField(name);
  const keys = Object.keys(v);
  if (s.minProperties !== undefined && keys.length < s.minProperties) {
    emit(
      cause.invalid(field, keys.length, `${name} in body should have at least ${s.minProperties} properties`),
    );
    return;
  }
  if (s.maxProperties !== undefined && keys.length > s.maxProperties) {
    emit(cause.tooMany(field, keys.length, s.maxProperties));
    return;
  }
  if (s.additionalProperties === false) {
    for (const k of keys) {
      if (!s.properties?.has(k))
        emit(cause.invalid(field, k, `${name}.${k} in body is a forbidden property`));
    }
  } else if (typeof s.additionalProperties === 'object') {
    for (const k of keys) {
      if (!s.properties?.has(k))
        validateValue(
          s.additionalProperties,
          v[k] as JsonValue,
          `${name}.${k}`,
          correlateKey(s, corr, v, k),
          out,
        );
    }
  }
  for (const [k, prop] of s.properties ?? []) {
    if (k in v)
      validateValue(
        prop,
        v[k] as JsonValue,
        name === '' ? k : `${name}.${k}`,
        correlateKey(s, corr, v, k),
        out,
      );
  }
  for (const k of s.required) if (!(k in v)) emit(cause.required(errField(`${name}.${k}`)));
}

/**
 * Validates one value against one schema node, in kube-openapi's validator order. Errors raised at
 * this node are dropped when the node equals its correlated old value (ratcheting); its children
 * decide for themselves.
 */
function validateValue(
  s: Structural,
  v: JsonValue,
  name: string,
  corr: Correlation | undefined,
  out: FieldCause[],
): void {
  const entries: { cause: FieldCause; own: boolean }[] = [];
  const emit: Emit = (c, own = true) => {
    entries.push({ cause: c, own });
  };
  const children: FieldCause[] = [];
  const flushChildren = (): void => {
    for (const c of children.splice(0)) entries.push({ cause: c, own: false });
  };
  typeErrors(s, v, name, emit);
  if (v === null) {
    enumErrors(s, v, name, emit);
  } else {
    schemaPropsErrors(s, v, name, emit);
    if (typeof v === 'string') stringErrors(s, v, name, emit);
    if (typeof v === 'string' && s.knownFormat !== '' && !formatValid(s.knownFormat, v)) {
      emit(
        cause.typeInvalid(
          errField(name),
          v,
          `${name} in body must be of type ${s.knownFormat}: ${goQuote(v)}`,
        ),
      );
    }
    if (typeof v === 'number') numberErrors(s, v, name, emit);
    if (Array.isArray(v)) {
      sliceErrors(
        s,
        v,
        name,
        corr,
        (c) => {
          flushChildren();
          emit(c);
        },
        children,
      );
      flushChildren();
    }
    enumErrors(s, v, name, emit);
    if (isObject(v)) {
      objectErrors(
        s,
        v,
        name,
        corr,
        (c) => {
          flushChildren();
          emit(c);
        },
        children,
      );
      flushChildren();
    }
  }
  const ratchet = corr !== undefined && jsonEqual(corr.old, v);
  for (const e of entries) if (!(ratchet && e.own)) out.push(e.cause);
}

// ---------------------------------------------------------------------------------------------------
// Formats (k8s.io/kube-openapi/pkg/validation/strfmt).

const UUID_RE = /^[0-9a-f]{8}-?[0-9a-f]{4}-?[0-9a-f]{4}-?[0-9a-f]{4}-?[0-9a-f]{12}$/i;
const UUID3_RE = /^[0-9a-f]{8}-?[0-9a-f]{4}-?3[0-9a-f]{3}-?[0-9a-f]{4}-?[0-9a-f]{12}$/i;
const UUID4_RE = /^[0-9a-f]{8}-?[0-9a-f]{4}-?4[0-9a-f]{3}-?[89ab][0-9a-f]{3}-?[0-9a-f]{12}$/i;
const UUID5_RE = /^[0-9a-f]{8}-?[0-9a-f]{4}-?5[0-9a-f]{3}-?[89ab][0-9a-f]{3}-?[0-9a-f]{12}$/i;
const HOSTNAME_RE =
  /^([a-zA-Z0-9\p{S}\p{L}]((-?[a-zA-Z0-9\p{S}\p{L}]{0,62})?)|([a-zA-Z0-9\p{S}\p{L}](([a-zA-Z0-9\-\p{S}\p{L}]{0,61}[a-zA-Z0-9\p{S}\p{L}])?)(\.)){1,}([a-zA-Z0-9\p{S}\p{L}])(-?[a-zA-Z0-9\p{S}\p{L}]){1,62})$/u;
const BASE64_RE = /^(?:[A-Za-z0-9+/]{4})*(?:[A-Za-z0-9+/]{2}==|[A-Za-z0-9+/]{3}=|[A-Za-z0-9+/]{4})$/;
const RGB_PART = '(0|[1-9]\\d?|1\\d\\d?|2[0-4]\\d|25[0-5])';
const RGB_RE = new RegExp(`^rgb\\(\\s*${RGB_PART}\\s*,\\s*${RGB_PART}\\s*,\\s*${RGB_PART}\\s*\\)$`);
const DATE_TIME_RE = /^([0-9]{2}):([0-9]{2}):([0-9]{2})(.[0-9]+)?(z|([+-][0-9]{2}:[0-9]{2}))$/;
const GO_DURATION_RE = /^[-+]?(0|((\d+\.?\d*|\.\d+)(ns|us|µs|μs|ms|s|m|h))+)$/;
const UNIT_DURATION_RE =
  /^(\d+\s*(ns|us|µs|ms|s|m|h|d|w|nanoseconds?|microseconds?|milliseconds?|seconds?|sec|minutes?|min|hours?|hr|days?|weeks?|wk)\s*)+$/;

function isDate(s: string): boolean {
  const m = /^(\d{4})-(\d{2})-(\d{2})$/.exec(s);
  if (!m) return false;
  const [y, mo, d] = [Number(m[1]), Number(m[2]), Number(m[3])];
  const days = new Date(Date.UTC(y, mo, 0)).getUTCDate();
  return mo >= 1 && mo <= 12 && d >= 1 && d <= days;
}

function isDateTime(s: string): boolean {
  const parts = s.toLowerCase().split('t');
  if (parts.length < 2 || !isDate(parts[0] ?? '')) return false;
  const m = DATE_TIME_RE.exec(parts[1] ?? '');
  return m !== null && (m[1] ?? '') <= '23' && (m[2] ?? '') <= '59' && (m[3] ?? '') <= '59';
}

function ipBytes(s: string): number[] | undefined {
  if (/^\d+\.\d+\.\d+\.\d+$/.test(s)) {
    const parts = s.split('.').map((p) => (/^(0|[1-9]\d{0,2})$/.test(p) ? Number(p) : 256));
    return parts.every((p) => p <= 255) ? parts : undefined;
  }
  if (!s.includes(':')) return undefined;
  const halves = s.split('::');
  if (halves.length > 2) return undefined;
  const groups = (h: string): string[] => (h === '' ? [] : h.split(':'));
  const all = [...groups(halves[0] ?? ''), ...groups(halves[1] ?? '')];
  const last = all[all.length - 1] ?? '';
  const v4 = last.includes('.') ? ipBytes(last) : undefined;
  if (last.includes('.') && v4?.length !== 4) return undefined;
  const hex = v4 ? all.slice(0, -1) : all;
  if (!hex.every((g) => /^[0-9a-fA-F]{1,4}$/.test(g))) return undefined;
  const count = hex.length + (v4 ? 2 : 0);
  if (halves.length === 1 ? count !== 8 : count > 7) return undefined;
  return new Array<number>(16).fill(0);
}

function isMac(s: string): boolean {
  const octets = (n: number) => [
    new RegExp(`^[0-9a-fA-F]{2}(:[0-9a-fA-F]{2}){${n - 1}}$`),
    new RegExp(`^[0-9a-fA-F]{2}(-[0-9a-fA-F]{2}){${n - 1}}$`),
    new RegExp(`^[0-9a-fA-F]{4}(\\.[0-9a-fA-F]{4}){${n / 2 - 1}}$`),
  ];
  return [6, 8, 20].some((n) => octets(n).some((re) => re.test(s)));
}

function isIsbn10(s: string): boolean {
  const d = s.replace(/[\s-]/g, '');
  if (!/^\d{9}[\dX]$/.test(d)) return false;
  const sum = [...d].reduce((acc, c, i) => acc + (c === 'X' ? 10 : Number(c)) * (i + 1), 0);
  return sum % 11 === 0;
}

function isIsbn13(s: string): boolean {
  const d = s.replace(/[\s-]/g, '');
  if (!/^\d{13}$/.test(d)) return false;
  const sum = [...d].reduce((acc, c, i) => acc + Number(c) * (i % 2 === 0 ? 1 : 3), 0);
  return sum % 10 === 0;
}

function isCreditCard(s: string): boolean {
  const d = s.replace(/[^0-9]/g, '');
  if (
    !/^(?:4[0-9]{12}(?:[0-9]{3})?|5[1-5][0-9]{14}|(222[1-9]|22[3-9][0-9]|2[3-6][0-9]{2}|27[01][0-9]|2720)[0-9]{12}|6(?:011|5[0-9][0-9])[0-9]{12}|3[47][0-9]{13}|3(?:0[0-5]|[68][0-9])[0-9]{11}|(?:2131|1800|35\d{3})\d{11}|6[27][0-9]{14})$/.test(
      d,
    )
  ) {
    return false;
  }
  let sum = 0;
  [...d].reverse().forEach((c, i) => {
    let n = Number(c);
    if (i % 2 === 1) n = n * 2 > 9 ? n * 2 - 9 : n * 2;
    sum += n;
  });
  return sum % 10 === 0;
}

function formatValid(format: string, v: string): boolean {
  switch (format.replace(/-/g, '')) {
    case 'bsonobjectid':
      return /^[0-9a-fA-F]{24}$/.test(v);
    case 'uri':
      return /^([a-zA-Z][a-zA-Z0-9+.-]*:[^\s]*|\/[^\s]*)$/.test(v) && !v.includes('#');
    case 'email':
      return /^([^@\s<>]+@[^@\s<>]+|[^<>]*<[^@\s<>]+@[^@\s<>]+>)$/.test(v);
    case 'hostname':
      return HOSTNAME_RE.test(v) && v.length <= 255 && v.split('.').every((p) => Buffer.byteLength(p) <= 63);
    case 'ipv4':
      return !v.includes(':') && ipBytes(v) !== undefined;
    case 'ipv6':
      return v.includes(':') && ipBytes(v) !== undefined;
    case 'cidr': {
      const [addr = '', bits = ''] = v.split('/');
      const bytes = ipBytes(addr);
      const max = addr.includes(':') ? 128 : 32;
      return bytes !== undefined && /^\d{1,3}$/.test(bits) && Number(bits) <= max;
    }
    case 'mac':
      return isMac(v);
    case 'uuid':
      return UUID_RE.test(v);
    case 'uuid3':
      return UUID3_RE.test(v);
    case 'uuid4':
      return UUID4_RE.test(v);
    case 'uuid5':
      return UUID5_RE.test(v);
    case 'isbn':
      return isIsbn10(v) || isIsbn13(v);
    case 'isbn10':
      return isIsbn10(v);
    case 'isbn13':
      return isIsbn13(v);
    case 'creditcard':
      return isCreditCard(v);
    case 'ssn':
      return /^\d{3}[- ]?\d{2}[- ]?\d{4}$/.test(v);
    case 'hexcolor':
      return /^#?([0-9a-fA-F]{3}|[0-9a-fA-F]{6})$/.test(v);
    case 'rgbcolor':
      return RGB_RE.test(v);
    case 'byte':
      return BASE64_RE.test(v);
    case 'date':
      return isDate(v);
    case 'duration':
      return GO_DURATION_RE.test(v) || UNIT_DURATION_RE.test(v);
    case 'datetime':
      return isDateTime(v);
    case 'quantity':
      try {
        parseQuantity(v);
        return true;
      } catch {
        return false;
      }
    default:
      return true;
  }
}

// ---------------------------------------------------------------------------------------------------
// List-type invariants (structurallisttype.ValidateListSetsAndMaps). Paths use field.Path syntax.

const childPath = (parent: string | null, name: string): string =>
  parent === null ? name : `${parent}.${name}`;
const keyPath = (parent: string | null, key: string): string => `${parent ?? '<nil>'}[${key}]`;
const indexPath = (parent: string | null, i: number): string => `${parent ?? '<nil>'}[${i}]`;
const fieldString = (p: string | null): string => p ?? '<nil>';

function listSetErrors(s: Structural, v: JsonValue, path: string | null, out: FieldCause[]): void {
  if (isObject(v)) {
    if (typeof s.additionalProperties === 'object') {
      for (const [k, child] of Object.entries(v))
        listSetErrors(s.additionalProperties, child, keyPath(path, k), out);
    }
    for (const [k, child] of Object.entries(v)) {
      const prop = s.properties?.get(k);
      if (prop) listSetErrors(prop, child, childPath(path, k), out);
    }
    return;
  }
  if (!Array.isArray(v)) return;
  if (s.listType === 'set') {
    for (const i of nonUniqueIndices(v)) out.push(cause.duplicate(indexPath(path, i), v[i] as JsonValue));
  } else if (s.listType === 'map') {
    listMapErrors(s, v, path, out);
  }
  const items = s.items;
  if (items) {
    v.forEach((item, i) => {
      listSetErrors(items, item, indexPath(path, i), out);
    });
  }
}

/** Indices of the second occurrence of each repeated value (kube reports each duplicate once). */
function nonUniqueIndices(values: readonly (JsonValue | undefined)[]): number[] {
  const seen = new Map<string, number>();
  const out: number[] = [];
  values.forEach((v, i) => {
    const key = v === undefined ? '\u0000unspecified' : canonicalJson(v);
    const times = seen.get(key) ?? 0;
    seen.set(key, times + 1);
    if (times === 1) out.push(i);
  });
  return out;
}

function listMapErrors(s: Structural, v: JsonValue[], path: string | null, out: FieldCause[]): void {
  const bad = v.findIndex((x) => x !== null && !isObject(x));
  if (bad >= 0) {
    out.push(
      cause.invalid(
        indexPath(path, bad),
        v[bad] as JsonValue,
        'must be an object for an array of list-type map',
      ),
    );
    return;
  }
  if (v.length <= 1) return;
  const keyFields = s.listMapKeys;
  const keyOf = (x: JsonValue): JsonObject => {
    const key: JsonObject = {};
    if (isObject(x)) for (const k of keyFields) if (k in x) key[k] = x[k] as JsonValue;
    return key;
  };
  if (keyFields.length === 1) {
    const field = keyFields[0] as string;
    const keys = v.map((x) => (isObject(x) && field in x ? (x[field] as JsonValue) : undefined));
    for (const i of nonUniqueIndices(keys)) {
      const k = keys[i];
      out.push(cause.duplicate(indexPath(path, i), k === undefined ? {} : { [field]: k }));
    }
    return;
  }
  const keys = v.map(keyOf);
  for (const i of nonUniqueIndices(keys))
    out.push(cause.duplicate(indexPath(path, i), keys[i] as JsonObject));
}

// ---------------------------------------------------------------------------------------------------
// CEL validation (schema/cel.Validator), with kube's paths: field.Path from the root (nil).

interface CelWalk {
  readonly nodes: Map<Structural, CelNode>;
  readonly out: FieldCause[];
}

/** `undefined` = uncorrelatable; otherwise whether the nearest correlatable node equals its old value. */
type RatchetState = { readonly equal: boolean } | undefined;

function celFailure(rule: CompiledRule, path: string | null, type: string, message: string): FieldCause {
  const field = rule.fieldPath ? childPath(path, rule.fieldPath) : fieldString(path);
  switch (rule.source.reason) {
    case 'FieldValueForbidden':
      return cause.forbidden(field, message);
    case 'FieldValueRequired':
      return cause.required(field, message);
    case 'FieldValueDuplicate':
      return cause.duplicate(field, type);
    default:
      return cause.invalid(field, type, message);
  }
}

function validateRules(
  w: CelWalk,
  s: Structural,
  v: JsonValue,
  path: string | null,
  old: JsonValue | undefined,
  ratchet: boolean,
): void {
  const node = w.nodes.get(s);
  if (!node || node.rules.length === 0) return;
  const type = s.type;
  const self = node.toCel(v);
  const hasOld = old !== undefined && old !== null;
  const oldSelf = hasOld ? node.toCel(old) : undefined;
  for (const rule of node.rules) {
    if (rule.usesOldSelf && !hasOld && !rule.source.optionalOldSelf) continue;
    const outcome = evaluateRule(rule, self, oldSelf, hasOld);
    if (outcome.ok) continue;
    if (outcome.kind === 'error') {
      w.out.push(cause.invalid(fieldString(path), type, outcome.detail));
      continue;
    }
    if (!rule.usesOldSelf && ratchet) continue;
    w.out.push(celFailure(rule, path, type, outcome.message ?? ruleMessage(rule.source)));
  }
}

function celValidate(
  w: CelWalk,
  s: Structural,
  v: JsonValue | undefined,
  path: string | null,
  old: JsonValue | undefined,
  parentRatchet: RatchetState,
): void {
  if (v === undefined || v === null) return;
  const own: RatchetState = old !== undefined ? { equal: jsonEqual(old, v) } : undefined;
  const ratchet = own ?? parentRatchet;
  validateRules(w, s, v, path, old, ratchet?.equal ?? false);
  if (Array.isArray(v)) {
    const items = s.items;
    if (!items) return;
    const correlate = listMapCorrelator(s, old);
    v.forEach((item, i) => {
      celValidate(w, items, item, indexPath(path, i), correlate(item), ratchet);
    });
    return;
  }
  if (!isObject(v)) return;
  const correlatable = s.mapType !== 'atomic' && isObject(old);
  const oldFor = (k: string): JsonValue | undefined =>
    correlatable && isObject(old) && k in old ? (old[k] as JsonValue) : undefined;
  if (typeof s.additionalProperties === 'object') {
    for (const [k, child] of Object.entries(v))
      celValidate(w, s.additionalProperties, child, keyPath(path, k), oldFor(k), ratchet);
  }
  for (const [k, child] of Object.entries(v)) {
    const prop = s.properties?.get(k);
    if (prop) celValidate(w, prop, child, childPath(path, k), oldFor(k), ratchet);
  }
}

// ---------------------------------------------------------------------------------------------------
// The whole pipeline (customResourceStrategy.Validate / ValidateUpdate).

const BLOCKING = new Set([
  'FieldValueNotSupported',
  'FieldValueRequired',
  'FieldValueTooLong',
  'FieldValueTooMany',
  'FieldValueTypeInvalid',
]);

function validateObject(
  root: Structural,
  nodes: Map<Structural, CelNode>,
  obj: JsonObject,
  old: JsonObject | undefined,
): FieldCause[] {
  const errs: FieldCause[] = [];
  validateValue(root, obj, '', old ? { old } : undefined, errs);
  const oldListErrs: FieldCause[] = [];
  if (old) listSetErrors(root, old, null, oldListErrs);
  // On update, list invariants are only enforced if the old object honoured them.
  if (oldListErrs.length === 0) listSetErrors(root, obj, null, errs);
  if (errs.some((e) => BLOCKING.has(e.reason))) {
    errs.push(
      cause.invalid(
        '<nil>',
        null,
        'some validation rules were not checked because the object was invalid; correct the existing errors to complete validation',
      ),
    );
    return errs;
  }
  celValidate({ nodes, out: errs }, root, obj, null, old, undefined);
  return errs;
}
