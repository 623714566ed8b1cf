// `npm run verify`: every run of verify/runs.ts at the deeper bound (PROFILE 2 of verify/constants.pml,
// a 24 s TTL with the default leader election, and each run's `deep` switches where it has them), two at
// a time; `npm run verify -- --ci` the CI bounds instead (what test/unit/verify/models.test.ts checks).
// Prints one JSON object per run (states, transitions, depth, memory, seconds, errors, whether it was as
// expected) and a summary; exits 1 when a run is not as expected. docs/verification.md records the
// figures.
import { RUNS } from './runs.ts';
import { pooled, requireSpin, verify } from './spin.ts';

requireSpin();
const ci = process.argv.includes('--ci');
const started = performance.now();
const results = await pooled(RUNS, 2, async (run) => {
  const spec = ci || run.deep === undefined ? run : { ...run, defines: run.deep };
  const r = await verify(spec, ci ? {} : { profile: 2, depth: 1_000_000 });
  const asExpected = run.expect === 'pass' ? r.errors === 0 && r.complete : r.errors > 0;
  const line = {
    run: run.name,
    profile: run.profile ?? (ci ? 1 : 2),
    defines: spec.defines.join(' '),
    expect: run.expect,
    errors: r.errors,
    asExpected,
    states: r.states,
    transitions: r.transitions,
    depth: r.depth,
    memoryMb: r.memoryMb,
    seconds: r.seconds,
  };
  process.stdout.write(`${JSON.stringify(line)}\n`);
  return line;
});
const failed = results.filter((r) => !r.asExpected);
process.stdout.write(
  `${JSON.stringify({ runs: results.length, notAsExpected: failed.map((r) => r.run), seconds: Math.round((performance.now() - started) / 100) / 10 })}\n`,
);
process.exitCode = failed.length === 0 ? 0 : 1;
