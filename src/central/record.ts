// A lease record at the central server (docs/behaviour.md §3.7) and the pure facts about it.
// Times are epoch milliseconds; records are never deleted: a released or collected lease becomes a
// tombstone that keeps its fencing token as the per-key high-water mark.

export interface LeaseKey {
  namespace: string;
  name: string;
}

export interface LeaseRecord {
  key: LeaseKey;
  /** "" for a tombstone. */
  holder: string;
  /** 0 for a tombstone. */
  ttlMs: number;
  acquiredAt: number;
  renewedAt: number;
  /** int32, strictly increasing per key for the life of the store's data. */
  fencingToken: number;
  /** The compare-and-swap predicate: 1 on create, +1 on every write. */
  version: number;
}

export const INT32_MAX = 2_147_483_647;

export const keyString = (key: LeaseKey): string => `${key.namespace}/${key.name}`;

export const isTombstone = (record: LeaseRecord): boolean => record.holder === '';

export const expiresAt = (record: LeaseRecord): number => record.renewedAt + record.ttlMs;

/** Strictly after the expiry instant, as the Go manager (`now.After(expiresAt)`). */
export const isExpired = (record: LeaseRecord, now: number): boolean => now > expiresAt(record);

/** Reclaimable by any holder: a tombstone, or a lease past its expiry. */
export const isReclaimable = (record: LeaseRecord, now: number): boolean =>
  isTombstone(record) || isExpired(record, now);

/** The tombstone written by Release and by the TTL collector: token and acquiredAt are kept. */
export function tombstoneOf(record: LeaseRecord, now: number): LeaseRecord {
  return { ...record, key: { ...record.key }, holder: '', ttlMs: 0, renewedAt: now };
}

export function cloneRecord(record: LeaseRecord): LeaseRecord {
  return { ...record, key: { ...record.key } };
}
