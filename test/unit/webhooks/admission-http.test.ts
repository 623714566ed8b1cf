// The admission HTTP handler over a real TLS server: the wire contract with the API server (answers,
// denials, malformed and oversized bodies), deadlines, metrics, clients that leave.
import { connect } from 'node:tls';
import { describe, expect, it } from 'vitest';
import { post } from '../../fixtures/webhooks/client.ts';
import { checkAnswer } from '../../fixtures/webhooks/golden.ts';
import { eventually } from '../../helpers/eventually.ts';
import {
  body,
  held,
  lastSignal,
  metric,
  PATCH,
  pki,
  send,
  started,
  startServer,
  useAdmissionServers,
} from './server-harness.ts';

useAdmissionServers();

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
    expect(await metric(registry, 'berth_webhook_denials_total', { reason: 'test-rule' })).toBe(1);
  });

  it("counts every denial in berth_webhook_denials_total, and only the state volume's in Go's metric", async () => {
    const { server, registry } = await startServer();
    await send(server.port, body('deny'));
    await send(server.port, body('state-mount'));
    const denials = (reason: string) =>
      metric(registry, 'berth_webhook_denials_total', { webhook: '/review', reason });
    expect(await denials('test-rule')).toBe(1);
    expect(await denials('writable_state_mount')).toBe(1);
    // Go counts only a writable mount of the reserved berth-state volume here: alerts written for it hold.
    expect(await metric(registry, 'berth_webhook_admission_rejections_total')).toBe(1);
    expect(
      await metric(registry, 'berth_webhook_admission_rejections_total', { reason: 'writable_state_mount' }),
    ).toBe(1);
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
});

describe('deadline', () => {
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
    expect(await metric(registry, 'berth_webhook_denials_total', { reason: 'deadline' })).toBe(1);
    expect(await metric(registry, 'berth_webhook_admission_rejections_total')).toBe(0);
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
