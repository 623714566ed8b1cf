// The sidecar's liveness endpoint (docs/decisions/0008-helper-probe-over-http.md): `GET /healthy` on the
// probe port, 200 while the lease is confirmed and the marker fresh, else 503 with one line saying why
// (lease lost, or marker stale). Every main container's injected liveness probe asks it, so a dead
// sidecar (connection refused) fails them as Go's stale marker file does.
import type { Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { INJECTION_PROBE_PATH } from '../injection/contract.ts';

// getBuiltinModule: an ESM import of node:http also loads undici's WebSocket (about 8 MiB of RSS).
const { createServer } = process.getBuiltinModule('node:http');

export type ProbeHandler = () => Promise<{ status: 200 | 503; body: string }>;

export interface ProbeServer {
  port: number;
  close(): Promise<void>;
}

/** Listens on every address (the kubelet probes the Pod IP); port 0 picks a free one. */
export function startProbeServer(port: number, handler: ProbeHandler): Promise<ProbeServer> {
  const server: Server = createServer((req, res) => {
    const path = (req.url ?? '').split('?')[0];
    if (path !== INJECTION_PROBE_PATH) {
      res.writeHead(404, { 'content-type': 'text/plain' }).end('not found\n');
      return;
    }
    if (req.method !== 'GET' && req.method !== 'HEAD') {
      res.writeHead(405, { 'content-type': 'text/plain', allow: 'GET, HEAD' }).end('method not allowed\n');
      return;
    }
    handler().then(
      ({ status, body }) => res.writeHead(status, { 'content-type': 'text/plain' }).end(`${body}\n`),
      (err: unknown) =>
        res.writeHead(503, { 'content-type': 'text/plain' }).end(`probe failed: ${(err as Error).message}\n`),
    );
  });
  // The kubelet opens a connection per probe; nothing should keep the sidecar from exiting.
  server.keepAliveTimeout = 1_000;
  return new Promise((resolve, reject) => {
    server.once('error', reject);
    server.listen(port, () => {
      server.off('error', reject);
      resolve({
        port: (server.address() as AddressInfo).port,
        close: () =>
          new Promise<void>((done) => {
            server.close(() => done());
            server.closeAllConnections();
          }),
      });
    });
  });
}
