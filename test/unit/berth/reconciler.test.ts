// The reconciler's decisions against fakes of its two edges (the Go reconciler_test.go / status_test.go
// scenarios of docs/behaviour.md §6.2 that apply to lease-only leases), with a ManualClock. The same scenarios run
// against the real control plane and the real central server in test/integration/berth/reconciler.test.ts.
import { describe, expect, it } from 'vitest';
import { type BerthLease, ReconcileError } from '../../../src/berth/api.ts';
import { BerthLeaseReconciler, OWNERSHIP_ELAPSED_MESSAGE } from '../../../src/berth/reconciler.ts';
import { findCondition, formatTime } from '../../../src/berth/status.ts';
import { ManualClock } from '../../../src/kube/clock.ts';
import { createRegistry } from '../../../src/observability/metrics.ts';
import {
  acquired,
  ctx,
  FakeLeaseStore,
  FakeRecorder,
  heldBy,
  leaseOnlySpec,
  NS,
  releaseConflict,
  ScriptedLeaseClient,
  serverError,
} from './fakes.ts';

const T0 = Date.UTC(2026, 8, 7, 9, 0, 0);

function setup(
  o: {
    clusterIdentity?: string;
    operatorNamespace?: string;
    failoverBoundMs?: number;
    cached?: (key: string) => BerthLease | undefined;
  } = {},
) {
  const store = new FakeLeaseStore();
  const central = new ScriptedLeaseClient();
  const clock = new ManualClock(T0);
  const recorder = new FakeRecorder();
  const registry = createRegistry({ defaultMetrics: false });
  const reconciler = new BerthLeaseReconciler({
    api: store,
    leaseClient: central,
    clusterIdentity: o.clusterIdentity ?? 'cluster-east',
    operatorNamespace: o.operatorNamespace ?? 'berth-system',
    clock,
    recorder,
    registry,
    ...(o.failoverBoundMs !== undefined ? { failoverBoundMs: o.failoverBoundMs } : {}),
    ...(o.cached ? { cached: o.cached } : {}),
  });
  const reconcile = (name: string, signal?: AbortSignal) =>
    reconciler.reconcile(`${NS}/${name}`, ctx(name, signal));
  const gauge = async (name: string, metric = 'berth_lease_held'): Promise<number | undefined> => {
    const values = (await registry.getSingleMetric(metric)?.get())?.values ?? [];
    return values.find((v) => v.labels.name === name)?.value;
  };
  return { store, central, clock, recorder, registry, reconciler, reconcile, gauge };
}

describe('BerthLeaseReconciler (lease-only)', () => {
  it('a missing object gives an empty result and no error (TestReconcileMissingObject)', async () => {
    const { reconcile, store, central } = setup();
    expect(await reconcile('nope')).toEqual({});
    expect(store.calls).toEqual(['get nope']);
    expect(central.calls).toEqual([]);
  });

  it("adds the finalizer on first observation, then goes on with the write's answer (TestReconcileAddsFinalizerOnFirstObservation, beyond the original)", async () => {
    const { reconcile, store, central, clock } = setup();
    store.create('l', leaseOnlySpec(), { finalizer: false });
    central.acquireAnswers = [acquired('cluster-east', 1, clock.now())];
    expect(await reconcile('l')).toEqual({ requeueAfter: 10_000 });
    // One read: the status write is guarded by the resourceVersion the finalizer's PATCH answered.
    expect(store.calls).toEqual(['get l', 'finalizers l [berth.skaphos.io/lease-release]', 'status l']);
    expect(store.stored('l').metadata.finalizers).toEqual(['berth.skaphos.io/lease-release']);
    expect(central.calls.map((c) => c.op)).toEqual(['acquire']);
    expect(store.stored('l').status).toMatchObject({ leaseState: 'held', fencingToken: 1 });
  });

  describe('a new lease as the cache shows it', () => {
    const FIN = 'finalizers l [berth.skaphos.io/lease-release]';
    /** The cache holds what the store had when the lease was created, changed by `edit`. */
    function cachedSetup(edit: (l: BerthLease) => void = () => {}) {
      let copy: BerthLease | undefined;
      const t = setup({ cached: (key) => (key === `${NS}/l` ? copy : undefined) });
      t.store.create('l', leaseOnlySpec(), { finalizer: false });
      copy = structuredClone(t.store.stored('l'));
      edit(copy);
      t.central.acquireAnswers = [acquired('cluster-east', 1, t.clock.now())];
      return t;
    }

    it('is patched without a GET, guarded by the cached resourceVersion', async () => {
      const { reconcile, store, central } = cachedSetup();
      expect(await reconcile('l')).toEqual({ requeueAfter: 10_000 });
      expect(store.calls).toEqual([FIN, 'status l']);
      expect(central.calls.map((c) => c.op)).toEqual(['acquire']);
    });

    it('a cache behind the stored object: the PATCH conflicts, and the GET decides', async () => {
      const { reconcile, store } = cachedSetup((l) => {
        l.metadata.resourceVersion = '1';
      });
      expect(await reconcile('l')).toEqual({ requeueAfter: 10_000 });
      expect(store.calls).toEqual([FIN, 'get l', FIN, 'status l']);
      expect(store.stored('l').status).toMatchObject({ leaseState: 'held' });
    });

    it('a cached lease that is gone: the PATCH finds nothing, the GET confirms, nothing is acquired', async () => {
      const { reconcile, store, central } = cachedSetup();
      store.objects.delete('l');
      expect(await reconcile('l')).toEqual({});
      expect(store.calls).toEqual([FIN, 'get l']);
      expect(central.calls).toEqual([]);
    });

    it('a cached copy with the finalizer, or deleting, takes the GET first', async () => {
      for (const edit of [
        (l: BerthLease) => {
          l.metadata.finalizers = ['berth.skaphos.io/lease-release'];
        },
        (l: BerthLease) => {
          l.metadata.deletionTimestamp = '2026-01-01T00:00:00Z';
        },
      ]) {
        const { reconcile, store } = cachedSetup(edit);
        await reconcile('l');
        expect(store.calls[0]).toBe('get l');
      }
    });
  });

  it('a failed finalizer write ends the pass before any Acquire', async () => {
    const { reconcile, store, central } = setup();
    store.create('l', leaseOnlySpec(), { finalizer: false });
    store.setFinalizers = () => Promise.reject(new Error('the object has been modified'));
    await expect(reconcile('l')).rejects.toThrow(/has been modified/);
    expect(central.calls).toEqual([]);
    expect(store.stored('l').status).toBeUndefined();
  });

  it('a deleting object without the finalizer is left alone', async () => {
    const { reconcile, store, central } = setup();
    store.create('l', leaseOnlySpec(), { finalizer: false });
    store.stored('l').metadata.finalizers = ['someone-else/finalizer'];
    store.markDeleted('l');
    expect(await reconcile('l')).toEqual({});
    expect(store.calls).toEqual(['get l']);
    expect(central.calls).toEqual([]);
  });

  it('held: status held, token, holder, times, conditions; requeue after the heartbeat', async () => {
    const { reconcile, store, central, clock, recorder, gauge } = setup();
    store.create('l', leaseOnlySpec());
    central.acquireAnswers = [acquired('cluster-east', 1, clock.now())];
    expect(await reconcile('l')).toEqual({ requeueAfter: 10_000 });
    expect(central.calls).toEqual([
      {
        op: 'acquire',
        namespace: NS,
        name: 'shared',
        holder: 'cluster-east',
        ttlSeconds: 30,
        timeoutMs: 2_500,
      },
    ]);
    const status = store.stored('l').status;
    expect(status).toMatchObject({
      observedGeneration: 1,
      leaseState: 'held',
      currentHolder: 'cluster-east',
      fencingToken: 1,
      acquiredAt: formatTime(T0),
      expiresAt: formatTime(T0 + 30_000),
      lastHeartbeat: formatTime(T0),
    });
    expect(findCondition(status, 'Acquired')).toMatchObject({
      status: 'True',
      reason: 'Held',
      message: 'lease held with fencing token 1',
      observedGeneration: 1,
    });
    expect(findCondition(status, 'HeartbeatHealthy')).toMatchObject({
      status: 'True',
      reason: 'Heartbeating',
    });
    expect(recorder.events).toEqual([
      {
        type: 'Normal',
        reason: 'Acquired',
        action: 'Acquire',
        note: 'acquired lease "shared" as "cluster-east" with fencing token 1',
        name: 'l',
      },
    ]);
    expect(await gauge('l')).toBe(1);
    expect(await gauge('l', 'berth_lease_heartbeat_healthy')).toBe(1);
    expect(await gauge('l', 'berth_lease_holder_present')).toBe(1);
  });

  it('bounds the Acquire by min(heartbeat, 2.5 s)', async () => {
    const { reconcile, store, central, clock } = setup();
    store.create('l', leaseOnlySpec({ ttlSeconds: 3, heartbeatIntervalSeconds: 1 }));
    central.acquireAnswers = [acquired('cluster-east', 1, clock.now(), 3_000)];
    expect(await reconcile('l')).toEqual({ requeueAfter: 1_000 });
    expect(central.calls[0]?.timeoutMs).toBe(1_000);
  });

  it('a renewal in the same second writes nothing; the next heartbeat refreshes lastHeartbeat only', async () => {
    const { reconcile, store, central, clock, recorder } = setup();
    store.create('l', leaseOnlySpec());
    central.acquireAnswers = [() => Promise.resolve(acquired('cluster-east', 1, clock.now()))];
    await reconcile('l');
    await reconcile('l');
    expect(store.statusWrites()).toBe(1);
    clock.advance(10_000);
    await reconcile('l');
    expect(store.statusWrites()).toBe(2);
    expect(store.stored('l').status?.lastHeartbeat).toBe(formatTime(T0 + 10_000));
    expect(findCondition(store.stored('l').status, 'Acquired')?.lastTransitionTime).toBe(formatTime(T0));
    expect(recorder.reasons()).toEqual(['Acquired']);
  });

  it('held by another: waiting, the other holder, token 0; requeue min(heartbeat, ttl/3)', async () => {
    const { reconcile, store, central, clock, gauge } = setup();
    store.create('l', leaseOnlySpec({ ttlSeconds: 30, heartbeatIntervalSeconds: 20 }));
    central.acquireAnswers = [heldBy('cluster-west', 4, clock.now() + 12_000)];
    expect(await reconcile('l')).toEqual({ requeueAfter: 10_000 });
    const status = store.stored('l').status;
    expect(status).toMatchObject({
      leaseState: 'waiting',
      currentHolder: 'cluster-west',
      fencingToken: 0,
      expiresAt: formatTime(T0 + 12_000),
    });
    expect(status?.acquiredAt).toBeUndefined();
    expect(findCondition(status, 'Acquired')).toMatchObject({
      status: 'False',
      reason: 'HeldByOther',
      message: 'lease held by "cluster-west"',
    });
    expect(findCondition(status, 'HeartbeatHealthy')).toMatchObject({
      status: 'True',
      reason: 'Standby',
      message: 'monitoring for reacquire',
    });
    expect(await gauge('l')).toBe(0);
    // Waiting for another holder is healthy, and the lease is held (elsewhere).
    expect(await gauge('l', 'berth_lease_heartbeat_healthy')).toBe(1);
    expect(await gauge('l', 'berth_lease_holder_present')).toBe(1);
    // A standby whose view does not change writes nothing more.
    await reconcile('l');
    expect(store.statusWrites()).toBe(1);
  });

  it('lost to another holder: waiting, token 0, the new holder; LeaseLost (TestReconcileLostLeaseScalesDownAndClearsToken)', async () => {
    const { reconcile, store, central, clock, recorder, gauge } = setup();
    store.create('l', leaseOnlySpec());
    central.acquireAnswers = [acquired('cluster-east', 1, clock.now())];
    await reconcile('l');
    clock.advance(10_000);
    central.acquireAnswers = [heldBy('cluster-west', 2, clock.now() + 30_000)];
    expect(await reconcile('l')).toEqual({ requeueAfter: 10_000 });
    expect(store.stored('l').status).toMatchObject({
      leaseState: 'waiting',
      fencingToken: 0,
      currentHolder: 'cluster-west',
    });
    expect(recorder.events.map((e) => [e.type, e.reason, e.note])).toEqual([
      ['Normal', 'Acquired', 'acquired lease "shared" as "cluster-east" with fencing token 1'],
      ['Warning', 'LeaseLost', 'lease held by "cluster-west"'],
    ]);
    expect(await gauge('l')).toBe(0);
  });

  it('an Acquire error: HeartbeatHealthy=False/AcquireFailed only, requeue 1 s (TestReconcileAcquireErrorRequeues)', async () => {
    const { reconcile, store, central, clock, recorder, gauge } = setup();
    store.create('l', leaseOnlySpec());
    central.acquireAnswers = [acquired('cluster-east', 1, clock.now())];
    await reconcile('l');
    clock.advance(10_000);
    central.acquireAnswers = [serverError()];
    expect(await reconcile('l')).toEqual({ requeueAfter: 1_000 });
    const status = store.stored('l').status;
    expect(status).toMatchObject({ leaseState: 'held', fencingToken: 1, currentHolder: 'cluster-east' });
    expect(findCondition(status, 'Acquired')).toMatchObject({ status: 'True', reason: 'Held' });
    // The request id is logged, not written: a persisting error writes nothing new.
    expect(findCondition(status, 'HeartbeatHealthy')).toMatchObject({
      status: 'False',
      reason: 'AcquireFailed',
      message: 'acquire team-a/shared: server status 500: internal error',
      lastTransitionTime: formatTime(T0 + 10_000),
    });
    const writes = store.statusWrites();
    clock.advance(1_000);
    await reconcile('l');
    expect(store.statusWrites()).toBe(writes);
    expect(recorder.reasons()).toEqual(['Acquired', 'AcquireFailed']);
    expect(await gauge('l', 'berth_lease_heartbeat_healthy')).toBe(0);
    expect(await gauge('l', 'berth_lease_held')).toBe(1);
    // The central API answers again: healthy.
    clock.advance(1_000);
    central.acquireAnswers = [acquired('cluster-east', 1, clock.now())];
    await reconcile('l');
    expect(await gauge('l', 'berth_lease_heartbeat_healthy')).toBe(1);
  });

  it('an outage keeps a held lease held until its expiry, then marks it expired (beyond the original)', async () => {
    const { reconcile, store, central, clock, recorder, gauge } = setup();
    store.create('l', leaseOnlySpec({ ttlSeconds: 3, heartbeatIntervalSeconds: 1 }));
    central.acquireAnswers = [acquired('cluster-east', 5, clock.now(), 3_000)];
    await reconcile('l');
    central.acquireAnswers = [serverError()];
    clock.advance(1_000);
    expect(await reconcile('l')).toEqual({ requeueAfter: 1_000 });
    clock.advance(1_500);
    // 500 ms before the recorded expiry: the requeue is capped so the expiry is noticed on time.
    expect(await reconcile('l')).toEqual({ requeueAfter: 500 });
    expect(store.stored('l').status?.leaseState).toBe('held');
    expect(await gauge('l')).toBe(1);
    clock.advance(500);
    expect(await reconcile('l')).toEqual({ requeueAfter: 1_000 });
    const status = store.stored('l').status;
    expect(status).toMatchObject({ leaseState: 'waiting', fencingToken: 0, currentHolder: '' });
    expect(findCondition(status, 'Acquired')).toMatchObject({
      status: 'False',
      reason: 'Expired',
      message: `lease expired at ${formatTime(T0 + 3_000)} without renewal`,
    });
    expect(findCondition(status, 'HeartbeatHealthy')).toMatchObject({
      status: 'False',
      reason: 'AcquireFailed',
    });
    expect(recorder.reasons()).toEqual(['Acquired', 'AcquireFailed', 'LeaseLost']);
    expect(await gauge('l')).toBe(0);
    // Nobody is known to hold it any more.
    expect(await gauge('l', 'berth_lease_holder_present')).toBe(0);
    expect(await gauge('l', 'berth_lease_heartbeat_healthy')).toBe(0);
    // The central API is back: reacquired (a reclaim with the next token).
    central.acquireAnswers = [acquired('cluster-east', 6, clock.now(), 3_000)];
    await reconcile('l');
    expect(store.stored('l').status).toMatchObject({ leaseState: 'held', fencingToken: 6 });
    expect(findCondition(store.stored('l').status, 'HeartbeatHealthy')).toMatchObject({ status: 'True' });
  });

  it('refuses an answer that fails the sanity check: nothing of it recorded, retried like a failed call', async () => {
    const { reconcile, store, central, clock, gauge } = setup();
    store.create('l', leaseOnlySpec());
    for (const bad of [
      acquired('cluster-east', 0, clock.now()),
      acquired('cluster-west', 1, clock.now()),
      { ...acquired('cluster-east', 1, clock.now()), expiresAt: clock.now() },
    ]) {
      central.acquireAnswers = [bad];
      expect(await reconcile('l')).toEqual({ requeueAfter: 1_000 });
      const status = store.stored('l').status;
      expect(status?.leaseState).toBeUndefined();
      expect(status?.fencingToken).toBeUndefined();
      expect(findCondition(status, 'Acquired')).toBeUndefined();
      expect(findCondition(status, 'HeartbeatHealthy')).toMatchObject({
        status: 'False',
        reason: 'AcquireFailed',
        message: ReconcileError.invalidCentralResponse,
      });
    }
    // None of those is a fencing anomaly: no token went backwards (the counter is exported from 0).
    expect(await gauge('l', 'berth_lease_fencing_anomalies_total')).toBe(0);
    // A token below the one held is refused too, and counted as a fencing anomaly.
    central.acquireAnswers = [acquired('cluster-east', 7, clock.now())];
    await reconcile('l');
    expect(store.stored('l').status).toMatchObject({ leaseState: 'held', fencingToken: 7 });
    central.acquireAnswers = [acquired('cluster-east', 6, clock.now())];
    expect(await reconcile('l')).toEqual({ requeueAfter: 1_000 });
    expect(await gauge('l', 'berth_lease_fencing_anomalies_total')).toBe(1);
    expect(await gauge('l', 'berth_lease_heartbeat_healthy')).toBe(0);
    expect(store.stored('l').status).toMatchObject({ leaseState: 'held', fencingToken: 7 });
    expect(findCondition(store.stored('l').status, 'HeartbeatHealthy')?.message).toBe(
      ReconcileError.invalidCentralResponse,
    );
  });

  it('an answer that arrives after the local deadline is not recorded as held', async () => {
    const { reconcile, store, central, clock } = setup();
    store.create('l', leaseOnlySpec({ ttlSeconds: 3, heartbeatIntervalSeconds: 1 }));
    central.acquireAnswers = [
      async () => {
        const start = clock.now();
        clock.advance(3_000);
        return acquired('cluster-east', 1, start, 10_000);
      },
    ];
    expect(await reconcile('l')).toEqual({ requeueAfter: 1_000 });
    const status = store.stored('l').status;
    expect(status?.leaseState).toBeUndefined();
    expect(findCondition(status, 'HeartbeatHealthy')).toMatchObject({
      status: 'False',
      reason: 'AcquireFailed',
      message: OWNERSHIP_ELAPSED_MESSAGE,
    });
  });

  it('a status write that loses to a concurrent writer fails the reconcile (resourceVersion-guarded)', async () => {
    const { reconcile, store, central, clock } = setup();
    store.create('l', leaseOnlySpec());
    central.acquireAnswers = [acquired('cluster-east', 1, clock.now())];
    store.statusConflicts = 1;
    await expect(reconcile('l')).rejects.toMatchObject({ code: 409 });
    expect(store.stored('l').status).toBeUndefined();
  });

  it('the reconcile bound aborting the Acquire ends the reconcile with no status write', async () => {
    const { reconcile, store, central } = setup();
    store.create('l', leaseOnlySpec());
    const ac = new AbortController();
    central.acquireAnswers = [
      (options) =>
        new Promise((_resolve, reject) => {
          options?.signal?.addEventListener('abort', () => reject(new Error('aborted')));
          ac.abort();
        }),
    ];
    await expect(reconcile('l', ac.signal)).rejects.toThrow('aborted');
    expect(store.statusWrites()).toBe(0);
  });

  it('an invalid spec calls no Acquire: Acquired=False/InvalidSpec, no requeue (TestReconcileInvalidSpecDoesNotCallAcquire)', async () => {
    const { reconcile, store, central } = setup();
    store.create('l', leaseOnlySpec({ ttlSeconds: 10, heartbeatIntervalSeconds: 10 }));
    expect(await reconcile('l')).toEqual({});
    expect(central.calls).toEqual([]);
    expect(findCondition(store.stored('l').status, 'Acquired')).toMatchObject({
      status: 'False',
      reason: 'InvalidSpec',
      message: 'spec.heartbeatIntervalSeconds must be less than spec.ttlSeconds',
    });
  });

  it.each([
    ['outside the operator namespace', 'berth-system', ReconcileError.admissionDisabled],
    ['in the operator namespace', NS, ReconcileError.operatorNamespace],
  ])('a lease with a target %s: AdmissionRequired, no Acquire', async (_name, operatorNamespace, message) => {
    const { reconcile, store, central } = setup({ operatorNamespace });
    store.create(
      'l',
      leaseOnlySpec({
        target: { apiVersion: 'apps/v1', kind: 'Deployment', name: 'web' },
        acquireAction: { scale: { replicas: 2 } },
        releaseAction: { scale: { replicas: 0 } },
      }),
    );
    expect(await reconcile('l')).toEqual({});
    expect(central.calls).toEqual([]);
    expect(findCondition(store.stored('l').status, 'Acquired')).toMatchObject({
      status: 'False',
      reason: 'AdmissionRequired',
      message,
    });
  });

  it('--cluster-id overrides spec.holderIdentity; without it the spec holder is used', async () => {
    const east = setup({ clusterIdentity: 'cluster-east' });
    east.store.create('l', leaseOnlySpec());
    east.central.acquireAnswers = [acquired('cluster-east', 1, east.clock.now())];
    await east.reconcile('l');
    expect(east.central.calls[0]?.holder).toBe('cluster-east');

    const fallback = setup({ clusterIdentity: '' });
    fallback.store.create('l', leaseOnlySpec());
    fallback.central.acquireAnswers = [acquired('worker-east-1', 1, fallback.clock.now())];
    await fallback.reconcile('l');
    expect(fallback.central.calls[0]?.holder).toBe('worker-east-1');
    expect(fallback.store.stored('l').status?.currentHolder).toBe('worker-east-1');
  });

  it('requires a lease client (TestSetupWithManagerRequiresLeaseClient)', () => {
    expect(
      () =>
        new BerthLeaseReconciler({
          api: new FakeLeaseStore(),
          leaseClient: undefined,
          operatorNamespace: 'x',
        }),
    ).toThrow('BerthLeaseReconciler.LeaseClient is required');
  });

  it('stamps observedGeneration on status and conditions (TestReconcileHeldStampsObservedGeneration)', async () => {
    const { reconcile, store, central, clock } = setup();
    store.create('l', leaseOnlySpec());
    store.stored('l').metadata.generation = 5;
    central.acquireAnswers = [acquired('cluster-east', 1, clock.now())];
    await reconcile('l');
    const status = store.stored('l').status;
    expect(status?.observedGeneration).toBe(5);
    expect(status?.conditions?.map((c) => c.observedGeneration)).toEqual([5, 5]);
  });

  describe('deletion', () => {
    it('releases with the recorded holder and token once, then removes the finalizer (TestReconcileDeletionReleasesAndRemovesFinalizer)', async () => {
      const { reconcile, store, central, recorder, gauge } = setup({ clusterIdentity: 'new-id' });
      const heartbeat = {
        type: 'HeartbeatHealthy',
        status: 'True' as const,
        reason: 'Heartbeating',
        message: 'lease renewed',
        lastTransitionTime: formatTime(T0),
      };
      store.create('l', leaseOnlySpec(), {
        status: {
          leaseState: 'held',
          currentHolder: 'cluster-east',
          fencingToken: 7,
          conditions: [heartbeat],
        },
      });
      store.markDeleted('l');
      expect(await reconcile('l')).toEqual({});
      expect(central.calls).toEqual([
        {
          op: 'release',
          namespace: NS,
          name: 'shared',
          holder: 'cluster-east',
          fencingToken: 7,
          timeoutMs: 2_500,
        },
      ]);
      expect(store.objects.has('l')).toBe(false);
      expect(recorder.events).toEqual([
        {
          type: 'Normal',
          reason: 'Released',
          action: 'Release',
          note: 'released lease "shared" held as "cluster-east" with fencing token 7',
          name: 'l',
        },
      ]);
      expect(await gauge('l')).toBeUndefined();
      expect(await gauge('l', 'berth_lease_heartbeat_healthy')).toBeUndefined();
      expect(await gauge('l', 'berth_lease_holder_present')).toBeUndefined();
    });

    it('skips the Release without a token (TestReconcileDeletionWithNoTokenSkipsRelease)', async () => {
      const { reconcile, store, central } = setup();
      store.create('l', leaseOnlySpec(), {
        status: { leaseState: 'waiting', currentHolder: 'cluster-west', fencingToken: 0 },
      });
      store.markDeleted('l');
      expect(await reconcile('l')).toEqual({});
      expect(central.calls).toEqual([]);
      expect(store.objects.has('l')).toBe(false);
    });

    it('keeps the finalizer while the Release fails; a conflict counts as released', async () => {
      const { reconcile, store, central, recorder } = setup();
      store.create('l', leaseOnlySpec(), {
        status: { leaseState: 'held', currentHolder: 'cluster-east', fencingToken: 7 },
      });
      store.markDeleted('l');
      central.releaseError = serverError();
      expect(await reconcile('l')).toEqual({ requeueAfter: 1_000 });
      expect(store.stored('l').metadata.finalizers).toEqual(['berth.skaphos.io/lease-release']);
      central.releaseError = releaseConflict();
      expect(await reconcile('l')).toEqual({});
      expect(store.objects.has('l')).toBe(false);
      expect(central.of('release')).toHaveLength(2);
      expect(recorder.events.map((e) => [e.type, e.reason])).toEqual([
        ['Warning', 'ReleaseFailed'],
        ['Normal', 'Released'],
      ]);
      expect(recorder.events[1]?.note).toContain('already held by another identity or token');
    });

    it('never calls Acquire for a deleting lease', async () => {
      const { reconcile, store, central } = setup();
      store.create('l', leaseOnlySpec());
      store.markDeleted('l');
      await reconcile('l');
      expect(central.of('acquire')).toEqual([]);
    });
  });
});

describe('parseBerthLease', () => {
  it('accepts a stored object and names the field of one that does not match the schema', async () => {
    const { parseBerthLease } = await import('../../../src/berth/leaseio.ts');
    const good = new FakeLeaseStore().create('l', leaseOnlySpec());
    expect(parseBerthLease(JSON.parse(JSON.stringify(good)))).toEqual(good);
    expect(() => parseBerthLease({ ...good, spec: { ...good.spec, semantics: 'exactly-once' } })).toThrow(
      /^BerthLease team-a\/l does not match its schema: spec\.semantics: /,
    );
  });
});

describe('the failover margin (beyond the original)', () => {
  // Not ttl − heartbeat > failover, as before: the last renewal may have taken up to the acquire bound
  // (docs/verification.md, finding 3), so a 30 s TTL with a 10 s heartbeat does not outlast 19.4 s.
  it('warns once per spec when the TTL does not outlast a leader failover plus a renewal, and never otherwise', async () => {
    const { reconcile, store, central, clock, recorder } = setup({ failoverBoundMs: 19_400 });
    store.create('short', leaseOnlySpec({ ttlSeconds: 30, heartbeatIntervalSeconds: 10 }));
    store.create('long', leaseOnlySpec({ ttlSeconds: 32, heartbeatIntervalSeconds: 10 }));
    central.acquireAnswers = [
      () => Promise.resolve(acquired('cluster-east', 1, clock.now(), 30_000)),
      () => Promise.resolve(acquired('cluster-east', 2, clock.now(), 32_000)),
      () => Promise.resolve(acquired('cluster-east', 1, clock.now(), 30_000)),
    ];
    await reconcile('short');
    await reconcile('long');
    await reconcile('short');
    const warnings = recorder.events.filter((e) => e.reason === 'TTLBelowFailover');
    expect(warnings).toEqual([
      {
        type: 'Warning',
        reason: 'TTLBelowFailover',
        action: 'Acquire',
        name: 'short',
        note: 'ttlSeconds 30 minus heartbeatIntervalSeconds 10 (20s) does not outlast an operator leader failover (up to 19.4s) plus a renewal (up to 2.5s) and the stop lead (0s): if the leading replica crashes, another cluster can acquire the lease while this cluster still runs the workload',
      },
    ]);
    // Lease-only leases have no workload to stop: neither a stop lead nor its Warning.
    expect(recorder.reasons()).not.toContain('TTLBelowStopLead');
    // The lease is still served: the check only warns.
    expect(store.stored('short').status?.leaseState).toBe('held');
  });

  it('is off without leader election', async () => {
    const { reconcile, store, central, clock, recorder } = setup();
    store.create('short', leaseOnlySpec({ ttlSeconds: 3, heartbeatIntervalSeconds: 1 }));
    central.acquireAnswers = [acquired('cluster-east', 1, clock.now(), 3_000)];
    await reconcile('short');
    expect(recorder.reasons()).not.toContain('TTLBelowFailover');
  });
});
