// A review's AbortSignal and WorkloadAdmission's API client are made only when a review first needs them
// (most Pod CREATEs are decided without a read). Laziness must not change the deadline: a signal taken
// after the deadline passed is already aborted, so a handler that reads late cannot outlive its review.
import { Registry } from 'prom-client';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { MUTATE_WORKLOADS_PATH } from '../../../src/berth/api.ts';
import type { AdmissionIO } from '../../../webhooks/io.ts';
import { allow } from '../../../webhooks/review.ts';
import { AdmissionServer, type ReviewContext } from '../../../webhooks/server.ts';
import { workloadAdmissionHandlers } from '../../../webhooks/workload-admission.ts';
import { SwappableCertificates, type TestPki, testPki } from '../../fixtures/webhooks/certs.ts';
import { post } from '../../fixtures/webhooks/client.ts';
import { FakeIO } from '../../fixtures/webhooks/fake-io.ts';
import { berthLease, OPERATOR_USER, request, workload } from '../../fixtures/webhooks/objects.ts';
import { eventually } from '../../helpers/eventually.ts';

const review = (name: string): string =>
  JSON.stringify({
    apiVersion: 'admission.k8s.io/v1',
    kind: 'AdmissionReview',
    request: {
      uid: `uid-${name}`,
      kind: { group: '', version: 'v1', kind: 'ConfigMap' },
      resource: { group: '', version: 'v1', resource: 'configmaps' },
      name,
      operation: 'CREATE',
      userInfo: { username: 'alice' },
    },
  });

describe('the review signal', () => {
  let pki: TestPki;
  let server: AdmissionServer;
  let release: () => void = () => undefined;
  const seen: { name: string; aborted: boolean; reason: unknown }[] = [];

  beforeAll(async () => {
    pki = await testPki(['localhost', '127.0.0.1']);
    server = new AdmissionServer({
      port: 0,
      host: '127.0.0.1',
      certificates: new SwappableCertificates(pki.pair),
      registry: new Registry(),
      maxReviewMs: 50,
      handlers: [
        {
          path: '/review',
          async review(req, ctx: ReviewContext) {
            // Waits past the deadline without having looked at the signal, then takes it.
            if (req.name === 'late') await new Promise<void>((resolve) => (release = resolve));
            const { signal } = ctx;
            seen.push({ name: req.name ?? '', aborted: signal.aborted, reason: signal.reason });
            return allow();
          },
        },
      ],
    });
    await server.start();
  });
  afterAll(async () => server.close());

  const send = (name: string) =>
    post({ port: server.port, path: '/review', body: review(name), ca: pki.caCert });

  it('is not aborted for a review within its deadline', async () => {
    const res = await send('quick');
    expect(JSON.parse(res.body).response.allowed).toBe(true);
    expect(seen.find((s) => s.name === 'quick')).toEqual({
      name: 'quick',
      aborted: false,
      reason: undefined,
    });
  });

  it('is born aborted, with the deadline as reason, when first taken after the deadline', async () => {
    const res = await send('late');
    // The 504 denial is the deadline having fired; only then does the handler take its signal.
    expect(JSON.parse(res.body).response.status.code).toBe(504);
    release();
    await eventually(() => expect(seen.find((s) => s.name === 'late')).toBeDefined());
    const late = seen.find((s) => s.name === 'late')!;
    expect(late.aborted).toBe(true);
    expect(String(late.reason)).toMatch(/deadline exceeded/);
  });
});

describe("WorkloadAdmission's API client", () => {
  const ctxWith = (signal: AbortSignal) => ({ signal, log: undefined, webhook: MUTATE_WORKLOADS_PATH });

  it('is opened only by a review that reads, once, with the review signal', async () => {
    const fake = new FakeIO();
    const opened: AbortSignal[] = [];
    const [mutate] = workloadAdmissionHandlers({
      io: (signal): AdmissionIO => {
        opened.push(signal);
        return fake;
      },
      operatorUser: OPERATOR_USER,
      scope: 'opt-in',
      registry: new Registry(),
    });
    let taken = 0;
    const signal = new AbortController().signal;
    const ctx = {
      ...ctxWith(signal),
      get signal() {
        taken++;
        return signal;
      },
    };
    // No controller owner: decided without the API server, and without taking the signal.
    expect(await mutate!.review(request('Pod', 'CREATE', workload('Pod', 'solo')), ctx)).toEqual(allow());
    expect(opened).toEqual([]);
    expect(taken).toBe(0);

    // An owner to look up (it is gone: the walk ends there) and, beside it, the namespace's leases: two
    // reads through one client.
    fake.addLease(berthLease('web', { target: { kind: 'Deployment', name: 'web' } }));
    const owned = workload('Pod', 'web-1', { owner: { kind: 'ReplicaSet', name: 'web-5d9c', uid: 'rs-1' } });
    await mutate!.review(request('Pod', 'CREATE', owned), ctx);
    expect(fake.reads().map((c) => c.op)).toEqual(['list-leases', 'get-workload']);
    expect(opened).toEqual([signal]);
    expect(taken).toBe(1);
  });
});
