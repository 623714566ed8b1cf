// The BerthLease controller as it runs: informer events -> queue -> reconcile, heartbeats as requeues,
// the watch events of its own status writes dropped (one Acquire per heartbeat, not two), foreign
// changes acted on at once, deletion through the watch, and the 5 s bound of every reconcile.
import { PatchStrategy, setHeaderOptions } from '@kubernetes/client-node';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { FINALIZER, LOCAL_TIMEOUT_MS } from '../../../src/berth/api.ts';
import { ManualClock } from '../../../src/kube/clock.ts';
import { eventually } from '../../helpers/eventually.ts';
import {
  type Central,
  Cluster,
  createOperator,
  LEASE_NS,
  OPERATOR_USER,
  type Operator,
  spec,
  startCentral,
} from './harness.ts';

let cluster: Cluster;
let central: Central;
const running: Operator[] = [];

beforeAll(async () => {
  cluster = await Cluster.start('east');
  central = await startCentral();
});
afterEach(async () => {
  for (const op of running.splice(0)) await op.stop();
  cluster.proxy.clear();
  // Whatever a failed test left behind must not reach the next test's operator.
  const list = (await cluster.custom.listNamespacedCustomObject({ ...cluster.ref() })) as {
    items: Array<{ metadata: { name: string } }>;
  };
  for (const { metadata } of list.items) {
    await cluster.custom.patchNamespacedCustomObject(
      { ...cluster.ref(), name: metadata.name, body: { metadata: { finalizers: [] } } },
      merge,
    );
    await cluster.deleteLease(metadata.name).catch(() => {});
  }
});
afterAll(async () => {
  await central?.stop();
  await cluster?.stop();
});

async function start(clock?: ManualClock): Promise<Operator> {
  const op = createOperator(cluster, {
    clusterId: 'cluster-east',
    centralUrl: central.url,
    ...(clock === undefined ? {} : { clock }),
  });
  running.push(op);
  await op.start();
  return op;
}

const merge = setHeaderOptions('Content-Type', PatchStrategy.MergePatch);

describe('BerthLease controller', () => {
  it('takes a new lease through the watch: finalizer, held, then exactly one Acquire per heartbeat', async () => {
    const op = await start();
    const statusWrites = cluster.proxy.inject({
      user: OPERATOR_USER,
      resource: 'berthleases',
      subresource: 'status',
      verbs: ['update'],
    });
    await cluster.createLease(
      'beat',
      spec({ leaseName: 'beat', ttlSeconds: 10, heartbeatIntervalSeconds: 1 }),
    );
    await eventually(async () => (await cluster.mustLease('beat')).status?.leaseState === 'held', {
      timeoutMs: 5_000,
    });
    expect((await cluster.mustLease('beat')).metadata.finalizers).toEqual(['berth.skaphos.io/lease-release']);
    // One reconcile from the informer's copy: the guarded finalizer PATCH, no GET before it, then the held
    // status.
    const own = cluster.proxy.records.filter(
      (r) => r.user === OPERATOR_USER && r.resource === 'berthleases' && r.name === 'beat',
    );
    expect(own.slice(0, 2).map((r) => [r.verb, r.subresource])).toEqual([
      ['patch', ''],
      ['update', 'status'],
    ]);

    // Five more heartbeats. Had the watch events of its own status writes come back as reconciles,
    // there would be two Acquires per heartbeat and these would take about half as long.
    const first = op.central.of('acquire').length;
    const started = performance.now();
    const writesBefore = statusWrites.hits();
    await eventually(() => op.central.of('acquire').length >= first + 5, { timeoutMs: 10_000 });
    const elapsed = performance.now() - started;
    expect(elapsed).toBeGreaterThan(3_800);
    // Renewed in place every time (a slow machine may time an Acquire out at its 1 s bound).
    const tokens = op.central
      .of('acquire')
      .filter((c) => c.result !== undefined || c.error !== undefined)
      .map((c) => c.result?.fencingToken ?? c.error);
    expect(tokens.filter((t) => t !== 1 && !String(t).includes('timed out'))).toEqual([]);
    // lastHeartbeat has second precision: at most one status write per heartbeat.
    expect(statusWrites.hits() - writesBefore).toBeLessThanOrEqual(6);
    const held = await op.metric('berth_lease_held', { namespace: LEASE_NS, name: 'beat' });
    expect(held).toBe(1);

    await cluster.deleteLease('beat');
    await eventually(async () => (await cluster.lease('beat')) === undefined, { timeoutMs: 5_000 });
    expect(op.central.of('release').map((c) => [c.holder, c.fencingToken, c.error])).toEqual([
      ['cluster-east', 1, undefined],
    ]);
    // Forgotten once the finalizer patch's answer is back (through the proxy), which may be a moment
    // after this test's own GET already finds the object gone.
    await eventually(async () => (await op.metric('berth_lease_held', { name: 'beat' })) === undefined);
  });

  it('acts at once on a change by someone else, between heartbeats', async () => {
    const op = await start();
    await cluster.createLease(
      'slow',
      spec({ leaseName: 'slow', ttlSeconds: 60, heartbeatIntervalSeconds: 20 }),
    );
    await eventually(async () => (await cluster.mustLease('slow')).status?.leaseState === 'held', {
      timeoutMs: 5_000,
    });
    const before = op.central.of('acquire').length;
    // A spec change: the new TTL is used by the Acquire it triggers, long before the next heartbeat.
    await cluster.custom.patchNamespacedCustomObject(
      { ...cluster.ref(), name: 'slow', body: { spec: { ttlSeconds: 90 } } },
      merge,
    );
    await eventually(async () => (await cluster.mustLease('slow')).status?.observedGeneration === 2, {
      timeoutMs: 3_000,
    });
    expect(op.central.of('acquire').length).toBe(before + 1);
    await cluster.deleteLease('slow');
    await eventually(async () => (await cluster.lease('slow')) === undefined, { timeoutMs: 5_000 });
  });

  it('bounds every reconcile at 5 s', async () => {
    const clock = new ManualClock(Math.floor(Date.now() / 1000) * 1000);
    const op = await start(clock);
    const stalled = cluster.proxy.inject({
      user: OPERATOR_USER,
      resource: 'berthleases',
      verbs: ['get'],
      name: 'stalled',
      delayMs: 8_000,
      times: 1,
    });
    // With the finalizer, as if already seen: the reconcile starts with the GET (a new lease's first
    // request is the finalizer's PATCH).
    await cluster.createLease('stalled', spec({ leaseName: 'stalled' }), [FINALIZER]);
    await eventually(() => stalled.hits() === 1);
    clock.advance(LOCAL_TIMEOUT_MS - 1);
    expect(await op.metric('controller_runtime_reconcile_timeouts_total', { controller: 'berthlease' })).toBe(
      0,
    );
    clock.advance(1);
    await eventually(async () => (await op.metric('controller_runtime_reconcile_timeouts_total')) === 1);
    expect(await op.metric('controller_runtime_reconcile_total', { result: 'error' })).toBe(1);
    // The retry (after the rate limiter's backoff on the same clock; no fault now) goes through.
    await eventually(async () => {
      clock.advance(10);
      return (await cluster.mustLease('stalled')).status?.leaseState === 'held';
    });
    await cluster.custom.patchNamespacedCustomObject(
      { ...cluster.ref(), name: 'stalled', body: { metadata: { finalizers: [] } } },
      merge,
    );
    await cluster.deleteLease('stalled');
  });
});
