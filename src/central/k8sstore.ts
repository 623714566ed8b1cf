// Kubernetes lease Store (`--store-backend k8s`, reference/berth-spec.md §3.8): one
// coordination.k8s.io/v1 Lease per key in the coordination namespace (naming and field mapping in
// k8slease.ts). Records are never deleted: a tombstone is a Lease without holder that keeps its token.
//
// Writes are compare-and-swaps twice over: the store version in the `berth.skaphos.io/version`
// annotation must equal the expected version, and the update carries the resourceVersion of the
// object that showed it, so the API server refuses it (409) if anything changed in between. A 409
// whose re-read still shows the expected version was a foreign metadata-only write (a label, an
// annotation, managedFields): the update is retried on the fresh object, up to 4 attempts (the Go
// server ended the lease there, #196). Any other outcome is a StoreConflictError.
//
// acquireTime/renewTime are instants of the central replica's clock (the lease manager's), as in every
// store: the API server's clock never enters an expiry decision (see postgres/store.ts for why).
//
// The object that answered the last read or write of each key is remembered, so the manager's usual
// get-then-put costs one GET and one PUT; a stale memory only costs the 409 and a re-read.
//
// Requests pass a client-side token bucket (`--coordination-qps`, `--coordination-burst`). client-go's
// defaults (5 qps, burst 10) throttled the Go server to ~10 s acquires under load; ours default to
// 500 qps / burst 1000, sized for 2,000 leases renewed every 10 s (two requests per renewal = 400/s),
// which is fewer Lease writes than the node heartbeats of a 5,000-node cluster. The API server's own
// priority-and-fairness limits still apply, and a 429 is retried after its Retry-After.
import type { KubeConfig } from '@kubernetes/client-node';
import {
  isAlreadyExists,
  isConflict,
  isNotFound,
  isTooManyRequests,
  type KubeRequester,
  KubeTransport,
  type RawRequest,
  readJson,
  retryAfterSeconds,
} from '../kube/client.ts';
import { type Clock, realClock } from '../kube/clock.ts';
import {
  keyOfLease,
  type LeaseObject,
  leaseObjectName,
  MANAGED_SELECTOR,
  newLease,
  ownershipProblem,
  recordFromLease,
  unrepresentable,
  updatedLease,
  versionOfLease,
} from './k8slease.ts';
import type { LeaseKey, LeaseRecord } from './record.ts';
import { type Store, StoreConflictError } from './store.ts';
import { RequestThrottle } from './throttle.ts';

export const DEFAULT_COORDINATION_QPS = 500;
export const DEFAULT_COORDINATION_BURST = 1_000;
export const METADATA_CONFLICT_ATTEMPTS = 4;
export const DEFAULT_K8S_REQUEST_TIMEOUT_MS = 10_000;
const THROTTLED_ATTEMPTS = 3;
const MAX_RETRY_AFTER_MS = 5_000;
const LIST_PAGE = 500;
const REMEMBERED_OBJECTS = 10_000;

export interface K8sStoreOptions {
  /** The coordination cluster. */
  kc?: KubeConfig;
  /** Alternatively a ready transport (tests); it is not closed by the store. */
  transport?: KubeRequester;
  /** Namespace holding the Lease objects (`--coordination-namespace`). */
  namespace: string;
  /** Client-side limit, requests per second; 0 disables it. Default 500. */
  qps?: number;
  /** Default 1000. */
  burst?: number;
  /** Per-request timeout. Default 10 s. */
  requestTimeoutMs?: number;
  clock?: Clock;
  /** Object naming; tests inject collisions. Default leaseObjectName. */
  objectName?: (key: LeaseKey) => string;
}

interface LeaseList {
  items?: LeaseObject[];
  metadata?: { continue?: string };
}

export class K8sLeaseStore implements Store {
  readonly backend = 'k8s';
  readonly #transport: KubeRequester;
  readonly #owned: KubeTransport | undefined;
  readonly #namespace: string;
  readonly #throttle: RequestThrottle;
  readonly #timeoutMs: number;
  readonly #clock: Clock;
  readonly #objectName: (key: LeaseKey) => string;
  /** Last object seen per object name (insertion order = age). */
  readonly #seen = new Map<string, LeaseObject>();

  constructor(options: K8sStoreOptions) {
    if (options.transport !== undefined) {
      this.#transport = options.transport;
    } else if (options.kc !== undefined) {
      this.#owned = new KubeTransport(options.kc);
      this.#transport = this.#owned;
    } else {
      throw new Error('k8s lease store: a KubeConfig or a transport is required');
    }
    if (options.namespace === '') throw new Error('k8s lease store: a coordination namespace is required');
    this.#namespace = options.namespace;
    this.#clock = options.clock ?? realClock;
    this.#throttle = new RequestThrottle(
      options.qps ?? DEFAULT_COORDINATION_QPS,
      options.burst ?? DEFAULT_COORDINATION_BURST,
      this.#clock,
    );
    this.#timeoutMs = options.requestTimeoutMs ?? DEFAULT_K8S_REQUEST_TIMEOUT_MS;
    this.#objectName = options.objectName ?? leaseObjectName;
  }

  /** Total client-side throttling delay so far, in ms. */
  get throttledMs(): number {
    return this.#throttle.waitedMs;
  }

  #path(name?: string): string {
    const base = `/apis/coordination.k8s.io/v1/namespaces/${encodeURIComponent(this.#namespace)}/leases`;
    return name === undefined ? base : `${base}/${encodeURIComponent(name)}`;
  }

  async #request<T>(req: RawRequest): Promise<T> {
    for (let attempt = 1; ; attempt++) {
      await this.#throttle.wait(req.signal);
      const timeout = AbortSignal.timeout(this.#timeoutMs);
      const signal = req.signal === undefined ? timeout : AbortSignal.any([req.signal, timeout]);
      try {
        return await readJson<T>(await this.#transport.request({ ...req, signal }));
      } catch (err) {
        if (!isTooManyRequests(err) || attempt >= THROTTLED_ATTEMPTS) throw err;
        const wait = Math.min(MAX_RETRY_AFTER_MS, (retryAfterSeconds(err) ?? 1) * 1000);
        await this.#clock.sleep(wait, req.signal);
      }
    }
  }

  #remember(lease: LeaseObject): void {
    const name = lease.metadata.name;
    this.#seen.delete(name);
    this.#seen.set(name, lease);
    if (this.#seen.size > REMEMBERED_OBJECTS) {
      const oldest = this.#seen.keys().next().value;
      if (oldest !== undefined) this.#seen.delete(oldest);
    }
  }

  /** The Lease for `key`, or undefined; throws when the object there belongs to another key. */
  async #read(key: LeaseKey, name: string): Promise<LeaseObject | undefined> {
    let lease: LeaseObject;
    try {
      lease = await this.#request<LeaseObject>({ path: this.#path(name) });
    } catch (err) {
      if (isNotFound(err)) {
        this.#seen.delete(name);
        return undefined;
      }
      throw err;
    }
    const problem = ownershipProblem(lease, key);
    if (problem !== undefined) throw new Error(`k8s lease store: ${problem}`);
    this.#remember(lease);
    return lease;
  }

  async ping(signal?: AbortSignal): Promise<void> {
    await this.#request<LeaseList>({
      path: this.#path(),
      query: { limit: 1, labelSelector: MANAGED_SELECTOR },
      signal,
    });
  }

  async get(key: LeaseKey): Promise<LeaseRecord | undefined> {
    const lease = await this.#read(key, this.#objectName(key));
    return lease === undefined ? undefined : recordFromLease(lease, key);
  }

  async list(): Promise<LeaseRecord[]> {
    const records: LeaseRecord[] = [];
    let token: string | undefined;
    do {
      const page = await this.#request<LeaseList>({
        path: this.#path(),
        query: { labelSelector: MANAGED_SELECTOR, limit: LIST_PAGE, continue: token },
      });
      for (const lease of page.items ?? []) {
        const key = keyOfLease(lease);
        // Objects whose name does not match their annotated key are not ours to interpret.
        if (key === undefined || this.#objectName(key) !== lease.metadata.name) continue;
        this.#remember(lease);
        records.push(recordFromLease(lease, key));
      }
      token = page.metadata?.continue || undefined;
    } while (token !== undefined);
    return records;
  }

  async put(expectedVersion: number, record: LeaseRecord): Promise<LeaseRecord> {
    const problem = unrepresentable(record);
    if (problem !== undefined) throw new Error(`k8s lease store: ${problem}`);
    const key = record.key;
    const name = this.#objectName(key);
    const label = `${key.namespace}/${key.name}`;
    if (expectedVersion === 0) {
      try {
        const created = await this.#request<LeaseObject>({
          method: 'POST',
          path: this.#path(),
          body: newLease(name, this.#namespace, record),
        });
        this.#remember(created);
        return recordFromLease(created, key);
      } catch (err) {
        if (isAlreadyExists(err)) throw new StoreConflictError(`lease store: ${label} already exists`);
        throw err;
      }
    }
    const remembered = this.#seen.get(name);
    if (remembered !== undefined) {
      // The object under this name must be this key's, whichever way we learnt of it.
      const problem = ownershipProblem(remembered, key);
      if (problem !== undefined) throw new Error(`k8s lease store: ${problem}`);
    }
    let current =
      remembered !== undefined && versionOfLease(remembered) === expectedVersion ? remembered : undefined;
    for (let attempt = 1; attempt <= METADATA_CONFLICT_ATTEMPTS; attempt++) {
      if (current === undefined) {
        current = await this.#read(key, name);
        if (current === undefined) throw new StoreConflictError(`lease store: ${label} does not exist`);
        const version = versionOfLease(current);
        if (version !== expectedVersion)
          throw new StoreConflictError(
            `lease store: ${label} is at version ${version}, not ${expectedVersion}`,
          );
      }
      try {
        const updated = await this.#request<LeaseObject>({
          method: 'PUT',
          path: this.#path(name),
          body: updatedLease(current, record, expectedVersion + 1),
        });
        this.#remember(updated);
        return recordFromLease(updated, key);
      } catch (err) {
        if (isNotFound(err)) {
          this.#seen.delete(name);
          throw new StoreConflictError(`lease store: ${label} was deleted`);
        }
        if (!isConflict(err)) throw err;
        // Someone wrote since `current`: re-read; an unchanged version means a metadata-only write.
        this.#seen.delete(name);
        current = undefined;
      }
    }
    throw new StoreConflictError(
      `lease store: ${label} kept changing (${METADATA_CONFLICT_ATTEMPTS} conflicting updates at version ${expectedVersion})`,
    );
  }

  async close(): Promise<void> {
    this.#seen.clear();
    await this.#owned?.close();
  }
}
