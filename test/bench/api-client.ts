// API client benchmark: what one GET costs the operator's process in CPU, through the client every
// component of `berth-operator run` uses (KubeTransport: undici's `request` on the dispatcher client-node
// builds from the kubeconfig) against client-node's own path (undici's `fetch`, as its typed clients send,
// on the same dispatcher with the same authentication), on a real control plane. Baseline in the same run:
// the same GET through node:https keep-alive with the same credentials (the floor of a Node.js client).
// Each client sends the same number of GETs of one Namespace, `concurrency` at a time, after a warm-up; CPU
// is this process's user + system time over those GETs, and every client runs twice, interleaved.
import { Agent, request as httpsRequest } from 'node:https';
import { HttpMethod, IsomorphicFetchHttpLibrary, RequestContext } from '@kubernetes/client-node';
import { DispatcherReuse, KubeTransport } from '../../src/kube/transport.ts';
import { adminKubeConfig, benchControlPlane, describeServer } from './controlplane.ts';

export interface ApiClientBenchOptions {
  gets: number;
  concurrency: number;
  rounds: number;
}

const PATH = '/api/v1/namespaces/default';

export async function benchApiClient(
  opts: ApiClientBenchOptions,
  log: (msg: string) => void,
): Promise<Record<string, number | string>> {
  const cp = await benchControlPlane();
  const kc = adminKubeConfig(cp);
  const transport = new KubeTransport(kc);
  const fetchHttp = new IsomorphicFetchHttpLibrary();
  const pool = new DispatcherReuse();
  const user = kc.getCurrentUser();
  const agent = new Agent({
    keepAlive: true,
    ca: cp.caCert,
    cert: Buffer.from(user?.certData ?? '', 'base64'),
    key: Buffer.from(user?.keyData ?? '', 'base64'),
  });
  const url = `${cp.url}${PATH}`;
  const clients: Record<string, () => Promise<void>> = {
    transport: async () => {
      JSON.parse(await (await transport.request({ path: PATH })).text());
    },
    client_node_fetch: async () => {
      const ctx = new RequestContext(url, HttpMethod.GET);
      await kc.applySecurityAuthentication(ctx);
      pool.apply(ctx);
      ctx.setHeaderParam('Accept', 'application/json');
      const res = await fetchHttp.send(ctx).toPromise();
      JSON.parse(await res.body.text());
    },
    floor_node_https: () =>
      new Promise<void>((resolve, reject) => {
        const req = httpsRequest(url, { agent, headers: { Accept: 'application/json' } }, (res) => {
          let text = '';
          res.setEncoding('utf8');
          res.on('data', (chunk: string) => {
            text += chunk;
          });
          res.on('end', () => {
            JSON.parse(text);
            resolve();
          });
          res.on('error', reject);
        });
        req.on('error', reject);
        req.end();
      }),
  };
  const measure = async (send: () => Promise<void>): Promise<{ cpuUs: number; wallMs: number }> => {
    for (let i = 0; i < 100; i++) await send();
    const cpu0 = process.cpuUsage();
    const t0 = performance.now();
    await Promise.all(
      Array.from({ length: opts.concurrency }, async () => {
        for (let i = 0; i < opts.gets / opts.concurrency; i++) await send();
      }),
    );
    const cpu = process.cpuUsage(cpu0);
    return { cpuUs: (cpu.user + cpu.system) / opts.gets, wallMs: (performance.now() - t0) / opts.gets };
  };
  try {
    const out: Record<string, number | string> = {
      server: describeServer(cp),
      gets_per_client_and_round: opts.gets,
      concurrency: opts.concurrency,
      rounds: opts.rounds,
    };
    const best: Record<string, { cpuUs: number; wallMs: number }> = {};
    for (let round = 0; round < opts.rounds; round++) {
      for (const [name, send] of Object.entries(clients)) {
        const m = await measure(send);
        log(`api-client: ${name} round ${round + 1}: ${m.cpuUs.toFixed(0)} us CPU per GET`);
        const prev = best[name];
        if (prev === undefined || m.cpuUs < prev.cpuUs) best[name] = m;
      }
    }
    for (const [name, m] of Object.entries(best)) {
      out[`${name}_cpu_us_per_get`] = m.cpuUs;
      out[`${name}_wall_ms_per_get`] = m.wallMs;
    }
    out.transport_cpu_vs_client_node_fetch = best.transport!.cpuUs / best.client_node_fetch!.cpuUs;
    out.transport_cpu_vs_floor = best.transport!.cpuUs / best.floor_node_https!.cpuUs;
    return out;
  } finally {
    agent.destroy();
    await pool.close();
    await transport.close();
    await cp.stop();
  }
}
