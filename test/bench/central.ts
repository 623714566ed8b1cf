// Central lease API benchmark: acquire and renew latency (p50/p99) and throughput per store backend at
// two sizes (100 and 2,000 leases, the Go project's sizing target; --quick: 20 and 200), side by side
// in one run. Each backend is served by an in-process central server over HTTPS (it serves nothing else)
// with keep-alive connections and a fixed number of requests in flight: TLS is paid once per connection,
// so the figures compare the stores.
// Backends: mem, postgres (BERTH_TEST_PG_DSN, or a throwaway cluster started by .ci/postgres.sh;
// skipped with a warning when neither works), k8s against a real kube-apiserver and etcd on this machine
// (hack/controlplane; the store acts as the admin) with the default client-side limit (500 qps / burst
// 1000) and without it (qps 0). PostgreSQL and the control plane run in their own processes, as a
// database and an API server would; client and central server share this one. The k8s figures are those
// of a real API server (etcd writes, admission, authorization).
// Baseline in the same run: the lease manager on the memory store called directly, no HTTP (the floor).
import { Agent, request } from 'node:https';
import { CoreV1Api } from '@kubernetes/client-node';
import { K8sLeaseStore } from '../../src/central/k8sstore.ts';
import { LeaseManager } from '../../src/central/manager.ts';
import { MemoryStore } from '../../src/central/memstore.ts';
import { startCentralServer } from '../../src/central/server.ts';
import { SqlStore } from '../../src/central/sql/store.ts';
import type { Store } from '../../src/central/store.ts';
import { createLogger } from '../../src/observability/logger.ts';
import { centralTls } from '../helpers/central-tls.ts';
import { testPostgres } from '../integration/central/postgres.ts';
import { adminKubeConfig, benchControlPlane, describeServer } from './controlplane.ts';

export interface CentralBenchOptions {
  sizes: number[];
  /** Requests in flight. */
  concurrency?: number;
}

type Op = (i: number) => Promise<void>;

interface PhaseResult {
  p50: number;
  p99: number;
  opsPerSecond: number;
}

const quantile = (sorted: number[], q: number): number =>
  sorted[Math.min(sorted.length - 1, Math.floor(q * sorted.length))] ?? Number.NaN;

/** Runs op(0..n-1) with `concurrency` in flight; latency per op and overall throughput. */
async function phase(n: number, concurrency: number, op: Op): Promise<PhaseResult> {
  const latencies: number[] = [];
  let next = 0;
  const started = performance.now();
  await Promise.all(
    Array.from({ length: Math.min(concurrency, n) }, async () => {
      for (let i = next++; i < n; i = next++) {
        const t = performance.now();
        await op(i);
        latencies.push(performance.now() - t);
      }
    }),
  );
  const elapsed = performance.now() - started;
  latencies.sort((a, b) => a - b);
  return {
    p50: quantile(latencies, 0.5),
    p99: quantile(latencies, 0.99),
    opsPerSecond: n / (elapsed / 1000),
  };
}

function httpClient(baseUrl: string, concurrency: number) {
  const agent = new Agent({ keepAlive: true, maxSockets: concurrency });
  const url = new URL(baseUrl);
  const post = (
    path: string,
    body: object,
  ): Promise<{ status: number; json: { acquired?: boolean; fencingToken?: number } }> =>
    new Promise((resolve, reject) => {
      const data = JSON.stringify(body);
      const req = request(
        {
          agent,
          host: url.hostname,
          port: url.port,
          path,
          method: 'POST',
          headers: { 'content-type': 'application/json', 'content-length': Buffer.byteLength(data) },
        },
        (res) => {
          let text = '';
          res.setEncoding('utf8');
          res.on('data', (c: string) => (text += c));
          res.on('end', () => resolve({ status: res.statusCode ?? 0, json: text ? JSON.parse(text) : {} }));
        },
      );
      req.on('error', reject);
      req.end(data);
    });
  return { post, close: () => agent.destroy() };
}

/** The lease operations of one backend: over HTTP, or direct manager calls for the baseline. */
interface Target {
  acquire(i: number, round: string): Promise<number>;
  renew(i: number, round: string, token: number): Promise<void>;
  close(): Promise<void>;
}

async function httpTarget(store: Store, concurrency: number): Promise<Target> {
  const server = await startCentralServer({
    tls: await centralTls(),
    store,
    logger: createLogger({ level: 'silent' }),
    gc: false,
  });
  const client = httpClient(server.url, concurrency);
  const path = (round: string, i: number, op: string) =>
    `/v1alpha1/namespaces/bench-${round}/leases/lease-${i}/${op}`;
  return {
    async acquire(i, round) {
      const res = await client.post(path(round, i, 'acquire'), { holder: `holder-${i}`, ttlSeconds: 60 });
      if (res.status !== 200 || !res.json.acquired) throw new Error(`acquire ${i}: HTTP ${res.status}`);
      return res.json.fencingToken!;
    },
    async renew(i, round, token) {
      const res = await client.post(path(round, i, 'renew'), {
        holder: `holder-${i}`,
        fencingToken: token,
        ttlSeconds: 60,
      });
      if (res.status !== 200 || !res.json.acquired) throw new Error(`renew ${i}: HTTP ${res.status}`);
    },
    async close() {
      client.close();
      await server.stop();
    },
  };
}

function managerTarget(): Target {
  const manager = new LeaseManager({ store: new MemoryStore() });
  const key = (round: string, i: number) => ({ namespace: `bench-${round}`, name: `lease-${i}` });
  return {
    async acquire(i, round) {
      const r = await manager.acquire(key(round, i), `holder-${i}`, 60_000);
      if (!r.acquired) throw new Error(`acquire ${i} refused`);
      return r.fencingToken;
    },
    async renew(i, round, token) {
      const r = await manager.renew(key(round, i), `holder-${i}`, token, 60_000);
      if (!r.acquired) throw new Error(`renew ${i} refused`);
    },
    close: async () => {},
  };
}

async function measure(
  name: string,
  target: Target,
  sizes: number[],
  concurrency: number,
  out: Record<string, number | string>,
  log: (msg: string) => void,
): Promise<void> {
  try {
    for (const n of sizes) {
      const round = String(n);
      const tokens: number[] = new Array(n);
      const acquire = await phase(n, concurrency, async (i) => {
        tokens[i] = await target.acquire(i, round);
      });
      const renew = await phase(n, concurrency, (i) => target.renew(i, round, tokens[i]!));
      for (const [op, r] of [
        ['acquire', acquire],
        ['renew', renew],
      ] as const) {
        out[`${name}_${n}_${op}_p50_ms`] = r.p50;
        out[`${name}_${n}_${op}_p99_ms`] = r.p99;
        out[`${name}_${n}_${op}_per_second`] = r.opsPerSecond;
      }
      log(
        `central: ${name.padEnd(22)} ${String(n).padStart(5)} leases  acquire p50 ${acquire.p50.toFixed(2)} ms p99 ${acquire.p99.toFixed(2)} ms ${acquire.opsPerSecond.toFixed(0)}/s  renew p50 ${renew.p50.toFixed(2)} ms p99 ${renew.p99.toFixed(2)} ms ${renew.opsPerSecond.toFixed(0)}/s`,
      );
    }
  } finally {
    await target.close();
  }
}

export async function benchCentral(
  opts: CentralBenchOptions,
  log: (msg: string) => void,
): Promise<Record<string, number | string>> {
  const concurrency = opts.concurrency ?? 32;
  const out: Record<string, number | string> = { concurrency };
  await measure('baseline_manager_mem', managerTarget(), opts.sizes, concurrency, out, log);
  await measure('mem', await httpTarget(new MemoryStore(), concurrency), opts.sizes, concurrency, out, log);

  const pg = await testPostgres('central benchmark (postgres)');
  if (pg.ok) {
    const schema = await pg.pg.createSchema();
    try {
      const store = await SqlStore.open({ driver: 'postgres', dsn: schema.dsn, maxConnections: concurrency });
      await measure('postgres', await httpTarget(store, concurrency), opts.sizes, concurrency, out, log);
    } finally {
      await schema.drop();
      await pg.pg.stop();
    }
  } else {
    log(`central: postgres skipped: ${pg.reason}`);
  }

  const cp = await benchControlPlane();
  try {
    out.k8s_server = describeServer(cp);
    const kc = adminKubeConfig(cp);
    const core = kc.makeApiClient(CoreV1Api);
    for (const [name, qps] of [
      ['k8s_default_limits', undefined],
      ['k8s_unthrottled', 0],
    ] as const) {
      await core.createNamespace({ body: { metadata: { name: name.replaceAll('_', '-') } } });
      const store = new K8sLeaseStore({ kc, namespace: name.replaceAll('_', '-'), qps });
      await measure(name, await httpTarget(store, concurrency), opts.sizes, concurrency, out, log);
    }
  } finally {
    await cp.stop();
  }
  return out;
}
