// Fault injection through the sandbox handle: failing, throttled, slow and reset requests.
import { CoreV1Api } from '@kubernetes/client-node';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { apiOutcome } from '../../helpers/api.ts';
import { startTestSandbox, type TestSandbox } from '../../helpers/sandbox.ts';

let t: TestSandbox;
let core: CoreV1Api;

beforeAll(async () => {
  t = await startTestSandbox();
  core = t.kc.makeApiClient(CoreV1Api);
});
afterEach(() => t.sandbox.faults.clear());
afterAll(async () => {
  await t.stop();
});

describe('fault injection', () => {
  it('fails matching requests with the chosen status, a given number of times', async () => {
    const fault = t.sandbox.faults.inject({ verbs: ['list'], resource: 'configmaps', status: 503, times: 2 });
    expect((await apiOutcome(core.listNamespacedConfigMap({ namespace: 'default' }))).code).toBe(503);
    expect((await apiOutcome(core.listNamespacedConfigMap({ namespace: 'default' }))).reason).toBe(
      'ServiceUnavailable',
    );
    expect((await apiOutcome(core.listNamespacedConfigMap({ namespace: 'default' }))).code).toBe(200);
    expect(fault.hits()).toBe(2);
    expect((await apiOutcome(core.listNamespace())).code).toBe(200);
  });

  it('throttles with 429 and Retry-After', async () => {
    t.sandbox.faults.inject({ resource: 'namespaces', status: 429, retryAfterSeconds: 3, times: 1 });
    const res = await apiOutcome(core.readNamespace({ name: 'default' }));
    expect(res.code).toBe(429);
    expect(res.reason).toBe('TooManyRequests');
    expect(res.headers?.['retry-after']).toBe('3');
  });

  it('delays requests and resets connections', async () => {
    t.sandbox.faults.inject({ resource: 'namespaces', verbs: ['get'], delayMs: 200, times: 1 });
    const started = performance.now();
    expect((await apiOutcome(core.readNamespace({ name: 'default' }))).code).toBe(200);
    expect(performance.now() - started).toBeGreaterThanOrEqual(190);
    t.sandbox.faults.inject({ resource: 'namespaces', verbs: ['get'], resetConnection: true, times: 1 });
    expect((await apiOutcome(core.readNamespace({ name: 'default' }))).code).toBe(-1);
    expect((await apiOutcome(core.readNamespace({ name: 'default' }))).code).toBe(200);
  });

  it('targets one object by namespace and name', async () => {
    await core.createNamespacedConfigMap({ namespace: 'default', body: { metadata: { name: 'target' } } });
    await core.createNamespacedConfigMap({ namespace: 'default', body: { metadata: { name: 'bystander' } } });
    t.sandbox.faults.inject({ resource: 'configmaps', namespace: 'default', name: 'target', status: 500 });
    expect(
      (await apiOutcome(core.readNamespacedConfigMap({ namespace: 'default', name: 'target' }))).code,
    ).toBe(500);
    expect(
      (await apiOutcome(core.readNamespacedConfigMap({ namespace: 'default', name: 'bystander' }))).code,
    ).toBe(200);
  });
});
