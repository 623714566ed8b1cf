// Injectable time. Every time-dependent decision (backoffs, grace periods, TTLs, lease expiry) takes a
// Clock so tests drive time with ManualClock instead of sleeping.

/** A scheduled callback; cancelling a timer that already fired is a no-op. */
export interface Timer {
  cancel(): void;
}

export interface Clock {
  /** Wall-clock milliseconds since the Unix epoch (`new Date(clock.now())` is meaningful). */
  now(): number;
  /** Runs `fn` once after `ms` (negative or NaN counts as 0). */
  setTimeout(fn: () => void, ms: number): Timer;
  /** Runs `fn` every `ms` (at least 1 ms) until cancelled. */
  setInterval(fn: () => void, ms: number): Timer;
  /** Same as `timer.cancel()`; accepts undefined so `clock.clearTimeout(this.timer)` needs no guard. */
  clearTimeout(timer: Timer | undefined): void;
  /** Resolves after `ms`; rejects with `signal.reason` if the signal aborts first. */
  sleep(ms: number, signal?: AbortSignal): Promise<void>;
}

const delayOf = (ms: number): number => (Number.isFinite(ms) && ms > 0 ? ms : 0);

// Node's setTimeout overflows (and fires at once) above 2^31-1 ms; long delays are chained instead.
const MAX_NODE_DELAY = 2_147_483_647;

function sleepWith(clock: Clock, ms: number, signal?: AbortSignal): Promise<void> {
  return new Promise<void>((resolve, reject) => {
    if (signal?.aborted) {
      reject(signal.reason);
      return;
    }
    const onAbort = (): void => {
      timer.cancel();
      reject(signal?.reason);
    };
    const timer = clock.setTimeout(() => {
      signal?.removeEventListener('abort', onAbort);
      resolve();
    }, ms);
    signal?.addEventListener('abort', onAbort, { once: true });
  });
}

/** The process clock, backed by Date.now and Node timers. */
export class RealClock implements Clock {
  now(): number {
    return Date.now();
  }

  setTimeout(fn: () => void, ms: number): Timer {
    let handle: NodeJS.Timeout | undefined;
    const due = Date.now() + delayOf(ms);
    const arm = (): void => {
      const remaining = due - Date.now();
      if (remaining > MAX_NODE_DELAY) {
        handle = globalThis.setTimeout(arm, MAX_NODE_DELAY);
      } else {
        handle = globalThis.setTimeout(fn, Math.max(0, remaining));
      }
    };
    arm();
    return { cancel: () => globalThis.clearTimeout(handle) };
  }

  setInterval(fn: () => void, ms: number): Timer {
    const handle = globalThis.setInterval(fn, Math.max(1, delayOf(ms)));
    return { cancel: () => globalThis.clearInterval(handle) };
  }

  clearTimeout(timer: Timer | undefined): void {
    timer?.cancel();
  }

  sleep(ms: number, signal?: AbortSignal): Promise<void> {
    return sleepWith(this, ms, signal);
  }
}

export const realClock: Clock = new RealClock();

interface ManualTimer {
  seq: number;
  due: number;
  fn: () => void;
  /** Repeat period for intervals, undefined for one-shot timers. */
  every: number | undefined;
}

/** 2026-01-01T00:00:00Z: a realistic default epoch so timestamps built from the clock look normal. */
export const MANUAL_CLOCK_DEFAULT_START = Date.UTC(2026, 0, 1);

/**
 * A clock that only moves when told to. `advance` fires due timers in due-time order (ties in
 * scheduling order), with `now()` equal to each timer's due time while it runs; timers scheduled by a
 * callback fire in the same advance if they fall inside the window.
 */
export class ManualClock implements Clock {
  #now: number;
  #seq = 0;
  #timers = new Set<ManualTimer>();

  constructor(start: number = MANUAL_CLOCK_DEFAULT_START) {
    this.#now = start;
  }

  now(): number {
    return this.#now;
  }

  setTimeout(fn: () => void, ms: number): Timer {
    return this.#schedule(fn, delayOf(ms), undefined);
  }

  setInterval(fn: () => void, ms: number): Timer {
    const every = Math.max(1, delayOf(ms));
    return this.#schedule(fn, every, every);
  }

  clearTimeout(timer: Timer | undefined): void {
    timer?.cancel();
  }

  sleep(ms: number, signal?: AbortSignal): Promise<void> {
    return sleepWith(this, ms, signal);
  }

  /** Number of timers still scheduled. */
  pending(): number {
    return this.#timers.size;
  }

  /** Due time of the earliest scheduled timer, if any. */
  nextDueAt(): number | undefined {
    return this.#next()?.due;
  }

  /** Moves time forward by `ms`, firing every timer that becomes due, synchronously. */
  advance(ms: number): void {
    const target = this.#now + delayOf(ms);
    for (let t = this.#next(); t !== undefined && t.due <= target; t = this.#next()) {
      this.#fire(t);
    }
    this.#now = target;
  }

  /**
   * Like `advance`, but lets promise chains and I/O callbacks run after each timer (and before
   * returning), so async loops driven by `sleep` get to schedule their next timer.
   */
  async advanceAsync(ms: number): Promise<void> {
    const target = this.#now + delayOf(ms);
    await flush();
    for (let t = this.#next(); t !== undefined && t.due <= target; t = this.#next()) {
      this.#fire(t);
      await flush();
    }
    this.#now = target;
  }

  /** Jumps to the earliest timer and fires it (and any due at the same instant). False if none. */
  runNext(): boolean {
    const t = this.#next();
    if (t === undefined) return false;
    this.advance(t.due - this.#now);
    return true;
  }

  #schedule(fn: () => void, delay: number, every: number | undefined): Timer {
    const timer: ManualTimer = { seq: this.#seq++, due: this.#now + delay, fn, every };
    this.#timers.add(timer);
    return {
      cancel: () => {
        this.#timers.delete(timer);
      },
    };
  }

  // Linear scan: tests hold a handful of timers, and this keeps cancellation trivially correct.
  #next(): ManualTimer | undefined {
    let best: ManualTimer | undefined;
    for (const t of this.#timers) {
      if (best === undefined || t.due < best.due || (t.due === best.due && t.seq < best.seq)) best = t;
    }
    return best;
  }

  #fire(t: ManualTimer): void {
    this.#now = Math.max(this.#now, t.due);
    if (t.every === undefined) {
      this.#timers.delete(t);
    } else {
      t.due += t.every;
      t.seq = this.#seq++;
    }
    t.fn();
  }
}

function flush(): Promise<void> {
  return new Promise((resolve) => setImmediate(resolve));
}
