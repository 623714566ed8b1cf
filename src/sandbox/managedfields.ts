// Server-side apply and metadata.managedFields bookkeeping, after structured-merge-diff's
// Updater.Apply/Updater.Update and k8s.io/apiserver's fieldmanager. Simplified but honest:
// - field sets use the real FieldsV1 encoding (`f:`, `k:{...}`, `v:`, `i:`, `.`) and the list
//   semantics of the schema in patch.ts (+listType map/set/atomic, atomic structs and maps);
// - merged associative lists keep live items in place and append new ones (SMD interleaves them);
// - a field set to null in an applied configuration is removed and owned by nobody;
// - pruning a field another manager owns part of keeps the whole field;
// - on the status subresource only `status` is tracked (the real reset fields vary by kind).
import { deepEqual, type FieldMeta, fieldMeta, isAtomic, isObject, listTypeOf, rootMeta } from './patch.ts';
import { badRequest, type JsonObject, type JsonValue, type KubeObject, StatusError } from './types.ts';

export interface ApplyOptions {
  manager: string;
  force: boolean;
  apiVersion: string;
  /** RFC 3339 */
  now: string;
  /** For merge keys. */
  kind: string;
  /** '' (default) or 'status' when applying to the status subresource. */
  subresource?: string;
  /** Whether the kind has a status subresource; defaults from the built-in kinds (custom resources: from the CRD). */
  hasStatusSubresource?: boolean;
}

export interface UpdateManagedFieldsOptions {
  apiVersion: string;
  now: string;
  /** '' or 'status'. */
  subresource: string;
  kind: string;
  /** As in ApplyOptions. */
  hasStatusSubresource?: boolean;
}

// ---------------------------------------------------------------------------------------------------
// Field sets
// ---------------------------------------------------------------------------------------------------

/** A path of FieldsV1 elements, e.g. ['f:spec', 'f:containers', 'k:{"name":"app"}', 'f:image']. */
export type FieldPath = readonly string[];
/** A set of paths, keyed by their JSON text. */
type FieldSet = Map<string, FieldPath>;

const keyOf = (p: FieldPath): string => JSON.stringify(p);
const add = (set: FieldSet, p: FieldPath): void => {
  set.set(keyOf(p), p);
};
const filterSet = (set: FieldSet, keep: (p: FieldPath) => boolean): FieldSet =>
  new Map([...set].filter(([, p]) => keep(p)));
const union = (...sets: FieldSet[]): FieldSet => new Map(sets.flatMap((s) => [...s]));
const minus = (a: FieldSet, b: FieldSet): FieldSet => new Map([...a].filter(([k]) => !b.has(k)));
const intersect = (a: FieldSet, b: FieldSet): FieldSet => new Map([...a].filter(([k]) => b.has(k)));

/** Whether `set` holds `p` or any path below it. */
function ownsWithin(set: FieldSet, p: FieldPath): boolean {
  const exact = keyOf(p);
  const below = `${exact.slice(0, -1)},`;
  for (const k of set.keys()) if (k === exact || k.startsWith(below)) return true;
  return false;
}

/** Go's string ordering (byte-wise for the ASCII these hold). */
const order = (a: string, b: string): number => (a < b ? -1 : a > b ? 1 : 0);

// SMD orders path elements: field names, then keys, then values, then indices.
const ELEMENT_RANK: Readonly<Record<string, number>> = { f: 0, k: 1, v: 2, i: 3 };

function compareElements(a: string, b: string): number {
  const rank = (ELEMENT_RANK[a[0] ?? ''] ?? 4) - (ELEMENT_RANK[b[0] ?? ''] ?? 4);
  if (rank !== 0) return rank;
  if (a.startsWith('i:') && b.startsWith('i:')) return Number(a.slice(2)) - Number(b.slice(2));
  return order(a, b);
}

interface TreeNode {
  self: boolean;
  children: Map<string, TreeNode>;
}

function toTree(set: FieldSet): TreeNode {
  const root: TreeNode = { self: false, children: new Map() };
  for (const path of set.values()) {
    let node = root;
    for (const el of path) {
      let child = node.children.get(el);
      if (!child) {
        child = { self: false, children: new Map() };
        node.children.set(el, child);
      }
      node = child;
    }
    node.self = true;
  }
  return root;
}

const sortedChildren = (node: TreeNode): [string, TreeNode][] =>
  [...node.children].sort(([a], [b]) => compareElements(a, b));

/** The FieldsV1 JSON of a set: leaves are {}, a node owned together with children gets ".": {}. */
export function encodeFieldsV1(set: FieldSet): JsonObject {
  const encode = (node: TreeNode): JsonObject => {
    const out: JsonObject = {};
    if (node.self && node.children.size > 0) out['.'] = {};
    for (const [el, child] of sortedChildren(node)) out[el] = encode(child);
    return out;
  };
  return encode(toTree(set));
}

export function decodeFieldsV1(
  value: JsonValue | undefined,
  prefix: FieldPath = [],
  out: FieldSet = new Map(),
): FieldSet {
  if (!isObject(value)) return out;
  for (const [el, child] of Object.entries(value)) {
    if (el === '.') {
      if (prefix.length > 0) add(out, prefix);
      continue;
    }
    const path = [...prefix, el];
    if (isObject(child) && Object.keys(child).length > 0) decodeFieldsV1(child, path, out);
    else add(out, path);
  }
  return out;
}

/** Paths in structured-merge-diff's Set.Iterate order: a node's members, then its children. */
function orderedPaths(set: FieldSet): FieldPath[] {
  const out: FieldPath[] = [];
  const walk = (node: TreeNode, prefix: FieldPath): void => {
    const children = sortedChildren(node);
    for (const [el, child] of children) if (child.self) out.push([...prefix, el]);
    for (const [el, child] of children) if (child.children.size > 0) walk(child, [...prefix, el]);
  };
  walk(toTree(set), []);
  return out;
}

/** fieldpath.Path.String(): `.spec.containers[name="app"].image`, `.metadata.finalizers[="x"]`. */
export function pathString(p: FieldPath): string {
  return p
    .map((el) => {
      const body = el.slice(2);
      if (el.startsWith('f:')) return `.${body}`;
      if (el.startsWith('v:')) return `[=${body}]`;
      if (el.startsWith('i:')) return `[${body}]`;
      const key = JSON.parse(body) as JsonObject;
      return `[${Object.keys(key)
        .map((k) => `${k}=${JSON.stringify(key[k])}`)
        .join(',')}]`;
    })
    .join('');
}

// ---------------------------------------------------------------------------------------------------
// Walking objects with the schema
// ---------------------------------------------------------------------------------------------------

/** The path element of a list item: `k:{...}` by its map keys, `v:` for sets, `i:` otherwise. */
function itemElement(item: JsonValue, list: FieldMeta | undefined, index: number): string {
  if (listTypeOf(list) === 'set') return `v:${JSON.stringify(item)}`;
  if (isObject(item)) {
    const key: JsonObject = {};
    for (const k of [...(list?.listMapKeys ?? [])].sort()) {
      const v = Object.hasOwn(item, k) ? item[k] : list?.keyDefaults?.[k];
      if (v !== undefined && v !== null) key[k] = v;
    }
    if (Object.keys(key).length > 0) return `k:${JSON.stringify(key)}`;
  }
  return `i:${index}`;
}

const isGranularMap = (v: JsonValue | undefined, meta: FieldMeta | undefined): v is JsonObject =>
  isObject(v) && !isAtomic(meta);
const isGranularList = (v: JsonValue | undefined, meta: FieldMeta | undefined): v is JsonValue[] =>
  Array.isArray(v) && listTypeOf(meta) !== 'atomic';

/** ToFieldSet of an applied configuration: leaves and list items, not the maps holding them. */
function appliedFields(v: JsonValue, meta: FieldMeta | undefined, path: FieldPath, out: FieldSet): void {
  if (isGranularMap(v, meta) && Object.keys(v).length > 0) {
    for (const [k, child] of Object.entries(v)) {
      if (child !== null) appliedFields(child, fieldMeta(meta, k), [...path, `f:${k}`], out);
    }
  } else if (isGranularList(v, meta) && v.length > 0) {
    v.forEach((item, i) => {
      const itemPath = [...path, itemElement(item, meta, i)];
      add(out, itemPath);
      if (listTypeOf(meta) === 'map' && isGranularMap(item, meta)) {
        for (const [k, child] of Object.entries(item)) {
          if (child !== null) appliedFields(child, fieldMeta(meta, k), [...itemPath, `f:${k}`], out);
        }
      }
    });
  } else if (path.length > 0) {
    add(out, path);
  }
}

/** Every node of a subtree, maps and lists included: what a comparison reports as added or removed. */
function subtreeFields(v: JsonValue, meta: FieldMeta | undefined, path: FieldPath, out: FieldSet): void {
  if (path.length > 0) add(out, path);
  if (isGranularMap(v, meta)) {
    for (const [k, child] of Object.entries(v))
      subtreeFields(child, fieldMeta(meta, k), [...path, `f:${k}`], out);
  } else if (isGranularList(v, meta)) {
    for (const [i, item] of v.entries()) itemFields(item, meta, [...path, itemElement(item, meta, i)], out);
  }
}

function itemFields(item: JsonValue, list: FieldMeta | undefined, path: FieldPath, out: FieldSet): void {
  add(out, path);
  if (listTypeOf(list) === 'map' && isGranularMap(item, list)) {
    for (const [k, child] of Object.entries(item))
      subtreeFields(child, fieldMeta(list, k), [...path, `f:${k}`], out);
  }
}

interface Comparison {
  added: FieldSet;
  removed: FieldSet;
  modified: FieldSet;
}

function compareValues(
  before: JsonValue | undefined,
  after: JsonValue | undefined,
  meta: FieldMeta | undefined,
  path: FieldPath,
  c: Comparison,
): void {
  if (before === undefined && after === undefined) return;
  if (before === undefined) subtreeFields(after as JsonValue, meta, path, c.added);
  else if (after === undefined) subtreeFields(before, meta, path, c.removed);
  else if (isGranularMap(before, meta) && isGranularMap(after, meta)) {
    for (const k of new Set([...Object.keys(before), ...Object.keys(after)])) {
      compareValues(before[k], after[k], fieldMeta(meta, k), [...path, `f:${k}`], c);
    }
  } else if (isGranularList(before, meta) && isGranularList(after, meta)) {
    compareLists(before, after, meta, path, c);
  } else if (!deepEqual(before, after)) {
    add(c.modified, path);
  }
}

function compareLists(
  before: JsonValue[],
  after: JsonValue[],
  meta: FieldMeta | undefined,
  path: FieldPath,
  c: Comparison,
): void {
  const index = (list: JsonValue[]): Map<string, JsonValue> =>
    new Map(list.map((item, i) => [itemElement(item, meta, i), item] as const));
  const old = index(before);
  const next = index(after);
  for (const [el, item] of next) {
    const itemPath = [...path, el];
    const prior = old.get(el);
    if (prior === undefined) itemFields(item, meta, itemPath, c.added);
    else if (listTypeOf(meta) === 'map' && isGranularMap(prior, meta) && isGranularMap(item, meta)) {
      for (const k of new Set([...Object.keys(prior), ...Object.keys(item)])) {
        compareValues(prior[k], item[k], fieldMeta(meta, k), [...itemPath, `f:${k}`], c);
      }
    } else if (!deepEqual(prior, item)) {
      add(c.modified, itemPath);
    }
  }
  for (const [el, item] of old) if (!next.has(el)) itemFields(item, meta, [...path, el], c.removed);
}

function compare(
  before: JsonObject,
  after: JsonObject,
  meta: FieldMeta,
  keep: (p: FieldPath) => boolean,
): Comparison {
  const c: Comparison = { added: new Map(), removed: new Map(), modified: new Map() };
  compareValues(before, after, meta, [], c);
  return {
    added: filterSet(c.added, keep),
    removed: filterSet(c.removed, keep),
    modified: filterSet(c.modified, keep),
  };
}

/** Merges an applied configuration into the live object: maps and keyed lists merged, sets united. */
function applyMerge(live: JsonValue | undefined, config: JsonValue, meta: FieldMeta | undefined): JsonValue {
  if (isGranularMap(config, meta)) {
    const out: JsonObject = isObject(live) ? { ...live } : {};
    for (const [k, v] of Object.entries(config)) {
      if (v === null) delete out[k];
      else out[k] = applyMerge(out[k], v, fieldMeta(meta, k));
    }
    return out;
  }
  if (isGranularList(config, meta) && Array.isArray(live)) {
    const out = [...live];
    const ids = out.map((item, i) => itemElement(item, meta, i));
    config.forEach((item, i) => {
      const at = ids.indexOf(itemElement(item, meta, i));
      const current = out[at];
      if (at < 0 || current === undefined) {
        out.push(structuredClone(item));
        ids.push(itemElement(item, meta, out.length - 1));
      } else if (listTypeOf(meta) === 'map') {
        out[at] = applyMerge(current, item, meta);
      }
    });
    return out;
  }
  return structuredClone(config);
}

/** Removes the node at `path` (a field, a keyed item or a set value) if it is there. */
function removePath(root: JsonObject, path: FieldPath, meta: FieldMeta): void {
  let node: JsonValue | undefined = root;
  let m: FieldMeta | undefined = meta;
  for (const [i, el] of path.entries()) {
    const last = i === path.length - 1;
    if (el.startsWith('f:')) {
      if (!isObject(node)) return;
      const name = el.slice(2);
      if (last) {
        delete node[name];
        return;
      }
      m = fieldMeta(m, name);
      node = node[name];
    } else {
      if (!Array.isArray(node)) return;
      const list: JsonValue[] = node;
      const at = list.findIndex((item, idx) => itemElement(item, m, idx) === el);
      if (at < 0) return;
      if (last) {
        list.splice(at, 1);
        return;
      }
      node = list[at];
    }
  }
}

// ---------------------------------------------------------------------------------------------------
// Which fields count
// ---------------------------------------------------------------------------------------------------

// fieldmanager's stripMeta: system fields are never owned.
const STRIPPED: readonly FieldPath[] = [
  ['f:apiVersion'],
  ['f:kind'],
  ['f:metadata', 'f:name'],
  ['f:metadata', 'f:namespace'],
  ['f:metadata', 'f:uid'],
  ['f:metadata', 'f:resourceVersion'],
  ['f:metadata', 'f:generation'],
  ['f:metadata', 'f:creationTimestamp'],
  ['f:metadata', 'f:selfLink'],
  ['f:metadata', 'f:managedFields'],
];

const isStripped = (p: FieldPath): boolean =>
  (p.length === 1 && p[0] === 'f:metadata') || STRIPPED.some((s) => s.every((el, i) => p[i] === el));

/** Built-in kinds served with a status subresource, whose main resource ignores status. */
const STATUS_SUBRESOURCE_KINDS: ReadonlySet<string> = new Set([
  'Pod',
  'Node',
  'Namespace',
  'Service',
  'Deployment',
  'StatefulSet',
  'ReplicaSet',
  'DaemonSet',
  'Job',
  'CronJob',
  'ReplicationController',
  'PersistentVolume',
  'PersistentVolumeClaim',
  'PodDisruptionBudget',
  'HorizontalPodAutoscaler',
  'ResourceQuota',
  'CustomResourceDefinition',
]);

type Scope = 'all' | 'mainResource' | 'status';

function scopeOf(kind: string, subresource: string, hasStatusSubresource: boolean | undefined): Scope {
  if (subresource === 'status') return 'status';
  return (hasStatusSubresource ?? STATUS_SUBRESOURCE_KINDS.has(kind)) ? 'mainResource' : 'all';
}

function counts(scope: Scope): (p: FieldPath) => boolean {
  return (p) => {
    if (isStripped(p)) return false;
    const status = p[0] === 'f:status';
    return scope === 'all' || (scope === 'status' ? status : !status);
  };
}

/** What of an applied configuration reaches the object in this scope. */
function scoped(config: JsonObject, scope: Scope): JsonObject {
  if (scope === 'all') return config;
  if (scope === 'mainResource') {
    const { status: _ignored, ...rest } = config;
    return rest;
  }
  const meta = isObject(config.metadata) ? config.metadata : {};
  const identity: JsonObject = {};
  for (const k of ['name', 'namespace'] as const) if (meta[k] !== undefined) identity[k] = meta[k];
  const out: JsonObject = { metadata: identity };
  for (const k of ['apiVersion', 'kind', 'status'] as const) if (config[k] !== undefined) out[k] = config[k];
  return out;
}

// ---------------------------------------------------------------------------------------------------
// managedFields entries
// ---------------------------------------------------------------------------------------------------

interface Manager {
  manager: string;
  operation: string;
  apiVersion: string;
  time?: string;
  subresource: string;
  fields: FieldSet;
}

/** BuildManagerIdentifier: the entry without time and fields (and without apiVersion for appliers). */
function identity(m: Pick<Manager, 'manager' | 'operation' | 'apiVersion' | 'subresource'>): string {
  const id: JsonObject = { manager: m.manager, operation: m.operation };
  if (m.operation !== 'Apply' && m.apiVersion) id.apiVersion = m.apiVersion;
  if (m.subresource) id.subresource = m.subresource;
  return JSON.stringify(id);
}

const str = (v: JsonValue | undefined): string => (typeof v === 'string' ? v : '');

function decodeManagers(entries: unknown): Map<string, Manager> {
  const managers = new Map<string, Manager>();
  if (!Array.isArray(entries)) return managers;
  for (const e of entries) {
    if (!isObject(e)) continue;
    const m: Manager = {
      manager: str(e.manager),
      operation: str(e.operation),
      apiVersion: str(e.apiVersion),
      subresource: str(e.subresource),
      fields: decodeFieldsV1(e.fieldsV1),
    };
    if (typeof e.time === 'string') m.time = e.time;
    const id = identity(m);
    const prior = managers.get(id);
    managers.set(id, prior ? { ...m, fields: union(prior.fields, m.fields) } : m);
  }
  return managers;
}

const seconds = (time: string | undefined): number => {
  const ms = time ? Date.parse(time) : Number.NaN;
  return Number.isNaN(ms) ? 0 : Math.floor(ms / 1000);
};

/** Entries in the apiserver's order: operation, time, manager, apiVersion, subresource. */
function encodeManagers(managers: Map<string, Manager>): JsonObject[] {
  const sorted = [...managers.values()]
    .filter((m) => m.fields.size > 0)
    .sort(
      (a, b) =>
        order(a.operation, b.operation) ||
        seconds(a.time) - seconds(b.time) ||
        order(a.manager, b.manager) ||
        order(a.apiVersion, b.apiVersion) ||
        order(a.subresource, b.subresource),
    );
  return sorted.map((m) => {
    const entry: JsonObject = { manager: m.manager, operation: m.operation, apiVersion: m.apiVersion };
    if (m.time !== undefined) entry.time = m.time;
    entry.fieldsType = 'FieldsV1';
    entry.fieldsV1 = encodeFieldsV1(m.fields);
    if (m.subresource) entry.subresource = m.subresource;
    return entry;
  });
}

/** printManager of the conflict error: `"name"`, `"name" with subresource "status"`, `... using apps/v1`. */
function printManager(m: Manager): string {
  let out = JSON.stringify(m.manager);
  if (m.subresource) out += ` with subresource ${JSON.stringify(m.subresource)}`;
  if (m.operation === 'Update') out += ` using ${m.apiVersion}`;
  return out;
}

function conflictError(conflicts: { id: string; manager: Manager; paths: FieldPath[] }[]): StatusError {
  const byManager = [...conflicts].sort((a, b) => order(a.id, b.id));
  const all = byManager.flatMap((c) => c.paths.map((p) => ({ manager: c.manager, path: p })));
  let message: string;
  const first = all[0];
  if (all.length === 1 && first) {
    message = `Apply failed with 1 conflict: conflict with ${printManager(first.manager)}: ${pathString(first.path)}`;
  } else {
    const lines = byManager.flatMap((c) => [
      `conflicts with ${printManager(c.manager)}:`,
      ...c.paths.map((p) => `- ${pathString(p)}`),
    ]);
    message = `Apply failed with ${all.length} conflicts: ${lines.join('\n')}`;
  }
  return new StatusError(409, 'Conflict', message, {
    causes: all.map((c) => ({
      reason: 'FieldManagerConflict',
      message: `conflict with ${printManager(c.manager)}`,
      field: pathString(c.path),
    })),
  });
}

const asJson = (o: KubeObject): JsonObject => structuredClone(o) as unknown as JsonObject;

/** The object without its managedFields, which never take part in comparisons. */
function view(o: KubeObject | undefined): JsonObject {
  if (!o) return {};
  const v = asJson(o);
  if (isObject(v.metadata)) delete v.metadata.managedFields;
  return v;
}

// ---------------------------------------------------------------------------------------------------
// Server-side apply
// ---------------------------------------------------------------------------------------------------

/**
 * Server-side apply: `existing` undefined means create. Merges the applied configuration into the
 * live object, removes fields this manager applied before but no longer applies (unless another
 * manager owns them too) and records ownership as an 'Apply' entry in metadata.managedFields.
 * A field owned by another manager whose value the apply would change is a 409 Conflict worded
 * like kube-apiserver's; force=true takes ownership instead.
 */
export function serverSideApply(
  existing: KubeObject | undefined,
  applied: KubeObject,
  opts: ApplyOptions,
): KubeObject {
  if (!isObject(applied as unknown as JsonValue) || !isObject(applied.metadata as unknown as JsonValue)) {
    throw badRequest('the applied configuration must be an object with metadata');
  }
  if (applied.metadata.managedFields !== undefined) throw badRequest('metadata.managedFields must be nil');
  const meta = rootMeta(opts.kind);
  const subresource = opts.subresource ?? '';
  const scope = scopeOf(opts.kind, subresource, opts.hasStatusSubresource);
  const keep = counts(scope);
  const config = scoped(asJson(applied), scope);
  const live = view(existing);
  const managers = decodeManagers(existing?.metadata.managedFields);

  const self: Manager = {
    manager: opts.manager,
    operation: 'Apply',
    apiVersion: opts.apiVersion,
    time: opts.now,
    subresource,
    fields: new Map(),
  };
  const selfId = identity(self);
  const previous = managers.get(selfId)?.fields ?? new Map<string, FieldPath>();
  const applyFields = new Map<string, FieldPath>();
  appliedFields(config, meta, [], applyFields);
  self.fields = filterSet(applyFields, keep);
  managers.delete(selfId);

  const merged = applyMerge(live, config, meta) as JsonObject;
  // Fields dropped from this manager's configuration go, unless someone else owns them.
  for (const p of minus(previous, self.fields).values()) {
    if (![...managers.values()].some((m) => ownsWithin(m.fields, p))) removePath(merged, p, meta);
  }

  const change = compare(live, merged, meta, keep);
  const touched = union(change.modified, change.added);
  const conflicts = [...managers]
    .map(([id, manager]) => ({ id, manager, paths: orderedPaths(intersect(manager.fields, touched)) }))
    .filter((c) => c.paths.length > 0);
  if (conflicts.length > 0 && !opts.force) throw conflictError(conflicts);
  for (const m of managers.values()) m.fields = minus(minus(m.fields, touched), change.removed);
  managers.set(selfId, self);

  const metadata = isObject(merged.metadata) ? merged.metadata : {};
  metadata.managedFields = encodeManagers(managers);
  merged.metadata = metadata;
  return merged as unknown as KubeObject;
}

// ---------------------------------------------------------------------------------------------------
// Ordinary writes
// ---------------------------------------------------------------------------------------------------

/**
 * The managedFields an update starts from (decodeLiveOrNew): a request may replace them, or reset
 * them with `[{}]`; otherwise, and always on subresources, the stored ones are kept.
 */
function startingManagers(
  old: KubeObject | undefined,
  next: KubeObject,
  subresource: string,
): Map<string, Manager> {
  const requested: unknown = next.metadata.managedFields;
  if (subresource === '' && Array.isArray(requested)) {
    const [only] = requested;
    if (requested.length === 1 && isObject(only) && Object.keys(only).length === 0) return new Map();
    const decoded = decodeManagers(requested);
    if (decoded.size > 0) return decoded;
  }
  return decodeManagers(old?.metadata.managedFields);
}

/**
 * For ordinary writes (create/update/patch): records `manager` with operation 'Update' as owner of
 * the fields it changed (old undefined = create: owns all set fields), removing those fields and
 * removed ones from every other manager and dropping managers left with none. Returns the new
 * managedFields. Field sets exclude system metadata, and `status` on the main resource of kinds
 * with a status subresource (on the status subresource only `status` counts).
 */
export function updateManagedFields(
  old: KubeObject | undefined,
  next: KubeObject,
  manager: string,
  opts: UpdateManagedFieldsOptions,
): JsonObject[] {
  const meta = rootMeta(opts.kind);
  const keep = counts(scopeOf(opts.kind, opts.subresource, opts.hasStatusSubresource));
  const managers = startingManagers(old, next, opts.subresource);
  const after = view(next);
  // A new object is compared with an empty one of its type, whose metadata/spec/status exist already.
  const before = old
    ? view(old)
    : {
        metadata: {},
        ...(isObject(after.spec) ? { spec: {} } : {}),
        ...(isObject(after.status) ? { status: {} } : {}),
      };
  const change = compare(before, after, meta, keep);
  const touched = union(change.modified, change.added);
  for (const m of managers.values()) m.fields = minus(minus(m.fields, touched), change.removed);
  if (touched.size > 0) {
    const self: Manager = {
      manager,
      operation: 'Update',
      apiVersion: opts.apiVersion,
      time: opts.now,
      subresource: opts.subresource,
      fields: new Map(),
    };
    const id = identity(self);
    self.fields = union(managers.get(id)?.fields ?? new Map(), touched);
    managers.set(id, self);
  }
  return encodeManagers(managers);
}
