// The model checks at the CI bounds (docs/verification.md): every property run must verify with 0
// errors over a complete search, and every hole, finding and teeth run must yield a counterexample, so
// each check can fail. Counterexamples of the runs marked `replay` are replayed on the real code
// (lenient: the environment of the trace, the code's own decisions): a hole's must not break the code,
// a finding's (or a bound exceeded) documents that the code has the same window. Needs Spin and cc (apt-get install spin).
import { spawnSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { beforeAll, describe, expect, it } from 'vitest';
import { PROFILES } from '../../../verify/constants.ts';
import { type ModelRun, RUNS } from '../../../verify/runs.ts';
import { parseScopeEvent } from '../../../verify/scope-trace.ts';
import { type PanResult, pooled, requireSpin, verify } from '../../../verify/spin.ts';
import { parseTrace } from '../../../verify/trace.ts';
import { replayLease } from './lease-replay.ts';

/** The budget: 5 minutes on 2 cores, as CPU time, so that what runs beside the checks does not count. */
const BUDGET_CPU_SECONDS = 2 * 300;
/** A hang guard only: on a machine loaded beyond its cores the wall time says little. */
const HANG_GUARD_MS = 900_000;

const CLOCK_TICKS = Number(spawnSync('getconf', ['CLK_TCK'], { encoding: 'utf8' }).stdout.trim()) || 100;

/** CPU seconds (user + system) of this process's children so far: spin, cc and pan (/proc/self/stat). */
function childCpuSeconds(): number {
  const stat = readFileSync('/proc/self/stat', 'utf8');
  // After "pid (comm) ": state is field 3; cutime and cstime are fields 16 and 17.
  const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
  return (Number(fields[13]) + Number(fields[14])) / CLOCK_TICKS;
}

const results = new Map<string, PanResult>();
let cpuSeconds = 0;

beforeAll(async () => {
  requireSpin();
  const cpuBefore = childCpuSeconds();
  const started = performance.now();
  const out = await pooled(RUNS, 2, (run) => verify(run));
  RUNS.forEach((run, i) => {
    results.set(run.name, out[i]!);
  });
  cpuSeconds = childCpuSeconds() - cpuBefore;
  const wall = Math.round((performance.now() - started) / 1000);
  process.stdout.write(`models: ${RUNS.length} checks, ${Math.round(cpuSeconds)} CPU s, ${wall} s wall\n`);
}, HANG_GUARD_MS);

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

  it('the whole CI verification fits its budget (5 minutes on 2 cores: 600 CPU seconds)', () => {
    expect(cpuSeconds).toBeGreaterThan(0);
    expect(cpuSeconds).toBeLessThan(BUDGET_CPU_SECONDS);
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
      const unreviewed = trail
        .map(parseScopeEvent)
        .some((e) => (e.kind === 'write' && !e.reviewed) || (e.kind === 'userremove' && !e.guarded));
      expect(unreviewed, trail.join('\n')).toBe(true);
    });
  }
});
