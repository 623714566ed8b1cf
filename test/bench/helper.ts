// Footprint of the injected helper, which runs twice in every opted-in Pod (docs/helper.md §6): the
// compiled build (scripts/build.ts, what the image runs) with the image's NODE_OPTIONS, against a local
// `berth-operator central` over HTTPS with a static key, as a Pod would reach it.
//   acquire_*        `helper acquire` (the init container) from spawn to exit, and its peak RSS (VmHWM,
//                    sampled every 5 ms until it exits);
//   acquire_to_app_start_ms
//                    spawn of `helper acquire` until the sidecar's GET /healthy answers 200 (the moment a
//                    kubelet with a sidecar startupProbe starts the app);
//   sidecar_idle_*   `helper renew` after `idleHeartbeats` renewals: RSS, and its anonymous and file-backed
//                    parts (the file-backed part is mostly the node executable's pages, shared by every
//                    container of the node that runs the same image).
// Baselines in the same run: an idle `node` with the same NODE_OPTIONS and nothing loaded (RSS), and
// `node -e 0` from spawn to exit (the start-up cost of any Node process on this machine). Goals (issue
// #17): RSS <= 50 MiB, acquire to app start <= 1 s.
import { readFileSync } from 'node:fs';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createAuthority } from '../../hack/controlplane/pki.ts';
import { build } from '../../scripts/build.ts';
import { sha256Hex } from '../../src/central/auth.ts';
import { eventually } from '../helpers/eventually.ts';
import { type Proc, spawnProc, startCentralProcess, stopHelperProcesses } from '../helpers/helper-pod.ts';

export interface HelperBenchOptions {
  /** acquire runs (a lease of its own each); the medians are reported. */
  runs: number;
  /** Renewals the idle sidecar has done when its RSS is read. */
  idleHeartbeats: number;
}

const NODE = join(process.cwd(), 'node_modules/.bin/node');
// The image's NODE_OPTIONS (Dockerfile).
const NODE_OPTIONS = '--max-semi-space-size=4';
// The smallest TTL whose default heartbeat (ttl/3) plus the 4 s enforcement lead fits (docs/helper.md §2).
const TTL_SECONDS = 7;
const MIB = 1024;

interface Memory {
  rss: number;
  anon: number;
  file: number;
  hwm: number;
}

/** VmRSS, RssAnon, RssFile and VmHWM of a live process, in KiB; undefined once it is gone. */
function memoryOf(pid: number): Memory | undefined {
  let text: string;
  try {
    text = readFileSync(`/proc/${pid}/status`, 'utf8');
  } catch {
    return undefined;
  }
  const kib = (key: string): number =>
    Number(new RegExp(`^${key}:\\s+(\\d+)`, 'm').exec(text)?.[1] ?? Number.NaN);
  return { rss: kib('VmRSS'), anon: kib('RssAnon'), file: kib('RssFile'), hwm: kib('VmHWM') };
}

const median = (values: number[]): number => {
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.floor(sorted.length / 2)] ?? Number.NaN;
};

const round = (n: number, digits = 1): number => Number(n.toFixed(digits));

/** Samples a process's peak RSS until it exits. */
async function peakWhileRunning(proc: Proc): Promise<number> {
  let peak = 0;
  while (!proc.hasExited()) {
    const m = memoryOf(proc.child.pid ?? -1);
    if (m !== undefined && !Number.isNaN(m.hwm)) peak = Math.max(peak, m.hwm);
    await new Promise((r) => setTimeout(r, 5));
  }
  return peak;
}

async function probe(port: number): Promise<number> {
  try {
    const res = await fetch(`http://127.0.0.1:${port}/healthy`, { signal: AbortSignal.timeout(1_000) });
    await res.text();
    return res.status;
  } catch {
    return 0;
  }
}

export async function benchHelper(
  o: HelperBenchOptions,
  log: (msg: string) => void,
): Promise<Record<string, number | string | boolean>> {
  const dir = await mkdtemp(join(tmpdir(), 'berth-bench-helper-'));
  try {
    log('helper: building the image sources (scripts/build.ts)');
    const main = build(join(dir, 'build'));
    const ca = await createAuthority('berth-bench-helper-ca');
    const serving = await ca.serving(['127.0.0.1']);
    const files = {
      ca: join(dir, 'ca.crt'),
      cert: join(dir, 'tls.crt'),
      key: join(dir, 'tls.key'),
      keys: join(dir, 'keys'),
      token: join(dir, 'token'),
    };
    await writeFile(files.ca, ca.cert);
    await writeFile(files.cert, serving.cert);
    await writeFile(files.key, serving.key, { mode: 0o600 });
    await writeFile(files.keys, `bench:${sha256Hex('bench-token')}\n`);
    await writeFile(files.token, 'bench-token\n');
    const central = await startCentralProcess({
      certFile: files.cert,
      keyFile: files.key,
      args: ['--store-backend=mem', '--auth-mode=static-keys', `--api-keys-file=${files.keys}`],
    });
    try {
      // The time baseline: a node process that does nothing, from spawn to exit.
      const bareStartMs: number[] = [];
      for (let i = 0; i < o.runs; i++) {
        const started = performance.now();
        await spawnProc('bare', NODE, ['-e', '0'], { NODE_OPTIONS }).exited;
        bareStartMs.push(performance.now() - started);
      }
      const baseline = spawnProc('baseline', NODE, ['-e', 'setInterval(() => {}, 1e6)'], { NODE_OPTIONS });
      await new Promise((r) => setTimeout(r, 1_000));
      const baselineMemory = memoryOf(baseline.child.pid ?? -1);
      baseline.child.kill('SIGKILL');

      const env = (i: number): Record<string, string> => ({
        NODE_OPTIONS,
        BERTH_LEASE_NAME: `bench-${i}`,
        BERTH_TTL_SECONDS: String(TTL_SECONDS),
        BERTH_API_SERVER: central.url,
        BERTH_CA_BUNDLE_FILE: files.ca,
        BERTH_API_KEY_FILE: files.token,
        BERTH_CLUSTER_ID: 'bench',
        POD_NAMESPACE: 'bench',
        POD_NAME: `pod-${i}`,
        POD_UID: `uid-${i}`,
        BERTH_STATE_DIR: join(dir, `state-${i}`),
        BERTH_PROBE_PORT: '0',
      });
      const acquireMs: number[] = [];
      const acquirePeak: number[] = [];
      const toAppMs: number[] = [];
      let idle: Memory | undefined;
      for (let i = 0; i < o.runs; i++) {
        const started = performance.now();
        const acquire = spawnProc(`acquire-${i}`, NODE, [main, 'helper', 'acquire'], env(i));
        const peak = peakWhileRunning(acquire);
        const exit = await acquire.exited;
        if (exit.code !== 0)
          throw new Error(`helper acquire exited ${exit.code ?? exit.signal}: ${acquire.stderr()}`);
        acquireMs.push(performance.now() - started);
        acquirePeak.push(await peak);
        const sidecar = spawnProc(`sidecar-${i}`, NODE, [main, 'helper', 'renew'], env(i));
        const port = Number((await sidecar.waitForLog((l) => l.msg === 'probe server listening')).port);
        await eventually(async () => (await probe(port)) === 200, { timeoutMs: 20_000, intervalMs: 5 });
        toAppMs.push(performance.now() - started);
        if (i === o.runs - 1) {
          log(`helper: sidecar idle for ${o.idleHeartbeats} heartbeats`);
          await new Promise((r) => setTimeout(r, ((o.idleHeartbeats * TTL_SECONDS) / 3) * 1_000 + 200));
          if ((await probe(port)) !== 200) throw new Error('the idle sidecar stopped answering 200');
          idle = memoryOf(sidecar.child.pid ?? -1);
        }
        sidecar.child.kill('SIGTERM');
        await sidecar.exited;
      }
      const mib = (kib: number | undefined): number => round((kib ?? Number.NaN) / MIB);
      return {
        node_options: NODE_OPTIONS,
        runs: o.runs,
        baseline_idle_node_rss_mib: mib(baselineMemory?.rss),
        baseline_idle_node_rss_anon_mib: mib(baselineMemory?.anon),
        baseline_idle_node_rss_file_mib: mib(baselineMemory?.file),
        baseline_node_spawn_to_exit_ms_p50: round(median(bareStartMs), 0),
        acquire_ms_p50: round(median(acquireMs), 0),
        acquire_peak_rss_mib_p50: mib(median(acquirePeak)),
        acquire_to_app_start_ms_p50: round(median(toAppMs), 0),
        acquire_to_app_start_ms_max: round(Math.max(...toAppMs), 0),
        sidecar_idle_rss_mib: mib(idle?.rss),
        sidecar_idle_rss_anon_mib: mib(idle?.anon),
        sidecar_idle_rss_file_mib: mib(idle?.file),
        sidecar_peak_rss_mib: mib(idle?.hwm),
        goal_rss_mib: 50,
        goal_acquire_to_app_start_ms: 1_000,
      };
    } finally {
      await stopHelperProcesses();
      await central.stop();
    }
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
}
