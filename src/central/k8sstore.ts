// Kubernetes lease Store (`--store-backend k8s`, docs/central.md): one
// coordination.k8s.io/v1 Lease per key in the coordination namespace, named `<namespace>.<name>` and
// mapped field for field as the Go server does (k8slease.ts), so the Go server and this one can take
// over each other's data or run side by side. Records are never deleted: a tombstone is a Lease
// without holder that keeps its token. Keys the API refuses (validate.ts) have no object name and are
// refused here too.
//
// Writes are compare-and-swaps twice over: the store version in the `berth.skaphos.io/version`
// annotation must equal the expected version, and the update carries the resourceVersion of the
// object that showed it, so the API server refuses it (409) if anything changed in between. A 409
// whose re-read still shows the expected version was a foreign metadata-only write (a label, an
// annotation, managedFields): the update is retried on the fresh object, up to 4 attempts (the Go
// server ended the lease there, #196). Any other outcome is a StoreConflictError.
//
// Objects of earlier versions (`berth-<sha256>`) are migrated when a read finds no Go-layout object
// but a live legacy one, and by every List (so by the TTL collector's first sweep): create-only of the
// new object with the legacy record and version, then a resourceVersion-guarded seal of the old one.
// Replicas racing on it create one object (the others get AlreadyExists and adopt it) and seal once;
// the record only ever moves forward from the legacy one. docs/central.md has the argument and the
// rules for running beside a Go server.
//
// acquireTime/renewTime are instants of the central replica's clock (the lease manager's), as in every
// store: the API server's clock never enters an expiry decision (see sql/store.ts for why).
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
  readJson,
  resourcePath,
  retryAfterSeconds,
} from '../kube/client.ts';
import { type Clock, realClock } from '../kube/clock.ts';
import { type KubeRequester, KubeTransport, type RawRequest } from '../kube/transport.ts';
import {
  isMigrated,
  type LeaseObject,
  leaseObjectName,
  legacyObjectName,
  legacyProblem,
  MANAGED_SELECTOR,
  newLease,
  objectNameProblem,
  ownershipProblem,
  planList,
  recordFromLease,
  sealedLease,
  unrepresentable,
  updatedLease,
  versionOfLease,
} from './k8slease.ts';
import { keyString, type LeaseKey, type LeaseRecord } from './record.ts';
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
}

interface LeaseList {
  items?: LeaseObject[];
  metadata?: { continue?: string };
}

/** Inserts into a map used as a bounded memory (insertion order = age), dropping the oldest entry. */
function remember<V>(memory: Map<string, V>, name: string, value: V): void {
  memory.delete(name);
  memory.set(name, value);
  if (memory.size > REMEMBERED_OBJECTS) {
    const oldest = memory.keys().next().value;
    if (oldest !== undefined) memory.delete(oldest);
  }
}

/** An object under one of a key's names that is not that key's: the key fails closed. */
class ForeignObjectError extends Error {
  constructor(problem: string) {
    super(`k8s lease store: ${problem}`);
    this.name = 'ForeignObjectError';
  }
}

/** The Go-layout object name of `key`; a key the API refuses has none. */
function objectName(key: LeaseKey): string {
  const problem = objectNameProblem(key);
  if (problem !== undefined) throw new Error(`k8s lease store: ${problem}`);
  return leaseObjectName(key);
}

export class K8sLeaseStore implements Store {
  readonly backend = 'k8s';
  readonly #transport: KubeRequester;
  readonly #owned: KubeTransport | undefined;
  readonly #namespace: string;
  readonly #throttle: RequestThrottle;
  readonly #timeoutMs: number;
  readonly #clock: Clock;
  /** Last object seen per Go-layout name. */
  readonly #seen = new Map<string, LeaseObject>();
  /**
   * Legacy names known to hold no live object. Nothing creates or revives a legacy object any more,
   * so once seen absent or sealed it stays so, and this replica stops asking.
   */
  readonly #noLegacy = new Map<string, true>();

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
  }

  /** Total client-side throttling delay so far, in ms. */
  get throttledMs(): number {
    return this.#throttle.waitedMs;
  }

  #path(name?: string): string {
    return resourcePath(
      { group: 'coordination.k8s.io', version: 'v1', plural: 'leases', namespace: this.#namespace },
      name,
    );
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

  /** The object called `name`, or undefined; throws when it is not `key`'s, as `problemOf` judges. */
  async #fetch(
    name: string,
    key: LeaseKey,
    problemOf: (lease: LeaseObject, key: LeaseKey) => string | undefined,
  ): Promise<LeaseObject | undefined> {
    let lease: LeaseObject;
    try {
      lease = await this.#request<LeaseObject>({ path: this.#path(name) });
    } catch (err) {
      if (isNotFound(err)) return undefined;
      throw err;
    }
    const problem = problemOf(lease, key);
    if (problem !== undefined) throw new ForeignObjectError(problem);
    return lease;
  }

  /** The Go-layout object of `key`, or undefined. */
  async #read(key: LeaseKey, name: string): Promise<LeaseObject | undefined> {
    const lease = await this.#fetch(name, key, ownershipProblem);
    if (lease === undefined) this.#seen.delete(name);
    else remember(this.#seen, name, lease);
    return lease;
  }

  /** `key`'s legacy object (live or sealed), unless this replica knows there is no live one. */
  async #legacy(key: LeaseKey): Promise<LeaseObject | undefined> {
    const name = legacyObjectName(key);
    if (this.#noLegacy.has(name)) return undefined;
    const legacy = await this.#fetch(name, key, legacyProblem);
    if (legacy === undefined || isMigrated(legacy)) remember(this.#noLegacy, name, true);
    return legacy;
  }

  /** The object holding `key`'s record: the Go-layout one, created first from a live legacy one. */
  async #resolve(key: LeaseKey, name: string): Promise<LeaseObject | undefined> {
    const current = await this.#read(key, name);
    if (current !== undefined) return current;
    const legacy = await this.#legacy(key);
    if (legacy === undefined) return undefined;
    // Sealed only after the new object was created: our first read came before that creation.
    if (isMigrated(legacy)) return this.#read(key, name);
    return this.#migrate(key, name, legacy);
  }

  /**
   * Carries a live legacy object's record, version included, to `name` (create-only, so racing
   * replicas create it once and the rest adopt it), then seals the legacy object.
   */
  async #migrate(key: LeaseKey, name: string, legacy: LeaseObject): Promise<LeaseObject> {
    let current: LeaseObject | undefined;
    try {
      current = await this.#request<LeaseObject>({
        method: 'POST',
        path: this.#path(),
        body: newLease(name, this.#namespace, recordFromLease(legacy, key), versionOfLease(legacy)),
      });
      remember(this.#seen, name, current);
    } catch (err) {
      if (!isAlreadyExists(err)) throw err;
      current = await this.#read(key, name);
      if (current === undefined)
        throw new Error(
          `k8s lease store: ${name} was deleted while ${legacy.metadata.name} was migrated to it`,
        );
    }
    await this.#seal(legacy, key);
    return current;
  }

  /** Seals a migrated legacy object, guarded by the resourceVersion it was read at. */
  async #seal(legacy: LeaseObject, key: LeaseKey): Promise<void> {
    try {
      await this.#request<LeaseObject>({
        method: 'PUT',
        path: this.#path(legacy.metadata.name),
        body: sealedLease(legacy, key),
      });
    } catch (err) {
      // Someone wrote it since (another replica sealing it): the next List seals it if it is still live.
      if (!isConflict(err) && !isNotFound(err)) throw err;
    }
  }

  async ping(signal?: AbortSignal): Promise<void> {
    await this.#request<LeaseList>({
      path: this.#path(),
      query: { limit: 1, labelSelector: MANAGED_SELECTOR },
      signal,
    });
  }

  async get(key: LeaseKey): Promise<LeaseRecord | undefined> {
    const lease = await this.#resolve(key, objectName(key));
    return lease === undefined ? undefined : recordFromLease(lease, key);
  }

  async list(): Promise<LeaseRecord[]> {
    const leases: LeaseObject[] = [];
    let token: string | undefined;
    do {
      const page = await this.#request<LeaseList>({
        path: this.#path(),
        query: { labelSelector: MANAGED_SELECTOR, limit: LIST_PAGE, continue: token },
      });
      leases.push(...(page.items ?? []));
      token = page.metadata?.continue || undefined;
    } while (token !== undefined);
    const plan = planList(leases);
    const records: LeaseRecord[] = [];
    for (const { key, lease } of plan.current) {
      remember(this.#seen, lease.metadata.name, lease);
      records.push(recordFromLease(lease, key));
    }
    for (const { key, lease } of plan.seal) await this.#seal(lease, key);
    for (const { key, lease } of plan.migrate) {
      try {
        records.push(recordFromLease(await this.#migrate(key, leaseObjectName(key), lease), key));
      } catch (err) {
        // An object outside the List (not labelled) holds the new name: only that key fails closed.
        if (!(err instanceof ForeignObjectError)) throw err;
      }
    }
    return records;
  }

  async put(expectedVersion: number, record: LeaseRecord): Promise<LeaseRecord> {
    const problem = unrepresentable(record);
    if (problem !== undefined) throw new Error(`k8s lease store: ${problem}`);
    const key = record.key;
    const name = objectName(key);
    const label = keyString(key);
    if (expectedVersion === 0) {
      // A key whose record still sits in a live legacy object is not absent.
      const legacy = await this.#legacy(key);
      if (legacy !== undefined && !isMigrated(legacy)) {
        await this.#migrate(key, name, legacy);
        throw new StoreConflictError(`lease store: ${label} already exists (in ${legacy.metadata.name})`);
      }
      try {
        const created = await this.#request<LeaseObject>({
          method: 'POST',
          path: this.#path(),
          body: newLease(name, this.#namespace, record),
        });
        remember(this.#seen, name, created);
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
      if (problem !== undefined) throw new ForeignObjectError(problem);
    }
    let current =
      remembered !== undefined && versionOfLease(remembered) === expectedVersion ? remembered : undefined;
    for (let attempt = 1; attempt <= METADATA_CONFLICT_ATTEMPTS; attempt++) {
      if (current === undefined) {
        current = await this.#resolve(key, name);
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
        remember(this.#seen, name, updated);
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
    this.#noLegacy.clear();
    await this.#owned?.close();
  }
}
