// The BerthLease reconciler (docs/behaviour.md §2.2-§2.5, §2.9): holds, or waits for, each
// lease at the central Berth lease API with fencing tokens. Steps of §2.3 in order:
//   1 direct GET (never the cache; for a new lease, the guarded finalizer PATCH's answer)
//   2 finalizer first, then on with the PATCH's answer  3 observedGeneration  4 forced stop
//   5 invalid spec  6 target verification  7 central Acquire bounded by min(heartbeat, 2.5 s)
//   8 acquire error  9 held by another  10 sanity check of the answer  11 local deadline
//   12 workload record  13 held status  14 activation  15 requeue
// and `stopAndRelease` (§2.4, stop-release.ts) for deletion: Release with the recorded holder and token,
// the finalizer kept until the release succeeds or conflicts. Everything that touches a target goes
// through the WorkloadManager (workload-manager.ts); decisions are pure (ownership.ts, status.ts,
// transitions.ts), the Kubernetes I/O is leaseio.ts and the central I/O the LeaseClient. One reconcile's
// object and status writes are a LeaseScope (lease-scope.ts); Events and metrics go through the
// LeaseReporter (lease-reporter.ts); the hand-over's loop is hand-over.ts.
//
// Beyond the original: Events and metrics on ownership transitions; a held lease-only status is marked
// expired (not left claiming `held`) once its central expiry passes during an outage; condition
// messages of central errors leave out the per-request id so a persisting error writes nothing new;
// unchanged statuses are not written; a failed release is retried after 1 s rather than with growing
// backoff. A managed standby that never activated waits quietly like a lease-only one (`waiting`, the
// other holder shown — without its moving expiry —, its target kept stopped without writes, requeue
// min(heartbeat, ttl/3), no status write while nothing changes) instead of
// running stopAndRelease with two status writes every second (docs/decisions/0001). An untrusted central answer (§2.3 step 10) is handled like a failed call
// (HeartbeatHealthy=False/AcquireFailed, retried within 1 s, the workload stopped at its deadline)
// instead of the error backoff, and a token below one this lease already held is untrusted too.
// `handOver` stops, drains and releases the managed workloads of this cluster
// when the leader stops gracefully, so none keeps running without an operator.
import type { Registry } from 'prom-client';
import { describeError, isConflict, isNotFound } from '../kube/client.ts';
import { type Clock, realClock } from '../kube/clock.ts';
import type { ReconcileContext, ReconcileResult } from '../kube/controller.ts';
import { splitKey } from '../kube/keys.ts';
import type { Logger } from '../observability/logger.ts';
import {
  type BerthLease,
  DEFAULT_STOP_LEAD_MS,
  FINALIZER,
  hasFinalizer,
  holderFor,
  LeaseState,
  ReconcileError,
  validateSpec,
  WorkloadPhase,
  type WorkloadStatus,
} from './api.ts';
import { centralErrorMessage } from './central-error.ts';
import { failoverMarginProblem, stopLeadProblem } from './failover-margin.ts';
import { type HandOverOutcome, handOverAll } from './hand-over.ts';
import { type LeaseEventRecorder, LeaseReporter } from './lease-reporter.ts';
import { LeaseScope, type LeaseScopeDeps } from './lease-scope.ts';
import type { AcquireResult, LeaseClient } from './leaseclient.ts';
import type { BerthLeaseApi } from './leaseio.ts';
import {
  acquireBudgetMs,
  acquireErrorRequeueMs,
  activationEnd,
  activeAt,
  checkCentralAnswer,
  forcedStopReason,
  heldPastExpiry,
  heldRequeueMs,
  isDeleting,
  leaseTimes,
  ownershipDeadline,
  reacquireIntervalMs,
  standbyNeedsStop,
  stopAfterAcquireError,
  stopLeadFor,
} from './ownership.ts';
import { observedWrite, type WriteObserver } from './ownwrites.ts';
import {
  acquireFailedStatus,
  admissionRequiredStatus,
  expiredStatus,
  formatTime,
  heldStatus,
  invalidSpecStatus,
  parseTime,
  targetUnverifiedStatus,
  waitingStatus,
} from './status.ts';
import { type StopOutcome, stopAndRelease } from './stop-release.ts';
import { LeaseEventAction, LeaseEventReason } from './transitions.ts';
import { leaseOnlyWorkloads, type VerifiedTarget, type WorkloadManager } from './workload-manager.ts';

export const CONTROLLER_NAME = 'berthlease';

/**
 * `HeartbeatHealthy=False/AcquireFailed` message when the answer came back after the local ownership
 * deadline (the TTL measured from the request) had already passed: nothing was recorded.
 */
export const OWNERSHIP_ELAPSED_MESSAGE = 'central ownership ended before it could be recorded';

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
  /** Told about every own write (the controller drops the watch events they cause). */
  writes?: WriteObserver;
  /**
   * The informer's copy of a lease by key, if any (one with the finalizer may be left out): a new one is
   * written without a GET first.
   */
  cached?: (key: string) => BerthLease | undefined;
  /**
   * How long a crashed leader can leave leases unrenewed (`leaderFailoverBoundMs`); leases whose TTL
   * does not outlast it get a Warning Event. Undefined: not checked (no leader election).
   */
  failoverBoundMs?: number;
  /**
   * `--stop-lead`: a managed activation ends this long before its recorded deadline (default
   * DEFAULT_STOP_LEAD_MS); leases whose TTL cannot hold it get a Warning Event.
   */
  stopLeadMs?: number;
}

export class BerthLeaseReconciler {
  readonly #api: BerthLeaseApi;
  readonly #leaseClient: LeaseClient;
  readonly #clusterIdentity: string;
  readonly #workloads: WorkloadManager;
  readonly #clock: Clock;
  readonly #reporter: LeaseReporter;
  readonly #writes: WriteObserver | undefined;
  readonly #cached: ((key: string) => BerthLease | undefined) | undefined;
  /**
   * Highest token held per lease key (`namespace/name`) with the object's UID, remembered past a release:
   * the status forgets the token once the lease is stopped, and a later answer below it is not trusted.
   */
  readonly #tokens = new Map<string, { uid: string; token: number }>();
  readonly #failoverBoundMs: number | undefined;
  readonly #stopLeadMs: number;
  /** `uid/generation` last checked against the failover bound, per lease key (one Warning per spec). */
  readonly #marginChecked = new Map<string, string>();

  constructor(options: BerthLeaseReconcilerOptions) {
    if (options.leaseClient === undefined) throw new Error(ReconcileError.leaseClientRequired);
    this.#api = options.api;
    this.#leaseClient = options.leaseClient;
    this.#clusterIdentity = options.clusterIdentity ?? '';
    this.#workloads = options.workloads ?? leaseOnlyWorkloads(options.operatorNamespace);
    this.#clock = options.clock ?? realClock;
    this.#reporter = new LeaseReporter(options.recorder, options.registry);
    this.#failoverBoundMs = options.failoverBoundMs;
    this.#stopLeadMs = options.stopLeadMs ?? DEFAULT_STOP_LEAD_MS;
    this.#writes = options.writes;
    this.#cached = options.cached;
  }

  /** The Controller's reconcile function; the key is `namespace/name`. */
  readonly reconcile = (key: string, ctx: ReconcileContext): Promise<ReconcileResult> =>
    this.#exclusive(key, () => this.#reconcile(key, ctx), ctx.signal);

  /** This replica stopped reconciling (lost or gave up leadership): it no longer knows who holds what. */
  reset(): void {
    this.#reporter.reset();
  }

  async #reconcile(key: string, ctx: ReconcileContext): Promise<ReconcileResult> {
    const { namespace, name } = splitKey(key);
    if (namespace === undefined) return {};
    const lease = await this.#storedWithFinalizer(namespace, name, key, ctx);
    if (lease === undefined) return {};
    const run = this.#scope(lease, key, ctx);
    this.#reporter.setHeld(lease);
    // 3. Every status write stamps observedGeneration (status.ts).
    const invalid = validateSpec(lease.spec);
    if (invalid === undefined) this.#checkTimings(lease, ctx);
    const lead = stopLeadFor(lease, this.#stopLeadMs);
    // 4. Forced stop.
    const forced = forcedStopReason(lease, run.holder, invalid, run.now(), lead);
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
    // 6. Target verification; only a verified target is pruned and activated (steps 12, 14).
    let verified: VerifiedTarget | undefined;
    if (lease.spec.target !== undefined) {
      const verdict = await this.#workloads.verifyTarget(run);
      if (!verdict.ok) {
        if (run.lease.status?.workload?.phase === WorkloadPhase.Active) {
          // Beyond the original (which stops on any GET error): a failed read proves nothing about the
          // target, so it is treated like a central outage (step 8): no renewal, a retry within 1 s, and
          // the forced stop of step 4 once the deadline passes. A missing or different target still
          // stops at once.
          const now = run.now();
          if (verdict.transient === true && activeAt(run.lease, now, lead)) {
            await run.writeStatus(targetUnverifiedStatus(run.lease.status, verdict.message, run.stamp()));
            ctx.log.warn({ error: verdict.message }, 'target not verified; kept until the activation ends');
            const { heartbeatMs } = leaseTimes(run.lease);
            return { requeueAfter: acquireErrorRequeueMs(heartbeatMs, now, activationEnd(run.lease, lead)) };
          }
          return this.#stopAndRelease(run);
        }
        await this.#workloads.stopTarget(run);
        await run.writeStatus(admissionRequiredStatus(run.lease.status, verdict.message, run.stamp()));
        ctx.log.info({ error: verdict.message }, 'target not verified');
        return verdict.retryAfterMs === undefined ? {} : { requeueAfter: verdict.retryAfterMs };
      }
      verified = verdict.target;
    }
    return this.#acquire(run, verified, lead);
  }

  // 7-15. `lead`: the stop lead of this lease (0 for a lease-only one).
  async #acquire(
    run: LeaseScope,
    verified: VerifiedTarget | undefined,
    lead: number,
  ): Promise<ReconcileResult> {
    const lease = run.lease;
    const { namespace = '' } = lease.metadata;
    const { ttlMs, heartbeatMs } = leaseTimes(lease);
    const start = run.now();
    const activeUntil = activeAt(lease, start, lead) ? activationEnd(lease, lead) : undefined;
    const budget = acquireBudgetMs(heartbeatMs, start, activeUntil);
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
      this.#reporter.observeAcquire('error', started);
      // The reconcile's own bound passed: nothing more can be written in it.
      if (run.signal.aborted) throw err;
      return this.#acquireFailed(run, err, heartbeatMs, activeUntil, lead);
    }

    // 9. Held by another.
    if (!res.acquired) {
      this.#reporter.observeAcquire('held-by-other', started);
      if (lease.spec.target !== undefined) {
        if (standbyNeedsStop(lease)) return this.#stopAndRelease(run);
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
    const highest = this.#highestToken(lease);
    const bad = checkCentralAnswer(res, run.holder, now, highest);
    if (bad !== undefined || res.expiresAt === undefined) {
      this.#reporter.observeAcquire('error', started);
      // A token that went backwards is what fencing exists to catch: counted on its own for alerting.
      if (res.fencingToken > 0 && res.fencingToken < highest) this.#reporter.fencingAnomaly(lease);
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
        activeUntil,
        lead,
      );
    }
    this.#reporter.observeAcquire('acquired', started);

    // 11. Local deadline; a managed activation would end the stop lead before it.
    const deadline = ownershipDeadline(start, ttlMs, res.expiresAt);
    if (now >= deadline - lead) {
      if (lease.spec.target !== undefined) return this.#stopAndRelease(run);
      // Lease-only: nothing to stop; record nothing and try again soon (the next Acquire renews).
      await run.writeStatus(acquireFailedStatus(lease.status, OWNERSHIP_ELAPSED_MESSAGE, run.stamp()));
      return { requeueAfter: acquireErrorRequeueMs(heartbeatMs, now) };
    }

    // 12. The workload record (managed).
    let workload: WorkloadStatus | undefined;
    if (verified !== undefined) {
      const w = lease.status?.workload;
      if (w?.phase === WorkloadPhase.Active && w.token !== res.fencingToken) {
        run.log.info({ recorded: w.token, fencingToken: res.fencingToken }, 'ownership epoch changed');
        return this.#stopAndRelease(run);
      }
      if (w?.phase !== WorkloadPhase.Active) {
        // Verification may have answered from a cache; a new activation is confirmed live. Refused, it is
        // as if verification had failed: nothing activated, and the central lease lapses within its TTL.
        const refused = await verified.confirmActivation(run);
        if (refused !== undefined) {
          await this.#workloads.stopTarget(run);
          await run.writeStatus(admissionRequiredStatus(run.lease.status, refused, run.stamp()));
          run.log.info({ error: refused }, 'activation refused');
          return {};
        }
      }
      const pods = await verified.pruneCompleted(run, w?.pods ?? []);
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
    if (verified !== undefined) await verified.activate(run);
    // 15.
    return { requeueAfter: heldRequeueMs(heartbeatMs, deadline, run.now(), lead) };
  }

  // 8.
  async #acquireFailed(
    run: LeaseScope,
    err: unknown,
    heartbeatMs: number,
    activeUntil: number | undefined,
    lead: number,
  ): Promise<ReconcileResult> {
    const lease = run.lease;
    const message = centralErrorMessage(err);
    const now = run.now();
    run.log.warn({ err: describeError(err) }, 'central acquire failed');
    if (stopAfterAcquireError(lease, now, lead)) return this.#stopAndRelease(run);
    const leaseOnly = lease.spec.target === undefined;
    if (leaseOnly && heldPastExpiry(lease, now)) {
      await run.writeStatus(expiredStatus(lease.status, message, run.stamp()));
      return { requeueAfter: acquireErrorRequeueMs(heartbeatMs, now) };
    }
    await run.writeStatus(acquireFailedStatus(lease.status, message, run.stamp()));
    // A held lease-only lease is re-checked by its expiry, so the status stops claiming it on time.
    const cap =
      activeUntil ??
      (leaseOnly && lease.status?.leaseState === LeaseState.Held
        ? parseTime(lease.status.expiresAt)
        : undefined);
    return { requeueAfter: acquireErrorRequeueMs(heartbeatMs, now, cap) };
  }

  // §2.4
  async #stopAndRelease(run: LeaseScope): Promise<ReconcileResult> {
    return (await this.#stopAndReleaseOutcome(run)).result;
  }

  #stopAndReleaseOutcome(run: LeaseScope): Promise<{ result: ReconcileResult; outcome: StopOutcome }> {
    return stopAndRelease(run, {
      api: this.#api,
      leaseClient: this.#leaseClient,
      workloads: this.#workloads,
      reporter: this.#reporter,
      forget: (namespace, name) => this.#forget(namespace, name),
    });
  }

  // ---- graceful hand-over ----

  /**
   * When the leader stops gracefully (its controller already stopped): every managed workload of this
   * cluster in `keys` that is Active or Stopping is stopped, drained and released centrally (§2.4), so
   * none keeps running without an operator and another cluster can take over at once instead of after
   * the TTL. Passes repeat while Pods terminate, until done or `signal` aborts; whatever is unfinished
   * stays Stopping (persisted) for the next leader. Never throws.
   */
  handOver(
    keys: readonly string[],
    signal: AbortSignal,
    log: Logger,
    pollMs?: number,
  ): Promise<Map<string, HandOverOutcome>> {
    const pass = (key: string, ctx: ReconcileContext): Promise<HandOverOutcome> =>
      this.#exclusive(key, () => this.#handOverPass(key, ctx), ctx.signal);
    return handOverAll(keys, signal, log, pass, pollMs);
  }

  async #handOverPass(key: string, ctx: ReconcileContext): Promise<HandOverOutcome> {
    const { namespace, name } = splitKey(key);
    if (namespace === undefined) return 'not-active';
    const lease = await this.#api.get(namespace, name, ctx.signal);
    if (lease === undefined || !hasFinalizer(lease)) return 'not-active';
    const phase = lease.status?.workload?.phase;
    if (
      lease.spec.target === undefined ||
      (phase !== WorkloadPhase.Active && phase !== WorkloadPhase.Stopping)
    )
      return 'not-active';
    const run = this.#scope(lease, key, ctx);
    const { outcome } = await this.#stopAndReleaseOutcome(run);
    return outcome === 'stopped' || outcome === 'removed' ? 'released' : 'unfinished';
  }

  #exclusive<T>(key: string, work: () => Promise<T>, signal: AbortSignal): Promise<T> {
    const workloads = this.#workloads;
    return workloads.exclusive === undefined ? work() : workloads.exclusive(key, work, signal);
  }

  // ---- observation ----

  /**
   * Steps 1 and 2: the stored object, not the cache (ownership decisions are made on it), with the
   * finalizer added first; undefined when it is gone, or deleting without the finalizer. Beyond the
   * original, which returns after adding the finalizer and waits for the write's watch event: the PATCH
   * answers with the stored object, as fresh as a GET, and the reconcile goes on with it. A lease the
   * cache shows without the finalizer is patched straight away, guarded by the cached resourceVersion, so
   * a new lease costs no GET; a conflict or a 404 means the cache was behind, and the GET decides.
   */
  async #storedWithFinalizer(
    namespace: string,
    name: string,
    key: string,
    ctx: ReconcileContext,
  ): Promise<BerthLease | undefined> {
    const cached = this.#cached?.(key);
    if (cached !== undefined && !hasFinalizer(cached) && !isDeleting(cached)) {
      try {
        return await this.#addFinalizer(cached, key, ctx);
      } catch (err) {
        if (!isConflict(err) && !isNotFound(err)) throw err;
      }
    }
    const stored = await this.#api.get(namespace, name, ctx.signal);
    if (stored !== undefined && hasFinalizer(stored)) return stored;
    if (stored === undefined || isDeleting(stored)) {
      this.#forget(namespace, name);
      return undefined;
    }
    return this.#addFinalizer(stored, key, ctx);
  }

  async #addFinalizer(lease: BerthLease, key: string, ctx: ReconcileContext): Promise<BerthLease> {
    const finalizers = [...(lease.metadata.finalizers ?? []), FINALIZER];
    const written = await observedWrite(this.#writes, key, () =>
      this.#api.setFinalizers(lease, finalizers, ctx.signal),
    );
    ctx.log.debug('finalizer added');
    return written;
  }

  /** One reconcile's view of `lease`, as this cluster's holder. */
  #scope(lease: BerthLease, key: string, ctx: ReconcileContext): LeaseScope {
    const deps: LeaseScopeDeps = {
      api: this.#api,
      clock: this.#clock,
      stopLeadMs: this.#stopLeadMs,
      ...(this.#writes === undefined ? {} : { writes: this.#writes }),
      onWritten: (before, after) => this.#reporter.written(before, after),
    };
    return new LeaseScope(deps, lease, holderFor(this.#clusterIdentity, lease.spec), key, ctx);
  }

  /** The Warnings about a spec's TTL, once per spec: the stop lead, then the leader failover. */
  #checkTimings(lease: BerthLease, ctx: ReconcileContext): void {
    const { namespace = '', name, uid = '', generation = 0 } = lease.metadata;
    const key = `${namespace}/${name}`;
    const checked = `${uid}/${generation}`;
    if (this.#marginChecked.get(key) === checked) return;
    this.#marginChecked.set(key, checked);
    const lead = stopLeadFor(lease, this.#stopLeadMs);
    const warn = (reason: string, problem: string | undefined): void => {
      if (problem === undefined) return;
      ctx.log.warn({ ttlSeconds: lease.spec.ttlSeconds }, problem);
      this.#reporter.event(lease, 'warning', reason, LeaseEventAction.Acquire, problem);
    };
    warn(LeaseEventReason.TTLBelowStopLead, lead > 0 ? stopLeadProblem(lease.spec, lead) : undefined);
    if (this.#failoverBoundMs !== undefined)
      warn(LeaseEventReason.TTLBelowFailover, failoverMarginProblem(lease.spec, this.#failoverBoundMs, lead));
  }

  #forget(namespace: string, name: string): void {
    this.#reporter.forget(namespace, name);
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
}
