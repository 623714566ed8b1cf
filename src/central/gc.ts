// TTL garbage collector (the Go `TTLEnforcer`): periodically tombstones leases expired for longer than
// a grace period, with compare-and-swap on the version seen at scan time, so a lease re-acquired in the
// meantime is never touched and any number of replicas can run it. Expiry is otherwise lazy.
import { type Clock, realClock, type Timer } from '../kube/clock.ts';
import type { Logger } from '../observability/logger.ts';
import { expiresAt, isTombstone, keyString, type LeaseRecord, tombstoneOf } from './record.ts';
import { isStoreConflict, type Store } from './store.ts';

export const DEFAULT_GC_INTERVAL_MS = 30_000;
export const DEFAULT_GC_GRACE_MS = 5 * 60_000;

/** Pure: whether the collector tombstones this record at `now`. */
export const isCollectable = (record: LeaseRecord, now: number, graceMs: number): boolean =>
  !isTombstone(record) && now > expiresAt(record) + graceMs;

export interface TtlCollectorOptions {
  store: Store;
  clock?: Clock;
  intervalMs?: number;
  graceMs?: number;
  logger?: Logger;
}

export interface SweepResult {
  collected: number;
  /** Records that changed between the scan and the write (left alone). */
  skipped: number;
}

export class TtlCollector {
  readonly #store: Store;
  readonly #clock: Clock;
  readonly #intervalMs: number;
  readonly #graceMs: number;
  readonly #logger: Logger | undefined;
  #timer: Timer | undefined;
  #running: Promise<SweepResult> | undefined;

  constructor(options: TtlCollectorOptions) {
    this.#store = options.store;
    this.#clock = options.clock ?? realClock;
    this.#intervalMs = options.intervalMs ?? DEFAULT_GC_INTERVAL_MS;
    this.#graceMs = options.graceMs ?? DEFAULT_GC_GRACE_MS;
    this.#logger = options.logger;
  }

  start(): void {
    if (this.#timer !== undefined) return;
    this.#timer = this.#clock.setInterval(() => {
      // One sweep at a time; a slow store skips ticks rather than piling them up.
      if (this.#running !== undefined) return;
      this.sweep().catch((err: unknown) => this.#logger?.error({ err }, 'lease TTL collection failed'));
    }, this.#intervalMs);
  }

  /** Stops the timer and waits for a sweep in progress. */
  async stop(): Promise<void> {
    this.#clock.clearTimeout(this.#timer);
    this.#timer = undefined;
    await this.#running?.catch(() => undefined);
  }

  /** One scan: tombstones every collectable record. */
  sweep(): Promise<SweepResult> {
    const run = this.#sweep().finally(() => {
      if (this.#running === run) this.#running = undefined;
    });
    this.#running = run;
    return run;
  }

  async #sweep(): Promise<SweepResult> {
    const records = await this.#store.list();
    const scannedAt = this.#clock.now();
    const result: SweepResult = { collected: 0, skipped: 0 };
    for (const record of records) {
      if (!isCollectable(record, scannedAt, this.#graceMs)) continue;
      try {
        await this.#store.put(record.version, tombstoneOf(record, this.#clock.now()));
        result.collected++;
        this.#logger?.info(
          { lease: keyString(record.key), fencingToken: record.fencingToken },
          'collected expired lease',
        );
      } catch (err) {
        if (!isStoreConflict(err)) throw err;
        result.skipped++;
      }
    }
    return result;
  }
}
