// The admission server over real TLS: keep-alive and TLS versions, certificate hot swap, start and
// graceful close. What one review's answer is: admission-http.test.ts.
import { connect } from 'node:tls';
import { Registry } from 'prom-client';
import { describe, expect, it } from 'vitest';
import type { CertificateProvider } from '../../../certs/provider.ts';
import { AdmissionServer, type CertificateSource } from '../../../webhooks/server.ts';
import { keepAliveAgent, post } from '../../fixtures/webhooks/client.ts';
import { checkAnswer } from '../../fixtures/webhooks/golden.ts';
import { eventually } from '../../helpers/eventually.ts';
import {
  body,
  held,
  metric,
  otherPki,
  pki,
  send,
  started,
  startServer,
  useAdmissionServers,
} from './server-harness.ts';

useAdmissionServers();

describe('connections', () => {
  it('keeps connections alive longer than the API server does (90 s)', async () => {
    const { server } = await startServer();
    const agent = keepAliveAgent();
    try {
      const res = await send(server.port, body('ok'), { agent });
      expect(res.headers['keep-alive']).toBe('timeout=95');
    } finally {
      agent.destroy();
    }
  });

  it('speaks TLS 1.2 and 1.3 but nothing older', async () => {
    const { server } = await startServer();
    const handshake = (min: 'TLSv1' | 'TLSv1.2', max: 'TLSv1.1' | 'TLSv1.2' | 'TLSv1.3') =>
      new Promise<string>((resolve, reject) => {
        const s = connect({
          host: '127.0.0.1',
          port: server.port,
          ca: pki.caCert,
          servername: 'localhost',
          minVersion: min,
          maxVersion: max,
          ciphers: 'DEFAULT@SECLEVEL=0',
        });
        s.once('secureConnect', () => {
          resolve(s.getProtocol() ?? '');
          s.end();
        });
        s.once('error', reject);
      });
    expect(await handshake('TLSv1.2', 'TLSv1.2')).toBe('TLSv1.2');
    expect(await handshake('TLSv1.2', 'TLSv1.3')).toBe('TLSv1.3');
    await expect(handshake('TLSv1', 'TLSv1.1')).rejects.toThrow();
  });
});

describe('certificates', () => {
  it('hot-swaps the serving certificate without dropping open connections', async () => {
    const { server, certs } = await startServer();
    const agent = keepAliveAgent();
    try {
      const before = await send(server.port, body('ok'), { agent });
      expect(before.status).toBe(200);
      certs.set(otherPki.pair);
      // The open keep-alive connection still works.
      expect((await send(server.port, body('ok'), { agent })).status).toBe(200);
      // New connections present the new certificate.
      await expect(send(server.port, body('ok'))).rejects.toThrow(
        /self-signed|unable to verify|certificate/i,
      );
      expect(
        (await post({ port: server.port, path: '/review', body: body('ok'), ca: otherPki.caCert })).status,
      ).toBe(200);
    } finally {
      agent.destroy();
    }
  });

  it('keeps the old pair when the new one is unusable', async () => {
    const { server, certs, registry } = await startServer();
    certs.set({ cert: 'not a certificate', key: 'not a key' });
    expect((await send(server.port, body('ok'))).status).toBe(200);
    expect(await metric(registry, 'berth_webhook_certificate_reload_errors_total')).toBe(1);
  });

  it('unsubscribes on close', async () => {
    const { server, certs } = await startServer();
    expect(certs.listeners).toBe(1);
    await server.close();
    expect(certs.listeners).toBe(0);
  });
});

describe('lifecycle', () => {
  it('takes the certs/ CertificateProvider as its certificate source (type-checked)', () => {
    const asSource = (p: CertificateProvider): CertificateSource => p;
    expect(typeof asSource).toBe('function');
  });

  it('refuses to start without a certificate', () => {
    expect(
      () =>
        new AdmissionServer({
          port: 0,
          certificates: { current: () => undefined, onChange: () => undefined },
          handlers: [],
          registry: new Registry(),
        }),
    ).toThrow('admission server: no serving certificate yet (wait for the certificate provider first)');
  });

  it('reports started once listening, and not after close', async () => {
    const { server } = await startServer();
    await expect(Promise.resolve(server.startedCheck())).resolves.toBeUndefined();
    await server.close();
    await expect(Promise.resolve().then(() => server.startedCheck())).rejects.toThrow(
      'admission server is not listening',
    );
  });

  it('finishes in-flight reviews on close, refuses new connections, and closes idle keep-alive ones', async () => {
    const { server } = await startServer();
    const agent = keepAliveAgent();
    try {
      await send(server.port, body('ok'), { agent }); // an idle keep-alive connection
      const inFlight = send(server.port, body('held'));
      await started.promise;
      let closed = false;
      const closing = server.close().then(() => {
        closed = true;
      });
      await eventually(async () => {
        await expect(send(server.port, body('ok'))).rejects.toThrow();
        return true;
      });
      expect(closed).toBe(false);
      held.open();
      const res = await inFlight;
      expect(checkAnswer(res.status, 'application/json', res.body, 'uid-held', true).allowed).toBe(true);
      await closing;
      expect(closed).toBe(true);
    } finally {
      agent.destroy();
    }
  });

  // kube-apiserver keeps sending on its connections to a replica that left the endpoints: a draining
  // server tells it, with each answer, to stop.
  it('answers with Connection: close once draining, and keeps answering', async () => {
    const { server } = await startServer();
    const agent = keepAliveAgent();
    try {
      const before = await send(server.port, body('before'), { agent });
      expect(before.headers.connection).toBe('keep-alive');
      server.drain();
      const during = await send(server.port, body('during'), { agent });
      expect(during.status).toBe(200);
      expect(JSON.parse(during.body).response).toEqual({ uid: 'uid-during', allowed: true });
      expect(during.headers.connection).toBe('close');
      const denied = await send(server.port, body('deny'), { agent });
      expect(denied.headers.connection).toBe('close');
    } finally {
      agent.destroy();
    }
  });

  // Go's HTTP client (kube-apiserver's) dials spare connections it may never use.
  it('closes at once a connection that never carried a request', async () => {
    const { server } = await startServer();
    const spare = connect({ host: '127.0.0.1', port: server.port, ca: pki.caCert, servername: 'localhost' });
    spare.on('error', () => {});
    await new Promise((resolve) => spare.once('secureConnect', resolve));
    const ended = new Promise((resolve) => spare.once('close', resolve));
    await server.close(); // within the default close timeout of 60 s, longer than this test may take
    await ended;
  });

  it('cuts connections still busy after the close timeout', async () => {
    const { server } = await startServer({ closeTimeoutMs: 200 });
    const inFlight = send(server.port, body('held')).catch((err: Error) => err);
    await started.promise;
    await server.close();
    expect(await inFlight).toBeInstanceOf(Error);
  });
});
