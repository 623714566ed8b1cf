// Requeue rate limiters with client-go's semantics (k8s.io/client-go/util/workqueue/default_rate_limiters.go).
// The arithmetic lives in pure functions; the classes only hold state and read the clock.
import { type Clock, realClock } from './clock.ts';

export interface RateLimiter<T> {
  /** Records one more failure of `item` and returns how long (ms) to wait before retrying it. */
  when(item: T): number;
  /** Stops tracking `item` (its backoff starts over). */
  forget(item: T): void;
  /** How many times `item` has been requeued through `when` since the last `forget`. */
  numRequeues(item: T): number;
}

/** `base * 2^failures`, capped at `max` (also when the power overflows to Infinity). */
export function exponentialBackoff(baseMs: number, maxMs: number, failures: number): number {
  const delay = baseMs * 2 ** failures;
  return Number.isFinite(delay) && delay < maxMs ? delay : maxMs;
}

/** Per-item exponential backoff: 1st failure waits `base`, then doubles up to `max`. */
export class ItemExponentialFailureRateLimiter<T> implements RateLimiter<T> {
  readonly #failures = new Map<T, number>();
  readonly #baseMs: number;
  readonly #maxMs: number;

  constructor(baseMs: number, maxMs: number) {
    this.#baseMs = baseMs;
    this.#maxMs = maxMs;
  }

  when(item: T): number {
    const failures = this.#failures.get(item) ?? 0;
    this.#failures.set(item, failures + 1);
    return exponentialBackoff(this.#baseMs, this.#maxMs, failures);
  }

  forget(item: T): void {
    this.#failures.delete(item);
  }

  numRequeues(item: T): number {
    return this.#failures.get(item) ?? 0;
  }
}

export interface TokenBucketState {
  /** May go negative: reservations beyond the burst are debts paid back at `qps`. */
  tokens: number;
  /** Clock time (ms) at which `tokens` was computed. */
  at: number;
}

/**
 * Reserves one token at `now` (golang.org/x/time/rate `Reserve().Delay()`): refill at `qps` up to
 * `burst`, take one, and wait until the balance would be back at zero. Every call consumes a token,
 * so a flood of requests is spread out at `qps` instead of all retrying at once.
 */
export function reserveToken(
  state: TokenBucketState | undefined,
  now: number,
  qps: number,
  burst: number,
): { state: TokenBucketState; delayMs: number } {
  const previous = state ?? { tokens: burst, at: now };
  const elapsed = Math.max(0, now - previous.at);
  const tokens = Math.min(burst, previous.tokens + (elapsed * qps) / 1000) - 1;
  const delayMs = tokens >= 0 ? 0 : (-tokens * 1000) / qps;
  return { state: { tokens, at: Math.max(now, previous.at) }, delayMs };
}

/** An overall token bucket shared by all items; it does not track items, so forget/numRequeues are no-ops. */
export class BucketRateLimiter<T> implements RateLimiter<T> {
  #state: TokenBucketState | undefined;
  readonly #qps: number;
  readonly #burst: number;
  readonly #clock: Clock;

  constructor(qps: number, burst: number, clock: Clock = realClock) {
    this.#qps = qps;
    this.#burst = burst;
    this.#clock = clock;
  }

  when(_item: T): number {
    const { state, delayMs } = reserveToken(this.#state, this.#clock.now(), this.#qps, this.#burst);
    this.#state = state;
    return delayMs;
  }

  forget(_item: T): void {}

  numRequeues(_item: T): number {
    return 0;
  }
}

/** Waits for the slowest of its limiters; every limiter records every failure. */
export class MaxOfRateLimiter<T> implements RateLimiter<T> {
  readonly #limiters: readonly RateLimiter<T>[];

  constructor(...limiters: RateLimiter<T>[]) {
    this.#limiters = limiters;
  }

  when(item: T): number {
    let delay = 0;
    for (const limiter of this.#limiters) delay = Math.max(delay, limiter.when(item));
    return delay;
  }

  forget(item: T): void {
    for (const limiter of this.#limiters) limiter.forget(item);
  }

  numRequeues(item: T): number {
    let n = 0;
    for (const limiter of this.#limiters) n = Math.max(n, limiter.numRequeues(item));
    return n;
  }
}

/** client-go DefaultControllerRateLimiter constants. */
export const DEFAULT_BASE_DELAY_MS = 5;
export const DEFAULT_MAX_DELAY_MS = 1_000_000;
export const DEFAULT_QPS = 10;
export const DEFAULT_BURST = 100;

/** Per-item 5 ms -> 1000 s exponential backoff, combined (max) with an overall 10 qps / burst 100 bucket. */
export function defaultControllerRateLimiter<T>(clock: Clock = realClock): RateLimiter<T> {
  return new MaxOfRateLimiter<T>(
    new ItemExponentialFailureRateLimiter<T>(DEFAULT_BASE_DELAY_MS, DEFAULT_MAX_DELAY_MS),
    new BucketRateLimiter<T>(DEFAULT_QPS, DEFAULT_BURST, clock),
  );
}
