// The invariant monitor (test/helpers/invariants.ts) itself: each breach, constructed deliberately (no
// operator runs yet, and the objects live in the operator namespace, which the webhooks never admit), is
// caught; a normal managed two-cluster failover through the real operators, webhooks and central server
// leaves it clean while it sees the workload run in one cluster, then in the other. Two control planes
// (east, west) for both.
import type { V1Pod } from '@kubernetes/client-node';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import {
  GROUP,
  MANAGED_LEASE,
  MANAGED_UID,
  PLURAL,
  SCHEDULING_GATE,
  VERSION,
} from '../../../src/berth/api.ts';
import { BerthLeaseBuilder } from '../../builders/berthlease.ts';
import { PodBuilder } from '../../builders/pod.ts';
import { jsonPatch } from '../../helpers/api.ts';
import { eventually } from '../../helpers/eventually.ts';
import { type Breach, InvariantMonitor } from '../../helpers/invariants.ts';
import { type Central, startCentral } from '../berth/harness.ts';
import {
  createManagedOperator,
  deploymentLease,
  isGated,
  ManagedCluster,
  type ManagedOperator,
  OPERATOR_NS,
} from '../managed/harness.ts';

let east: ManagedCluster;
let west: ManagedCluster;

beforeAll(async () => {
  [east, west] = await Promise.all([ManagedCluster.start('east'), ManagedCluster.start('west')]);
});
afterAll(async () => {
  await Promise.all([east?.stop(), west?.stop()]);
});

/** Where the breaches are built: admission (fail-closed) would refuse such Pods anywhere else. */
const PLAIN_NS = OPERATOR_NS;
/** A Node no kubelet (KWOK) serves: the Pods bound to it keep the phase the test writes. */
const PLAIN_NODE = 'plain-node';

type Plain = ManagedCluster;

const ref = { group: GROUP, version: VERSION, plural: PLURAL, namespace: PLAIN_NS };

/** A BerthLease (no operator reconciles it); its status is written by the test. */
async function lease(c: Plain, name: string, leaseName = name): Promise<{ uid: string }> {
  const created = (await c.custom.createNamespacedCustomObject({
    ...ref,
    body: new BerthLeaseBuilder(name).leaseName(leaseName).holderIdentity('h').obj(),
  })) as { metadata: { uid: string } };
  return { uid: created.metadata.uid };
}

async function writeStatus(c: Plain, name: string, status: object): Promise<void> {
  const current = (await c.custom.getNamespacedCustomObject({ ...ref, name })) as Record<string, unknown>;
  await c.custom.replaceNamespacedCustomObjectStatus({ ...ref, name, body: { ...current, status } });
}

/** A managed Pod of `leaseName` (annotations as admission stamps them), gated or not, then Running. */
async function managedPod(
  c: Plain,
  name: string,
  leaseName: string,
  leaseUid: string,
  o: { gated?: boolean; phase?: string } = {},
): Promise<V1Pod> {
  const body = new PodBuilder(name).annotations({ [MANAGED_LEASE]: leaseName, [MANAGED_UID]: leaseUid });
  const pod = await c.core.createNamespacedPod({
    namespace: PLAIN_NS,
    body: (o.gated ? body.gates(SCHEDULING_GATE) : body.nodeName(PLAIN_NODE)).obj(),
  });
  if (o.phase === undefined) return pod;
  return c.core.replaceNamespacedPodStatus({
    namespace: PLAIN_NS,
    name,
    body: { ...pod, status: { phase: o.phase } },
  });
}

/** The breaches about one workload or central key (each test uses its own; the clusters are shared). */
const about = (monitor: InvariantMonitor, key: string): Breach[] =>
  monitor.breaches().filter((b) => b.key === `${PLAIN_NS}/${key}`);
const kinds = (monitor: InvariantMonitor, key: string): Breach['kind'][] =>
  about(monitor, key).map((b) => b.kind);

describe('the monitor catches each breach', () => {
  let monitor: InvariantMonitor;

  beforeAll(async () => {
    for (const c of [east, west]) await c.core.createNode({ body: { metadata: { name: PLAIN_NODE } } });
  });
  afterEach(async () => {
    await monitor?.stop();
  });
  // Nothing of these breaches may be left for the failover below: Pods, leases and the Node go.
  afterAll(async () => {
    for (const c of [east, west]) {
      await c.core.deleteCollectionNamespacedPod({ namespace: PLAIN_NS, gracePeriodSeconds: 0 });
      await c.custom.deleteCollectionNamespacedCustomObject({ ...ref });
      await c.core.deleteNode({ name: PLAIN_NODE });
    }
    await eventually(async () => {
      for (const c of [east, west])
        if ((await c.core.listNamespacedPod({ namespace: PLAIN_NS })).items.length > 0) return false;
      return true;
    });
  });

  const watch = async (): Promise<InvariantMonitor> => {
    monitor = await InvariantMonitor.start([
      { name: 'east', kc: east.t.kc },
      { name: 'west', kc: west.t.kc },
    ]);
    return monitor;
  };

  it('double-run: running Pods of the same workload in two clusters (not when one is gated or terminating)', async () => {
    const [e, w] = await Promise.all([lease(east, 'dbl'), lease(west, 'dbl')]);
    await watch();
    await managedPod(east, 'dbl-gated', 'dbl', e.uid, { gated: true, phase: 'Running' });
    await managedPod(west, 'dbl-pending', 'dbl', w.uid, { phase: 'Pending' });
    await managedPod(east, 'dbl-run', 'dbl', e.uid, { phase: 'Running' });
    await eventually(() => monitor.running('east') === 1);
    expect(kinds(monitor, 'dbl').filter((k) => k === 'double-run')).toEqual([]);
    await managedPod(west, 'dbl-run', 'dbl', w.uid, { phase: 'Running' });
    await eventually(() => kinds(monitor, 'dbl').includes('double-run'));
    const breach = monitor.breaches().find((b) => b.kind === 'double-run');
    expect(breach).toMatchObject({ key: `${PLAIN_NS}/dbl`, clusters: ['east', 'west'] });
    expect(breach?.detail).toBe(
      `running Pods of ${PLAIN_NS}/dbl in east and west (east: dbl-run; west: dbl-run)`,
    );
    expect(() => monitor.assertClean()).toThrow(`double-run ${PLAIN_NS}/dbl [east, west]`);
  });

  it('token-decrease: a positive fencing token below one seen before (a drop to 0 is a release)', async () => {
    await lease(east, 'tok', 'tok-central');
    await watch();
    await writeStatus(east, 'tok', { leaseState: 'held', fencingToken: 5 });
    await writeStatus(east, 'tok', { leaseState: 'waiting', fencingToken: 0 });
    await writeStatus(east, 'tok', { leaseState: 'held', fencingToken: 7 });
    // The same token in the other cluster is no decrease there.
    await lease(west, 'tok', 'tok-central');
    await writeStatus(west, 'tok', { leaseState: 'held', fencingToken: 3 });
    // One watch stream per cluster and resource: east's statuses arrive in write order.
    await writeStatus(east, 'tok', { leaseState: 'held', fencingToken: 6 });
    await eventually(() => kinds(monitor, 'tok-central').includes('token-decrease'));
    expect(about(monitor, 'tok-central')).toEqual([
      expect.objectContaining({
        kind: 'token-decrease',
        clusters: ['east'],
        key: `${PLAIN_NS}/tok-central`,
        detail: 'BerthLease tok fencingToken 6 after 7',
      }),
    ]);
  });

  it('unregistered: an ungated managed Pod whose UID its lease never registered', async () => {
    const { uid } = await lease(east, 'reg');
    await watch();
    const ok = await managedPod(east, 'reg-ok', 'reg', uid, { gated: true });
    await writeStatus(east, 'reg', {
      workload: { targetUID: 't', phase: 'Active', pods: [{ name: 'reg-ok', uid: ok.metadata?.uid }] },
    });
    // Registered first, then ungated: fine (even when the lease event is seen later).
    await east.core.patchNamespacedPod(
      { namespace: PLAIN_NS, name: 'reg-ok', body: [{ op: 'remove', path: '/spec/schedulingGates' }] },
      jsonPatch,
    );
    // Never registered; a Pod reusing a registered name with a new UID is no better.
    await managedPod(east, 'reg-rogue', 'reg', uid, { phase: 'Running' });
    await eventually(() => kinds(monitor, 'reg').includes('unregistered'));
    await monitor.settle();
    const found = about(monitor, 'reg');
    expect(found).toHaveLength(1);
    expect(found[0]).toMatchObject({ kind: 'unregistered', clusters: ['east'], key: `${PLAIN_NS}/reg` });
    expect(found[0]?.detail).toMatch(
      new RegExp(`^Pod ${PLAIN_NS}/reg-rogue \\(.+\\) ungated without registration in BerthLease reg$`),
    );
  });
});

describe('a normal managed two-cluster failover', () => {
  let central: Central;
  const ops: ManagedOperator[] = [];

  beforeAll(async () => {
    central = await startCentral();
  });
  afterAll(async () => {
    for (const op of ops) await op.stop();
    await central?.stop();
  });

  it('stays clean while the workload runs in east, moves over, and runs in west', async () => {
    const monitor = await InvariantMonitor.start([
      { name: 'east', kc: east.t.kc },
      { name: 'west', kc: west.t.kc },
    ]);
    try {
      const eastOp = createManagedOperator(east, {
        clusterId: 'cluster-east',
        centralUrl: central.url,
        handOverOnStop: true,
      });
      const westOp = createManagedOperator(west, { clusterId: 'cluster-west', centralUrl: central.url });
      ops.push(eastOp, westOp);
      const spec = deploymentLease('web', 2, { ttlSeconds: 6, heartbeatIntervalSeconds: 1 });
      await eastOp.start();
      for (const c of [east, west]) await c.createLease('web', spec);
      await eventually(async () => (await east.mustLease('web')).metadata.finalizers?.length === 1);
      await east.createDeployment('web', 0);
      await eventually(() => monitor.running('east') === 2, { timeoutMs: 20_000 });
      // West's operator starts as a standby, its Deployment created under admission.
      await westOp.start();
      await west.createDeployment('web', 0);
      await eventually(async () => (await west.mustLease('web')).status?.leaseState === 'waiting', {
        timeoutMs: 20_000,
      });
      expect(monitor.running('west')).toBe(0);
      // East's operator stops gracefully: it drains and releases; west takes over.
      await eastOp.stop();
      await eventually(() => monitor.running('west') === 2 && monitor.running('east') === 0, {
        timeoutMs: 30_000,
      });
      const pods = await west.pods('app=web');
      expect(pods.every((p) => !isGated(p))).toBe(true);
      await monitor.settle();
      expect(monitor.breaches()).toEqual([]);
      monitor.assertClean();
    } finally {
      await monitor.stop();
    }
  }, 90_000);
});
