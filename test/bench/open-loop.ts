// An open-loop load generator: request i is sent at start + i / rate whatever happened to the earlier
// ones (a closed loop would slow down with the server and hide its queueing). Latency is the client's
// round trip from the moment the request was sent; how late the sends were against their schedule (this
// process's event loop on a shared machine) is reported beside it, so a late generator can be told from
// a slow server.

export interface OpenLoopOptions {
  /** Requests per second. */
  rate: number;
  /** Measured seconds, after the warm-up. */
  seconds: number;
  /** Seconds at the same rate before the measured window (connections, caches), not counted. */
  warmupSeconds: number;
}

export interface OpenLoopResult {
  /** Round trips of the measured requests that succeeded, ms, sorted. */
  latenciesMs: number[];
  sent: number;
  errors: number;
  firstError: string | undefined;
  /** Measured requests sent per second of window (the schedule's rate unless the generator fell behind). */
  achievedRate: number;
  /** p99 and max of send time minus scheduled time, ms. */
  sendLagP99Ms: number;
  sendLagMaxMs: number;
}

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/** Nearest-rank percentile of sorted values (NaN when empty). */
export function percentile(sorted: readonly number[], p: number): number {
  if (sorted.length === 0) return Number.NaN;
  const rank = Math.ceil((p / 100) * sorted.length);
  return sorted[Math.min(sorted.length, Math.max(1, rank)) - 1]!;
}

/** Runs `send(i)` on the schedule; resolves when every request has been answered or has failed. */
export async function openLoop(
  o: OpenLoopOptions,
  send: (i: number) => Promise<void>,
): Promise<OpenLoopResult> {
  const warmup = Math.round(o.rate * o.warmupSeconds);
  const total = warmup + Math.round(o.rate * o.seconds);
  const latencies: number[] = [];
  const lags: number[] = [];
  const pending: Promise<void>[] = [];
  let errors = 0;
  let firstError: string | undefined;
  const start = performance.now();
  let firstMeasured = Number.NaN;
  let lastMeasured = Number.NaN;
  for (let i = 0; i < total; i++) {
    const due = start + (i * 1000) / o.rate;
    const wait = due - performance.now();
    if (wait > 1) await sleep(wait);
    const sentAt = performance.now();
    const measured = i >= warmup;
    if (measured) {
      lags.push(Math.max(0, sentAt - due));
      if (Number.isNaN(firstMeasured)) firstMeasured = sentAt;
      lastMeasured = sentAt;
    }
    pending.push(
      send(i).then(
        () => {
          if (measured) latencies.push(performance.now() - sentAt);
        },
        (err: unknown) => {
          if (!measured) return;
          errors++;
          firstError ??= err instanceof Error ? err.message : String(err);
        },
      ),
    );
  }
  await Promise.all(pending);
  latencies.sort((a, b) => a - b);
  lags.sort((a, b) => a - b);
  const measured = total - warmup;
  const span = (lastMeasured - firstMeasured) / 1000;
  return {
    latenciesMs: latencies,
    sent: measured,
    errors,
    firstError,
    achievedRate: span > 0 ? (measured - 1) / span : Number.NaN,
    sendLagP99Ms: percentile(lags, 99),
    sendLagMaxMs: lags.at(-1) ?? Number.NaN,
  };
}
