// The trace replay of admission.pml (docs/verification.md, "Trace replay"): random simulations with the
// defaults, orphans, the stale replica and the lease caches, each replayed on the real webhook decisions
// (admission-replay.ts). The code must decide as the model did and keep its invariants in every trace.
import { describe, expect, it } from 'vitest';
import { parseAdmissionTrace } from '../../../verify/admission-trace.ts';
import { pooled, requireSpin, simulate } from '../../../verify/spin.ts';
import { replayAdmission } from './admission-replay.ts';

const MIXES: readonly (readonly string[])[] = [
  ['-DUSER=4'],
  ['-DORPHANS', '-DUSER=6'],
  ['-DSTALE', '-DLOSSES=2', '-DUSER=4'],
  ['-DCACHE', '-DORPHANS', '-DSTALE', '-DUSER=6'],
];
const SEEDS_PER_MIX = 250;
const STEPS = 3000;

/** The reviews the traces must contain, with the verdicts the model gives them. */
const EXPECTED: Record<string, 'both' | 'allowed' | 'denied'> = {
  'podcreate by user mutating': 'both',
  'podcreate by user validating': 'both',
  'podcreate by replicaset mutating': 'both',
  'podcreate by replicaset validating': 'both',
  'podungate by user validating': 'denied',
  'podungate by operator validating': 'allowed',
  'podungate by replica validating': 'both',
  'podadopt validating': 'denied',
  'rsadopt validating': 'allowed',
  'rsorphan validating': 'allowed',
  'deployupdate validating': 'both',
  'deploycreate mutating': 'allowed',
  'deploycreate validating': 'both',
};

describe('admission.pml traces replayed on the real webhook code', () => {
  it(`${MIXES.length * SEEDS_PER_MIX} traces: the code decides as the model and keeps its invariants`, async () => {
    requireSpin();
    const jobs = MIXES.flatMap((mix, m) =>
      Array.from({ length: SEEDS_PER_MIX }, (_, i) => ({ mix, seed: m * 10_000 + i + 1 })),
    );
    const traces = await pooled(jobs, 2, (j) => simulate('admission.pml', j.mix, j.seed, STEPS));
    const reviews: Record<string, [number, number]> = {};
    let ungates = 0;
    let recorded = 0;
    let gatedPods = 0;
    for (const [i, lines] of traces.entries()) {
      const job = jobs[i]!;
      const report = await replayAdmission(parseAdmissionTrace(lines)).catch((err: unknown) => {
        throw new Error(
          `seed ${job.seed} (${job.mix.join(' ')}): ${err instanceof Error ? err.message : String(err)}`,
        );
      });
      for (const [path, [allowed, denied]] of Object.entries(report.reviews)) {
        const [a, d] = reviews[path] ?? [0, 0];
        reviews[path] = [a + allowed, d + denied];
      }
      ungates += report.ungates;
      recorded += report.recorded;
      gatedPods += report.gatedPods;
    }
    expect(traces.length).toBeGreaterThanOrEqual(1000);
    // The traces do exercise every review, with each verdict the model gives it.
    const seen = Object.fromEntries(
      Object.entries(reviews).map(([path, [a, d]]) => [
        path,
        a > 0 && d > 0 ? 'both' : a > 0 ? 'allowed' : 'denied',
      ]),
    );
    expect(seen).toEqual(EXPECTED);
    expect(ungates).toBeGreaterThan(traces.length / 5);
    expect(gatedPods).toBeGreaterThan(traces.length / 2);
    expect(recorded).toBeGreaterThan(0);
  }, 240_000);
});
