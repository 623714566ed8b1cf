// The BerthLease controller: a BerthLease informer (all namespaces) feeding a Controller named
// `berthlease` whose reconcile is BerthLeaseReconciler, each reconcile bounded at 5 s. The cache only
// triggers reconciles; the reconciler reads the object from the API server. Watch events caused by
// the reconciler's own status writes are dropped (ownwrites.ts); heartbeats are requeues.
//
// As Manager runnables (`runnables()`): the cache on every replica (group "caches", warm for a new
// leader) and the controller on the elected leader only. With `handOverOnStop` (managed workloads), the
// controller runnable has a hand-over: each managed workload Active in this cluster is stopped, drained
// and released (BerthLeaseReconciler.handOver) while the admission server and the caches still run. The
// Manager runs it when leading ends for good — not when another replica takes over within the hand-over
// wait (that one resumes the workloads from status), and never when leadership is lost.
import type { KubernetesObject } from '@kubernetes/client-node';
import type { Registry } from 'prom-client';
import { type BuiltController, ControllerBuilder } from '../kube/builder.ts';
import { type Clock, realClock } from '../kube/clock.ts';
import type { Controller } from '../kube/controller.ts';
import { Informer } from '../kube/informer.ts';
import { objectKey } from '../kube/keys.ts';
import type { Runnable } from '../kube/manager.ts';
import {
  BucketRateLimiter,
  DEFAULT_BASE_DELAY_MS,
  DEFAULT_BURST,
  DEFAULT_QPS,
  ItemExponentialFailureRateLimiter,
  MaxOfRateLimiter,
  type RateLimiter,
} from '../kube/ratelimit.ts';
import type { BackoffPolicy } from '../kube/restart-backoff.ts';
import type { KubeRequester } from '../kube/transport.ts';
import { createLogger, type Logger } from '../observability/logger.ts';
import {
  type BerthLease,
  GROUP,
  hasFinalizer,
  LOCAL_TIMEOUT_MS,
  PLURAL,
  REQUEUE_ON_FAILURE_MS,
  VERSION,
  WorkloadPhase,
} from './api.ts';
import type { LeaseEventRecorder } from './lease-reporter.ts';
import type { LeaseClient } from './leaseclient.ts';
import { type BerthLeaseApi, kubeBerthLeaseApi, parseBerthLease } from './leaseio.ts';
import type { NamespaceScope } from './namespace-scope.ts';
import { OwnWrites } from './ownwrites.ts';
import { BerthLeaseReconciler, CONTROLLER_NAME } from './reconciler.ts';
import type { WorkloadManager } from './workload-manager.ts';

/**
 * Default concurrent reconciles. A hung central call holds a worker for up to 2.5 s, and a reconcile is
 * mostly waiting on the API server and the central server: at 1,000 new leases 16 workers held them all
 * in 13-14 s where 4 took 19 s (docs/performance.md, "leases").
 */
export const DEFAULT_MAX_CONCURRENT_RECONCILES = 16;

export interface BerthLeaseControllerOptions {
  /** The process's API transport: used by the informer and the reconciler's direct reads and writes. */
  transport: KubeRequester;
  /** The central lease API (required). */
  leaseClient: LeaseClient | undefined;
  /** `--cluster-id`. */
  clusterIdentity: string;
  operatorNamespace: string;
  /** The managed-workload path; default lease-only. */
  workloads?: WorkloadManager;
  recorder?: LeaseEventRecorder;
  /** Decides deadlines and requeues (tests pass a ManualClock). Default: the real clock. */
  clock?: Clock;
  /** Timeouts and backoff of the informer. Default: the real clock. */
  informerClock?: Clock;
  informerBackoff?: Partial<BackoffPolicy>;
  /** Overrides the Kubernetes edge of the reconciler (tests). */
  api?: BerthLeaseApi;
  maxConcurrentReconciles?: number;
  registry?: Registry;
  logger?: Logger;
  /**
   * On a graceful stop of the leader, stop, drain and release the managed workloads Active in this
   * cluster (default false). Bounded by the stop's grace signal, else by `handOverTimeoutMs`.
   */
  handOverOnStop?: boolean;
  /** Bound of the hand-over when stop() gets no grace signal. Default 30 s. */
  handOverTimeoutMs?: number;
  /** See BerthLeaseReconcilerOptions.failoverBoundMs. */
  failoverBoundMs?: number;
  /** See BerthLeaseReconcilerOptions.stopLeadMs. */
  stopLeadMs?: number;
  /**
   * The opt-in admission scope (managed workloads): its namespaces are watched, so a namespace entering or
   * leaving the scope reconciles its leases at once.
   */
  scope?: NamespaceScope;
}

/**
 * The requeue of a failed lease reconcile: controller-runtime's per-item exponential backoff, capped at
 * 1 s (REQUEUE_ON_FAILURE_MS) instead of 1000 s, with the same overall token bucket. A reconcile that
 * fails (API errors) cannot stop an expired activation; with the uncapped backoff the next attempt
 * came seconds to minutes after the API recovered, and the workload ran that long past its deadline
 * while another cluster could already hold the lease.
 */
export function berthLeaseRateLimiter(clock: Clock = realClock): RateLimiter<string> {
  return new MaxOfRateLimiter<string>(
    new ItemExponentialFailureRateLimiter<string>(DEFAULT_BASE_DELAY_MS, REQUEUE_ON_FAILURE_MS),
    new BucketRateLimiter<string>(DEFAULT_QPS, DEFAULT_BURST, clock),
  );
}

/** Default bound of a shutdown hand-over without a grace signal. */
export const DEFAULT_HAND_OVER_TIMEOUT_MS = 30_000;

export class BerthLeaseController {
  readonly name = CONTROLLER_NAME;
  /** Triggers only: objects are read from the API server when reconciled. */
  readonly informer: Informer<KubernetesObject>;
  readonly reconciler: BerthLeaseReconciler;
  readonly controller: Controller;
  readonly ownWrites: OwnWrites;
  /** The cache and controller runnables; reset() after the controller stops (held metrics). */
  readonly #built: BuiltController;

  constructor(options: BerthLeaseControllerOptions) {
    this.informer = new Informer<KubernetesObject>({
      name: CONTROLLER_NAME,
      transport: options.transport,
      resource: { group: GROUP, version: VERSION, plural: PLURAL },
      clock: options.informerClock ?? realClock,
      ...(options.informerBackoff ? { backoff: options.informerBackoff } : {}),
      ...(options.logger ? { logger: options.logger } : {}),
      ...(options.registry ? { registry: options.registry } : {}),
    });
    // The controller is built below; the tracker re-enqueues through it.
    this.ownWrites = new OwnWrites((key) => this.controller.enqueue(key));
    this.reconciler = new BerthLeaseReconciler({
      api: options.api ?? kubeBerthLeaseApi(options.transport),
      leaseClient: options.leaseClient,
      clusterIdentity: options.clusterIdentity,
      operatorNamespace: options.operatorNamespace,
      writes: this.ownWrites,
      cached: (key) => this.#cached(key),
      ...(options.workloads ? { workloads: options.workloads } : {}),
      ...(options.recorder ? { recorder: options.recorder } : {}),
      ...(options.clock ? { clock: options.clock } : {}),
      ...(options.registry ? { registry: options.registry } : {}),
      ...(options.failoverBoundMs !== undefined ? { failoverBoundMs: options.failoverBoundMs } : {}),
      ...(options.stopLeadMs !== undefined ? { stopLeadMs: options.stopLeadMs } : {}),
    });
    const builder = new ControllerBuilder(CONTROLLER_NAME)
      .for(this.informer)
      // Updates caused by the reconciler's own status writes decide nothing new.
      .withEventFilter(
        (lease, old) =>
          old === undefined || !this.ownWrites.isOwn(objectKey(lease), lease.metadata?.resourceVersion),
      )
      .withOptions({
        reconcileTimeoutMs: LOCAL_TIMEOUT_MS,
        maxConcurrentReconciles: options.maxConcurrentReconciles ?? DEFAULT_MAX_CONCURRENT_RECONCILES,
        rateLimiter: berthLeaseRateLimiter(options.clock),
        ...(options.clock ? { clock: options.clock } : {}),
        ...(options.registry ? { registry: options.registry } : {}),
        ...(options.logger ? { logger: options.logger } : {}),
      });
    if (options.scope !== undefined)
      builder.watches(options.scope.informer, {
        map: (ns) => this.informer.list(ns.metadata?.name ?? '').map((lease) => objectKey(lease)),
      });
    if (options.handOverOnStop) {
      const timeoutMs = options.handOverTimeoutMs ?? DEFAULT_HAND_OVER_TIMEOUT_MS;
      const log = (options.logger ?? createLogger({ level: 'silent' })).child({
        controller: CONTROLLER_NAME,
      });
      builder.withHandOver((grace) =>
        this.#handOverActive(
          log,
          AbortSignal.any([...(grace ? [grace] : []), AbortSignal.timeout(timeoutMs)]),
        ),
      );
    }
    this.#built = builder.complete(this.reconciler);
    this.controller = this.#built.controller;
    this.informer.addEventHandler({
      onDelete: (lease) => this.ownWrites.forget(objectKey(lease)),
    });
  }

  /**
   * The informer's copy of a lease without the finalizer, the only copy the reconciler acts on: the leases
   * it holds are not parsed again on every heartbeat. One that does not parse is left to the reconciler's
   * GET to report.
   */
  #cached(key: string): BerthLease | undefined {
    const lease = this.informer.get(key);
    if (lease === undefined || hasFinalizer(lease)) return undefined;
    try {
      return parseBerthLease(lease);
    } catch {
      return undefined;
    }
  }

  /** Starts listing and watching (idempotent). */
  startInformer(): void {
    this.#built.startCaches();
  }

  /** Leader only: starts the informer if needed, waits for its sync, runs the workers. Call once. */
  start(signal?: AbortSignal): Promise<void> {
    return this.#built.start(signal);
  }

  /**
   * Finishes in-flight reconciles (unless `grace` aborts first), hands over (with `handOverOnStop`),
   * then stops the informer. For use without a Manager (no other replica to take over).
   */
  stop(grace?: AbortSignal): Promise<void> {
    return this.#built.stop(grace);
  }

  /** The caches on every replica (`berthlease-cache`, `-caches` with the scope's namespaces), the controller on the leader only. */
  runnables(): [Runnable, Runnable] {
    return this.#built.runnables();
  }

  /** Enqueues a reconcile of `namespace/name` (the managed path's nudges). */
  enqueue(key: string): void {
    this.controller.enqueue(key);
  }

  /** Keys of the cached leases whose managed workload is Active or Stopping. */
  activeWorkloadKeys(): string[] {
    return this.informer
      .list()
      .filter((o) => {
        const phase = (o as { status?: { workload?: { phase?: unknown } } }).status?.workload?.phase;
        return phase === WorkloadPhase.Active || phase === WorkloadPhase.Stopping;
      })
      .map((o) => objectKey(o));
  }

  /**
   * Stops, drains and releases the managed workloads Active here (after the controller stopped), within
   * `bound` (the stop's grace signal and the hand-over timeout).
   */
  async #handOverActive(log: Logger, bound: AbortSignal): Promise<void> {
    const keys = this.activeWorkloadKeys();
    if (keys.length === 0) return;
    log.info({ leases: keys.length }, 'handing over managed workloads');
    const outcomes = await this.reconciler.handOver(keys, bound, log);
    log.info({ outcomes: Object.fromEntries(outcomes) }, 'hand-over finished');
    this.reconciler.reset();
  }
}
