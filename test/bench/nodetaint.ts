// NodeTaintGuard benchmark: N Nodes, each with a Ready agent Pod, in a real control plane (hack/controlplane,
// its own processes); the guard runs in this process as the operator runs it (informers + controller over
// the project's KubeTransport, as the admin). Measures the time from start until the initial sync is
// processed (every Node reconciled once, queue empty), reconciles and Node writes at steady state (writes
// must be zero), the time from an agent going NotReady to the taint minus the grace, and RSS. Baseline in
// the same run: this process's RSS before the guard started.
// The Nodes and Pods are the bench's own, not KWOK's: KWOK's Node heartbeats (a status write per Node every
// 10 to 20 minutes) would be counted as Node writes, and its Pod stages would own the agents' status,
// which the bench writes itself. The Nodes register Ready and no kubelet renews their Leases, so the
// control plane keeps the node lifecycle controller away from them (KUBELETLESS_NODES). Node writes are
// counted two ways: the guard's own write requests (the target), and Nodes whose resourceVersion changed
// across the window, by whoever wrote them (kube-controller-manager's ttl controller, for one).
import { Agent, request } from 'node:https';
import type { ControlPlane } from '../../hack/controlplane/controlplane.ts';
import { parseFlags } from '../../src/cli.ts';
import { type KubeRequester, KubeTransport } from '../../src/kube/client.ts';
import { nodeTaintFlags, parseNodeTaintConfig } from '../../src/nodetaint/config.ts';
import { NodeTaintGuard } from '../../src/nodetaint/controller.ts';
import { createRegistry } from '../../src/observability/metrics.ts';
import {
  adminKubeConfig,
  benchControlPlane,
  describeServer,
  KUBELETLESS_NODES,
  kubeletlessNode,
  kubeNow,
} from './controlplane.ts';

type Figures = Record<string, number | string | boolean>;

export interface NodeTaintBenchOptions {
  nodes: number;
  graceMs: number;
  steadySeconds: number;
}

const AGENT_NS = 'aether-system';
const mib = (bytes: number): number => bytes / 1024 / 1024;
const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/** The admin's requests over keep-alive connections (bulk set-up, polls). */
function client(cp: ControlPlane): {
  call(method: string, path: string, body?: unknown, contentType?: string): Promise<unknown>;
  close(): void;
} {
  const url = new URL(cp.url);
  const agent = new Agent({ keepAlive: true, maxSockets: 16, ca: cp.caCert });
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
              Authorization: `Bearer ${cp.adminToken}`,
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

/** Counts the Node writes (every request but GET: patches, updates, retries after a conflict). */
function countingNodeWrites(inner: KubeRequester): { transport: KubeRequester; writes(): number } {
  let writes = 0;
  return {
    transport: {
      request(req) {
        if ((req.method ?? 'GET') !== 'GET' && req.path.startsWith('/api/v1/nodes')) writes++;
        return inner.request(req);
      },
    },
    writes: () => writes,
  };
}

const readyStatus = (ready: boolean) => ({
  status: {
    phase: 'Running',
    conditions: [
      {
        type: 'Ready',
        status: ready ? 'True' : 'False',
        lastTransitionTime: kubeNow(),
      },
    ],
  },
});

export async function benchNodeTaint(
  opts: NodeTaintBenchOptions,
  log: (msg: string) => void,
): Promise<Figures> {
  const cp = await benchControlPlane(KUBELETLESS_NODES);
  const api = client(cp);
  try {
    await api.call('POST', '/api/v1/namespaces', { metadata: { name: AGENT_NS } });
    // The ServiceAccount admission plugin refuses Pods until the namespace's default account exists.
    const deadline = performance.now() + 60_000;
    while (
      !(await api.call('GET', `/api/v1/namespaces/${AGENT_NS}/serviceaccounts/default`).then(
        () => true,
        () => false,
      ))
    ) {
      if (performance.now() > deadline)
        throw new Error(`nodetaint: no default ServiceAccount in ${AGENT_NS}`);
      await sleep(50);
    }
    log(`nodetaint: creating ${opts.nodes} nodes with a Ready agent pod each`);
    const setupStart = performance.now();
    await inBatches(opts.nodes, 16, (i) => api.call('POST', '/api/v1/nodes', kubeletlessNode(i)));
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
    const kube = new KubeTransport(adminKubeConfig(cp));
    const counted = countingNodeWrites(kube);
    const guard = new NodeTaintGuard({ config, transport: counted.transport, registry });
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
    const guardWrites0 = counted.writes();
    const cpu0 = process.cpuUsage();
    const s0 = performance.now();
    await sleep(opts.steadySeconds * 1000);
    const steadySeconds = (performance.now() - s0) / 1000;
    const cpu = process.cpuUsage(cpu0);
    const reconciles = (await metric('controller_runtime_reconcile_total')) - rec0;
    const guardWrites = counted.writes() - guardWrites0;
    const rv1 = await versions();
    const changed = [...rv1].filter(([name, rv]) => rv0.get(name) !== rv).length;
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
    await kube.close();
    const out: Figures = {
      server: describeServer(cp),
      nodes: opts.nodes,
      agent_pods: opts.nodes,
      setup_seconds: setupSeconds,
      caches_synced_seconds: cachesSeconds,
      initial_sync_processed_seconds: syncSeconds,
      steady_state_window_seconds: steadySeconds,
      steady_state_reconciles_per_second: reconciles / steadySeconds,
      // The guard's write requests to Nodes (the sandbox counted Nodes whose resourceVersion changed: it
      // had no other writer).
      steady_state_node_writes: guardWrites,
      steady_state_nodes_changed_by_anyone: changed,
      steady_state_cpu_seconds_per_minute: ((cpu.user + cpu.system) / 1e6 / steadySeconds) * 60,
      grace_ms: opts.graceMs,
      not_ready_to_taint_ms: taintMs,
      not_ready_to_taint_after_grace_ms: taintMs - opts.graceMs,
      baseline_rss_before_guard_mib: mib(baselineRss),
      rss_mib: mib(rss),
      rss_growth_over_baseline_mib: mib(rss - baselineRss),
    };
    out[`target_${opts.nodes}_nodes_synced_within_5_seconds`] = syncSeconds <= 5 ? 'met' : 'missed';
    out.target_zero_writes_at_steady_state = guardWrites === 0 ? 'met' : 'missed';
    out.target_taint_within_grace_plus_1_second = taintMs - opts.graceMs <= 1000 ? 'met' : 'missed';
    out.target_rss_at_most_200_mib = mib(rss - baselineRss) <= 200 ? 'met' : 'missed';
    return out;
  } finally {
    api.close();
    await cp.stop();
  }
}
