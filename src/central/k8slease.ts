// The pure half of the Kubernetes lease store: how a (namespace, name) key names a
// coordination.k8s.io/v1 Lease, how a LeaseRecord maps onto the Lease and back, and the decisions of
// the migration from this project's earlier object names (docs/central.md).
//
// Object names are the Go server's: `<namespace>.<name>`, so either server can take over the other's
// data. The join is injective and a valid object name exactly for the keys the API accepts
// (validate.ts validateKey: the namespace is a DNS label, so the first dot separates it from the name,
// and the whole is at most 253 characters); the store refuses any other key. The annotations
// `berth.skaphos.io/tenant-namespace` and `.../lease-name` name the key too, and every read checks
// them, so a foreign object squatting on a name fails closed instead of being read as a record.
//
// Earlier versions named objects `berth-` + the SHA-256 (hex) of the JSON array `[namespace, name]`
// ("legacy" objects). They are still read and their records carried to the Go-layout name: the store
// creates the new object (create-only) with the legacy record, version included, then seals the legacy
// object, resourceVersion-guarded: label `berth.skaphos.io/managed-by=berth-migrated` and annotation
// `berth.skaphos.io/migrated-to: <new name>`. Once a Go-layout object exists it alone holds the record;
// a sealed object is never read as a record again.
//
// Fields: spec.holderIdentity = holder (absent or "" for a tombstone), spec.leaseDurationSeconds = TTL
// (whole seconds; absent for a tombstone), spec.acquireTime / spec.renewTime = MicroTime with exactly
// six fractional digits (the only form kube-apiserver accepts), spec.leaseTransitions = fencing token,
// annotation `berth.skaphos.io/version` = the store version (missing means 1).
import { createHash } from 'node:crypto';
import { formatMicroTime, parseMicroTime } from '../kube/microtime.ts';
import { keyString, type LeaseKey, type LeaseRecord } from './record.ts';
import { validateKey } from './validate.ts';

export const MANAGED_BY_LABEL = 'berth.skaphos.io/managed-by';
export const MANAGED_BY_VALUE = 'berth';
export const MANAGED_SELECTOR = `${MANAGED_BY_LABEL}=${MANAGED_BY_VALUE}`;
/** Label value of a sealed legacy object: no Berth server lists it, and earlier versions refuse to read it. */
export const MIGRATED_VALUE = 'berth-migrated';
export const NAMESPACE_ANNOTATION = 'berth.skaphos.io/tenant-namespace';
export const NAME_ANNOTATION = 'berth.skaphos.io/lease-name';
export const VERSION_ANNOTATION = 'berth.skaphos.io/version';
export const MIGRATED_TO_ANNOTATION = 'berth.skaphos.io/migrated-to';

const LEGACY_NAME_PREFIX = 'berth-';

/** Why `key` has no object name: the API's own key rule, which makes `<namespace>.<name>` valid and injective. */
export const objectNameProblem = (key: LeaseKey): string | undefined => validateKey(key.namespace, key.name);

/** `<namespace>.<name>`, the Go server's layout; meaningful only for keys without objectNameProblem. */
export const leaseObjectName = (key: LeaseKey): string => `${key.namespace}.${key.name}`;

/** The injective encoding hashed into legacy names. */
export const encodeKey = (key: LeaseKey): string => JSON.stringify([key.namespace, key.name]);

/** `berth-<sha256 hex of [namespace, name]>`: the name earlier versions gave a key's object. */
export function legacyObjectName(key: LeaseKey): string {
  return LEGACY_NAME_PREFIX + createHash('sha256').update(encodeKey(key), 'utf8').digest('hex');
}

/** The subset of a coordination.k8s.io/v1 Lease the store reads and writes; other fields are kept. */
export interface LeaseObject {
  apiVersion: 'coordination.k8s.io/v1';
  kind: 'Lease';
  metadata: {
    name: string;
    namespace?: string;
    resourceVersion?: string;
    labels?: Record<string, string>;
    annotations?: Record<string, string>;
    [field: string]: unknown;
  };
  spec?: {
    holderIdentity?: string;
    leaseDurationSeconds?: number;
    acquireTime?: string;
    renewTime?: string;
    leaseTransitions?: number;
    [field: string]: unknown;
  };
  [field: string]: unknown;
}

/** The key an object's annotations name, if both are present. */
export function keyOfLease(lease: LeaseObject): LeaseKey | undefined {
  const a = lease.metadata.annotations ?? {};
  const namespace = a[NAMESPACE_ANNOTATION];
  const name = a[NAME_ANNOTATION];
  return namespace === undefined || name === undefined ? undefined : { namespace, name };
}

/** The store version an object carries; a missing annotation counts as 1 (objects from older writers). */
export function versionOfLease(lease: LeaseObject): number {
  const text = lease.metadata.annotations?.[VERSION_ANNOTATION];
  if (text === undefined) return 1;
  const n = Number(text);
  if (!/^[1-9]\d*$/.test(text) || !Number.isSafeInteger(n))
    throw new Error(`lease ${lease.metadata.name}: invalid ${VERSION_ANNOTATION} ${JSON.stringify(text)}`);
  return n;
}

function keyMismatch(lease: LeaseObject, key: LeaseKey): string | undefined {
  const owner = keyOfLease(lease);
  if (owner === undefined) return `lease ${lease.metadata.name} has no key annotations`;
  if (owner.namespace !== key.namespace || owner.name !== key.name)
    return `lease ${lease.metadata.name} holds ${encodeKey(owner)}, not ${encodeKey(key)} (a foreign object on the name)`;
  return undefined;
}

/** Why the object under `key`'s Go-layout name cannot hold its record, or undefined when it is ours and is for that key. */
export function ownershipProblem(lease: LeaseObject, key: LeaseKey): string | undefined {
  if (lease.metadata.labels?.[MANAGED_BY_LABEL] !== MANAGED_BY_VALUE)
    return `lease ${lease.metadata.name} is not labelled ${MANAGED_SELECTOR}`;
  return keyMismatch(lease, key);
}

/** A legacy object sealed by its migration. */
export const isMigrated = (lease: LeaseObject): boolean =>
  lease.metadata.labels?.[MANAGED_BY_LABEL] === MIGRATED_VALUE;

/** Why the object under `key`'s legacy name is not `key`'s legacy object (live or sealed). */
export function legacyProblem(lease: LeaseObject, key: LeaseKey): string | undefined {
  if (isMigrated(lease)) {
    const target = lease.metadata.annotations?.[MIGRATED_TO_ANNOTATION];
    if (target !== leaseObjectName(key))
      return `lease ${lease.metadata.name} is marked migrated to ${JSON.stringify(target)}, not ${leaseObjectName(key)}`;
    return keyMismatch(lease, key);
  }
  return ownershipProblem(lease, key);
}

export function recordFromLease(lease: LeaseObject, key: LeaseKey): LeaseRecord {
  const spec = lease.spec ?? {};
  return {
    key: { namespace: key.namespace, name: key.name },
    holder: spec.holderIdentity ?? '',
    ttlMs: (spec.leaseDurationSeconds ?? 0) * 1000,
    acquiredAt: spec.acquireTime === undefined ? 0 : parseMicroTime(spec.acquireTime),
    renewedAt: spec.renewTime === undefined ? 0 : parseMicroTime(spec.renewTime),
    fencingToken: spec.leaseTransitions ?? 0,
    version: versionOfLease(lease),
  };
}

/** Why a record cannot be stored in a Lease (a programming error, not a conflict). */
export function unrepresentable(record: LeaseRecord): string | undefined {
  if (record.ttlMs % 1000 !== 0 || record.ttlMs < 0 || record.ttlMs / 1000 > 2_147_483_647)
    return `ttl ${record.ttlMs}ms is not a whole number of seconds (spec.leaseDurationSeconds)`;
  if (
    !Number.isInteger(record.fencingToken) ||
    record.fencingToken < 0 ||
    record.fencingToken > 2_147_483_647
  )
    return `fencing token ${record.fencingToken} does not fit spec.leaseTransitions (int32)`;
  for (const t of [record.acquiredAt, record.renewedAt])
    if (!Number.isSafeInteger(t) || t < 0) return `time ${t} is not a valid epoch millisecond`;
  return undefined;
}

function specOf(record: LeaseRecord): NonNullable<LeaseObject['spec']> {
  return {
    ...(record.holder === '' ? {} : { holderIdentity: record.holder }),
    ...(record.ttlMs === 0 ? {} : { leaseDurationSeconds: record.ttlMs / 1000 }),
    acquireTime: formatMicroTime(record.acquiredAt),
    renewTime: formatMicroTime(record.renewedAt),
    leaseTransitions: record.fencingToken,
  };
}

/** A new Lease holding `record` at store version `version` (1 for a new key; a migration carries its own). */
export function newLease(name: string, namespace: string, record: LeaseRecord, version = 1): LeaseObject {
  return {
    apiVersion: 'coordination.k8s.io/v1',
    kind: 'Lease',
    metadata: {
      name,
      namespace,
      labels: { [MANAGED_BY_LABEL]: MANAGED_BY_VALUE },
      annotations: {
        [NAMESPACE_ANNOTATION]: record.key.namespace,
        [NAME_ANNOTATION]: record.key.name,
        [VERSION_ANNOTATION]: String(version),
      },
    },
    spec: specOf(record),
  };
}

/**
 * `current` (as read, resourceVersion included, so the update is a compare-and-swap) carrying
 * `record` at store version `version`. Labels and annotations written by others are kept.
 */
export function updatedLease(current: LeaseObject, record: LeaseRecord, version: number): LeaseObject {
  const spec = { ...(current.spec ?? {}) };
  delete spec.holderIdentity;
  delete spec.leaseDurationSeconds;
  return {
    ...current,
    metadata: {
      ...current.metadata,
      labels: { ...current.metadata.labels, [MANAGED_BY_LABEL]: MANAGED_BY_VALUE },
      annotations: {
        ...current.metadata.annotations,
        [NAMESPACE_ANNOTATION]: record.key.namespace,
        [NAME_ANNOTATION]: record.key.name,
        [VERSION_ANNOTATION]: String(version),
      },
    },
    spec: { ...spec, ...specOf(record) },
  };
}

/**
 * `legacy` (as read, resourceVersion included) sealed after its record was copied to `key`'s Go-layout
 * object: relabelled out of every Berth server's List and pointing at the new name. The spec and
 * version stay, for whoever inspects it.
 */
export function sealedLease(legacy: LeaseObject, key: LeaseKey): LeaseObject {
  return {
    ...legacy,
    apiVersion: 'coordination.k8s.io/v1',
    kind: 'Lease',
    metadata: {
      ...legacy.metadata,
      labels: { ...legacy.metadata.labels, [MANAGED_BY_LABEL]: MIGRATED_VALUE },
      annotations: { ...legacy.metadata.annotations, [MIGRATED_TO_ANNOTATION]: leaseObjectName(key) },
    },
  };
}

export interface KeyedLease {
  key: LeaseKey;
  lease: LeaseObject;
}

/** What List does with the managed objects it found. */
export interface ListPlan {
  /** Go-layout objects: the records, one per key. */
  current: KeyedLease[];
  /** Live legacy objects of keys without a Go-layout object: to migrate, then report. */
  migrate: KeyedLease[];
  /** Live legacy objects of keys that have a Go-layout object (a migration interrupted before its seal). */
  seal: KeyedLease[];
}

/**
 * Sorts listed objects by what they are for the key their annotations name. Objects under neither of
 * the key's names, for keys the API refuses, sealed or not ours are skipped; so is a legacy object
 * whose Go-layout name another listed object occupies (reading that key fails closed instead).
 */
export function planList(leases: readonly LeaseObject[]): ListPlan {
  const current = new Map<string, KeyedLease>();
  const legacy: KeyedLease[] = [];
  const names = new Set(leases.map((l) => l.metadata.name));
  for (const lease of leases) {
    const key = keyOfLease(lease);
    if (
      key === undefined ||
      objectNameProblem(key) !== undefined ||
      ownershipProblem(lease, key) !== undefined
    )
      continue;
    if (lease.metadata.name === leaseObjectName(key)) current.set(keyString(key), { key, lease });
    else if (lease.metadata.name === legacyObjectName(key)) legacy.push({ key, lease });
  }
  const plan: ListPlan = { current: [...current.values()], migrate: [], seal: [] };
  for (const entry of legacy) {
    if (current.has(keyString(entry.key))) plan.seal.push(entry);
    else if (!names.has(leaseObjectName(entry.key))) plan.migrate.push(entry);
  }
  return plan;
}
