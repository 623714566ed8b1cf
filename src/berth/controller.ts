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
import type { KubeRequester } from '../kube/client.ts';
import { type Clock, realClock } from '../kube/clock.ts';
import { Controller } from '../kube/controller.ts';
import { type BackoffPolicy, Informer, objectKey } from '../kube/informer.ts';
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
import { createLogger, type Logger } from '../observability/logger.ts';
import { GROUP, LOCAL_TIMEOUT_MS, PLURAL, REQUEUE_ON_FAILURE_MS, VERSION, WorkloadPhase } from './api.ts';
import type { LeaseClient } from './leaseclient.ts';
import { type BerthLeaseApi, kubeBerthLeaseApi } from './leaseio.ts';
import { OwnWrites } from './ownwrites.ts';
import {
  BerthLeaseReconciler,
  CONTROLLER_NAME,
  type LeaseEventRecorder,
  type ManagedStandby,
} from './reconciler.ts';
import type { WorkloadManager } from './workload-manager.ts';

/** Default concurrent reconciles: a hung central call holds a worker for up to 2.5 s. */
export const DEFAULT_MAX_CONCURRENT_RECONCILES = 4;

export interface BerthLeaseControllerOptions {
  /** e.g. `new KubeTransport(kc)`: used by the informer and the reconciler's direct reads and writes. */
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
  /** Managed standby behaviour (default `wait`; `stop-cycle` is the original, for comparison). */
  managedStandby?: ManagedStandby;
  /**
   * On a graceful stop of the leader, stop, drain and release the managed workloads Active in this
   * cluster (default false). Bounded by the stop's grace signal, else by `handOverTimeoutMs`.
   */
  handOverOnStop?: boolean;
  /** Bound of the hand-over when stop() gets no grace signal. Default 30 s. */
  handOverTimeoutMs?: number;
  /** See BerthLeaseReconcilerOptions.failoverBoundMs. */
  failoverBoundMs?: number;
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
  readonly #stopInformer = new AbortController();
  readonly #handOver: { timeoutMs: number; log: Logger } | undefined;
  #started = false;

  constructor(options: BerthLeaseControllerOptions) {
    this.#handOver = options.handOverOnStop
      ? {
          timeoutMs: options.handOverTimeoutMs ?? DEFAULT_HAND_OVER_TIMEOUT_MS,
          log: (options.logger ?? createLogger({ level: 'silent' })).child({ controller: CONTROLLER_NAME }),
        }
      : undefined;
    this.informer = new Informer<KubernetesObject>({
      name: CONTROLLER_NAME,
      transport: options.transport,
      resource: { group: GROUP, version: VERSION, plural: PLURAL },
      clock: options.informerClock ?? realClock,
      ...(options.informerBackoff ? { backoff: options.informerBackoff } : {}),
      ...(options.logger ? { logger: options.logger } : {}),
      ...(options.registry ? { registry: options.registry } : {}),
    });
    // The controller is created below; the tracker re-enqueues through it.
    this.ownWrites = new OwnWrites((key) => this.controller.enqueue(key));
    this.reconciler = new BerthLeaseReconciler({
      api: options.api ?? kubeBerthLeaseApi(options.transport),
      leaseClient: options.leaseClient,
      clusterIdentity: options.clusterIdentity,
      operatorNamespace: options.operatorNamespace,
      writes: this.ownWrites,
      ...(options.workloads ? { workloads: options.workloads } : {}),
      ...(options.recorder ? { recorder: options.recorder } : {}),
      ...(options.clock ? { clock: options.clock } : {}),
      ...(options.registry ? { registry: options.registry } : {}),
      ...(options.managedStandby ? { managedStandby: options.managedStandby } : {}),
      ...(options.failoverBoundMs !== undefined ? { failoverBoundMs: options.failoverBoundMs } : {}),
    });
    this.controller = new Controller({
      name: CONTROLLER_NAME,
      reconcile: this.reconciler.reconcile,
      reconcileTimeoutMs: LOCAL_TIMEOUT_MS,
      maxConcurrentReconciles: options.maxConcurrentReconciles ?? DEFAULT_MAX_CONCURRENT_RECONCILES,
      rateLimiter: berthLeaseRateLimiter(options.clock),
      ...(options.clock ? { clock: options.clock } : {}),
      ...(options.registry ? { registry: options.registry } : {}),
      ...(options.logger ? { logger: options.logger } : {}),
    }).watches(this.informer, {
      predicate: (lease, old) =>
        old === undefined || !this.ownWrites.isOwn(objectKey(lease), lease.metadata?.resourceVersion),
    });
    this.informer.addEventHandler({
      onDelete: (lease) => this.ownWrites.forget(objectKey(lease)),
    });
  }

  /** Starts listing and watching (idempotent). */
  startInformer(): void {
    this.informer.start(this.#stopInformer.signal);
  }

  /** Leader only: starts the informer if needed, waits for its sync, runs the workers. Call once. */
  async start(signal?: AbortSignal): Promise<void> {
    this.startInformer();
    signal?.addEventListener('abort', () => void this.stop(), { once: true });
    await this.#startController(signal);
  }

  /**
   * Finishes in-flight reconciles (unless `grace` aborts first), hands over (with `handOverOnStop`),
   * then stops the informer. For use without a Manager (no other replica to take over).
   */
  async stop(grace?: AbortSignal): Promise<void> {
    await this.#stopController(grace);
    if (!grace?.aborted) await this.#handOverActive(grace);
    await this.#stopCache();
  }

  /** The cache on every replica, the controller on the elected leader only. */
  runnables(): [Runnable, Runnable] {
    return [
      {
        name: `${CONTROLLER_NAME}-cache`,
        needLeaderElection: false,
        group: 'caches',
        start: async (signal) => {
          this.startInformer();
          await this.informer.waitForSync(signal);
        },
        stop: () => this.#stopCache(),
      },
      {
        name: CONTROLLER_NAME,
        needLeaderElection: true,
        start: async (signal) => {
          this.startInformer();
          await this.#startController(signal);
        },
        stop: (grace) => this.#stopController(grace),
        ...(this.#handOver !== undefined
          ? { handOver: (grace: AbortSignal) => this.#handOverActive(grace) }
          : {}),
      },
    ];
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

  /** Readiness of the cache (for ProbeServer.addReadyzCheck). */
  readinessCheck(): { name: string; check: () => void } {
    return { name: this.informer.name, check: this.informer.readinessCheck() };
  }

  async #startController(signal?: AbortSignal): Promise<void> {
    if (this.#started) throw new Error(`${CONTROLLER_NAME} already started`);
    this.#started = true;
    await this.controller.start(signal);
  }

  async #stopController(grace?: AbortSignal): Promise<void> {
    await this.controller.stop(grace);
    this.reconciler.reset();
  }

  /** Stops, drains and releases the managed workloads Active here (after the controller stopped). */
  async #handOverActive(grace?: AbortSignal): Promise<void> {
    if (this.#handOver === undefined || !this.#started) return;
    const bound = AbortSignal.any([...(grace ? [grace] : []), AbortSignal.timeout(this.#handOver.timeoutMs)]);
    const keys = this.activeWorkloadKeys();
    if (keys.length === 0) return;
    this.#handOver.log.info({ leases: keys.length }, 'handing over managed workloads');
    const outcomes = await this.reconciler.handOver(keys, bound, this.#handOver.log);
    this.#handOver.log.info({ outcomes: Object.fromEntries(outcomes) }, 'hand-over finished');
    this.reconciler.reset();
  }

  async #stopCache(): Promise<void> {
    this.#stopInformer.abort();
    await this.informer.stop();
  }
}
