// Leases benchmark: N lease-only BerthLeases against the embedded system (sandbox API server, central lease
// server and the operator in this one process, as `npm start` runs them): seconds from the first create
// until every lease is `held`, then at steady state API requests and status writes by the operator, and
// central lease API requests, per lease per heartbeat; CPU seconds per minute and RSS of the process.
// Baseline in the same run: the same process's RSS before the system started (the runner's own share).
// Operator API requests are counted in the sandbox by a no-op fault rule matching the operator's user.
import { mkdtemp, rm } from 'node:fs/promises';
import { Agent, request } from 'node:https';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { startEmbeddedSystem } from '../../src/embedded.ts';
import { berthLease } from '../fixtures/webhooks/objects.ts';

type Figures = Record<string, number | string | boolean>;

export interface LeasesBenchOptions {
  sizes: number[];
  heartbeatSeconds: number;
  ttlSeconds: number;
  /** Steady-state window, in heartbeats. */
  heartbeats: number;
}

const OPERATOR_USER = 'system:serviceaccount:berth-system:berth-operator';
const NAMESPACE = 'default';
const PATH = `/apis/berth.skaphos.io/v1alpha1/namespaces/${NAMESPACE}/berthleases`;
const mib = (bytes: number): number => bytes / 1024 / 1024;
const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

function call(
  agent: Agent,
  url: URL,
  token: string,
  method: string,
  path: string,
  body?: unknown,
): Promise<unknown> {
  return new Promise((resolve, reject) => {
    const data = body === undefined ? undefined : JSON.stringify(body);
    const req = request(
      {
        agent,
        host: url.hostname,
        port: url.port,
        path,
        method,
        headers: {
          Authorization: `Bearer ${token}`,
          ...(data ? { 'Content-Type': 'application/json', 'Content-Length': Buffer.byteLength(data) } : {}),
        },
      },
      (res) => {
        const chunks: Buffer[] = [];
        res.on('data', (c: Buffer) => chunks.push(c));
        res.on('end', () => {
          const text = Buffer.concat(chunks).toString('utf8');
          if ((res.statusCode ?? 0) >= 300)
            reject(new Error(`${method} ${path}: HTTP ${res.statusCode} ${text}`));
          else resolve(JSON.parse(text));
        });
      },
    );
    req.on('error', reject);
    req.end(data);
  });
}

async function one(
  n: number,
  opts: LeasesBenchOptions,
  baselineMib: number,
  log: (msg: string) => void,
): Promise<Figures> {
  const dir = await mkdtemp(join(tmpdir(), 'berth-bench-leases-'));
  const system = await startEmbeddedSystem({
    listen: '127.0.0.1:0',
    kubeconfigPath: join(dir, 'kubeconfig'),
    simulateWorkloads: false,
    clusterId: 'bench-east',
    logPath: join(dir, 'operator.log'),
    logLevel: 'warn',
  });
  const agent = new Agent({ keepAlive: true, maxSockets: 16, ca: system.sandbox.caCert });
  try {
    await system.ready;
    const url = new URL(system.sandbox.url);
    const token = system.sandbox.users.admin.token;
    const statusWrites = system.sandbox.faults.inject({ user: OPERATOR_USER, subresource: 'status' });
    const operatorRequests = system.sandbox.faults.inject({ user: OPERATOR_USER });
    const centralRequests = async (): Promise<number> => {
      const m = await system.central.registry.getSingleMetric('berth_apiserver_requests_total')?.get();
      return (m?.values ?? []).reduce((s, v) => s + v.value, 0);
    };
    const apiTotal = (): number => statusWrites.hits() + operatorRequests.hits();

    log(`leases: creating ${n} lease-only BerthLeases`);
    const created = performance.now();
    for (let i = 0; i < n; i += 16) {
      await Promise.all(
        Array.from({ length: Math.min(16, n - i) }, (_, j) => {
          const lease = berthLease(`lease-${i + j}`, {
            namespace: NAMESPACE,
            spec: { ttlSeconds: opts.ttlSeconds, heartbeatIntervalSeconds: opts.heartbeatSeconds },
          });
          delete (lease.metadata as Record<string, unknown>).uid;
          delete (lease.metadata as Record<string, unknown>).finalizers;
          return call(agent, url, token, 'POST', PATH, lease);
        }),
      );
    }
    const createSeconds = (performance.now() - created) / 1000;
    let held = 0;
    const deadline = performance.now() + 120_000;
    while (performance.now() < deadline) {
      const list = (await call(agent, url, token, 'GET', PATH)) as {
        items: { status?: { leaseState?: string } }[];
      };
      held = list.items.filter((l) => l.status?.leaseState === 'held').length;
      if (held === n) break;
      await sleep(100);
    }
    const heldSeconds = (performance.now() - created) / 1000;
    log(`leases: ${held}/${n} held ${heldSeconds.toFixed(2)} s after the first create`);

    // Steady state: one heartbeat to settle, then the window.
    await sleep(opts.heartbeatSeconds * 1000);
    const api0 = apiTotal();
    const writes0 = statusWrites.hits();
    const central0 = await centralRequests();
    const cpu0 = process.cpuUsage();
    const t0 = performance.now();
    await sleep(opts.heartbeats * opts.heartbeatSeconds * 1000);
    const seconds = (performance.now() - t0) / 1000;
    const cpu = process.cpuUsage(cpu0);
    const beats = seconds / opts.heartbeatSeconds;
    const per = (count: number): number => count / n / beats;
    const rss = process.memoryUsage().rss;
    const out: Figures = {
      [`n${n}_create_seconds`]: createSeconds,
      [`n${n}_all_held_seconds`]: held === n ? heldSeconds : Number.NaN,
      [`n${n}_held`]: held,
      [`n${n}_api_requests_per_lease_per_heartbeat`]: per(apiTotal() - api0),
      [`n${n}_status_writes_per_lease_per_heartbeat`]: per(statusWrites.hits() - writes0),
      [`n${n}_central_requests_per_lease_per_heartbeat`]: per((await centralRequests()) - central0),
      [`n${n}_cpu_seconds_per_minute`]: ((cpu.user + cpu.system) / 1e6 / seconds) * 60,
      [`n${n}_rss_mib`]: mib(rss),
      [`n${n}_rss_growth_over_baseline_mib`]: mib(rss) - baselineMib,
    };
    log(`leases: ${JSON.stringify(out)}`);
    return out;
  } finally {
    agent.destroy();
    await system.stop();
    await rm(dir, { recursive: true, force: true });
  }
}

export async function benchLeases(opts: LeasesBenchOptions, log: (msg: string) => void): Promise<Figures> {
  global.gc?.();
  const out: Figures = {
    heartbeat_interval_seconds: opts.heartbeatSeconds,
    ttl_seconds: opts.ttlSeconds,
    steady_state_window_heartbeats: opts.heartbeats,
    baseline_rss_before_system_mib: mib(process.memoryUsage().rss),
  };
  for (const n of opts.sizes)
    Object.assign(out, await one(n, opts, out.baseline_rss_before_system_mib as number, log));
  const maxN = Math.max(...opts.sizes);
  const heldS = out[`n${maxN}_all_held_seconds`] as number;
  out[`target_n${maxN}_held_within_15_seconds`] = heldS <= 15 ? 'met' : 'missed';
  out.target_at_most_1_status_write_per_lease_per_heartbeat = opts.sizes.every(
    (n) => (out[`n${n}_status_writes_per_lease_per_heartbeat`] as number) <= 1,
  )
    ? 'met'
    : 'missed';
  // Sandbox, central server and operator share this process: the growth over the runner's own RSS is an
  // upper bound of the operator's share.
  out.target_rss_at_most_150_mib = opts.sizes.every(
    (n) => (out[`n${n}_rss_growth_over_baseline_mib`] as number) <= 150,
  )
    ? 'met'
    : 'missed';
  return out;
}
