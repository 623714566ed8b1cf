// The admission benchmark's server process (started by admission.ts, pinned to its own core):
//   floor  — a raw node:https server on the same TLS settings that parses the body and answers a fixed
//            allow review echoing the uid (the floor for Node);
//   berth  — the AdmissionServer with kubeWorkloadAdmission's handlers reading the API server through
//            BENCH_KUBECONFIG, logging at info to /dev/null as deployed.
// Env: BENCH_MODE, BENCH_CERT, BENCH_KEY (PEM files), BENCH_KUBECONFIG (berth). Prints `port <n>` on
// stdout; answers each stdin line `reads` with `reads <api reads total> <reviews answered total> <reviews in flight>`.
import { readFileSync } from 'node:fs';
import { createServer } from 'node:https';
import type { AddressInfo } from 'node:net';
import { createInterface } from 'node:readline';
import { KubeConfig } from '@kubernetes/client-node';
import { pino } from 'pino';
import { Registry } from 'prom-client';
import { KubeTransport } from '../../src/kube/transport.ts';
import { createLogger } from '../../src/observability/logger.ts';
import { AdmissionServer, KEEP_ALIVE_TIMEOUT_MS, MAX_BODY_BYTES } from '../../webhooks/server.ts';
import { kubeWorkloadAdmission } from '../../webhooks/workload-admission.ts';
import { SwappableCertificates } from '../fixtures/webhooks/certs.ts';
import { OPERATOR_USER } from '../fixtures/webhooks/objects.ts';

const mode = process.env.BENCH_MODE;
const cert = readFileSync(process.env.BENCH_CERT ?? '');
const key = readFileSync(process.env.BENCH_KEY ?? '');
let readsTotal: () => Promise<string> = async () => '0 0 0';

if (mode === 'floor') {
  const server = createServer(
    { cert, key, minVersion: 'TLSv1.2', keepAliveTimeout: KEEP_ALIVE_TIMEOUT_MS },
    (req, res) => {
      const chunks: Buffer[] = [];
      let size = 0;
      req.on('data', (c: Buffer) => {
        size += c.length;
        if (size <= MAX_BODY_BYTES) chunks.push(c);
      });
      req.on('end', () => {
        const body = JSON.parse(Buffer.concat(chunks).toString('utf8')) as { request?: { uid?: string } };
        const out = JSON.stringify({
          apiVersion: 'admission.k8s.io/v1',
          kind: 'AdmissionReview',
          response: { uid: body.request?.uid ?? '', allowed: true },
        });
        res.writeHead(200, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(out) });
        res.end(out);
      });
    },
  );
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  process.stdout.write(`port ${(server.address() as AddressInfo).port}\n`);
} else if (mode === 'berth') {
  const kc = new KubeConfig();
  kc.loadFromFile(process.env.BENCH_KUBECONFIG ?? '');
  const registry = new Registry();
  const handlers = kubeWorkloadAdmission({
    transport: new KubeTransport(kc),
    operatorUser: OPERATOR_USER,
    scope: 'opt-in',
    registry,
  });
  const logger = createLogger({ level: 'info', destination: pino.destination('/dev/null') });
  const server = new AdmissionServer({
    port: 0,
    host: '127.0.0.1',
    certificates: new SwappableCertificates({ cert, key }),
    handlers,
    registry,
    logger,
  });
  const port = await server.start();
  const total = async (name: string): Promise<number> => {
    const metric = await registry.getSingleMetric(name)?.get();
    return (metric?.values ?? []).reduce((sum, v) => sum + v.value, 0);
  };
  readsTotal = async () =>
    `${await total('berth_webhook_api_reads_total')} ${await total('controller_runtime_webhook_requests_total')} ${await total('controller_runtime_webhook_requests_in_flight')}`;
  process.stdout.write(`port ${port}\n`);
} else {
  process.stderr.write(`admission-server: unknown BENCH_MODE ${mode}\n`);
  process.exit(2);
}

createInterface({ input: process.stdin }).on('line', (line) => {
  if (line.trim() === 'reads') void readsTotal().then((n) => process.stdout.write(`reads ${n}\n`));
});
process.stdin.on('end', () => process.exit(0));
