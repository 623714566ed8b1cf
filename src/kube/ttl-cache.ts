// A bounded cache of answers that expire, for decisions asked of the API server (TokenReview,
// SubjectAccessReview): each value is kept for a TTL chosen from the value itself (an "allowed" longer
// than a "denied"), the least recently used entry goes when the cache is full, and concurrent callers
// asking for the same key share one load in flight. A failed load is not cached: the next caller tries
// again. Time comes from an injectable clock.
import { type Clock, realClock } from './clock.ts';

export interface TtlCacheOptions {
  /** At most this many entries (at least 1); the least recently used one is evicted first. */
  maxEntries: number;
  clock?: Clock;
}

interface Entry<V> {
  value: V;
  expiresAt: number;
}

export class TtlCache<V> {
  readonly #max: number;
  readonly #clock: Clock;
  /** Insertion order is recency order: a hit moves its entry to the end. */
  readonly #entries = new Map<string, Entry<V>>();
  readonly #inFlight = new Map<string, Promise<V>>();

  constructor(options: TtlCacheOptions) {
    this.#max = Math.max(1, Math.floor(options.maxEntries));
    this.#clock = options.clock ?? realClock;
  }

  get size(): number {
    return this.#entries.size;
  }

  /** The live value of `key`, if any (an expired one is dropped). */
  get(key: string): V | undefined {
    const entry = this.#entries.get(key);
    if (entry === undefined) return undefined;
    this.#entries.delete(key);
    if (this.#clock.now() >= entry.expiresAt) return undefined;
    this.#entries.set(key, entry);
    return entry.value;
  }

  /** Keeps `value` for `ttlMs` (nothing is kept for a TTL of 0 or less). */
  set(key: string, value: V, ttlMs: number): void {
    this.#entries.delete(key);
    if (!(ttlMs > 0)) return;
    if (this.#entries.size >= this.#max) this.#evict();
    this.#entries.set(key, { value, expiresAt: this.#clock.now() + ttlMs });
  }

  /**
   * The cached value of `key`, else the result of `load`, kept for `ttlOf(result)` ms. Callers that ask
   * while a load of the same key is in flight get its result (or its rejection) instead of a new load.
   */
  getOrLoad(key: string, load: () => Promise<V>, ttlOf: (value: V) => number): Promise<V> {
    const cached = this.get(key);
    if (cached !== undefined) return Promise.resolve(cached);
    const pending = this.#inFlight.get(key);
    if (pending !== undefined) return pending;
    // `load` runs on a later tick, so the promise is registered before it can settle.
    const loading = Promise.resolve()
      .then(load)
      .then(
        (value) => {
          this.#inFlight.delete(key);
          this.set(key, value, ttlOf(value));
          return value;
        },
        (err: unknown) => {
          this.#inFlight.delete(key);
          throw err;
        },
      );
    this.#inFlight.set(key, loading);
    return loading;
  }

  /** Drops the expired entries, and the least recently used one if none had expired. */
  #evict(): void {
    const now = this.#clock.now();
    for (const [key, entry] of this.#entries) if (now >= entry.expiresAt) this.#entries.delete(key);
    if (this.#entries.size < this.#max) return;
    const oldest = this.#entries.keys().next();
    if (!oldest.done) this.#entries.delete(oldest.value);
  }
}
