// NodeTaintGuard benchmark: N Nodes, each with a Ready agent Pod, in a sandbox API server running in its own
// process; the guard runs in this process as the operator runs it (informers + controller over the
// project's KubeTransport). Measures the time from start until the initial sync is processed (every Node
// reconciled once, queue empty), reconciles and Node writes at steady state (writes must be zero; counted
// as Nodes whose resourceVersion changed across the window), the time from an agent going NotReady to the
// taint minus the grace, and RSS. Baseline in the same run: this process's RSS before the guard started.
import { Agent, request } from 'node:https';
import type { KubeConfig } from '@kubernetes/client-node';
import { parseFlags } from '../../src/cli.ts';
import { KubeTransport } from '../../src/kube/client.ts';
import { nodeTaintFlags, parseNodeTaintConfig } from '../../src/nodetaint/config.ts';
import { NodeTaintGuard } from '../../src/nodetaint/controller.ts';
import { createRegistry } from '../../src/observability/metrics.ts';
import { sandboxProcess } from './central.ts';

type Figures = Record<string, number | string | boolean>;

export interface NodeTaintBenchOptions {
  nodes: number;
  graceMs: number;
  steadySeconds: number;
}

const AGENT_NS = 'aether-system';
const mib = (bytes: number): number => bytes / 1024 / 1024;
const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

function client(kc: KubeConfig): {
  call(method: string, path: string, body?: unknown, contentType?: string): Promise<unknown>;
  close(): void;
} {
  const cluster = kc.getCurrentCluster();
  const user = kc.getCurrentUser();
  const url = new URL(cluster?.server ?? '');
  const ca = cluster?.caData ? Buffer.from(cluster.caData, 'base64').toString('utf8') : undefined;
  const agent = new Agent({ keepAlive: true, maxSockets: 16, ...(ca ? { ca } : {}) });
  return {
    call: (method, path, body, contentType = 'application/json') =>
      new Promise((resolve, reject) => {
        const data = body === undefined ? undefined : JSON.stringify(body);
        const req = request(
          {
            agent,
            host: url.hostname,
            port: url.port,
            path,
            method,
            headers: {
              Authorization: `Bearer ${user?.token ?? ''}`,
              ...(data ? { 'Content-Type': contentType, 'Content-Length': Buffer.byteLength(data) } : {}),
            },
          },
          (res) => {
            const chunks: Buffer[] = [];
            res.on('data', (c: Buffer) => chunks.push(c));
            res.on('end', () => {
              const text = Buffer.concat(chunks).toString('utf8');
              if ((res.statusCode ?? 0) >= 300)
                reject(new Error(`${method} ${path}: HTTP ${res.statusCode} ${text.slice(0, 300)}`));
              else resolve(JSON.parse(text));
            });
          },
        );
        req.on('error', reject);
        req.end(data);
      }),
    close: () => agent.destroy(),
  };
}

async function inBatches(count: number, batch: number, fn: (i: number) => Promise<unknown>): Promise<void> {
  for (let i = 0; i < count; i += batch)
    await Promise.all(Array.from({ length: Math.min(batch, count - i) }, (_, j) => fn(i + j)));
}

const readyStatus = (ready: boolean) => ({
  status: {
    phase: 'Running',
    conditions: [
      {
        type: 'Ready',
        status: ready ? 'True' : 'False',
        lastTransitionTime: new Date().toISOString().replace(/\.\d+Z$/, 'Z'),
      },
    ],
  },
});

export async function benchNodeTaint(
  opts: NodeTaintBenchOptions,
  log: (msg: string) => void,
): Promise<Figures> {
  const sandbox = await sandboxProcess();
  const api = client(sandbox.kc);
  try {
    await api.call('POST', '/api/v1/namespaces', { metadata: { name: AGENT_NS } });
    log(`nodetaint: creating ${opts.nodes} nodes with a Ready agent pod each`);
    const setupStart = performance.now();
    await inBatches(opts.nodes, 16, (i) =>
      api.call('POST', '/api/v1/nodes', { metadata: { name: `node-${i}` } }),
    );
    await inBatches(opts.nodes, 16, async (i) => {
      await api.call('POST', `/api/v1/namespaces/${AGENT_NS}/pods`, {
        metadata: { name: `agent-${i}`, labels: { 'app.kubernetes.io/name': 'aether-agent' } },
        spec: { nodeName: `node-${i}`, containers: [{ name: 'agent', image: 'aether/agent:1' }] },
      });
      await api.call(
        'PATCH',
        `/api/v1/namespaces/${AGENT_NS}/pods/agent-${i}/status`,
        readyStatus(true),
        'application/merge-patch+json',
      );
    });
    const setupSeconds = (performance.now() - setupStart) / 1000;
    global.gc?.();
    const baselineRss = process.memoryUsage().rss;

    const config = parseNodeTaintConfig(
      parseFlags({ name: 'run', summary: '', flags: nodeTaintFlags }, [
        '--node-taint-guard',
        `--agent-namespace=${AGENT_NS}`,
        `--taint-grace=${opts.graceMs}ms`,
      ]),
      { operatorNamespace: 'berth-system' },
    );
    const registry = createRegistry();
    const metric = async (name: string): Promise<number> =>
      ((await registry.getSingleMetric(name)?.get())?.values ?? []).reduce((s, v) => s + v.value, 0);
    const transport = new KubeTransport(sandbox.kc);
    const guard = new NodeTaintGuard({ config, transport, registry });
    const stop = new AbortController();
    const t0 = performance.now();
    await guard.start(stop.signal);
    const cachesSeconds = (performance.now() - t0) / 1000;
    while (
      (await metric('controller_runtime_reconcile_total')) < opts.nodes ||
      (await metric('workqueue_depth')) > 0
    )
      await sleep(20);
    const syncSeconds = (performance.now() - t0) / 1000;
    log(`nodetaint: initial sync of ${opts.nodes} nodes processed in ${syncSeconds.toFixed(2)} s`);

    // Steady state.
    await sleep(500);
    type NodeList = { items: { metadata: { name: string; resourceVersion: string } }[] };
    const versions = async (): Promise<Map<string, string>> =>
      new Map(
        ((await api.call('GET', '/api/v1/nodes')) as NodeList).items.map((n) => [
          n.metadata.name,
          n.metadata.resourceVersion,
        ]),
      );
    const rv0 = await versions();
    const rec0 = await metric('controller_runtime_reconcile_total');
    const cpu0 = process.cpuUsage();
    const s0 = performance.now();
    await sleep(opts.steadySeconds * 1000);
    const steadySeconds = (performance.now() - s0) / 1000;
    const cpu = process.cpuUsage(cpu0);
    const reconciles = (await metric('controller_runtime_reconcile_total')) - rec0;
    const rv1 = await versions();
    const writes = [...rv1].filter(([name, rv]) => rv0.get(name) !== rv).length;
    const rss = process.memoryUsage().rss;

    // One agent goes NotReady: time until its node carries the taint, minus the grace.
    const victim = `node-${Math.floor(opts.nodes / 2)}`;
    const n0 = performance.now();
    await api.call(
      'PATCH',
      `/api/v1/namespaces/${AGENT_NS}/pods/agent-${Math.floor(opts.nodes / 2)}/status`,
      readyStatus(false),
      'application/merge-patch+json',
    );
    let taintMs = Number.NaN;
    while (performance.now() - n0 < opts.graceMs + 30_000) {
      const node = (await api.call('GET', `/api/v1/nodes/${victim}`)) as {
        spec?: { taints?: { key: string }[] };
      };
      if ((node.spec?.taints ?? []).some((t) => t.key === config.taint.key)) {
        taintMs = performance.now() - n0;
        break;
      }
      await sleep(20);
    }
    stop.abort();
    await guard.stop();
    await transport.close();
    const out: Figures = {
      nodes: opts.nodes,
      agent_pods: opts.nodes,
      setup_seconds: setupSeconds,
      caches_synced_seconds: cachesSeconds,
      initial_sync_processed_seconds: syncSeconds,
      steady_state_window_seconds: steadySeconds,
      steady_state_reconciles_per_second: reconciles / steadySeconds,
      steady_state_node_writes: writes,
      steady_state_cpu_seconds_per_minute: ((cpu.user + cpu.system) / 1e6 / steadySeconds) * 60,
      grace_ms: opts.graceMs,
      not_ready_to_taint_ms: taintMs,
      not_ready_to_taint_after_grace_ms: taintMs - opts.graceMs,
      baseline_rss_before_guard_mib: mib(baselineRss),
      rss_mib: mib(rss),
      rss_growth_over_baseline_mib: mib(rss - baselineRss),
    };
    out[`target_${opts.nodes}_nodes_synced_within_5_seconds`] = syncSeconds <= 5 ? 'met' : 'missed';
    out.target_zero_writes_at_steady_state = writes === 0 ? 'met' : 'missed';
    out.target_taint_within_grace_plus_1_second = taintMs - opts.graceMs <= 1000 ? 'met' : 'missed';
    out.target_rss_at_most_200_mib = mib(rss - baselineRss) <= 200 ? 'met' : 'missed';
    return out;
  } finally {
    api.close();
    await sandbox.stop();
  }
}
