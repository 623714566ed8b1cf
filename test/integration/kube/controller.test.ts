// A controller fed by informers against the real API server: retries with growing delays, terminal errors,
// requeueAfter, mapping one kind to another's keys, and drain on stop.
import { CoreV1Api, type KubernetesObject, type V1ConfigMap, type V1Secret } from '@kubernetes/client-node';
import { Registry } from 'prom-client';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { Controller, type ControllerOptions, TerminalError } from '../../../src/kube/controller.ts';
import { Informer } from '../../../src/kube/informer.ts';
import { ItemExponentialFailureRateLimiter } from '../../../src/kube/ratelimit.ts';
import { KubeTransport } from '../../../src/kube/transport.ts';
import { mergePatch } from '../../helpers/api.ts';
import { TestCluster } from '../../helpers/cluster.ts';
import { eventually } from '../../helpers/eventually.ts';

let t: TestCluster;
let core: CoreV1Api;
let transport: KubeTransport;
const running: Array<{ stop(): Promise<void> }> = [];

beforeAll(async () => {
  t = await TestCluster.shared();
  core = t.kc.makeApiClient(CoreV1Api);
  transport = new KubeTransport(t.kc);
});
afterEach(async () => {
  // Controllers first (they detach from the informers), then the informers.
  for (const r of running.splice(0).reverse()) await r.stop();
});
afterAll(async () => {
  await transport?.close();
  await t?.stop();
});

/** Names the controller of the current test. */
let n = 0;
function namespace(): Promise<string> {
  n++;
  return t.namespace('ctl');
}

function informerFor<T extends KubernetesObject>(plural: string, ns: string): Informer<T> {
  const informer = new Informer<T>({
    name: `${plural}-${ns}`,
    transport,
    resource: { version: 'v1', plural, namespace: ns },
    // kube-controller-manager publishes kube-root-ca.crt into every namespace: not the tests' business.
    ...(plural === 'configmaps' ? { fieldSelector: 'metadata.name!=kube-root-ca.crt' } : {}),
    backoff: { initialMs: 50, maxMs: 400 },
  });
  informer.start();
  running.push(informer);
  return informer;
}

function controller(options: Partial<ControllerOptions> & Pick<ControllerOptions, 'reconcile'>): Controller {
  const c = new Controller({
    name: `ctl-${n}`,
    rateLimiter: new ItemExponentialFailureRateLimiter<string>(40, 5000),
    ...options,
  });
  running.push(c);
  return c;
}

describe('Controller against the API server', () => {
  it('retries a throwing reconcile with growing delays until it succeeds', async () => {
    const ns = await namespace();
    const cms = informerFor<V1ConfigMap>('configmaps', ns);
    const attempts: number[] = [];
    const registry = new Registry();
    const c = controller({
      registry,
      reconcile: async (key) => {
        if (key !== `${ns}/flaky`) return;
        attempts.push(performance.now());
        if (attempts.length < 5) throw new Error(`attempt ${attempts.length} failed`);
      },
    });
    c.watches(cms);
    await c.start();
    await core.createNamespacedConfigMap({ namespace: ns, body: { metadata: { name: 'flaky' } } });
    await eventually(() => attempts.length === 5, { timeoutMs: 10_000 });
    const gaps = attempts.slice(1).map((at, i) => at - (attempts[i] as number));
    // Each retry waits at least its doubling backoff: 40, 80, 160, 320 ms (timers may fire a little
    // late on a busy machine, never early).
    expect(gaps).toHaveLength(4);
    for (const [i, min] of [40, 80, 160, 320].entries()) expect(gaps[i]).toBeGreaterThanOrEqual(min - 2);
    const text = await registry.getSingleMetricAsString('controller_runtime_reconcile_errors_total');
    expect(text).toContain(`controller_runtime_reconcile_errors_total{controller="ctl-${n}"} 4`);
    expect(c.queue.numRequeues(`${ns}/flaky`)).toBe(0);
  });

  it('does not retry a TerminalError, but reconciles again on the next change', async () => {
    const ns = await namespace();
    const cms = informerFor<V1ConfigMap>('configmaps', ns);
    const calls: string[] = [];
    const registry = new Registry();
    const c = controller({
      registry,
      reconcile: async (key) => {
        calls.push(key);
        if (key === `${ns}/bad`) throw new TerminalError('invalid spec');
      },
    });
    c.watches(cms);
    await c.start();
    await core.createNamespacedConfigMap({ namespace: ns, body: { metadata: { name: 'bad' } } });
    await eventually(() => calls.includes(`${ns}/bad`));
    expect(c.queue.numRequeues(`${ns}/bad`)).toBe(0);
    // A later, unrelated key is served while "bad" stays done.
    await core.createNamespacedConfigMap({ namespace: ns, body: { metadata: { name: 'good' } } });
    await eventually(() => calls.includes(`${ns}/good`));
    expect(calls.filter((k) => k === `${ns}/bad`)).toHaveLength(1);
    expect(
      await registry.getSingleMetricAsString('controller_runtime_terminal_reconcile_errors_total'),
    ).toContain(`controller_runtime_terminal_reconcile_errors_total{controller="ctl-${n}"} 1`);
    await core.patchNamespacedConfigMap(
      { namespace: ns, name: 'bad', body: { data: { fixed: 'yes' } } },
      mergePatch,
    );
    await eventually(() => calls.filter((k) => k === `${ns}/bad`).length === 2);
  });

  it('honours requeueAfter', async () => {
    const ns = await namespace();
    const cms = informerFor<V1ConfigMap>('configmaps', ns);
    const at: number[] = [];
    const c = controller({
      reconcile: async () => {
        at.push(performance.now());
        return at.length === 1 ? { requeueAfter: 300 } : undefined;
      },
    });
    c.watches(cms);
    await c.start();
    await core.createNamespacedConfigMap({ namespace: ns, body: { metadata: { name: 'timer' } } });
    await eventually(() => at.length === 2, { timeoutMs: 5000 });
    expect((at[1] as number) - (at[0] as number)).toBeGreaterThanOrEqual(298);
  });

  it('maps another kind to the keys it affects, reconciling against the API server', async () => {
    const ns = await namespace();
    const cms = informerFor<V1ConfigMap>('configmaps', ns);
    const secrets = informerFor<V1Secret>('secrets', ns);
    const reconciled: string[] = [];
    const c = controller({
      reconcile: async (key, { namespace, name }) => {
        reconciled.push(key);
        // Level-based: read the current state; copy the owner's label count into the ConfigMap.
        const owned = await core.listNamespacedSecret({
          namespace: namespace ?? '',
          labelSelector: `owner=${name}`,
        });
        await core.patchNamespacedConfigMap(
          { namespace: namespace ?? '', name, body: { data: { secrets: String(owned.items.length) } } },
          mergePatch,
        );
      },
    });
    c.watches(cms).watches(secrets, {
      map: (s) =>
        s.metadata?.labels?.owner ? `${s.metadata.namespace}/${s.metadata.labels.owner}` : undefined,
    });
    await c.start();
    await core.createNamespacedConfigMap({ namespace: ns, body: { metadata: { name: 'owner' } } });
    await core.createNamespacedSecret({
      namespace: ns,
      body: { metadata: { name: 's1', labels: { owner: 'owner' } } },
    });
    await core.createNamespacedSecret({
      namespace: ns,
      body: { metadata: { name: 's2', labels: { owner: 'owner' } } },
    });
    await core.createNamespacedSecret({ namespace: ns, body: { metadata: { name: 'unowned' } } });
    await eventually(() => cms.get(`${ns}/owner`)?.data?.secrets === '2', { timeoutMs: 5000 });
    await core.deleteNamespacedSecret({ namespace: ns, name: 's1' });
    await eventually(() => cms.get(`${ns}/owner`)?.data?.secrets === '1', { timeoutMs: 5000 });
    expect(reconciled.every((k) => k === `${ns}/owner`)).toBe(true);
  });

  it('stop() returns when the write of the in-flight reconcile queued its key again', async () => {
    // The reconcile patches its ConfigMap; the watch event of that patch re-adds the key while the
    // reconcile is still running; then the controller stops. The drain used to wait for that key forever.
    const ns = await namespace();
    const cms = informerFor<V1ConfigMap>('configmaps', ns);
    let release!: () => void;
    const released = new Promise<void>((resolve) => {
      release = resolve;
    });
    let calls = 0;
    const c = controller({
      reconcile: async (_key, { namespace, name }) => {
        calls++;
        await core.patchNamespacedConfigMap(
          { namespace: namespace ?? '', name, body: { data: { seen: String(calls) } } },
          mergePatch,
        );
        await released;
      },
    });
    c.watches(cms);
    await c.start();
    await core.createNamespacedConfigMap({ namespace: ns, body: { metadata: { name: 'self' } } });
    // The patch's watch event has reached the cache, so its key is queued again behind the reconcile.
    await eventually(() => cms.get(`${ns}/self`)?.data?.seen === '1');
    let stopped = false;
    const stopping = c.stop().then(() => {
      stopped = true;
    });
    release();
    await eventually(() => stopped, { timeoutMs: 5000 });
    await stopping;
    expect(calls).toBe(1);
  });

  it('stop() lets the in-flight reconcile finish', async () => {
    const ns = await namespace();
    const cms = informerFor<V1ConfigMap>('configmaps', ns);
    let release!: () => void;
    let finished = false;
    const c = controller({
      reconcile: async () => {
        await new Promise<void>((resolve) => {
          release = resolve;
        });
        finished = true;
      },
    });
    c.watches(cms);
    await c.start();
    await core.createNamespacedConfigMap({ namespace: ns, body: { metadata: { name: 'x' } } });
    await eventually(() => release !== undefined);
    const stopping = c.stop();
    release();
    await stopping;
    expect(finished).toBe(true);
  });
});
