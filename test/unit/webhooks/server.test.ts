// The admission server over real TLS: the wire contract with the API server, deadlines, metrics,
// certificate hot swap and graceful close.
import { connect } from 'node:tls';
import { Registry } from 'prom-client';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import type { CertificateProvider } from '../../../certs/provider.ts';
import type { JsonPatchOp } from '../../../src/kube/client.ts';
import { allow, deny } from '../../../webhooks/review.ts';
import {
  type AdmissionHandler,
  AdmissionServer,
  type CertificateSource,
  parseTimeoutQuery,
  reviewBudgetMs,
} from '../../../webhooks/server.ts';
import { SwappableCertificates, type TestPki, testPki } from '../../fixtures/webhooks/certs.ts';
import { keepAliveAgent, post } from '../../fixtures/webhooks/client.ts';
import { checkAnswer } from '../../fixtures/webhooks/golden.ts';
import { eventually } from '../../helpers/eventually.ts';

const PATCH: JsonPatchOp[] = [{ op: 'add', path: '/metadata/labels', value: { stamped: 'yes' } }];

interface Gate {
  promise: Promise<void>;
  open(): void;
}
const gate = (): Gate => {
  let open!: () => void;
  const promise = new Promise<void>((r) => {
    open = r;
  });
  return { promise, open };
};

let pki: TestPki;
let otherPki: TestPki;
let held: Gate = gate();
let started: Gate = gate();
let lastSignal: AbortSignal | undefined;

const handler: AdmissionHandler = {
  path: '/review',
  async review(request, ctx) {
    lastSignal = ctx.signal;
    switch (request.name) {
      case 'deny':
        return deny('test-rule', 'no entry for "deny"');
      case 'patch':
        return allow({ patch: PATCH, warnings: ['x'.repeat(300)] });
      case 'throw':
        throw new TypeError('boom');
      case 'hang':
        started.open();
        await new Promise((_, reject) =>
          ctx.signal.addEventListener('abort', () => reject(ctx.signal.reason)),
        );
        return allow();
      case 'held':
        started.open();
        await held.promise;
        return allow();
      default:
        return allow();
    }
  },
};

function body(name: string, apiVersion = 'admission.k8s.io/v1', uid = `uid-${name}`): string {
  return JSON.stringify({
    apiVersion,
    kind: 'AdmissionReview',
    request: {
      uid,
      kind: { group: '', version: 'v1', kind: 'ConfigMap' },
      resource: { group: '', version: 'v1', resource: 'configmaps' },
      name,
      namespace: 'default',
      operation: 'CREATE',
      userInfo: { username: 'alice' },
      object: { apiVersion: 'v1', kind: 'ConfigMap', metadata: { name } },
      oldObject: null,
      dryRun: false,
    },
  });
}

let servers: AdmissionServer[] = [];
async function startServer(
  opts: { maxReviewMs?: number; certs?: SwappableCertificates; closeTimeoutMs?: number } = {},
): Promise<{ server: AdmissionServer; registry: Registry; certs: SwappableCertificates }> {
  const registry = new Registry();
  const certs = opts.certs ?? new SwappableCertificates(pki.pair);
  const server = new AdmissionServer({
    port: 0,
    host: '127.0.0.1',
    certificates: certs,
    handlers: [handler],
    registry,
    ...(opts.maxReviewMs ? { maxReviewMs: opts.maxReviewMs } : {}),
    ...(opts.closeTimeoutMs ? { closeTimeoutMs: opts.closeTimeoutMs } : {}),
  });
  servers.push(server);
  await server.start();
  return { server, registry, certs };
}

const send = (port: number, b: string | Buffer, extra: Partial<Parameters<typeof post>[0]> = {}) =>
  post({ port, path: '/review', body: b, ca: pki.caCert, ...extra });

/** Sum of a counter or gauge's samples matching the labels. */
const metric = async (
  registry: Registry,
  name: string,
  labels: Record<string, string> = {},
): Promise<number> => {
  const m = registry.getSingleMetric(name);
  if (!m) return Number.NaN;
  return (await m.get()).values
    .filter((v) =>
      Object.entries(labels).every(([k, want]) => String((v.labels as Record<string, unknown>)[k]) === want),
    )
    .reduce((sum, v) => sum + v.value, 0);
};

beforeAll(async () => {
  pki = await testPki(['localhost', '127.0.0.1']);
  otherPki = await testPki(['localhost', '127.0.0.1'], 'other-ca');
});

afterEach(async () => {
  held.open();
  await Promise.all(servers.map((s) => s.close()));
  servers = [];
  held = gate();
  started = gate();
});

afterAll(() => held.open());

describe('wire contract', () => {
  it('answers an allowed review in the request apiVersion, echoing the uid', async () => {
    const { server } = await startServer();
    const res = await send(server.port, body('ok'));
    expect(res.status).toBe(200);
    expect(JSON.parse(res.body)).toEqual({
      apiVersion: 'admission.k8s.io/v1',
      kind: 'AdmissionReview',
      response: { uid: 'uid-ok', allowed: true },
    });
    expect(
      checkAnswer(res.status, String(res.headers['content-type']), res.body, 'uid-ok', true).allowed,
    ).toBe(true);
    const beta = await send(server.port, body('ok', 'admission.k8s.io/v1beta1'));
    expect(JSON.parse(beta.body).apiVersion).toBe('admission.k8s.io/v1beta1');
    checkAnswer(beta.status, 'application/json', beta.body, 'uid-ok', false, 'v1beta1');
  });

  it('denies with status code 403, reason and message', async () => {
    const { server, registry } = await startServer();
    const res = await send(server.port, body('deny'));
    expect(JSON.parse(res.body).response).toEqual({
      uid: 'uid-deny',
      allowed: false,
      status: { code: 403, reason: 'Forbidden', message: 'no entry for "deny"' },
    });
    checkAnswer(res.status, 'application/json', res.body, 'uid-deny', false);
    expect(await metric(registry, 'berth_webhook_admission_rejections_total', { reason: 'test-rule' })).toBe(
      1,
    );
  });

  it('sends a patch as base64 JSON Patch with patchType, and bounded warnings', async () => {
    const { server } = await startServer();
    const res = await send(server.port, body('patch'));
    const answer = checkAnswer(res.status, 'application/json', res.body, 'uid-patch', true);
    expect(answer.patch).toEqual(PATCH);
    const warnings = JSON.parse(res.body).response.warnings as string[];
    expect(warnings).toHaveLength(1);
    expect(warnings[0]!.length).toBeLessThanOrEqual(120);
  });

  it('answers 400 when there is no usable uid', async () => {
    const { server } = await startServer();
    for (const uid of [undefined, '', 42, 'has space', 'x'.repeat(257)]) {
      const b = JSON.parse(body('ok'));
      if (uid === undefined) delete b.request.uid;
      else b.request.uid = uid;
      const res = await send(server.port, JSON.stringify(b));
      expect(res.status, String(uid)).toBe(400);
    }
    for (const raw of ['{}', '[]', 'null', '"x"', '{"request":null}']) {
      expect((await send(server.port, raw)).status, raw).toBe(400);
    }
  });

  it('denies a malformed review that has a uid with code 400', async () => {
    const { server } = await startServer();
    const b = JSON.parse(body('ok'));
    b.request.operation = 'PATCH';
    const res = await send(server.port, JSON.stringify(b));
    expect(res.status).toBe(200);
    const answer = checkAnswer(res.status, 'application/json', res.body, 'uid-ok', true);
    expect(answer).toMatchObject({ allowed: false, code: 400 });
    expect(answer.message).toMatch(/^malformed AdmissionReview: request\.operation: /);
    b.request.operation = 'CREATE';
    b.apiVersion = 'admission.k8s.io/v2';
    const v2 = await send(server.port, JSON.stringify(b));
    expect(JSON.parse(v2.body)).toMatchObject({
      apiVersion: 'admission.k8s.io/v1',
      response: { allowed: false },
    });
  });

  it('denies a review holding a prototype-poisoning key with a well-formed answer, without deciding', async () => {
    // Found by property.test.ts (seed 102): object.metadata = {"": {"__proto__": {}}} drew a bare 400.
    const { server } = await startServer();
    const poisoned: [string, (b: { request: Record<string, unknown> }) => void, string][] = [
      [
        'nested __proto__',
        (b) => {
          b.request.object = { metadata: { '': JSON.parse('{"__proto__":{}}') } };
        },
        '__proto__',
      ],
      [
        '__proto__ carrying a decision input',
        (b) => {
          b.request.name = 'deny';
          b.request.object = JSON.parse('{"metadata":{"__proto__":{"name":"x"}}}');
        },
        '__proto__',
      ],
      [
        'constructor.prototype in an array',
        (b) => {
          b.request.object = { items: [{ constructor: { prototype: { polluted: true } } }] };
        },
        'constructor.prototype',
      ],
    ];
    for (const [what, poison, key] of poisoned) {
      const b = JSON.parse(body('deny')) as { request: Record<string, unknown> };
      poison(b);
      const res = await send(server.port, JSON.stringify(b));
      expect(res.status, what).toBe(200);
      const answer = checkAnswer(res.status, 'application/json', res.body, 'uid-deny', true);
      expect(answer, what).toMatchObject({
        allowed: false,
        code: 400,
        message: `malformed AdmissionReview: forbidden key "${key}"`,
      });
    }
    expect(({} as Record<string, unknown>).polluted).toBeUndefined();
    // A constructor key without a prototype is ordinary data.
    const plain = JSON.parse(body('ok')) as { request: Record<string, unknown> };
    plain.request.object = { metadata: { labels: { constructor: 'x' } } };
    expect(
      checkAnswer(
        200,
        'application/json',
        (await send(server.port, JSON.stringify(plain))).body,
        'uid-ok',
        true,
      ),
    ).toMatchObject({ allowed: true });
  });

  it('looks for those keys in a huge array or a deep nesting without overflowing', async () => {
    const { server } = await startServer();
    const wide = JSON.parse(body('ok')) as { request: { object: Record<string, unknown> } };
    wide.request.object.data = new Array(3_000_000).fill(0);
    const deep = body('ok').replace(
      '"oldObject":null',
      `"oldObject":{"x":${'['.repeat(200_000)}${']'.repeat(200_000)}}`,
    );
    for (const raw of [JSON.stringify(wide), deep]) {
      const res = await send(server.port, raw);
      expect(checkAnswer(res.status, 'application/json', res.body, 'uid-ok', true)).toMatchObject({
        allowed: true,
      });
    }
  });

  it('refuses bodies over 7 MiB with 413 and accepts one just under', async () => {
    const { server } = await startServer();
    const small = JSON.parse(body('ok'));
    small.request.object.data = { big: 'x'.repeat(7 * 1024 * 1024 - 2000) };
    const under = await send(server.port, JSON.stringify(small));
    expect(under.status).toBe(200);
    small.request.object.data = { big: 'x'.repeat(7 * 1024 * 1024) };
    const over = await send(server.port, JSON.stringify(small));
    expect(over.status).toBe(413);
  });

  it('requires a JSON content type and JSON', async () => {
    const { server, registry } = await startServer();
    expect((await send(server.port, body('ok'), { contentType: 'text/plain' })).status).toBe(415);
    expect((await send(server.port, body('ok'), { contentType: null })).status).toBe(415);
    expect(
      (await send(server.port, body('ok'), { contentType: 'application/json; charset=utf-8' })).status,
    ).toBe(200);
    expect((await send(server.port, '{"apiVersion":')).status).toBe(400);
    expect((await send(server.port, '{"__proto__":{"x":1}}')).status).toBe(400);
    expect(
      await metric(registry, 'controller_runtime_webhook_requests_total', {
        webhook: '/review',
        code: '415',
      }),
    ).toBe(2);
    expect(
      await metric(registry, 'controller_runtime_webhook_requests_total', {
        webhook: '/review',
        code: '200',
      }),
    ).toBe(1);
  });

  it('turns a handler error into a denial, never an allow', async () => {
    const { server, registry } = await startServer();
    const res = await send(server.port, body('throw'));
    const answer = checkAnswer(res.status, 'application/json', res.body, 'uid-throw', true);
    expect(answer).toEqual({
      allowed: false,
      patch: undefined,
      code: 500,
      message: 'internal error: TypeError: boom',
    });
    expect(await metric(registry, 'controller_runtime_webhook_panics_total')).toBe(1);
  });

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

describe('deadline', () => {
  it('parses the ?timeout= query and derives the handler budget', () => {
    expect(parseTimeoutQuery('10s')).toBe(10_000);
    expect(parseTimeoutQuery('1m0s')).toBe(60_000);
    expect(parseTimeoutQuery('1.5s')).toBe(1500);
    expect(parseTimeoutQuery('250ms')).toBe(250);
    expect(parseTimeoutQuery('abc')).toBeUndefined();
    expect(parseTimeoutQuery('0s')).toBeUndefined();
    expect(parseTimeoutQuery(['10s'])).toBeUndefined();
    expect(reviewBudgetMs(10_000, 5000)).toBe(5000);
    expect(reviewBudgetMs(3000, 5000)).toBe(2400);
    expect(reviewBudgetMs(1000, 5000)).toBe(800);
    expect(reviewBudgetMs(undefined, 5000)).toBe(5000);
  });

  it('denies a review that outlives its deadline and aborts its work', async () => {
    const { server, registry } = await startServer();
    const t0 = Date.now();
    const res = await post({
      port: server.port,
      path: '/review?timeout=2s',
      body: body('hang'),
      ca: pki.caCert,
    });
    const elapsed = Date.now() - t0;
    // Answered before the API server's own 2 s timeout would turn the call into a failure.
    expect(elapsed).toBeGreaterThanOrEqual(1500);
    expect(elapsed).toBeLessThan(2000);
    expect(checkAnswer(res.status, 'application/json', res.body, 'uid-hang', true)).toMatchObject({
      allowed: false,
      code: 504,
      message: 'admission review did not complete within 1600ms',
    });
    expect(lastSignal?.aborted).toBe(true);
    expect(await metric(registry, 'berth_webhook_admission_rejections_total', { reason: 'deadline' })).toBe(
      1,
    );
  });

  it('caps the budget at maxReviewMs without a query', async () => {
    const { server } = await startServer({ maxReviewMs: 100 });
    const res = await send(server.port, body('hang'));
    expect(JSON.parse(res.body).response.status.code).toBe(504);
  });
});

describe('metrics', () => {
  it('counts requests by code, latency, and in-flight per webhook', async () => {
    const { server, registry } = await startServer();
    await send(server.port, body('ok'));
    await send(server.port, body('deny'));
    const pending = send(server.port, body('held'));
    await started.promise;
    expect(
      await metric(registry, 'controller_runtime_webhook_requests_in_flight', { webhook: '/review' }),
    ).toBe(1);
    held.open();
    await pending;
    await eventually(async () =>
      expect(
        await metric(registry, 'controller_runtime_webhook_requests_in_flight', { webhook: '/review' }),
      ).toBe(0),
    );
    expect(
      await metric(registry, 'controller_runtime_webhook_requests_total', {
        webhook: '/review',
        code: '200',
      }),
    ).toBe(3);
    const text = await registry.getSingleMetricAsString('controller_runtime_webhook_latency_seconds');
    expect(text).toContain('controller_runtime_webhook_latency_seconds_count{webhook="/review"} 3');
  });
});

describe('client disconnects', () => {
  it('finishes the metrics of a review whose client went away while it was pending', async () => {
    const { server, registry } = await startServer();
    const payload = body('held');
    const socket = connect({ port: server.port, host: '127.0.0.1', ca: pki.caCert, servername: 'localhost' });
    await new Promise<void>((resolve) => socket.once('secureConnect', () => resolve()));
    socket.write(
      `POST /review HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\nContent-Length: ${Buffer.byteLength(payload)}\r\n\r\n${payload}`,
    );
    await started.promise;
    socket.destroy();
    await eventually(async () =>
      expect(
        await metric(registry, 'controller_runtime_webhook_requests_in_flight', { webhook: '/review' }),
      ).toBe(0),
    );
    expect(
      await metric(registry, 'controller_runtime_webhook_requests_total', {
        webhook: '/review',
        code: '499',
      }),
    ).toBe(1);
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
