// The BerthLease controller under Kubernetes API faults (issue #10): 500, 503, 409, 410 and reset
// connections on its reads and writes, for lease-only leases and managed Deployments (scale, Pod
// registration and gate removal, stop and drain), a real 409 from a concurrent writer, 429 with
// Retry-After, and reads and writes slower than the 5 s reconcile deadline. Each fault stays until the
// controller has hit it several times (a reconciler that gave up after an error fails here), and once it
// is gone the status, the Deployment and its Pods converge to what they are without faults. Nothing may
// crash or leave an unhandled rejection behind.
import type { V1Pod } from '@kubernetes/client-node';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { type BerthLease, FINALIZER, LOCAL_TIMEOUT_MS } from '../../../src/berth/api.ts';
import type { LeaseClient } from '../../../src/berth/leaseclient.ts';
import { ManualClock } from '../../../src/kube/clock.ts';
import { mergePatch } from '../../helpers/api.ts';
import type { FaultRule } from '../../helpers/api-proxy.ts';
import { eventually } from '../../helpers/eventually.ts';
import { type Central, spec, startCentral } from '../berth/harness.ts';
import {
  createManagedOperator,
  deploymentLease,
  isGated,
  isRunning,
  ManagedCluster,
  type ManagedOperator,
  NS,
  OPERATOR_USER,
  until,
} from '../managed/harness.ts';
import { advanceUntil, collectUncaught } from './api-faults-harness.ts';

const uncaught = collectUncaught();
let cluster: ManagedCluster;
let central: Central;

beforeAll(async () => {
  [cluster, central] = await Promise.all([ManagedCluster.start('east'), startCentral()]);
});
afterEach(() => {
  cluster.proxy.clear();
  expect(uncaught.errors).toEqual([]);
});
afterAll(async () => {
  uncaught.dispose();
  await central?.stop();
  await cluster?.stop();
});

const CLUSTER_ID = 'cluster-east';
/** Failed attempts each fault must see before it is lifted. */
const HITS = 3;
const CONVERGE = { timeoutMs: 15_000, intervalMs: 25 };

/** The workload's two Pods, once both run ungated. */
const twoRunning = (name: string): Promise<V1Pod[]> =>
  until(async () => {
    const list = await cluster.pods(`app=${name}`);
    return list.length === 2 && list.every((p) => !isGated(p) && isRunning(p)) ? list : undefined;
  }, CONVERGE);

function operator(o: { clock?: ManualClock } = {}): {
  op: ManagedOperator;
  /** Runs once, just before the next Acquire of the named lease (a concurrent writer's slot). */
  beforeAcquire: Map<string, () => Promise<void>>;
} {
  const beforeAcquire = new Map<string, () => Promise<void>>();
  const wrap = (inner: LeaseClient): LeaseClient => ({
    async acquire(namespace, name, ...rest) {
      const hook = beforeAcquire.get(name);
      beforeAcquire.delete(name);
      await hook?.();
      return inner.acquire(namespace, name, ...rest);
    },
    renew: (...args) => inner.renew(...args),
    release: (...args) => inner.release(...args),
  });
  const op = createManagedOperator(cluster, {
    clusterId: CLUSTER_ID,
    centralUrl: central.url,
    leaseClient: wrap,
    ...(o.clock ? { clock: o.clock } : {}),
  });
  return { op, beforeAcquire };
}

/** The operator's requests to one object. */
const at = (resource: string, name: string, rule: FaultRule): FaultRule => ({
  resource,
  name,
  user: OPERATOR_USER,
  ...rule,
});

async function held(name: string): Promise<BerthLease | undefined> {
  const lease = await cluster.lease(name);
  return lease?.status?.leaseState === 'held' &&
    lease.status.currentHolder === CLUSTER_ID &&
    (lease.status.fencingToken ?? 0) > 0
    ? lease
    : undefined;
}

async function removeLease(name: string): Promise<void> {
  await cluster.deleteLease(name).catch(() => {});
  await eventually(async () => (await cluster.lease(name)) === undefined, CONVERGE);
}

interface Row {
  name: string;
  /** Verbs and subresource of the operator's requests that fail. */
  on: Pick<FaultRule, 'verbs' | 'subresource'>;
  effect: FaultRule;
}

const effects: Array<{ name: string; effect: FaultRule }> = [
  { name: '500', effect: { status: 500 } },
  { name: '503', effect: { status: 503 } },
  { name: '409', effect: { status: 409 } },
  { name: '410', effect: { status: 410 } },
  { name: 'a reset connection', effect: { resetConnection: true } },
];
// A new lease's first request is the finalizer's PATCH (the cache has the lease, so no GET); one created
// with the finalizer, as if already seen, starts each reconcile with the GET.
const leaseRequests: Array<{ name: string; on: Row['on']; finalizers: string[] }> = [
  { name: 'GET', on: { verbs: ['get'] }, finalizers: [FINALIZER] },
  { name: 'finalizer PATCH', on: { verbs: ['patch'] }, finalizers: [] },
  { name: 'status PUT', on: { verbs: ['update'], subresource: 'status' }, finalizers: [] },
];
const leaseRows: Array<Row & { finalizers: string[] }> = leaseRequests.flatMap((r) =>
  effects.map((e) => ({
    name: `${e.name} on the ${r.name}`,
    on: r.on,
    effect: e.effect,
    finalizers: r.finalizers,
  })),
);

describe('with the controller running (real clock)', () => {
  let op: ManagedOperator;
  let beforeAcquire: Map<string, () => Promise<void>>;
  let index = 0;

  beforeAll(async () => {
    ({ op, beforeAcquire } = operator());
    await op.start();
  });
  afterAll(async () => {
    await op?.stop();
  });

  it.each(leaseRows)('lease-only: $name, then held', async ({ on, effect, finalizers }) => {
    const name = `only-${++index}`;
    const failing = cluster.proxy.inject(at('berthleases', name, { ...on, ...effect }));
    await cluster.createLease(name, spec({ leaseName: name }), NS, finalizers);
    // A reset write may have been applied before its answer was lost: then there is nothing to retry.
    const write = on.verbs?.[0] !== 'get';
    await eventually(() => failing.hits() >= (write && effect.resetConnection ? 1 : HITS), CONVERGE);
    failing.remove();
    const lease = await until(() => held(name), CONVERGE);
    expect(lease.metadata.finalizers).toEqual(['berth.skaphos.io/lease-release']);
    expect(lease.status?.conditions?.find((c) => c.type === 'Acquired')).toMatchObject({ status: 'True' });
    await removeLease(name);
  });

  it('a real 409 on the status write (someone else wrote the lease meanwhile) is retried from a fresh read', async () => {
    const name = 'raced';
    const writes = cluster.proxy.inject(
      at('berthleases', name, { verbs: ['update'], subresource: 'status' }),
    );
    const errors = (await op.metric('controller_runtime_reconcile_errors_total')) ?? 0;
    // Between the reconciler's read and its status write, another client changes the object.
    beforeAcquire.set(name, async () => {
      await cluster.custom.patchNamespacedCustomObject(
        { ...cluster.ref(), name, body: { metadata: { labels: { team: 'payments' } } } },
        mergePatch,
      );
    });
    await cluster.createLease(name, spec({ leaseName: name }));
    const lease = await until(() => held(name), CONVERGE);
    expect(beforeAcquire.has(name)).toBe(false);
    // The first write conflicted; a later one, made from the changed object, kept the change.
    expect(writes.hits()).toBeGreaterThanOrEqual(2);
    expect((await op.metric('controller_runtime_reconcile_errors_total')) ?? 0).toBeGreaterThan(errors);
    expect(lease.metadata.labels).toMatchObject({ team: 'payments' });
    expect(lease.status?.fencingToken).toBe(1);
    await removeLease(name);
  });

  const managedRows: Array<{ name: string; resource: string; rule: FaultRule }> = [
    {
      name: '503 on scaling the Deployment',
      resource: 'deployments',
      rule: { verbs: ['patch'], status: 503 },
    },
    { name: '409 on lifting the Pod gates', resource: 'pods', rule: { verbs: ['patch'], status: 409 } },
    {
      name: 'reset connections on listing the Pods',
      resource: 'pods',
      rule: { verbs: ['list'], resetConnection: true },
    },
    {
      name: '500 on registering the Pods in the lease status',
      resource: 'berthleases',
      rule: { verbs: ['update'], subresource: 'status', status: 500 },
    },
  ];

  it.each(managedRows)(
    'managed Deployment: $name, then scaled, every Pod registered and running, and drained on delete',
    async ({ resource, rule }) => {
      const name = `managed-${++index}`;
      await cluster.createLease(name, deploymentLease(name, 2));
      await eventually(
        async () => (await cluster.mustLease(name)).metadata.finalizers?.length === 1,
        CONVERGE,
      );
      // Injected once the target is admitted: the webhook reads and writes as the operator too.
      await cluster.createDeployment(name, 0);
      const scoped: FaultRule = { user: OPERATOR_USER, ...rule, resource, namespace: NS };
      const fault = cluster.proxy.inject(resource === 'berthleases' ? { ...scoped, name } : scoped);
      await eventually(() => fault.hits() >= HITS, CONVERGE);
      fault.remove();

      const pods = await twoRunning(name);
      expect(await cluster.replicas(name)).toBe(2);
      const lease = await until(async () => {
        const l = await held(name);
        return l?.status?.workload?.pods?.length === 2 ? l : undefined;
      }, CONVERGE);
      expect(lease.status?.workload).toMatchObject({ phase: 'Active', holder: CLUSTER_ID, token: 1 });
      expect(lease.status?.workload?.pods?.map((p) => p.uid).sort()).toEqual(
        pods.map((p) => p.metadata?.uid).sort(),
      );

      // Deleting under a fault on the drain: stopped, drained and released all the same.
      const drainFault = cluster.proxy.inject({
        user: OPERATOR_USER,
        verbs: ['delete'],
        resource: 'pods',
        namespace: NS,
        status: 500,
      });
      await cluster.deleteLease(name);
      await eventually(() => drainFault.hits() >= HITS, CONVERGE);
      drainFault.remove();
      await eventually(async () => (await cluster.lease(name)) === undefined, CONVERGE);
      expect(await cluster.replicas(name)).toBe(0);
      expect(await cluster.pods(`app=${name}`)).toEqual([]);
      expect(op.central.of('release').filter((c) => c.name === name && c.error === undefined)).toHaveLength(
        1,
      );
      await cluster.apps.deleteNamespacedDeployment({ namespace: NS, name });
    },
  );

  it('managed Deployment running: reads of the target fail during a scale change, then it runs at the new scale', async () => {
    const name = 'rescaled';
    await cluster.createLease(name, deploymentLease(name, 1));
    await eventually(async () => (await cluster.mustLease(name)).metadata.finalizers?.length === 1, CONVERGE);
    await cluster.createDeployment(name, 0);
    await eventually(async () => (await held(name))?.status?.workload?.pods?.length === 1, CONVERGE);
    const fault = cluster.proxy.inject({
      user: OPERATOR_USER,
      verbs: ['get'],
      resource: 'deployments',
      name,
      status: 500,
    });
    await cluster.custom.patchNamespacedCustomObject(
      { ...cluster.ref(), name, body: { spec: { acquireAction: { scale: { replicas: 2 } } } } },
      mergePatch,
    );
    await eventually(() => fault.hits() >= HITS, CONVERGE);
    fault.remove();
    const pods = await twoRunning(name);
    const lease = await until(async () => {
      const l = await held(name);
      return l?.status?.workload?.pods?.length === 2 ? l : undefined;
    }, CONVERGE);
    expect(lease.status?.workload?.pods?.map((p) => p.uid).sort()).toEqual(
      pods.map((p) => p.metadata?.uid).sort(),
    );
    await cluster.deleteLease(name);
    await eventually(async () => (await cluster.lease(name)) === undefined, CONVERGE);
    await cluster.apps.deleteNamespacedDeployment({ namespace: NS, name });
  });
});

describe('with the controller on an injected clock', () => {
  let clock: ManualClock;
  let op: ManagedOperator;

  beforeAll(async () => {
    clock = new ManualClock(Math.floor(Date.now() / 1000) * 1000);
    ({ op } = operator({ clock }));
    await op.start();
  });
  afterAll(async () => {
    await op?.stop();
  });

  const errors = async (): Promise<number> =>
    (await op.metric('controller_runtime_reconcile_total', { controller: 'berthlease', result: 'error' })) ??
    0;
  const adds = async (): Promise<number> =>
    (await op.metric('workqueue_adds_total', { name: 'berthlease' })) ?? 0;

  // A new lease's first request is the finalizer's PATCH (no GET, the cache has it); a lease created with
  // the finalizer, as if already seen, starts every reconcile with the GET.
  const FAULTED = [
    { name: 'status PUT', on: { verbs: ['update'], subresource: 'status' }, finalizers: [] },
    { name: 'GET', on: { verbs: ['get'] }, finalizers: [FINALIZER] },
    { name: 'finalizer PATCH', on: { verbs: ['patch'] }, finalizers: [] },
  ];

  it.each(FAULTED)(
    '429 with Retry-After on the $name: not retried before the server said',
    async ({ on, finalizers }) => {
      const name = `throttled-${on.verbs[0]}`;
      const retryAfterSeconds = 2;
      const failedBefore = await errors();
      const fault = cluster.proxy.inject(
        at('berthleases', name, { ...on, status: 429, retryAfterSeconds, times: 1 }),
      );
      await cluster.createLease(name, spec({ leaseName: name }), NS, finalizers);
      await eventually(async () => fault.hits() === 1 && (await errors()) > failedBefore, CONVERGE);
      const queued = await adds();
      // The retry is queued no sooner than Retry-After (the rate limiter alone would retry after 5 ms).
      clock.advance(retryAfterSeconds * 1000 - 1);
      expect(await adds()).toBe(queued);
      clock.advance(1);
      expect(await adds()).toBe(queued + 1);
      await eventually(() => held(name), CONVERGE);
      expect(fault.hits()).toBe(1);
      await removeLease(name);
    },
  );

  it.each(FAULTED)(
    'a $name slower than the reconcile deadline: cut at 5 s, retried, then held',
    async ({ on, finalizers }) => {
      const name = `slow-${on.verbs[0]}`;
      const timeouts = (await op.metric('controller_runtime_reconcile_timeouts_total')) ?? 0;
      // In place before the lease exists: its reconciles follow its watch events within milliseconds, so
      // a fault injected later could come after the first status write, and a reconcile with nothing new
      // to write makes none.
      const stalled = cluster.proxy.inject(at('berthleases', name, { ...on, delayMs: 120_000, times: 1 }));
      await cluster.createLease(name, spec({ leaseName: name }), NS, finalizers);
      await eventually(() => stalled.hits() === 1, CONVERGE);
      clock.advance(LOCAL_TIMEOUT_MS);
      await eventually(
        async () => ((await op.metric('controller_runtime_reconcile_timeouts_total')) ?? 0) > timeouts,
        CONVERGE,
      );
      // Cut off, the reconcile is retried from a fresh read until the held status is written.
      await advanceUntil(clock, 10, () => held(name), CONVERGE);
      await removeLease(name);
    },
  );
});
