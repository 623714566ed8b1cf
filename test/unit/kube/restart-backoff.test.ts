import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { DEFAULT_BACKOFF, restartDelay } from '../../../src/kube/restart-backoff.ts';

describe('restartDelay', () => {
  it('doubles from 1 s to a 30 s cap without jitter at random=0.5', () => {
    const delays = [1, 2, 3, 4, 5, 6, 7, 8].map((n) => restartDelay(n, DEFAULT_BACKOFF, 0.5));
    expect(delays).toEqual([1000, 2000, 4000, 8000, 16_000, 30_000, 30_000, 30_000]);
  });

  it('spreads each delay by ±jitter/2 and never waits less than Retry-After', () => {
    expect(restartDelay(1, DEFAULT_BACKOFF, 0)).toBe(900);
    expect(restartDelay(1, DEFAULT_BACKOFF, 0.999999)).toBe(1100);
    expect(restartDelay(6, DEFAULT_BACKOFF, 0.999999)).toBe(33_000);
    expect(restartDelay(1, DEFAULT_BACKOFF, 0.5, 7000)).toBe(7000);
    fc.assert(
      fc.property(
        fc.integer({ min: 1, max: 60 }),
        fc.double({ min: 0, max: 1, maxExcluded: true, noNaN: true }),
        (n, r) => {
          const d = restartDelay(n, DEFAULT_BACKOFF, r);
          return d >= 900 && d <= 33_000;
        },
      ),
    );
  });
});
