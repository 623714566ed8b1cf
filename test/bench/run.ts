// `npm run bench [-- --quick] [-- --only <name>] [-- --out FILE]`: progress on stderr, one JSON document on
// stdout (and in FILE with --out; `node scripts/performance-doc.ts FILE` renders docs/performance.md from it).
// Every figure names its unit; every benchmark reports the baseline measured in the same run. The API
// servers are real control planes (hack/controlplane), built on first use and stopped at the end, on an
// error and on SIGINT.
import { spawnSync } from 'node:child_process';
import { subscribe } from 'node:diagnostics_channel';
import { writeFileSync } from 'node:fs';
import type { ClientRequest } from 'node:http';
import { cpus, loadavg, totalmem } from 'node:os';
import { ensureBinaries } from '../../hack/controlplane/build.ts';
import { stopOperatorProcesses } from '../helpers/operator-process.ts';
import { benchAdmission } from './admission.ts';
import { benchApiClient } from './api-client.ts';
import { benchApiServer } from './apiserver.ts';
import { benchCentral } from './central.ts';
import { stopControlPlanes } from './controlplane.ts';
import { benchFailover } from './failover.ts';
import { benchHelper } from './helper.ts';
import { benchLeases } from './leases.ts';
import { benchNodeTaint } from './nodetaint.ts';
import { benchPodAdmission } from './pod-admission.ts';

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
    name: 'pod-admission',
    run: (quick, log) =>
      benchPodAdmission(
        quick
          ? { rates: [10, 50, 200], seconds: [3, 2, 1], warmupSeconds: 0.5 }
          : { rates: [10, 50, 200], seconds: [30, 20, 10], warmupSeconds: 2 },
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
    name: 'api-client',
    run: (quick, log) =>
      benchApiClient(
        quick ? { gets: 400, concurrency: 4, rounds: 1 } : { gets: 3_000, concurrency: 4, rounds: 2 },
        log,
      ),
  },
  {
    name: 'apiserver',
    run: (quick, log) =>
      benchApiServer(quick ? { nodes: 500, pods: 2_000 } : { nodes: 5_000, pods: 20_000 }, log),
  },
  { name: 'central', run: (quick, log) => benchCentral({ sizes: quick ? [20, 200] : [100, 2_000] }, log) },
  {
    name: 'helper',
    run: (quick, log) =>
      benchHelper(quick ? { runs: 3, idleHeartbeats: 2 } : { runs: 7, idleHeartbeats: 5 }, log),
  },
];

function parseArgs(argv: string[]): { quick: boolean; only: string | undefined; out: string | undefined } {
  let quick = false;
  let only: string | undefined;
  let out: string | undefined;
  for (let i = 0; i < argv.length; i++) {
    if (argv[i] === '--quick') quick = true;
    else if (argv[i] === '--only') only = argv[++i];
    else if (argv[i] === '--out') {
      out = argv[++i];
      if (out === undefined || out === '') {
        process.stderr.write('bench: --out needs a file name\n');
        process.exit(2);
      }
    } else {
      process.stderr.write(
        `bench: unknown argument "${argv[i]}" (use --quick, --only <name>, --out <file>)\n`,
      );
      process.exit(2);
    }
  }
  const unknown = (only ?? '').split(',').filter((n) => n !== '' && !BENCHMARKS.some((b) => b.name === n));
  if (only !== undefined && (only === '' || unknown.length > 0)) {
    process.stderr.write(
      `bench: unknown benchmark "${unknown.join(',') || only}" (have: ${BENCHMARKS.map((b) => b.name).join(', ')}; several: a,b)\n`,
    );
    process.exit(2);
  }
  return { quick, only, out };
}

/** First line of `cmd args` (a tool's version; wrk prints it and exits 1), undefined when not installed. */
function versionOf(cmd: string, args: string[]): string | undefined {
  const r = spawnSync(cmd, args, { encoding: 'utf8' });
  const line = `${r.stdout ?? ''}${r.stderr ?? ''}`.trim().split('\n')[0];
  return r.error === undefined && line ? line : undefined;
}

const { quick, only, out } = parseArgs(process.argv.slice(2));
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
// An HTTPS request of some helper that fails with no 'error' listener (a socket hang up as a control plane
// stops under it) would end the whole run without its JSON: say which request it was and go on.
subscribe('http.client.request.error', (message) => {
  const { request, error } = message as { request: ClientRequest; error: Error };
  if (request.listenerCount('error') > 0) return;
  request.once('error', () => undefined);
  log(
    `bench: ${request.method} ${request.host}${request.path} failed with no error handler: ${error.message}`,
  );
});
const results: Record<string, Record<string, number | string | boolean>> = {};
const wallSeconds: Record<string, number> = {};
const loadBefore = loadavg();
const startedAt = new Date().toISOString();
const started = performance.now();
const versions: Record<string, string | undefined> = {
  node: process.version,
  wrk: versionOf('wrk', ['--version']),
  commit: versionOf('git', ['rev-parse', 'HEAD']),
  // Files changed since that commit when the run started: the run measured them too.
  uncommitted_files: String(
    spawnSync('git', ['status', '--porcelain'], { encoding: 'utf8' }).stdout?.split('\n').filter(Boolean)
      .length ?? 0,
  ),
};
// The 1-minute load average every 10 s: the machine is shared, and the figures are only as quiet as it was.
const loadSamples: { at: number; load: number }[] = [];
const sampler = setInterval(() => loadSamples.push({ at: performance.now(), load: loadavg()[0]! }), 10_000);
sampler.unref();
const loadDuring = (from: number, to: number): { mean: number; max: number } => {
  const xs = loadSamples.filter((s) => s.at >= from && s.at <= to).map((s) => s.load);
  return xs.length === 0
    ? { mean: Number.NaN, max: Number.NaN }
    : { mean: xs.reduce((a, b) => a + b, 0) / xs.length, max: Math.max(...xs) };
};
const loadByBenchmark: Record<string, { mean: number; max: number }> = {};
try {
  // Built once (about 10 minutes on 2 cores), before any benchmark's clock starts.
  const binaries = await ensureBinaries({ log });
  Object.assign(versions, binaries.versions);
  for (const bench of BENCHMARKS) {
    if (only && !only.split(',').includes(bench.name)) continue;
    log(`bench: ${bench.name}${quick ? ' (quick)' : ''}`);
    const benchStarted = performance.now();
    results[bench.name] = await bench.run(quick, log);
    wallSeconds[bench.name] = (performance.now() - benchStarted) / 1000;
    loadByBenchmark[bench.name] = loadDuring(benchStarted, performance.now());
    // After each benchmark, so a run that fails later still leaves what it measured.
    if (out !== undefined) writeFileSync(out, documentText(false));
    log(`bench: ${bench.name} took ${wallSeconds[bench.name]!.toFixed(1)} s`);
  }
} finally {
  await cleanUp();
}
clearInterval(sampler);
const text = documentText(true);
if (out !== undefined) writeFileSync(out, text);
process.stdout.write(text);

/** The run's JSON document; `complete` false while benchmarks are still to come. */
function documentText(complete: boolean): string {
  const loadAfter = loadavg();
  const during = loadDuring(started, performance.now());
  return `${JSON.stringify(
    {
      machine: {
        cpus: cpus().length,
        cpu: cpus()[0]?.model,
        memory_gib: totalmem() / 1024 ** 3,
        os: versionOf('sh', ['-c', '. /etc/os-release && echo "$PRETTY_NAME"']),
        node: process.version,
        load_average_1m_before: loadBefore[0],
        load_average_5m_before: loadBefore[1],
        load_average_15m_before: loadBefore[2],
        load_average_1m_after: loadAfter[0],
        load_average_5m_after: loadAfter[1],
        load_average_15m_after: loadAfter[2],
        load_average_1m_mean_during: during.mean,
        load_average_1m_max_during: during.max,
        load_average_1m_by_benchmark: loadByBenchmark,
      },
      versions,
      quick,
      only: only ?? null,
      complete,
      started_at: startedAt,
      finished_at: new Date().toISOString(),
      wall_seconds: (performance.now() - started) / 1000,
      wall_seconds_by_benchmark: wallSeconds,
      results,
    },
    null,
    2,
  )}\n`;
}
