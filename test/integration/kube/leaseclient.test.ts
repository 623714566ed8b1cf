// kubeLeaseClient over real HTTPS: every request of an elector shares one connection. client-node opens a
// new TCP + TLS connection per typed-client request by default; under load those handshakes made renewals
// slow enough to cost a leader its lease.
import { createServer, type Server } from 'node:https';
import type { AddressInfo } from 'node:net';
import { KubeConfig } from '@kubernetes/client-node';
import { generate } from 'selfsigned';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { kubeLeaseClient } from '../../../src/kube/leader.ts';
import { KubeTransport } from '../../../src/kube/transport.ts';

let server: Server;
let kc: KubeConfig;
let connections = 0;
let requests = 0;

beforeAll(async () => {
  const pki = await generate([{ name: 'commonName', value: '127.0.0.1' }], {
    algorithm: 'sha256',
    keyType: 'ec',
    curve: 'P-256',
    extensions: [{ name: 'subjectAltName', altNames: [{ type: 7, ip: '127.0.0.1' }] }],
  });
  server = createServer({ key: pki.private, cert: pki.cert }, (req, res) => {
    requests++;
    const lease = {
      apiVersion: 'coordination.k8s.io/v1',
      kind: 'Lease',
      metadata: { name: 'lock', namespace: 'ns', resourceVersion: String(requests) },
      spec: { holderIdentity: 'a' },
    };
    req.resume();
    req.on('end', () => {
      res.writeHead(200, { 'Content-Type': 'application/json' });
      res.end(JSON.stringify(lease));
    });
  });
  server.on('secureConnection', () => {
    connections++;
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  kc = new KubeConfig();
  kc.loadFromOptions({
    clusters: [
      { name: 'c', server: `https://127.0.0.1:${port}`, caData: Buffer.from(pki.cert).toString('base64') },
    ],
    users: [{ name: 'u', token: 'secret' }],
    contexts: [{ name: 'ctx', cluster: 'c', user: 'u' }],
    currentContext: 'ctx',
  });
});

afterAll(async () => {
  server.closeAllConnections();
  await new Promise<void>((resolve) => server.close(() => resolve()));
});

describe('kubeLeaseClient', () => {
  it('reuses its connections instead of opening one per request', async () => {
    const transport = new KubeTransport(kc);
    const client = kubeLeaseClient(transport);
    const signal = new AbortController().signal;
    const round = async (): Promise<void> => {
      const lease = await client.get('ns', 'lock', signal);
      expect(lease?.spec?.holderIdentity).toBe('a');
      await client.replace('ns', 'lock', { metadata: { name: 'lock' }, spec: {} }, signal);
    };
    await round();
    const warm = connections;
    expect(warm).toBeLessThanOrEqual(2);
    for (let i = 0; i < 10; i++) await round();
    expect(requests).toBe(22);
    expect(connections).toBe(warm);
    await transport.close();
  });
});
