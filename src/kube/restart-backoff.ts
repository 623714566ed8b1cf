// The informer's restart backoff: jittered exponential delays (1 s -> 30 s by default), never shorter than
// a server's Retry-After. Pure: the caller supplies the random number.
import { exponentialBackoff } from './ratelimit.ts';

export interface BackoffPolicy {
  /** First delay (default 1000 ms). */
  initialMs: number;
  /** Cap (default 30 000 ms). */
  maxMs: number;
  /** Spread as a fraction of the delay, 0..1 (default 0.2: ±10 %). */
  jitter: number;
}

export const DEFAULT_BACKOFF: BackoffPolicy = { initialMs: 1000, maxMs: 30_000, jitter: 0.2 };

/**
 * Delay before retry number `failures` (1 = first failure): `initial * 2^(failures-1)` capped at
 * `max`, spread by ±jitter/2 so many informers failing together do not retry in lock-step, and never
 * shorter than a server's Retry-After.
 */
export function restartDelay(
  failures: number,
  policy: BackoffPolicy,
  random: number,
  retryAfterMs?: number,
): number {
  const base = exponentialBackoff(policy.initialMs, policy.maxMs, Math.max(0, failures - 1));
  const jittered = base * (1 - policy.jitter / 2 + policy.jitter * random);
  return Math.round(Math.max(jittered, retryAfterMs ?? 0));
}
