// The helper's trace replay (docs/verification.md, "Trace replay on the real code"): random simulations of
// helper.pml, with the fault mixes of its property checks, replayed on the helper's real decisions and the
// central server's (helper-replay.ts). The code must decide as the model did and keep the invariant its
// at-most-once rests on, in every trace.
import { describe, expect, it } from 'vitest';
import { PROFILES } from '../../../verify/constants.ts';
import { HELPER_PROFILES, helperConfig } from '../../../verify/helper-constants.ts';
import { parseHelperTrace } from '../../../verify/helper-trace.ts';
import { pooled, requireSpin, simulate } from '../../../verify/spin.ts';
import { replayHelper } from './helper-replay.ts';

/** RESTART 2 (a restarted app waits for the lease) and 3 (the Pod restarts on a loss), as the checks. */
const MIXES: readonly (readonly string[])[] = [
  ['-DRESTART=2', '-DF_LOSS', '-DF_DELAY', '-DF_STALL', '-DFAULTS=4'],
  ['-DRESTART=2', '-DF_PART', '-DF_DELAY', '-DF_LOSS', '-DFAULTS=3', '-DNET=1'],
  ['-DRESTART=3', '-DF_LOSS', '-DF_DELAY', '-DF_STALL', '-DFAULTS=4'],
  ['-DRESTART=3', '-DF_PART', '-DF_DELAY', '-DF_LOSS', '-DFAULTS=3'],
];
const SEEDS_PER_MIX = 250;
const STEPS = 4000;

describe('helper.pml traces replayed on the real code', () => {
  it(`${MIXES.length * SEEDS_PER_MIX} traces: the helper decides as the model and keeps its invariant`, async () => {
    requireSpin();
    const { ttlSeconds, heartbeatSeconds } = HELPER_PROFILES[1];
    const config = helperConfig(ttlSeconds, heartbeatSeconds);
    const tickMs = PROFILES[0]!.tickMs;
    const jobs = MIXES.flatMap((mix, m) =>
      Array.from({ length: SEEDS_PER_MIX }, (_, i) => ({ mix, seed: m * 10_000 + i + 1 })),
    );
    const traces = await pooled(jobs, 2, (j) =>
      simulate('helper.pml', ['-DPROFILE=1', '-DSIM', ...j.mix], j.seed, STEPS),
    );
    let confirms = 0;
    let losses = 0;
    let starts = 0;
    for (const [i, lines] of traces.entries()) {
      const job = jobs[i]!;
      const restartPod = job.mix.includes('-DRESTART=3');
      try {
        const report = replayHelper(parseHelperTrace(lines), {
          config: { ...config, restartPodOnLoss: restartPod },
          tickMs,
          restartPod,
        });
        confirms += report.confirms;
        losses += report.losses;
        starts += report.starts;
      } catch (err) {
        throw new Error(
          `seed ${job.seed} (${job.mix.join(' ')}): ${err instanceof Error ? err.message : String(err)}`,
        );
      }
    }
    expect(traces.length).toBeGreaterThanOrEqual(1000);
    // The traces exercise the code: leases confirmed, lost, and apps started after losses.
    expect(confirms).toBeGreaterThan(traces.length * 5);
    expect(losses).toBeGreaterThan(traces.length / 2);
    expect(starts).toBeGreaterThan(traces.length);
  }, 240_000);
});
