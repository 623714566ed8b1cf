// The informer against the real API server, through the fault proxy: it must end up with exactly what a
// fresh list returns after dropped watches, an expired resourceVersion (410), injected 500s and a silent
// stream.
import { CoreV1Api, type KubernetesObject, type V1ConfigMap, type V1Pod } from '@kubernetes/client-node';
import { Registry } from 'prom-client';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { Informer, type InformerOptions } from '../../../src/kube/informer.ts';
import { objectKey } from '../../../src/kube/keys.ts';
import { KubeTransport } from '../../../src/kube/transport.ts';
import { PodBuilder } from '../../builders/pod.ts';
import { mergePatch } from '../../helpers/api.ts';
import { ApiProxy } from '../../helpers/api-proxy.ts';
import { TestCluster, uniqueName } from '../../helpers/cluster.ts';
import { eventually } from '../../helpers/eventually.ts';

let t: TestCluster;
let proxy: ApiProxy;
let core: CoreV1Api;
/** The informers' transport: the admin, through the proxy (the test's own `core` goes direct). */
let transport: KubeTransport;
const informers: Informer<KubernetesObject>[] = [];

beforeAll(async () => {
  t = await TestCluster.shared();
  proxy = await ApiProxy.start(t);
  core = t.kc.makeApiClient(CoreV1Api);
  transport = new KubeTransport(t.kubeConfigFor(proxy.kubeconfigFor(t.kubeconfig)));
});
afterEach(async () => {
  proxy.clear();
  await Promise.all(informers.splice(0).map((i) => i.stop()));
});
afterAll(async () => {
  await transport?.close();
  await proxy?.stop();
  await t?.stop();
});

const namespace = (): Promise<string> => t.namespace('inf');

function configMapInformer(
  ns: string,
  options: Partial<InformerOptions<V1ConfigMap>> = {},
): { informer: Informer<V1ConfigMap>; log: string[] } {
  const log: string[] = [];
  const informer = new Informer<V1ConfigMap>({
    name: `cm-${ns}`,
    transport,
    resource: { version: 'v1', plural: 'configmaps', namespace: ns },
    backoff: { initialMs: 50, maxMs: 400 },
    ...options,
  });
  informer.addEventHandler({
    onAdd: (o) => void log.push(`add ${o.metadata?.name}`),
    onUpdate: (_, o) => void log.push(`update ${o.metadata?.name}`),
    onDelete: (o, unknown) => void log.push(`delete ${o.metadata?.name}${unknown ? ' (relist)' : ''}`),
  });
  informers.push(informer as Informer<KubernetesObject>);
  return { informer, log };
}

/** name -> resourceVersion of what the server holds now. */
async function freshList(ns: string, labelSelector?: string): Promise<Record<string, string>> {
  const list = await core.listNamespacedConfigMap({
    namespace: ns,
    ...(labelSelector ? { labelSelector } : {}),
  });
  return Object.fromEntries(
    list.items
      // Every namespace holds kube-root-ca.crt, published by kube-controller-manager.
      .filter((o) => o.metadata?.name !== 'kube-root-ca.crt')
      .map((o) => [o.metadata?.name ?? '', o.metadata?.resourceVersion ?? '']),
  );
}

function cached(informer: Informer<V1ConfigMap>): Record<string, string> {
  return Object.fromEntries(
    informer
      .list()
      .filter((o) => o.metadata?.name !== 'kube-root-ca.crt')
      .map((o) => [o.metadata?.name ?? '', o.metadata?.resourceVersion ?? '']),
  );
}

async function expectCacheMatchesServer(informer: Informer<V1ConfigMap>, ns: string, labelSelector?: string) {
  const want = await freshList(ns, labelSelector);
  await eventually(() => expect(cached(informer)).toEqual(want), { timeoutMs: 15_000 });
}

const cm = (
  name: string,
  data: Record<string, string> = {},
  labels: Record<string, string> = {},
): V1ConfigMap => ({
  metadata: { name, labels },
  data,
});

const restarts = (registry: Registry): Promise<string> =>
  registry.getSingleMetricAsString('berth_informer_watch_restarts_total');

describe('Informer against the API server', () => {
  it('survives dropped watches without missing a change', async () => {
    const ns = await namespace();
    await core.createNamespacedConfigMap({ namespace: ns, body: cm('a') });
    const { informer } = configMapInformer(ns);
    informer.start();
    await informer.waitForSync();
    for (let round = 0; round < 5; round++) {
      await eventually(() => proxy.activeWatches({ resource: 'configmaps', namespace: ns }) === 1);
      expect(proxy.dropWatches({ resource: 'configmaps', namespace: ns })).toBe(1);
      // Changes made while the informer is reconnecting.
      await core.createNamespacedConfigMap({ namespace: ns, body: cm(`c${round}`) });
      await core.patchNamespacedConfigMap(
        { namespace: ns, name: 'a', body: { data: { round: String(round) } } },
        mergePatch,
      );
      if (round > 0) await core.deleteNamespacedConfigMap({ namespace: ns, name: `c${round - 1}` });
    }
    await expectCacheMatchesServer(informer, ns);
    expect(informer.get(`${ns}/a`)?.data).toEqual({ round: '4' });
  });

  it('relists after its resourceVersion expired (410), emitting deletes for objects removed meanwhile', async () => {
    const ns = await namespace();
    for (const name of ['keep', 'change', 'vanish'])
      await core.createNamespacedConfigMap({ namespace: ns, body: cm(name) });
    const registry = new Registry();
    const { informer, log } = configMapInformer(ns, { registry });
    informer.start();
    await informer.waitForSync();
    await eventually(() => proxy.activeWatches({ resource: 'configmaps', namespace: ns }) === 1);
    // The informer misses these changes, then its resourceVersion is compacted away.
    const undo = proxy.silenceWatches({ resource: 'configmaps', namespace: ns });
    await core.deleteNamespacedConfigMap({ namespace: ns, name: 'vanish' });
    await core.patchNamespacedConfigMap(
      { namespace: ns, name: 'change', body: { data: { v: '2' } } },
      mergePatch,
    );
    await core.createNamespacedConfigMap({ namespace: ns, body: cm('new') });
    await proxy.expireHistory({ resource: 'configmaps', namespace: ns });
    const expiredAt = proxy.records.length;
    proxy.dropWatches({ resource: 'configmaps', namespace: ns });
    undo();
    await expectCacheMatchesServer(informer, ns);
    expect(log).toContain('delete vanish (relist)');
    expect(log).toContain('update change');
    expect(log).toContain('add new');
    expect(await restarts(registry)).toMatch(
      /berth_informer_watch_restarts_total\{informer="cm-inf-[0-9a-f]+",reason="gone"\} [1-9]/,
    );
    // The 410 came from the proxy's expiry, and the informer listed again rather than resuming.
    const after = proxy.records.slice(expiredAt).filter((r) => r.namespace === ns);
    expect(after.filter((r) => r.verb === 'list').length).toBeGreaterThanOrEqual(1);
  });

  it('survives 500s on list and watch', async () => {
    const ns = await namespace();
    await core.createNamespacedConfigMap({ namespace: ns, body: cm('a') });
    const listFault = proxy.inject({
      verbs: ['list'],
      resource: 'configmaps',
      namespace: ns,
      status: 500,
      times: 3,
    });
    const { informer } = configMapInformer(ns);
    informer.start();
    await informer.waitForSync();
    expect(listFault.hits()).toBe(3);
    await eventually(() => proxy.activeWatches({ resource: 'configmaps', namespace: ns }) === 1);

    const watchFault = proxy.inject({
      verbs: ['watch'],
      resource: 'configmaps',
      namespace: ns,
      status: 500,
      times: 4,
    });
    proxy.dropWatches({ resource: 'configmaps', namespace: ns });
    await core.createNamespacedConfigMap({ namespace: ns, body: cm('b') });
    await core.deleteNamespacedConfigMap({ namespace: ns, name: 'a' });
    await expectCacheMatchesServer(informer, ns);
    expect(watchFault.hits()).toBe(4);
  });

  it('honours Retry-After on a 429', async () => {
    const ns = await namespace();
    const fault = proxy.inject({
      verbs: ['list'],
      resource: 'configmaps',
      namespace: ns,
      status: 429,
      retryAfterSeconds: 1,
      times: 1,
    });
    const { informer } = configMapInformer(ns);
    const started = Date.now();
    informer.start();
    await informer.waitForSync();
    expect(fault.hits()).toBe(1);
    expect(Date.now() - started).toBeGreaterThanOrEqual(900);
  });

  it('replaces a silent stream after the inactivity timeout and catches up on the changes it missed', async () => {
    const ns = await namespace();
    await core.createNamespacedConfigMap({ namespace: ns, body: cm('a') });
    const registry = new Registry();
    const { informer } = configMapInformer(ns, { inactivityTimeoutMs: 1500, registry });
    informer.start();
    await informer.waitForSync();
    await eventually(() => proxy.activeWatches({ resource: 'configmaps', namespace: ns }) === 1);
    const undo = proxy.silenceWatches({ resource: 'configmaps', namespace: ns });
    try {
      await core.createNamespacedConfigMap({ namespace: ns, body: cm('during-silence') });
      await core.patchNamespacedConfigMap(
        { namespace: ns, name: 'a', body: { data: { k: 'v' } } },
        mergePatch,
      );
      expect(informer.get(`${ns}/during-silence`)).toBeUndefined();
      await expectCacheMatchesServer(informer, ns);
    } finally {
      undo();
    }
    expect(await restarts(registry)).toMatch(/reason="inactivity"\} [1-9]/);
  });

  // kube-apiserver's watch cache sends a bookmark only when the resource's cache has moved past the
  // watch's resourceVersion (here: ConfigMaps changing in another namespace, which this watch never
  // sees), and only about once a minute or 2 s before the watch's timeout: in [timeout-3 s,
  // timeout-0.75 s]. With a 4 s watch timeout and a 3.8 s inactivity timeout, each stream carries
  // nothing but its bookmark, and only that bookmark keeps it from being replaced before the server ends it.
  it('keeps a quiet but healthy stream: bookmarks count as activity', async () => {
    const ns = await namespace();
    const elsewhere = await namespace();
    const registry = new Registry();
    const { informer } = configMapInformer(ns, {
      watchTimeoutSeconds: 4,
      inactivityTimeoutMs: 3_800,
      registry,
    });
    informer.start();
    await informer.waitForSync();
    const rv = Number(informer.lastResourceVersion());
    let writing = true;
    const writer = (async () => {
      for (let i = 0; writing; i++) {
        await core.createNamespacedConfigMap({ namespace: elsewhere, body: cm(`other-${i}`) });
        await new Promise((r) => setTimeout(r, 250));
      }
    })();
    try {
      // Bookmarks move the resourceVersion on although nothing in the watched namespace changed.
      await eventually(() => Number(informer.lastResourceVersion()) > rv, { timeoutMs: 10_000 });
      // Three streams in a row ran their course with only bookmarks on them, and none was replaced.
      await eventually(async () => /reason="closed"\} [3-9]/.test(await restarts(registry)), {
        timeoutMs: 20_000,
        intervalMs: 100,
      });
      expect(informer.secondsSinceLastEvent()).toBeLessThan(4);
    } finally {
      writing = false;
      await writer;
    }
    expect(informer.keys().filter((k) => k !== `${ns}/kube-root-ca.crt`)).toEqual([]);
    expect(await restarts(registry)).not.toMatch(/reason="inactivity"\} [1-9]/);
    expect(await restarts(registry)).not.toMatch(/reason="error"\} [1-9]/);
  });

  it('is scoped by label selector: objects leaving the selector are deleted from the cache', async () => {
    const ns = await namespace();
    await core.createNamespacedConfigMap({ namespace: ns, body: cm('in', {}, { app: 'x' }) });
    await core.createNamespacedConfigMap({ namespace: ns, body: cm('out', {}, { app: 'y' }) });
    const { informer, log } = configMapInformer(ns, { labelSelector: 'app=x' });
    informer.start();
    await informer.waitForSync();
    expect(informer.keys()).toEqual([`${ns}/in`]);
    await core.patchNamespacedConfigMap(
      { namespace: ns, name: 'in', body: { metadata: { labels: { app: 'y' } } } },
      mergePatch,
    );
    await core.patchNamespacedConfigMap(
      { namespace: ns, name: 'out', body: { metadata: { labels: { app: 'x' } } } },
      mergePatch,
    );
    await expectCacheMatchesServer(informer, ns, 'app=x');
    expect(informer.keys()).toEqual([`${ns}/out`]);
    expect(log).toEqual(['add in', 'delete in', 'add out']);
  });

  it('indexes Pods by spec.nodeName with field-selector scoping, across namespaces', async () => {
    const ns1 = await namespace();
    const ns2 = await namespace();
    // Names no other suite uses: the informers below watch Pods in every namespace. The Nodes do not
    // exist, so nothing runs these Pods.
    const nodeA = uniqueName('node-a');
    const nodeB = uniqueName('node-b');
    const agent = uniqueName('agent');
    const pod = (name: string, nodeName: string, app: string): V1Pod =>
      new PodBuilder(name)
        .labels({ app })
        .nodeName(nodeName)
        .containers({ name: 'c', image: 'busybox' })
        .obj();
    await core.createNamespacedPod({ namespace: ns1, body: pod('p1', nodeA, agent) });
    await core.createNamespacedPod({ namespace: ns2, body: pod('p2', nodeA, agent) });
    await core.createNamespacedPod({ namespace: ns2, body: pod('p3', nodeB, agent) });
    await core.createNamespacedPod({ namespace: ns1, body: pod('p4', nodeA, 'other') });

    const pods = new Informer<V1Pod>({
      name: 'agent-pods',
      transport,
      resource: { version: 'v1', plural: 'pods' },
      labelSelector: `app=${agent}`,
      backoff: { initialMs: 50, maxMs: 400 },
    });
    informers.push(pods as Informer<KubernetesObject>);
    pods.addIndexer('node', (p) => (p.spec?.nodeName ? [p.spec.nodeName] : []));
    pods.start();
    await pods.waitForSync();
    const onNode = (node: string): string[] => pods.byIndex('node', node).map(objectKey).sort();
    expect(onNode(nodeA)).toEqual([`${ns1}/p1`, `${ns2}/p2`].sort());
    expect(onNode(nodeB)).toEqual([`${ns2}/p3`]);
    expect(pods.list(ns2).map(objectKey).sort()).toEqual([`${ns2}/p2`, `${ns2}/p3`]);

    await core.deleteNamespacedPod({ namespace: ns2, name: 'p2', gracePeriodSeconds: 0 });
    await core.createNamespacedPod({ namespace: ns2, body: pod('p5', nodeB, agent) });
    await eventually(() => expect(onNode(nodeB)).toEqual([`${ns2}/p3`, `${ns2}/p5`]));
    await eventually(() => expect(onNode(nodeA)).toEqual([`${ns1}/p1`]));

    const onB = new Informer<V1Pod>({
      name: 'node-b-pods',
      transport,
      resource: { version: 'v1', plural: 'pods' },
      fieldSelector: `spec.nodeName=${nodeB}`,
    });
    informers.push(onB as Informer<KubernetesObject>);
    onB.start();
    await onB.waitForSync();
    expect(onB.keys().sort()).toEqual([`${ns2}/p3`, `${ns2}/p5`]);
  });
});
