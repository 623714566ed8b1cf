// A running AdmissionServer over real TLS with one scripted handler (`/review`), shared by the tests of
// the server (server.test.ts) and of its admission HTTP handler (admission-http.test.ts).
import { Registry } from 'prom-client';
import { afterAll, afterEach, beforeAll } from 'vitest';
import type { JsonPatchOp } from '../../../src/kube/client.ts';
import { STATE_MOUNT_REASONS } from '../../../webhooks/metrics.ts';
import { allow, deny } from '../../../webhooks/review.ts';
import { type AdmissionHandler, AdmissionServer } from '../../../webhooks/server.ts';
import { SwappableCertificates, type TestPki, testPki } from '../../fixtures/webhooks/certs.ts';
import { post } from '../../fixtures/webhooks/client.ts';

export const PATCH: JsonPatchOp[] = [{ op: 'add', path: '/metadata/labels', value: { stamped: 'yes' } }];

export interface Gate {
  promise: Promise<void>;
  open(): void;
}
export const gate = (): Gate => {
  let open!: () => void;
  const promise = new Promise<void>((r) => {
    open = r;
  });
  return { promise, open };
};

export let pki: TestPki;
export let otherPki: TestPki;
export let held: Gate = gate();
export let started: Gate = gate();
export let lastSignal: AbortSignal | undefined;

export const handler: AdmissionHandler = {
  path: '/review',
  async review(request, ctx) {
    lastSignal = ctx.signal;
    switch (request.name) {
      case 'deny':
        return deny('test-rule', 'no entry for "deny"');
      case 'state-mount':
        return deny(STATE_MOUNT_REASONS.writableStateMount, 'berth-state is reserved');
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

export function body(name: string, apiVersion = 'admission.k8s.io/v1', uid = `uid-${name}`): string {
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

export let servers: AdmissionServer[] = [];
export async function startServer(
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

export const send = (port: number, b: string | Buffer, extra: Partial<Parameters<typeof post>[0]> = {}) =>
  post({ port, path: '/review', body: b, ca: pki.caCert, ...extra });

/** Sum of a counter or gauge's samples matching the labels. */
export const metric = async (
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

/** Test PKIs before all tests; servers closed and gates reset after each. */
export function useAdmissionServers(): void {
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
}
