// A controller in controller-runtime's shape: sources (informers, each with a function mapping an
// object to the keys to reconcile) feed a WorkQueue; workers call `reconcile(key, ctx)` and act on the
// outcome exactly like controller-runtime's reconcileHandler:
//   thrown error     -> rate-limited requeue, no sooner than the error's Retry-After (TerminalError:
//                       counted, not requeued)
//   { requeueAfter } -> forget the backoff, requeue after the delay
//   { requeue: true }-> rate-limited requeue
//   otherwise        -> forget the backoff (success)
// A reconcile can never crash the process: throws and rejections are caught, counted and logged.
import { randomUUID } from 'node:crypto';
import type { KubernetesObject } from '@kubernetes/client-node';
import type { Counter, Gauge, Histogram, Registry } from 'prom-client';
import { childLogger, createLogger, type Logger } from '../observability/logger.ts';
import { getOrCreateCounter, getOrCreateGauge, getOrCreateHistogram } from '../observability/metrics.ts';
import { describeError, retryAfterSeconds } from './client.ts';
import { type Clock, realClock, type Timer } from './clock.ts';
import type { EventHandlers } from './informer.ts';
import { objectKey, splitKey } from './keys.ts';
import type { RateLimiter } from './ratelimit.ts';
import { WorkQueue } from './workqueue.ts';

export interface ReconcileResult {
  /** Reconcile this key again after this many milliseconds (resets the error backoff). */
  requeueAfter?: number;
  /** Requeue with rate-limited backoff (deprecated in controller-runtime; prefer requeueAfter). */
  requeue?: boolean;
}

export interface ReconcileContext {
  /** Aborted when the per-reconcile timeout passes or the controller is stopped without grace. */
  signal: AbortSignal;
  /** Carries controller, namespace, name and reconcileID. */
  log: Logger;
  reconcileID: string;
  namespace: string | undefined;
  name: string;
}

// biome-ignore lint/suspicious/noConfusingVoidType: lets `async (key) => { ... }` with no return be a Reconciler.
export type Reconciler = (key: string, ctx: ReconcileContext) => Promise<ReconcileResult | undefined | void>;

/** An error that retrying cannot fix (bad spec, missing permission by design): not requeued. */
export class TerminalError extends Error {
  constructor(message: string, options?: { cause?: unknown }) {
    super(message, options);
    this.name = 'TerminalError';
  }
}

export function isTerminalError(err: unknown): boolean {
  for (let e: unknown = err, depth = 0; e instanceof Error && depth < 10; e = e.cause, depth++) {
    if (e instanceof TerminalError) return true;
  }
  return false;
}

export class ReconcileTimeoutError extends Error {
  constructor(ms: number) {
    super(`reconcile timed out after ${ms}ms`);
    this.name = 'ReconcileTimeoutError';
  }
}

export type ReconcileOutcome =
  | { result: 'success' }
  | { result: 'requeue_after'; afterMs: number }
  | { result: 'requeue' }
  | { result: 'error'; terminal: boolean; error: unknown };

/** Pure: what a reconcile's return value or thrown error means for the queue. */
export function classifyReconcile(
  // biome-ignore lint/suspicious/noConfusingVoidType: the Reconciler's own return type.
  returned: ReconcileResult | undefined | void,
  error?: unknown,
): ReconcileOutcome {
  if (error !== undefined) return { result: 'error', terminal: isTerminalError(error), error };
  const after = returned?.requeueAfter;
  if (after !== undefined && Number.isFinite(after) && after > 0)
    return { result: 'requeue_after', afterMs: after };
  if (returned?.requeue) return { result: 'requeue' };
  return { result: 'success' };
}

/** Maps an object of a watched kind to the keys (`namespace/name`) of the objects to reconcile. */
export type MapFunc<T> = (obj: T) => readonly string[] | string | undefined;

/** Something that can be watched: an Informer, or a fake in tests. */
export interface Source<T> {
  readonly name: string;
  addEventHandler(handlers: EventHandlers<T>): () => void;
  waitForSync(signal?: AbortSignal): Promise<void>;
}

/** Filters events; `old` is set for updates. */
export type Predicate<T> = (obj: T, old?: T) => boolean;

export interface WatchOptions<T> {
  /** Defaults to the object's own key. */
  map?: MapFunc<T>;
  /** Default: every event. */
  predicate?: Predicate<T>;
}

export interface ControllerOptions {
  /** Controller name: metric label, log field, queue name. */
  name: string;
  reconcile: Reconciler;
  /** Workers (default 1, as in controller-runtime). */
  maxConcurrentReconciles?: number;
  /** Per-reconcile deadline (AbortSignal); none by default. */
  reconcileTimeoutMs?: number;
  /** Bound on waiting for the sources to sync in start() (default 2 min). */
  cacheSyncTimeoutMs?: number;
  /**
   * Bound on stop()'s drain (default 30 s, controller-runtime's graceful shutdown timeout; 0 or
   * Infinity: no bound). When it passes, in-flight reconciles see their signal aborted and stop()
   * returns without waiting for them any longer.
   */
  stopTimeoutMs?: number;
  /** Default: 5 ms -> 1000 s per item, max with a 10 qps / burst 100 bucket. */
  rateLimiter?: RateLimiter<string>;
  clock?: Clock;
  registry?: Registry;
  logger?: Logger;
}

interface Watch {
  source: Source<KubernetesObject>;
  options: WatchOptions<KubernetesObject>;
}

/**
 * Longest Retry-After a failed reconcile waits for. client-go's REST client waits out a 429's (or 5xx's)
 * Retry-After inside the request; here the request fails and the retry waits instead, bounded so that a
 * misbehaving server cannot park a key for long.
 */
export const MAX_RETRY_AFTER_MS = 60_000;

/** Default bound on Controller.stop()'s drain: controller-runtime's default graceful shutdown timeout. */
export const DEFAULT_STOP_TIMEOUT_MS = 30_000;

export class Controller {
  readonly name: string;
  readonly queue: WorkQueue<string>;
  readonly #o: ControllerOptions;
  readonly #clock: Clock;
  readonly #metrics: ControllerMetrics | undefined;
  readonly #labels: { controller: string };
  readonly #watches: Watch[] = [];
  readonly #unregister: Array<() => void> = [];
  readonly #inFlight = new Set<AbortController>();
  #workers: Promise<void>[] = [];
  /** Aborts the wait for cache sync when the controller is stopped while starting. */
  readonly #starting = new AbortController();
  /** Aborted when stop() gives up draining (grace signal or stop timeout): in-flight reconciles are aborted. */
  readonly #abandon = new AbortController();
  #state: 'new' | 'starting' | 'running' | 'stopped' = 'new';
  #stopping: Promise<void> | undefined;

  constructor(options: ControllerOptions) {
    this.name = options.name;
    this.#o = options;
    this.#clock = options.clock ?? realClock;
    this.#labels = { controller: options.name };
    this.queue = new WorkQueue<string>({
      name: options.name,
      clock: this.#clock,
      ...(options.rateLimiter ? { rateLimiter: options.rateLimiter } : {}),
      ...(options.registry ? { registry: options.registry } : {}),
    });
    this.#metrics = options.registry === undefined ? undefined : controllerMetrics(options.registry);
    if (this.#metrics !== undefined) {
      // Export zeroes from the start, like controller-runtime's initMetrics.
      for (const result of ['success', 'error', 'requeue', 'requeue_after']) {
        this.#metrics.total.inc({ ...this.#labels, result }, 0);
      }
      this.#metrics.errors.inc(this.#labels, 0);
      this.#metrics.terminalErrors.inc(this.#labels, 0);
      this.#metrics.timeouts.inc(this.#labels, 0);
      this.#metrics.active.set(this.#labels, 0);
      this.#metrics.maxConcurrent.set(this.#labels, this.#concurrency());
    }
  }

  /** Adds a source. Call before start(). */
  watches<T extends KubernetesObject>(source: Source<T>, options: WatchOptions<T> = {}): this {
    if (this.#state !== 'new') throw new Error(`controller ${this.name}: watches() after start()`);
    this.#watches.push({
      source: source as unknown as Source<KubernetesObject>,
      options: options as WatchOptions<KubernetesObject>,
    });
    return this;
  }

  /** Enqueues a key directly (e.g. from a timer or another component). */
  enqueue(key: string): void {
    this.queue.add(key);
  }

  /**
   * Registers the source handlers, waits for the sources to sync, then starts the workers. Resolves
   * once running. Aborting `signal` stops the controller (with drain).
   */
  async start(signal?: AbortSignal): Promise<void> {
    if (this.#state !== 'new') throw new Error(`controller ${this.name} already started`);
    this.#state = 'starting';
    if (signal?.aborted) {
      await this.stop();
      return;
    }
    signal?.addEventListener('abort', () => void this.stop(), { once: true });
    for (const watch of this.#watches)
      this.#unregister.push(watch.source.addEventHandler(this.#handlersFor(watch)));
    const syncTimeout = this.#o.cacheSyncTimeoutMs ?? 120_000;
    const sync = this.#starting;
    const timer = this.#clock.setTimeout(
      () => sync.abort(new Error(`controller ${this.name}: caches did not sync within ${syncTimeout}ms`)),
      syncTimeout,
    );
    try {
      await Promise.all(this.#watches.map((w) => w.source.waitForSync(sync.signal)));
    } catch (err) {
      // Stopped while starting: not an error.
      if (this.#stopped()) return;
      await this.stop();
      throw err;
    } finally {
      timer.cancel();
    }
    if (this.#stopped()) return;
    this.#state = 'running';
    const n = this.#concurrency();
    for (let i = 0; i < n; i++) this.#workers.push(this.#worker());
    this.#o.logger?.info({ controller: this.name, workers: n }, 'controller started');
  }

  /**
   * Stops taking new work and waits for in-flight reconciles to finish (drain), at most `stopTimeoutMs`.
   * If `grace` aborts first (or that bound passes), in-flight reconciles see their signal aborted and
   * stop() returns without waiting further. Idempotent: every call returns the same stop, and the grace
   * signal of a later call still applies to it (e.g. stop() from the start signal, then stop(grace)).
   */
  async stop(grace?: AbortSignal): Promise<void> {
    this.#stopping ??= this.#stop();
    if (grace !== undefined) this.#abandonOn(grace, this.#stopping);
    return this.#stopping;
  }

  #abandonOn(grace: AbortSignal, stopping: Promise<void>): void {
    const abandon = this.#abandon;
    if (abandon.signal.aborted) return;
    if (grace.aborted) {
      abandon.abort(grace.reason);
      return;
    }
    const onAbort = (): void => abandon.abort(grace.reason);
    grace.addEventListener('abort', onAbort, { once: true });
    // A long-lived grace signal (the manager's) must not keep the listener once the stop is over.
    void stopping.then(() => grace.removeEventListener('abort', onAbort));
  }

  async #stop(): Promise<void> {
    this.#state = 'stopped';
    this.#starting.abort(new Error(`controller ${this.name} stopped`));
    for (const unregister of this.#unregister.splice(0)) unregister();
    const drained = this.queue.shutDownWithDrain().then(() => Promise.all(this.#workers));
    const abandon = this.#abandon.signal;
    const timeoutMs = this.#o.stopTimeoutMs ?? DEFAULT_STOP_TIMEOUT_MS;
    const timer =
      timeoutMs > 0 && Number.isFinite(timeoutMs)
        ? this.#clock.setTimeout(
            () =>
              this.#abandon.abort(
                new Error(
                  `controller ${this.name}: in-flight reconciles did not finish within ${timeoutMs}ms`,
                ),
              ),
            timeoutMs,
          )
        : undefined;
    let onAbandon: (() => void) | undefined;
    const abandoned = new Promise<true>((resolve) => {
      onAbandon = () => resolve(true);
      if (abandon.aborted) onAbandon();
      else abandon.addEventListener('abort', onAbandon, { once: true });
    });
    const gaveUp = await Promise.race([drained.then(() => false as const), abandoned]);
    this.#clock.clearTimeout(timer);
    if (onAbandon !== undefined) abandon.removeEventListener('abort', onAbandon);
    if (gaveUp) {
      const reason =
        abandon.reason instanceof Error ? abandon.reason : new Error(`controller ${this.name} stopping`);
      for (const ac of this.#inFlight) ac.abort(reason);
      this.#o.logger?.warn(
        { controller: this.name, inFlight: this.#inFlight.size, err: describeError(reason) },
        'controller stopped without waiting for in-flight reconciles',
      );
    }
    this.#o.logger?.info({ controller: this.name }, 'controller stopped');
  }

  // A method, so TypeScript does not narrow #state across the awaits in start().
  #stopped(): boolean {
    return this.#state === 'stopped';
  }

  #concurrency(): number {
    return Math.max(1, Math.floor(this.#o.maxConcurrentReconciles ?? 1));
  }

  #handlersFor(watch: Watch): EventHandlers<KubernetesObject> {
    const { map, predicate } = watch.options;
    const keysOf = (obj: KubernetesObject): readonly string[] => {
      if (map === undefined) return [objectKey(obj)];
      const keys = map(obj);
      return keys === undefined ? [] : typeof keys === 'string' ? [keys] : keys;
    };
    const enqueue = (keys: readonly string[]): void => {
      for (const key of keys) if (key !== '') this.queue.add(key);
    };
    return {
      onAdd: (obj) => {
        if (predicate === undefined || predicate(obj)) enqueue(keysOf(obj));
      },
      onUpdate: (old, obj) => {
        if (predicate !== undefined && !predicate(obj, old)) return;
        // Both: a mapping that changed (e.g. a label moved) must reach the old target too.
        enqueue([...new Set([...keysOf(old), ...keysOf(obj)])]);
      },
      onDelete: (obj) => {
        if (predicate === undefined || predicate(obj)) enqueue(keysOf(obj));
      },
    };
  }

  async #worker(): Promise<void> {
    for (;;) {
      const key = await this.queue.get();
      if (key === undefined) return;
      try {
        await this.#reconcileOne(key);
      } catch (err) {
        // #reconcileOne catches everything; this only guards against bugs in result handling.
        this.#o.logger?.error(
          { controller: this.name, key, err: describeError(err) },
          'reconcile handling failed',
        );
      } finally {
        this.queue.done(key);
      }
    }
  }

  async #reconcileOne(key: string): Promise<void> {
    const { namespace, name } = splitKey(key);
    const reconcileID = randomUUID();
    const log = this.#o.logger
      ? childLogger(this.#o.logger, { controller: this.name, namespace, name, reconcileID })
      : silentLogger();
    const ac = new AbortController();
    // Handed out just before stop() gave up waiting: start aborted rather than run unbounded.
    if (this.#abandon.signal.aborted) ac.abort(this.#abandon.signal.reason);
    this.#inFlight.add(ac);
    const timeoutMs = this.#o.reconcileTimeoutMs;
    let timedOut = false;
    let timer: Timer | undefined;
    if (timeoutMs !== undefined && timeoutMs > 0) {
      timer = this.#clock.setTimeout(() => {
        timedOut = true;
        ac.abort(new ReconcileTimeoutError(timeoutMs));
      }, timeoutMs);
    }
    const started = this.#clock.now();
    this.#metrics?.active.inc(this.#labels);
    let outcome: ReconcileOutcome;
    try {
      const returned = await this.#o.reconcile(key, { signal: ac.signal, log, reconcileID, namespace, name });
      outcome = classifyReconcile(returned);
    } catch (err) {
      outcome = classifyReconcile(undefined, err ?? new Error('reconcile threw a nullish value'));
    } finally {
      this.#clock.clearTimeout(timer);
      this.#inFlight.delete(ac);
      this.#metrics?.active.dec(this.#labels);
      this.#metrics?.time.observe(this.#labels, (this.#clock.now() - started) / 1000);
    }
    this.#metrics?.total.inc({ ...this.#labels, result: outcome.result });
    switch (outcome.result) {
      case 'error':
        this.#metrics?.errors.inc(this.#labels);
        if (timedOut) this.#metrics?.timeouts.inc(this.#labels);
        if (outcome.terminal) {
          this.#metrics?.terminalErrors.inc(this.#labels);
          // Not retried; forgetting also drops the item's backoff state (controller-runtime keeps it).
          this.queue.forget(key);
          log.error({ err: describeError(outcome.error) }, 'reconciler terminal error; not requeued');
        } else {
          const retryAfter = retryAfterSeconds(outcome.error);
          const retryAfterMs = retryAfter === undefined ? 0 : Math.min(retryAfter * 1000, MAX_RETRY_AFTER_MS);
          this.queue.addRateLimited(key, retryAfterMs);
          log.error(
            {
              err: describeError(outcome.error),
              retries: this.queue.numRequeues(key),
              ...(retryAfterMs > 0 ? { retryAfterMs } : {}),
            },
            'reconciler error; requeued with backoff',
          );
        }
        return;
      case 'requeue_after':
        this.queue.forget(key);
        this.queue.addAfter(key, outcome.afterMs);
        return;
      case 'requeue':
        this.queue.addRateLimited(key);
        return;
      case 'success':
        this.queue.forget(key);
        return;
    }
  }
}

let silent: Logger | undefined;
const silentLogger = (): Logger => {
  silent ??= createLogger({ level: 'silent' });
  return silent;
};

// ---- metrics (controller-runtime pkg/internal/controller/metrics/metrics.go) ----

/** controller-runtime's reconcile_time_seconds buckets (5 ms .. 60 s). */
export const RECONCILE_TIME_BUCKETS: readonly number[] = [
  0.005, 0.01, 0.025, 0.05, 0.1, 0.15, 0.2, 0.25, 0.3, 0.35, 0.4, 0.45, 0.5, 0.6, 0.7, 0.8, 0.9, 1.0, 1.25,
  1.5, 1.75, 2.0, 2.5, 3.0, 3.5, 4.0, 4.5, 5, 6, 7, 8, 9, 10, 15, 20, 25, 30, 40, 50, 60,
];

interface ControllerMetrics {
  total: Counter<'controller' | 'result'>;
  errors: Counter<'controller'>;
  terminalErrors: Counter<'controller'>;
  timeouts: Counter<'controller'>;
  time: Histogram<'controller'>;
  active: Gauge<'controller'>;
  maxConcurrent: Gauge<'controller'>;
}

const metricSets = new WeakMap<Registry, ControllerMetrics>();

function controllerMetrics(registry: Registry): ControllerMetrics {
  const cached = metricSets.get(registry);
  if (cached !== undefined) return cached;
  const set: ControllerMetrics = {
    total: getOrCreateCounter(registry, {
      name: 'controller_runtime_reconcile_total',
      help: 'Total number of reconciliations per controller',
      labelNames: ['controller', 'result'],
    }),
    errors: getOrCreateCounter(registry, {
      name: 'controller_runtime_reconcile_errors_total',
      help: 'Total number of reconciliation errors per controller',
      labelNames: ['controller'],
    }),
    terminalErrors: getOrCreateCounter(registry, {
      name: 'controller_runtime_terminal_reconcile_errors_total',
      help: 'Total number of terminal reconciliation errors per controller',
      labelNames: ['controller'],
    }),
    timeouts: getOrCreateCounter(registry, {
      name: 'controller_runtime_reconcile_timeouts_total',
      help: 'Total number of reconciliation timeouts per controller',
      labelNames: ['controller'],
    }),
    time: getOrCreateHistogram(registry, {
      name: 'controller_runtime_reconcile_time_seconds',
      help: 'Length of time per reconciliation per controller',
      labelNames: ['controller'],
      buckets: [...RECONCILE_TIME_BUCKETS],
    }),
    active: getOrCreateGauge(registry, {
      name: 'controller_runtime_active_workers',
      help: 'Number of currently used workers per controller',
      labelNames: ['controller'],
    }),
    maxConcurrent: getOrCreateGauge(registry, {
      name: 'controller_runtime_max_concurrent_reconciles',
      help: 'Maximum number of concurrent reconciles per controller',
      labelNames: ['controller'],
    }),
  };
  metricSets.set(registry, set);
  return set;
}
