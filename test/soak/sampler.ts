// Health over a soak run. The product processes (ProductSampler): each one's heap after a full GC, RSS,
// active handles and sockets, sampled from outside every few seconds (probe.ts) and judged at the end
// against LIMITS (limits.ts). The harness (Sampler, this process: the churn, the fault fronts and API
// proxies, the monitor): event-loop delay, RSS, heap after GC and handles, reported apart; only its
// event-loop delay is judged (it paces the churn), never its memory.
import { monitorEventLoopDelay } from 'node:perf_hooks';
import { setFlagsFromString } from 'node:v8';
import { runInNewContext } from 'node:vm';
import { LIMITS } from './limits.ts';
import type { ProcessProbe, ProcessSample } from './probe.ts';

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
      rss: trendOf(this.samples, (s) => s.rssMB),
      heap: trendOf(this.samples, (s) => s.heapMB),
      handles: trendOf(this.samples, (s) => s.handles),
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

/** The trend of one measure over a series of samples. */
export function trendOf<S extends { t: number }>(samples: readonly S[], value: (s: S) => number): Trend {
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

export interface ProcessSummary {
  samples: number;
  /** Median over the second half (after warm-up). */
  level: { rssMB: number; heapMB: number; handles: number; sockets: number };
  heap: Trend;
  rss: Trend;
  handles: Trend;
  sockets: Trend;
  /** Highest RSS seen. */
  peakRssMB: number;
  handleTypes: Record<string, number>;
  /** Restarts during the run (an operator exits on lost leadership); the figures are of the last process. */
  restarts?: number;
}

const median = (values: number[]): number => [...values].sort((a, b) => a - b)[values.length >> 1] ?? 0;

export function summarizeProcess(
  samples: readonly ProcessSample[],
  handleTypes: Record<string, number> = {},
): ProcessSummary {
  const half = samples.slice(Math.floor(samples.length / 2));
  return {
    samples: samples.length,
    level: {
      rssMB: median(half.map((s) => s.rssMB)),
      heapMB: median(half.map((s) => s.heapMB)),
      handles: median(half.map((s) => s.handles)),
      sockets: median(half.map((s) => s.sockets)),
    },
    heap: trendOf(samples, (s) => s.heapMB),
    rss: trendOf(samples, (s) => s.rssMB),
    handles: trendOf(samples, (s) => s.handles),
    sockets: trendOf(samples, (s) => s.sockets),
    peakRssMB: Math.max(0, ...samples.map((s) => s.rssMB)),
    handleTypes,
  };
}

/** The memory verdicts on one product process (LIMITS); empty when it passes or the run is too short. */
export function judgeProcess(name: string, p: ProcessSummary): string[] {
  const found: string[] = [];
  if (p.samples - Math.floor(p.samples / 2) < LIMITS.minSecondHalfSamples) return found;
  if (p.heap.slopePerMin > LIMITS.heapSlopeMBPerMin)
    found.push(
      `${name}: heap after GC grows ${p.heap.slopePerMin} MB/min over the second half (limit ${LIMITS.heapSlopeMBPerMin}; +${p.heap.secondHalfGrowth} MB on ${p.level.heapMB} MB)`,
    );
  if (Math.abs(p.rss.secondHalfGrowth) > p.level.rssMB * LIMITS.rssFlatFraction)
    found.push(
      `${name}: RSS moves ${p.rss.secondHalfGrowth} MB over the second half, more than ${LIMITS.rssFlatFraction * 100} % of ${p.level.rssMB} MB`,
    );
  for (const [what, trend, level] of [
    ['active handles', p.handles, p.level.handles],
    ['sockets', p.sockets, p.level.sockets],
  ] as const) {
    const bound = Math.max(LIMITS.countFlatFloor, level * LIMITS.countFlatFraction);
    if (trend.secondHalfGrowth > bound)
      found.push(
        `${name}: ${what} grow +${trend.secondHalfGrowth} over the second half (on ${level}; bound ${bound})`,
      );
  }
  return found;
}

/**
 * Samples every product process every few seconds (one after the other, each a full GC of its own).
 * A sample that fails (the process is busy past the timeout, or gone) is counted, not fatal.
 */
export class ProductSampler {
  readonly series: Record<string, ProcessSample[]> = {};
  readonly errors: Record<string, number> = {};
  /** Per process, the index in `series` where its current process began (after a restart). */
  readonly #since: Record<string, number> = {};
  /** Restarts per process. */
  readonly restarts: Record<string, number> = {};
  readonly #probes: readonly ProcessProbe[];
  readonly #t0: number;
  #timer: NodeJS.Timeout | undefined;
  #running: Promise<void> = Promise.resolve();
  #stopped = false;

  readonly #log: (line: string) => void;

  constructor(
    probes: readonly ProcessProbe[],
    log: (line: string) => void = () => {},
    t0 = performance.now(),
  ) {
    this.#probes = probes;
    this.#log = log;
    this.#t0 = t0;
    for (const p of probes) this.series[p.name] = [];
  }

  start(everyMs: number): void {
    const tick = (): void => {
      if (this.#stopped) return;
      this.#running = this.#take().finally(() => {
        if (!this.#stopped) this.#timer = setTimeout(tick, everyMs);
      });
    };
    tick();
  }

  async #take(): Promise<void> {
    for (const probe of this.#probes) {
      const t = Math.round((performance.now() - this.#t0) / 100) / 10;
      try {
        this.series[probe.name]?.push(await probe.sample(t));
      } catch (err) {
        const count = (this.errors[probe.name] ?? 0) + 1;
        this.errors[probe.name] = count;
        if (count === 1 || count % 10 === 0)
          this.#log(
            `soak: sample of ${probe.name} failed (${count} so far): ${(err as Error).message}; ${await probe.state()}`,
          );
      }
    }
  }

  /** The process of that name was restarted: its trend is judged on the new process's samples only. */
  restarted(name: string): void {
    this.#since[name] = this.series[name]?.length ?? 0;
    this.restarts[name] = (this.restarts[name] ?? 0) + 1;
  }

  /** Stops after a last sample; the summaries by process (of the current process of each name). */
  async stop(): Promise<Record<string, ProcessSummary>> {
    this.#stopped = true;
    clearTimeout(this.#timer);
    await this.#running;
    await this.#take();
    const out: Record<string, ProcessSummary> = {};
    for (const probe of this.#probes) {
      const types = await probe.handleTypes().catch(() => ({}));
      const samples = (this.series[probe.name] ?? []).slice(this.#since[probe.name] ?? 0);
      out[probe.name] = { ...summarizeProcess(samples, types), restarts: this.restarts[probe.name] ?? 0 };
    }
    return out;
  }
}
