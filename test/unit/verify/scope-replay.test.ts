// The trace replay of scope.pml (docs/verification.md, "The scope replay"): random simulations with the
// switches of the scope's property checks (verify/runs.ts) and the defaults, each replayed on the real
// scope code (scope-replay.ts). The code must decide as the model did and keep every write of a managed
// chain reviewed, in every trace.
import { describe, expect, it } from 'vitest';
import { SCOPE_TICK_MS } from '../../../verify/constants.ts';
import { RUNS } from '../../../verify/runs.ts';
import { parseScopeTrace } from '../../../verify/scope-trace.ts';
import { pooled, requireSpin, simulate } from '../../../verify/spin.ts';
import { replayScope } from './scope-replay.ts';

/**
 * The defaults and the defines of every scope property check at the CI bound (PROFILE 1, a 2.5 s tick),
 * and the deeper bound's relist check (PROFILE 2, a 1.25 s tick: views lagging two ticks, writes one).
 */
const MIXES: readonly { profile: 1 | 2; defines: readonly string[] }[] = [
  { profile: 1, defines: [] },
  ...RUNS.filter((r) => r.model === 'scope.pml' && r.kind === 'property').map((r) => ({
    profile: 1 as const,
    defines: r.defines,
  })),
  { profile: 2, defines: ['-DHA', '-DHA_OP'] },
];
const SEEDS_PER_MIX = 200;
const STEPS = 3000;

/** The decisions the traces must contain, with the verdicts the model gives them ([yes, no]). */
const EXPECTED: Record<string, 'both' | 'yes' | 'no'> = {
  'berthlease-scope: a targeted BerthLease admitted': 'both',
  'namespace-scope: a user sets enabled or leaving': 'yes',
  "namespace-scope: a user's removal admitted": 'no',
  "a user's removal reviewed (else no guard yet)": 'both',
  'exit: the removal attempted': 'yes',
  'exit: the patch past its resourceVersion (else 409)': 'both',
  "namespace-scope: the exit's removal admitted": 'yes',
  'informer: relist (else a watch event)': 'both',
  'upgrade: the plan writes the guards': 'both',
  'upgrade: the plan narrows': 'both',
  'reconciler: the live GET before an activation in scope': 'yes',
  "reconciler: an Active lease stopped as the leader's informer shows the namespace out": 'yes',
  'workload write reviewed': 'both',
};
/** The guards' denials the traces must contain, by webhook and reason. */
const DENIALS = [
  'berthlease-scope out-of-scope',
  'berthlease-scope scope-leaving',
  'berthlease-scope scope-settling',
  'namespace-scope scope-exit',
];

describe('scope.pml traces replayed on the real scope code', () => {
  it(`${MIXES.length * SEEDS_PER_MIX} traces: the code decides as the model and keeps managed writes reviewed`, async () => {
    requireSpin();
    const jobs = MIXES.flatMap((mix, m) =>
      Array.from({ length: SEEDS_PER_MIX }, (_, i) => ({ ...mix, seed: m * 10_000 + i + 1 })),
    );
    const traces = await pooled(jobs, 2, (j) =>
      simulate('scope.pml', [`-DPROFILE=${j.profile}`, ...j.defines], j.seed, STEPS),
    );
    const decisions: Record<string, [number, number]> = {};
    const denials: Record<string, number> = {};
    let uncompared = 0;
    for (const [i, lines] of traces.entries()) {
      const job = jobs[i]!;
      const report = await replayScope(parseScopeTrace(lines), { tickMs: SCOPE_TICK_MS[job.profile] }).catch(
        (err: unknown) => {
          const mix = [`-DPROFILE=${job.profile}`, ...job.defines].join(' ');
          throw new Error(`seed ${job.seed} (${mix}): ${err instanceof Error ? err.message : String(err)}`);
        },
      );
      for (const [key, [yes, no]] of Object.entries(report.decisions)) {
        const [y, n] = decisions[key] ?? [0, 0];
        decisions[key] = [y + yes, n + no];
      }
      for (const [key, n] of Object.entries(report.denials)) denials[key] = (denials[key] ?? 0) + n;
      uncompared += report.uncompared;
    }
    expect(traces.length).toBeGreaterThanOrEqual(1000);
    const seen = Object.fromEntries(
      Object.entries(decisions).map(([key, [y, n]]) => [key, y > 0 && n > 0 ? 'both' : y > 0 ? 'yes' : 'no']),
    );
    expect(seen).toEqual(EXPECTED);
    expect(Object.keys(denials).sort()).toEqual(DENIALS);
    // Few plans go uncompared (the model's version window full when it would label).
    expect(uncompared).toBeLessThan(traces.length / 10);
  }, 240_000);
});
