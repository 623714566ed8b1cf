// Sandbox benchmark: hold 5,000 Nodes and 20,000 Pods, then measure list, selector list and watch fan-out
// costs through client-node over HTTPS. Baseline in the same run: JSON round trip of the same objects
// (the floor any JSON API server pays to serve them).
import { Agent, request } from 'node:https';
import { CoreV1Api, type V1Pod } from '@kubernetes/client-node';
import { type Sandbox, startSandbox } from '../../src/sandbox/index.ts';
import { kubeConfigFrom } from '../helpers/sandbox.ts';

/**
 * Bulk creation over keep-alive connections: client-node 2.x opens a new TLS connection per request,
 * which at 25,000 creates exhausts ephemeral ports and measures TLS handshakes, not the server.
 */
function keepAliveClient(sandbox: Sandbox): {
  post(path: string, body: unknown): Promise<void>;
  close(): void;
} {
  const agent = new Agent({ keepAlive: true, maxSockets: 16, ca: sandbox.caCert });
  const url = new URL(sandbox.url);
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
              Authorization: `Bearer ${sandbox.users.admin.token}`,
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

export interface SandboxBenchOptions {
  nodes: number;
  pods: number;
}

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

export async function benchSandbox(
  opts: SandboxBenchOptions,
  log: (msg: string) => void,
): Promise<Record<string, number>> {
  const heapBefore = process.memoryUsage().heapUsed;
  const sandbox = await startSandbox();
  try {
    const core = kubeConfigFrom(sandbox.kubeconfig).makeApiClient(CoreV1Api);
    const bulk = keepAliveClient(sandbox);
    log(`sandbox: creating ${opts.nodes} nodes and ${opts.pods} pods`);
    const createNodes = await timed(() =>
      inBatches(opts.nodes, 16, (i) => bulk.post('/api/v1/nodes', { metadata: { name: `node-${i}` } })),
    );
    const createPods = await timed(() =>
      inBatches(opts.pods, 16, (i) => bulk.post('/api/v1/namespaces/default/pods', pod(i, opts.nodes))),
    );
    bulk.close();
    global.gc?.();
    const heapAfter = process.memoryUsage().heapUsed;
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
      nodes: opts.nodes,
      pods: opts.pods,
      create_nodes_per_second: opts.nodes / (createNodes.ms / 1000),
      create_pods_per_second: opts.pods / (createPods.ms / 1000),
      heap_growth_mib: (heapAfter - heapBefore) / 1024 / 1024,
      list_all_pods_ms: listAll.ms,
      list_pods_by_node_field_selector_ms: listByNode.ms,
      list_pods_by_label_selector_ms: listByLabel.ms,
      baseline_json_roundtrip_all_pods_ms: floor.ms,
      list_all_pods_ratio: listAll.ms / floor.ms,
    };
  } finally {
    await sandbox.stop();
  }
}
