// The pure half of the Kubernetes lease store: how a (namespace, name) key names a
// coordination.k8s.io/v1 Lease, and how a LeaseRecord maps onto the Lease and back
// (reference/berth-spec.md §3.8).
//
// Object names. The Go server named objects `<ns>.<name>`; that join is only injective while every
// caller validates keys exactly as the API does, and breaks past 253 characters. Here the name is
// `berth-` + the full SHA-256 (hex) of the JSON array `[namespace, name]`:
//  - the JSON encoding is injective (JSON.parse inverts it), so two different keys hash different
//    inputs and share an object name only through a SHA-256 collision;
//  - every read checks that the object's annotations name the key asked for, so even a collision (or
//    a foreign object squatting the name) fails closed with an error instead of aliasing two keys;
//  - the result is always a valid DNS subdomain of 70 characters, for any key.
// The readable parts live in annotations (`berth.skaphos.io/tenant-namespace`, `.../lease-name`).
//
// Fields: spec.holderIdentity = holder (absent for a tombstone), spec.leaseDurationSeconds = TTL
// (whole seconds; absent for a tombstone), spec.acquireTime / spec.renewTime = MicroTime with exactly
// six fractional digits (the only form kube-apiserver accepts), spec.leaseTransitions = fencing token,
// annotation `berth.skaphos.io/version` = the store version (missing means 1).
import { createHash } from 'node:crypto';
import type { LeaseKey, LeaseRecord } from './record.ts';

export const MANAGED_BY_LABEL = 'berth.skaphos.io/managed-by';
export const MANAGED_BY_VALUE = 'berth';
export const MANAGED_SELECTOR = `${MANAGED_BY_LABEL}=${MANAGED_BY_VALUE}`;
export const NAMESPACE_ANNOTATION = 'berth.skaphos.io/tenant-namespace';
export const NAME_ANNOTATION = 'berth.skaphos.io/lease-name';
export const VERSION_ANNOTATION = 'berth.skaphos.io/version';

export const OBJECT_NAME_PREFIX = 'berth-';

/** The injective encoding hashed into the object name. */
export const encodeKey = (key: LeaseKey): string => JSON.stringify([key.namespace, key.name]);

/** `berth-<sha256 hex of [namespace, name]>`: a 70-character DNS subdomain. */
export function leaseObjectName(key: LeaseKey): string {
  return OBJECT_NAME_PREFIX + createHash('sha256').update(encodeKey(key), 'utf8').digest('hex');
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

/** RFC 3339 in UTC with exactly six fractional digits (milliseconds padded with 000). */
export function formatMicroTime(ms: number): string {
  return new Date(ms).toISOString().replace(/Z$/, '000Z');
}

const TIME = /^(\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2})(?:\.(\d{1,9}))?(Z|[+-]\d{2}:\d{2})$/;

/** Epoch ms of a MicroTime (or any RFC 3339 time); sub-millisecond digits are truncated. */
export function parseMicroTime(text: string): number {
  const m = TIME.exec(text);
  const seconds = m ? Date.parse(`${m[1]}${m[3]}`) : Number.NaN;
  if (!Number.isFinite(seconds)) throw new Error(`invalid MicroTime ${JSON.stringify(text)}`);
  return seconds + Number((m![2] ?? '').padEnd(3, '0').slice(0, 3));
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

/** Why an object cannot hold `key`'s record, or undefined when it is ours and is for that key. */
export function ownershipProblem(lease: LeaseObject, key: LeaseKey): string | undefined {
  if (lease.metadata.labels?.[MANAGED_BY_LABEL] !== MANAGED_BY_VALUE)
    return `lease ${lease.metadata.name} is not labelled ${MANAGED_SELECTOR}`;
  const owner = keyOfLease(lease);
  if (owner === undefined) return `lease ${lease.metadata.name} has no key annotations`;
  if (owner.namespace !== key.namespace || owner.name !== key.name)
    return `lease ${lease.metadata.name} holds ${encodeKey(owner)}, not ${encodeKey(key)} (object name collision)`;
  return undefined;
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

/** A new Lease holding `record` at store version 1. */
export function newLease(name: string, namespace: string, record: LeaseRecord): LeaseObject {
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
        [VERSION_ANNOTATION]: '1',
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
