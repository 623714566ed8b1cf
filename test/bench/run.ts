// `npm run bench [-- --quick] [-- --only <name>]`: progress on stderr, one JSON document on stdout.
// Every figure names its unit; every benchmark reports the baseline measured in the same run. The API
// servers are real control planes (hack/controlplane), built on first use and stopped at the end, on an
// error and on SIGINT.
import { cpus, loadavg, totalmem } from 'node:os';
import { ensureBinaries } from '../../hack/controlplane/build.ts';
import { stopOperatorProcesses } from '../helpers/operator-process.ts';
import { benchAdmission } from './admission.ts';
import { benchApiServer } from './apiserver.ts';
import { benchCentral } from './central.ts';
import { stopControlPlanes } from './controlplane.ts';
import { benchFailover } from './failover.ts';
import { benchLeases } from './leases.ts';
import { benchNodeTaint } from './nodetaint.ts';

interface Benchmark {
  name: string;
  run(quick: boolean, log: (msg: string) => void): Promise<Record<string, number | string | boolean>>;
}

const BENCHMARKS: Benchmark[] = [
  {
    name: 'admission',
    run: (quick, log) =>
      benchAdmission(
        quick
          ? { connections: [1, 16], warmupSeconds: 0, durationSeconds: 1, rounds: 1, pepr: false }
          : { connections: [1, 16, 64], warmupSeconds: 2, durationSeconds: 10, rounds: 2, pepr: true },
        log,
      ),
  },
  {
    name: 'leases',
    run: (quick, log) =>
      benchLeases(
        // --quick: a 2 s heartbeat so a steady-state window fits; full: the default 10 s / 30 s TTL.
        quick
          ? { sizes: [100], heartbeatSeconds: 2, ttlSeconds: 10, heartbeats: 1 }
          : { sizes: [100, 1_000], heartbeatSeconds: 10, ttlSeconds: 30, heartbeats: 3 },
        log,
      ),
  },
  {
    name: 'nodetaint',
    run: (quick, log) =>
      benchNodeTaint(
        quick
          ? { nodes: 1_000, graceMs: 1_000, steadySeconds: 2 }
          : { nodes: 5_000, graceMs: 1_000, steadySeconds: 10 },
        log,
      ),
  },
  {
    name: 'failover',
    run: (quick, log) =>
      benchFailover(
        quick
          ? {
              leaseDurationSeconds: 2,
              renewDeadlineSeconds: 1,
              retryPeriodSeconds: 0.5,
              ttlSeconds: 3,
              heartbeatSeconds: 1,
              replicas: 2,
              managed: false,
            }
          : {
              // The defaults of `berth-operator run` and of a BerthLease.
              leaseDurationSeconds: 15,
              renewDeadlineSeconds: 10,
              retryPeriodSeconds: 2,
              ttlSeconds: 30,
              heartbeatSeconds: 10,
              replicas: 2,
              managed: true,
            },
        log,
      ),
  },
  {
    name: 'apiserver',
    run: (quick, log) =>
      benchApiServer(quick ? { nodes: 500, pods: 2_000 } : { nodes: 5_000, pods: 20_000 }, log),
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
/** Stops what still runs (operator processes, control planes): at the end, on an error, on SIGINT. */
const cleanUp = async (): Promise<void> => {
  await stopOperatorProcesses();
  await stopControlPlanes();
};
process.once('SIGINT', () => {
  log('bench: interrupted; stopping the operators and control planes');
  void cleanUp().finally(() => process.exit(130));
});
const results: Record<string, Record<string, number | string | boolean>> = {};
const wallSeconds: Record<string, number> = {};
const loadBefore = loadavg();
const started = performance.now();
try {
  // Built once (about 10 minutes on 2 cores), before any benchmark's clock starts.
  await ensureBinaries({ log });
  for (const bench of BENCHMARKS) {
    if (only && bench.name !== only) continue;
    log(`bench: ${bench.name}${quick ? ' (quick)' : ''}`);
    const benchStarted = performance.now();
    results[bench.name] = await bench.run(quick, log);
    wallSeconds[bench.name] = (performance.now() - benchStarted) / 1000;
    log(`bench: ${bench.name} took ${wallSeconds[bench.name]!.toFixed(1)} s`);
  }
} finally {
  await cleanUp();
}
process.stdout.write(
  `${JSON.stringify(
    {
      machine: {
        cpus: cpus().length,
        cpu: cpus()[0]?.model,
        memory_gib: totalmem() / 1024 ** 3,
        node: process.version,
        load_average_1m_before: loadBefore[0],
        load_average_5m_before: loadBefore[1],
        load_average_1m_after: loadavg()[0],
      },
      quick,
      wall_seconds: (performance.now() - started) / 1000,
      wall_seconds_by_benchmark: wallSeconds,
      results,
    },
    null,
    2,
  )}\n`,
);
