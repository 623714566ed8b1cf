// The reconciler scenarios of docs/behaviour.md §6.2 items 1-14 that apply to lease-only leases, against the real
// kube-apiserver (CRD with CEL, status subresource, resourceVersion conflicts, finalizers, RBAC) and the
// embedded central lease server over HTTP. No controller runs here: the file uses the run's shared
// control plane, with namespaces of its own. The reconciler and the central server share one
// ManualClock, so TTLs and requeues are decided without sleeping; reconciles are run one at a time
// (as the Go tests call Reconcile), the controller itself is exercised in controller.test.ts.
import type { Server } from 'node:http';
import { createServer } from 'node:https';
import type { AddressInfo } from 'node:net';
import { PatchStrategy, setHeaderOptions } from '@kubernetes/client-node';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { FINALIZER, ReconcileError } from '../../../src/berth/api.ts';
import { BerthLeaseController } from '../../../src/berth/controller.ts';
import { HttpLeaseClient } from '../../../src/berth/leaseclient.ts';
import { kubeBerthLeaseApi } from '../../../src/berth/leaseio.ts';
import { findCondition, formatTime } from '../../../src/berth/status.ts';
import { ManualClock } from '../../../src/kube/clock.ts';
import { KubeTransport } from '../../../src/kube/transport.ts';
import { createLogger } from '../../../src/observability/logger.ts';
import { centralTls } from '../../helpers/central-tls.ts';
import { type Central, Cluster, createOperator, type Operator, spec, startCentral } from './harness.ts';

let cluster: Cluster;
const cleanups: Array<() => Promise<void>> = [];

beforeAll(async () => {
  cluster = await Cluster.shared('east');
});
afterEach(async () => {
  for (const c of cleanups.splice(0).reverse()) await c();
  cluster.proxy.clear();
});
afterAll(async () => {
  await cluster?.stop();
});

/** Whole-second start: status times are whole seconds. */
const newClock = (): ManualClock => new ManualClock(Math.floor(Date.now() / 1000) * 1000);

async function world(
  o: { clusterId?: string } = {},
): Promise<{ clock: ManualClock; central: Central; op: Operator }> {
  const clock = newClock();
  const central = await startCentral(clock);
  const op = createOperator(cluster, {
    clusterId: o.clusterId ?? 'cluster-east',
    centralUrl: central.url,
    clock,
  });
  cleanups.push(
    () => central.stop(),
    () => op.stop(),
  );
  return { clock, central, op };
}

/** Another holder talking to the same central server. */
function otherClient(central: Central): HttpLeaseClient {
  const client = new HttpLeaseClient({ baseUrl: central.url });
  cleanups.push(async () => client.close());
  return client;
}

/** Creates a lease and runs the first reconcile, which adds the finalizer. */
/** A lease the operator has seen once: its finalizer is there, nothing else. */
async function created(name: string, leaseSpec = spec({ leaseName: name })): Promise<void> {
  await cluster.createLease(name, leaseSpec, [FINALIZER]);
  cleanups.push(() => forceDelete(name));
}

async function forceDelete(name: string): Promise<void> {
  const lease = await cluster.lease(name);
  if (lease === undefined) return;
  await cluster.custom
    .patchNamespacedCustomObject(
      { ...cluster.ref(), name, body: { metadata: { finalizers: [] } } },
      setHeaderOptions('Content-Type', PatchStrategy.MergePatch),
    )
    .catch(() => {});
  await cluster.deleteLease(name).catch(() => {});
}

describe('BerthLease reconciler against the API server and the central server', () => {
  it('1. a missing object gives an empty result and no error', async () => {
    const { op } = await world();
    expect(await op.reconcile('does-not-exist')).toEqual({});
    expect(op.central.calls).toEqual([]);
  });

  it('2. adds the finalizer on first observation, then acquires in the same pass (beyond the original)', async () => {
    const { op } = await world();
    await cluster.createLease('first', spec({ leaseName: 'first' }));
    cleanups.push(() => forceDelete('first'));
    expect(await op.reconcile('first')).toEqual({ requeueAfter: 10_000 });
    const lease = await cluster.mustLease('first');
    expect(lease.metadata.finalizers).toEqual(['berth.skaphos.io/lease-release']);
    expect(lease.status).toMatchObject({ leaseState: 'held', fencingToken: 1 });
    expect(op.central.calls.map((c) => c.op)).toEqual(['acquire']);
  });

  it('3. held: status held with token 1, holder, conditions; requeue after the heartbeat', async () => {
    const { op, clock } = await world();
    await created('held');
    expect(await op.reconcile('held')).toEqual({ requeueAfter: 10_000 });
    expect(op.central.calls.map((c) => [c.op, c.name, c.holder, c.timeoutMs])).toEqual([
      ['acquire', 'held', 'cluster-east', 2_500],
    ]);
    const lease = await cluster.mustLease('held');
    expect(lease.status).toMatchObject({
      observedGeneration: 1,
      leaseState: 'held',
      currentHolder: 'cluster-east',
      fencingToken: 1,
      acquiredAt: formatTime(clock.now()),
      expiresAt: formatTime(clock.now() + 30_000),
      lastHeartbeat: formatTime(clock.now()),
    });
    expect(findCondition(lease.status, 'Acquired')).toMatchObject({
      status: 'True',
      reason: 'Held',
      message: 'lease held with fencing token 1',
      observedGeneration: 1,
    });
    expect(findCondition(lease.status, 'HeartbeatHealthy')).toMatchObject({
      status: 'True',
      reason: 'Heartbeating',
      message: 'lease renewed',
    });
    // The next heartbeat renews in place: same token, new expiry.
    clock.advance(10_000);
    expect(await op.reconcile('held')).toEqual({ requeueAfter: 10_000 });
    expect((await cluster.mustLease('held')).status).toMatchObject({
      fencingToken: 1,
      expiresAt: formatTime(clock.now() + 30_000),
      lastHeartbeat: formatTime(clock.now()),
    });
    expect(await op.metric('berth_lease_held', { name: 'held' })).toBe(1);
    await op.recorder.flush();
    const events = await cluster.leaseEvents('held');
    expect(events.map((e) => [e.type, e.reason, e.action, e.note])).toEqual([
      ['Normal', 'Acquired', 'Acquire', 'acquired lease "held" as "cluster-east" with fencing token 1'],
    ]);
    expect(events[0]?.reportingController).toBe('berth.skaphos.io/berth-operator');
  });

  it('4. standby: waiting, the other holder, token 0; requeue min(heartbeat, ttl/3)', async () => {
    const { op, central, clock } = await world();
    await otherClient(central).acquire(cluster.leaseNs, 'standby', 'cluster-west', 30);
    await created('standby', spec({ leaseName: 'standby', heartbeatIntervalSeconds: 20 }));
    expect(await op.reconcile('standby')).toEqual({ requeueAfter: 10_000 });
    const lease = await cluster.mustLease('standby');
    expect(lease.status).toMatchObject({
      leaseState: 'waiting',
      currentHolder: 'cluster-west',
      fencingToken: 0,
      expiresAt: formatTime(clock.now() + 30_000),
    });
    expect(lease.status?.acquiredAt).toBeUndefined();
    expect(findCondition(lease.status, 'Acquired')).toMatchObject({
      status: 'False',
      reason: 'HeldByOther',
      message: 'lease held by "cluster-west"',
    });
    expect(findCondition(lease.status, 'HeartbeatHealthy')).toMatchObject({
      status: 'True',
      reason: 'Standby',
      message: 'monitoring for reacquire',
    });
    expect(await op.metric('berth_lease_held', { name: 'standby' })).toBe(0);
    // An unchanged standby writes nothing.
    const rv = lease.metadata.resourceVersion;
    await op.reconcile('standby');
    expect((await cluster.mustLease('standby')).metadata.resourceVersion).toBe(rv);
  });

  it('5. deletion releases with the recorded holder and token once, clears the finalizer, the object goes', async () => {
    const { op, central } = await world();
    const west = otherClient(central);
    // Six earlier ownership epochs: this cluster's acquire gets token 7.
    for (let token = 1; token <= 6; token++) {
      const res = await west.acquire(cluster.leaseNs, 'shared', 'cluster-west', 30);
      expect(res.fencingToken).toBe(token);
      await west.release(cluster.leaseNs, 'shared', 'cluster-west', token);
    }
    await created('deleted', spec({ leaseName: 'shared' }));
    await op.reconcile('deleted');
    expect((await cluster.mustLease('deleted')).status?.fencingToken).toBe(7);
    await cluster.deleteLease('deleted');
    expect((await cluster.mustLease('deleted')).metadata.deletionTimestamp).toBeDefined();
    expect(await op.reconcile('deleted')).toEqual({});
    expect(
      op.central.of('release').map((c) => [c.name, c.holder, c.fencingToken, c.timeoutMs, c.error]),
    ).toEqual([['shared', 'cluster-east', 7, 2_500, undefined]]);
    expect(await cluster.lease('deleted')).toBeUndefined();
    // Released centrally: the next holder reclaims at once, with the next token.
    expect(await west.acquire(cluster.leaseNs, 'shared', 'cluster-west', 30)).toMatchObject({
      acquired: true,
      fencingToken: 8,
    });
    expect(await op.metric('berth_lease_held', { name: 'deleted' })).toBeUndefined();
    await op.recorder.flush();
    expect((await cluster.leaseEvents('deleted')).map((e) => [e.reason, e.note])).toEqual([
      ['Acquired', 'acquired lease "shared" as "cluster-east" with fencing token 7'],
      ['Released', 'released lease "shared" held as "cluster-east" with fencing token 7'],
    ]);
  });

  it('6. deletion without a token skips the Release', async () => {
    const { op, central } = await world();
    await otherClient(central).acquire(cluster.leaseNs, 'no-token', 'cluster-west', 30);
    await created('no-token');
    await op.reconcile('no-token');
    expect((await cluster.mustLease('no-token')).status?.fencingToken).toBe(0);
    await cluster.deleteLease('no-token');
    expect(await op.reconcile('no-token')).toEqual({});
    expect(op.central.of('release')).toEqual([]);
    expect(await cluster.lease('no-token')).toBeUndefined();
  });

  it('deletion keeps the finalizer while the central Release fails, and finishes once it works', async () => {
    const { op, central } = await world();
    await created('release-retry');
    await op.reconcile('release-retry');
    await cluster.deleteLease('release-retry');
    central.store.down = true;
    expect(await op.reconcile('release-retry')).toEqual({ requeueAfter: 1_000 });
    expect((await cluster.mustLease('release-retry')).metadata.finalizers).toEqual([
      'berth.skaphos.io/lease-release',
    ]);
    central.store.down = false;
    expect(await op.reconcile('release-retry')).toEqual({});
    expect(await cluster.lease('release-retry')).toBeUndefined();
    expect(op.central.of('release').map((c) => c.error === undefined)).toEqual([false, true]);
  });

  it('deletion: a Release that conflicts (the lease moved on) counts as released', async () => {
    const { op, central, clock } = await world();
    await created('moved-on');
    await op.reconcile('moved-on');
    clock.advance(31_000);
    await otherClient(central).acquire(cluster.leaseNs, 'moved-on', 'cluster-west', 30);
    await cluster.deleteLease('moved-on');
    expect(await op.reconcile('moved-on')).toEqual({});
    expect(op.central.of('release')[0]?.error).toContain('server status 409');
    expect(await cluster.lease('moved-on')).toBeUndefined();
  });

  it('deletion: the Release is bounded at 2.5 s and the finalizer is kept when it times out', async () => {
    const hanging = await hangingServer();
    const { op } = await world();
    const stalled = createOperator(cluster, { clusterId: 'cluster-east', centralUrl: hanging.url });
    cleanups.push(() => stalled.stop());
    await created('slow-release');
    await op.reconcile('slow-release');
    await cluster.deleteLease('slow-release');
    const started = performance.now();
    expect(await stalled.reconcile('slow-release')).toEqual({ requeueAfter: 1_000 });
    const took = performance.now() - started;
    expect(took).toBeGreaterThanOrEqual(2_400);
    expect(took).toBeLessThan(4_000);
    expect(stalled.central.of('release')[0]?.error).toContain('timed out after 2500ms');
    expect((await cluster.mustLease('slow-release')).metadata.finalizers).toEqual([
      'berth.skaphos.io/lease-release',
    ]);
    // The real central server releases it.
    expect(await op.reconcile('slow-release')).toEqual({});
    expect(await cluster.lease('slow-release')).toBeUndefined();
  });

  it('7. an invalid spec calls no Acquire: Acquired=False/InvalidSpec with the exact message', async () => {
    const { op } = await world();
    await created('invalid', spec({ leaseName: 'invalid', ttlSeconds: 10, heartbeatIntervalSeconds: 10 }));
    expect(await op.reconcile('invalid')).toEqual({});
    expect(op.central.calls).toEqual([]);
    expect(findCondition((await cluster.mustLease('invalid')).status, 'Acquired')).toMatchObject({
      status: 'False',
      reason: 'InvalidSpec',
      message: 'spec.heartbeatIntervalSeconds must be less than spec.ttlSeconds',
      observedGeneration: 1,
    });
  });

  it('8. a target on a lease-only operator: Acquired=False/AdmissionRequired, no Acquire (TestLeaseOnlyDoesNotRequireAdmission)', async () => {
    const { op } = await world();
    await created(
      'with-target',
      spec({
        leaseName: 'with-target',
        target: { apiVersion: 'apps/v1', kind: 'Deployment', name: 'web' },
        acquireAction: { scale: { replicas: 2 } },
        releaseAction: { scale: { replicas: 0 } },
      }),
    );
    expect(await op.reconcile('with-target')).toEqual({});
    expect(op.central.calls).toEqual([]);
    expect(findCondition((await cluster.mustLease('with-target')).status, 'Acquired')).toMatchObject({
      status: 'False',
      reason: 'AdmissionRequired',
      message: ReconcileError.admissionDisabled,
    });
  });

  it('9. a central error: HeartbeatHealthy=False/AcquireFailed only, requeue 1 s; held stays held until its TTL', async () => {
    const { op, central, clock } = await world();
    await created('outage', spec({ leaseName: 'outage', ttlSeconds: 30, heartbeatIntervalSeconds: 10 }));
    await op.reconcile('outage');
    central.store.down = true;
    clock.advance(10_000);
    expect(await op.reconcile('outage')).toEqual({ requeueAfter: 1_000 });
    let lease = await cluster.mustLease('outage');
    expect(lease.status).toMatchObject({
      leaseState: 'held',
      fencingToken: 1,
      currentHolder: 'cluster-east',
    });
    expect(findCondition(lease.status, 'Acquired')).toMatchObject({ status: 'True', reason: 'Held' });
    expect(findCondition(lease.status, 'HeartbeatHealthy')).toMatchObject({
      status: 'False',
      reason: 'AcquireFailed',
      message: `acquire ${cluster.leaseNs}/outage: server status 500: internal error`,
    });
    // Still failing: nothing new to write (the request id is not part of the message).
    const rv = lease.metadata.resourceVersion;
    clock.advance(1_000);
    await op.reconcile('outage');
    expect((await cluster.mustLease('outage')).metadata.resourceVersion).toBe(rv);
    // The recorded expiry passes: no longer claimed.
    clock.advance(19_000);
    expect(await op.reconcile('outage')).toEqual({ requeueAfter: 1_000 });
    lease = await cluster.mustLease('outage');
    expect(lease.status).toMatchObject({ leaseState: 'waiting', fencingToken: 0, currentHolder: '' });
    expect(findCondition(lease.status, 'Acquired')).toMatchObject({ status: 'False', reason: 'Expired' });
    expect(await op.metric('berth_lease_held', { name: 'outage' })).toBe(0);
    // Back after the central expiry too: reclaimed with the next token.
    clock.advance(1_000);
    central.store.down = false;
    expect(await op.reconcile('outage')).toEqual({ requeueAfter: 10_000 });
    expect((await cluster.mustLease('outage')).status).toMatchObject({ leaseState: 'held', fencingToken: 2 });
    await op.recorder.flush();
    // The second Acquired joins the first one's series (client-go's isomorphic-event key).
    const events = await cluster.leaseEvents('outage');
    expect(events.map((e) => [e.type, e.reason, e.series?.count])).toEqual([
      ['Normal', 'Acquired', 2],
      ['Warning', 'AcquireFailed', undefined],
      ['Warning', 'LeaseLost', undefined],
    ]);
  });

  it('9. an unreachable central server is an AcquireFailed too', async () => {
    const { op, central } = await world();
    await created('unreachable');
    await central.stop();
    expect(await op.reconcile('unreachable')).toEqual({ requeueAfter: 1_000 });
    expect(findCondition((await cluster.mustLease('unreachable')).status, 'HeartbeatHealthy')).toMatchObject({
      status: 'False',
      reason: 'AcquireFailed',
      message: expect.stringContaining('ECONNREFUSED'),
    });
  });

  it('the Acquire is bounded by min(heartbeat, 2.5 s): a hung central server costs one heartbeat', async () => {
    const hanging = await hangingServer();
    const op = createOperator(cluster, {
      clusterId: 'cluster-east',
      centralUrl: hanging.url,
      clock: newClock(),
    });
    cleanups.push(() => op.stop());
    await created('hung', spec({ leaseName: 'hung', ttlSeconds: 3, heartbeatIntervalSeconds: 1 }));
    const started = performance.now();
    expect(await op.reconcile('hung')).toEqual({ requeueAfter: 1_000 });
    const took = performance.now() - started;
    expect(took).toBeGreaterThanOrEqual(950);
    expect(took).toBeLessThan(2_000);
    expect(findCondition((await cluster.mustLease('hung')).status, 'HeartbeatHealthy')).toMatchObject({
      reason: 'AcquireFailed',
      message: `acquire ${cluster.leaseNs}/hung: timed out after 1000ms`,
    });
  });

  it('10. a lease lost to another holder: waiting, token 0, the new holder, LeaseLost', async () => {
    const { op, central, clock } = await world();
    await created('lost');
    await op.reconcile('lost');
    // This cluster stops renewing; after the TTL the other one reclaims.
    clock.advance(31_000);
    expect(await otherClient(central).acquire(cluster.leaseNs, 'lost', 'cluster-west', 30)).toMatchObject({
      acquired: true,
      fencingToken: 2,
    });
    expect(await op.reconcile('lost')).toEqual({ requeueAfter: 10_000 });
    expect((await cluster.mustLease('lost')).status).toMatchObject({
      leaseState: 'waiting',
      fencingToken: 0,
      currentHolder: 'cluster-west',
    });
    expect(await op.metric('berth_lease_transitions_total', { name: 'lost', state: 'waiting' })).toBe(1);
    await op.recorder.flush();
    expect((await cluster.leaseEvents('lost')).map((e) => [e.type, e.reason, e.note])).toEqual([
      ['Normal', 'Acquired', 'acquired lease "lost" as "cluster-east" with fencing token 1'],
      ['Warning', 'LeaseLost', 'lease held by "cluster-west"'],
    ]);
  });

  it('12. --cluster-id overrides spec.holderIdentity; without it the spec holder is used', async () => {
    const { op, central, clock } = await world({ clusterId: '' });
    await created('fallback', spec({ leaseName: 'fallback', holderIdentity: 'worker-east-1' }));
    await op.reconcile('fallback');
    expect(op.central.of('acquire')[0]?.holder).toBe('worker-east-1');
    expect((await cluster.mustLease('fallback')).status?.currentHolder).toBe('worker-east-1');
    const east = createOperator(cluster, { clusterId: 'cluster-east', centralUrl: central.url, clock });
    cleanups.push(() => east.stop());
    await east.reconcile('fallback');
    expect(east.central.of('acquire')[0]?.holder).toBe('cluster-east');
    expect((await cluster.mustLease('fallback')).status).toMatchObject({
      leaseState: 'waiting',
      currentHolder: 'worker-east-1',
    });
  });

  it('13. the controller requires a lease client', () => {
    expect(
      () =>
        new BerthLeaseController({
          transport: new KubeTransport(cluster.t.kc),
          leaseClient: undefined,
          clusterIdentity: 'x',
          operatorNamespace: 'y',
        }),
    ).toThrow('BerthLeaseReconciler.LeaseClient is required');
  });

  it('14. a spec change stamps the new observedGeneration; lastTransitionTime stays while the status holds', async () => {
    const { op, clock } = await world();
    await created('generation');
    await op.reconcile('generation');
    const first = findCondition((await cluster.mustLease('generation')).status, 'Acquired');
    await cluster.custom.patchNamespacedCustomObject(
      { ...cluster.ref(), name: 'generation', body: { spec: { ttlSeconds: 40 } } },
      setHeaderOptions('Content-Type', PatchStrategy.MergePatch),
    );
    clock.advance(5_000);
    await op.reconcile('generation');
    const lease = await cluster.mustLease('generation');
    expect(lease.metadata.generation).toBe(2);
    expect(lease.status?.observedGeneration).toBe(2);
    expect(lease.status?.conditions?.map((c) => c.observedGeneration)).toEqual([2, 2]);
    expect(findCondition(lease.status, 'Acquired')?.lastTransitionTime).toBe(first?.lastTransitionTime);
    expect(lease.status?.expiresAt).toBe(formatTime(clock.now() + 40_000));
  });

  it('a status write from a stale copy fails with 409 and changes nothing', async () => {
    const { op, central, clock } = await world();
    await created('stale');
    // Someone else writes the status between the reconciler's read and its write.
    const transport = new KubeTransport(cluster.operatorKubeConfig());
    cleanups.push(() => transport.close());
    const api = kubeBerthLeaseApi(transport);
    const racing = new BerthLeaseController({
      transport,
      leaseClient: op.central,
      clusterIdentity: 'cluster-east',
      operatorNamespace: cluster.operatorNs,
      clock,
      api: {
        ...api,
        async get(namespace, name, signal) {
          const lease = await api.get(namespace, name, signal);
          if (lease !== undefined) await api.updateStatus(lease, { ...lease.status, tenant: 'someone-else' });
          return lease;
        },
      },
    });
    const ctx = {
      signal: new AbortController().signal,
      log: createLogger({ level: 'silent' }),
      reconcileID: 't',
      namespace: cluster.leaseNs,
      name: 'stale',
    };
    await expect(racing.reconciler.reconcile(`${cluster.leaseNs}/stale`, ctx)).rejects.toMatchObject({
      code: 409,
    });
    expect((await cluster.mustLease('stale')).status).toEqual({ tenant: 'someone-else' });
    expect(central.server.manager).toBeDefined();
  });

  it('writes the finalizer with a patch, never a full update of the object (RBAC grants no update)', async () => {
    const { op } = await world();
    const updates = cluster.proxy.inject({
      user: cluster.operatorUser,
      resource: 'berthleases',
      subresource: '',
      verbs: ['update'],
    });
    const patches = cluster.proxy.inject({
      user: cluster.operatorUser,
      resource: 'berthleases',
      subresource: '',
      verbs: ['patch'],
    });
    cleanups.push(async () => {
      updates.remove();
      patches.remove();
    });
    await cluster.createLease('rbac', spec({ leaseName: 'rbac' }));
    cleanups.push(() => forceDelete('rbac'));
    await op.reconcile('rbac');
    expect((await cluster.mustLease('rbac')).status?.leaseState).toBe('held');
    await cluster.deleteLease('rbac');
    await op.reconcile('rbac');
    expect(await cluster.lease('rbac')).toBeUndefined();
    expect(updates.hits()).toBe(0);
    expect(patches.hits()).toBe(2);
  });
});

/** An HTTPS server that accepts requests and never answers. */
async function hangingServer(): Promise<{ url: string }> {
  const tls = await centralTls();
  const server: Server = createServer({ cert: tls.cert, key: tls.key }, () => {});
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  cleanups.push(
    () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  );
  return { url: `https://127.0.0.1:${(server.address() as AddressInfo).port}` };
}
