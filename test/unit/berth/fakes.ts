// Fakes of the reconciler's two edges: an in-memory BerthLease store with resourceVersion semantics
// (409 on a stale copy) and a scripted central LeaseClient that records every call.
import type { BerthLease, BerthLeaseSpec, BerthLeaseStatus } from '../../../src/berth/api.ts';
import {
  type AcquireResult,
  type LeaseCallOptions,
  type LeaseClient,
  LeaseClientError,
  LeaseConflictError,
} from '../../../src/berth/leaseclient.ts';
import type { BerthLeaseApi } from '../../../src/berth/leaseio.ts';
import { KubeApiError } from '../../../src/kube/client.ts';
import type { ReconcileContext } from '../../../src/kube/controller.ts';
import { createLogger } from '../../../src/observability/logger.ts';

export const NS = 'team-a';

export const leaseOnlySpec = (over: Partial<BerthLeaseSpec> = {}): BerthLeaseSpec => ({
  leaseName: 'shared',
  holderIdentity: 'worker-east-1',
  ttlSeconds: 30,
  heartbeatIntervalSeconds: 10,
  semantics: 'at-most-once',
  ...over,
});

const conflict = (name: string): KubeApiError =>
  new KubeApiError(409, {
    kind: 'Status',
    status: 'Failure',
    reason: 'Conflict',
    code: 409,
    message: `Operation cannot be fulfilled on berthleases.berth.skaphos.io "${name}": the object has been modified; please apply your changes to the latest version and try again`,
  });

const notFound = (name: string): KubeApiError =>
  new KubeApiError(404, {
    kind: 'Status',
    status: 'Failure',
    reason: 'NotFound',
    code: 404,
    message: `berthleases.berth.skaphos.io "${name}" not found`,
  });

export class FakeLeaseStore implements BerthLeaseApi {
  readonly objects = new Map<string, BerthLease>();
  readonly calls: string[] = [];
  /** Fail the next status writes with 409 (a concurrent writer). */
  statusConflicts = 0;
  #rv = 100;

  create(
    name: string,
    spec: BerthLeaseSpec,
    o: { finalizer?: boolean; status?: BerthLeaseStatus } = {},
  ): BerthLease {
    const lease: BerthLease = {
      apiVersion: 'berth.skaphos.io/v1alpha1',
      kind: 'BerthLease',
      metadata: {
        name,
        namespace: NS,
        uid: `uid-${name}`,
        generation: 1,
        resourceVersion: String(++this.#rv),
        ...(o.finalizer === false ? {} : { finalizers: ['berth.skaphos.io/lease-release'] }),
      },
      spec,
      ...(o.status === undefined ? {} : { status: o.status }),
    };
    this.objects.set(name, structuredClone(lease));
    return lease;
  }

  stored(name: string): BerthLease {
    const l = this.objects.get(name);
    if (l === undefined) throw new Error(`no lease ${name}`);
    return l;
  }

  /** A deletion request: deletionTimestamp set (the object stays while finalizers remain). */
  markDeleted(name: string): void {
    const l = this.stored(name);
    l.metadata.deletionTimestamp = '2026-01-01T00:00:00Z';
    l.metadata.generation = (l.metadata.generation ?? 0) + 1;
    l.metadata.resourceVersion = String(++this.#rv);
    if ((l.metadata.finalizers ?? []).length === 0) this.objects.delete(name);
  }

  async get(_namespace: string, name: string): Promise<BerthLease | undefined> {
    this.calls.push(`get ${name}`);
    const l = this.objects.get(name);
    return l === undefined ? undefined : structuredClone(l);
  }

  async setFinalizers(lease: BerthLease, finalizers: string[]): Promise<BerthLease> {
    const name = lease.metadata.name;
    this.calls.push(`finalizers ${name} [${finalizers.join(',')}]`);
    const l = this.objects.get(name);
    if (l === undefined) throw notFound(name);
    if (l.metadata.resourceVersion !== lease.metadata.resourceVersion) throw conflict(name);
    l.metadata.finalizers = [...finalizers];
    l.metadata.resourceVersion = String(++this.#rv);
    if (l.metadata.deletionTimestamp !== undefined && finalizers.length === 0) this.objects.delete(name);
    return structuredClone(l);
  }

  async updateStatus(lease: BerthLease, status: BerthLeaseStatus): Promise<BerthLease> {
    const name = lease.metadata.name;
    this.calls.push(`status ${name}`);
    const l = this.stored(name);
    if (this.statusConflicts > 0) {
      this.statusConflicts--;
      throw conflict(name);
    }
    if (l.metadata.resourceVersion !== lease.metadata.resourceVersion) throw conflict(name);
    l.status = structuredClone(status);
    l.metadata.resourceVersion = String(++this.#rv);
    return structuredClone(l);
  }

  statusWrites(): number {
    return this.calls.filter((c) => c.startsWith('status ')).length;
  }
}

export interface CentralCall {
  op: 'acquire' | 'renew' | 'release';
  namespace: string;
  name: string;
  holder: string;
  fencingToken?: number;
  ttlSeconds?: number;
  timeoutMs: number | undefined;
}

type Answer = AcquireResult | Error | ((options: LeaseCallOptions | undefined) => Promise<AcquireResult>);

/** Answers acquire from a script (the last answer repeats) and release with ok / an error. */
export class ScriptedLeaseClient implements LeaseClient {
  readonly calls: CentralCall[] = [];
  acquireAnswers: Answer[] = [];
  releaseError: Error | undefined;

  async acquire(
    namespace: string,
    name: string,
    holder: string,
    ttlSeconds: number,
    options?: LeaseCallOptions,
  ): Promise<AcquireResult> {
    this.calls.push({ op: 'acquire', namespace, name, holder, ttlSeconds, timeoutMs: options?.timeoutMs });
    const answer = this.acquireAnswers.length > 1 ? this.acquireAnswers.shift() : this.acquireAnswers[0];
    if (answer === undefined) throw new Error('no scripted acquire answer');
    if (answer instanceof Error) throw answer;
    if (typeof answer === 'function') return answer(options);
    return { ...answer };
  }

  async renew(): Promise<AcquireResult> {
    throw new Error('the reconciler never calls Renew');
  }

  async release(
    namespace: string,
    name: string,
    holder: string,
    fencingToken: number,
    options?: LeaseCallOptions,
  ): Promise<void> {
    this.calls.push({ op: 'release', namespace, name, holder, fencingToken, timeoutMs: options?.timeoutMs });
    if (this.releaseError !== undefined) throw this.releaseError;
  }

  of(op: CentralCall['op']): CentralCall[] {
    return this.calls.filter((c) => c.op === op);
  }
}

export const acquired = (holder: string, token: number, now: number, ttlMs = 30_000): AcquireResult => ({
  acquired: true,
  holder,
  fencingToken: token,
  acquiredAt: now,
  expiresAt: now + ttlMs,
});

export const heldBy = (holder: string, token: number, expiresAt: number): AcquireResult => ({
  acquired: false,
  holder,
  fencingToken: token,
  acquiredAt: expiresAt - 30_000,
  expiresAt,
});

export const serverError = (): LeaseClientError =>
  new LeaseClientError(
    'status',
    'acquire team-a/shared: server status 500: internal error (requestId r-123)',
    {
      status: 500,
      serverMessage: 'internal error',
      requestId: 'r-123',
    },
  );

export const releaseConflict = (): LeaseConflictError =>
  new LeaseConflictError('release team-a/shared: server status 409: lease held by another identity or token');

export function ctx(name: string, signal?: AbortSignal): ReconcileContext {
  return {
    signal: signal ?? new AbortController().signal,
    log: createLogger({ level: 'silent' }),
    reconcileID: 'test',
    namespace: NS,
    name,
  };
}

export interface RecordedEvent {
  type: 'Normal' | 'Warning';
  reason: string;
  action: string;
  note: string | undefined;
  name: string | undefined;
}

export class FakeRecorder {
  readonly events: RecordedEvent[] = [];
  async normal(regarding: { name?: string }, reason: string, action: string, note?: string): Promise<void> {
    this.events.push({ type: 'Normal', reason, action, note, name: regarding.name });
  }
  async warning(regarding: { name?: string }, reason: string, action: string, note?: string): Promise<void> {
    this.events.push({ type: 'Warning', reason, action, note, name: regarding.name });
  }
  reasons(): string[] {
    return this.events.map((e) => e.reason);
  }
}
