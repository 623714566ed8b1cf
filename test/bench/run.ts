// `npm run bench [-- --quick] [-- --only <name>]`: progress on stderr, one JSON document on stdout.
// Every figure names its unit; every benchmark reports the baseline measured in the same run.
import { cpus } from 'node:os';
import { benchCentral } from './central.ts';
import { benchSandbox } from './sandbox.ts';

interface Benchmark {
  name: string;
  run(quick: boolean, log: (msg: string) => void): Promise<Record<string, number>>;
}

const BENCHMARKS: Benchmark[] = [
  {
    name: 'sandbox',
    run: (quick, log) =>
      benchSandbox(quick ? { nodes: 500, pods: 2_000 } : { nodes: 5_000, pods: 20_000 }, log),
  },
  { name: 'central', run: (quick, log) => benchCentral({ sizes: quick ? [20, 200] : [100, 2_000] }, log) },
];

function parseArgs(argv: string[]): { quick: boolean; only: string | undefined } {
  let quick = false;
  let only: string | undefined;
  for (let i = 0; i < argv.length; i++) {
    if (argv[i] === '--quick') quick = true;
    else if (argv[i] === '--only') only = argv[++i];
    else {
      process.stderr.write(`bench: unknown argument "${argv[i]}" (use --quick, --only <name>)\n`);
      process.exit(2);
    }
  }
  if (only && !BENCHMARKS.some((b) => b.name === only)) {
    process.stderr.write(
      `bench: unknown benchmark "${only}" (have: ${BENCHMARKS.map((b) => b.name).join(', ')})\n`,
    );
    process.exit(2);
  }
  return { quick, only };
}

const { quick, only } = parseArgs(process.argv.slice(2));
const log = (msg: string): void => {
  process.stderr.write(`${msg}\n`);
};
const results: Record<string, Record<string, number>> = {};
for (const bench of BENCHMARKS) {
  if (only && bench.name !== only) continue;
  log(`bench: ${bench.name}${quick ? ' (quick)' : ''}`);
  results[bench.name] = await bench.run(quick, log);
}
process.stdout.write(
  `${JSON.stringify({ machine: { cpus: cpus().length, cpu: cpus()[0]?.model, node: process.version }, quick, results }, null, 2)}\n`,
);
