// Leases benchmark: N lease-only BerthLeases against a real control plane (OperatorCluster: kube-apiserver,
// etcd and the controllers in their own processes) and a central lease server, with the operator
// (`berth-operator run`, as deployed, as its ServiceAccount) in its own child process: seconds from the first
// create until every lease is `held`, then at steady state API requests and status writes by the operator,
// and central lease API requests, per lease per heartbeat; the operator's CPU seconds per minute and RSS
// (its own process, so the RSS target can be judged), and the bench process's (the operator's API proxy,
// the central server and this client) for comparison. The operator reaches the API server through
// OperatorCluster's ApiProxy, which counts its requests (no-op rules matching its user) and adds a hop in
// this process to each of them: the timings are a real API server's, plus that hop.

import { join } from 'node:path';
import type { KubernetesObject } from '@kubernetes/client-node';
import { build } from '../../scripts/build.ts';
import { GROUP, PLURAL, VERSION } from '../../src/berth/api.ts';
import { startCentralServer } from '../../src/central/server.ts';
import { Informer } from '../../src/kube/informer.ts';
import { KubeTransport } from '../../src/kube/transport.ts';
import { createLogger } from '../../src/observability/logger.ts';
import { berthLease } from '../fixtures/webhooks/objects.ts';
import { centralTls } from '../helpers/central-tls.ts';
import { shippedEnv } from '../helpers/image.ts';
import type { OperatorProcess } from '../helpers/operator-process.ts';
import { NS, OPERATOR_USER, OperatorCluster } from '../integration/reliability/operator-cluster.ts';
import { type AdminApi, adminApi } from './admin-api.ts';
import { stopAtExit } from './controlplane.ts';
import { usage } from './proc.ts';

type Figures = Record<string, number | string | boolean>;

export interface LeasesBenchOptions {
  sizes: number[];
  heartbeatSeconds: number;
  ttlSeconds: number;
  /** Steady-state window, in heartbeats. */
  heartbeats: number;
  /** Further `run` flags for the operator (experiments: concurrency, rate limits). */
  operatorArgs?: string[];
  /**
   * The operator as installed (the default): the compiled JavaScript of scripts/build.ts, with the image's
   * environment and the install's NODE_OPTIONS (test/helpers/image.ts). `false` runs the TypeScript
   * sources with Node's defaults, as `npm start` does.
   */
  asShipped?: boolean;
  /** The operator's environment instead of the image's (experiments). */
  env?: Record<string, string>;
}

const PATH = `/apis/berth.skaphos.io/v1alpha1/namespaces/${NS}/berthleases`;
const mib = (bytes: number): number => bytes / 1024 / 1024;
const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

interface Entry {
  main?: string;
  env?: Record<string, string>;
}

async function one(
  n: number,
  opts: LeasesBenchOptions,
  entry: Entry,
  log: (msg: string) => void,
): Promise<Figures> {
  const central = await startCentralServer({
    tls: await centralTls(),
    logger: createLogger({ level: 'silent' }),
  });
  let cluster: OperatorCluster | undefined;
  let operator: OperatorProcess | undefined;
  let api: AdminApi | undefined;
  try {
    cluster = await OperatorCluster.start();
    stopAtExit(cluster.t.controlPlane);
    operator = cluster.startOperator({
      name: `leases-${n}`,
      // At info, as deployed (the process helper reads its addresses from the info lines, too).
      central: { url: central.url, clusterId: 'bench-east' },
      args: opts.operatorArgs ?? [],
      ...entry,
    });
    await operator.ready(60_000);
    api = adminApi({ url: cluster.t.url, ca: cluster.t.caCert, token: cluster.t.adminToken, maxSockets: 16 });
    // The first rule a request matches counts it: status writes, then every other request.
    const statusWrites = cluster.proxy.inject({ user: OPERATOR_USER, subresource: 'status' });
    const operatorRequests = cluster.proxy.inject({ user: OPERATOR_USER });
    const centralRequests = async (): Promise<number> => {
      const m = await central.registry.getSingleMetric('berth_apiserver_requests_total')?.get();
      return (m?.values ?? []).reduce((sum, v) => sum + v.value, 0);
    };
    const apiTotal = (): number => statusWrites.hits() + operatorRequests.hits();
    const pid = operator.child.pid ?? 0;
    const startedUsage = await usage(pid);
    const metricsUrl = `http://${await operator.metrics()}/metrics`;
    /** The operator's own figure from its /metrics (prom-client's process and Node.js series). */
    const gauge = async (name: string): Promise<number> => {
      const text = await (await fetch(metricsUrl)).text();
      const line = text.split('\n').find((l) => l.startsWith(`${name} `) || l.startsWith(`${name}{`));
      return Number(line?.split(' ').at(-1) ?? Number.NaN);
    };
    const idleRssMib = startedUsage.rssMib;
    /** Sum of a counter's samples whose labels contain `match` (e.g. `result="requeue"`). */
    const counter = async (name: string, match = ''): Promise<number> => {
      const text = await (await fetch(metricsUrl)).text();
      return text
        .split('\n')
        .filter((l) => (l.startsWith(`${name} `) || l.startsWith(`${name}{`)) && l.includes(match))
        .reduce((sum, l) => sum + Number(l.split(' ').at(-1)), 0);
    };
    // Held leases, counted from a watch: polling a LIST of N leases would load the API server (and so the
    // figure) with the measurement itself.
    const states = new Map<string, string>();
    const transport = new KubeTransport(cluster.t.kc);
    const watch = new Informer<KubernetesObject>({
      name: 'bench-leases',
      transport,
      resource: { group: GROUP, version: VERSION, plural: PLURAL, namespace: NS },
    });
    const track = (o: KubernetesObject): void => {
      const state = (o as { status?: { leaseState?: string } }).status?.leaseState ?? '';
      states.set(o.metadata?.name ?? '', state);
    };
    watch.addEventHandler({ onAdd: track, onUpdate: (_old, o) => track(o), onDelete: () => undefined });
    const stopWatch = new AbortController();
    watch.start(stopWatch.signal);
    await watch.waitForSync();
    const heldCount = (): number => [...states.values()].filter((s) => s === 'held').length;

    log(`leases: creating ${n} lease-only BerthLeases`);
    // The operator's own count of its requests by method (rest_client_requests_total), beside the proxy's.
    const METHODS = ['GET', 'POST', 'PUT', 'PATCH'] as const;
    const byMethod = (): Promise<number[]> =>
      Promise.all(METHODS.map((m) => counter('rest_client_requests_total', `method="${m}"`)));
    const rushApi0 = apiTotal();
    const rushByMethod0 = await byMethod();
    const created = performance.now();
    for (let i = 0; i < n; i += 16) {
      await Promise.all(
        Array.from({ length: Math.min(16, n - i) }, (_, j) => {
          const lease = berthLease(`lease-${i + j}`, {
            namespace: NS,
            spec: { ttlSeconds: opts.ttlSeconds, heartbeatIntervalSeconds: opts.heartbeatSeconds },
          });
          delete (lease.metadata as Record<string, unknown>).uid;
          delete (lease.metadata as Record<string, unknown>).finalizers;
          return api!.json('POST', PATH, lease);
        }),
      );
    }
    const createSeconds = (performance.now() - created) / 1000;
    const deadline = performance.now() + 120_000;
    while (heldCount() < n && performance.now() < deadline) await sleep(20);
    const held = heldCount();
    const heldSeconds = (performance.now() - created) / 1000;
    const heldUsage = await usage(pid);
    const rushApi = apiTotal() - rushApi0;
    const rushByMethod = (await byMethod()).map((v, i) => v - (rushByMethod0[i] ?? 0));
    stopWatch.abort();
    await watch.stop();
    await transport.close();
    const reconciles = await counter('controller_runtime_reconcile_total', 'controller="berthlease"');
    const requeues = await counter('controller_runtime_reconcile_total', 'result="requeue"');
    const errors = await counter('controller_runtime_reconcile_errors_total', 'controller="berthlease"');
    const retries = await counter('workqueue_retries_total', 'name="berthlease"');
    log(`leases: ${held}/${n} held ${heldSeconds.toFixed(2)} s after the first create`);

    // Steady state: one heartbeat to settle, then the window.
    await sleep(opts.heartbeatSeconds * 1000);
    const api0 = apiTotal();
    const writes0 = statusWrites.hits();
    const central0 = await centralRequests();
    const operator0 = await usage(pid);
    const bench0 = process.cpuUsage();
    const t0 = performance.now();
    await sleep(opts.heartbeats * opts.heartbeatSeconds * 1000);
    const seconds = (performance.now() - t0) / 1000;
    const operator1 = await usage(pid);
    const bench = process.cpuUsage(bench0);
    const beats = seconds / opts.heartbeatSeconds;
    const per = (count: number): number => count / n / beats;
    const out: Figures = {
      [`n${n}_create_seconds`]: createSeconds,
      [`n${n}_all_held_seconds`]: held === n ? heldSeconds : Number.NaN,
      [`n${n}_held`]: held,
      // The operator's CPU from the first create until all were held: how busy the rush kept it.
      [`n${n}_operator_cpu_seconds_until_held`]: heldUsage.cpuSeconds - startedUsage.cpuSeconds,
      [`n${n}_reconciles_per_lease_until_held`]: reconciles / n,
      [`n${n}_requeues_per_lease_until_held`]: requeues / n,
      [`n${n}_reconcile_errors_per_lease_until_held`]: errors / n,
      [`n${n}_delayed_adds_per_lease_until_held`]: retries / n,
      // What the rush asked of the API server, per lease.
      [`n${n}_api_requests_per_lease_until_held`]: rushApi / n,
      ...Object.fromEntries(
        METHODS.map((m, i) => [
          `n${n}_api_${m.toLowerCase()}_requests_per_lease_until_held`,
          (rushByMethod[i] ?? 0) / n,
        ]),
      ),
      [`n${n}_api_requests_per_lease_per_heartbeat`]: per(apiTotal() - api0),
      [`n${n}_status_writes_per_lease_per_heartbeat`]: per(statusWrites.hits() - writes0),
      [`n${n}_central_requests_per_lease_per_heartbeat`]: per((await centralRequests()) - central0),
      [`n${n}_operator_cpu_seconds_per_minute`]:
        ((operator1.cpuSeconds - operator0.cpuSeconds) / seconds) * 60,
      [`n${n}_operator_rss_mib`]: operator1.rssMib,
      [`n${n}_operator_rss_before_leases_mib`]: idleRssMib,
      // Live JavaScript data, without the heap V8 keeps because nothing limits its memory here (in a
      // container the 256Mi limit makes V8 collect sooner).
      [`n${n}_operator_heap_used_mib`]: mib(await gauge('nodejs_heap_size_used_bytes')),
      [`n${n}_bench_process_cpu_seconds_per_minute`]: ((bench.user + bench.system) / 1e6 / seconds) * 60,
      [`n${n}_bench_process_rss_mib`]: mib(process.memoryUsage().rss),
    };
    log(`leases: ${JSON.stringify(out)}`);
    return out;
  } finally {
    api?.close();
    if (operator) {
      operator.kill('SIGKILL');
      await operator.exited;
    }
    await cluster?.stop();
    await central.stop();
  }
}

export async function benchLeases(opts: LeasesBenchOptions, log: (msg: string) => void): Promise<Figures> {
  const out: Figures = {
    heartbeat_interval_seconds: opts.heartbeatSeconds,
    ttl_seconds: opts.ttlSeconds,
    steady_state_window_heartbeats: opts.heartbeats,
    operator:
      'berth-operator run in a child process (leader election, workload admission on, node taint guard off)',
    api_server:
      'a real kube-apiserver and etcd (OperatorCluster); the operator reaches it as its ServiceAccount through an ApiProxy in this process, which counts its requests',
  };
  const entry: Entry = {};
  if (opts.asShipped !== false) {
    log('leases: building the operator as the image ships it (npm run build)');
    entry.main = build(join(process.cwd(), 'build/bench'));
  }
  entry.env = opts.env ?? (opts.asShipped !== false ? shippedEnv() : {});
  out.operator_entry = entry.main === undefined ? 'src/main.ts (type stripping)' : 'compiled (npm run build)';
  out.operator_env = Object.entries(entry.env)
    .map(([k, v]) => `${k}=${v}`)
    .join(' ');
  for (const n of opts.sizes) Object.assign(out, await one(n, opts, entry, log));
  const maxN = Math.max(...opts.sizes);
  const heldS = out[`n${maxN}_all_held_seconds`] as number;
  out[`target_n${maxN}_held_within_15_seconds`] = heldS <= 15 ? 'met' : 'missed';
  // A window of k heartbeats holds k or k+1 of each lease's (phase-shifted) heartbeats: allow for that
  // edge effect (1/k) but not for a second write per heartbeat.
  out.target_at_most_1_status_write_per_lease_per_heartbeat = opts.sizes.every(
    (n) => (out[`n${n}_status_writes_per_lease_per_heartbeat`] as number) <= 1 + 1 / opts.heartbeats / 2,
  )
    ? 'met'
    : 'missed';
  out.target_operator_rss_at_most_150_mib = opts.sizes.every(
    (n) => (out[`n${n}_operator_rss_mib`] as number) <= 150,
  )
    ? 'met'
    : 'missed';
  return out;
}
