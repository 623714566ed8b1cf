// The storage contract of the lease manager (docs/behaviour.md §3.7): Get, List, Ping and a
// compare-and-swap Put on the record version. There is no Delete: tokens must never repeat. Every
// backend (memory, SQL, Kubernetes Leases) passes test/unit/central/store-conformance.ts.
import type { LeaseKey, LeaseRecord } from './record.ts';

/** A Put whose expected version did not match (or a create of an existing record). */
export class StoreConflictError extends Error {
  constructor(message = 'lease store: version conflict') {
    super(message);
    this.name = 'StoreConflictError';
  }
}

export interface Store {
  /** Short name used in metrics and logs, the `--store-backend` value (`mem`, `k8s`, `sql`). */
  readonly backend: string;
  /** Resolves when the backend is reachable. */
  ping(signal?: AbortSignal): Promise<void>;
  /** The record, or undefined when the key has never been written. */
  get(key: LeaseKey): Promise<LeaseRecord | undefined>;
  /** Every record, tombstones included, in no particular order. */
  list(): Promise<LeaseRecord[]>;
  /**
   * Writes `record` (its `version` is ignored). With `expectedVersion` 0 it only creates, storing
   * version 1; otherwise it succeeds only if the stored version equals `expectedVersion` and stores
   * expectedVersion+1. Resolves with the stored record; rejects with StoreConflictError otherwise.
   */
  put(expectedVersion: number, record: LeaseRecord): Promise<LeaseRecord>;
  /** Releases resources (connections); optional. */
  close?(): Promise<void>;
}

export const isStoreConflict = (err: unknown): err is StoreConflictError => err instanceof StoreConflictError;
