import { afterEach, describe, expect, it, vi } from 'vitest';
import { MANUAL_CLOCK_DEFAULT_START, ManualClock, RealClock } from '../../../src/kube/clock.ts';

describe('ManualClock', () => {
  it('starts at a realistic epoch and only moves when advanced', () => {
    const clock = new ManualClock();
    expect(clock.now()).toBe(MANUAL_CLOCK_DEFAULT_START);
    expect(new Date(clock.now()).toISOString()).toBe('2026-01-01T00:00:00.000Z');
    clock.advance(1500);
    expect(clock.now()).toBe(MANUAL_CLOCK_DEFAULT_START + 1500);
  });

  it('fires timers in due order, with now() at each due time', () => {
    const clock = new ManualClock(0);
    const fired: Array<[string, number]> = [];
    clock.setTimeout(() => fired.push(['c', clock.now()]), 300);
    clock.setTimeout(() => fired.push(['a', clock.now()]), 100);
    clock.setTimeout(() => fired.push(['b', clock.now()]), 100);
    clock.advance(99);
    expect(fired).toEqual([]);
    clock.advance(150);
    expect(fired).toEqual([
      ['a', 100],
      ['b', 100],
    ]);
    expect(clock.now()).toBe(249);
    expect(clock.nextDueAt()).toBe(300);
    clock.advance(51);
    expect(fired.at(-1)).toEqual(['c', 300]);
    expect(fired.map(([n]) => n)).toEqual(['a', 'b', 'c']);
    expect(clock.pending()).toBe(0);
  });

  it('fires timers scheduled by a callback inside the same window, and not those beyond it', () => {
    const clock = new ManualClock(0);
    const fired: number[] = [];
    clock.setTimeout(() => {
      fired.push(clock.now());
      clock.setTimeout(() => fired.push(clock.now()), 50);
      clock.setTimeout(() => fired.push(clock.now()), 500);
    }, 10);
    clock.advance(100);
    expect(fired).toEqual([10, 60]);
    expect(clock.pending()).toBe(1);
  });

  it('cancels timers, via cancel() or clearTimeout()', () => {
    const clock = new ManualClock(0);
    const fn = vi.fn();
    const t1 = clock.setTimeout(fn, 10);
    const t2 = clock.setTimeout(fn, 20);
    t1.cancel();
    clock.clearTimeout(t2);
    clock.clearTimeout(undefined);
    clock.advance(100);
    expect(fn).not.toHaveBeenCalled();
  });

  it('repeats intervals until cancelled', () => {
    const clock = new ManualClock(0);
    const at: number[] = [];
    const timer = clock.setInterval(() => {
      at.push(clock.now());
      if (at.length === 3) timer.cancel();
    }, 100);
    clock.advance(1000);
    expect(at).toEqual([100, 200, 300]);
  });

  it('runNext jumps straight to the next timer', () => {
    const clock = new ManualClock(0);
    const fn = vi.fn();
    clock.setTimeout(fn, 1_000_000);
    expect(clock.runNext()).toBe(true);
    expect(fn).toHaveBeenCalledOnce();
    expect(clock.now()).toBe(1_000_000);
    expect(clock.runNext()).toBe(false);
  });

  it('sleep resolves on advance and rejects on abort', async () => {
    const clock = new ManualClock(0);
    let woke = false;
    const sleeping = clock.sleep(1000).then(() => {
      woke = true;
    });
    clock.advance(999);
    await Promise.resolve();
    expect(woke).toBe(false);
    clock.advance(1);
    await sleeping;
    expect(woke).toBe(true);

    const controller = new AbortController();
    const aborted = clock.sleep(1000, controller.signal);
    controller.abort(new Error('stop'));
    await expect(aborted).rejects.toThrow('stop');
    expect(clock.pending()).toBe(0);
    await expect(clock.sleep(5, controller.signal)).rejects.toThrow('stop');
  });

  it('advanceAsync lets an async loop schedule its next sleep', async () => {
    const clock = new ManualClock(0);
    const ticks: number[] = [];
    const loop = (async () => {
      for (let i = 0; i < 5; i++) {
        await clock.sleep(100);
        ticks.push(clock.now());
      }
    })();
    await clock.advanceAsync(350);
    expect(ticks).toEqual([100, 200, 300]);
    await clock.advanceAsync(200);
    await loop;
    expect(ticks).toEqual([100, 200, 300, 400, 500]);
  });
});

describe('RealClock', () => {
  afterEach(() => {
    vi.useRealTimers();
  });

  it('chains delays beyond Node’s 2^31-1 ms timer limit instead of firing at once', () => {
    vi.useFakeTimers();
    const clock = new RealClock();
    const fn = vi.fn();
    clock.setTimeout(fn, 2 ** 31 + 10);
    vi.advanceTimersByTime(2 ** 31 - 1);
    expect(fn).not.toHaveBeenCalled();
    vi.advanceTimersByTime(11);
    expect(fn).toHaveBeenCalledOnce();
  });

  it('schedules, cancels and sleeps with real timers', async () => {
    vi.useFakeTimers();
    const clock = new RealClock();
    const fn = vi.fn();
    const interval = clock.setInterval(fn, 10);
    const cancelled = vi.fn();
    clock.clearTimeout(clock.setTimeout(cancelled, 5));
    vi.advanceTimersByTime(35);
    interval.cancel();
    vi.advanceTimersByTime(100);
    expect(fn).toHaveBeenCalledTimes(3);
    expect(cancelled).not.toHaveBeenCalled();
    expect(clock.now()).toBe(Date.now());

    const slept = clock.sleep(50);
    vi.advanceTimersByTime(50);
    await slept;
    const controller = new AbortController();
    const aborted = clock.sleep(50, controller.signal);
    controller.abort(new Error('bye'));
    await expect(aborted).rejects.toThrow('bye');
  });
});
