// The BerthLease reconciler (docs/behaviour.md §2.2-§2.5, §2.9): holds, or waits for, each
// lease at the central Berth lease API with fencing tokens. Steps of §2.3 in order:
//   1 direct GET (never the cache)  2 finalizer first  3 observedGeneration  4 forced stop
//   5 invalid spec  6 target verification  7 central Acquire bounded by min(heartbeat, 2.5 s)
//   8 acquire error  9 held by another  10 sanity check of the answer  11 local deadline
//   12 workload record  13 held status  14 activation  15 requeue
// and `stopAndRelease` (§2.4) for deletion: Release with the recorded holder and token, the finalizer
// kept until the release succeeds or conflicts. Everything that touches a target goes through the
// WorkloadManager (workload-manager.ts); decisions are pure (ownership.ts, status.ts, transitions.ts),
// the Kubernetes I/O is leaseio.ts and the central I/O the LeaseClient.
//
// Beyond the original: Events and metrics on ownership transitions; a held lease-only status is marked
// expired (not left claiming `held`) once its central expiry passes during an outage; condition
// messages of central errors leave out the per-request id so a persisting error writes nothing new;
// unchanged statuses are not written; a failed release is retried after 1 s rather than with growing
// backoff. A managed standby that never activated waits quietly like a lease-only one (`waiting`, the
// other holder shown — without its moving expiry —, its target kept stopped without writes, requeue
// min(heartbeat, ttl/3), no status write while nothing changes) instead of
// running stopAndRelease with two status writes every second (`managedStandby: 'stop-cycle'` keeps the
// original for comparison). An untrusted central answer (§2.3 step 10) is handled like a failed call
// (HeartbeatHealthy=False/AcquireFailed, retried within 1 s, the workload stopped at its deadline)
// instead of the error backoff, and a token below one this lease already held is untrusted too.
// `handOver` stops, drains and releases the managed workloads of this cluster
// when the leader stops gracefully, so none keeps running without an operator.
import { setTimeout as sleep } from 'node:timers/promises';
import { isDeepStrictEqual } from 'node:util';
import type { Registry } from 'prom-client';
import { describeError } from '../kube/client.ts';
import { type Clock, realClock } from '../kube/clock.ts';
import type { ReconcileContext, ReconcileResult } from '../kube/controller.ts';
import type { Referenceable } from '../kube/events.ts';
import { splitKey } from '../kube/informer.ts';
import type { Logger } from '../observability/logger.ts';
import {
  type BerthLease,
  type BerthLeaseStatus,
  FINALIZER,
  holderFor,
  LeaseState,
  LOCAL_TIMEOUT_MS,
  RELEASE_TIMEOUT_MS,
  REQUEUE_ON_FAILURE_MS,
  ReconcileError,
  validateSpec,
  WorkloadPhase,
  type WorkloadStatus,
} from './api.ts';
import { failoverMarginProblem } from './failover-margin.ts';
import { type AcquireResult, isLeaseConflict, type LeaseClient, LeaseClientError } from './leaseclient.ts';
import type { BerthLeaseApi } from './leaseio.ts';
import { type AcquireOutcome, type BerthLeaseMetrics, berthLeaseMetrics } from './metrics.ts';
import {
  acquireBudgetMs,
  acquireErrorRequeueMs,
  activationDeadline,
  activeAt,
  checkCentralAnswer,
  forcedStopReason,
  heldPastExpiry,
  heldRequeueMs,
  isDeleting,
  leaseTimes,
  ownershipDeadline,
  reacquireIntervalMs,
  releaseIdentity,
  shouldRelease,
  standbyNeedsStop,
  stopAfterAcquireError,
} from './ownership.ts';
import type { WriteObserver } from './ownwrites.ts';
import {
  acquireFailedStatus,
  admissionRequiredStatus,
  claimsHeld,
  expiredStatus,
  formatTime,
  heldStatus,
  invalidSpecStatus,
  parseTime,
  type StatusStamp,
  stoppedStatus,
  targetUnverifiedStatus,
  waitingStatus,
} from './status.ts';
import { LeaseEventAction, LeaseEventReason, type LeaseTransition, transitionsOf } from './transitions.ts';
import { type LeaseRun, leaseOnlyWorkloads, type WorkloadManager } from './workload-manager.ts';

export const CONTROLLER_NAME = 'berthlease';

/**
 * `HeartbeatHealthy=False/AcquireFailed` message when the answer came back after the local ownership
 * deadline (the TTL measured from the request) had already passed: nothing was recorded.
 */
export const OWNERSHIP_ELAPSED_MESSAGE = 'central ownership ended before it could be recorded';

/**
 * How a managed standby (a lease with a target, held by another cluster) behaves: `wait` (default) waits
 * quietly unless its workload may have run; `stop-cycle` is the original 0.4.1 behaviour (stopAndRelease
 * on every reconcile: phase Stopping and back, two status writes per cycle, every second), kept only to
 * measure the difference.
 */
export type ManagedStandby = 'wait' | 'stop-cycle';

/** Pause between the passes of a shutdown hand-over while Pods terminate. */
export const HAND_OVER_POLL_MS = 200;

/** What a hand-over achieved per lease key. */
export type HandOverOutcome = 'released' | 'not-active' | 'unfinished';

/** Longest condition message taken from an error. */
const MAX_ERROR_MESSAGE = 1024;

/** An EventRecorder, or a fake. Must never throw or reject. */
export interface LeaseEventRecorder {
  normal(regarding: Referenceable, reason: string, action: string, note?: string): Promise<void>;
  warning(regarding: Referenceable, reason: string, action: string, note?: string): Promise<void>;
}

export interface BerthLeaseReconcilerOptions {
  api: BerthLeaseApi;
  /** Required (the original refuses to start without one). */
  leaseClient: LeaseClient | undefined;
  /** `--cluster-id`: the holder for every lease; when empty, each lease's spec.holderIdentity. */
  clusterIdentity?: string;
  /** Namespace the operator runs in (no managed targets there). */
  operatorNamespace: string;
  /** The managed-workload path; default `leaseOnlyWorkloads(operatorNamespace)`. */
  workloads?: WorkloadManager;
  clock?: Clock;
  recorder?: LeaseEventRecorder;
  registry?: Registry;
  /** Told about every status write (the controller drops the watch events they cause). */
  writes?: WriteObserver;
  /** Default `wait`. */
  managedStandby?: ManagedStandby;
  /**
   * How long a crashed leader can leave leases unrenewed (`leaderFailoverBoundMs`); leases whose TTL
   * does not outlast it get a Warning Event. Undefined: not checked (no leader election).
   */
  failoverBoundMs?: number;
}

/** How far one stopAndRelease got. */
type StopOutcome = 'draining' | 'release-failed' | 'stopped' | 'removed';

/** The condition message of a failed central call: stable while the cause persists. */
export function centralErrorMessage(err: unknown): string {
  let text = err instanceof Error ? err.message : String(err);
  // A 5xx carries a fresh request id each time; it is logged, not written to the status.
  if (err instanceof LeaseClientError && err.requestId !== undefined)
    text = text.replace(/ \(requestId [^)]*\)$/, '');
  return text.length > MAX_ERROR_MESSAGE ? `${text.slice(0, MAX_ERROR_MESSAGE)}...` : text;
}

export class BerthLeaseReconciler {
  readonly #api: BerthLeaseApi;
  readonly #leaseClient: LeaseClient;
  readonly #clusterIdentity: string;
  readonly #workloads: WorkloadManager;
  readonly #clock: Clock;
  readonly #recorder: LeaseEventRecorder | undefined;
  readonly #metrics: BerthLeaseMetrics | undefined;
  readonly #writes: WriteObserver | undefined;
  readonly #managedStandby: ManagedStandby;
  /**
   * Highest token held per lease key (`namespace/name`) with the object's UID, remembered past a release:
   * the status forgets the token once the lease is stopped, and a later answer below it is not trusted.
   */
  readonly #tokens = new Map<string, { uid: string; token: number }>();
  readonly #failoverBoundMs: number | undefined;
  /** `uid/generation` last checked against the failover bound, per lease key (one Warning per spec). */
  readonly #marginChecked = new Map<string, string>();

  constructor(options: BerthLeaseReconcilerOptions) {
    if (options.leaseClient === undefined) throw new Error(ReconcileError.leaseClientRequired);
    this.#api = options.api;
    this.#leaseClient = options.leaseClient;
    this.#clusterIdentity = options.clusterIdentity ?? '';
    this.#workloads = options.workloads ?? leaseOnlyWorkloads(options.operatorNamespace);
    this.#clock = options.clock ?? realClock;
    this.#recorder = options.recorder;
    this.#failoverBoundMs = options.failoverBoundMs;
    this.#metrics = options.registry === undefined ? undefined : berthLeaseMetrics(options.registry);
    this.#writes = options.writes;
    this.#managedStandby = options.managedStandby ?? 'wait';
  }

  /** The Controller's reconcile function; the key is `namespace/name`. */
  readonly reconcile = (key: string, ctx: ReconcileContext): Promise<ReconcileResult> =>
    this.#exclusive(key, () => this.#reconcile(key, ctx), ctx.signal);

  /** This replica stopped reconciling (lost or gave up leadership): it no longer knows who holds what. */
  reset(): void {
    this.#metrics?.held.reset();
  }

  async #reconcile(key: string, ctx: ReconcileContext): Promise<ReconcileResult> {
    const { namespace, name } = splitKey(key);
    if (namespace === undefined) return {};
    // 1. The stored object, not the cache: ownership decisions are made on it.
    const lease = await this.#api.get(namespace, name, ctx.signal);
    if (lease === undefined) {
      this.#forget(namespace, name);
      return {};
    }
    // 2. Finalizer first; its watch event brings the object back.
    const finalizers = lease.metadata.finalizers ?? [];
    if (!finalizers.includes(FINALIZER)) {
      if (isDeleting(lease)) {
        this.#forget(namespace, name);
        return {};
      }
      await this.#api.setFinalizers(lease, [...finalizers, FINALIZER], ctx.signal);
      ctx.log.debug('finalizer added');
      return {};
    }
    const run = new Run(this.#runDeps(), lease, holderFor(this.#clusterIdentity, lease.spec), key, ctx);
    this.#setHeld(lease);
    // 3. Every status write stamps observedGeneration (status.ts).
    const invalid = validateSpec(lease.spec);
    if (invalid === undefined) this.#checkFailoverMargin(lease, ctx);
    // 4. Forced stop.
    const forced = forcedStopReason(lease, run.holder, invalid, run.now());
    if (forced !== undefined) {
      ctx.log.info({ reason: forced }, 'stopping and releasing');
      return this.#stopAndRelease(run);
    }
    // 5. Invalid spec.
    if (invalid !== undefined) {
      if (lease.spec.target !== undefined) return this.#stopAndRelease(run);
      await run.writeStatus(invalidSpecStatus(lease.status, invalid, run.stamp()));
      ctx.log.info({ error: invalid }, 'invalid spec');
      return {};
    }
    // 6. Target verification.
    if (lease.spec.target !== undefined) {
      const verdict = await this.#workloads.verifyTarget(run);
      if (!verdict.ok) {
        if (run.lease.status?.workload?.phase === WorkloadPhase.Active) {
          // Beyond the original (which stops on any GET error): a failed read proves nothing about the
          // target, so it is treated like a central outage (step 8): no renewal, a retry within 1 s, and
          // the forced stop of step 4 once the deadline passes. A missing or different target still
          // stops at once.
          const now = run.now();
          if (verdict.transient === true && activeAt(run.lease, now)) {
            await run.writeStatus(targetUnverifiedStatus(run.lease.status, verdict.message, run.stamp()));
            ctx.log.warn({ error: verdict.message }, 'target not verified; kept until the deadline');
            const { heartbeatMs } = leaseTimes(run.lease);
            return { requeueAfter: acquireErrorRequeueMs(heartbeatMs, now, activationDeadline(run.lease)) };
          }
          return this.#stopAndRelease(run);
        }
        await this.#workloads.stopTarget(run);
        await run.writeStatus(admissionRequiredStatus(run.lease.status, verdict.message, run.stamp()));
        ctx.log.info({ error: verdict.message }, 'target not verified');
        return verdict.retryAfterMs === undefined ? {} : { requeueAfter: verdict.retryAfterMs };
      }
    }
    return this.#acquire(run);
  }

  // 7-15
  async #acquire(run: Run): Promise<ReconcileResult> {
    const lease = run.lease;
    const { namespace = '' } = lease.metadata;
    const { ttlMs, heartbeatMs } = leaseTimes(lease);
    const start = run.now();
    const activeDeadline = activeAt(lease, start) ? activationDeadline(lease) : undefined;
    const budget = acquireBudgetMs(heartbeatMs, start, activeDeadline);
    const started = performance.now();
    let res: AcquireResult;
    try {
      res = await this.#leaseClient.acquire(
        namespace,
        lease.spec.leaseName,
        run.holder,
        lease.spec.ttlSeconds,
        {
          signal: run.signal,
          timeoutMs: budget,
        },
      );
    } catch (err) {
      this.#observeAcquire('error', started);
      // The reconcile's own bound passed: nothing more can be written in it.
      if (run.signal.aborted) throw err;
      return this.#acquireFailed(run, err, heartbeatMs, activeDeadline);
    }

    // 9. Held by another.
    if (!res.acquired) {
      this.#observeAcquire('held-by-other', started);
      if (lease.spec.target !== undefined) {
        if (this.#managedStandby === 'stop-cycle' || standbyNeedsStop(lease))
          return this.#stopAndRelease(run);
        // A standby that never activated: nothing of it may run; keep its target stopped (no write
        // when it is) and wait like a lease-only standby.
        await this.#workloads.stopTarget(run);
      }
      // A managed standby shows the holder but not its expiry, which moves with each of the holder's
      // renewals: the status stays unchanged, so waiting costs no write at all.
      const expiresAt = lease.spec.target === undefined ? res.expiresAt : undefined;
      await run.writeStatus(waitingStatus(lease.status, { holder: res.holder, expiresAt }, run.stamp()));
      return { requeueAfter: reacquireIntervalMs(heartbeatMs, ttlMs) };
    }

    // 10. Sanity check of the answer. Nothing in an untrusted answer is recorded; it is handled like a
    // failed call (kept only until the local deadline, retried within 1 s, HeartbeatHealthy=False),
    // not with the error backoff, which grows far past any deadline while the central API misbehaves.
    const now = run.now();
    const bad = checkCentralAnswer(res, run.holder, now, this.#highestToken(lease));
    if (bad !== undefined || res.expiresAt === undefined) {
      this.#observeAcquire('error', started);
      run.log.error(
        {
          holder: res.holder,
          fencingToken: res.fencingToken,
          expiresAt: res.expiresAt === undefined ? undefined : new Date(res.expiresAt).toISOString(),
        },
        ReconcileError.invalidCentralResponse,
      );
      return this.#acquireFailed(
        run,
        new Error(ReconcileError.invalidCentralResponse),
        heartbeatMs,
        activeDeadline,
      );
    }
    this.#observeAcquire('acquired', started);

    // 11. Local deadline.
    const deadline = ownershipDeadline(start, ttlMs, res.expiresAt);
    if (now >= deadline) {
      if (lease.spec.target !== undefined) return this.#stopAndRelease(run);
      // Lease-only: nothing to stop; record nothing and try again soon (the next Acquire renews).
      await run.writeStatus(acquireFailedStatus(lease.status, OWNERSHIP_ELAPSED_MESSAGE, run.stamp()));
      return { requeueAfter: acquireErrorRequeueMs(heartbeatMs, now) };
    }

    // 12. The workload record (managed).
    let workload: WorkloadStatus | undefined;
    if (lease.spec.target !== undefined) {
      const w = lease.status?.workload;
      if (w?.phase === WorkloadPhase.Active && w.token !== res.fencingToken) {
        run.log.info({ recorded: w.token, fencingToken: res.fencingToken }, 'ownership epoch changed');
        return this.#stopAndRelease(run);
      }
      const pods = await this.#workloads.pruneCompleted(run, w?.pods ?? []);
      workload = {
        ...(w ?? { targetUID: '' }),
        phase: WorkloadPhase.Active,
        leaseName: lease.spec.leaseName,
        holder: run.holder,
        token: res.fencingToken,
        deadline: formatTime(deadline),
      };
      if (pods.length > 0) workload.pods = pods;
      else delete workload.pods;
    }

    // 13. Ownership is persisted before any activation.
    await run.writeStatus(
      heldStatus(
        lease.status,
        {
          holder: run.holder,
          fencingToken: res.fencingToken,
          acquiredAt: res.acquiredAt,
          expiresAt: res.expiresAt,
          ...(workload === undefined ? {} : { workload }),
        },
        run.stamp(),
      ),
    );
    this.#noteToken(lease, res.fencingToken);
    // 14. Activation (managed).
    if (lease.spec.target !== undefined) await this.#workloads.activate(run);
    // 15.
    return { requeueAfter: heldRequeueMs(heartbeatMs, deadline, run.now()) };
  }

  // 8.
  async #acquireFailed(
    run: Run,
    err: unknown,
    heartbeatMs: number,
    activeDeadline: number | undefined,
  ): Promise<ReconcileResult> {
    const lease = run.lease;
    const message = centralErrorMessage(err);
    const now = run.now();
    run.log.warn({ err: describeError(err) }, 'central acquire failed');
    if (stopAfterAcquireError(lease, now)) return this.#stopAndRelease(run);
    const leaseOnly = lease.spec.target === undefined;
    if (leaseOnly && heldPastExpiry(lease, now)) {
      await run.writeStatus(expiredStatus(lease.status, message, run.stamp()));
      return { requeueAfter: acquireErrorRequeueMs(heartbeatMs, now) };
    }
    await run.writeStatus(acquireFailedStatus(lease.status, message, run.stamp()));
    // A held lease-only lease is re-checked by its expiry, so the status stops claiming it on time.
    const cap =
      activeDeadline ??
      (leaseOnly && lease.status?.leaseState === LeaseState.Held
        ? parseTime(lease.status.expiresAt)
        : undefined);
    return { requeueAfter: acquireErrorRequeueMs(heartbeatMs, now, cap) };
  }

  // §2.4
  async #stopAndRelease(run: Run): Promise<ReconcileResult> {
    return (await this.#stopAndReleaseOutcome(run)).result;
  }

  async #stopAndReleaseOutcome(run: Run): Promise<{ result: ReconcileResult; outcome: StopOutcome }> {
    if (run.lease.spec.target !== undefined) {
      const progress = await this.#workloads.stopWorkload(run);
      if (progress === 'pending')
        return { result: { requeueAfter: REQUEUE_ON_FAILURE_MS }, outcome: 'draining' };
    }
    const lease = run.lease;
    const { namespace = '', name } = lease.metadata;
    const id = releaseIdentity(lease);
    if (shouldRelease(id)) {
      const note = `lease ${JSON.stringify(id.leaseName)} held as ${JSON.stringify(id.holder)} with fencing token ${id.fencingToken}`;
      try {
        await this.#leaseClient.release(namespace, id.leaseName, id.holder, id.fencingToken, {
          signal: run.signal,
          timeoutMs: RELEASE_TIMEOUT_MS,
        });
        run.log.info({ leaseName: id.leaseName, fencingToken: id.fencingToken }, 'released');
        this.#event(lease, 'normal', LeaseEventReason.Released, LeaseEventAction.Release, `released ${note}`);
      } catch (err) {
        if (!isLeaseConflict(err)) {
          if (run.signal.aborted) throw err;
          // The finalizer stays until the release succeeds or conflicts.
          run.log.error({ err: describeError(err) }, 'central release failed; retrying');
          this.#event(
            lease,
            'warning',
            LeaseEventReason.ReleaseFailed,
            LeaseEventAction.Release,
            `${note}: ${centralErrorMessage(err)}`,
          );
          return { result: { requeueAfter: REQUEUE_ON_FAILURE_MS }, outcome: 'release-failed' };
        }
        run.log.info(
          { leaseName: id.leaseName, fencingToken: id.fencingToken },
          'release conflicted: not ours any more',
        );
        this.#event(
          lease,
          'normal',
          LeaseEventReason.Released,
          LeaseEventAction.Release,
          `${note} was already held by another identity or token`,
        );
      }
      this.#metrics?.transitions.inc({ namespace, name, state: 'released' });
    }
    if (isDeleting(lease)) {
      const finalizers = (lease.metadata.finalizers ?? []).filter((f) => f !== FINALIZER);
      await this.#api.setFinalizers(lease, finalizers, run.signal);
      run.log.info('finalizer removed');
      this.#forget(namespace, name);
      return { result: {}, outcome: 'removed' };
    }
    await run.writeStatus(stoppedStatus(lease.status, run.stamp()));
    return { result: { requeueAfter: REQUEUE_ON_FAILURE_MS }, outcome: 'stopped' };
  }

  // ---- graceful hand-over ----

  /**
   * When the leader stops gracefully (its controller already stopped): every managed workload of this
   * cluster in `keys` that is Active or Stopping is stopped, drained and released centrally (§2.4), so
   * none keeps running without an operator and another cluster can take over at once instead of after
   * the TTL. Passes repeat while Pods terminate, until done or `signal` aborts; whatever is unfinished
   * stays Stopping (persisted) for the next leader. Never throws.
   */
  async handOver(
    keys: readonly string[],
    signal: AbortSignal,
    log: Logger,
    pollMs = HAND_OVER_POLL_MS,
  ): Promise<Map<string, HandOverOutcome>> {
    const outcomes = new Map<string, HandOverOutcome>();
    await Promise.all(
      keys.map(async (key) => {
        const { namespace, name } = splitKey(key);
        let outcome: HandOverOutcome = 'unfinished';
        for (let pass = 1; !signal.aborted; pass++) {
          const bound = AbortSignal.any([signal, AbortSignal.timeout(LOCAL_TIMEOUT_MS)]);
          const ctx: ReconcileContext = {
            signal: bound,
            log: log.child({ namespace, name, handOver: pass }),
            reconcileID: `hand-over-${pass}`,
            namespace,
            name,
          };
          try {
            const result = await this.#exclusive(key, () => this.#handOverPass(key, ctx), bound);
            if (result !== 'unfinished') {
              outcome = result;
              break;
            }
          } catch (err) {
            ctx.log.warn({ err: describeError(err) }, 'hand-over pass failed');
          }
          // Pacing while Pods terminate (real time: no decision depends on it).
          try {
            await sleep(pollMs, undefined, { signal });
          } catch {
            break;
          }
        }
        outcomes.set(key, outcome);
        if (outcome === 'unfinished')
          log.warn({ key }, 'hand-over unfinished: the workload stays Stopping for the next leader');
      }),
    );
    return outcomes;
  }

  async #handOverPass(key: string, ctx: ReconcileContext): Promise<HandOverOutcome> {
    const { namespace, name } = splitKey(key);
    if (namespace === undefined) return 'not-active';
    const lease = await this.#api.get(namespace, name, ctx.signal);
    if (lease === undefined || !(lease.metadata.finalizers ?? []).includes(FINALIZER)) return 'not-active';
    const phase = lease.status?.workload?.phase;
    if (
      lease.spec.target === undefined ||
      (phase !== WorkloadPhase.Active && phase !== WorkloadPhase.Stopping)
    )
      return 'not-active';
    const run = new Run(this.#runDeps(), lease, holderFor(this.#clusterIdentity, lease.spec), key, ctx);
    const { outcome } = await this.#stopAndReleaseOutcome(run);
    return outcome === 'stopped' || outcome === 'removed' ? 'released' : 'unfinished';
  }

  #exclusive<T>(key: string, work: () => Promise<T>, signal: AbortSignal): Promise<T> {
    const workloads = this.#workloads;
    return workloads.exclusive === undefined ? work() : workloads.exclusive(key, work, signal);
  }

  // ---- observation ----

  #runDeps(): RunDeps {
    return {
      api: this.#api,
      clock: this.#clock,
      ...(this.#writes === undefined ? {} : { writes: this.#writes }),
      onWritten: (before, after) => this.#onWritten(before, after),
    };
  }

  #observeAcquire(outcome: AcquireOutcome, started: number): void {
    this.#metrics?.acquireDuration.observe({ outcome }, (performance.now() - started) / 1000);
  }

  #setHeld(lease: BerthLease): void {
    const { namespace = '', name } = lease.metadata;
    this.#metrics?.held.set({ namespace, name }, claimsHeld(lease.status) ? 1 : 0);
  }

  #checkFailoverMargin(lease: BerthLease, ctx: ReconcileContext): void {
    const { namespace = '', name, uid = '', generation = 0 } = lease.metadata;
    const key = `${namespace}/${name}`;
    const checked = `${uid}/${generation}`;
    if (this.#failoverBoundMs === undefined || this.#marginChecked.get(key) === checked) return;
    this.#marginChecked.set(key, checked);
    const problem = failoverMarginProblem(lease.spec, this.#failoverBoundMs);
    if (problem === undefined) return;
    ctx.log.warn({ ttlSeconds: lease.spec.ttlSeconds }, problem);
    this.#event(lease, 'warning', LeaseEventReason.TTLBelowFailover, LeaseEventAction.Acquire, problem);
  }

  #forget(namespace: string, name: string): void {
    this.#metrics?.held.remove({ namespace, name });
    this.#tokens.delete(`${namespace}/${name}`);
    this.#marginChecked.delete(`${namespace}/${name}`);
  }

  /** The highest fencing token this lease object was seen with: in its status, or held since start. */
  #highestToken(lease: BerthLease): number {
    const { namespace = '', name, uid = '' } = lease.metadata;
    const seen = this.#tokens.get(`${namespace}/${name}`);
    return Math.max(
      lease.status?.fencingToken ?? 0,
      lease.status?.workload?.token ?? 0,
      seen?.uid === uid ? seen.token : 0,
    );
  }

  #noteToken(lease: BerthLease, token: number): void {
    const { namespace = '', name, uid = '' } = lease.metadata;
    this.#tokens.set(`${namespace}/${name}`, { uid, token: Math.max(token, this.#highestToken(lease)) });
  }

  #onWritten(before: BerthLeaseStatus | undefined, after: BerthLease): void {
    this.#setHeld(after);
    const { namespace = '', name } = after.metadata;
    for (const t of transitionsOf(before, after.status)) {
      this.#report(after, t);
      if (t.kind === 'acquired') this.#metrics?.transitions.inc({ namespace, name, state: 'held' });
      if (t.kind === 'lost') this.#metrics?.transitions.inc({ namespace, name, state: 'waiting' });
    }
  }

  #report(lease: BerthLease, t: LeaseTransition): void {
    const leaseName = JSON.stringify(lease.spec.leaseName);
    switch (t.kind) {
      case 'acquired':
        this.#event(
          lease,
          'normal',
          LeaseEventReason.Acquired,
          LeaseEventAction.Acquire,
          `acquired lease ${leaseName} as ${JSON.stringify(t.holder)} with fencing token ${t.fencingToken}`,
        );
        return;
      case 'lost':
        this.#event(lease, 'warning', LeaseEventReason.LeaseLost, LeaseEventAction.Acquire, t.detail);
        return;
      case 'unhealthy':
        this.#event(lease, 'warning', LeaseEventReason.AcquireFailed, LeaseEventAction.Acquire, t.detail);
        return;
    }
  }

  #event(lease: BerthLease, type: 'normal' | 'warning', reason: string, action: string, note: string): void {
    const regarding: Referenceable = {
      apiVersion: lease.apiVersion,
      kind: lease.kind,
      name: lease.metadata.name,
      namespace: lease.metadata.namespace,
      uid: lease.metadata.uid,
    };
    const recorder = this.#recorder;
    if (recorder === undefined) return;
    // Recorders must not reject; should one do so anyway, it is not the reconcile's failure.
    recorder[type](regarding, reason, action, note).catch(() => {});
  }
}

interface RunDeps {
  api: BerthLeaseApi;
  clock: Clock;
  writes?: WriteObserver;
  onWritten(before: BerthLeaseStatus | undefined, after: BerthLease): void;
}

/** One reconcile of one lease: the latest copy of the object and its guarded status writes. */
class Run implements LeaseRun {
  readonly holder: string;
  readonly signal: AbortSignal;
  readonly log: Logger;
  readonly #deps: RunDeps;
  readonly #key: string;
  #lease: BerthLease;

  constructor(deps: RunDeps, lease: BerthLease, holder: string, key: string, ctx: ReconcileContext) {
    this.#deps = deps;
    this.#lease = lease;
    this.#key = key;
    this.holder = holder;
    this.signal = ctx.signal;
    this.log = ctx.log;
  }

  get lease(): BerthLease {
    return this.#lease;
  }

  now(): number {
    return this.#deps.clock.now();
  }

  stamp(): StatusStamp {
    return { now: this.now(), generation: this.#lease.metadata.generation };
  }

  async writeStatus(status: BerthLeaseStatus): Promise<BerthLease> {
    const before = this.#lease.status;
    if (isDeepStrictEqual(before ?? {}, status)) return this.#lease;
    const writes = this.#deps.writes;
    writes?.begin(this.#key);
    let written: BerthLease | undefined;
    try {
      written = await this.#deps.api.updateStatus(this.#lease, status, this.signal);
    } finally {
      writes?.end(this.#key, written?.metadata.resourceVersion);
    }
    this.#lease = written;
    this.#deps.onWritten(before, written);
    return written;
  }
}
