// The trace replay (docs/verification.md, "Trace replay"): traces of lease.pml's random simulation, with
// every kind of fault the replay covers, are replayed on the real reconciler, ManagedWorkloads and
// central LeaseManager (lease-replay.ts). The code must decide as the model did and keep the model's
// invariants, in every trace. At least 1,000 traces per run (issue "At-most-once, model-checked").
import { describe, expect, it } from 'vitest';
import { PROFILES } from '../../../verify/constants.ts';
import { pooled, requireSpin, simulate } from '../../../verify/spin.ts';
import { parseTrace } from '../../../verify/trace.ts';
import { replayLease } from './lease-replay.ts';

/** The fault mixes of the simulated traces (the hand-over is not replayed: it runs on real timers). */
const MIXES: readonly (readonly string[])[] = [
  ['-DF_LOSS', '-DF_DUP', '-DF_STALL', '-DF_DELAY', '-DDELAY=2', '-DFAULTS=4', '-DDELETES=1', '-DOFFSET=1'],
  // Pods that take long to stop: their stop is bounded by the grace the code's DELETE gives them.
  ['-DF_PART', '-DF_DELAY', '-DF_LOSS', '-DFAULTS=3', '-DOFFSET=2', '-DNET=1', '-DT_TERM=30'],
  ['-DF_CRASH', '-DF_DELAY', '-DF_DUP', '-DFAULTS=3', '-DDELETES=1', '-DOFFSET=1'],
  ['-DF_CUT', '-DF_PART', '-DF_STALL', '-DF_DELAY', '-DFAULTS=4', '-DCRASHES=1', '-DF_CRASH', '-DNET=1'],
];
const SEEDS_PER_MIX = 250;
const STEPS = 2500;

describe('lease.pml traces replayed on the real code', () => {
  it(`${MIXES.length * SEEDS_PER_MIX} traces: the code decides as the model and keeps its invariants`, async () => {
    requireSpin();
    const profile = PROFILES[0]!;
    const jobs = MIXES.flatMap((mix, m) =>
      Array.from({ length: SEEDS_PER_MIX }, (_, i) => ({ mix, seed: m * 10_000 + i + 1 })),
    );
    const traces = await pooled(jobs, 2, (j) => simulate('lease.pml', ['-DSIM', ...j.mix], j.seed, STEPS));
    let events = 0;
    let ungates = 0;
    let graces = 0;
    for (const [i, lines] of traces.entries()) {
      const job = jobs[i]!;
      const report = await replayLease(parseTrace(lines), {
        ttlSeconds: profile.ttlSeconds,
        heartbeatSeconds: profile.heartbeatSeconds,
        stopLeadMs: profile.stopLeadMs,
        tickMs: profile.tickMs,
      }).catch((err: unknown) => {
        throw new Error(
          `seed ${job.seed} (${job.mix.join(' ')}): ${err instanceof Error ? err.message : String(err)}`,
        );
      });
      events += report.events;
      ungates += report.ungates;
      graces += report.graces;
    }
    expect(traces.length).toBeGreaterThanOrEqual(1000);
    // The traces do exercise the code: Pods are permitted in them.
    expect(ungates).toBeGreaterThan(traces.length / 2);
    expect(events).toBeGreaterThan(traces.length * 20);
    // Running Pods are stopped in them, with the grace the model bounds their stop by.
    expect(graces).toBeGreaterThan(traces.length / 10);
  }, 240_000);
});
