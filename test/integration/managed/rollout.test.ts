// Two operator replicas in one cluster, with real leader election against kube-apiserver and the managed
// BerthLease controller as their leader-only work: a rolling update (the leader stops, the other replica
// is up) must leave the guarded workload running — the successor resumes it from status, with the same
// fencing token — while the last replica's stop hands it over (stopped, drained, released).
import { CoordinationV1Api } from '@kubernetes/client-node';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { kubeLeaseClient, LeaderElector } from '../../../src/kube/leader.ts';
import { type LifecycleEvent, Manager, type ManagerResult } from '../../../src/kube/manager.ts';
import { createRegistry } from '../../../src/observability/metrics.ts';
import { eventually } from '../../helpers/eventually.ts';
import { type Central, startCentral } from '../berth/harness.ts';
import {
  createManagedOperator,
  deploymentLease,
  isGated,
  isRunning,
  ManagedCluster,
  OPERATOR_NS,
  silent,
} from './harness.ts';

const LEASE_ID = 'berth-operator-leader';
const APP = 'singleton';

let cluster: ManagedCluster;
let central: Central;
beforeAll(async () => {
  cluster = await ManagedCluster.start('rollout');
  central = await startCentral();
}, 60_000);
afterAll(async () => {
  await central?.stop();
  await cluster?.stop();
});

interface Replica {
  identity: string;
  events: string[];
  manager: Manager;
  done: Promise<ManagerResult>;
}

/** One operator replica: the managed BerthLease controller behind a Manager with leader election. */
function startReplica(identity: string): Replica {
  const op = createManagedOperator(cluster, {
    clusterId: 'cluster-east',
    centralUrl: central.url,
    handOverOnStop: true,
  });
  const elector = new LeaderElector({
    // The test RBAC grants the BerthLease rules only: the election runs as admin.
    client: kubeLeaseClient(cluster.t.transport(cluster.t.kc)),
    namespace: OPERATOR_NS,
    name: LEASE_ID,
    identity,
    leaseDurationMs: 3_000,
    renewDeadlineMs: 2_000,
    retryPeriodMs: 300,
    releaseOnCancel: true,
  });
  const events: string[] = [];
  const manager = new Manager({
    logger: silent(),
    registry: createRegistry({ defaultMetrics: false }),
    healthProbeBindAddress: '0',
    metricsBindAddress: '0',
    gracefulShutdownTimeoutMs: 30_000,
    drainWindowMs: 0,
    handOverWaitMs: 2_000,
    elector,
    onEvent: (e: LifecycleEvent) => events.push(e.runnable ? `${e.step}:${e.runnable}` : e.step),
  });
  for (const r of [...op.controller.runnables(), ...op.managed.runnables()]) manager.add(r);
  op.managed.attach(op.controller);
  return { identity, events, manager, done: manager.run() };
}

async function leaderHolder(): Promise<string | undefined> {
  const lease = await cluster.t.kc
    .makeApiClient(CoordinationV1Api)
    .readNamespacedLease({ namespace: OPERATOR_NS, name: LEASE_ID });
  return lease.spec?.holderIdentity ?? undefined;
}

const runningPods = async (): Promise<string[]> =>
  (await cluster.pods(`app=${APP}`))
    .filter((p) => isRunning(p) && !isGated(p) && !p.metadata?.deletionTimestamp)
    .map((p) => p.metadata?.uid ?? '')
    .sort();

describe('operator replicas and a managed workload', () => {
  it('a rolling update keeps the workload running; the last replica hands it over', async () => {
    const a = startReplica('replica-a');
    await eventually(async () => (await leaderHolder()) === 'replica-a', { timeoutMs: 10_000 });
    const b = startReplica('replica-b');

    // A TTL that holds the default 5 s stop lead (heartbeat + 1 s + lead < TTL).
    await cluster.createLease(APP, deploymentLease(APP, 2, { ttlSeconds: 10, heartbeatIntervalSeconds: 1 }));
    await cluster.createDeployment(APP, 0);
    const pods = await eventually(
      async () => {
        const uids = await runningPods();
        return uids.length === 2 ? uids : undefined;
      },
      { timeoutMs: 20_000 },
    );
    const before = await cluster.mustLease(APP);
    expect(before.status?.leaseState).toBe('held');
    const token = before.status?.fencingToken;
    expect(token).toBeGreaterThan(0);
    const stopWrites = cluster.countOperatorWrites('deployments');

    // The leader goes away while replica-b is up: replica-b takes the Lease within the wait.
    a.manager.stop('SIGTERM');
    expect((await a.done).exitCode).toBe(0);
    expect(a.events).toContain('successor-took-over');
    expect(a.events.some((e) => e.startsWith('handed-over'))).toBe(false);
    expect(await leaderHolder()).toBe('replica-b');

    // The successor renews the same ownership: same token, expiry moving on, nothing stopped.
    const renewedFrom = (await cluster.mustLease(APP)).status?.expiresAt ?? '';
    await eventually(async () => ((await cluster.mustLease(APP)).status?.expiresAt ?? '') > renewedFrom, {
      timeoutMs: 10_000,
    });
    const during = await cluster.mustLease(APP);
    expect(during.status?.leaseState).toBe('held');
    expect(during.status?.fencingToken).toBe(token);
    expect(during.status?.workload?.phase).toBe('Active');
    expect(await runningPods()).toEqual(pods);
    expect(await cluster.replicas(APP)).toBe(2);
    expect(stopWrites()).toBe(0);

    // The last replica stops with no successor: it leads once more and hands the workload over.
    b.manager.stop('SIGTERM');
    expect((await b.done).exitCode).toBe(0);
    expect(b.events).toContain('handed-over:berthlease');
    expect(b.events).not.toContain('successor-took-over');
    expect(await cluster.replicas(APP)).toBe(0);
    expect(await runningPods()).toEqual([]);
    const after = await cluster.mustLease(APP);
    expect(after.status?.workload?.phase).not.toBe('Active');
    expect(await leaderHolder()).toBe('');
  }, 60_000);
});
