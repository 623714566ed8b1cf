// Security: every server speaks TLS 1.2+ only (the admission server, the central server, the Kubernetes
// API server the operator talks to, as the control plane runs it), and a slow-loris client (headers
// trickled byte by byte inside TLS, never finished) is cut off by the central server within its header
// timeout while other clients are served.
import { createServer } from 'node:https';
import type { AddressInfo } from 'node:net';
import { connect, type SecureVersion, type TLSSocket } from 'node:tls';
import { Registry } from 'prom-client';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  type CentralServer,
  READ_HEADER_TIMEOUT_MS,
  startCentralServer,
} from '../../../src/central/server.ts';
import { createLogger } from '../../../src/observability/logger.ts';
import { allow } from '../../../webhooks/review.ts';
import { AdmissionServer } from '../../../webhooks/server.ts';
import { SwappableCertificates, type TestPki, testPki } from '../../fixtures/webhooks/certs.ts';
import { centralTls } from '../../helpers/central-tls.ts';
import { TestCluster } from '../../helpers/cluster.ts';
import { eventually } from '../../helpers/eventually.ts';

const silent = createLogger({ level: 'silent' });
let pki: TestPki;
let central: CentralServer;
let admission: AdmissionServer;
let cluster: TestCluster;

beforeAll(async () => {
  pki = await testPki(['localhost', '127.0.0.1']);
  central = await startCentralServer({ tls: await centralTls(), logger: silent, gc: false });
  admission = new AdmissionServer({
    port: 0,
    host: '127.0.0.1',
    certificates: new SwappableCertificates(pki.pair),
    handlers: [{ path: '/review', review: async () => allow() }],
    registry: new Registry(),
    logger: silent,
  });
  await admission.start();
  cluster = await TestCluster.shared();
}, 60_000);

afterAll(async () => {
  await central?.stop();
  await admission?.close();
  await cluster?.stop();
});

/** Negotiated protocol of a handshake pinned to [min, max]; the client itself allows legacy versions. */
function handshake(port: number, min: SecureVersion, max: SecureVersion): Promise<string> {
  return new Promise((resolve, reject) => {
    const socket = connect({
      host: '127.0.0.1',
      port,
      servername: 'localhost',
      rejectUnauthorized: false,
      minVersion: min,
      maxVersion: max,
      // Lets this client actually offer TLS 1.0/1.1, so a refusal comes from the server.
      ciphers: 'DEFAULT@SECLEVEL=0',
    });
    socket.once('secureConnect', () => {
      const protocol = socket.getProtocol() ?? '';
      socket.end();
      resolve(protocol);
    });
    socket.once('error', reject);
  });
}

const portOf = (url: string): number => Number(new URL(url).port);

describe('TLS 1.2+ only', () => {
  it('the test client can speak TLS 1.1 to a server that allows it (control)', async () => {
    const legacy = createServer(
      { cert: pki.pair.cert, key: pki.pair.key, minVersion: 'TLSv1', ciphers: 'DEFAULT@SECLEVEL=0' },
      (_req, res) => res.end(),
    );
    await new Promise<void>((resolve) => legacy.listen(0, '127.0.0.1', resolve));
    try {
      expect(await handshake((legacy.address() as AddressInfo).port, 'TLSv1', 'TLSv1.1')).toBe('TLSv1.1');
    } finally {
      await new Promise((resolve) => legacy.close(resolve));
    }
  });

  const servers: Array<[string, () => number]> = [
    ['admission server', () => admission.port],
    ['central server', () => portOf(central.url)],
    ['Kubernetes API server', () => portOf(cluster.url)],
  ];
  for (const [name, port] of servers) {
    it(`the ${name} refuses TLS 1.0/1.1 and accepts 1.2 and 1.3`, async () => {
      await expect(handshake(port(), 'TLSv1', 'TLSv1.1')).rejects.toThrow(
        /protocol version|unsupported protocol/i,
      );
      await expect(handshake(port(), 'TLSv1', 'TLSv1')).rejects.toThrow(
        /protocol version|unsupported protocol/i,
      );
      expect(await handshake(port(), 'TLSv1.2', 'TLSv1.2')).toBe('TLSv1.2');
      expect(await handshake(port(), 'TLSv1.2', 'TLSv1.3')).toBe('TLSv1.3');
    });
  }
});

describe('slow-loris', () => {
  it('the central server cuts a trickled, never-finished request off and keeps serving others', async () => {
    const url = new URL(central.url);
    const { ca } = await centralTls();
    const sockets: TLSSocket[] = [];
    const closedAt: number[] = [];
    const started = Date.now();
    const header = 'POST /v1alpha1/namespaces/default/leases/x/acquire HTTP/1.1\r\nHost: x\r\nX-Slow: ';
    const timers: NodeJS.Timeout[] = [];
    try {
      for (let i = 0; i < 5; i++) {
        const socket = connect({ host: url.hostname, port: Number(url.port), ca, servername: 'localhost' });
        socket.on('error', () => {});
        socket.once('close', () => closedAt.push(Date.now()));
        let at = 0;
        // One byte every 200 ms: never a whole header block.
        timers.push(
          setInterval(() => {
            if (!socket.destroyed) socket.write(header[at++ % header.length] ?? 'a');
          }, 200),
        );
        sockets.push(socket);
      }
      // Meanwhile, ordinary clients are answered.
      for (let i = 0; i < 5; i++) {
        const res = await fetch(`${central.url}/healthz`);
        expect(res.status).toBe(200);
      }
      expect(closedAt).toHaveLength(0);
      // Node checks header deadlines every connectionsCheckingInterval (30 s by default).
      await eventually(() => closedAt.length === 5, {
        timeoutMs: READ_HEADER_TIMEOUT_MS + 35_000,
        intervalMs: 200,
      });
      for (const at of closedAt) expect(at - started).toBeGreaterThanOrEqual(READ_HEADER_TIMEOUT_MS - 100);
      expect((await fetch(`${central.url}/healthz`)).status).toBe(200);
    } finally {
      for (const t of timers) clearInterval(t);
      for (const s of sockets) s.destroy();
    }
  }, 60_000);
});
