// Process health over a soak run: event-loop delay (perf_hooks monitorEventLoopDelay), RSS and active
// handles (process.getActiveResourcesInfo()) sampled every few seconds, and the trend tests applied to
// them at the end.
import { monitorEventLoopDelay } from 'node:perf_hooks';
import { setFlagsFromString } from 'node:v8';
import { runInNewContext } from 'node:vm';

// A full GC before each memory sample, so the heap measured is what is still referenced: RSS alone
// rarely shrinks and mostly shows how far V8 let the heap grow. (The flag exposes `gc` to new contexts.)
setFlagsFromString('--expose-gc');
const fullGc = runInNewContext('gc') as () => void;

export interface Sample {
  /** Seconds since the sampler started. */
  t: number;
  rssMB: number;
  /** V8 heap in use right after a full GC. */
  heapMB: number;
  handles: number;
  /** p99 event-loop delay over the interval before this sample, ms. */
  lagP99Ms: number;
}

export interface Trend {
  first: number;
  last: number;
  /** Theil-Sen slope over the second half of the run, per minute. */
  slopePerMin: number;
  /** slopePerMin projected over the second half's duration. */
  secondHalfGrowth: number;
}

export interface HealthSummary {
  samples: number;
  /** Active resources by type at the end (what a handle trend is made of). */
  handleTypes: Record<string, number>;
  lag: { p50Ms: number; p99Ms: number; maxMs: number };
  rss: Trend;
  heap: Trend;
  handles: Trend;
}

const RESOLUTION_MS = 10;

export class Sampler {
  readonly samples: Sample[] = [];
  readonly #whole = monitorEventLoopDelay({ resolution: RESOLUTION_MS });
  readonly #interval = monitorEventLoopDelay({ resolution: RESOLUTION_MS });
  readonly #started = performance.now();
  #timer: NodeJS.Timeout | undefined;

  start(everyMs: number): void {
    this.#whole.enable();
    this.#interval.enable();
    this.#take();
    this.#timer = setInterval(() => this.#take(), everyMs);
  }

  stop(): HealthSummary {
    clearInterval(this.#timer);
    this.#take();
    this.#whole.disable();
    this.#interval.disable();
    const ms = (ns: number): number => Math.round(ns / 1e5) / 10;
    const handleTypes: Record<string, number> = {};
    for (const type of process.getActiveResourcesInfo()) handleTypes[type] = (handleTypes[type] ?? 0) + 1;
    return {
      samples: this.samples.length,
      handleTypes,
      lag: {
        p50Ms: ms(this.#whole.percentile(50)),
        p99Ms: ms(this.#whole.percentile(99)),
        maxMs: ms(this.#whole.max),
      },
      rss: trend(this.samples, (s) => s.rssMB),
      heap: trend(this.samples, (s) => s.heapMB),
      handles: trend(this.samples, (s) => s.handles),
    };
  }

  #take(): void {
    // The forced GC pause is ours, not the system's: it is kept out of the lag histograms.
    this.#whole.disable();
    this.#interval.disable();
    fullGc();
    this.#whole.enable();
    this.#interval.enable();
    const memory = process.memoryUsage();
    this.samples.push({
      t: Math.round((performance.now() - this.#started) / 100) / 10,
      rssMB: Math.round(memory.rss / 1e5) / 10,
      heapMB: Math.round(memory.heapUsed / 1e5) / 10,
      handles: process.getActiveResourcesInfo().length,
      lagP99Ms: Math.round(this.#interval.percentile(99) / 1e5) / 10,
    });
    this.#interval.reset();
  }
}

/**
 * Theil-Sen estimator: the median of the slopes between every pair of points. Unlike least squares it
 * ignores up to ~29% outliers, so a GC sawtooth or one burst of churn does not read as a trend.
 */
export function theilSen(points: ReadonlyArray<{ x: number; y: number }>): number {
  const slopes: number[] = [];
  for (let i = 0; i < points.length; i++)
    for (let j = i + 1; j < points.length; j++) {
      const a = points[i]!;
      const b = points[j]!;
      if (b.x !== a.x) slopes.push((b.y - a.y) / (b.x - a.x));
    }
  if (slopes.length === 0) return 0;
  slopes.sort((p, q) => p - q);
  const mid = slopes.length >> 1;
  return slopes.length % 2 === 1 ? slopes[mid]! : (slopes[mid - 1]! + slopes[mid]!) / 2;
}

function trend(samples: readonly Sample[], value: (s: Sample) => number): Trend {
  const half = samples.slice(Math.floor(samples.length / 2));
  const perSecond = theilSen(half.map((s) => ({ x: s.t, y: value(s) })));
  const span = half.length > 1 ? half[half.length - 1]!.t - half[0]!.t : 0;
  const round = (n: number): number => Math.round(n * 100) / 100;
  return {
    first: samples[0] === undefined ? 0 : value(samples[0]),
    last: samples.length === 0 ? 0 : value(samples[samples.length - 1]!),
    slopePerMin: round(perSecond * 60),
    secondHalfGrowth: round(perSecond * span),
  };
}

/**
 * Leak verdicts. A leak is a steady climb through the second half of the run (after warm-up: caches
 * filled, JIT done), so both conditions must hold: the robust slope is above a rate that steady churn
 * should not sustain, and the growth it implies over the second half is large relative to the level,
 * which keeps short runs and noisy steps from failing. Memory is judged on the heap after a full GC
 * (what is still referenced): > 2 MB/min and > 10% of its median level over the second half. Handles:
 * > 6/min and > 25% of their median level (at least 50) over the second half. Their level is not
 * flat even without a leak: client-node opens a connection per request (a fresh undici Agent each
 * time) and keeps it idle until its keep-alive timeout, so the count follows the recent request rate;
 * a real leak (a watch, socket or timer per reconcile) grows without bound, far past that. RSS is
 * reported, not judged: V8 grows it lazily and rarely gives it back. At least 8 samples in the second
 * half are needed.
 */
export function leaks(h: HealthSummary, samples: readonly Sample[]): string[] {
  const found: string[] = [];
  if (h.samples < 16) return found;
  const half = samples.slice(Math.floor(samples.length / 2));
  const median = (values: number[]): number => values.sort((a, b) => a - b)[values.length >> 1] ?? 0;
  const heapLevel = median(half.map((s) => s.heapMB));
  const handleLevel = median(half.map((s) => s.handles));
  if (h.heap.slopePerMin > 2 && h.heap.secondHalfGrowth > heapLevel * 0.1)
    found.push(
      `heap after GC grows ${h.heap.slopePerMin} MB/min over the second half (+${h.heap.secondHalfGrowth} MB on ${heapLevel} MB)`,
    );
  if (h.handles.slopePerMin > 6 && h.handles.secondHalfGrowth > Math.max(50, handleLevel * 0.25))
    found.push(
      `active handles grow ${h.handles.slopePerMin}/min over the second half (+${h.handles.secondHalfGrowth} on ${handleLevel})`,
    );
  return found;
}

/** Fails above 100 ms p99 event-loop delay over the whole run. */
export const LAG_P99_LIMIT_MS = 100;
