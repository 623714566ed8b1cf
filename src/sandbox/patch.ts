// The three PATCH flavours of kube-apiserver, as pure functions over stored JSON objects:
// RFC 6902 JSON patch, RFC 7386 merge patch (with the quirks of the evanphx/json-patch library the
// apiserver uses) and strategic merge patch, ported from k8s.io/apimachinery/pkg/util/strategicpatch
// (the apply half) with the patchStrategy/patchMergeKey struct tags of k8s.io/api.
// Errors carry the HTTP status the real server answers with (see interpretStrategicMergePatchError
// and jsonPatcher.applyJSPatch in k8s.io/apiserver/pkg/endpoints/handlers/patch.go).
import jsonpatch, { type Operation } from 'fast-json-patch';
import { badRequest, type JsonObject, type JsonValue, type KubeObject, StatusError } from './types.ts';

// ---------------------------------------------------------------------------------------------------
// Schema: the subset of k8s.io/api struct tags that changes how objects merge.
// ---------------------------------------------------------------------------------------------------

/** Server-side apply list semantics (+listType). Lists without one are atomic. */
export type ListType = 'atomic' | 'map' | 'set';

/** Merge metadata of one field, mirroring its Go struct tags and +list markers. */
export interface FieldMeta {
  /** Name of the struct schema of the value (for lists: of each item), a key of the schema table. */
  readonly type?: string;
  /** The `patchStrategy` tag split on ',' ('merge', 'retainKeys', 'replace'). */
  readonly patchStrategy?: readonly string[];
  /** The `patchMergeKey` tag. */
  readonly patchMergeKey?: string;
  /** +listType, for server-side apply. */
  readonly listType?: ListType;
  /** +listMapKey values, for server-side apply (`k:{...}` identity of items). */
  readonly listMapKeys?: readonly string[];
  /** Values the apiserver defaults list map keys to (ports' protocol), so identities match. */
  readonly keyDefaults?: JsonObject;
  /** +mapType=atomic / +structType=atomic: owned and replaced as a whole. */
  readonly atomic?: boolean;
}

type StructMeta = Readonly<Record<string, FieldMeta>>;

const mapBy = (key: string, extra: Partial<FieldMeta> = {}): FieldMeta => ({
  patchStrategy: ['merge'],
  patchMergeKey: key,
  listType: 'map',
  listMapKeys: [key],
  ...extra,
});

const META: FieldMeta = { type: 'ObjectMeta' };
const TEMPLATE: FieldMeta = { type: 'PodTemplateSpec' };
// metav1.LabelSelector is +structType=atomic.
const LABEL_SELECTOR: FieldMeta = { type: 'LabelSelector' };
const CONDITIONS = mapBy('type');
const ATOMIC_TYPES: ReadonlySet<string> = new Set(['LabelSelector', 'OwnerReference']);

// Tags verified against k8s.io/api core/v1, apps/v1, batch/v1, admissionregistration/v1 and
// k8s.io/apimachinery meta/v1 types.go. Lists absent here have no patchStrategy (tolerations,
// readinessGates, node taints, container statuses, ...) and are replaced wholesale.
const STRUCTS: Readonly<Record<string, StructMeta>> = {
  ObjectMeta: {
    ownerReferences: mapBy('uid', { type: 'OwnerReference' }),
    finalizers: { patchStrategy: ['merge'], listType: 'set' },
  },
  PodTemplateSpec: { metadata: META, spec: { type: 'PodSpec' } },
  PodSpec: {
    volumes: mapBy('name', { patchStrategy: ['merge', 'retainKeys'] }),
    initContainers: mapBy('name', { type: 'Container' }),
    containers: mapBy('name', { type: 'Container' }),
    ephemeralContainers: mapBy('name', { type: 'Container' }),
    imagePullSecrets: mapBy('name'),
    hostAliases: mapBy('ip'),
    topologySpreadConstraints: mapBy('topologyKey', {
      listMapKeys: ['topologyKey', 'whenUnsatisfiable'],
      type: 'TopologySpreadConstraint',
    }),
    schedulingGates: mapBy('name'),
    resourceClaims: mapBy('name', { patchStrategy: ['merge', 'retainKeys'] }),
    nodeSelector: { atomic: true },
    resources: { type: 'ResourceRequirements' },
  },
  // EphemeralContainerCommon carries the same tags as Container.
  Container: {
    ports: mapBy('containerPort', {
      listMapKeys: ['containerPort', 'protocol'],
      keyDefaults: { protocol: 'TCP' },
    }),
    env: mapBy('name'),
    volumeMounts: mapBy('mountPath'),
    volumeDevices: mapBy('devicePath'),
    resources: { type: 'ResourceRequirements' },
  },
  ResourceRequirements: { claims: { listType: 'map', listMapKeys: ['name'] } },
  TopologySpreadConstraint: { labelSelector: LABEL_SELECTOR },
  PodStatus: {
    conditions: CONDITIONS,
    // patchStrategy merge on ip, but +listType=atomic for apply.
    hostIPs: { patchStrategy: ['merge'], patchMergeKey: 'ip' },
    podIPs: mapBy('ip'),
    resourceClaimStatuses: mapBy('name', { patchStrategy: ['merge', 'retainKeys'] }),
  },
  NodeSpec: { podCIDRs: { patchStrategy: ['merge'], listType: 'set' } },
  NodeStatus: { conditions: CONDITIONS, addresses: mapBy('type') },
  ServiceSpec: {
    ports: mapBy('port', { listMapKeys: ['port', 'protocol'], keyDefaults: { protocol: 'TCP' } }),
    selector: { atomic: true },
  },
  DeploymentSpec: {
    selector: LABEL_SELECTOR,
    template: TEMPLATE,
    strategy: { patchStrategy: ['retainKeys'] },
  },
  // StatefulSetSpec, ReplicaSetSpec, DaemonSetSpec and JobSpec share these two tagged fields.
  WorkloadSpec: { selector: LABEL_SELECTOR, template: TEMPLATE },
  ReplicationControllerSpec: { selector: { atomic: true }, template: TEMPLATE },
  ConditionsStatus: { conditions: CONDITIONS },
  // JobStatus.conditions: patchStrategy merge on type, but +listType=atomic for apply.
  JobStatus: { conditions: { patchStrategy: ['merge'], patchMergeKey: 'type' } },
  CronJobSpec: { jobTemplate: { type: 'JobTemplateSpec' } },
  JobTemplateSpec: { metadata: META, spec: { type: 'WorkloadSpec' } },
  // Root of any object: custom resources and built-in kinds without tagged fields of their own.
  Object: { metadata: META },
};

const KIND_ROOTS: Readonly<Record<string, StructMeta>> = {
  Pod: { metadata: META, spec: { type: 'PodSpec' }, status: { type: 'PodStatus' } },
  PodTemplate: { metadata: META, template: TEMPLATE },
  ReplicationController: { metadata: META, spec: { type: 'ReplicationControllerSpec' } },
  Deployment: { metadata: META, spec: { type: 'DeploymentSpec' }, status: { type: 'ConditionsStatus' } },
  StatefulSet: { metadata: META, spec: { type: 'WorkloadSpec' }, status: { type: 'ConditionsStatus' } },
  ReplicaSet: { metadata: META, spec: { type: 'WorkloadSpec' }, status: { type: 'ConditionsStatus' } },
  DaemonSet: { metadata: META, spec: { type: 'WorkloadSpec' }, status: { type: 'ConditionsStatus' } },
  Job: { metadata: META, spec: { type: 'WorkloadSpec' }, status: { type: 'JobStatus' } },
  CronJob: { metadata: META, spec: { type: 'CronJobSpec' } },
  Node: { metadata: META, spec: { type: 'NodeSpec' }, status: { type: 'NodeStatus' } },
  Service: { metadata: META, spec: { type: 'ServiceSpec' } },
  ServiceAccount: { metadata: META, secrets: mapBy('name') },
  Namespace: { metadata: META, status: { type: 'ConditionsStatus' } },
  MutatingWebhookConfiguration: { metadata: META, webhooks: mapBy('name') },
  ValidatingWebhookConfiguration: { metadata: META, webhooks: mapBy('name') },
};

/**
 * Built-in kinds whose own fields carry no merge tags the sandbox models: strategic merge works on
 * them with metadata's tags, maps merged and every other list replaced.
 */
const PLAIN_BUILTIN_KINDS: readonly string[] = [
  'ConfigMap',
  'Secret',
  'Event',
  'Endpoints',
  'EndpointSlice',
  'Lease',
  'LimitRange',
  'ControllerRevision',
  'PriorityClass',
  'Role',
  'RoleBinding',
  'ClusterRole',
  'ClusterRoleBinding',
  'CustomResourceDefinition',
];

/** Kinds for which the server accepts application/strategic-merge-patch+json. */
export const STRATEGIC_MERGE_KINDS: ReadonlySet<string> = new Set([
  ...Object.keys(KIND_ROOTS),
  ...PLAIN_BUILTIN_KINDS,
]);

/** Whether strategic merge is defined for this kind (custom resources are not: the server answers 415). */
export function supportsStrategicMerge(kind: string): boolean {
  return STRATEGIC_MERGE_KINDS.has(kind);
}

/** The field metadata of an object's root for `kind` (unknown kinds get only ObjectMeta's tags). */
export function rootMeta(kind: string): FieldMeta {
  return { type: Object.hasOwn(KIND_ROOTS, kind) ? `kind:${kind}` : 'Object' };
}

function structOf(type: string | undefined): StructMeta | undefined {
  if (type === undefined) return undefined;
  if (type.startsWith('kind:')) return KIND_ROOTS[type.slice(5)];
  return STRUCTS[type];
}

/** Metadata of field `key` inside a value described by `parent` (undefined: untagged). */
export function fieldMeta(parent: FieldMeta | undefined, key: string): FieldMeta | undefined {
  const fields = structOf(parent?.type);
  return fields && Object.hasOwn(fields, key) ? fields[key] : undefined;
}

export function isAtomic(meta: FieldMeta | undefined): boolean {
  return meta?.atomic === true || (meta?.type !== undefined && ATOMIC_TYPES.has(meta.type));
}

export function listTypeOf(meta: FieldMeta | undefined): ListType {
  return meta?.listType ?? 'atomic';
}

// ---------------------------------------------------------------------------------------------------
// JSON helpers
// ---------------------------------------------------------------------------------------------------

export function isObject(v: unknown): v is JsonObject {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}

export function deepEqual(a: unknown, b: unknown): boolean {
  if (a === b) return true;
  if (Array.isArray(a)) {
    return Array.isArray(b) && a.length === b.length && a.every((v, i) => deepEqual(v, b[i]));
  }
  if (isObject(a) && isObject(b)) {
    const keys = Object.keys(a);
    return (
      keys.length === Object.keys(b).length && keys.every((k) => Object.hasOwn(b, k) && deepEqual(a[k], b[k]))
    );
  }
  return false;
}

const clone = <T>(v: T): T => structuredClone(v);

/** Results are objects; a patch that removed metadata still yields a KubeObject for the caller to reject. */
function asKubeObject(v: JsonObject): KubeObject {
  if (!isObject(v.metadata)) v.metadata = {};
  return v as unknown as KubeObject;
}

/** Renders a value the way Go's %v prints decoded JSON, for error messages that match the server's. */
export function goFormat(v: JsonValue | undefined): string {
  if (v === null || v === undefined) return '<nil>';
  if (Array.isArray(v)) return `[${v.map(goFormat).join(' ')}]`;
  if (isObject(v)) {
    const keys = Object.keys(v).sort();
    return `map[${keys.map((k) => `${k}:${goFormat(v[k])}`).join(' ')}]`;
  }
  return String(v);
}

type JsonKind = 'array' | 'object' | 'null' | 'string' | 'number' | 'boolean';

function jsonKind(v: JsonValue): JsonKind {
  if (Array.isArray(v)) return 'array';
  if (v === null) return 'null';
  if (typeof v === 'object') return 'object';
  return typeof v as 'string' | 'number' | 'boolean';
}

/** Go's reflect Kind name of a decoded JSON value. */
function goKind(v: JsonValue | undefined): string {
  if (Array.isArray(v)) return 'slice';
  if (isObject(v)) return 'map';
  if (typeof v === 'boolean') return 'bool';
  if (typeof v === 'number') return 'float64';
  if (typeof v === 'string') return 'string';
  return 'invalid';
}

/** The JSON type name encoding/json reports in UnmarshalTypeError. */
function jsonTypeName(v: unknown): string {
  if (Array.isArray(v)) return 'array';
  if (typeof v === 'boolean') return 'bool';
  if (typeof v === 'number') return 'number';
  if (typeof v === 'string') return 'string';
  return 'object';
}

// ---------------------------------------------------------------------------------------------------
// Errors, with the codes patch.go gives them
// ---------------------------------------------------------------------------------------------------

/** NewGenericServerResponse(422, ...) keeps only this fixed message; the library's text goes in a cause. */
const INVALID_PATCH_MESSAGE = 'the server rejected our request due to an error in our request';

function unprocessable(detail: string, field = ''): StatusError {
  return new StatusError(422, 'Invalid', INVALID_PATCH_MESSAGE, {
    causes: [{ reason: '', message: detail, field }],
  });
}

/** Strategic merge errors the apiserver does not map to a status surface as 500 with an empty reason. */
const smpFailure = (message: string): StatusError => new StatusError(500, '', message);

// mergepatch sentinel errors, and the status interpretStrategicMergePatchError gives each.
const errBadPrimitiveList = (): StatusError => badRequest('invalid patch format of primitive list');
const errBadRetainKeys = (): StatusError => badRequest('invalid patch format of retainKeys');
const errBadSetElementOrder = (): StatusError => badRequest('invalid patch format of setElementOrder list');
const errNoListOfLists = (): StatusError => unprocessable('lists of lists are not supported');
const errNoMergeKey = (m: JsonValue, key: string): StatusError =>
  smpFailure(`map: ${goFormat(m)} does not contain declared merge key: ${key}`);
const errBadArgType = (expected: string, actual: JsonValue | undefined): StatusError =>
  smpFailure(`expected a ${expected}, but received a ${goKind(actual)}`);
const errBadPatchType = (t: JsonValue | undefined, m: JsonObject): StatusError =>
  smpFailure(`unknown patch type: ${goFormat(t)} in map: ${goFormat(m)}`);

// ---------------------------------------------------------------------------------------------------
// JSON patch (RFC 6902)
// ---------------------------------------------------------------------------------------------------

/** maxJSONPatchOperations in patch.go. */
export const MAX_JSON_PATCH_OPERATIONS = 10000;

/**
 * RFC 6902 incl. `test`. A document that is not an array of objects is 400 BadRequest; an operation
 * that fails to apply (missing path, failed test, unknown op) is 422 Invalid, whose message is the
 * apiserver's fixed text, with the library's message as the cause. Never mutates its input.
 */
export function applyJsonPatch(target: KubeObject, patch: unknown): KubeObject {
  if (patch === null) return clone(target); // json.Unmarshal("null") yields an empty patch
  if (!Array.isArray(patch)) {
    throw badRequest(`json: cannot unmarshal ${jsonTypeName(patch)} into Go value of type jsonpatch.Patch`);
  }
  for (const op of patch) {
    if (!isObject(op)) {
      throw badRequest(
        `json: cannot unmarshal ${jsonTypeName(op)} into Go value of type jsonpatch.Operation`,
      );
    }
  }
  if (patch.length > MAX_JSON_PATCH_OPERATIONS) {
    throw new StatusError(
      413,
      'RequestEntityTooLarge',
      `Request entity too large: The allowed maximum operations in a JSON patch is ${MAX_JSON_PATCH_OPERATIONS}, got ${patch.length}`,
    );
  }
  let result: unknown;
  try {
    // Both cloned: the library inserts patch values by reference and mutates the document it gets.
    result = jsonpatch.applyPatch(clone(target), clone(patch) as Operation[], true, true).newDocument;
  } catch (err) {
    if (!(err instanceof jsonpatch.JsonPatchError)) throw err;
    const firstLine = err.message.split('\n')[0] ?? err.message;
    throw unprocessable(`${firstLine} (operation ${err.index ?? 0})`, err.operation?.path ?? '');
  }
  if (!isObject(result)) throw unprocessable('the patched document is not a JSON object');
  return asKubeObject(result);
}

// ---------------------------------------------------------------------------------------------------
// JSON merge patch (RFC 7386, as evanphx/json-patch MergePatch)
// ---------------------------------------------------------------------------------------------------

/** Drops null members of objects, recursing into arrays (evanphx pruneNulls; strategicpatch discardNullValuesFromPatch). */
function pruneNulls(v: JsonValue): JsonValue {
  if (Array.isArray(v)) {
    for (const item of v) if (item !== null) pruneNulls(item);
  } else if (isObject(v)) {
    for (const [k, child] of Object.entries(v)) {
      if (child === null) delete v[k];
      else pruneNulls(child);
    }
  }
  return v;
}

function mergeDocs(doc: JsonObject, patch: JsonObject): void {
  for (const [k, v] of Object.entries(patch)) {
    if (v === null) {
      delete doc[k];
      continue;
    }
    const cur = doc[k];
    if (cur === undefined || cur === null) doc[k] = pruneNulls(v);
    else if (!isObject(cur)) doc[k] = pruneNulls(v);
    else if (!isObject(v)) doc[k] = v;
    else mergeDocs(cur, v);
  }
}

/** RFC 7386 merge patch (null deletes, arrays replace). A patch that is not an object is 400. */
export function applyMergePatch(target: KubeObject, patch: unknown): KubeObject {
  if (!isObject(patch)) throw badRequest('Invalid JSON Patch');
  const doc = clone(target) as unknown as JsonObject;
  mergeDocs(doc, clone(patch));
  return asKubeObject(doc);
}

/** The RFC 7386 merge patch that turns `from` into `to` (null values in `to` cannot be expressed). */
export function createMergePatch(from: JsonObject, to: JsonObject): JsonObject {
  const patch: JsonObject = {};
  for (const k of Object.keys(from)) if (!Object.hasOwn(to, k)) patch[k] = null;
  for (const [k, v] of Object.entries(to)) {
    const old = from[k];
    if (isObject(old) && isObject(v)) {
      const sub = createMergePatch(old, v);
      if (Object.keys(sub).length > 0) patch[k] = sub;
    } else if (!Object.hasOwn(from, k) || !deepEqual(old, v)) {
      patch[k] = clone(v);
    }
  }
  return patch;
}

// ---------------------------------------------------------------------------------------------------
// Strategic merge patch (port of strategicpatch.StrategicMergeMapPatch, server-side options:
// MergeParallelList and IgnoreUnmatchedNulls both true)
// ---------------------------------------------------------------------------------------------------

const DIRECTIVE = '$patch';
const DELETE = 'delete';
const REPLACE = 'replace';
const MERGE = 'merge';
const RETAIN_KEYS = '$retainKeys';
const DELETE_FROM_PRIMITIVE_LIST = '$deleteFromPrimitiveList';
const SET_ELEMENT_ORDER = '$setElementOrder';

const isDirectiveKey = (k: string): boolean =>
  k === DIRECTIVE ||
  k === RETAIN_KEYS ||
  k.startsWith(`${DELETE_FROM_PRIMITIVE_LIST}/`) ||
  k.startsWith(`${SET_ELEMENT_ORDER}/`);

/**
 * A patch value stored without merging: nulls dropped and directive keys removed, as the typed
 * round trip of the real server (which ignores unknown fields) would leave it.
 */
function verbatim(v: JsonValue): JsonValue {
  pruneNulls(v);
  const scrub = (x: JsonValue): void => {
    if (Array.isArray(x)) x.forEach(scrub);
    else if (isObject(x)) {
      for (const [k, child] of Object.entries(x)) {
        if (isDirectiveKey(k)) delete x[k];
        else scrub(child);
      }
    }
  };
  scrub(v);
  return v;
}

/** removeDirectives: maps carrying `$patch` are dropped entirely (undefined), the rest kept verbatim. */
function fresh(v: JsonValue): JsonValue | undefined {
  const drop = (x: JsonValue): JsonValue | undefined => {
    if (Array.isArray(x)) return x.map(drop).filter((item): item is JsonValue => item !== undefined);
    if (isObject(x)) {
      if (Object.hasOwn(x, DIRECTIVE)) return undefined;
      for (const [k, child] of Object.entries(x)) {
        const kept = drop(child);
        if (kept === undefined) delete x[k];
        else x[k] = kept;
      }
    }
    return x;
  };
  const kept = drop(pruneNulls(v));
  return kept === undefined ? undefined : verbatim(kept);
}

function extractKey(key: string, prefix: string): string {
  const slash = key.indexOf('/');
  if (slash < 0 || key.slice(0, slash) !== prefix) {
    throw prefix === DELETE_FROM_PRIMITIVE_LIST ? errBadPrimitiveList() : errBadSetElementOrder();
  }
  return key.slice(slash + 1);
}

/** extractRetainKeysPatchStrategy: the strategy other than retainKeys ('' when none). */
function strategyOf(meta: FieldMeta | undefined): string {
  const strategies = meta?.patchStrategy ?? [];
  if (strategies.length === 0) return '';
  if (strategies.length === 1) return strategies[0] === 'retainKeys' ? '' : (strategies[0] ?? '');
  if (strategies.length === 2 && strategies.includes('retainKeys')) {
    return strategies.find((s) => s !== 'retainKeys') ?? '';
  }
  throw smpFailure(`unexpected patch strategy: ${goFormat([...strategies])}`);
}

type ElementKind = 'map' | 'string' | 'number' | 'bool' | 'null';

/** sliceElementType: all elements share one kind, and lists of lists are refused. */
function sliceElementKind(...slices: JsonValue[][]): ElementKind {
  let kind: ElementKind | undefined;
  for (const slice of slices) {
    for (const v of slice) {
      if (Array.isArray(v)) throw errNoListOfLists();
      const k: ElementKind = isObject(v)
        ? 'map'
        : v === null
          ? 'null'
          : typeof v === 'number'
            ? 'number'
            : typeof v === 'boolean'
              ? 'bool'
              : 'string';
      if (kind === undefined) kind = k;
      else if (kind !== k) throw smpFailure(`list element types are not identical: ${goFormat(slices)}`);
    }
  }
  if (kind === undefined) throw smpFailure('no elements in any of the given slices');
  return kind;
}

function asMap(v: JsonValue): JsonObject {
  if (!isObject(v)) throw errBadArgType('map', v);
  return v;
}

function mergeKeyValueEqual(left: JsonValue, right: JsonValue, mergeKey: string): boolean {
  if (mergeKey === '') return left === right;
  const l = asMap(left);
  const r = asMap(right);
  if (!Object.hasOwn(l, mergeKey)) throw errNoMergeKey(l, mergeKey);
  if (!Object.hasOwn(r, mergeKey)) throw errNoMergeKey(r, mergeKey);
  return l[mergeKey] === r[mergeKey];
}

/** findMapInSliceBasedOnKeyValue: index of the first map whose merge key equals `value`, or -1. */
function findByKey(list: JsonValue[], key: string, value: JsonValue | undefined): number {
  return list.findIndex((item, i) => {
    if (!isObject(item)) throw smpFailure(`value for key ${i} is not a map.`);
    return Object.hasOwn(item, key) && item[key] === value;
  });
}

/** index(): position of `v` in `list`, by merge key value for maps, by value otherwise. */
function indexIn(list: JsonValue[], v: JsonValue, mergeKey: string, kind: ElementKind): number {
  const identity = (x: JsonValue): JsonValue | undefined =>
    kind === 'map' ? (isObject(x) ? x[mergeKey] : undefined) : x;
  const target = identity(v);
  return list.findIndex((x) => identity(x) === target);
}

function isDeleteItem(v: JsonValue): boolean {
  return isObject(v) && v[DIRECTIVE] === DELETE;
}

/** normalizeSliceOrder: sort by position in `order`, `$patch: delete` items last. */
function normalizeSliceOrder(
  toSort: JsonValue[],
  order: JsonValue[],
  mergeKey: string,
  kind: ElementKind,
): JsonValue[] {
  let items = toSort;
  let deletions: JsonValue[] = [];
  if (kind === 'map') {
    for (const list of [toSort, order]) {
      for (const item of list) {
        const m = asMap(item);
        if (!Object.hasOwn(m, mergeKey)) throw errNoMergeKey(m, mergeKey);
      }
    }
    items = toSort.filter((v) => !isDeleteItem(v));
    deletions = toSort.filter(isDeleteItem);
  }
  const positions = new Map(items.map((v) => [v, indexIn(order, v, mergeKey, kind)] as const));
  const sorted = [...items].sort((a, b) => {
    const ia = positions.get(a) ?? -1;
    const ib = positions.get(b) ?? -1;
    return ia >= 0 && ib >= 0 ? ia - ib : 0;
  });
  return [...sorted, ...deletions];
}

/**
 * mergeSortedSlice: interleaves the server-only items (`left`) into the patch items (`right`), each
 * keeping its relative order, using the live order to place server-only items.
 */
function mergeSortedSlice(
  left: JsonValue[],
  right: JsonValue[],
  serverOrder: JsonValue[],
  mergeKey: string,
  kind: ElementKind,
): JsonValue[] {
  const out: JsonValue[] = [];
  let i = 0;
  let j = 0;
  while (i < left.length || j < right.length) {
    const l = left[i];
    const r = right[j];
    if (l === undefined) {
      out.push(r as JsonValue);
      j++;
    } else if (r === undefined) {
      out.push(l);
      i++;
    } else {
      const li = indexIn(serverOrder, l, mergeKey, kind);
      const ri = indexIn(serverOrder, r, mergeKey, kind);
      if (li >= 0 && ri >= 0 && li < ri) {
        out.push(l);
        i++;
      } else {
        out.push(r);
        j++;
      }
    }
  }
  return out;
}

function normalizeElementOrder(
  patchItems: JsonValue[],
  serverOnly: JsonValue[],
  patchOrder: JsonValue[],
  serverOrder: JsonValue[],
  mergeKey: string,
  kind: ElementKind,
): JsonValue[] {
  const patchSorted = normalizeSliceOrder(patchItems, patchOrder, mergeKey, kind);
  const serverSorted = normalizeSliceOrder(serverOnly, serverOrder, mergeKey, kind);
  return mergeSortedSlice(serverSorted, patchSorted, serverOrder, mergeKey, kind);
}

/** Splits `list` into items present in `by` (by merge key for maps) and the rest. */
function partitionByPresence(
  list: JsonValue[],
  by: JsonValue[],
  mergeKey: string,
): [JsonValue[], JsonValue[]] {
  const present: JsonValue[] = [];
  const absent: JsonValue[] = [];
  for (const v of list) {
    let found: boolean;
    if (mergeKey === '') {
      found = by.includes(v);
    } else {
      const m = asMap(v);
      if (!Object.hasOwn(m, mergeKey)) throw errNoMergeKey(m, mergeKey);
      found = findByKey(by, mergeKey, m[mergeKey]) >= 0;
    }
    (found ? present : absent).push(v);
  }
  return [present, absent];
}

/** mergeSliceWithSpecialElements: applies `$patch` items; returns the updated live list and the rest. */
function applySpecialElements(
  original: JsonValue[],
  patch: JsonValue[],
  mergeKey: string,
): { original: JsonValue[]; patch: JsonValue[] } {
  const plain: JsonValue[] = [];
  let live = original;
  let replace = false;
  for (const v of patch) {
    const item = asMap(v);
    if (!Object.hasOwn(item, DIRECTIVE)) {
      plain.push(v);
      continue;
    }
    const directive = item[DIRECTIVE];
    if (directive === DELETE) {
      if (!Object.hasOwn(item, mergeKey)) throw errNoMergeKey(item, mergeKey);
      const value = item[mergeKey];
      live = live.filter((x, i) => {
        if (!isObject(x)) throw smpFailure(`value for key ${i} is not a map.`);
        return !(Object.hasOwn(x, mergeKey) && x[mergeKey] === value);
      });
    } else if (directive === REPLACE) {
      replace = true; // keep scanning to prune the other directive items
    } else if (directive === MERGE) {
      throw smpFailure('merging lists cannot yet be specified in the patch');
    } else {
      throw errBadPatchType(directive, item);
    }
  }
  return replace ? { original: plain, patch: [] } : { original: live, patch: plain };
}

function mergeSlice(
  original: JsonValue[],
  patch: JsonValue[],
  meta: FieldMeta | undefined,
  isDeleteList: boolean,
): JsonValue[] {
  if (original.length === 0 && patch.length === 0) return original;
  const kind = sliceElementKind(original, patch);
  const mergeKey = meta?.patchMergeKey ?? '';
  let live = original;
  let items = patch;
  let merged: JsonValue[];
  if (kind !== 'map') {
    if (isDeleteList) return original.filter((v) => !patch.includes(v));
    merged = [...original, ...patch].filter((v, i, all) => all.indexOf(v) === i);
  } else {
    if (mergeKey === '') throw smpFailure(`cannot merge lists without merge key for ${meta?.type ?? ''}`);
    ({ original: live, patch: items } = applySpecialElements(original, patch, mergeKey));
    merged = [...live];
    for (const v of items) {
      const item = asMap(v);
      if (!Object.hasOwn(item, mergeKey)) throw errNoMergeKey(item, mergeKey);
      const at = findByKey(merged, mergeKey, item[mergeKey]);
      const existing = merged[at];
      if (at >= 0 && existing !== undefined) {
        merged[at] = mergeMap(asMap(existing), item, meta);
      } else {
        const added = fresh(item);
        if (added !== undefined) merged.push(added);
      }
    }
  }
  const [patchItems, serverOnly] = partitionByPresence(merged, items, mergeKey);
  return normalizeElementOrder(patchItems, serverOnly, items, live, mergeKey, kind);
}

function mergeSliceHandler(
  original: JsonValue,
  patch: JsonValue,
  meta: FieldMeta | undefined,
  isDeleteList: boolean,
): JsonValue[] {
  if (!Array.isArray(original)) throw errBadArgType('slice', original);
  if (!Array.isArray(patch)) throw errBadArgType('slice', patch);
  if (strategyOf(meta) === MERGE) return mergeSlice(original, patch, meta, isDeleteList);
  return verbatim(patch) as JsonValue[];
}

/** applyRetainKeysDirective: clears live keys missing from `$retainKeys`. */
function applyRetainKeys(original: JsonObject, patch: JsonObject): void {
  if (!Object.hasOwn(patch, RETAIN_KEYS)) return;
  const retain = patch[RETAIN_KEYS];
  delete patch[RETAIN_KEYS];
  if (!Array.isArray(retain)) throw errBadRetainKeys();
  const keep = new Set<JsonValue>(retain);
  for (const [k, v] of Object.entries(patch)) {
    if (v === null || k.startsWith(DELETE_FROM_PRIMITIVE_LIST) || k.startsWith(SET_ELEMENT_ORDER)) continue;
    if (!keep.has(k)) throw errBadRetainKeys();
  }
  for (const k of Object.keys(original)) if (!keep.has(k)) delete original[k];
}

/** validatePatchWithSetOrderList: patch items must appear in `$setElementOrder` in the same order. */
function validateSetOrder(patchList: JsonValue[], order: JsonValue[], mergeKey: string): void {
  if (order.length === 0 || patchList.length === 0) return;
  const nonDelete = mergeKey === '' ? patchList : patchList.filter((v) => !isDeleteItem(asMap(v)));
  let p = 0;
  let s = 0;
  while (p < nonDelete.length && s < order.length) {
    const item = nonDelete[p] as JsonValue;
    if (isObject(item) && Object.hasOwn(item, DIRECTIVE)) {
      p++;
      continue;
    }
    if (mergeKeyValueEqual(item, order[s] as JsonValue, mergeKey)) p++;
    s++;
  }
  if (p < nonDelete.length && s >= order.length) {
    throw smpFailure(
      `the order in patch list:\n${goFormat(patchList)}\n doesn't match ${SET_ELEMENT_ORDER} list:\n${goFormat(order)}`,
    );
  }
}

/** mergePatchIntoOriginal: merges the lists named by `$setElementOrder/<field>` and applies that order. */
function applySetElementOrder(original: JsonObject, patch: JsonObject, parent: FieldMeta | undefined): void {
  for (const key of Object.keys(patch)) {
    if (!key.startsWith(SET_ELEMENT_ORDER)) continue;
    const order = patch[key];
    delete patch[key];
    if (!Array.isArray(order)) throw errBadArgType('slice', order);
    const field = extractKey(key, SET_ELEMENT_ORDER);
    const inOriginal = Object.hasOwn(original, field);
    const inPatch = Object.hasOwn(patch, field);
    const originalList = original[field];
    const patchList = patch[field];
    if (inOriginal && !Array.isArray(originalList)) throw errBadArgType('slice', originalList);
    if (inPatch && !Array.isArray(patchList)) throw errBadArgType('slice', patchList);
    const liveItems = Array.isArray(originalList) ? originalList : [];
    const patchItemsAll = Array.isArray(patchList) ? patchList : [];
    const meta = fieldMeta(parent, field);
    const mergeKey = meta?.patchMergeKey ?? '';
    validateSetOrder(patchItemsAll, order, mergeKey);
    let merged: JsonValue[];
    if (inOriginal && !inPatch) merged = liveItems;
    else if (!inOriginal && inPatch) merged = (fresh(patchItemsAll) as JsonValue[] | undefined) ?? [];
    else if (inOriginal && inPatch) merged = mergeSliceHandler(liveItems, patchItemsAll, meta, false);
    else continue;
    const [patchItems, serverOnly] = partitionByPresence(merged, order, mergeKey);
    const kind = sliceElementKind(liveItems, patchItemsAll);
    original[field] = normalizeElementOrder(patchItems, serverOnly, order, liveItems, mergeKey, kind);
    delete patch[field];
  }
}

function mergeMap(original: JsonObject, patch: JsonObject, meta: FieldMeta | undefined): JsonObject {
  if (Object.hasOwn(patch, DIRECTIVE)) {
    const directive = patch[DIRECTIVE];
    if (directive === REPLACE) {
      delete patch[DIRECTIVE];
      return verbatim(patch) as JsonObject;
    }
    if (directive === DELETE) return {};
    throw errBadPatchType(directive, patch);
  }
  applyRetainKeys(original, patch);
  applySetElementOrder(original, patch, meta);

  for (const [rawKey, patchValue] of Object.entries(patch)) {
    let key = rawKey;
    let isDeleteList = false;
    if (rawKey.startsWith(DELETE_FROM_PRIMITIVE_LIST)) {
      key = extractKey(rawKey, DELETE_FROM_PRIMITIVE_LIST);
      isDeleteList = true;
    }
    if (patchValue === null) {
      delete original[key];
      continue;
    }
    const current = original[key];
    // A new key, or a value of another JSON type, takes the patch value as it is.
    if (current === undefined || jsonKind(current) !== jsonKind(patchValue)) {
      if (!isDeleteList) {
        const value = fresh(patchValue);
        if (value === undefined) delete original[key];
        else original[key] = value;
      }
      continue;
    }
    const field = fieldMeta(meta, key);
    if (isObject(current)) {
      original[key] =
        strategyOf(field) === REPLACE ? verbatim(patchValue) : mergeMap(current, asMap(patchValue), field);
    } else if (Array.isArray(current)) {
      original[key] = mergeSliceHandler(current, patchValue, field, isDeleteList);
    } else {
      original[key] = patchValue;
    }
  }
  return original;
}

/**
 * Strategic merge patch for built-in kinds with the Kubernetes patchStrategy/patchMergeKey tags.
 * Honours `$patch: delete | replace` in maps and list items, `$retainKeys`,
 * `$deleteFromPrimitiveList/<field>`, `$setElementOrder/<field>` and primitive merge lists
 * (metadata.finalizers). `$patch: merge` is refused, as by kube-apiserver. Never mutates its input.
 */
export function applyStrategicMergePatch(target: KubeObject, patch: unknown, kind: string): KubeObject {
  if (patch === null) return clone(target); // decodes to a nil map: nothing to merge
  if (!isObject(patch)) {
    throw badRequest(
      `json: cannot unmarshal ${jsonTypeName(patch)} into Go value of type map[string]interface {}`,
    );
  }
  const merged = mergeMap(clone(target) as unknown as JsonObject, clone(patch), rootMeta(kind));
  return asKubeObject(merged);
}
