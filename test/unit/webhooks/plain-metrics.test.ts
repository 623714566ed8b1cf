// The admission metrics every review updates are counted in plain numbers and exported at scrape time
// (webhooks/plain-metrics.ts). Dashboards and alerts read the exported text, so it must be what
// prom-client's own Counter, Gauge and Histogram export for the same calls: same names, help, types,
// series order, labels and values, after resets too. Checked on generated call sequences, and end to end
// for a few reviews through the admission server and WorkloadAdmission's read counters.
import fc from 'fast-check';
import { Counter, Gauge, Histogram, Registry, type RegistryContentType } from 'prom-client';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { MUTATE_WORKLOADS_PATH } from '../../../src/berth/api.ts';
import { exponentialBuckets } from '../../../src/observability/metrics.ts';
import { readMetrics, webhookMetrics } from '../../../webhooks/metrics.ts';
import { plainCounter, plainGauge, plainHistogram } from '../../../webhooks/plain-metrics.ts';
import { allow } from '../../../webhooks/review.ts';
import { AdmissionServer } from '../../../webhooks/server.ts';
import { workloadAdmissionHandlers } from '../../../webhooks/workload-admission.ts';
import { SwappableCertificates, type TestPki, testPki } from '../../fixtures/webhooks/certs.ts';
import { post } from '../../fixtures/webhooks/client.ts';
import { FakeIO } from '../../fixtures/webhooks/fake-io.ts';
import { OPERATOR_USER, request, workload } from '../../fixtures/webhooks/objects.ts';

const RUNS = Number(process.env.PROPERTY_RUNS ?? 300);
const BUCKETS = exponentialBuckets(0.001, 2, 14);

type Op =
  | { m: 'counter'; a: string; b: string }
  | { m: 'gauge'; a: string; up: boolean }
  | { m: 'histogram'; a: string; v: number }
  | { m: 'reset' };

const label = fc.constantFrom('/mutate', '/validate', 'x"y\\z');
const op: fc.Arbitrary<Op> = fc.oneof(
  fc.record({ m: fc.constant('counter' as const), a: label, b: fc.constantFrom('200', '415', '499') }),
  fc.record({ m: fc.constant('gauge' as const), a: label, up: fc.boolean() }),
  fc.record({
    m: fc.constant('histogram' as const),
    a: label,
    // Bucket bounds exactly, values between and beyond them, and zero.
    v: fc.oneof(fc.constantFrom(0, ...BUCKETS, 100), fc.double({ min: 0, max: 20, noNaN: true })),
  }),
  fc.constant({ m: 'reset' as const }),
);

const config = (name: string) => ({ name, help: `help of ${name}`, labelNames: ['webhook'] as const });

/** The same calls on prom-client's metrics (reference) and on the plain ones, each in its own registry. */
function both(contentType: RegistryContentType) {
  const registry = (): Registry => {
    const r = new Registry<RegistryContentType>();
    r.setContentType(contentType);
    return r as Registry;
  };
  const ref = registry();
  const plain = registry();
  const refCounter = new Counter({
    name: 'c_total',
    help: 'help of c_total',
    labelNames: ['webhook', 'code'],
    registers: [ref],
  });
  const refGauge = new Gauge({ ...config('g'), labelNames: ['webhook'], registers: [ref] });
  const refHistogram = new Histogram({
    ...config('h'),
    labelNames: ['webhook'],
    buckets: BUCKETS,
    registers: [ref],
  });
  const counter = plainCounter(plain, {
    name: 'c_total',
    help: 'help of c_total',
    labelNames: ['webhook', 'code'],
  });
  const gauge = plainGauge(plain, config('g'));
  const histogram = plainHistogram(plain, { ...config('h'), buckets: BUCKETS });
  const apply = (o: Op): void => {
    switch (o.m) {
      case 'counter':
        refCounter.inc({ webhook: o.a, code: o.b });
        counter.series({ webhook: o.a, code: o.b }).inc();
        return;
      case 'gauge':
        if (o.up) refGauge.inc({ webhook: o.a });
        else refGauge.dec({ webhook: o.a });
        if (o.up) gauge.series({ webhook: o.a }).inc();
        else gauge.series({ webhook: o.a }).dec();
        return;
      case 'histogram':
        refHistogram.observe({ webhook: o.a }, o.v);
        histogram.series({ webhook: o.a }).observe(o.v);
        return;
      case 'reset':
        ref.resetMetrics();
        plain.resetMetrics();
    }
  };
  return { ref, plain, apply };
}

/** getMetricsAsJSON without prom-client's exemplar slots (always empty here: exemplars are off). */
const json = async (registry: Registry): Promise<unknown> =>
  JSON.parse(
    JSON.stringify(await registry.getMetricsAsJSON(), (key, value: unknown) =>
      key === 'exemplar' ? undefined : value,
    ),
  );

describe('plain metrics export what prom-client exports for the same calls', () => {
  for (const contentType of [
    Registry.PROMETHEUS_CONTENT_TYPE,
    Registry.OPENMETRICS_CONTENT_TYPE,
  ] as RegistryContentType[]) {
    it(`as text and as JSON (${contentType.split(';')[0]})`, async () => {
      await fc.assert(
        fc.asyncProperty(fc.array(op, { maxLength: 40 }), async (ops) => {
          const { ref, plain, apply } = both(contentType);
          for (const o of ops) apply(o);
          expect(await plain.metrics()).toBe(await ref.metrics());
          expect(await json(plain)).toEqual(await json(ref));
        }),
        { numRuns: RUNS },
      );
    });
  }

  it('shares a metric between components on one registry, and refuses a clash', () => {
    const registry = new Registry();
    const first = plainCounter(registry, { name: 'c_total', help: 'h', labelNames: ['webhook'] });
    expect(plainCounter(registry, { name: 'c_total', help: 'h', labelNames: ['webhook'] })).toBe(first);
    expect(first.series({ webhook: '/a' })).toBe(first.series({ webhook: '/a' }));
    expect(() => plainGauge(registry, { name: 'c_total', help: 'h', labelNames: ['webhook'] })).toThrow(
      /different type/,
    );
    expect(() => plainCounter(registry, { name: 'c_total', help: 'h', labelNames: ['code'] })).toThrow(
      /labels \[webhook\], not \[code\]/,
    );
    new Counter({ name: 'other_total', help: 'h', registers: [registry] });
    expect(() => plainCounter(registry, { name: 'other_total', help: 'h', labelNames: ['webhook'] })).toThrow(
      /different type/,
    );
    expect(() => plainCounter(registry, { name: 'bare_total', help: 'h', labelNames: [] })).toThrow(
      /need labels/,
    );
  });
});

describe('the webhook series after a few reviews', () => {
  let pki: TestPki;
  beforeAll(async () => {
    pki = await testPki(['localhost', '127.0.0.1']);
  });
  let server: AdmissionServer | undefined;
  afterAll(async () => server?.close());

  const review = (uid: string): string =>
    JSON.stringify({
      apiVersion: 'admission.k8s.io/v1',
      kind: 'AdmissionReview',
      request: {
        uid,
        kind: { group: '', version: 'v1', kind: 'ConfigMap' },
        resource: { group: '', version: 'v1', resource: 'configmaps' },
        operation: 'CREATE',
        userInfo: { username: 'alice' },
      },
    });

  it('exports requests by code, in-flight and latency per webhook as controller-runtime names them', async () => {
    const registry = new Registry();
    server = new AdmissionServer({
      port: 0,
      host: '127.0.0.1',
      certificates: new SwappableCertificates(pki.pair),
      handlers: [{ path: '/review', review: async () => allow() }],
      registry,
    });
    await server.start();
    const send = (body: string, contentType = 'application/json') =>
      post({ port: server!.port, path: '/review', body, ca: pki.caCert, contentType });
    for (const uid of ['a', 'b', 'c']) expect((await send(review(uid))).status).toBe(200);
    expect((await send('x', 'text/plain')).status).toBe(415);

    expect(await registry.getSingleMetricAsString('controller_runtime_webhook_requests_total')).toBe(
      [
        '# HELP controller_runtime_webhook_requests_total Total number of admission requests by HTTP status code.',
        '# TYPE controller_runtime_webhook_requests_total counter',
        'controller_runtime_webhook_requests_total{webhook="/review",code="200"} 3',
        'controller_runtime_webhook_requests_total{webhook="/review",code="415"} 1',
      ].join('\n'),
    );
    expect(await registry.getSingleMetricAsString('controller_runtime_webhook_requests_in_flight')).toBe(
      [
        '# HELP controller_runtime_webhook_requests_in_flight Current number of admission requests being served.',
        '# TYPE controller_runtime_webhook_requests_in_flight gauge',
        'controller_runtime_webhook_requests_in_flight{webhook="/review"} 0',
      ].join('\n'),
    );
    const latency = (
      await registry.getSingleMetricAsString('controller_runtime_webhook_latency_seconds')
    ).split('\n');
    expect(latency.slice(0, 2)).toEqual([
      '# HELP controller_runtime_webhook_latency_seconds Histogram of the latency of processing admission requests',
      '# TYPE controller_runtime_webhook_latency_seconds histogram',
    ]);
    // Bucket values depend on timing; their labels, order, monotony and totals do not.
    const series = latency.slice(2).map((line) => {
      const [name, value] = line.split(' ');
      return { name: name!, value: Number(value) };
    });
    expect(series.map((s) => s.name)).toEqual([
      ...BUCKETS.map((b) => `controller_runtime_webhook_latency_seconds_bucket{le="${b}",webhook="/review"}`),
      'controller_runtime_webhook_latency_seconds_bucket{le="+Inf",webhook="/review"}',
      'controller_runtime_webhook_latency_seconds_sum{webhook="/review"}',
      'controller_runtime_webhook_latency_seconds_count{webhook="/review"}',
    ]);
    const buckets = series.slice(0, BUCKETS.length + 1).map((s) => s.value);
    expect(buckets).toEqual([...buckets].sort((x, y) => x - y));
    expect(buckets.at(-1)).toBe(4);
    expect(series.at(-1)?.value).toBe(4);
    expect(series.at(-2)?.value).toBeGreaterThan(0);

    // The shared registry's metrics are the same objects a second server would update.
    expect(webhookMetrics(registry).requests.series({ webhook: '/review', code: '200' }).value).toBe(3);
    registry.resetMetrics();
    expect(await registry.getSingleMetricAsString('controller_runtime_webhook_requests_total')).toBe(
      [
        '# HELP controller_runtime_webhook_requests_total Total number of admission requests by HTTP status code.',
        '# TYPE controller_runtime_webhook_requests_total counter',
      ].join('\n'),
    );
    expect((await send(review('d'))).status).toBe(200);
    expect(await registry.getSingleMetricAsString('controller_runtime_webhook_requests_total')).toContain(
      'controller_runtime_webhook_requests_total{webhook="/review",code="200"} 1',
    );
  });

  it('exports the API reads of WorkloadAdmission reviews by kind and per review', async () => {
    const registry = new Registry();
    const io = new FakeIO();
    const [mutate] = workloadAdmissionHandlers({ io: () => io, operatorUser: OPERATOR_USER, registry });
    const ctx = { signal: new AbortController().signal, log: undefined, webhook: MUTATE_WORKLOADS_PATH };
    // No owner: decided without a read. Owned by a ReplicaSet that is gone: one GET.
    await mutate!.review(request('Pod', 'CREATE', workload('Pod', 'solo')), ctx);
    const owned = workload('Pod', 'web-1', { owner: { kind: 'ReplicaSet', name: 'web-5d9c', uid: 'rs-1' } });
    await mutate!.review(request('Pod', 'CREATE', owned), ctx);
    expect(io.reads().length).toBeGreaterThan(0);
    const reads = io.reads().length;

    const text = (await registry.getSingleMetricAsString('berth_webhook_api_reads_total')).split('\n');
    expect(text.slice(0, 2)).toEqual([
      '# HELP berth_webhook_api_reads_total Direct API server reads made by admission reviews, by kind of read',
      '# TYPE berth_webhook_api_reads_total counter',
    ]);
    const byKind = new Map<string, number>();
    for (const c of io.reads()) byKind.set(c.op, (byKind.get(c.op) ?? 0) + 1);
    expect(text.slice(2)).toEqual(
      [...byKind].map(
        ([kind, n]) =>
          `berth_webhook_api_reads_total{webhook="${MUTATE_WORKLOADS_PATH}",kind="${kind}"} ${n}`,
      ),
    );
    const bounds = [0, 1, 2, 3, 4, 5, 6, 8];
    const w = `webhook="${MUTATE_WORKLOADS_PATH}"`;
    expect(await registry.getSingleMetricAsString('berth_webhook_api_reads_per_review')).toBe(
      [
        '# HELP berth_webhook_api_reads_per_review Direct API server reads made by one admission review',
        '# TYPE berth_webhook_api_reads_per_review histogram',
        ...bounds.map(
          (b) => `berth_webhook_api_reads_per_review_bucket{le="${b}",${w}} ${1 + (reads <= b ? 1 : 0)}`,
        ),
        `berth_webhook_api_reads_per_review_bucket{le="+Inf",${w}} 2`,
        `berth_webhook_api_reads_per_review_sum{${w}} ${reads}`,
        `berth_webhook_api_reads_per_review_count{${w}} 2`,
      ].join('\n'),
    );
    expect(readMetrics(registry).readsPerReview.series({ webhook: MUTATE_WORKLOADS_PATH }).count).toBe(2);
  });
});
