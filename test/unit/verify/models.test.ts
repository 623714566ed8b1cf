// The model checks at the CI bounds (docs/verification.md): every property run must verify with 0
// errors over a complete search, and every hole, finding and teeth run must yield a counterexample, so
// each check can fail. Counterexamples of the runs marked `replay` are replayed on the real code
// (lenient: the environment of the trace, the code's own decisions): a hole's must not break the code,
// a finding's (or a bound exceeded) documents that the code has the same window. Needs Spin and cc (apt-get install spin).
import { beforeAll, describe, expect, it } from 'vitest';
import { PROFILES } from '../../../verify/constants.ts';
import { type ModelRun, RUNS } from '../../../verify/runs.ts';
import { type PanResult, pooled, requireSpin, verify } from '../../../verify/spin.ts';
import { parseTrace } from '../../../verify/trace.ts';
import { replayLease } from './lease-replay.ts';

const results = new Map<string, PanResult>();
let started = 0;

beforeAll(async () => {
  requireSpin();
  started = performance.now();
  const out = await pooled(RUNS, 2, (run) => verify(run));
  RUNS.forEach((run, i) => {
    results.set(run.name, out[i]!);
  });
}, 300_000);

const resultOf = (run: ModelRun): PanResult => {
  const r = results.get(run.name);
  if (r === undefined) throw new Error(`no result for ${run.name}`);
  return r;
};

/** The -D value of a run's define, e.g. T_TERM. */
const defineOf = (run: ModelRun, name: string): number => {
  const d = run.defines.find((x) => x.startsWith(`-D${name}=`));
  return d === undefined ? 0 : Number(d.slice(name.length + 3));
};

describe('the models at the CI bounds', () => {
  it('spin and cc are installed (apt-get install spin)', () => {
    expect(() => requireSpin()).not.toThrow();
  });

  for (const run of RUNS) {
    it(`${run.name}: ${run.expect === 'pass' ? '0 errors' : 'a counterexample'}`, () => {
      const r = resultOf(run);
      if (run.expect === 'pass') {
        expect(r.errors, `${run.why}\n${r.trail?.join('\n') ?? ''}`).toBe(0);
        expect(r.complete, 'the search must be complete').toBe(true);
      } else {
        expect(r.errors, run.why).toBeGreaterThanOrEqual(1);
        expect(r.trail?.length ?? 0, 'the counterexample has a trace').toBeGreaterThan(0);
      }
    });
  }

  it('the whole CI verification fits its budget (5 minutes on 2 cores)', () => {
    expect(performance.now() - started).toBeLessThan(300_000);
  });
});

describe('counterexamples replayed on the real code', () => {
  for (const run of RUNS.filter((r) => r.replay === true)) {
    // A finding, or a bound exceeded (teeth): the code has the model's window too.
    const exhibits = run.kind === 'finding' || run.kind === 'teeth';
    it(`${run.name}: the code ${exhibits ? 'has the same window' : 'is not broken by it'}`, async () => {
      const trail = resultOf(run).trail ?? [];
      const profile = PROFILES.find((p) => p.id === (run.profile ?? 1))!;
      const replay = replayLease(parseTrace(trail), {
        ttlSeconds: profile.ttlSeconds,
        heartbeatSeconds: profile.heartbeatSeconds,
        stopLeadMs: profile.stopLeadMs,
        tickMs: profile.tickMs,
        strict: false,
        termTicks: defineOf(run, 'T_TERM'),
      });
      if (exhibits) await expect(replay).rejects.toThrow(/at-most-once broken in the code/);
      else await expect(replay).resolves.toMatchObject({ events: trail.length });
    });
  }
});

describe('the scope counterexamples end in a write of a managed chain admitted without review', () => {
  for (const run of RUNS.filter((r) => r.model === 'scope.pml' && r.expect === 'counterexample')) {
    it(run.name, () => {
      const trail = resultOf(run).trail ?? [];
      expect(
        trail.some((l) => /without review|removes the gate|has no guard/.test(l)),
        trail.join('\n'),
      ).toBe(true);
    });
  }
});
