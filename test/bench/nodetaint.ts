// NodeTaintGuard benchmark: N Nodes, each with a Ready agent Pod, in a real control plane (hack/controlplane,
// its own processes); the guard runs IN ITS OWN PROCESS, as deployed: `berth-operator run` compiled as the
// image ships it (scripts/build.ts, the image's environment and the install's NODE_OPTIONS), with only the
// guard enabled (no leader election, no BerthLease controller, no webhooks), as the admin. Measures the time
// from the process's spawn until its initial sync is processed (every Node reconciled once, queue empty; read
// from its /metrics), reconciles and Node writes at steady state (writes must be zero), the time from an
// agent going NotReady to the taint minus the grace, and the guard process's own RSS (/proc: its resident
// memory at steady state, and its peak), which is what the RSS goal is about.
// The Nodes and Pods are the bench's own, not KWOK's: KWOK's Node heartbeats (a status write per Node every
// 10 to 20 minutes) would be counted as Node writes, and its Pod stages would own the agents' status,
// which the bench writes itself. The Nodes register Ready and no kubelet renews their Leases, so the
// control plane keeps the node lifecycle controller away from them (KUBELETLESS_NODES). Node writes are
// counted two ways: the guard's own write requests (the target), counted by an ApiProxy (test/helpers) that
// only the guard's requests pass (it adds a hop in this process to each of them), and Nodes whose
// resourceVersion changed across the window, by whoever wrote them (kube-controller-manager's ttl
// controller, for one).

import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { build } from '../../scripts/build.ts';
import { parseFlags } from '../../src/cli.ts';
import { nodeTaintFlags, parseNodeTaintConfig } from '../../src/nodetaint/config.ts';
import { ApiProxy } from '../helpers/api-proxy.ts';
import { shippedEnv } from '../helpers/image.ts';
import { type OperatorProcess, startOperatorProcess } from '../helpers/operator-process.ts';
import { adminApi } from './admin-api.ts';
import {
  benchControlPlane,
  describeServer,
  KUBELETLESS_NODES,
  kubeletlessNode,
  kubeNow,
} from './controlplane.ts';
import { metricSum, scrapeMetrics, usage } from './proc.ts';

type Figures = Record<string, number | string | boolean>;

export interface NodeTaintBenchOptions {
  nodes: number;
  graceMs: number;
  steadySeconds: number;
}

const AGENT_NS = 'aether-system';
const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

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
  const api = adminApi({ url: cp.url, ca: cp.caCert, token: cp.adminToken, maxSockets: 16 });
  let proxy: ApiProxy | undefined;
  let guard: OperatorProcess | undefined;
  let dir: string | undefined;
  try {
    await api.json('POST', '/api/v1/namespaces', { metadata: { name: AGENT_NS } });
    // The ServiceAccount admission plugin refuses Pods until the namespace's default account exists.
    const deadline = performance.now() + 60_000;
    while (
      !(await api.json('GET', `/api/v1/namespaces/${AGENT_NS}/serviceaccounts/default`).then(
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
    await inBatches(opts.nodes, 16, (i) => api.json('POST', '/api/v1/nodes', kubeletlessNode(i)));
    await inBatches(opts.nodes, 16, async (i) => {
      await api.json('POST', `/api/v1/namespaces/${AGENT_NS}/pods`, {
        metadata: { name: `agent-${i}`, labels: { 'app.kubernetes.io/name': 'aether-agent' } },
        spec: { nodeName: `node-${i}`, containers: [{ name: 'agent', image: 'aether/agent:1' }] },
      });
      await api.json(
        'PATCH',
        `/api/v1/namespaces/${AGENT_NS}/pods/agent-${i}/status`,
        readyStatus(true),
        'application/merge-patch+json',
      );
    });
    const setupSeconds = (performance.now() - setupStart) / 1000;

    const flags = ['--node-taint-guard', `--agent-namespace=${AGENT_NS}`, `--taint-grace=${opts.graceMs}ms`];
    const config = parseNodeTaintConfig(
      parseFlags({ name: 'run', summary: '', flags: nodeTaintFlags }, flags),
      { operatorNamespace: 'berth-system' },
    );
    // Only the guard's requests pass the proxy: every Node write it counts is the guard's.
    proxy = await ApiProxy.start({ url: cp.url, ca: cp.ca, adminToken: cp.adminToken });
    const nodeWrites = proxy.inject({ resource: 'nodes', verbs: ['create', 'update', 'patch', 'delete'] });
    dir = await mkdtemp(join(tmpdir(), 'berth-bench-nodetaint-'));
    const kubeconfig = join(dir, 'kubeconfig');
    await writeFile(kubeconfig, proxy.kubeconfigFor(cp.kubeconfig), { mode: 0o600 });
    log('nodetaint: building the operator as the image ships it (npm run build)');
    const main = build(join(process.cwd(), 'build/bench'));
    const env = shippedEnv();
    const t0 = performance.now();
    guard = startOperatorProcess({
      kubeconfig,
      namespace: 'berth-system',
      main,
      env,
      args: flags,
      name: 'nodetaint',
    });
    const pid = guard.child.pid ?? 0;
    const metricsAt = await guard.metrics();
    const metric = async (name: string): Promise<number> => metricSum(await scrapeMetrics(metricsAt), name);
    await guard.ready(60_000);
    const readySeconds = (performance.now() - t0) / 1000;
    const syncDeadline = performance.now() + 120_000;
    while (
      (await metric('controller_runtime_reconcile_total')) < opts.nodes ||
      (await metric('workqueue_depth')) > 0
    ) {
      if (guard.hasExited()) throw new Error(`nodetaint: the guard exited (${guard.stderr().slice(-500)})`);
      if (performance.now() > syncDeadline) throw new Error('nodetaint: no initial sync within 120 s');
      await sleep(20);
    }
    const syncSeconds = (performance.now() - t0) / 1000;
    log(
      `nodetaint: initial sync of ${opts.nodes} nodes processed ${syncSeconds.toFixed(2)} s after the spawn`,
    );

    // Steady state.
    await sleep(500);
    type NodeList = { items: { metadata: { name: string; resourceVersion: string } }[] };
    const versions = async (): Promise<Map<string, string>> =>
      new Map(
        ((await api.json('GET', '/api/v1/nodes')) as NodeList).items.map((n) => [
          n.metadata.name,
          n.metadata.resourceVersion,
        ]),
      );
    const rv0 = await versions();
    const rec0 = await metric('controller_runtime_reconcile_total');
    const guardWrites0 = nodeWrites.hits();
    const cpu0 = await usage(pid);
    const s0 = performance.now();
    await sleep(opts.steadySeconds * 1000);
    const steadySeconds = (performance.now() - s0) / 1000;
    const steady = await usage(pid);
    const reconciles = (await metric('controller_runtime_reconcile_total')) - rec0;
    const guardWrites = nodeWrites.hits() - guardWrites0;
    const rv1 = await versions();
    const changed = [...rv1].filter(([name, rv]) => rv0.get(name) !== rv).length;

    // One agent goes NotReady: time until its node carries the taint, minus the grace.
    const victim = `node-${Math.floor(opts.nodes / 2)}`;
    const n0 = performance.now();
    await api.json(
      'PATCH',
      `/api/v1/namespaces/${AGENT_NS}/pods/agent-${Math.floor(opts.nodes / 2)}/status`,
      readyStatus(false),
      'application/merge-patch+json',
    );
    let taintMs = Number.NaN;
    while (performance.now() - n0 < opts.graceMs + 30_000) {
      const node = (await api.json('GET', `/api/v1/nodes/${victim}`)) as {
        spec?: { taints?: { key: string }[] };
      };
      if ((node.spec?.taints ?? []).some((t) => t.key === config.taint.key)) {
        taintMs = performance.now() - n0;
        break;
      }
      await sleep(20);
    }
    const out: Figures = {
      server: describeServer(cp),
      guard: 'berth-operator run (compiled, the image env), only the node taint guard, in a child process',
      guard_env: Object.entries(env)
        .map(([k, v]) => `${k}=${v}`)
        .join(' '),
      nodes: opts.nodes,
      agent_pods: opts.nodes,
      setup_seconds: setupSeconds,
      ready_seconds: readySeconds,
      initial_sync_processed_seconds: syncSeconds,
      // The sync alone, without the process's start (Node, the modules) before /readyz.
      initial_sync_after_ready_seconds: syncSeconds - readySeconds,
      steady_state_window_seconds: steadySeconds,
      steady_state_reconciles_per_second: reconciles / steadySeconds,
      // The guard's write requests to Nodes, counted by the proxy in front of it.
      steady_state_node_writes: guardWrites,
      steady_state_nodes_changed_by_anyone: changed,
      steady_state_cpu_seconds_per_minute: ((steady.cpuSeconds - cpu0.cpuSeconds) / steadySeconds) * 60,
      grace_ms: opts.graceMs,
      not_ready_to_taint_ms: taintMs,
      not_ready_to_taint_after_grace_ms: taintMs - opts.graceMs,
      guard_rss_mib: steady.rssMib,
      guard_peak_rss_mib: steady.peakRssMib,
    };
    out[`target_${opts.nodes}_nodes_synced_within_5_seconds`] = syncSeconds <= 5 ? 'met' : 'missed';
    out.target_zero_writes_at_steady_state = guardWrites === 0 ? 'met' : 'missed';
    out.target_taint_within_grace_plus_1_second = taintMs - opts.graceMs <= 1000 ? 'met' : 'missed';
    out.target_guard_rss_at_most_200_mib = steady.rssMib <= 200 ? 'met' : 'missed';
    return out;
  } finally {
    api.close();
    if (guard !== undefined) {
      guard.kill('SIGKILL');
      await guard.exited;
    }
    await proxy?.stop();
    if (dir !== undefined) await rm(dir, { recursive: true, force: true });
    await cp.stop();
  }
}
