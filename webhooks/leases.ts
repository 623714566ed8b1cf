// BerthLeases as admission sees them: read leniently from raw JSON (one malformed lease must not break
// decisions about others), `activeAt` (docs/behaviour.md §2.3 step 4), target matching (§4.3 step 3), and the per-review
// view of a namespace's leases that keeps reads to a minimum without ever caching across reviews.
import type { KubernetesObject } from '@kubernetes/client-node';
import {
  API_VERSION,
  KIND,
  type WorkloadStatus,
  workloadActiveAt,
  workloadStatusSchema,
} from '../src/berth/api.ts';
import type { AdmissionIO, JsonObject } from './io.ts';

const isRecord = (v: unknown): v is JsonObject => typeof v === 'object' && v !== null && !Array.isArray(v);
const str = (v: unknown): string => (typeof v === 'string' ? v : '');

export interface LeaseFacts {
  name: string;
  uid: string;
  deleting: boolean;
  target: { apiVersion: string; kind: string; name: string } | undefined;
  /** Undefined when absent or not a valid WorkloadStatus (then treated as absent: fail closed). */
  workload: WorkloadStatus | undefined;
}

export function leaseFacts(raw: JsonObject): LeaseFacts {
  const metadata = isRecord(raw.metadata) ? raw.metadata : {};
  const spec = isRecord(raw.spec) ? raw.spec : {};
  const status = isRecord(raw.status) ? raw.status : {};
  const t = isRecord(spec.target) ? spec.target : undefined;
  const parsed = workloadStatusSchema.safeParse(status.workload);
  return {
    name: str(metadata.name),
    uid: str(metadata.uid),
    deleting: str(metadata.deletionTimestamp) !== '',
    target: t ? { apiVersion: str(t.apiVersion), kind: str(t.kind), name: str(t.name) } : undefined,
    workload: parsed.success ? parsed.data : undefined,
  };
}

/**
 * Whether the lease still has cleanup responsibility for a previous target (§4.4 step 7e): a workload
 * phase or registered Pods. Read from the raw status so that a malformed record also counts.
 */
export function hasCleanupResponsibility(raw: JsonObject): boolean {
  const status = isRecord(raw.status) ? raw.status : {};
  const w = isRecord(status.workload) ? status.workload : undefined;
  if (w === undefined) return false;
  const phase = w.phase;
  const pods = w.pods;
  return (phase !== undefined && phase !== null && phase !== '') || (Array.isArray(pods) && pods.length > 0);
}

/** The spec of the lease as the reconciler validates it (§1.2), every field optional. */
export function leaseSpec(raw: JsonObject): JsonObject {
  return isRecord(raw.spec) ? raw.spec : {};
}

/**
 * activeAt(now): not deleting, a workload record in phase Active with a deadline more than the stop lead
 * (`--stop-lead`) ahead and a positive token. Go's zero time (and anything unparsable) counts as no
 * deadline. One definition, shared with the reconciler: src/berth/api.ts `workloadActiveAt`.
 */
export function activeAt(lease: LeaseFacts, now: number, stopLeadMs: number): boolean {
  return workloadActiveAt(lease.workload, lease.deleting, now, stopLeadMs);
}

export interface ObjectRef {
  apiVersion: string;
  kind: string;
  name: string;
}

export const targets = (lease: LeaseFacts, o: ObjectRef): boolean =>
  lease.target !== undefined &&
  lease.target.name === o.name &&
  lease.target.apiVersion === o.apiVersion &&
  lease.target.kind === o.kind;

/** Lists carry items without apiVersion/kind for some servers; the status write needs them. */
export function withTypeMeta(raw: JsonObject): JsonObject {
  return { ...raw, apiVersion: API_VERSION, kind: KIND };
}

/**
 * BerthLeases as the informer every replica keeps shows them (the BerthLease controller's cache). Only the
 * question "which lease targets the root of an owned object's chain" is answered from it; why that cannot
 * admit a managed Pod ungated: docs/admission.md, "Cached lease lookups".
 */
export interface LeaseCache {
  /** Whether the informer has listed once; until then every lookup is a live read. */
  synced(): boolean;
  /** The cached leases of a namespace, as the API server sent them. */
  inNamespace(namespace: string): readonly KubernetesObject[];
}

/**
 * The BerthLeases of one namespace for the duration of one review. The first look is a LIST with
 * limit=1 (is there any lease at all?); when that answer was complete it also serves every later lookup
 * of the same review, otherwise a full LIST or a GET follows. Only `forOwnedChain` may answer from the
 * cache; every other lookup, and everything a rule decides on (a lease by name), is live.
 */
export class ReviewLeases {
  readonly #io: AdmissionIO;
  readonly #namespace: string;
  readonly #cache: LeaseCache | undefined;
  #complete: JsonObject[] | undefined;
  #any: boolean | undefined;

  constructor(io: AdmissionIO, namespace: string, cache?: LeaseCache) {
    this.#io = io;
    this.#namespace = namespace;
    this.#cache = cache;
  }

  /**
   * The leases to match the root of an owned object's chain against: the cache's when it has synced (no
   * read), else every lease (a live LIST). Never the source of a lease a rule then reads by name.
   */
  forOwnedChain(): JsonObject[] | Promise<JsonObject[]> {
    if (this.#cache?.synced() === true)
      return this.#cache.inNamespace(this.#namespace).map((lease) => withTypeMeta({ ...lease }));
    return this.all();
  }

  /** Whether the namespace holds any BerthLease (one LIST with limit=1). */
  async any(): Promise<boolean> {
    if (this.#any === undefined) {
      const first = await this.#io.listLeases(this.#namespace, 1);
      this.#any = first.items.length > 0;
      if (first.complete) this.#complete = first.items.map(withTypeMeta);
    }
    return this.#any;
  }

  /** Every BerthLease in the namespace. */
  async all(): Promise<JsonObject[]> {
    if (this.#complete === undefined) {
      const list = await this.#io.listLeases(this.#namespace);
      this.#complete = list.items.map(withTypeMeta);
      this.#any = this.#complete.length > 0;
    }
    return this.#complete;
  }

  /** One BerthLease by name: from this review's complete list when there is one, else a GET. */
  async get(name: string): Promise<JsonObject | undefined> {
    if (this.#complete !== undefined) {
      return this.#complete.find((l) => isRecord(l.metadata) && l.metadata.name === name);
    }
    const raw = await this.#io.getLease(this.#namespace, name);
    return raw === undefined ? undefined : withTypeMeta(raw);
  }

  /** Forget what was read (after a write conflict, the next lookup must go to the server). */
  invalidate(): void {
    this.#complete = undefined;
    this.#any = undefined;
  }
}
