import { describe, expect, it } from 'vitest';
import { RequestThrottle } from '../../../src/central/throttle.ts';
import { ManualClock } from '../../../src/kube/clock.ts';

describe('RequestThrottle', () => {
  it('lets a burst through, then spaces requests at qps, and refills while idle', () => {
    const clock = new ManualClock();
    const t = new RequestThrottle(10, 2, clock);
    expect([t.reserve(), t.reserve(), t.reserve(), t.reserve()]).toEqual([0, 0, 100, 200]);
    clock.advance(1_000);
    expect([t.reserve(), t.reserve(), t.reserve()]).toEqual([0, 0, 100]);
  });

  it('waits on the injected clock', async () => {
    const clock = new ManualClock();
    const t = new RequestThrottle(100, 1, clock);
    await t.wait();
    let done = false;
    const waiting = t.wait().then(() => {
      done = true;
    });
    await clock.advanceAsync(9);
    expect(done).toBe(false);
    await clock.advanceAsync(1);
    await waiting;
    expect(done).toBe(true);
    expect(t.waitedMs).toBe(10);
  });

  it('is unlimited with qps 0 and rejects nonsense', () => {
    const t = new RequestThrottle(0, 0, new ManualClock());
    expect(Array.from({ length: 100 }, () => t.reserve()).every((d) => d === 0)).toBe(true);
    expect(() => new RequestThrottle(-1, 1)).toThrow('qps');
    expect(() => new RequestThrottle(5, 0)).toThrow('burst');
  });
});
