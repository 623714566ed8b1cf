// The events.k8s.io/v1 recorder against the real API server (its writes through the fault proxy): wire
// format of eventTime and series, which kube-apiserver validates, and de-duplication of repeats into one
// Event.
import { CoreV1Api, type V1ConfigMap } from '@kubernetes/client-node';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { readJson } from '../../../src/kube/client.ts';
import { EventRecorder, eventSinkFor } from '../../../src/kube/events.ts';
import { isMicroTime } from '../../../src/kube/microtime.ts';
import { KubeTransport } from '../../../src/kube/transport.ts';
import { createLogger } from '../../../src/observability/logger.ts';
import { ApiProxy } from '../../helpers/api-proxy.ts';
import { TestCluster } from '../../helpers/cluster.ts';

let t: TestCluster;
let proxy: ApiProxy;
let core: CoreV1Api;
/** The test's own reads, straight to the API server. */
let transport: KubeTransport;

beforeAll(async () => {
  t = await TestCluster.shared();
  proxy = await ApiProxy.start(t);
  core = t.kc.makeApiClient(CoreV1Api);
  transport = new KubeTransport(t.kc);
});
afterAll(async () => {
  await transport?.close();
  await proxy?.stop();
  await t?.stop();
});

interface WireEvent {
  metadata: { name: string; namespace: string };
  eventTime: string;
  series?: { count: number; lastObservedTime: string };
  reportingController: string;
  reportingInstance: string;
  regarding: { kind: string; name: string; namespace: string; uid: string };
  reason: string;
  action: string;
  type: string;
  note?: string;
}

/** Events as the server stores them, read raw so nothing is re-serialised on the way. */
async function events(namespace: string): Promise<WireEvent[]> {
  const res = await transport.request({ path: `/apis/events.k8s.io/v1/namespaces/${namespace}/events` });
  return (await readJson<{ items: WireEvent[] }>(res)).items;
}

function recorder(): { rec: EventRecorder; lines: string[] } {
  const lines: string[] = [];
  const rec = new EventRecorder({
    sink: eventSinkFor(t.transport(t.kubeConfigFor(proxy.kubeconfigFor(t.kubeconfig)))),
    reportingController: 'berth.skaphos.io/berth-operator',
    reportingInstance: 'replica-0',
    logger: createLogger({ level: 'debug', destination: { write: (l: string) => void lines.push(l) } }),
  });
  return { rec, lines };
}

describe('EventRecorder against the API server', () => {
  it('creates an Event with a six-digit MicroTime eventTime and the reporting fields', async () => {
    const ns = await t.namespace('ev');
    const cm: V1ConfigMap = await core.createNamespacedConfigMap({
      namespace: ns,
      body: { metadata: { name: 'target' } },
    });
    const { rec, lines } = recorder();
    await rec.record(
      { ...cm, apiVersion: 'v1', kind: 'ConfigMap' },
      { type: 'Normal', reason: 'Started', action: 'StartWorkload', note: 'lease acquired' },
    );
    const [event, ...rest] = await events(ns);
    expect(rest).toEqual([]);
    expect(lines.filter((l) => l.includes('"level":"error"'))).toEqual([]);
    expect(isMicroTime(event?.eventTime)).toBe(true);
    expect(event).toMatchObject({
      reportingController: 'berth.skaphos.io/berth-operator',
      reportingInstance: 'replica-0',
      regarding: { kind: 'ConfigMap', name: 'target', namespace: ns, uid: cm.metadata?.uid },
      reason: 'Started',
      action: 'StartWorkload',
      type: 'Normal',
      note: 'lease acquired',
    });
    expect(event?.series).toBeUndefined();
  });

  it('deduplicates repeats into one Event with series.count and a MicroTime lastObservedTime', async () => {
    const ns = await t.namespace('ev');
    const cm = await core.createNamespacedConfigMap({
      namespace: ns,
      body: { metadata: { name: 'target' } },
    });
    const target = { ...cm, apiVersion: 'v1', kind: 'ConfigMap' };
    const { rec } = recorder();
    for (let i = 0; i < 3; i++) await rec.warning(target, 'ReconcileFailed', 'Reconcile', `attempt ${i}`);
    // A burst without awaiting each one still ends with the right count.
    await Promise.all(Array.from({ length: 7 }, () => rec.warning(target, 'ReconcileFailed', 'Reconcile')));
    await rec.normal(target, 'Reconciled', 'Reconcile');
    await rec.flush();
    const list = await events(ns);
    expect(list).toHaveLength(2);
    const failed = list.find((e) => e.reason === 'ReconcileFailed');
    expect(failed?.series?.count).toBe(10);
    expect(isMicroTime(failed?.series?.lastObservedTime)).toBe(true);
    expect(isMicroTime(failed?.eventTime)).toBe(true);
    expect(failed?.note).toBe('attempt 0');
    expect(list.find((e) => e.reason === 'Reconciled')?.series).toBeUndefined();
  });

  it('writes every event (creates and series patches) over one connection', async () => {
    const ns = await t.namespace('ev-pool');
    const cm = await core.createNamespacedConfigMap({
      namespace: ns,
      body: { metadata: { name: 'x' } },
    });
    const { rec } = recorder();
    const before = proxy.connectionsAccepted();
    for (let i = 0; i < 10; i++) {
      await rec.normal({ ...cm, apiVersion: 'v1', kind: 'ConfigMap' }, `Reason${i % 3}`, 'Act', `note ${i}`);
    }
    expect((await events(ns)).length).toBe(3);
    // Only the recorder talks through the proxy (the read above goes direct): not a connection per write,
    // but the pool's first request gets one of its own (as kube/leaseclient.test.ts allows).
    expect(proxy.connectionsAccepted() - before).toBeLessThanOrEqual(2);
  });

  it('puts events about cluster-scoped objects in the default namespace and survives API failures', async () => {
    const { rec, lines } = recorder();
    // A Namespace of this test's own stands for any cluster-scoped object (the shared cluster's default
    // namespace collects every suite's such events).
    const ns = await core.readNamespace({ name: await t.namespace('ev-cluster') });
    const name = ns.metadata?.name;
    await rec.normal({ ...ns, apiVersion: 'v1', kind: 'Namespace' }, 'Checked', 'Check');
    expect((await events('default')).some((e) => e.regarding.name === name)).toBe(true);

    const fault = proxy.inject({
      verbs: ['create'],
      group: 'events.k8s.io',
      resource: 'events',
      status: 403,
    });
    try {
      await expect(
        rec.warning({ ...ns, apiVersion: 'v1', kind: 'Namespace' }, 'Denied', 'Check'),
      ).resolves.toBeUndefined();
    } finally {
      fault.remove();
    }
    expect(fault.hits()).toBe(1);
    expect(lines.some((l) => l.includes('giving up') && l.includes('403'))).toBe(true);
  });
});
