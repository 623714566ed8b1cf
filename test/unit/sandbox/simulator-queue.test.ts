// The simulator's work queue: de-duplication, per-key serialisation, backoff, requeue and stop.
import { afterEach, describe, expect, it } from 'vitest';
import { WorkQueue } from '../../../src/sandbox/simulator/queue.ts';
import { eventually } from '../../helpers/eventually.ts';

const queues: WorkQueue[] = [];
afterEach(async () => {
  await Promise.all(queues.splice(0).map((q) => q.stop()));
});

function queue(
  reconcile: (key: string) => Promise<number | undefined>,
  onError?: (key: string) => void,
): WorkQueue {
  const q = new WorkQueue(reconcile, {
    retryBaseMs: 5,
    retryMaxMs: 40,
    onError: onError && ((key) => onError(key)),
  });
  queues.push(q);
  return q;
}

/** A promise with its resolve function. */
function gate(): { promise: Promise<void>; open: () => void } {
  let open = (): void => {};
  const promise = new Promise<void>((resolve) => {
    open = resolve;
  });
  return { promise, open };
}

describe('WorkQueue', () => {
  it('runs a key added several times before it starts once', async () => {
    const runs: string[] = [];
    const q = queue(async (key) => {
      runs.push(key);
      return undefined;
    });
    q.add('a');
    q.add('a');
    q.add('b');
    await eventually(() => q.idle());
    expect(runs.sort()).toEqual(['a', 'b']);
  });

  it('never runs one key twice at once, and reruns a key added while it ran', async () => {
    const release = gate();
    let running = 0;
    let maxRunning = 0;
    let runs = 0;
    const q = queue(async () => {
      runs++;
      running++;
      maxRunning = Math.max(maxRunning, running);
      if (runs === 1) await release.promise;
      running--;
      return undefined;
    });
    q.add('k');
    await eventually(() => runs === 1);
    q.add('k');
    q.add('k');
    release.open();
    await eventually(() => runs === 2 && q.idle());
    expect(maxRunning).toBe(1);
  });

  it('retries a failing key with growing backoff and forgets the failures after a success', async () => {
    const times: number[] = [];
    const errors: string[] = [];
    const q = queue(
      async () => {
        times.push(performance.now());
        if (times.length < 4) throw new Error('boom');
        return undefined;
      },
      (key) => errors.push(key),
    );
    q.add('k');
    await eventually(() => times.length === 4 && q.idle());
    expect(errors).toEqual(['k', 'k', 'k']);
    const gaps = times.slice(1).map((t, i) => t - times[i]!);
    // 5, 10, 20 ms (timers may fire a millisecond early).
    expect(gaps[0]).toBeGreaterThanOrEqual(4);
    expect(gaps[2]).toBeGreaterThanOrEqual(19);
    expect(q.failureCount('k')).toBe(0);
  });

  it('holds a key that changed during a failed run until its backoff', async () => {
    const release = gate();
    const times: number[] = [];
    const q = new WorkQueue(
      async () => {
        times.push(performance.now());
        if (times.length === 1) {
          await release.promise;
          throw new Error('boom');
        }
        return undefined;
      },
      { retryBaseMs: 30, retryMaxMs: 30 },
    );
    queues.push(q);
    q.add('k');
    await eventually(() => times.length === 1);
    q.add('k');
    const failedAt = performance.now();
    release.open();
    await eventually(() => times.length === 2 && q.idle());
    expect(times[1]! - failedAt).toBeGreaterThanOrEqual(28);
  });

  it('runs a key again after the delay its reconcile asks for', async () => {
    let runs = 0;
    const q = queue(async () => (++runs < 3 ? 10 : undefined));
    q.add('k');
    await eventually(() => runs === 3 && q.idle());
    expect(runs).toBe(3);
  });

  it('stops: clears pending timers and waits for the reconciles in flight', async () => {
    const release = gate();
    let finished = false;
    const started: string[] = [];
    const q = new WorkQueue(
      async (key) => {
        started.push(key);
        if (key === 'slow') {
          await release.promise;
          finished = true;
        }
        return undefined;
      },
      { retryBaseMs: 5, retryMaxMs: 5 },
    );
    q.add('slow');
    q.addAfter('later', 30);
    await eventually(() => started.includes('slow'));
    const stopped = q.stop();
    release.open();
    await stopped;
    expect(finished).toBe(true);
    expect(q.idle()).toBe(true); // the 30 ms timer of 'later' is gone
    q.add('after-stop');
    q.addAfter('after-stop', 1);
    expect(q.idle()).toBe(true);
    expect(started).toEqual(['slow']);
  });
});
