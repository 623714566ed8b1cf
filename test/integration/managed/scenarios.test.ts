// The Go operator's managed-workload test scenarios (docs/behaviour.md §6.2, its numbers: 3-5, 10, 15-23, 26-30, 33-34) on a
// control plane of their own (the real Deployment, ReplicaSet, StatefulSet, Job and CronJob controllers,
// the scheduler binding only ungated Pods through pods/binding, KWOK as the kubelets, the garbage
// collector), RBAC enforced with the operator's least-privilege rules, the operator's real
// WorkloadAdmission webhooks over TLS behind the install's configurations, and the embedded central lease
// server over HTTP. Reconciles are run one at a time (as the Go tests call Reconcile) unless a scenario
// needs the controllers running.
import { PatchStrategy, setHeaderOptions, type V1Pod } from '@kubernetes/client-node';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import {
  type BerthLease,
  type BerthLeaseSpec,
  DEFAULT_STOP_LEAD_MS,
  FINALIZER,
  ReconcileError,
} from '../../../src/berth/api.ts';
import { HttpLeaseClient, type LeaseClient } from '../../../src/berth/leaseclient.ts';
import { kubeBerthLeaseApi } from '../../../src/berth/leaseio.ts';
import { type LeaseSession, PermitError, permitPods } from '../../../src/berth/permit.ts';
import { findCondition, stoppingStatus } from '../../../src/berth/status.ts';
import { kubeWorkloadApi, type WorkloadApi } from '../../../src/berth/workload-io.ts';
import { ManualClock } from '../../../src/kube/clock.ts';
import { KubeTransport } from '../../../src/kube/transport.ts';
import { eventually } from '../../helpers/eventually.ts';
import { type Central, type RecordingLeaseClient, startCentral } from '../berth/harness.ts';
import {
  createManagedOperator,
  deploymentLease,
  GATE,
  isGated,
  isRunning,
  MANAGED_LEASE,
  MANAGED_UID,
  ManagedCluster,
  type ManagedOperator,
  MUTATE_DENIED,
  NS,
  OPERATOR_NS,
  OPERATOR_USER,
  rejection,
  STOP_FENCE,
  silent,
  until,
  VALIDATE_DENIED,
} from './harness.ts';

let cluster: ManagedCluster;
const cleanups: Array<() => Promise<void>> = [];

beforeAll(async () => {
  cluster = await ManagedCluster.start('east');
}, 60_000);
afterEach(async () => {
  cluster.proxy.clear();
  for (const c of cleanups.splice(0).reverse()) await c().catch(() => {});
});
afterAll(async () => {
  await cluster?.stop();
});

const merge = setHeaderOptions('Content-Type', PatchStrategy.MergePatch);

interface World {
  central: Central;
  op: ManagedOperator;
  clock: ManualClock | undefined;
}

async function world(
  o: {
    clock?: ManualClock;
    leaseClient?: (inner: RecordingLeaseClient) => LeaseClient;
    start?: boolean;
  } = {},
): Promise<World> {
  const central = await startCentral(o.clock);
  const op = createManagedOperator(cluster, {
    clusterId: 'cluster-east',
    centralUrl: central.url,
    ...(o.clock ? { clock: o.clock } : {}),
    ...(o.leaseClient ? { leaseClient: o.leaseClient } : {}),
  });
  cleanups.push(
    () => central.stop(),
    () => op.stop(),
  );
  if (o.start) await op.start();
  return { central, op, clock: o.clock };
}

/** Whole-second start: status times are whole seconds. */
const newClock = (): ManualClock => new ManualClock(Math.floor(Date.now() / 1000) * 1000);

async function forceDelete(name: string, namespace = NS): Promise<void> {
  await cluster.custom
    .patchNamespacedCustomObject(
      { ...cluster.ref(), namespace, name, body: { metadata: { finalizers: [] } } },
      merge,
    )
    .catch(() => {});
  await cluster.deleteLease(name, namespace).catch(() => {});
}

/** A lease and its target (created after it, so admission records it); the finalizer added. */
async function managed(
  op: ManagedOperator | undefined,
  name: string,
  spec: BerthLeaseSpec = deploymentLease(name, 2),
  o: { replicas?: number; createTarget?: () => Promise<unknown> } = {},
): Promise<BerthLease> {
  // Without a running controller, created as if a first reconcile had added the finalizer.
  await cluster.createLease(name, spec, NS, op === undefined ? [] : [FINALIZER]);
  cleanups.push(async () => {
    await forceDelete(name);
    await cluster.apps.deleteNamespacedDeployment({ namespace: NS, name }).catch(() => {});
  });
  if (op === undefined)
    await eventually(async () => (await cluster.mustLease(name)).metadata.finalizers?.length === 1);
  await (o.createTarget ?? (() => cluster.createDeployment(name, o.replicas ?? 0)))();
  return until(async () => {
    const lease = await cluster.mustLease(name);
    return lease.status?.workload?.targetUID ? lease : undefined;
  });
}

const podsOf = (name: string): Promise<V1Pod[]> => cluster.pods(`app=${name}`);

/**
 * Bound and Running: KWOK writes the Pod's status just after the scheduler's binding (a moment in which
 * a bound Pod is still Pending).
 */
const runsUngated = (p: V1Pod): boolean => !isGated(p) && isRunning(p) && p.status?.phase === 'Running';

/** Reconciles until `n` Pods of the target run ungated (the held reconcile's permitPods does it). */
async function permitted(op: ManagedOperator, name: string, n: number): Promise<V1Pod[]> {
  return until(
    async () => {
      await op.reconcile(name);
      const pods = await podsOf(name);
      return pods.length === n && pods.every(runsUngated) ? pods : undefined;
    },
    { timeoutMs: 15_000, intervalMs: 50 },
  );
}

/** Reconciles a deleted lease until it is gone. */
async function drainedAway(op: ManagedOperator, name: string): Promise<void> {
  await eventually(
    async () => {
      if ((await cluster.lease(name)) === undefined) return true;
      await op.reconcile(name).catch(() => undefined);
      return (await cluster.lease(name)) === undefined;
    },
    { timeoutMs: 15_000, intervalMs: 50 },
  );
}

/**
 * A Pod that runs or may run: bound, or ungated. A drain can finish while the real ReplicaSet controller,
 * not yet told of the scale-down by the Deployment controller, replaces the Pods the drain deleted: born
 * gated and never registered, such a Pod cannot run, and it goes when the ReplicaSet is scaled down.
 */
const mayRun = (p: V1Pod): boolean => !isGated(p) || !!p.spec?.nodeName;

/** A lease client that snapshots the lease's Pods that may run, and its Jobs, whenever Release is called. */
function releaseWitness(label: string): {
  wrap: (inner: RecordingLeaseClient) => LeaseClient;
  seen: Array<{ pods: number; jobs: number }>;
} {
  const seen: Array<{ pods: number; jobs: number }> = [];
  return {
    seen,
    wrap: (inner) => ({
      acquire: (...args) => inner.acquire(...args),
      renew: () => inner.renew(),
      async release(...args) {
        const pods = (await cluster.pods(label)).filter(mayRun).length;
        const jobs = (await cluster.batch.listNamespacedJob({ namespace: NS, labelSelector: label })).items
          .length;
        seen.push({ pods, jobs });
        return inner.release(...args);
      },
    }),
  };
}

/** Hands the central lease to another holder with the next token (as after an expiry elsewhere). */
async function passTo(central: Central, name: string, holder: string): Promise<void> {
  const record = await central.store.inner.get({ namespace: NS, name });
  if (record === undefined) throw new Error(`no central record for ${name}`);
  await central.store.inner.put(record.version, {
    ...record,
    holder,
    fencingToken: record.fencingToken + 1,
    acquiredAt: Date.now(),
    renewedAt: Date.now(),
  });
}

describe('held and not held (§6.2 3, 4, 10, 15)', () => {
  it('3. held: the Deployment is scaled up, ownership persisted, every Pod registered before its gate is lifted', async () => {
    const { op } = await world();
    const admitted = await managed(op, 'up', deploymentLease('up', 3));
    const deployment = await cluster.apps.readNamespacedDeployment({ namespace: NS, name: 'up' });
    expect(admitted.status?.workload).toEqual({ targetUID: deployment.metadata?.uid });
    expect(deployment.spec?.template.spec?.schedulingGates).toEqual([{ name: GATE }]);

    expect(await op.reconcile('up')).toEqual({ requeueAfter: 10_000 });
    expect(await cluster.replicas('up')).toBe(3);
    const lease = await cluster.mustLease('up');
    expect(lease.status).toMatchObject({
      leaseState: 'held',
      currentHolder: 'cluster-east',
      fencingToken: 1,
      workload: {
        targetUID: deployment.metadata?.uid,
        phase: 'Active',
        leaseName: 'up',
        holder: 'cluster-east',
        token: 1,
      },
    });
    expect(findCondition(lease.status, 'Acquired')).toMatchObject({
      status: 'True',
      reason: 'Held',
      message: 'lease held with fencing token 1',
    });
    expect(Date.parse(lease.status?.workload?.deadline ?? '')).toBeLessThanOrEqual(Date.now() + 30_000);

    const pods = await permitted(op, 'up', 3);
    const registered = (await cluster.mustLease('up')).status?.workload?.pods ?? [];
    expect(registered.map((p) => p.uid).sort()).toEqual(pods.map((p) => p.metadata?.uid).sort());
    for (const pod of pods) {
      expect(pod.metadata?.annotations).toMatchObject({
        [MANAGED_LEASE]: 'up',
        [MANAGED_UID]: lease.metadata.uid,
      });
      expect(pod.status?.phase).toBe('Running');
    }
    expect(await op.metric('berth_managed_pods_registered', { name: 'up' })).toBe(3);
    const gate = await op.histogram('berth_pod_gate_removal_seconds');
    expect(gate.count).toBe(3);
    const reasons = (
      await until(async () => {
        await op.recorder.flush();
        const events = await cluster.leaseEvents('up');
        return events.some((e) => e.reason === 'Activated') ? events : undefined;
      })
    ).map((e) => e.reason);
    expect(reasons).toEqual(expect.arrayContaining(['Acquired', 'Activated']));
  });

  it('4. not held: the standby keeps the Deployment at 0 and waits quietly, showing the other holder', async () => {
    const { op, central } = await world();
    const west = new HttpLeaseClient({ baseUrl: central.url });
    cleanups.push(async () => west.close());
    await west.acquire(NS, 'standby', 'cluster-west', 30);
    await managed(op, 'standby', deploymentLease('standby', 2), { replicas: 2 });

    expect(await op.reconcile('standby')).toEqual({ requeueAfter: 10_000 });
    const deployment = await cluster.apps.readNamespacedDeployment({ namespace: NS, name: 'standby' });
    expect(deployment.spec?.replicas).toBe(0);
    const lease = await cluster.mustLease('standby');
    expect(deployment.metadata?.annotations?.[STOP_FENCE]).toBeDefined();
    expect(lease.status).toMatchObject({
      leaseState: 'waiting',
      currentHolder: 'cluster-west',
      fencingToken: 0,
    });
    // Never activated: no Stopping round trip, the record keeps only the target.
    expect(lease.status?.workload).toEqual({ targetUID: deployment.metadata?.uid });
    expect(findCondition(lease.status, 'Acquired')).toMatchObject({
      status: 'False',
      reason: 'HeldByOther',
      message: 'lease held by "cluster-west"',
    });
    expect(findCondition(lease.status, 'HeartbeatHealthy')).toMatchObject({
      status: 'True',
      reason: 'Standby',
    });

    // A second reconcile writes nothing: neither the lease nor the target.
    const leaseWrites = cluster.countOperatorWrites('berthleases');
    const targetWrites = cluster.countOperatorWrites('deployments');
    expect(await op.reconcile('standby')).toEqual({ requeueAfter: 10_000 });
    expect([leaseWrites(), targetWrites()]).toEqual([0, 0]);
    // The Pods the ReplicaSet created before the scale-down were never ungated, and go away.
    await eventually(async () => (await podsOf('standby')).length === 0, { timeoutMs: 10_000 });
  });

  it('10. lost to another holder: the workload is stopped and drained, then waiting with token 0', async () => {
    const witness = releaseWitness('app=lost');
    const { op, central } = await world({ leaseClient: witness.wrap });
    await managed(op, 'lost');
    expect(await op.reconcile('lost')).toEqual({ requeueAfter: 10_000 });
    await permitted(op, 'lost', 2);

    // The central lease passes to cluster-west (as after an expiry and a reacquire elsewhere).
    await passTo(central, 'lost', 'cluster-west');
    await eventually(
      async () => {
        await op.reconcile('lost');
        return (await cluster.mustLease('lost')).status?.leaseState === 'waiting';
      },
      { timeoutMs: 15_000, intervalMs: 50 },
    );
    const stopped = await cluster.mustLease('lost');
    expect(stopped.status).toMatchObject({ leaseState: 'waiting', fencingToken: 0, currentHolder: '' });
    expect(stopped.status?.workload).toMatchObject({ phase: '', token: 0, holder: '' });
    expect(findCondition(stopped.status, 'Acquired')).toMatchObject({
      reason: 'Stopped',
      message: 'managed Pods stopped',
    });
    expect(await cluster.replicas('lost')).toBe(0);
    // Nothing left that may run; a late replacement of the ReplicaSet (see mayRun) goes with its scale-down.
    expect((await podsOf('lost')).filter(mayRun)).toEqual([]);
    await eventually(async () => (await podsOf('lost')).length === 0, { timeoutMs: 10_000 });
    // Released only after the drain (the central answers 409: not ours any more, counted as done).
    expect(witness.seen).toEqual([{ pods: 0, jobs: 0 }]);
    expect(op.central.of('release').map((c) => [c.holder, c.fencingToken, c.error !== undefined])).toEqual([
      ['cluster-east', 1, true],
    ]);
    // Then a quiet standby that shows the holder.
    expect(await op.reconcile('lost')).toEqual({ requeueAfter: 10_000 });
    expect((await cluster.mustLease('lost')).status).toMatchObject({
      currentHolder: 'cluster-west',
      leaseState: 'waiting',
    });
  });

  it('15. target actions: no write at the desired state, exactly one when it drifted', async () => {
    const { op } = await world();
    await managed(op, 'steady');
    await op.reconcile('steady');
    await permitted(op, 'steady', 2);
    // The operator's target writes, counted at the API server (the Deployment controller's own
    // status writes move the resourceVersion all the time).
    const writes = cluster.countOperatorWrites('deployments');
    for (let i = 0; i < 3; i++) expect(await op.reconcile('steady')).toEqual({ requeueAfter: 10_000 });
    expect(writes()).toBe(0);
    // A user scales it down (allowed: activity decreases); the next heartbeat restores it with one write.
    await cluster.apps.patchNamespacedDeployment(
      { namespace: NS, name: 'steady', body: { spec: { replicas: 1 } } },
      merge,
    );
    await op.reconcile('steady');
    expect(await cluster.replicas('steady')).toBe(2);
    // One write (a second only when the Deployment controller's status write raced it: 409, re-read).
    const restored = writes();
    expect(restored).toBeGreaterThanOrEqual(1);
    expect(restored).toBeLessThanOrEqual(2);
    await op.reconcile('steady');
    expect(writes()).toBe(restored);
  });
});

describe('verifyTarget (§2.3 step 6): exact errors, AdmissionRequired, the target never activated', () => {
  it('refuses a lease in the operator namespace', async () => {
    const { op } = await world();
    await cluster.createLease('ops', deploymentLease('ops', 2), OPERATOR_NS);
    cleanups.push(() => forceDelete('ops', OPERATOR_NS));
    const ctxLease = `${OPERATOR_NS}/ops`;
    const ctx = {
      signal: new AbortController().signal,
      log: silent(),
      reconcileID: 't',
      namespace: OPERATOR_NS,
      name: 'ops',
    };
    await op.controller.reconciler.reconcile(ctxLease, ctx);
    expect(await op.controller.reconciler.reconcile(ctxLease, ctx)).toEqual({});
    const lease = await cluster.mustLease('ops', OPERATOR_NS);
    expect(findCondition(lease.status, 'Acquired')).toMatchObject({
      status: 'False',
      reason: 'AdmissionRequired',
      message: 'workloads cannot be managed in the operator namespace',
    });
    expect(op.central.calls).toEqual([]);
  });

  it('a target created before its lease has no admission record: it is stopped, never activated', async () => {
    const { op } = await world();
    await cluster.createDeployment('legacy', 2);
    cleanups.push(async () => {
      await forceDelete('legacy');
      await cluster.apps.deleteNamespacedDeployment({ namespace: NS, name: 'legacy' }).catch(() => {});
    });
    await cluster.createLease('legacy', deploymentLease('legacy', 3));
    await op.reconcile('legacy');
    expect(await op.reconcile('legacy')).toEqual({ requeueAfter: 1_000 });
    const lease = await cluster.mustLease('legacy');
    expect(findCondition(lease.status, 'Acquired')).toMatchObject({
      reason: 'AdmissionRequired',
      message: ReconcileError.noAdmissionRecord,
    });
    expect(await cluster.replicas('legacy')).toBe(0);
    expect(op.central.calls).toEqual([]);
    // The legacy target may be stopped but never started again.
    expect(
      await rejection(
        cluster.apps.patchNamespacedDeployment(
          { namespace: NS, name: 'legacy', body: { spec: { replicas: 1 } } },
          merge,
        ),
      ),
    ).toBe(`${VALIDATE_DENIED}drain and recreate legacy managed targets under admission`);
  });

  it('a missing target and a record that does not match the live target are refused', async () => {
    const { op } = await world();
    await managed(op, 'ident');
    await cluster.apps.deleteNamespacedDeployment({ namespace: NS, name: 'ident' });
    await eventually(async () => {
      await op.reconcile('ident');
      return (
        findCondition((await cluster.mustLease('ident')).status, 'Acquired')?.message ===
        'deployments.apps "ident" not found'
      );
    });
    // Recreated after its lease: admission records the new UID. Then a status writer forges the record
    // (why ordinary users must not write BerthLease status).
    await cluster.createDeployment('ident', 0);
    await eventually(async () => {
      const record = (await cluster.mustLease('ident')).status?.workload?.targetUID;
      const live = (await cluster.apps.readNamespacedDeployment({ namespace: NS, name: 'ident' })).metadata
        ?.uid;
      return record === live;
    });
    const lease = await cluster.mustLease('ident');
    await cluster.custom.replaceNamespacedCustomObjectStatus({
      ...cluster.ref(),
      name: 'ident',
      body: { ...lease, status: { ...lease.status, workload: { targetUID: 'forged' } } },
    });
    await op.reconcile('ident');
    expect(findCondition((await cluster.mustLease('ident')).status, 'Acquired')).toMatchObject({
      reason: 'AdmissionRequired',
      message: ReconcileError.identityMismatch,
    });
    expect(op.central.calls).toEqual([]);
  });
});

describe('stopping (§6.2 5, 16, 17, 21, 22, 29, 30)', () => {
  it('5. deletion: stopped and drained first, released once with the recorded holder and token, finalizer removed', async () => {
    const witness = releaseWitness('app=gone');
    const { op } = await world({ leaseClient: witness.wrap });
    await managed(op, 'gone');
    await op.reconcile('gone');
    await permitted(op, 'gone', 2);
    await cluster.deleteLease('gone');
    expect(await op.reconcile('gone')).toEqual({ requeueAfter: 1_000 });
    const stopping = await cluster.mustLease('gone');
    expect(stopping.status?.workload).toMatchObject({ phase: 'Stopping', holder: 'cluster-east', token: 1 });
    expect(findCondition(stopping.status, 'HeartbeatHealthy')).toMatchObject({
      status: 'False',
      reason: 'Stopping',
      message: 'workload activation is closed during cleanup',
    });
    expect(findCondition(stopping.status, 'Acquired')).toMatchObject({
      status: 'False',
      reason: 'Stopping',
      message: 'waiting for managed Pods to terminate',
    });
    const deployment = await cluster.apps.readNamespacedDeployment({ namespace: NS, name: 'gone' });
    expect(deployment.spec?.replicas).toBe(0);
    expect(deployment.metadata?.annotations?.[STOP_FENCE]).toBe(stopping.metadata.resourceVersion);
    await drainedAway(op, 'gone');
    expect(op.central.of('release').map((c) => [c.name, c.holder, c.fencingToken])).toEqual([
      ['gone', 'cluster-east', 1],
    ]);
    expect(witness.seen).toEqual([{ pods: 0, jobs: 0 }]);
    const stop = await op.histogram('berth_workload_stop_seconds');
    expect(stop.count).toBe(1);
    console.info(
      `managed stop (2 running Pods, reconciles driven by the test): berth_workload_stop_seconds ${stop.sum.toFixed(3)}s`,
    );
    await op.recorder.flush();
    const reasons = (await cluster.leaseEvents('gone')).map((e) => e.reason);
    expect(reasons.indexOf('Stopping')).toBeLessThan(reasons.indexOf('Drained'));
    expect(reasons.indexOf('Drained')).toBeLessThan(reasons.indexOf('Released'));
  });

  it('16. an expired activation during a central outage stops the target; the release waits for the central API', async () => {
    const clock = newClock();
    const { op, central } = await world({ clock });
    await managed(
      op,
      'outage',
      deploymentLease('outage', 2, { ttlSeconds: 30, heartbeatIntervalSeconds: 10 }),
    );
    await op.reconcile('outage');
    await permitted(op, 'outage', 2);
    central.store.down = true;
    // Within the deadline an error changes nothing but HeartbeatHealthy.
    await op.reconcile('outage');
    expect(await cluster.replicas('outage')).toBe(2);
    expect(findCondition((await cluster.mustLease('outage')).status, 'HeartbeatHealthy')?.reason).toBe(
      'AcquireFailed',
    );
    clock.advance(31_000);
    await eventually(
      async () => {
        await op.reconcile('outage').catch(() => undefined);
        return (await podsOf('outage')).length === 0;
      },
      { timeoutMs: 10_000, intervalMs: 50 },
    );
    expect(await cluster.replicas('outage')).toBe(0);
    // Drained, but the release cannot reach the central API: identity, token and finalizer kept.
    await op.reconcile('outage');
    const held = await cluster.mustLease('outage');
    expect(held.status?.workload).toMatchObject({ phase: 'Stopping', holder: 'cluster-east', token: 1 });
    expect(held.metadata.finalizers).toContain('berth.skaphos.io/lease-release');
    central.store.down = false;
    await op.reconcile('outage');
    expect((await cluster.mustLease('outage')).status).toMatchObject({
      leaseState: 'waiting',
      fencingToken: 0,
    });
  });

  it('17. a failing target write keeps Stopping, holder, token and finalizer, and no Release; then exactly one', async () => {
    const { op } = await world();
    await managed(op, 'stuck');
    await op.reconcile('stuck');
    await permitted(op, 'stuck', 2);
    const fault = cluster.proxy.inject({
      verbs: ['patch'],
      group: 'apps',
      resource: 'deployments',
      name: 'stuck',
      user: OPERATOR_USER,
      status: 500,
      message: 'etcd unavailable',
    });
    await cluster.deleteLease('stuck');
    for (let i = 0; i < 3; i++) await expect(op.reconcile('stuck')).rejects.toThrow(/etcd unavailable/);
    const lease = await cluster.mustLease('stuck');
    expect(lease.status?.workload).toMatchObject({ phase: 'Stopping', holder: 'cluster-east', token: 1 });
    expect(lease.metadata.finalizers).toContain('berth.skaphos.io/lease-release');
    expect(findCondition(lease.status, 'HeartbeatHealthy')).toMatchObject({
      status: 'False',
      reason: 'Stopping',
    });
    expect(op.central.of('release')).toEqual([]);
    expect(fault.hits()).toBe(3);
    fault.remove();
    await drainedAway(op, 'stuck');
    expect(op.central.of('release').map((c) => c.fencingToken)).toEqual([1]);
  });

  it('21. a slowly terminating Pod keeps token and finalizer; the release follows its removal, with the token', async () => {
    const { op } = await world();
    await managed(op, 'slow');
    await op.reconcile('slow');
    const [pod] = await permitted(op, 'slow', 2);
    const podName = pod?.metadata?.name ?? '';
    await cluster.core.patchNamespacedPod(
      { namespace: NS, name: podName, body: { metadata: { finalizers: ['example.com/slow-shutdown'] } } },
      merge,
    );
    await cluster.deleteLease('slow');
    await eventually(
      async () => {
        await op.reconcile('slow');
        const pods = await podsOf('slow');
        return pods.length === 1 && pods[0]?.metadata?.deletionTimestamp !== undefined;
      },
      { timeoutMs: 10_000, intervalMs: 50 },
    );
    for (let i = 0; i < 3; i++) expect(await op.reconcile('slow')).toEqual({ requeueAfter: 1_000 });
    const lease = await cluster.mustLease('slow');
    expect(lease.status?.workload).toMatchObject({ phase: 'Stopping', token: 1 });
    expect(lease.metadata.finalizers).toContain('berth.skaphos.io/lease-release');
    expect(op.central.of('release')).toEqual([]);
    await cluster.core.patchNamespacedPod(
      { namespace: NS, name: podName, body: { metadata: { finalizers: [] } } },
      merge,
    );
    await drainedAway(op, 'slow');
    expect(op.central.of('release').map((c) => c.fencingToken)).toEqual([1]);
  });

  it('22. a CronJob: suspended, its active Job suspended and deleted, its Pods gone, all before the release', async () => {
    const witness = releaseWitness('app=cron');
    const { op } = await world({ leaseClient: witness.wrap });
    const labels = { app: 'cron' };
    const createCronJob = () =>
      cluster.batch.createNamespacedCronJob({
        namespace: NS,
        body: {
          metadata: { name: 'cron' },
          spec: {
            schedule: '0 0 1 1 *',
            suspend: true,
            jobTemplate: {
              metadata: { labels },
              spec: {
                // KWOK completes a Job's Pod as soon as it runs: the second of two completions, one at
                // a time, created gated and never permitted here, keeps the Job active until the stop.
                completions: 2,
                parallelism: 1,
                template: {
                  metadata: { labels },
                  spec: {
                    restartPolicy: 'Never',
                    containers: [{ name: 'job', image: 'registry.example.com/job:1' }],
                  },
                },
              },
            },
          },
        },
      });
    cleanups.push(async () => {
      await cluster.batch.deleteNamespacedCronJob({ namespace: NS, name: 'cron' }).catch(() => {});
    });
    await managed(
      op,
      'cron',
      {
        ...deploymentLease('cron', 0),
        target: { apiVersion: 'batch/v1', kind: 'CronJob', name: 'cron' },
        acquireAction: { suspend: false },
        releaseAction: { suspend: true },
      },
      { createTarget: createCronJob },
    );
    await op.reconcile('cron');
    expect((await cluster.batch.readNamespacedCronJob({ namespace: NS, name: 'cron' })).spec?.suspend).toBe(
      false,
    );
    // Run it now, as an operator would (the real CronJob controller starts Jobs only at the schedule's
    // minutes): `kubectl create job --from` makes a Job of the template, controlled by the CronJob.
    const run = await cluster.t.kubectl(['-n', NS, 'create', 'job', 'cron-now', '--from=cronjob/cron']);
    expect(run.code, run.stderr).toBe(0);
    // The held reconcile permits the Job's Pod, which runs and completes; the next one stays gated.
    const [first] = await until(
      async () => {
        await op.reconcile('cron');
        const pods = await podsOf('cron');
        return pods.some((p) => !isGated(p)) ? pods.filter((p) => !isGated(p)) : undefined;
      },
      { timeoutMs: 15_000, intervalMs: 50 },
    );
    await eventually(
      async () => {
        const job = await cluster.batch.readNamespacedJob({ namespace: NS, name: 'cron-now' });
        const pods = await podsOf('cron');
        const done = pods.find((p) => p.metadata?.uid === first?.metadata?.uid);
        return (
          done?.status?.phase === 'Succeeded' &&
          !!done.spec?.nodeName &&
          pods.length === 2 &&
          pods.some((p) => p !== done && isGated(p)) &&
          job.status?.succeeded === 1 &&
          job.status.active === 1
        );
      },
      { timeoutMs: 15_000 },
    );
    const registered = (await cluster.mustLease('cron')).status?.workload?.pods ?? [];
    expect(registered.map((p) => p.uid)).toEqual([first?.metadata?.uid]);
    const jobs = await cluster.batch.listNamespacedJob({ namespace: NS, labelSelector: 'app=cron' });
    expect(jobs.items).toHaveLength(1);
    expect(jobs.items[0]?.metadata?.labels?.[MANAGED_UID]).toBeDefined();

    await cluster.deleteLease('cron');
    await drainedAway(op, 'cron');
    expect((await cluster.batch.readNamespacedCronJob({ namespace: NS, name: 'cron' })).spec?.suspend).toBe(
      true,
    );
    expect(witness.seen).toEqual([{ pods: 0, jobs: 0 }]);
    expect(op.central.of('release')).toHaveLength(1);
  });

  it('29. the stop fence makes an activation write still in flight lose with 409', async () => {
    const { op } = await world();
    // Held at 0 replicas: the stop changes no spec, yet writes the fence.
    await managed(op, 'fence', deploymentLease('fence', 0));
    await op.reconcile('fence');
    const before = await cluster.apps.readNamespacedDeployment({ namespace: NS, name: 'fence' });
    expect(before.spec?.replicas).toBe(0);
    const leaseBefore = await cluster.mustLease('fence');
    await cluster.deleteLease('fence');
    await op.reconcile('fence');
    const after = await cluster.apps.readNamespacedDeployment({ namespace: NS, name: 'fence' });
    expect(after.metadata?.resourceVersion).not.toBe(before.metadata?.resourceVersion);
    // The fence is the lease's resourceVersion once Stopping was committed (a later one than before).
    const fence = after.metadata?.annotations?.[STOP_FENCE] ?? '';
    expect(Number(fence)).toBeGreaterThan(Number(leaseBefore.metadata.resourceVersion));
    // The activation patch read before the stop (as the operator sends it) loses on resourceVersion...
    const api = kubeWorkloadApi(new KubeTransport(cluster.operatorKubeConfig()));
    const stale = await rejection(
      api.mergePatch('Deployment', NS, 'fence', {
        metadata: { resourceVersion: before.metadata?.resourceVersion, uid: before.metadata?.uid },
        spec: { replicas: 3 },
      }),
    );
    expect(stale).toMatch(/409 Conflict/);
    // ... and one written after it is refused by admission: the lease no longer authorizes activation.
    const fresh = await rejection(
      api.mergePatch('Deployment', NS, 'fence', {
        metadata: { resourceVersion: after.metadata?.resourceVersion },
        spec: { replicas: 3 },
      }),
    );
    expect(fresh).toContain('lease does not authorize workload activation');
    expect(await cluster.replicas('fence')).toBe(0);
  });

  it('30. an Acquire that would outlive the ownership is cut at its end (the stop lead before the deadline), and the target stopped', async () => {
    const clock = newClock();
    let block = false;
    const budgets: Array<number | undefined> = [];
    const { op } = await world({
      clock,
      leaseClient: (inner) => ({
        renew: () => inner.renew(),
        release: (...args) => inner.release(...args),
        async acquire(namespace, name, holder, ttl, options) {
          if (!block) return inner.acquire(namespace, name, holder, ttl, options);
          budgets.push(options?.timeoutMs);
          // The central API hangs; time passes meanwhile (past the activation's end); the budget ends the call.
          clock.advance(200);
          await new Promise((resolve) => setTimeout(resolve, options?.timeoutMs ?? 60_000));
          throw new Error(`acquire ${namespace}/${name}: timed out after ${options?.timeoutMs}ms`);
        },
      }),
    });
    await managed(
      op,
      'bounded',
      deploymentLease('bounded', 2, { ttlSeconds: 30, heartbeatIntervalSeconds: 10 }),
    );
    await op.reconcile('bounded');
    await permitted(op, 'bounded', 2);
    const deadline = Date.parse((await cluster.mustLease('bounded')).status?.workload?.deadline ?? '');
    clock.advance(deadline - DEFAULT_STOP_LEAD_MS - 100 - clock.now());
    block = true;
    const started = performance.now();
    await op.reconcile('bounded');
    expect(performance.now() - started).toBeLessThan(1_000);
    expect(budgets).toEqual([100]);
    expect(await cluster.replicas('bounded')).toBe(0);
    expect((await cluster.mustLease('bounded')).status?.workload?.phase).toBe('Stopping');
  });
});

describe('registration (§6.2 18, 19, 20, 23)', () => {
  /** A lease held and Active whose Pods exist but are not yet permitted. */
  async function gatedPods(op: ManagedOperator, name: string): Promise<V1Pod[]> {
    await managed(op, name);
    await op.reconcile(name);
    return until(async () => {
      const pods = await podsOf(name);
      return pods.length === 2 && pods.every(isGated) ? pods : undefined;
    });
  }

  const sessionOver = (lease: BerthLease, writeStatus: LeaseSession['writeStatus']): LeaseSession => ({
    lease,
    signal: new AbortController().signal,
    log: silent(),
    now: () => Date.now(),
    stopLeadMs: DEFAULT_STOP_LEAD_MS,
    stamp: () => ({ now: Date.now(), generation: lease.metadata.generation }),
    writeStatus,
  });

  const operatorApi = (): WorkloadApi => {
    const transport = new KubeTransport(cluster.operatorKubeConfig());
    cleanups.push(() => transport.close());
    return kubeWorkloadApi(transport);
  };

  it('18. a registration that did not land never ungates a Pod', async () => {
    const { op } = await world();
    await gatedPods(op, 'noreg');
    const lease = await cluster.mustLease('noreg');
    const error = await permitPods(
      sessionOver(lease, async () => {
        throw new Error('status write failed');
      }),
      operatorApi(),
    ).catch((err: unknown) => err);
    expect(error).toBeInstanceOf(PermitError);
    expect((error as Error).message).toBe('register Pod UID: status write failed');
    expect((await podsOf('noreg')).every(isGated)).toBe(true);
    expect((await cluster.mustLease('noreg')).status?.workload?.pods).toBeUndefined();
    // The same through the API server: a fault on the status write, the real reconcile.
    cluster.proxy.inject({
      verbs: ['update'],
      resource: 'berthleases',
      subresource: 'status',
      status: 500,
    });
    await expect(op.reconcile('noreg')).rejects.toThrow();
    expect((await podsOf('noreg')).every(isGated)).toBe(true);
  });

  it('19. after Stopping is committed, a stale Active copy can neither register nor ungate', async () => {
    const { op } = await world();
    await gatedPods(op, 'stale');
    const active = await cluster.mustLease('stale');
    expect(active.status?.workload?.phase).toBe('Active');
    const leases = kubeBerthLeaseApi(new KubeTransport(cluster.operatorKubeConfig()));
    await leases.updateStatus(
      active,
      stoppingStatus(active.status, 'stale', { now: Date.now(), generation: 1 }),
    );
    const error = await permitPods(
      sessionOver(active, (status) => leases.updateStatus(active, status)),
      operatorApi(),
    ).then(
      () => undefined,
      (err: unknown) => err as Error,
    );
    expect(error?.message).toMatch(/^register Pod UID: Operation cannot be fulfilled on berthleases/);
    expect((await podsOf('stale')).every(isGated)).toBe(true);
    expect((await cluster.mustLease('stale')).status?.workload?.pods).toBeUndefined();
    // Nor may the operator lift a gate directly: the lease no longer permits Pod starts.
    const [pod] = await podsOf('stale');
    expect(
      await rejection(
        operatorApi().mergePatch('Pod', NS, pod?.metadata?.name ?? '', {
          metadata: { resourceVersion: pod?.metadata?.resourceVersion },
          spec: { schedulingGates: null },
        }),
      ),
    ).toContain('lease no longer permits Pod starts');
  });

  it('20. an ungate delayed past the drain cannot resurrect the drained Pod', async () => {
    const { op } = await world();
    const pods = await gatedPods(op, 'delayed');
    // A permit pass whose gate removals are held back after the registration landed.
    let releaseUngates!: () => void;
    const held = new Promise<void>((resolve) => {
      releaseUngates = resolve;
    });
    const inner = operatorApi();
    const api: WorkloadApi = {
      ...inner,
      async mergePatch(kind, namespace, name, patch, signal) {
        if (kind === 'Pod') await held;
        return inner.mergePatch(kind, namespace, name, patch, signal);
      },
    };
    const leases = kubeBerthLeaseApi(new KubeTransport(cluster.operatorKubeConfig()));
    let lease = await cluster.mustLease('delayed');
    const pass = permitPods(
      sessionOver(lease, async (status) => {
        lease = await leases.updateStatus(lease, status);
        return lease;
      }),
      api,
    );
    await eventually(
      async () => ((await cluster.mustLease('delayed')).status?.workload?.pods ?? []).length === 2,
    );
    // Meanwhile the lease is deleted and drained.
    await cluster.deleteLease('delayed');
    await eventually(
      async () => {
        await op.reconcile('delayed');
        return (await podsOf('delayed')).length === 0;
      },
      { timeoutMs: 10_000, intervalMs: 50 },
    );
    releaseUngates();
    await pass;
    for (const pod of pods) {
      expect(
        await rejection(cluster.core.readNamespacedPod({ namespace: NS, name: pod.metadata?.name ?? '' })),
      ).toContain('not found');
    }
    await drainedAway(op, 'delayed');
  });

  it('23. when ownership cannot be persisted, the target is never activated', async () => {
    const { op } = await world();
    await managed(op, 'unpersisted');
    cluster.proxy.inject({
      verbs: ['update'],
      resource: 'berthleases',
      subresource: 'status',
      status: 500,
    });
    await expect(op.reconcile('unpersisted')).rejects.toThrow();
    await expect(op.reconcile('unpersisted')).rejects.toThrow();
    expect(await cluster.replicas('unpersisted')).toBe(0);
    expect(op.central.of('acquire')).toHaveLength(2);
  });
});

describe('late and foreign objects (§6.2 26, 27, 28, 33)', () => {
  it('26. Pods and Jobs of a deleted, replaced or stopping lease are removed; a recreated lease cannot authorize them', async () => {
    const { op } = await world({ start: true });
    await managed(undefined, 'late');
    const pods = await until(
      async () => {
        const list = await podsOf('late');
        return list.length === 2 && list.every(runsUngated) ? list : undefined;
      },
      { timeoutMs: 15_000 },
    );
    const oldUID = (await cluster.mustLease('late')).metadata.uid;
    // The lease vanishes under the operator (an admin removes its finalizer) and is recreated.
    await op.stop();
    await forceDelete('late');
    await cluster.createLease('late', deploymentLease('late', 2));
    const { op: next } = await world({ start: true });
    // The old Pods are bound to the old UID: deleted; the new lease neither registers nor ungates them.
    await eventually(
      async () => {
        const left = await podsOf('late');
        return pods.every((p) => !left.some((l) => l.metadata?.uid === p.metadata?.uid));
      },
      { timeoutMs: 15_000 },
    );
    const recreated = await cluster.mustLease('late');
    expect(recreated.metadata.uid).not.toBe(oldUID);
    expect(recreated.status?.workload?.pods ?? []).toEqual([]);
    await next.stop();
  });

  it('26. a Pod created while the lease is stopping is deleted at once', async () => {
    const { op, central } = await world({ start: true });
    await managed(
      undefined,
      'closing',
      // A TTL that holds the default 5 s stop lead (heartbeat + 1 s + lead < TTL): the Pods run.
      deploymentLease('closing', 2, { ttlSeconds: 8, heartbeatIntervalSeconds: 1 }),
    );
    const [pod] = await until(
      async () => {
        const list = await podsOf('closing');
        return list.length === 2 && list.every((p) => isRunning(p)) ? list : undefined;
      },
      { timeoutMs: 15_000 },
    );
    // Keep the lease Stopping: a running Pod that takes long to terminate.
    await cluster.core.patchNamespacedPod(
      {
        namespace: NS,
        name: pod?.metadata?.name ?? '',
        body: { metadata: { finalizers: ['example.com/slow'] } },
      },
      merge,
    );
    cleanups.push(async () => {
      await cluster.core
        .patchNamespacedPod(
          { namespace: NS, name: pod?.metadata?.name ?? '', body: { metadata: { finalizers: [] } } },
          merge,
        )
        .catch(() => {});
    });
    // The lease is lost (held elsewhere now): Stopping, and the slow Pod keeps it there.
    await passTo(central, 'closing', 'cluster-west');
    await eventually(
      async () => (await cluster.mustLease('closing')).status?.workload?.phase === 'Stopping',
      {
        timeoutMs: 5_000,
      },
    );
    // A late Pod of the managed Deployment (owned by it directly, so no ReplicaSet removes it).
    const deployment = await cluster.apps.readNamespacedDeployment({ namespace: NS, name: 'closing' });
    const late = await cluster.core.createNamespacedPod({
      namespace: NS,
      body: {
        metadata: {
          name: 'closing-late',
          labels: { app: 'closing' },
          ownerReferences: [
            {
              apiVersion: 'apps/v1',
              kind: 'Deployment',
              name: 'closing',
              uid: deployment.metadata?.uid ?? '',
              controller: true,
            },
          ],
        },
        spec: { containers: [{ name: 'app', image: 'registry.example.com/app:1' }] },
      },
    });
    expect(isGated(late)).toBe(true);
    await eventually(
      async () =>
        (await rejection(cluster.core.readNamespacedPod({ namespace: NS, name: 'closing-late' }))).includes(
          'not found',
        ),
      { timeoutMs: 10_000 },
    );
    expect(op.central.of('release')).toEqual([]);
  });

  it('27. a Pod whose controller owner is missing never counts as unmanaged; every kind runs gated then permitted', async () => {
    const { op } = await world({ start: true });
    // (With no BerthLease in the namespace at all, nothing there can be managed: admission then skips it.)
    await cluster.createLease('ghost-guard', deploymentLease('ghost-guard', 1));
    cleanups.push(() => forceDelete('ghost-guard'));
    const ghost = await rejection(
      cluster.core.createNamespacedPod({
        namespace: NS,
        body: {
          metadata: {
            name: 'orphan',
            ownerReferences: [
              { apiVersion: 'apps/v1', kind: 'ReplicaSet', name: 'ghost', uid: 'u-1', controller: true },
            ],
          },
          spec: { containers: [{ name: 'c', image: 'registry.example.com/app:1' }] },
        },
      }),
    );
    expect(ghost).toBe(`${MUTATE_DENIED}resolve controller owner: replicasets.apps "ghost" not found`);

    // StatefulSet and ReplicaSet targets (Deployment and CronJob are covered above).
    for (const kind of ['StatefulSet', 'ReplicaSet'] as const) {
      const name = kind.toLowerCase();
      await cluster.createLease(name, {
        ...deploymentLease(name, 2),
        target: { apiVersion: 'apps/v1', kind, name },
      });
      cleanups.push(() => forceDelete(name));
      await eventually(async () => (await cluster.mustLease(name)).metadata.finalizers?.length === 1);
      const labels = { app: name };
      const spec = {
        replicas: 0,
        selector: { matchLabels: labels },
        template: {
          metadata: { labels },
          spec: { containers: [{ name: 'c', image: 'registry.example.com/app:1' }] },
        },
      };
      if (kind === 'StatefulSet')
        await cluster.apps.createNamespacedStatefulSet({
          namespace: NS,
          body: { metadata: { name }, spec: { ...spec, serviceName: name } },
        });
      else
        await cluster.apps.createNamespacedReplicaSet({ namespace: NS, body: { metadata: { name }, spec } });
      // Before its lease goes: without one, the real controllers would retry their Pods, refused, for the
      // rest of the file.
      cleanups.push(() =>
        kind === 'StatefulSet'
          ? cluster.apps.deleteNamespacedStatefulSet({ namespace: NS, name }).then(() => {})
          : cluster.apps.deleteNamespacedReplicaSet({ namespace: NS, name }).then(() => {}),
      );
      // (The StatefulSet controller creates its second Pod only once the first is Ready: OrderedReady.)
      const pods = await until(
        async () => {
          const list = await cluster.pods(`app=${name}`);
          return list.length === 2 && list.every(runsUngated) ? list : undefined;
        },
        { timeoutMs: 15_000 },
      );
      const registered = (await cluster.mustLease(name)).status?.workload?.pods ?? [];
      expect(registered.map((p) => p.uid).sort()).toEqual(pods.map((p) => p.metadata?.uid).sort());
    }
    expect(op.central.of('acquire').length).toBeGreaterThan(0);
  });

  it('28. a lease-only BerthLease needs no admission record', async () => {
    const { op } = await world();
    await cluster.createLease('plain', {
      ...deploymentLease('plain', 0),
      target: undefined,
      acquireAction: undefined,
      releaseAction: undefined,
    });
    cleanups.push(() => forceDelete('plain'));
    await op.reconcile('plain');
    expect(await op.reconcile('plain')).toEqual({ requeueAfter: 10_000 });
    const lease = await cluster.mustLease('plain');
    expect(lease.status).toMatchObject({
      leaseState: 'held',
      currentHolder: 'cluster-east',
      fencingToken: 1,
    });
    expect(lease.status?.workload).toBeUndefined();
  });

  it('33. a controller may not adopt a running orphan; cleanup metadata alone is allowed', async () => {
    const { op } = await world();
    await managed(op, 'adopt');
    await op.reconcile('adopt');
    await permitted(op, 'adopt', 2);
    const orphan = await cluster.core.createNamespacedPod({
      namespace: NS,
      body: {
        metadata: { name: 'adopt-orphan', labels: { app: 'adopt' } },
        spec: { containers: [{ name: 'c', image: 'registry.example.com/app:1' }] },
      },
    });
    cleanups.push(async () => {
      await cluster.core
        .deleteNamespacedPod({ namespace: NS, name: 'adopt-orphan', gracePeriodSeconds: 0 })
        .catch(() => {});
    });
    expect(isGated(orphan)).toBe(false);
    const rs = (await cluster.apps.listNamespacedReplicaSet({ namespace: NS, labelSelector: 'app=adopt' }))
      .items[0];
    const adopt = await rejection(
      cluster.core.patchNamespacedPod(
        {
          namespace: NS,
          name: 'adopt-orphan',
          body: {
            metadata: {
              ownerReferences: [
                {
                  apiVersion: 'apps/v1',
                  kind: 'ReplicaSet',
                  name: rs?.metadata?.name ?? '',
                  uid: rs?.metadata?.uid ?? '',
                  controller: true,
                },
              ],
            },
          },
        },
        merge,
      ),
    );
    expect(adopt).toBe(`${VALIDATE_DENIED}managed controllers cannot adopt unadmitted objects`);
    const labelled = await cluster.core.patchNamespacedPod(
      { namespace: NS, name: 'adopt-orphan', body: { metadata: { labels: { cleanup: 'true' } } } },
      merge,
    );
    expect(labelled.metadata?.labels?.cleanup).toBe('true');
  });
});

describe('admission and storage (§6.2 34)', () => {
  it('34. dry-run writes no record; the real create records the UID; a stale status writer loses; gates and targets are immutable', async () => {
    const { op } = await world();
    await cluster.createLease('store', deploymentLease('store', 1));
    cleanups.push(async () => {
      await forceDelete('store');
      await cluster.apps.deleteNamespacedDeployment({ namespace: NS, name: 'store' }).catch(() => {});
    });
    await op.reconcile('store');
    const labels = { app: 'store' };
    const body = {
      metadata: { name: 'store' },
      spec: {
        replicas: 0,
        selector: { matchLabels: labels },
        template: {
          metadata: { labels },
          spec: { containers: [{ name: 'c', image: 'registry.example.com/app:1' }] },
        },
      },
    };
    await cluster.apps.createNamespacedDeployment({ namespace: NS, body, dryRun: 'All' });
    expect((await cluster.mustLease('store')).status?.workload).toBeUndefined();
    const created = await cluster.apps.createNamespacedDeployment({ namespace: NS, body });
    expect((await cluster.mustLease('store')).status?.workload).toEqual({ targetUID: created.metadata?.uid });
    expect(created.spec?.template.spec?.schedulingGates).toEqual([{ name: GATE }]);

    await op.reconcile('store');
    const [running] = await permitted(op, 'store', 1);
    const active = await cluster.mustLease('store');
    expect(active.status?.workload?.phase).toBe('Active');
    // Keep the lease Stopping: a Pod that takes long to terminate (KWOK could otherwise remove it within
    // the deletion's own reconcile, which would then release and remove the finalizer).
    const slow = (finalizers: string[]) =>
      cluster.core.patchNamespacedPod(
        { namespace: NS, name: running?.metadata?.name ?? '', body: { metadata: { finalizers } } },
        merge,
      );
    await slow(['example.com/slow']);
    cleanups.push(async () => {
      await slow([]).catch(() => {});
    });
    await cluster.deleteLease('store');
    await op.reconcile('store');
    expect((await cluster.mustLease('store')).status?.workload?.phase).toBe('Stopping');
    const leases = kubeBerthLeaseApi(new KubeTransport(cluster.operatorKubeConfig()));
    expect(await rejection(leases.updateStatus(active, { ...active.status }))).toMatch(/409 Conflict/);
    expect((await cluster.mustLease('store')).status?.workload?.phase).toBe('Stopping');

    expect(
      await rejection(
        cluster.apps.patchNamespacedDeployment(
          { namespace: NS, name: 'store', body: { spec: { template: { spec: { schedulingGates: null } } } } },
          merge,
        ),
      ),
    ).toBe(`${VALIDATE_DENIED}managed Pod must be created with the Berth scheduling gate`);
    expect(
      await rejection(
        cluster.custom.patchNamespacedCustomObject(
          {
            ...cluster.ref(),
            name: 'store',
            body: { spec: { target: { apiVersion: 'apps/v1', kind: 'Deployment', name: 'other' } } },
          },
          merge,
        ),
      ),
    ).toContain('target is immutable');
    await slow([]);
    await drainedAway(op, 'store');
  });
});
