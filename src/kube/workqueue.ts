// A work queue with client-go's semantics (k8s.io/client-go/util/workqueue): keys are de-duplicated
// while waiting, a key is never handed to two workers at once (an add during processing is served
// after `done`), delayed and rate-limited adds, and controller-runtime's workqueue_* metrics.
//
// Keys are compared with SameValueZero (Map semantics): use strings such as "namespace/name".
import type { Counter, Gauge, Histogram, Registry } from 'prom-client';
import {
  exponentialBuckets,
  getOrCreateCounter,
  getOrCreateGauge,
  getOrCreateHistogram,
} from '../observability/metrics.ts';
import { type Clock, realClock, type Timer } from './clock.ts';
import { defaultControllerRateLimiter, type RateLimiter } from './ratelimit.ts';

export interface WorkQueueOptions<T> {
  /** Queue name: the `name` and `controller` metric labels (controller-runtime uses the controller name for both). */
  name: string;
  clock?: Clock;
  /** Defaults to client-go's DefaultControllerRateLimiter (5 ms -> 1000 s per item, max with 10 qps / burst 100). */
  rateLimiter?: RateLimiter<T>;
  /** Registry for the workqueue_* metrics; without one the queue records none. */
  registry?: Registry;
}

export class WorkQueue<T = string> {
  readonly name: string;
  readonly #clock: Clock;
  readonly #limiter: RateLimiter<T>;
  readonly #metrics: QueueMetrics<T>;

  readonly #ready = new Fifo<T>();
  /** Items that need processing: waiting in `#ready`, or re-added while being processed. */
  readonly #dirty = new Set<T>();
  readonly #processing = new Set<T>();
  readonly #getters: Array<(item: T | undefined) => void> = [];
  readonly #delayed = new DelayHeap<T>();
  #delayTimer: Timer | undefined;
  #delayTimerAt = Number.POSITIVE_INFINITY;
  #shuttingDown = false;
  readonly #drainers: Array<() => void> = [];

  constructor(options: WorkQueueOptions<T>) {
    this.name = options.name;
    this.#clock = options.clock ?? realClock;
    this.#limiter = options.rateLimiter ?? defaultControllerRateLimiter<T>(this.#clock);
    this.#metrics =
      options.registry === undefined
        ? noMetrics
        : new PromQueueMetrics<T>(options.registry, options.name, this.#clock);
  }

  /** Marks `item` as needing processing. Ignored after shutdown. */
  add(item: T): void {
    if (this.#shuttingDown || this.#dirty.has(item)) return;
    this.#metrics.add(item);
    this.#dirty.add(item);
    // A worker holds it: `done` puts it back, so two workers never see the same key.
    if (this.#processing.has(item)) return;
    this.#enqueue(item);
  }

  /**
   * Adds `item` once `ms` have passed. A pending delayed add of the same item is kept if it is sooner,
   * replaced if this one is sooner. Counts as a retry (workqueue_retries_total), as in client-go.
   */
  addAfter(item: T, ms: number): void {
    if (this.#shuttingDown) return;
    this.#metrics.retry();
    if (!(ms > 0)) {
      this.add(item);
      return;
    }
    this.#delayed.pushOrAdvance(item, this.#clock.now() + ms);
    this.#armDelayTimer();
  }

  /**
   * Adds `item` after the rate limiter's delay, recording one more failure for it; no sooner than
   * `atLeastMs` (e.g. the Retry-After of a throttled request).
   */
  addRateLimited(item: T, atLeastMs = 0): void {
    if (this.#shuttingDown) return;
    this.addAfter(item, Math.max(this.#limiter.when(item), atLeastMs));
  }

  /** Resets `item`'s backoff (call after a successful reconcile). Does not remove a pending add. */
  forget(item: T): void {
    this.#limiter.forget(item);
  }

  numRequeues(item: T): number {
    return this.#limiter.numRequeues(item);
  }

  /**
   * The next item to process, waiting until one is available. Resolves `undefined` once the queue is
   * shutting down: queued items are then not handed out, only in-flight ones finish. The caller must
   * call `done(item)` when finished with it.
   */
  get(): Promise<T | undefined> {
    if (this.#shuttingDown) return Promise.resolve(undefined);
    const item = this.#ready.shift();
    if (item.found) {
      this.#take(item.value);
      return Promise.resolve(item.value);
    }
    return new Promise((resolve) => this.#getters.push(resolve));
  }

  /** Ends processing of `item`; if it was added meanwhile it is queued again. */
  done(item: T): void {
    if (!this.#processing.delete(item)) return;
    this.#metrics.done(item);
    // Re-added while in flight: queue it again (after shutdown it just waits, like other queued items).
    if (this.#dirty.has(item)) this.#enqueue(item);
    // Not `else`: an item re-added before shutdown is queued above but never handed out again, so the
    // drain must not wait for it (that wait never ended and hung Controller.stop()).
    if (this.#processing.size === 0) for (const resolve of this.#drainers.splice(0)) resolve();
  }

  /** Items ready to be handed out (not counting in-flight or delayed ones). */
  len(): number {
    return this.#ready.length;
  }

  isShuttingDown(): boolean {
    return this.#shuttingDown;
  }

  /** Stops accepting adds, drops delayed adds and releases every waiting `get()` with `undefined`. */
  shutDown(): void {
    if (this.#shuttingDown) return;
    this.#shuttingDown = true;
    this.#clock.clearTimeout(this.#delayTimer);
    this.#delayTimer = undefined;
    this.#delayed.clear();
    for (const resolve of this.#getters.splice(0)) resolve(undefined);
    this.#metrics.shutDown();
    if (this.#processing.size === 0) for (const resolve of this.#drainers.splice(0)) resolve();
  }

  /** `shutDown`, then resolves once every in-flight item is `done`. Callers bound the wait themselves. */
  shutDownWithDrain(): Promise<void> {
    const drained = new Promise<void>((resolve) => {
      if (this.#processing.size === 0) resolve();
      else this.#drainers.push(resolve);
    });
    this.shutDown();
    return drained;
  }

  #enqueue(item: T): void {
    const getter = this.#getters.shift();
    if (getter === undefined) {
      this.#ready.push(item);
      return;
    }
    this.#take(item);
    getter(item);
  }

  #take(item: T): void {
    this.#metrics.get(item);
    this.#processing.add(item);
    this.#dirty.delete(item);
  }

  // One timer, always armed for the earliest delayed item.
  #armDelayTimer(): void {
    const next = this.#delayed.peekTime();
    if (next === this.#delayTimerAt) return;
    this.#clock.clearTimeout(this.#delayTimer);
    this.#delayTimer = undefined;
    this.#delayTimerAt = next ?? Number.POSITIVE_INFINITY;
    if (next === undefined) return;
    this.#delayTimer = this.#clock.setTimeout(() => {
      this.#delayTimer = undefined;
      this.#delayTimerAt = Number.POSITIVE_INFINITY;
      const now = this.#clock.now();
      for (let due = this.#delayed.popDue(now); due.found; due = this.#delayed.popDue(now))
        this.add(due.value);
      this.#armDelayTimer();
    }, next - this.#clock.now());
  }
}

type Maybe<T> = { found: true; value: T } | { found: false };
const none: Maybe<never> = { found: false };

/** Array-backed FIFO with an advancing head; compacts when the dead prefix dominates. */
class Fifo<T> {
  #items: T[] = [];
  #head = 0;

  get length(): number {
    return this.#items.length - this.#head;
  }

  push(item: T): void {
    this.#items.push(item);
  }

  shift(): Maybe<T> {
    if (this.#head >= this.#items.length) return none;
    const value = this.#items[this.#head] as T;
    this.#head++;
    if (this.#head === this.#items.length) {
      this.#items = [];
      this.#head = 0;
    } else if (this.#head > 1024 && this.#head * 2 > this.#items.length) {
      this.#items = this.#items.slice(this.#head);
      this.#head = 0;
    }
    return { found: true, value };
  }
}

interface DelayEntry<T> {
  item: T;
  readyAt: number;
  seq: number;
  index: number;
}

/** Min-heap of delayed items by ready time (FIFO among equal times), at most one entry per item. */
class DelayHeap<T> {
  #heap: DelayEntry<T>[] = [];
  #byItem = new Map<T, DelayEntry<T>>();
  #seq = 0;

  pushOrAdvance(item: T, readyAt: number): void {
    const existing = this.#byItem.get(item);
    if (existing !== undefined) {
      if (readyAt < existing.readyAt) {
        existing.readyAt = readyAt;
        this.#up(existing.index);
      }
      return;
    }
    const entry: DelayEntry<T> = { item, readyAt, seq: this.#seq++, index: this.#heap.length };
    this.#heap.push(entry);
    this.#byItem.set(item, entry);
    this.#up(entry.index);
  }

  peekTime(): number | undefined {
    return this.#heap[0]?.readyAt;
  }

  popDue(now: number): Maybe<T> {
    const top = this.#heap[0];
    if (top === undefined || top.readyAt > now) return none;
    const last = this.#heap.pop() as DelayEntry<T>;
    if (last !== top) {
      last.index = 0;
      this.#heap[0] = last;
      this.#down(0);
    }
    this.#byItem.delete(top.item);
    return { found: true, value: top.item };
  }

  clear(): void {
    this.#heap = [];
    this.#byItem.clear();
  }

  #less(a: DelayEntry<T>, b: DelayEntry<T>): boolean {
    return a.readyAt < b.readyAt || (a.readyAt === b.readyAt && a.seq < b.seq);
  }

  #swap(i: number, j: number): void {
    const a = this.#heap[i] as DelayEntry<T>;
    const b = this.#heap[j] as DelayEntry<T>;
    this.#heap[i] = b;
    this.#heap[j] = a;
    a.index = j;
    b.index = i;
  }

  #up(i: number): void {
    while (i > 0) {
      const parent = (i - 1) >> 1;
      if (!this.#less(this.#heap[i] as DelayEntry<T>, this.#heap[parent] as DelayEntry<T>)) return;
      this.#swap(i, parent);
      i = parent;
    }
  }

  #down(i: number): void {
    for (;;) {
      const left = 2 * i + 1;
      const right = left + 1;
      let smallest = i;
      const at = (k: number): DelayEntry<T> => this.#heap[k] as DelayEntry<T>;
      if (left < this.#heap.length && this.#less(at(left), at(smallest))) smallest = left;
      if (right < this.#heap.length && this.#less(at(right), at(smallest))) smallest = right;
      if (smallest === i) return;
      this.#swap(i, smallest);
      i = smallest;
    }
  }
}

// ---- metrics (controller-runtime pkg/internal/metrics/workqueue.go) ----

interface QueueMetrics<T> {
  add(item: T): void;
  get(item: T): void;
  done(item: T): void;
  retry(): void;
  shutDown(): void;
}

const noMetrics: QueueMetrics<unknown> = {
  add() {},
  get() {},
  done() {},
  retry() {},
  shutDown() {},
};

/** prometheus.ExponentialBuckets(10e-9, 10, 12): 10 ns .. 1000 s, as controller-runtime registers them. */
export const WORKQUEUE_DURATION_BUCKETS: readonly number[] = exponentialBuckets(10e-9, 10, 12);

type QueueLabel = 'name' | 'controller';

interface WorkqueueMetricSet {
  depth: Gauge<QueueLabel | 'priority'>;
  adds: Counter<QueueLabel>;
  latency: Histogram<QueueLabel>;
  workDuration: Histogram<QueueLabel>;
  unfinished: Gauge<QueueLabel>;
  longestRunning: Gauge<QueueLabel>;
  retries: Counter<QueueLabel>;
  /** Live queues; the two in-progress gauges are computed from them at scrape time. */
  updaters: Set<() => void>;
}

const metricSets = new WeakMap<Registry, WorkqueueMetricSet>();

function workqueueMetrics(registry: Registry): WorkqueueMetricSet {
  const cached = metricSets.get(registry);
  if (cached !== undefined) return cached;
  const updaters = new Set<() => void>();
  const labelNames = ['name', 'controller'] as const;
  const collect = (): void => {
    for (const update of updaters) update();
  };
  const set: WorkqueueMetricSet = {
    depth: getOrCreateGauge(registry, {
      name: 'workqueue_depth',
      help: 'Current depth of workqueue by workqueue and priority',
      labelNames: ['name', 'controller', 'priority'],
    }),
    adds: getOrCreateCounter(registry, {
      name: 'workqueue_adds_total',
      help: 'Total number of adds handled by workqueue',
      labelNames,
    }),
    latency: getOrCreateHistogram(registry, {
      name: 'workqueue_queue_duration_seconds',
      help: 'How long in seconds an item stays in workqueue before being requested',
      labelNames,
      buckets: [...WORKQUEUE_DURATION_BUCKETS],
    }),
    workDuration: getOrCreateHistogram(registry, {
      name: 'workqueue_work_duration_seconds',
      help: 'How long in seconds processing an item from workqueue takes.',
      labelNames,
      buckets: [...WORKQUEUE_DURATION_BUCKETS],
    }),
    unfinished: getOrCreateGauge(registry, {
      name: 'workqueue_unfinished_work_seconds',
      help:
        "How many seconds of work has been done that is in progress and hasn't been observed by work_duration. " +
        'Large values indicate stuck threads. One can deduce the number of stuck threads by observing the rate at which this increases.',
      labelNames,
      collect,
    }),
    longestRunning: getOrCreateGauge(registry, {
      name: 'workqueue_longest_running_processor_seconds',
      help: 'How many seconds has the longest running processor for workqueue been running.',
      labelNames,
      collect,
    }),
    retries: getOrCreateCounter(registry, {
      name: 'workqueue_retries_total',
      help: 'Total number of retries handled by workqueue',
      labelNames,
    }),
    updaters,
  };
  metricSets.set(registry, set);
  return set;
}

class PromQueueMetrics<T> implements QueueMetrics<T> {
  readonly #m: WorkqueueMetricSet;
  readonly #labels: Record<QueueLabel, string>;
  readonly #clock: Clock;
  readonly #addedAt = new Map<T, number>();
  readonly #startedAt = new Map<T, number>();
  readonly #update = (): void => this.#updateUnfinished();
  #stopped = false;

  constructor(registry: Registry, name: string, clock: Clock) {
    this.#m = workqueueMetrics(registry);
    this.#labels = { name, controller: name };
    this.#clock = clock;
    // Export zeroes from the start so dashboards see the queue before its first add.
    this.#m.depth.set({ ...this.#labels, priority: '' }, 0);
    this.#m.adds.inc(this.#labels, 0);
    this.#m.retries.inc(this.#labels, 0);
    this.#m.latency.zero(this.#labels);
    this.#m.workDuration.zero(this.#labels);
    this.#m.updaters.add(this.#update);
  }

  add(item: T): void {
    this.#m.adds.inc(this.#labels);
    this.#m.depth.inc({ ...this.#labels, priority: '' });
    if (!this.#addedAt.has(item)) this.#addedAt.set(item, this.#clock.now());
  }

  get(item: T): void {
    this.#m.depth.dec({ ...this.#labels, priority: '' });
    const now = this.#clock.now();
    this.#startedAt.set(item, now);
    const addedAt = this.#addedAt.get(item);
    if (addedAt !== undefined) {
      this.#m.latency.observe(this.#labels, (now - addedAt) / 1000);
      this.#addedAt.delete(item);
    }
  }

  done(item: T): void {
    const startedAt = this.#startedAt.get(item);
    if (startedAt === undefined) return;
    this.#m.workDuration.observe(this.#labels, (this.#clock.now() - startedAt) / 1000);
    this.#startedAt.delete(item);
    if (this.#stopped) this.#retireIfIdle();
  }

  retry(): void {
    this.#m.retries.inc(this.#labels);
  }

  shutDown(): void {
    this.#stopped = true;
    this.#retireIfIdle();
  }

  // Keep reporting until in-flight work is done, then freeze at the final (zero) value and let the
  // queue be garbage-collected.
  #retireIfIdle(): void {
    if (this.#startedAt.size > 0) return;
    this.#updateUnfinished();
    this.#m.updaters.delete(this.#update);
  }

  #updateUnfinished(): void {
    const now = this.#clock.now();
    let total = 0;
    let longest = 0;
    for (const startedAt of this.#startedAt.values()) {
      const seconds = (now - startedAt) / 1000;
      total += seconds;
      longest = Math.max(longest, seconds);
    }
    this.#m.unfinished.set(this.#labels, total);
    this.#m.longestRunning.set(this.#labels, longest);
  }
}
