// The reconciler's managed path against fakes (an in-memory BerthLease store with resourceVersion
// semantics, a scripted central API, an in-memory workload API) and the real ManagedWorkloads: the
// quiet standby versus the original stop cycle, ownership persisted before activation, the epoch check,
// stopAndRelease's order, and the shutdown hand-over.
import { describe, expect, it } from 'vitest';
import {
  type BerthLeaseSpec,
  DEFAULT_STOP_LEAD_MS,
  outOfScopeMessage,
  ReconcileError,
  STOP_FENCE,
} from '../../../src/berth/api.ts';
import { ManagedWorkloads } from '../../../src/berth/managed-workloads.ts';
import { BerthLeaseReconciler } from '../../../src/berth/reconciler.ts';
import { findCondition } from '../../../src/berth/status.ts';
import { ManualClock } from '../../../src/kube/clock.ts';
import type { KubeRequester } from '../../../src/kube/transport.ts';
import { createLogger } from '../../../src/observability/logger.ts';
import { acquired, ctx, FakeLeaseStore, FakeRecorder, heldBy, NS, ScriptedLeaseClient } from './fakes.ts';
import { deployment, LEASE_UID, pod, replicaSet, T0, TARGET_UID } from './managed-fixtures.ts';
import { FakeWorkloadApi } from './workload-fakes.ts';

const noTransport: KubeRequester = {
  request: () => Promise.reject(new Error('no API server in unit tests')),
};

const spec = (over: Partial<BerthLeaseSpec> = {}): BerthLeaseSpec => ({
  leaseName: 'web',
  holderIdentity: 'h',
  ttlSeconds: 30,
  heartbeatIntervalSeconds: 10,
  semantics: 'at-most-once',
  target: { apiVersion: 'apps/v1', kind: 'Deployment', name: 'web' },
  acquireAction: { scale: { replicas: 3 } },
  releaseAction: { scale: { replicas: 0 } },
  ...over,
});

/** The opt-in scope as a test sets it: the cache's view and the live one, each changeable. */
class FakeScope {
  cachedView: boolean | undefined = true;
  liveView = true;
  liveReads = 0;
  cached(): boolean | undefined {
    return this.cachedView;
  }
  async live(): Promise<boolean> {
    this.liveReads++;
    return this.liveView;
  }
}

function setup(o: { replicas?: number; scope?: FakeScope; spec?: Partial<BerthLeaseSpec> } = {}) {
  const store = new FakeLeaseStore();
  const central = new ScriptedLeaseClient();
  const clock = new ManualClock(T0);
  const recorder = new FakeRecorder();
  const api = new FakeWorkloadApi();
  const log: string[] = [];
  // One log of both edges, to check their order.
  const statusWrite = store.updateStatus.bind(store);
  store.updateStatus = async (lease, status) => {
    log.push(`status ${status.workload?.phase ?? '-'}`);
    return statusWrite(lease, status);
  };
  const patch = api.mergePatch.bind(api);
  api.mergePatch = async (kind, namespace, name, body, signal) => {
    log.push(`patch ${kind}/${name}`);
    return patch(kind, namespace, name, body, signal);
  };
  const workloads = new ManagedWorkloads({
    transport: noTransport,
    operatorNamespace: 'berth-system',
    api,
    leases: store,
    recorder,
    clock,
    ...(o.scope ? { scope: o.scope } : {}),
  });
  const reconciler = new BerthLeaseReconciler({
    api: store,
    leaseClient: central,
    clusterIdentity: 'cluster-east',
    operatorNamespace: 'berth-system',
    workloads,
    clock,
    recorder,
  });
  store.create('web', spec(o.spec), { status: { workload: { targetUID: TARGET_UID } } });
  store.stored('web').metadata.uid = LEASE_UID;
  api.put('Deployment', deployment(o.replicas ?? 0));
  api.put('ReplicaSet', replicaSet());
  const reconcile = () => reconciler.reconcile(`${NS}/web`, ctx('web'));
  return { store, central, clock, recorder, api, log, reconciler, reconcile, workloads };
}

describe('the stop lead (beyond the original)', () => {
  it('ends the activation 5 s before the deadline: the renewal is due then, and a failed one stops', async () => {
    // TTL 12 s, heartbeat 10 s: the activation ends at +7 s, before the heartbeat would renew it.
    const w = setup({ spec: { ttlSeconds: 12 } });
    w.central.acquireAnswers = [acquired('cluster-east', 7, T0, 12_000)];
    expect(await w.reconcile()).toEqual({ requeueAfter: 12_000 - DEFAULT_STOP_LEAD_MS });
    expect(w.store.stored('web').status?.workload?.deadline).toBe('2026-09-07T09:00:12Z');
    // The heartbeat, the acquire bound and the lead (10 + 2.5 + 5 s) do not fit in 12 s: a Warning.
    expect(w.recorder.events.filter((e) => e.reason === 'TTLBelowStopLead')).toEqual([
      {
        type: 'Warning',
        reason: 'TTLBelowStopLead',
        action: 'Acquire',
        name: 'web',
        note: "ttlSeconds 12 does not hold heartbeatIntervalSeconds 10 plus a renewal (up to 2.5s) plus the operator's stop lead (5s): the workload stops before each renewal can extend it",
      },
    ]);
    // A second before its end, a failed renewal keeps it, re-checked at the end; there it is stopped
    // (step 4, before any central call), drained and released, 5 s before the deadline.
    w.clock.advance(12_000 - DEFAULT_STOP_LEAD_MS - 1_000);
    w.central.acquireAnswers = [new Error('connect ECONNREFUSED')];
    expect(await w.reconcile()).toEqual({ requeueAfter: 1_000 });
    expect(w.store.stored('web').status?.workload?.phase).toBe('Active');
    w.clock.advance(1_000);
    const acquires = w.central.of('acquire').length;
    await w.reconcile();
    expect(w.central.of('acquire')).toHaveLength(acquires);
    expect(w.central.of('release').map((c) => c.fencingToken)).toEqual([7]);
    expect(w.api.stored('Deployment', 'web')?.spec?.replicas).toBe(0);
  });

  it('a new activation that would end at once is not made', async () => {
    const w = setup();
    // The answer's expiry is 5 s away: deadline − lead is now.
    w.central.acquireAnswers = [acquired('cluster-east', 7, T0, DEFAULT_STOP_LEAD_MS)];
    await w.reconcile();
    expect(w.store.stored('web').status?.workload?.phase).not.toBe('Active');
    expect(w.api.stored('Deployment', 'web')?.spec?.replicas).toBe(0);
  });
});

describe('a managed standby', () => {
  it('never activated: waits quietly — target kept at 0, the other holder shown, no write on later reconciles', async () => {
    const w = setup({ replicas: 2 });
    w.central.acquireAnswers = [heldBy('cluster-west', 4, T0 + 20_000)];
    expect(await w.reconcile()).toEqual({ requeueAfter: 10_000 });
    expect(w.api.stored('Deployment', 'web')?.spec?.replicas).toBe(0);
    const status = w.store.stored('web').status;
    expect(status).toMatchObject({ leaseState: 'waiting', currentHolder: 'cluster-west', fencingToken: 0 });
    expect(status?.expiresAt).toBeUndefined();
    expect(status?.workload).toEqual({ targetUID: TARGET_UID });
    expect(findCondition(status, 'Acquired')?.message).toBe('lease held by "cluster-west"');
    const writes = { status: w.store.statusWrites(), target: w.api.writes().length };
    // The holder renews (a new expiry each time): still nothing written.
    for (let i = 1; i <= 3; i++) {
      w.central.acquireAnswers = [heldBy('cluster-west', 4, T0 + 20_000 + i * 10_000)];
      expect(await w.reconcile()).toEqual({ requeueAfter: 10_000 });
    }
    expect({ status: w.store.statusWrites(), target: w.api.writes().length }).toEqual(writes);
  });

  it('that ran its workload: losing the lease stops, drains and releases it', async () => {
    const w = setup();
    w.central.acquireAnswers = [acquired('cluster-east', 7, T0)];
    await w.reconcile();
    w.api.put('Pod', pod('p1', { gated: false, phase: 'Running' }));
    w.central.acquireAnswers = [heldBy('cluster-west', 8, T0 + 30_000)];
    expect(await w.reconcile()).toEqual({ requeueAfter: 1_000 });
    expect(w.store.stored('web').status?.workload?.phase).toBe('Stopping');
    expect(w.central.of('release')).toEqual([]);
    expect(await w.reconcile()).toEqual({ requeueAfter: 1_000 });
    expect(w.central.of('release').map((c) => [c.holder, c.fencingToken])).toEqual([['cluster-east', 7]]);
    expect(w.store.stored('web').status).toMatchObject({
      leaseState: 'waiting',
      currentHolder: '',
      fencingToken: 0,
    });
    expect(w.recorder.reasons()).toEqual(
      expect.arrayContaining(['Activated', 'Stopping', 'Drained', 'Released']),
    );
  });
});

describe('deletion', () => {
  it('drains, then keeps retrying the release with the finalizer kept; Drained is reported once', async () => {
    const w = setup();
    w.central.acquireAnswers = [acquired('cluster-east', 7, T0)];
    await w.reconcile();
    w.store.markDeleted('web');
    w.central.releaseError = new Error('central unavailable');
    for (let i = 0; i < 3; i++) expect(await w.reconcile()).toEqual({ requeueAfter: 1_000 });
    expect(w.store.stored('web').metadata.finalizers).toEqual(['berth.skaphos.io/lease-release']);
    expect(w.store.stored('web').status?.workload).toMatchObject({ phase: 'Stopping', token: 7 });
    w.central.releaseError = undefined;
    expect(await w.reconcile()).toEqual({});
    expect(w.store.objects.has('web')).toBe(false);
    expect(w.central.of('release')).toHaveLength(4);
    expect(w.recorder.reasons().filter((r) => r === 'Drained')).toHaveLength(1);
    expect(w.recorder.reasons().filter((r) => r === 'Stopping')).toHaveLength(1);
  });
});

describe('activation', () => {
  it('persists ownership before the target is scaled, and permits the Pods after', async () => {
    const w = setup();
    w.api.put('Pod', pod('p1'));
    w.central.acquireAnswers = [acquired('cluster-east', 7, T0)];
    expect(await w.reconcile()).toEqual({ requeueAfter: 10_000 });
    expect(w.log).toEqual(['status Active', 'patch Deployment/web', 'status Active', 'patch Pod/p1']);
    expect(w.store.stored('web').status?.workload).toMatchObject({
      phase: 'Active',
      holder: 'cluster-east',
      token: 7,
      pods: [{ name: 'p1', uid: 'uid-p1' }],
    });
    // A steady heartbeat writes the status (lastHeartbeat) but never the target.
    w.log.length = 0;
    w.clock.advance(10_000);
    w.central.acquireAnswers = [acquired('cluster-east', 7, w.clock.now())];
    await w.reconcile();
    expect(w.log).toEqual(['status Active']);
  });

  it('a changed fencing token while Active forces a stop', async () => {
    const w = setup();
    w.central.acquireAnswers = [acquired('cluster-east', 7, T0)];
    await w.reconcile();
    w.central.acquireAnswers = [acquired('cluster-east', 9, T0)];
    await w.reconcile();
    expect(w.store.stored('web').status?.workload?.phase).toBe('');
    expect(w.central.of('release').map((c) => c.fencingToken)).toEqual([7]);
    expect(w.api.stored('Deployment', 'web')?.spec?.replicas).toBe(0);
  });

  it('a failed read of an Active target keeps it until the activation ends, unrenewed; a missing one stops at once', async () => {
    const w = setup();
    w.central.acquireAnswers = [acquired('cluster-east', 7, T0)];
    await w.reconcile();
    const deadline = Date.parse(w.store.stored('web').status?.workload?.deadline ?? '');
    const acquires = w.central.of('acquire').length;

    // A 500 on the target GET: no stop, no renewal, HeartbeatHealthy=False, retried within 1 s.
    w.api.failures.set('get Deployment/web', [new Error('HTTP 500: etcdserver: leader changed')]);
    expect(await w.reconcile()).toEqual({ requeueAfter: 1_000 });
    const kept = w.store.stored('web').status;
    expect(kept?.workload?.phase).toBe('Active');
    expect(findCondition(kept, 'HeartbeatHealthy')).toMatchObject({
      status: 'False',
      reason: 'TargetUnverified',
      message: 'target not verified: HTTP 500: etcdserver: leader changed',
    });
    expect(w.central.of('acquire')).toHaveLength(acquires);
    expect(w.central.of('release')).toEqual([]);
    expect(w.api.stored('Deployment', 'web')?.spec?.replicas).toBe(3);

    // The read works again: renewed with the same token.
    w.central.acquireAnswers = [acquired('cluster-east', 7, w.clock.now())];
    await w.reconcile();
    expect(w.store.stored('web').status?.workload).toMatchObject({ phase: 'Active', token: 7 });
    expect(findCondition(w.store.stored('web').status, 'HeartbeatHealthy')?.reason).toBe('Heartbeating');

    // Failing reads until the activation ends (the stop lead before the deadline): stopped and released then.
    const renewed = Date.parse(w.store.stored('web').status?.workload?.deadline ?? '');
    expect(renewed).toBeGreaterThanOrEqual(deadline);
    w.api.failures.set('get Deployment/web', [new Error('HTTP 503')]);
    w.clock.advance(renewed - DEFAULT_STOP_LEAD_MS - w.clock.now() - 500);
    expect(await w.reconcile()).toEqual({ requeueAfter: 500 });
    expect(w.store.stored('web').status?.workload?.phase).toBe('Active');
    // At the end step 4's forced stop comes first (it needs no verification).
    w.clock.advance(500);
    await w.reconcile();
    expect(w.central.of('release').map((c) => c.fencingToken)).toEqual([7]);
    expect(w.api.stored('Deployment', 'web')?.spec?.replicas).toBe(0);

    // NotFound is definite: an Active workload whose target is gone stops at once (the original's rule).
    const x = setup();
    x.central.acquireAnswers = [acquired('cluster-east', 7, T0)];
    await x.reconcile();
    x.api.objects.delete('Deployment/web');
    await x.reconcile();
    expect(x.central.of('release').map((c) => c.fencingToken)).toEqual([7]);
  });

  it('a lease in the operator namespace is refused before any central call', async () => {
    const w = setup();
    const lease = w.store.create('ops', spec({ leaseName: 'ops' }));
    lease.metadata.namespace = 'berth-system';
    w.store.objects.set('ops', { ...structuredClone(lease) });
    await w.reconciler.reconcile('berth-system/ops', { ...ctx('ops'), namespace: 'berth-system' });
    expect(findCondition(w.store.stored('ops').status, 'Acquired')).toMatchObject({
      reason: 'AdmissionRequired',
      message: ReconcileError.operatorNamespace,
    });
    expect(w.central.calls).toEqual([]);
  });
});

describe('the opt-in admission scope', () => {
  const outside = outOfScopeMessage(NS);

  it('a lease whose namespace is outside it is never activated: no central call, target kept stopped', async () => {
    const scope = new FakeScope();
    scope.cachedView = false;
    const w = setup({ scope, replicas: 2 });
    expect(await w.reconcile()).toEqual({ requeueAfter: 1_000 });
    expect(findCondition(w.store.stored('web').status, 'Acquired')).toMatchObject({
      status: 'False',
      reason: 'AdmissionRequired',
      message: outside,
    });
    expect(w.central.calls).toEqual([]);
    expect(w.api.stored('Deployment', 'web')?.spec?.replicas).toBe(0);
    expect(outside).toBe(
      'namespace "team-a" is outside the workload admission scope, so its workloads are not admitted and cannot be managed: a cluster admin opts it in with `kubectl label namespace team-a berth.skaphos.io/workload-admission=enabled`',
    );
  });

  it('a new activation is confirmed live: a namespace that left since the cache looked is not activated', async () => {
    const scope = new FakeScope();
    scope.liveView = false;
    const w = setup({ scope });
    w.central.acquireAnswers = [acquired('cluster-east', 7, T0)];
    expect(await w.reconcile()).toEqual({});
    expect(scope.liveReads).toBe(1);
    expect(w.store.stored('web').status?.workload?.phase ?? '').toBe('');
    expect(findCondition(w.store.stored('web').status, 'Acquired')).toMatchObject({
      reason: 'AdmissionRequired',
      message: outside,
    });
    expect(w.log.filter((l) => l.startsWith('patch'))).toEqual([]);
  });

  it('an Active workload is renewed without a live read, and stopped, drained and released once outside', async () => {
    const scope = new FakeScope();
    const w = setup({ scope });
    w.api.put('Pod', pod('p1'));
    w.central.acquireAnswers = [acquired('cluster-east', 7, T0)];
    await w.reconcile();
    expect(w.store.stored('web').status?.workload?.phase).toBe('Active');
    w.clock.advance(10_000);
    w.central.acquireAnswers = [acquired('cluster-east', 7, w.clock.now())];
    await w.reconcile();
    expect(scope.liveReads).toBe(1);

    scope.cachedView = false;
    await w.reconcile();
    expect(w.store.stored('web').status?.workload?.phase).toBe('Stopping');
    expect(w.api.stored('Deployment', 'web')?.spec?.replicas).toBe(0);
    expect(w.central.of('release')).toEqual([]);
    w.api.objects.delete('Pod/p1');
    await w.reconcile();
    expect(w.central.of('release').map((c) => c.fencingToken)).toEqual([7]);
  });

  it('while the scope is not known yet (its cache has not listed), an Active workload is kept until its deadline', async () => {
    const scope = new FakeScope();
    const w = setup({ scope });
    w.central.acquireAnswers = [acquired('cluster-east', 7, T0)];
    await w.reconcile();
    scope.cachedView = undefined;
    expect(await w.reconcile()).toEqual({ requeueAfter: 1_000 });
    expect(w.store.stored('web').status?.workload?.phase).toBe('Active');
    expect(findCondition(w.store.stored('web').status, 'HeartbeatHealthy')?.reason).toBe('TargetUnverified');
  });
});

describe('handOver (graceful stop of the leader)', () => {
  it('stops, drains and releases an Active workload, then reports it released', async () => {
    const w = setup();
    w.central.acquireAnswers = [acquired('cluster-east', 7, T0)];
    await w.reconcile();
    w.api.put('Pod', pod('p1', { gated: false, phase: 'Running' }));
    const outcomes = await w.reconciler.handOver(
      [`${NS}/web`],
      AbortSignal.timeout(5_000),
      createLogger({ level: 'silent' }),
      1,
    );
    expect(outcomes.get(`${NS}/web`)).toBe('released');
    expect(w.api.stored('Pod', 'p1')).toBeUndefined();
    const target = w.api.stored('Deployment', 'web');
    expect(target?.spec?.replicas).toBe(0);
    expect(target?.metadata.annotations?.[STOP_FENCE]).toBeDefined();
    expect(w.central.of('release').map((c) => c.fencingToken)).toEqual([7]);
  });

  it('leaves a lease that is not active alone, and gives up (Stopping kept) when its signal ends', async () => {
    const w = setup();
    const idle = await w.reconciler.handOver(
      [`${NS}/web`],
      AbortSignal.timeout(5_000),
      createLogger({ level: 'silent' }),
      1,
    );
    expect(idle.get(`${NS}/web`)).toBe('not-active');
    w.central.acquireAnswers = [acquired('cluster-east', 7, T0)];
    await w.reconcile();
    const stuck = pod('p1', { gated: false, phase: 'Running', deleting: true });
    w.api.put('Pod', stuck);
    const outcomes = await w.reconciler.handOver(
      [`${NS}/web`],
      AbortSignal.timeout(100),
      createLogger({ level: 'silent' }),
      1,
    );
    expect(outcomes.get(`${NS}/web`)).toBe('unfinished');
    expect(w.store.stored('web').status?.workload?.phase).toBe('Stopping');
    expect(w.central.of('release')).toEqual([]);
  });
});
