// The operator's own informers under watch faults (issue #10): the BerthLease controller's cache and the
// node taint guard's Node and agent-Pod caches, each after a dropped watch, a silent watch (connection
// open, nothing delivered) and a 410 Gone (history compacted while it was not listening). Writes made
// during the fault must reach the cache, and a write made after it must arrive through the new watch.
// Their timeouts and backoffs run on an injected clock: a silent stream is replaced after the production
// inactivity timeout (5 min with bookmarks), without waiting for it. The informers watch through an
// ApiProxy (the faults); the test writes to the API server directly. A control plane of the file's own,
// without KWOK Nodes: the caches hold every BerthLease and Node of the cluster.
import { type CoreV1Api, CustomObjectsApi, type KubernetesObject } from '@kubernetes/client-node';
import { Registry } from 'prom-client';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { GROUP, PLURAL, VERSION } from '../../../src/berth/api.ts';
import { BerthLeaseController } from '../../../src/berth/controller.ts';
import { HttpLeaseClient } from '../../../src/berth/leaseclient.ts';
import { ManualClock } from '../../../src/kube/clock.ts';
import type { Informer } from '../../../src/kube/informer.ts';
import { KubeTransport } from '../../../src/kube/transport.ts';
import { NodeTaintGuard } from '../../../src/nodetaint/controller.ts';
import { mergePatch } from '../../helpers/api.ts';
import { ApiProxy, type WatchFilter } from '../../helpers/api-proxy.ts';
import { TestCluster } from '../../helpers/cluster.ts';
import { eventually } from '../../helpers/eventually.ts';
import { spec } from '../berth/harness.ts';
import { AGENT_LABELS, guardConfig } from '../nodetaint/harness.ts';
import { advanceUntil, collectUncaught } from './api-faults-harness.ts';

const LEASE_NS = 'team-a';
const AGENT_NS = 'aether-system';
const OPERATOR_NS = 'berth-system';
/** The informers' default inactivity timeout with bookmarks (informer.ts). */
const INACTIVITY_MS = 300_000;
const CONVERGE = { timeoutMs: 15_000, intervalMs: 20 };

const uncaught = collectUncaught();
let t: TestCluster;
let proxy: ApiProxy;
let core: CoreV1Api;
let custom: CustomObjectsApi;
let transport: KubeTransport;
let leases: BerthLeaseController;
let guard: NodeTaintGuard;
const clock = new ManualClock(Date.now());
const registry = new Registry();

beforeAll(async () => {
  t = await TestCluster.own({ nodes: 0 });
  core = t.core;
  custom = t.kc.makeApiClient(CustomObjectsApi);
  for (const name of [LEASE_NS, AGENT_NS]) await t.createNamespace(name);
  await t.installBerthLeaseCrd();
  proxy = await ApiProxy.start(t);
  transport = new KubeTransport(t.kubeConfigFor(proxy.kubeconfigFor(t.kubeconfig)));
  // Only the caches run: no reconcile ever calls the lease client.
  leases = new BerthLeaseController({
    transport,
    leaseClient: new HttpLeaseClient({ baseUrl: 'https://127.0.0.1:9' }),
    clusterIdentity: 'cluster-east',
    operatorNamespace: OPERATOR_NS,
    informerClock: clock,
    registry,
  });
  guard = new NodeTaintGuard({
    config: guardConfig(AGENT_NS, OPERATOR_NS),
    transport,
    informerClock: clock,
    registry,
  });
  leases.startInformer();
  guard.startInformers();
  await Promise.all([leases.informer.waitForSync(), guard.waitForCaches()]);
});
afterEach(() => {
  proxy.clear();
  expect(uncaught.errors).toEqual([]);
});
afterAll(async () => {
  uncaught.dispose();
  await leases?.stop();
  await guard?.stop();
  await transport?.close();
  await proxy?.stop();
  await t?.stop();
});

interface Subject {
  name: string;
  informer: () => Informer<KubernetesObject>;
  watch: WatchFilter;
  create(name: string): Promise<void>;
  /** Changes the object (a label), so that its resourceVersion moves. */
  touch(name: string): Promise<void>;
  remove(name: string): Promise<void>;
  /** name -> resourceVersion of what the server holds now (within the informer's scope). */
  server(): Promise<Record<string, string>>;
}

const byName = (items: KubernetesObject[]): Record<string, string> =>
  Object.fromEntries(items.map((o) => [o.metadata?.name ?? '', o.metadata?.resourceVersion ?? '']));
const leaseRef = { group: GROUP, version: VERSION, plural: PLURAL, namespace: LEASE_NS };
const label = (value: string) => ({ metadata: { labels: { touched: value } } });
let touches = 0;

const subjects: Subject[] = [
  {
    name: 'BerthLease cache',
    informer: () => leases.informer,
    watch: { group: GROUP, resource: PLURAL },
    create: async (name) => {
      await custom.createNamespacedCustomObject({
        ...leaseRef,
        body: { apiVersion: `${GROUP}/${VERSION}`, kind: 'BerthLease', metadata: { name }, spec: spec() },
      });
    },
    touch: async (name) => {
      await custom.patchNamespacedCustomObject(
        { ...leaseRef, name, body: label(String(++touches)) },
        mergePatch,
      );
    },
    remove: async (name) => void (await custom.deleteNamespacedCustomObject({ ...leaseRef, name })),
    server: async () =>
      byName(((await custom.listNamespacedCustomObject(leaseRef)) as { items: KubernetesObject[] }).items),
  },
  {
    name: 'Node cache',
    informer: () => guard.nodes as unknown as Informer<KubernetesObject>,
    watch: { group: '', resource: 'nodes' },
    create: async (name) => void (await core.createNode({ body: { metadata: { name } } })),
    touch: async (name) => void (await core.patchNode({ name, body: label(String(++touches)) }, mergePatch)),
    remove: async (name) => void (await core.deleteNode({ name })),
    server: async () => byName((await core.listNode()).items),
  },
  {
    name: 'agent Pod cache',
    informer: () => guard.agentPods as unknown as Informer<KubernetesObject>,
    watch: { group: '', resource: 'pods', namespace: AGENT_NS },
    create: async (name) =>
      void (await core.createNamespacedPod({
        namespace: AGENT_NS,
        body: {
          metadata: { name, labels: AGENT_LABELS },
          spec: { containers: [{ name: 'agent', image: 'aether/agent:1' }] },
        },
      })),
    touch: async (name) =>
      void (await core.patchNamespacedPod(
        {
          namespace: AGENT_NS,
          name,
          body: { metadata: { labels: { ...AGENT_LABELS, touched: String(++touches) } } },
        },
        mergePatch,
      )),
    remove: async (name) =>
      void (await core.deleteNamespacedPod({ namespace: AGENT_NS, name, gracePeriodSeconds: 0 })),
    server: async () =>
      byName(
        (
          await core.listNamespacedPod({
            namespace: AGENT_NS,
            labelSelector: 'app.kubernetes.io/name=aether-agent',
          })
        ).items,
      ),
  },
];

const restarts = async (informer: string, reason: string): Promise<number> => {
  const values = (await registry.getSingleMetric('berth_informer_watch_restarts_total')?.get())?.values ?? [];
  return values
    .filter((v) => v.labels.informer === informer && v.labels.reason === reason)
    .reduce((sum, v) => sum + v.value, 0);
};

interface WatchFault {
  name: string;
  /** The restart reason the informer must report for it. */
  reason: string;
  /** Starts the fault; returns what ends it (after the writes made during it). */
  start(s: Subject): () => void | Promise<void>;
}

const faults: WatchFault[] = [
  {
    name: 'a dropped watch',
    reason: 'error',
    start: (s) => {
      expect(proxy.dropWatches(s.watch)).toBeGreaterThan(0);
      return () => {};
    },
  },
  {
    name: 'a silent watch',
    reason: 'inactivity',
    start: (s) => {
      const undo = proxy.silenceWatches(s.watch);
      return () => {
        // The stream stays silent until the informer gives up on it.
        clock.advance(INACTIVITY_MS);
        undo();
      };
    },
  },
  {
    name: '410 Gone (history compacted while not listening)',
    reason: 'gone',
    start: (s) => {
      const undo = proxy.silenceWatches(s.watch);
      return async () => {
        await proxy.expireHistory(s.watch);
        proxy.dropWatches(s.watch);
        undo();
      };
    },
  },
];

let index = 0;

describe.each(subjects)('$name', (s) => {
  it.each(faults)('catches up after $name', async (f) => {
    const n = ++index;
    const [keep, gone] = [`keep-${n}`, `gone-${n}`];
    await s.create(keep);
    await s.create(gone);
    const informer = s.informer();
    // The clock is shared: an informer may be waiting out a backoff left by an earlier case.
    await advanceUntil(
      clock,
      50,
      () => informer.list().some((o) => o.metadata?.name === gone) && proxy.activeWatches(s.watch) > 0,
      CONVERGE,
    );
    const before = await restarts(informer.name, f.reason);
    const end = f.start(s);
    // Written while the informer is not receiving: a create, a change and a delete.
    await s.create(`during-${n}`);
    await s.touch(keep);
    await s.remove(gone);
    await end();
    // Compared with the server's state at each attempt: the controllers write too (the TTL annotation
    // of a new Node, the scheduler's condition on a Pod).
    await advanceUntil(
      clock,
      250,
      async () => expect(byName(informer.list())).toEqual(await s.server()),
      CONVERGE,
    );
    expect(await restarts(informer.name, f.reason)).toBeGreaterThan(before);
    // And the new watch delivers what comes next, with no clock moving.
    await s.create(`after-${n}`);
    await s.touch(keep);
    await eventually(async () => expect(byName(informer.list())).toEqual(await s.server()), CONVERGE);
  });
});
