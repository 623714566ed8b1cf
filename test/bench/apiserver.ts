// API server benchmark (of the real control plane the tests run on): hold
// 5,000 Nodes and 20,000 Pods, then measure list, selector list costs through client-node over HTTPS.
// The figures are those of kube-apiserver and etcd (no fsync) on this machine, with the real controllers
// running: they describe the test rig, not the product. Memory is the growth of the kube-apiserver and
// etcd processes (RSS) across the creates. Baseline in the same run: JSON round trip of the same objects
// (the floor any JSON API server pays to serve them).
import { readFile } from 'node:fs/promises';
import { Agent, request } from 'node:https';
import { CoreV1Api, type V1Pod } from '@kubernetes/client-node';
import type { ControlPlane } from '../../hack/controlplane/controlplane.ts';
import {
  adminKubeConfig,
  benchControlPlane,
  describeServer,
  KUBELETLESS_NODES,
  kubeletlessNode,
} from './controlplane.ts';

/**
 * Bulk creation over keep-alive connections: client-node 2.x opens a new TLS connection per request,
 * which at 25,000 creates exhausts ephemeral ports and measures TLS handshakes, not the server.
 */
function keepAliveClient(cp: ControlPlane): {
  post(path: string, body: unknown): Promise<void>;
  close(): void;
} {
  const agent = new Agent({ keepAlive: true, maxSockets: 16, ca: cp.caCert });
  const url = new URL(cp.url);
  return {
    post: (path, body) =>
      new Promise((resolve, reject) => {
        const data = JSON.stringify(body);
        const req = request(
          {
            agent,
            host: url.hostname,
            port: url.port,
            path,
            method: 'POST',
            headers: {
              Authorization: `Bearer ${cp.adminToken}`,
              'Content-Type': 'application/json',
              'Content-Length': Buffer.byteLength(data),
            },
          },
          (res) => {
            res.resume();
            res.on('end', () =>
              res.statusCode === 201 ? resolve() : reject(new Error(`POST ${path}: HTTP ${res.statusCode}`)),
            );
          },
        );
        req.on('error', reject);
        req.end(data);
      }),
    close: () => agent.destroy(),
  };
}

export interface ApiServerBenchOptions {
  nodes: number;
  pods: number;
}

/** Bound to its Node at creation: the scheduler leaves it alone. */
const pod = (i: number, nodes: number): V1Pod => ({
  metadata: { name: `pod-${i}`, labels: { app: `app-${i % 50}`, tier: i % 2 ? 'web' : 'db' } },
  spec: {
    nodeName: `node-${i % nodes}`,
    containers: [{ name: 'app', image: 'nginx:1.27', ports: [{ containerPort: 80 }] }],
  },
});

async function timed<T>(fn: () => Promise<T>): Promise<{ ms: number; value: T }> {
  const start = performance.now();
  const value = await fn();
  return { ms: performance.now() - start, value };
}

async function inBatches(count: number, batch: number, fn: (i: number) => Promise<unknown>): Promise<void> {
  for (let i = 0; i < count; i += batch) {
    await Promise.all(Array.from({ length: Math.min(batch, count - i) }, (_, j) => fn(i + j)));
  }
}

/** Resident memory of the control plane's `name` process, MiB. */
async function rssMib(cp: ControlPlane, name: string): Promise<number> {
  const pid = cp.components.find((c) => c.name === name)?.pid;
  if (pid === undefined) return Number.NaN;
  const status = await readFile(`/proc/${pid}/status`, 'utf8');
  return Number(/VmRSS:\s+(\d+)/.exec(status)?.[1] ?? Number.NaN) / 1024;
}

export async function benchApiServer(
  opts: ApiServerBenchOptions,
  log: (msg: string) => void,
): Promise<Record<string, number | string>> {
  const cp = await benchControlPlane(KUBELETLESS_NODES);
  try {
    const core = adminKubeConfig(cp).makeApiClient(CoreV1Api);
    const bulk = keepAliveClient(cp);
    const rssBefore = { apiserver: await rssMib(cp, 'kube-apiserver'), etcd: await rssMib(cp, 'etcd') };
    log(`apiserver: creating ${opts.nodes} nodes and ${opts.pods} pods`);
    const createNodes = await timed(() =>
      inBatches(opts.nodes, 16, (i) => bulk.post('/api/v1/nodes', kubeletlessNode(i))),
    );
    const createPods = await timed(() =>
      inBatches(opts.pods, 16, (i) => bulk.post('/api/v1/namespaces/default/pods', pod(i, opts.nodes))),
    );
    bulk.close();
    const rssAfter = { apiserver: await rssMib(cp, 'kube-apiserver'), etcd: await rssMib(cp, 'etcd') };
    const listAll = await timed(() => core.listNamespacedPod({ namespace: 'default' }));
    const listByNode = await timed(() =>
      core.listNamespacedPod({ namespace: 'default', fieldSelector: `spec.nodeName=node-1` }),
    );
    const listByLabel = await timed(() =>
      core.listNamespacedPod({ namespace: 'default', labelSelector: 'app=app-7,tier=web' }),
    );
    const items = listAll.value.items;
    const floor = await timed(async () => JSON.parse(JSON.stringify(items)) as unknown);
    return {
      server: describeServer(cp),
      nodes: opts.nodes,
      pods: opts.pods,
      create_nodes_per_second: opts.nodes / (createNodes.ms / 1000),
      create_pods_per_second: opts.pods / (createPods.ms / 1000),
      // The sandbox's figure was its heap (in this process); a real server's is its processes' RSS.
      kube_apiserver_rss_growth_mib: rssAfter.apiserver - rssBefore.apiserver,
      etcd_rss_growth_mib: rssAfter.etcd - rssBefore.etcd,
      list_all_pods_ms: listAll.ms,
      list_pods_by_node_field_selector_ms: listByNode.ms,
      list_pods_by_label_selector_ms: listByLabel.ms,
      baseline_json_roundtrip_all_pods_ms: floor.ms,
      list_all_pods_ratio: listAll.ms / floor.ms,
    };
  } finally {
    await cp.stop();
  }
}
