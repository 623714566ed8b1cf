import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { ManualClock } from '../../../src/kube/clock.ts';
import {
  BucketRateLimiter,
  DEFAULT_MAX_DELAY_MS,
  defaultControllerRateLimiter,
  exponentialBackoff,
  ItemExponentialFailureRateLimiter,
  MaxOfRateLimiter,
  reserveToken,
} from '../../../src/kube/ratelimit.ts';

describe('ItemExponentialFailureRateLimiter', () => {
  it('doubles from 5 ms per failure and caps at 1000 s', () => {
    const limiter = new ItemExponentialFailureRateLimiter<string>(5, 1_000_000);
    const delays = Array.from({ length: 22 }, () => limiter.when('a'));
    expect(delays.slice(0, 6)).toEqual([5, 10, 20, 40, 80, 160]);
    expect(delays[17]).toBe(5 * 2 ** 17); // 655.36 s, the last uncapped step
    expect(delays.slice(18)).toEqual([1_000_000, 1_000_000, 1_000_000, 1_000_000]);
    expect(limiter.numRequeues('a')).toBe(22);
  });

  it('tracks items independently and forget() starts over', () => {
    const limiter = new ItemExponentialFailureRateLimiter<string>(5, 1_000_000);
    limiter.when('a');
    limiter.when('a');
    expect(limiter.when('b')).toBe(5);
    expect(limiter.numRequeues('a')).toBe(2);
    limiter.forget('a');
    expect(limiter.numRequeues('a')).toBe(0);
    expect(limiter.when('a')).toBe(5);
    expect(limiter.numRequeues('b')).toBe(1);
  });

  it('stays capped however many failures (no overflow to Infinity or NaN)', () => {
    expect(exponentialBackoff(5, 1_000_000, 2000)).toBe(1_000_000);
    fc.assert(
      fc.property(fc.integer({ min: 0, max: 5000 }), (failures) => {
        const d = exponentialBackoff(5, DEFAULT_MAX_DELAY_MS, failures);
        return d >= 5 && d <= DEFAULT_MAX_DELAY_MS && Number.isFinite(d);
      }),
    );
  });
});

describe('token bucket', () => {
  it('lets a burst through, then spaces requests at qps', () => {
    const clock = new ManualClock(0);
    const bucket = new BucketRateLimiter<string>(10, 100, clock);
    const burst = Array.from({ length: 100 }, (_, i) => bucket.when(`k${i}`));
    expect(burst.every((d) => d === 0)).toBe(true);
    expect(bucket.when('x')).toBeCloseTo(100);
    expect(bucket.when('y')).toBeCloseTo(200);
    expect(bucket.numRequeues('x')).toBe(0);
  });

  it('refills over time, up to the burst only', () => {
    const clock = new ManualClock(0);
    const bucket = new BucketRateLimiter<string>(10, 100, clock);
    for (let i = 0; i < 102; i++) bucket.when('k'); // balance -2
    clock.advance(1000); // +10 tokens -> 8
    const afterRefill = Array.from({ length: 9 }, () => bucket.when('k'));
    expect(afterRefill.slice(0, 8).every((d) => d === 0)).toBe(true);
    expect(afterRefill[8]).toBeCloseTo(100);
    clock.advance(3_600_000); // an hour refills to the burst, not beyond
    const again = Array.from({ length: 101 }, () => bucket.when('k'));
    expect(again.filter((d) => d > 0)).toHaveLength(1);
  });

  it('reserveToken is pure and never returns a negative delay', () => {
    fc.assert(
      fc.property(fc.array(fc.integer({ min: 0, max: 500 }), { maxLength: 300 }), (gaps) => {
        let state: ReturnType<typeof reserveToken>['state'] | undefined;
        let now = 0;
        for (const gap of gaps) {
          now += gap;
          const r = reserveToken(state, now, 10, 100);
          if (r.delayMs < 0 || r.state.tokens > 99) return false;
          state = r.state;
        }
        return true;
      }),
    );
  });
});

describe('defaultControllerRateLimiter', () => {
  it('is the max of per-item backoff and the overall bucket', () => {
    const clock = new ManualClock(0);
    const limiter = defaultControllerRateLimiter<string>(clock);
    // The first 100 distinct failures stay within the burst: only the 5 ms item backoff applies.
    for (let i = 0; i < 100; i++) expect(limiter.when(`k${i}`)).toBe(5);
    // The 101st waits for the bucket (100 ms) although its own backoff is only 5 ms.
    expect(limiter.when('k100')).toBeCloseTo(100);
    limiter.forget('k0');
    expect(limiter.numRequeues('k0')).toBe(0);
    expect(limiter.numRequeues('k1')).toBe(1);
  });

  it('MaxOf uses the slowest limiter and forwards forget', () => {
    const a = new ItemExponentialFailureRateLimiter<string>(1, 1000);
    const b = new ItemExponentialFailureRateLimiter<string>(7, 1000);
    const max = new MaxOfRateLimiter(a, b);
    expect(max.when('x')).toBe(7);
    expect(max.when('x')).toBe(14);
    max.forget('x');
    expect(a.numRequeues('x')).toBe(0);
    expect(b.numRequeues('x')).toBe(0);
  });
});
