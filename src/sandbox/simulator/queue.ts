// A small client-go style work queue for the simulated controllers: keys are de-duplicated, one key is
// never reconciled twice at once (a key added while it runs is run again afterwards, or after its backoff
// when that run failed), failures are retried with per-key exponential backoff, and every timer is
// cleared on stop(). A reconcile can never surface as an unhandled rejection.

/** Reconciles one key; a number asks for another run after that many milliseconds. */
export type ReconcileFn = (key: string) => Promise<number | undefined>;

export interface QueueOptions {
  /** First retry delay after a failure; doubled per consecutive failure of the key. */
  retryBaseMs: number;
  /** Upper bound of the retry delay. */
  retryMaxMs: number;
  /** Told about every failed reconcile (never throws into the queue). */
  onError?: (key: string, error: unknown) => void;
}

export class WorkQueue {
  private readonly reconcile: ReconcileFn;
  private readonly options: QueueOptions;
  private readonly queued = new Set<string>();
  private readonly running = new Set<string>();
  private readonly dirty = new Set<string>();
  private readonly delayed = new Map<string, { at: number; timer: NodeJS.Timeout }>();
  private readonly failures = new Map<string, number>();
  private readonly inflight = new Set<Promise<void>>();
  private immediate: NodeJS.Immediate | undefined;
  private stopped = false;

  constructor(reconcile: ReconcileFn, options: QueueOptions) {
    this.reconcile = reconcile;
    this.options = options;
  }

  add(key: string): void {
    if (this.stopped) return;
    if (this.running.has(key)) {
      this.dirty.add(key);
      return;
    }
    if (this.queued.has(key)) return;
    this.queued.add(key);
    this.immediate ??= setImmediate(() => this.drain());
  }

  /** Adds the key after `ms`; an earlier pending delay for the same key wins. */
  addAfter(key: string, ms: number): void {
    if (this.stopped) return;
    if (ms <= 0) {
      this.add(key);
      return;
    }
    const at = performance.now() + ms;
    const existing = this.delayed.get(key);
    if (existing && existing.at <= at) return;
    if (existing) clearTimeout(existing.timer);
    const timer = setTimeout(() => {
      this.delayed.delete(key);
      this.add(key);
    }, ms);
    timer.unref();
    this.delayed.set(key, { at, timer });
  }

  /** Consecutive failures of a key (0 after a success). */
  failureCount(key: string): number {
    return this.failures.get(key) ?? 0;
  }

  /** Stops taking work, clears every timer and waits for the reconciles in flight. */
  async stop(): Promise<void> {
    this.stopped = true;
    if (this.immediate) clearImmediate(this.immediate);
    this.immediate = undefined;
    for (const { timer } of this.delayed.values()) clearTimeout(timer);
    this.delayed.clear();
    this.queued.clear();
    this.dirty.clear();
    await Promise.allSettled([...this.inflight]);
  }

  /** True when nothing is queued, running or waiting on a timer. */
  idle(): boolean {
    return this.queued.size === 0 && this.running.size === 0 && this.delayed.size === 0;
  }

  private drain(): void {
    this.immediate = undefined;
    const keys = [...this.queued];
    this.queued.clear();
    for (const key of keys) this.run(key);
  }

  private backoff(failures: number): number {
    const { retryBaseMs, retryMaxMs } = this.options;
    return Math.min(retryMaxMs, retryBaseMs * 2 ** Math.min(failures - 1, 30));
  }

  private run(key: string): void {
    if (this.stopped) return;
    this.running.add(key);
    const task = (async () => {
      let requeueMs: number | undefined;
      let failed = false;
      try {
        requeueMs = await this.reconcile(key);
        this.failures.delete(key);
      } catch (err) {
        failed = true;
        const failures = (this.failures.get(key) ?? 0) + 1;
        this.failures.set(key, failures);
        requeueMs = this.backoff(failures);
        try {
          this.options.onError?.(key, err);
        } catch {
          // a reporting hook must not break the queue
        }
      } finally {
        this.running.delete(key);
      }
      if (this.stopped) return;
      // After a failure the key waits for its backoff even when it changed meanwhile (often through the
      // failed reconcile's own status write), so that a failing key cannot spin.
      if (this.dirty.delete(key) && !failed) this.add(key);
      if (requeueMs !== undefined) this.addAfter(key, requeueMs);
    })();
    this.inflight.add(task);
    void task.finally(() => this.inflight.delete(task));
  }
}
