// `npm run soak -- --minutes N [--seed S] [--inject-breach] [--out-dir DIR] [--svg FILE] [--heap-snapshots]`:
// two local control planes (child processes, see hack/controlplane), each with its operator compiled as
// the image ships it in a child process, the central server and one helper sidecar in child processes
// too, under churn and random faults, with the invariant monitor on (see soak.ts). Every product
// process's memory is sampled from outside and judged (limits.ts); the harness's is reported apart.
// The operator is built into build/soak (gitignored, beside node_modules). The helper's state, the memory curves (`--svg`, default DIR/memory.svg) and the heap
// snapshots (`--heap-snapshots`: early and late, compare them with heapdiff.ts) go to DIR (default
// $TMPDIR/berth-soak-<seed>, outside the checkout). Progress goes to stderr, one JSON summary to stdout;
// the exit code is 1 when the run failed (invariant breach, no convergence, a product process exited or
// grew beyond the limits, harness event-loop lag p99 above 100 ms), 2 on bad arguments or a crash.
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { parseArgs } from 'node:util';
import { DEFAULT_OPTIONS, runSoak } from './soak.ts';

const USAGE =
  'usage: npm run soak -- [--minutes N] [--seed S] [--inject-breach] [--out-dir DIR] [--svg FILE] [--heap-snapshots]';

function options(): {
  durationMs: number;
  seed: number;
  injectBreach: boolean;
  outDir: string;
  svgPath?: string;
  heapSnapshots: boolean;
} {
  const { values } = parseArgs({
    options: {
      minutes: { type: 'string', default: '5' },
      seed: { type: 'string' },
      'inject-breach': { type: 'boolean', default: false },
      'out-dir': { type: 'string' },
      svg: { type: 'string' },
      'heap-snapshots': { type: 'boolean', default: false },
    },
  });
  const minutes = Number(values.minutes);
  const seed = values.seed === undefined ? Date.now() % 1_000_000 : Number(values.seed);
  if (!(minutes > 0)) throw new Error(`--minutes: want a positive number, got ${values.minutes}`);
  if (!Number.isInteger(seed) || seed < 0)
    throw new Error(`--seed: want a non-negative integer, got ${values.seed}`);
  return {
    durationMs: minutes * 60_000,
    seed,
    injectBreach: values['inject-breach'] === true,
    outDir: resolve(values['out-dir'] ?? join(tmpdir(), `berth-soak-${seed}`)),
    ...(values.svg === undefined ? {} : { svgPath: resolve(values.svg) }),
    heapSnapshots: values['heap-snapshots'] === true,
  };
}

let parsed: ReturnType<typeof options>;
try {
  parsed = options();
} catch (err) {
  process.stderr.write(`${(err as Error).message}\n${USAGE}\n`);
  process.exit(2);
}
try {
  const summary = await runSoak({
    ...DEFAULT_OPTIONS,
    ...parsed,
    log: (line) => process.stderr.write(`${line}\n`),
  });
  process.stdout.write(`${JSON.stringify(summary, null, 2)}\n`);
  process.stderr.write(summary.ok ? 'soak: PASS\n' : `soak: FAIL: ${summary.failures.join('; ')}\n`);
  // Lingering keep-alive sockets of the clients must not hold the process open.
  process.exit(summary.ok ? 0 : 1);
} catch (err) {
  process.stderr.write(`soak: crashed: ${(err as Error).stack ?? String(err)}\n`);
  process.exit(2);
}
