// The manager: starts the process's parts in order and stops them gracefully (docs/architecture.md,
// "Runnables and leader election").
//
// Start: health/metrics server -> non-leader runnables group by group (certificate provider, admission
// server, informer caches waiting for sync, others) -> ready -> leader election -> on winning, the
// leader-only runnables (controllers). Without leader election those start right after ready.
//
// Stop (SIGTERM/SIGINT, `stop()`): readiness fails first and the runnables are told to drain; a drain
// window in which the webhooks keep serving while endpoints update; leader-only runnables stop (in-flight
// work finishes); the Lease is released; the non-leader runnables stop in reverse order; the probe server
// closes last. The whole sequence is bounded by the graceful shutdown timeout. A replica that is not
// leading when asked to stop stops campaigning at once, so it never becomes a successor that is about to
// go away.
//
// Hand-over: leader-only runnables may have work for when leading ends for good (the BerthLease
// controller stops the managed workloads it guards, so none runs unguarded). With a hand-over wait and a
// released Lease, the stopping leader first gives another replica that long to take the Lease (a rolling
// update: the successor resumes the workloads from status, nothing is stopped); only if none does, it
// leads once more, hands over and releases again. Without leader election or release on cancel, it hands
// over while still leading. Losing leadership skips all of that: leader-only
// work is aborted at once and the manager returns exit code 1 so the process exits.
//
// Every step is reported through `onEvent` and the logger, so tests can assert the order.
import type { Registry } from 'prom-client';
import {
  type BoundAddress,
  createToggleCheck,
  type MetricsSecurity,
  ProbeServer,
  type ToggleCheck,
} from '../observability/health.ts';
import type { Logger } from '../observability/logger.ts';
import { type Clock, realClock, type Timer } from './clock.ts';
import type { LeaderCallbacks, LeaderRunResult } from './leader.ts';

/**
 * Non-leader runnables start group by group in this order (the runnables of one group concurrently, the
 * next group once all of them resolved) and stop in the reverse order.
 */
export const RUNNABLE_GROUPS = ['certificates', 'webhooks', 'caches', 'others'] as const;
export type RunnableGroup = (typeof RUNNABLE_GROUPS)[number];

export interface RunnableContext {
  logger: Logger;
  /** Reports a fatal error after start: the manager shuts down gracefully and exits with 1. */
  fail(error: unknown): void;
}

export interface Runnable {
  name: string;
  /** true: runs only on the elected leader (controllers); false: on every replica (servers, caches). */
  needLeaderElection: boolean;
  /** Start group for a non-leader runnable (default 'others'); ignored for leader-only runnables. */
  group?: RunnableGroup;
  /**
   * Starts the work and resolves once it is up (a server listening, a cache synced); the work goes on
   * until `signal` aborts. A rejection fails the manager's start.
   */
  start(signal: AbortSignal, ctx: RunnableContext): Promise<void>;
  /**
   * Called after `signal` aborted, to finish in-flight work (drain a queue, close a server). `grace`
   * aborts when the manager stops waiting (graceful shutdown timeout; already aborted when leadership
   * was lost): abandon in-flight work then, e.g. by passing it to `Controller.stop(grace)`.
   */
  stop?(grace?: AbortSignal): Promise<void>;
  /**
   * Called once when a shutdown begins, right after readiness failed (before the drain window): e.g. a
   * server stops keeping connections alive, so that clients move to other endpoints while it still serves.
   */
  drain?(): void;
  /**
   * Leader-only runnables: what to do, after stop(), when this replica stops leading and no other replica
   * takes over (see the hand-over wait). Runs only while this replica holds the Lease (or without leader
   * election), and only if it led. `grace` aborts when the manager stops waiting.
   */
  handOver?(grace: AbortSignal): Promise<void>;
}

/** The part of LeaderElector the manager uses (a stub in unit tests). */
export interface Elector {
  readonly identity: string;
  run(signal: AbortSignal, callbacks: LeaderCallbacks): Promise<LeaderRunResult>;
  isLeader(): boolean;
  readonly releasesOnCancel: boolean;
  /** The Lease's holder ('' when released, undefined when absent); rejects on an API error. */
  readHolder(): Promise<string | undefined>;
}

export type LifecycleStep =
  | 'probe-server-started'
  | 'runnable-started'
  | 'ready'
  | 'leader-election-started'
  | 'elected'
  | 'shutdown-requested'
  | 'not-ready'
  | 'drained'
  | 'runnable-stopped'
  | 'leader-election-stopped'
  | 'probe-server-stopped'
  | 'leadership-lost'
  | 'runnable-failed'
  | 'successor-took-over'
  | 'handed-over';

export interface LifecycleEvent {
  step: LifecycleStep;
  runnable?: string;
}

export interface ManagerOptions {
  logger: Logger;
  registry: Registry;
  /** `--health-probe-bind-address` (`0` disables). */
  healthProbeBindAddress: string;
  /** `--metrics-bind-address` (`0` disables). */
  metricsBindAddress: string;
  /** `--metrics-secure`: HTTPS and an authorization per scrape (src/secure-metrics.ts). */
  metricsSecurity?: MetricsSecurity;
  gracefulShutdownTimeoutMs: number;
  drainWindowMs: number;
  /** Leader election; when absent, leader-only runnables start as soon as the replica is ready. */
  elector?: Elector;
  /**
   * How long a stopping leader that released the Lease waits for another replica to take it before it
   * runs the hand-over work itself (default 0: hand over at once, before releasing).
   */
  handOverWaitMs?: number;
  clock?: Clock;
  onEvent?: (event: LifecycleEvent) => void;
}

export interface ManagerResult {
  exitCode: number;
  reason: string;
}

interface StopRequest {
  reason: string;
  exitCode: number;
  /** Skip the graceful sequence (leadership lost). */
  immediate: boolean;
}

interface Active {
  runnable: Runnable;
  controller: AbortController;
  /** The start call, settled or not. */
  started: Promise<void>;
}

export const READINESS_CHECK = 'manager';
/** How often a stopping leader looks for a successor during the hand-over wait. */
const SUCCESSOR_POLL_MS = 250;

/** `host:port` of a bound listener, as printed in the "probe server listening" log line. */
export function hostPort(bound: BoundAddress | undefined): string | undefined {
  return bound === undefined ? undefined : new URL(bound.url).host;
}

export class Manager {
  readonly probes: ProbeServer;
  /** Resolves when leader-only runnables may start (elected, or leader election disabled). */
  readonly elected: Promise<void>;
  readonly #o: ManagerOptions;
  readonly #clock: Clock;
  readonly #log: Logger;
  readonly #readiness: ToggleCheck;
  readonly #runnables: Runnable[] = [];
  readonly #active = new Map<Runnable, Active>();
  readonly #leaderWork = new AbortController();
  readonly #electorStop = new AbortController();
  /** Handed to every runnable's stop(): aborts when the manager stops waiting for them. */
  readonly #stopDeadline = new AbortController();
  #electorDone: Promise<LeaderRunResult> | undefined;
  #markElected!: () => void;
  #probeStart: ReturnType<ProbeServer['start']> | undefined;
  #requestStop!: (request: StopRequest) => void;
  readonly #stopRequested: Promise<StopRequest>;
  #stopping = false;
  #exitCode = 0;
  #becameReady = false;
  /** Leader-only runnables were started: only then is there anything to hand over. */
  #led = false;
  #ran = false;
  #addresses: { health: string | undefined; metrics: string | undefined } | undefined;

  constructor(options: ManagerOptions) {
    this.#o = options;
    this.#clock = options.clock ?? realClock;
    this.#log = options.logger;
    this.probes = new ProbeServer({
      healthProbeBindAddress: options.healthProbeBindAddress,
      metricsBindAddress: options.metricsBindAddress,
      ...(options.metricsSecurity ? { metricsSecurity: options.metricsSecurity } : {}),
      registry: options.registry,
      logger: options.logger,
      clock: this.#clock,
    });
    this.#readiness = createToggleCheck('starting');
    this.probes.addHealthzCheck('ping', () => {});
    this.probes.addReadyzCheck(READINESS_CHECK, this.#readiness.check);
    this.elected = new Promise((resolve) => {
      this.#markElected = resolve;
    });
    this.#stopRequested = new Promise((resolve) => {
      let requested = false;
      this.#requestStop = (request) => {
        if (request.exitCode > this.#exitCode) this.#exitCode = request.exitCode;
        if (requested) return;
        requested = true;
        resolve(request);
      };
    });
  }

  /** Registers a runnable; only before `run()`. */
  add(runnable: Runnable): void {
    if (this.#ran) throw new Error(`cannot add runnable ${runnable.name} after the manager started`);
    if (this.#runnables.some((r) => r.name === runnable.name))
      throw new Error(`duplicate runnable ${runnable.name}`);
    this.#runnables.push(runnable);
  }

  /** Bound probe/metrics addresses (`host:port`), once the probe server is up. */
  get addresses(): { health: string | undefined; metrics: string | undefined } | undefined {
    return this.#addresses;
  }

  isLeader(): boolean {
    return this.#o.elector === undefined ? this.#becameReady && !this.#stopping : this.#o.elector.isLeader();
  }

  /** Begins the graceful shutdown (idempotent). */
  stop(reason = 'stop requested'): void {
    this.#requestStop({ reason, exitCode: 0, immediate: false });
  }

  /** Starts everything, then waits for a stop request and shuts down. Resolves with the exit code. */
  async run(): Promise<ManagerResult> {
    if (this.#ran) throw new Error('manager already ran');
    this.#ran = true;
    this.#startup().catch((err: unknown) => {
      this.#log.error({ err }, 'manager start failed');
      this.#requestStop({ reason: `start failed: ${message(err)}`, exitCode: 1, immediate: false });
    });
    const request = await this.#stopRequested;
    return this.#shutdown(request);
  }

  // --- start ----------------------------------------------------------------------------------------

  async #startup(): Promise<void> {
    this.#probeStart = this.probes.start();
    const bound = await this.#probeStart;
    this.#addresses = { health: hostPort(bound.health), metrics: hostPort(bound.metrics) };
    this.#log.info(this.#addresses, 'probe server listening');
    this.#emit({ step: 'probe-server-started' });

    for (const group of RUNNABLE_GROUPS) {
      const members = this.#runnables.filter((r) => !r.needLeaderElection && (r.group ?? 'others') === group);
      if (this.#stopping) return;
      await Promise.all(members.map((r) => this.#start(r, new AbortController())));
    }
    if (this.#stopping) return;
    this.#becameReady = true;
    this.#readiness.pass();
    this.#emit({ step: 'ready' });

    const elector = this.#o.elector;
    if (elector === undefined) {
      this.#startLeaderRunnables();
      return;
    }
    this.#emit({ step: 'leader-election-started' });
    this.#electorDone = elector
      .run(this.#electorStop.signal, {
        onStartedLeading: () => this.#startLeaderRunnables(),
        onStoppedLeading: ({ lost }) => {
          if (lost) this.#leadershipLost();
        },
      })
      .catch((err: unknown) => {
        this.#log.error({ err }, 'leader election failed');
        this.#leadershipLost();
        return { led: false, lost: true, released: false };
      });
  }

  #startLeaderRunnables(): void {
    if (this.#stopping) return;
    this.#led = true;
    this.#emit({ step: 'elected' });
    this.#markElected();
    const leaders = this.#runnables.filter((r) => r.needLeaderElection);
    Promise.all(leaders.map((r) => this.#start(r, this.#leaderWork))).catch((err: unknown) => {
      this.#requestStop({ reason: `start failed: ${message(err)}`, exitCode: 1, immediate: false });
    });
  }

  async #start(runnable: Runnable, controller: AbortController): Promise<void> {
    if (this.#stopping) return;
    const logger = this.#log.child({ runnable: runnable.name });
    const ctx: RunnableContext = {
      logger,
      fail: (error) => {
        logger.error({ err: error }, 'runnable failed');
        this.#emit({ step: 'runnable-failed', runnable: runnable.name });
        this.#requestStop({
          reason: `${runnable.name} failed: ${message(error)}`,
          exitCode: 1,
          immediate: false,
        });
      },
    };
    const started = Promise.resolve().then(() => runnable.start(controller.signal, ctx));
    this.#active.set(runnable, { runnable, controller, started });
    try {
      await started;
    } catch (err) {
      if (controller.signal.aborted) return; // told to stop while starting: not a failure
      throw new Error(`${runnable.name}: ${message(err)}`);
    }
    if (!controller.signal.aborted) this.#emit({ step: 'runnable-started', runnable: runnable.name });
  }

  #leadershipLost(): void {
    // Leader-only work stops at once: another replica may already be leading.
    this.#leaderWork.abort(new Error('leader election lost'));
    this.#emit({ step: 'leadership-lost' });
    this.#requestStop({ reason: 'leader election lost', exitCode: 1, immediate: true });
  }

  // --- stop -----------------------------------------------------------------------------------------

  async #shutdown(request: StopRequest): Promise<ManagerResult> {
    this.#stopping = true;
    this.#log.info({ reason: request.reason }, 'shutting down');
    this.#emit({ step: 'shutdown-requested' });
    this.#readiness.fail('shutting down');
    this.#emit({ step: 'not-ready' });
    for (const active of this.#active.values()) active.runnable.drain?.();
    // A candidate on its way out must not win the Lease now: a stopping leader would take it for a successor.
    if (this.#o.elector !== undefined && !this.#o.elector.isLeader()) this.#electorStop.abort();

    if (request.immediate) {
      this.#leaderWork.abort(new Error(request.reason));
      this.#electorStop.abort();
      this.#stopDeadline.abort(new Error(request.reason));
      for (const active of this.#active.values()) {
        active.controller.abort(new Error(request.reason));
        active.runnable.stop?.(this.#stopDeadline.signal).catch(() => {});
      }
      await this.#closeProbes();
      return { exitCode: Math.max(1, this.#exitCode), reason: request.reason };
    }

    let timer: Timer | undefined;
    const timedOut = new Promise<true>((resolve) => {
      timer = this.#clock.setTimeout(() => resolve(true), this.#o.gracefulShutdownTimeoutMs);
    });
    const outcome = await Promise.race([this.#gracefulSequence().then(() => false as const), timedOut]);
    timer?.cancel();
    if (outcome) {
      this.#log.error({ timeoutMs: this.#o.gracefulShutdownTimeoutMs }, 'graceful shutdown timed out');
      this.#leaderWork.abort(new Error('graceful shutdown timed out'));
      this.#electorStop.abort();
      this.#stopDeadline.abort(new Error('graceful shutdown timed out'));
      for (const active of this.#active.values())
        active.controller.abort(new Error('graceful shutdown timed out'));
    }
    await this.#closeProbes();
    if (outcome) return { exitCode: 1, reason: 'graceful shutdown timed out' };
    return { exitCode: this.#exitCode, reason: request.reason };
  }

  async #gracefulSequence(): Promise<void> {
    // Endpoints only ever listed us if we were ready; then give them time to drop us.
    if (this.#becameReady && this.#o.drainWindowMs > 0) {
      await this.#clock.sleep(this.#o.drainWindowMs);
      this.#emit({ step: 'drained' });
    }
    this.#leaderWork.abort(new Error('shutting down'));
    const leaders = this.#runnables.filter((r) => r.needLeaderElection);
    await this.#stopAll(leaders);
    let handOvers = this.#led ? leaders.filter((r) => r.handOver !== undefined) : [];
    const elector = this.#o.elector;
    const awaitSuccessor = elector?.releasesOnCancel === true && (this.#o.handOverWaitMs ?? 0) > 0;
    if (handOvers.length > 0 && !awaitSuccessor) {
      await this.#runHandOvers(handOvers, this.#stopDeadline.signal);
      handOvers = [];
    }
    if (this.#electorDone !== undefined) {
      this.#electorStop.abort();
      const result = await this.#electorDone;
      this.#log.info({ released: result.released }, 'leader election stopped');
      this.#emit({ step: 'leader-election-stopped' });
      if (elector !== undefined && handOvers.length > 0 && !result.lost)
        await this.#handOverUnlessSucceeded(elector, handOvers);
    }
    for (const group of [...RUNNABLE_GROUPS].reverse()) {
      await this.#stopAll(
        this.#runnables.filter((r) => !r.needLeaderElection && (r.group ?? 'others') === group),
      );
    }
  }

  /** After releasing: leave the work to a successor if one takes the Lease in time, else lead and hand over. */
  async #handOverUnlessSucceeded(elector: Elector, handOvers: Runnable[]): Promise<void> {
    const grace = this.#stopDeadline.signal;
    const deadline = this.#clock.now() + (this.#o.handOverWaitMs ?? 0);
    for (;;) {
      const holder = await elector.readHolder().catch((err: unknown) => {
        this.#log.warn({ err }, 'reading the leader election lease failed while waiting for a successor');
        return undefined;
      });
      if (holder !== undefined && holder !== '' && holder !== elector.identity) {
        this.#log.info({ successor: holder }, 'another replica took over: its controllers resume the work');
        this.#emit({ step: 'successor-took-over' });
        return;
      }
      const left = deadline - this.#clock.now();
      if (left <= 0 || grace.aborted) break;
      await this.#clock.sleep(Math.min(SUCCESSOR_POLL_MS, left));
    }
    if (grace.aborted) return;
    this.#log.info('no other replica took over: leading once more to hand over');
    const done = new AbortController();
    let work: Promise<void> | undefined;
    const result = await elector.run(AbortSignal.any([done.signal, grace]), {
      // `term` aborts if this leadership is lost: the hand-over must not outlive it.
      onStartedLeading: (term) => {
        work = this.#runHandOvers(handOvers, AbortSignal.any([term, grace])).finally(() => done.abort());
      },
      // Someone else leads after all: the work is theirs.
      onNewLeader: (identity) => {
        if (identity !== '' && identity !== elector.identity) done.abort();
      },
    });
    await work;
    if (!result.led) {
      this.#log.info('another replica took over before the hand-over');
      this.#emit({ step: 'successor-took-over' });
    }
  }

  async #runHandOvers(handOvers: Runnable[], signal: AbortSignal): Promise<void> {
    await Promise.all(
      handOvers.map(async (runnable) => {
        try {
          await runnable.handOver?.(signal);
        } catch (err) {
          this.#log.error({ err, runnable: runnable.name }, 'hand-over failed');
          this.#exitCode = Math.max(this.#exitCode, 1);
        }
        this.#emit({ step: 'handed-over', runnable: runnable.name });
      }),
    );
  }

  async #stopAll(runnables: Runnable[]): Promise<void> {
    await Promise.all(
      runnables.map(async (runnable) => {
        const active = this.#active.get(runnable);
        if (active === undefined) return;
        this.#active.delete(runnable);
        active.controller.abort(new Error('shutting down'));
        await active.started.catch(() => {});
        try {
          await runnable.stop?.(this.#stopDeadline.signal);
        } catch (err) {
          this.#log.error({ err, runnable: runnable.name }, 'runnable stop failed');
          this.#exitCode = Math.max(this.#exitCode, 1);
        }
        this.#emit({ step: 'runnable-stopped', runnable: runnable.name });
      }),
    );
  }

  async #closeProbes(): Promise<void> {
    if (this.#probeStart === undefined) return;
    await this.#probeStart.catch(() => {});
    await this.probes.stop();
    this.#emit({ step: 'probe-server-stopped' });
  }

  #emit(event: LifecycleEvent): void {
    this.#log.info({ ...event }, `lifecycle: ${event.step}${event.runnable ? ` ${event.runnable}` : ''}`);
    try {
      this.#o.onEvent?.(event);
    } catch (err) {
      this.#log.error({ err }, 'lifecycle event handler threw');
    }
  }
}

function message(err: unknown): string {
  return err instanceof Error ? err.message : String(err);
}
