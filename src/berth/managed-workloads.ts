// The managed-workload path (docs/behaviour.md §2.3-§2.8, §4.5): the WorkloadManager the
// BerthLease reconciler calls when workload admission is enabled, and the controllers that run beside it
// (managed-pods, managed-permits, managed-jobs).
//
//   verifyTarget   §2.3 step 6: outside the operator namespace, an admission record, the live target
//                  is the admitted one (UID) and carries the lease's binding — exact messages
//   stopTarget     keep an unverified target or a never-activated standby's target stopped (a write only
//                  when it is not stopped; the stop fence rides along)
//   stopWorkload   §2.4 step 1: commit Stopping (CAS), stop the target with the stop fence (never a
//                  replacement with another UID), suspend and delete managed Jobs, delete every managed
//                  Pod (UID preconditions), `done` once all are terminal or gone
//   pruneCompleted §2.3 step 12: registrations of Pods that still exist and are not terminal
//   activate       §2.3 step 14: acquireAction (UID checked, version-guarded), then permitPods
//   exclusive      the lease's reconcile and managed-permits take turns (KeyedLock)
//
// Events on the BerthLease: Activated (once per ownership epoch), Stopping, Drained (the reconciler
// reports Released). Metrics: berth_managed_pods_registered, berth_pod_gate_removal_seconds,
// berth_workload_stop_seconds (from Stopping committed to drained).

import { isDeepStrictEqual } from 'node:util';
import type { KubernetesObject } from '@kubernetes/client-node';
import type { Registry } from 'prom-client';
import { type Clock, realClock } from '../kube/clock.ts';
import type { ReconcileContext } from '../kube/controller.ts';
import { ControllerRunnables } from '../kube/controller-runnables.ts';
import type { EventHandlers } from '../kube/informer.ts';
import { objectKey, splitKey } from '../kube/keys.ts';
import type { Runnable } from '../kube/manager.ts';
import type { BackoffPolicy } from '../kube/restart-backoff.ts';
import type { KubeRequester } from '../kube/transport.ts';
import type { Logger } from '../observability/logger.ts';
import { qualifiedName } from '../workloads/model.ts';
import {
  type BerthLease,
  type BerthLeaseStatus,
  berthLeaseSchema,
  DEFAULT_STOP_LEAD_MS,
  type LeaseAction,
  outOfScopeMessage,
  type PermittedPod,
  REQUEUE_ON_FAILURE_MS,
  ReconcileError,
  WorkloadPhase,
} from './api.ts';
import { drainJobs, drainPods } from './drain.ts';
import { KeyedLock } from './keyed-lock.ts';
import type { LeaseEventRecorder } from './lease-reporter.ts';
import { type BerthLeaseApi, kubeBerthLeaseApi } from './leaseio.ts';
import { ManagedJobs } from './managed-jobs.ts';
import { ManagedPods } from './managed-pods.ts';
import { type ManagedWorkloadMetrics, managedWorkloadMetrics } from './metrics.ts';
import type { ScopeView } from './namespace-scope.ts';
import { activeAt, isDeleting } from './ownership.ts';
import { observedWrite, type WriteObserver } from './ownwrites.ts';
import { type LeaseSession, managedSelector, type PermitOutcome, permitPods } from './permit.ts';
import { type StatusStamp, stoppingStatus } from './status.ts';
import {
  applyTargetAction,
  describeTarget,
  stopAction,
  type TargetWrite,
  targetIdentityError,
  targetKind,
} from './targets.ts';
import { LeaseEventAction, LeaseEventReason } from './transitions.ts';
import {
  apiMessage,
  isTerminalPod,
  type KubeObj,
  kubeWorkloadApi,
  uidOf,
  type WorkloadApi,
} from './workload-io.ts';
import type {
  LeaseRun,
  StopProgress,
  TargetVerdict,
  VerifiedTarget,
  WorkloadManager,
} from './workload-manager.ts';

/** Default workers of each managed controller. */
export const DEFAULT_MANAGED_CONCURRENCY = 4;

export interface ManagedWorkloadsOptions {
  /** The operator's transport (its identity must be the `--workload-operator-user`). */
  transport: KubeRequester;
  /** Namespace of the operator: no managed targets there. */
  operatorNamespace: string;
  /** Overrides the Kubernetes edges (tests). */
  api?: WorkloadApi;
  leases?: BerthLeaseApi;
  recorder?: LeaseEventRecorder;
  /** Deadlines and measurements; default the real clock. */
  clock?: Clock;
  informerClock?: Clock;
  informerBackoff?: Partial<BackoffPolicy>;
  maxConcurrentReconciles?: number;
  registry?: Registry;
  logger?: Logger;
  /** The opt-in admission scope: a lease outside it is never activated, and an active one is stopped. */
  scope?: ScopeView;
  /** `--stop-lead` (default DEFAULT_STOP_LEAD_MS): no Pod is permitted within it of the deadline. */
  stopLeadMs?: number;
}

/** The BerthLease controller as the managed path uses it (BerthLeaseController satisfies it). */
export interface LeaseControllerLink {
  informer: {
    addEventHandler(handlers: EventHandlers<KubernetesObject>): () => void;
    get(key: string): KubernetesObject | undefined;
  };
  enqueue(key: string): void;
  ownWrites?: WriteObserver;
}

/** Whether a lease transition means its Pods and Jobs must be looked at again. */
export function closingTransition(old: BerthLease | undefined, next: BerthLease | undefined): boolean {
  if (next === undefined) return old !== undefined;
  if (old !== undefined && old.metadata.uid !== next.metadata.uid) return true;
  const closing = (l: BerthLease | undefined): boolean =>
    l !== undefined && (isDeleting(l) || l.status?.workload?.phase === WorkloadPhase.Stopping);
  // Into a closing state, or a new lease (a replacement's predecessor's objects must go).
  return (closing(next) && !closing(old)) || old === undefined;
}

const parseCached = (o: KubernetesObject | undefined): BerthLease | undefined => {
  if (o === undefined) return undefined;
  const parsed = berthLeaseSchema.safeParse(o);
  return parsed.success ? parsed.data : undefined;
};

/** A note for the Activated event. */
function activationNote(lease: BerthLease, action: LeaseAction, write: TargetWrite, token: number): string {
  const target = lease.spec.target === undefined ? 'target' : describeTarget(lease.spec.target);
  const what =
    action.suspend !== undefined
      ? write.outcome === 'written'
        ? 'resumed'
        : 'already resumed'
      : write.outcome === 'written'
        ? `scaled to ${action.scale?.replicas ?? 0} replicas`
        : `already at ${action.scale?.replicas ?? 0} replicas`;
  return `activated ${target} with fencing token ${token}: ${write.outcome === 'absent' ? 'target not found' : what}`;
}

export class ManagedWorkloads implements WorkloadManager, VerifiedTarget {
  readonly pods: ManagedPods;
  readonly jobs: ManagedJobs;
  readonly #api: WorkloadApi;
  readonly #leases: BerthLeaseApi;
  readonly #operatorNamespace: string;
  readonly #recorder: LeaseEventRecorder | undefined;
  readonly #clock: Clock;
  readonly #stopLeadMs: number;
  readonly #metrics: ManagedWorkloadMetrics | undefined;
  readonly #log: Logger | undefined;
  readonly #lock = new KeyedLock();
  /** Lease UID -> when its current stop began (wall clock). */
  readonly #stops = new Map<string, number>();
  /** Lease UIDs whose current stop already reported Drained (a release retry must not report it again). */
  readonly #drained = new Set<string>();
  /** Lease UID -> fencing token of the last Activated event. */
  readonly #activated = new Map<string, number>();
  /** managed-pods, managed-permits and managed-jobs on their two caches, as one pair of runnables. */
  readonly #runnables: ControllerRunnables;
  readonly #scope: ScopeView | undefined;
  #link: LeaseControllerLink | undefined;

  constructor(options: ManagedWorkloadsOptions) {
    this.#api = options.api ?? kubeWorkloadApi(options.transport);
    this.#leases = options.leases ?? kubeBerthLeaseApi(options.transport);
    this.#operatorNamespace = options.operatorNamespace;
    this.#recorder = options.recorder;
    this.#clock = options.clock ?? realClock;
    this.#stopLeadMs = options.stopLeadMs ?? DEFAULT_STOP_LEAD_MS;
    this.#metrics = options.registry === undefined ? undefined : managedWorkloadMetrics(options.registry);
    this.#log = options.logger;
    this.#scope = options.scope;
    const hooks = {
      cachedLease: (key: string) => parseCached(this.#link?.informer.get(key)),
      nudgeLease: (key: string) => this.#link?.enqueue(key),
      permit: (key: string, ctx: ReconcileContext) => this.#permit(key, ctx),
    };
    const common = {
      transport: options.transport,
      api: this.#api,
      leases: this.#leases,
      hooks,
      clock: this.#clock,
      stopLeadMs: this.#stopLeadMs,
      informerClock: options.informerClock ?? realClock,
      maxConcurrentReconciles: options.maxConcurrentReconciles ?? DEFAULT_MANAGED_CONCURRENCY,
      ...(options.informerBackoff ? { informerBackoff: options.informerBackoff } : {}),
      ...(options.registry ? { registry: options.registry } : {}),
      ...(options.logger ? { logger: options.logger } : {}),
    };
    this.pods = new ManagedPods(common);
    this.jobs = new ManagedJobs(common);
    // The Pod and Job controllers are built with their informers (managed-pods.ts, managed-jobs.ts);
    // managed-permits has no source of its own: Pod events and lease reconciles enqueue it.
    this.#runnables = new ControllerRunnables({
      name: 'managed-workloads',
      caches: [this.pods.informer, this.jobs.informer],
      controllers: [this.pods.pods, this.pods.permits, this.jobs.controller],
    });
  }

  /**
   * Connects to the BerthLease controller: its cache's events re-examine the Pods and Jobs of a lease
   * that starts closing, is deleted or replaced; nudges enqueue lease reconciles; status writes made
   * here are announced to its own-writes filter. Call once, before starting.
   */
  attach(link: LeaseControllerLink): void {
    this.#link = link;
    const changed = (old: KubernetesObject | undefined, next: KubernetesObject | undefined): void => {
      const before = parseCached(old);
      const after = parseCached(next);
      if (next === undefined && before !== undefined) this.#forget(before);
      if (!closingTransition(before, after)) return;
      const key = objectKey((next ?? old) as KubernetesObject);
      this.pods.enqueueForLease(key);
      this.jobs.enqueueForLease(key);
    };
    link.informer.addEventHandler({
      onAdd: (lease) => changed(undefined, lease),
      onUpdate: (old, lease) => changed(old, lease),
      onDelete: (lease) => changed(lease, undefined),
    });
  }

  // ---- WorkloadManager ----

  async verifyTarget(run: LeaseRun): Promise<TargetVerdict> {
    const lease = run.lease;
    if ((lease.metadata.namespace ?? '') === this.#operatorNamespace)
      return { ok: false, message: ReconcileError.operatorNamespace, retryAfterMs: undefined };
    const target = lease.spec.target;
    if (target === undefined) return { ok: true, target: this };
    const outside = this.#outsideScope(lease);
    if (outside !== undefined) return outside;
    if (!lease.status?.workload?.targetUID)
      return { ok: false, message: ReconcileError.noAdmissionRecord, retryAfterMs: REQUEUE_ON_FAILURE_MS };
    const kind = targetKind(target);
    let live: KubeObj | undefined;
    try {
      live = await this.#api.get(kind, lease.metadata.namespace ?? '', target.name, run.signal);
    } catch (err) {
      if (run.signal.aborted) throw err;
      return { ok: false, message: apiMessage(err), retryAfterMs: REQUEUE_ON_FAILURE_MS, transient: true };
    }
    if (live === undefined)
      return {
        ok: false,
        message: `${qualifiedName(kind, target.name)} not found`,
        retryAfterMs: REQUEUE_ON_FAILURE_MS,
      };
    const mismatch = targetIdentityError(lease, live);
    return mismatch === undefined
      ? { ok: true, target: this }
      : { ok: false, message: mismatch, retryAfterMs: REQUEUE_ON_FAILURE_MS };
  }

  /**
   * The scope as the namespace informer shows it: out of scope is final (an Active workload is stopped),
   * an informer that has not listed yet is transient (an Active one is kept until its deadline).
   */
  #outsideScope(lease: BerthLease): TargetVerdict | undefined {
    if (this.#scope === undefined) return undefined;
    const namespace = lease.metadata.namespace ?? '';
    const inScope = this.#scope.cached(namespace);
    if (inScope === true) return undefined;
    if (inScope === false)
      // Reconciled again at once when the namespace enters the scope (the informer), and every second
      // meanwhile, as for a target without an admission record: a target created out of review is kept
      // stopped.
      return { ok: false, message: outOfScopeMessage(namespace), retryAfterMs: REQUEUE_ON_FAILURE_MS };
    return {
      ok: false,
      message: 'the namespaces of the workload admission scope are not known yet',
      retryAfterMs: REQUEUE_ON_FAILURE_MS,
      transient: true,
    };
  }

  async confirmActivation(run: LeaseRun): Promise<string | undefined> {
    if (this.#scope === undefined) return undefined;
    const namespace = run.lease.metadata.namespace ?? '';
    return (await this.#scope.live(namespace, run.signal)) ? undefined : outOfScopeMessage(namespace);
  }

  async stopTarget(run: LeaseRun): Promise<void> {
    const lease = run.lease;
    const target = lease.spec.target;
    if (target === undefined) return;
    const write = await applyTargetAction(this.#api, lease, stopAction(target), {
      expectedUID: lease.status?.workload?.targetUID ?? '',
      onReplaced: 'skip',
      fence: { value: lease.metadata.resourceVersion ?? '', mode: 'with-change' },
      signal: run.signal,
    });
    if (write.outcome === 'written') run.log.info({ patch: write.patch }, 'target stopped');
  }

  async stopWorkload(run: LeaseRun): Promise<StopProgress> {
    const target = run.lease.spec.target;
    if (target === undefined) return 'done';
    const leaseUID = run.lease.metadata.uid ?? '';
    if (run.lease.status?.workload?.phase !== WorkloadPhase.Stopping) {
      // Commit Stopping first: it closes activation (the webhook and every permit check it) and loses
      // against nothing stale (CAS).
      await run.writeStatus(stoppingStatus(run.lease.status, run.lease.spec.leaseName, run.stamp()));
      this.#stops.set(leaseUID, this.#clock.now());
      this.#activated.delete(leaseUID);
      this.#drained.delete(leaseUID);
      this.#event(
        run.lease,
        'normal',
        LeaseEventReason.Stopping,
        LeaseEventAction.Stop,
        `stopping ${describeTarget(target)}: activation closed, draining its Pods and Jobs before the release`,
      );
    } else if (!this.#stops.has(leaseUID) && !this.#drained.has(leaseUID)) {
      // A stop another leader (or an earlier run of this process) began: measured from here.
      this.#stops.set(leaseUID, this.#clock.now());
    }
    const lease = run.lease;
    const write = await applyTargetAction(this.#api, lease, stopAction(target), {
      expectedUID: lease.status?.workload?.targetUID ?? '',
      onReplaced: 'skip',
      fence: { value: lease.metadata.resourceVersion ?? '', mode: 'always' },
      signal: run.signal,
    });
    if (write.outcome === 'written')
      run.log.info({ patch: write.patch }, 'target stopped with the stop fence');
    if (write.outcome === 'replaced')
      run.log.warn({ uid: write.uid }, 'target was replaced: the replacement is not touched');
    const jobs = await drainJobs(run, this.#api);
    const pods = await drainPods(run, this.#api);
    if (!jobs.done || !pods.done) {
      run.log.debug({ jobs: jobs.remaining, pods: pods.remaining }, 'draining');
      return 'pending';
    }
    // Drained before (the release is being retried): nothing new to report.
    if (this.#drained.has(leaseUID)) return 'done';
    this.#drained.add(leaseUID);
    const began = this.#stops.get(leaseUID);
    this.#stops.delete(leaseUID);
    const seconds = began === undefined ? undefined : Math.max(0, this.#clock.now() - began) / 1000;
    if (seconds !== undefined) this.#metrics?.stopDuration.observe(seconds);
    this.#setRegistered(lease, 0);
    this.#event(
      lease,
      'normal',
      LeaseEventReason.Drained,
      LeaseEventAction.Drain,
      `managed Pods and Jobs of ${describeTarget(target)} drained${seconds === undefined ? '' : ` after ${seconds.toFixed(3)}s`}`,
    );
    return 'done';
  }

  async pruneCompleted(run: LeaseRun, pods: readonly PermittedPod[]): Promise<PermittedPod[]> {
    if (pods.length === 0) return [];
    const lease = run.lease;
    const live = await this.#api.list(
      'Pod',
      lease.metadata.namespace ?? '',
      managedSelector(lease),
      run.signal,
    );
    const running = new Set(
      live.filter((p) => !isTerminalPod(p)).map((p) => `${uidOf(p)}/${p.metadata.name}`),
    );
    return pods.filter((p) => running.has(`${p.uid}/${p.name}`));
  }

  async activate(run: LeaseRun): Promise<void> {
    const lease = run.lease;
    const w = lease.status?.workload;
    const action = lease.spec.acquireAction;
    if (lease.spec.target === undefined || action === undefined || w === undefined) return;
    const write = await applyTargetAction(this.#api, lease, action, {
      expectedUID: w.targetUID,
      onReplaced: 'error',
      signal: run.signal,
    });
    const uid = lease.metadata.uid ?? '';
    const token = w.token ?? 0;
    // A new activation: the next stop is a new one.
    this.#drained.delete(uid);
    if (this.#activated.get(uid) !== token) {
      this.#activated.set(uid, token);
      this.#event(
        lease,
        'normal',
        LeaseEventReason.Activated,
        LeaseEventAction.Activate,
        activationNote(lease, action, write, token),
      );
    }
    try {
      this.#afterPermit(run.lease, await permitPods(run, this.#api));
    } finally {
      this.#setRegistered(run.lease);
    }
  }

  exclusive<T>(key: string, work: () => Promise<T>, signal: AbortSignal): Promise<T> {
    return this.#lock.run(key, work, signal);
  }

  // ---- managed-permits ----

  async #permit(key: string, ctx: ReconcileContext): Promise<void> {
    await this.#lock.run(
      key,
      async () => {
        const { namespace, name } = splitKey(key);
        if (namespace === undefined) return;
        const lease = await this.#leases.get(namespace, name, ctx.signal);
        const now = this.#clock.now();
        if (lease === undefined || lease.spec.target === undefined || !activeAt(lease, now, this.#stopLeadMs))
          return;
        const session = new LeaseWriter(this.#leases, lease, key, ctx, {
          clock: this.#clock,
          stopLeadMs: this.#stopLeadMs,
          writes: this.#link?.ownWrites,
        });
        try {
          this.#afterPermit(session.lease, await permitPods(session, this.#api));
        } finally {
          this.#setRegistered(session.lease);
        }
      },
      ctx.signal,
    );
  }

  #afterPermit(lease: BerthLease, outcome: PermitOutcome): void {
    const now = this.#clock.now();
    for (const pod of outcome.ungated) {
      const created = this.pods.createdAt(pod);
      if (created !== undefined) this.#metrics?.gateRemoval.observe(Math.max(0, now - created) / 1000);
    }
    if (outcome.registered.length > 0 || outcome.ungated.length > 0) {
      this.#log?.debug(
        {
          namespace: lease.metadata.namespace,
          name: lease.metadata.name,
          registered: outcome.registered.length,
          ungated: outcome.ungated.length,
        },
        'managed Pods permitted',
      );
    }
  }

  #setRegistered(lease: BerthLease, count = lease.status?.workload?.pods?.length ?? 0): void {
    this.#metrics?.registeredPods.set(
      { namespace: lease.metadata.namespace ?? '', name: lease.metadata.name },
      count,
    );
  }

  #forget(lease: BerthLease): void {
    const uid = lease.metadata.uid ?? '';
    this.#stops.delete(uid);
    this.#drained.delete(uid);
    this.#activated.delete(uid);
    this.#metrics?.registeredPods.remove({
      namespace: lease.metadata.namespace ?? '',
      name: lease.metadata.name,
    });
  }

  #event(lease: BerthLease, type: 'normal' | 'warning', reason: string, action: string, note: string): void {
    const recorder = this.#recorder;
    if (recorder === undefined) return;
    const regarding = {
      apiVersion: lease.apiVersion,
      kind: lease.kind,
      name: lease.metadata.name,
      namespace: lease.metadata.namespace,
      uid: lease.metadata.uid,
    };
    recorder[type](regarding, reason, action, note).catch(() => {});
  }

  // ---- lifecycle ----

  /** Starts the Pod and Job informers (idempotent). */
  startInformers(): void {
    this.#runnables.startCaches();
  }

  waitForCaches(signal?: AbortSignal): Promise<void> {
    return this.#runnables.waitForCaches(signal);
  }

  /** Leader only: the three controllers (after the caches synced). Call once. */
  startControllers(signal?: AbortSignal): Promise<void> {
    return this.#runnables.startControllers(signal);
  }

  stopControllers(grace?: AbortSignal): Promise<void> {
    return this.#runnables.stopControllers(grace);
  }

  stopCaches(): Promise<void> {
    return this.#runnables.stopCaches();
  }

  /** `managed-workloads-caches` on every replica (warm for a new leader), the controllers on the leader. */
  runnables(): [Runnable, Runnable] {
    return this.#runnables.runnables();
  }
}

/** A LeaseSession outside the reconciler (managed-permits): guarded status writes of one lease. */
class LeaseWriter implements LeaseSession {
  readonly signal: AbortSignal;
  readonly log: Logger;
  readonly stopLeadMs: number;
  readonly #api: BerthLeaseApi;
  readonly #key: string;
  readonly #clock: Clock;
  readonly #writes: WriteObserver | undefined;
  #lease: BerthLease;

  constructor(
    api: BerthLeaseApi,
    lease: BerthLease,
    key: string,
    ctx: ReconcileContext,
    o: { clock: Clock; stopLeadMs: number; writes: WriteObserver | undefined },
  ) {
    this.#api = api;
    this.#lease = lease;
    this.#key = key;
    this.#clock = o.clock;
    this.stopLeadMs = o.stopLeadMs;
    this.#writes = o.writes;
    this.signal = ctx.signal;
    this.log = ctx.log;
  }

  get lease(): BerthLease {
    return this.#lease;
  }

  now(): number {
    return this.#clock.now();
  }

  stamp(): StatusStamp {
    return { now: this.now(), generation: this.#lease.metadata.generation };
  }

  async writeStatus(status: BerthLeaseStatus): Promise<BerthLease> {
    if (isDeepStrictEqual(this.#lease.status ?? {}, status)) return this.#lease;
    const written = await observedWrite(this.#writes, this.#key, () =>
      this.#api.updateStatus(this.#lease, status, this.signal),
    );
    this.#lease = written;
    return written;
  }
}
