// Central lease server faults (issue 10): the operator reaches the real embedded central server through a
// fault-injecting front (test/helpers/central-faults.ts) that is down, resets connections, is slower than
// the Acquire budget, answers 500, garbage JSON, a fencing token that went backwards, or a 200 naming a
// wrong holder. For each fault, with a lease held (lease-only and managed), on an injected clock:
//   - the lease is kept only until its local deadline, with HeartbeatHealthy=False/AcquireFailed and the
//     exact error (docs/behaviour.md §2.3 step 8, §2.5); a malformed answer is never trusted
//     (`invalid central ownership response`: nothing it says is recorded, no deadline is extended);
//   - lease-only: past its expiry the status stops claiming the lease (Acquired=False/Expired);
//   - managed: the workload runs up to the deadline and is stopped at it (scaled to 0, Pods gone);
//   - once the fault is removed the lease is held again (and the workload runs again).
// An invariant monitor watches the managed cluster throughout: no fencing token ever goes backwards and
// no Pod runs unregistered.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type BerthLease, DEFAULT_STOP_LEAD_MS, FINALIZER } from '../../../src/berth/api.ts';
import { findCondition, formatTime } from '../../../src/berth/status.ts';
import { ManualClock } from '../../../src/kube/clock.ts';
import { type CentralFault, CentralFaultFront } from '../../helpers/central-faults.ts';
import { eventually } from '../../helpers/eventually.ts';
import { InvariantMonitor } from '../../helpers/invariants.ts';
import {
  type Central,
  Cluster,
  createOperator,
  LEASE_NS,
  spec as leaseOnlySpec,
  type Operator,
  startCentral,
} from '../berth/harness.ts';
import {
  createManagedOperator,
  deploymentLease,
  isGated,
  isRunning,
  ManagedCluster,
  type ManagedOperator,
  NS,
  until,
} from '../managed/harness.ts';

/** Whole-second start: status times are whole seconds. */
const newClock = (): ManualClock => new ManualClock(Math.floor(Date.now() / 1000) * 1000);

/** The heartbeat bounds each Acquire (min(heartbeat, 2.5 s)): the slow fault costs 1 s per call. */
const HEARTBEAT_S = 1;
const TTL_S = 30;
/** Tokens before the test's own acquisition, so a token one below the held one is still positive. */
const EARLIER_TOKEN = 4;

interface FaultCase {
  title: string;
  fault: CentralFault;
  /** HeartbeatHealthy=False/AcquireFailed message while the fault lasts. */
  message: (name: string, front: CentralFaultFront) => string;
  /** The calls still reach the central server (which then renews the lease in place). */
  forwards?: boolean;
  /** A Release gets a 200 while the fault lasts (forwarded, or a garbage body the release never reads). */
  releaseAnswered?: boolean;
}

const acquireError = (name: string, detail: string): string => `acquire ${LEASE_NS}/${name}: ${detail}`;
const INVALID = 'invalid central ownership response';

const CASES: FaultCase[] = [
  {
    title: 'down (connection refused)',
    fault: { kind: 'down' },
    message: (n, f) => acquireError(n, `connect ECONNREFUSED 127.0.0.1:${new URL(f.url).port}`),
  },
  { title: 'reset', fault: { kind: 'reset' }, message: (n) => acquireError(n, 'ECONNRESET: socket hang up') },
  {
    title: 'slow (beyond the Acquire budget)',
    fault: { kind: 'slow' },
    message: (n) => acquireError(n, `timed out after ${HEARTBEAT_S * 1000}ms`),
  },
  {
    title: '500',
    fault: { kind: 'status', status: 500 },
    message: (n) => acquireError(n, 'server status 500: internal error'),
  },
  {
    title: 'garbage JSON',
    fault: { kind: 'garbage' },
    message: (n) => acquireError(n, 'response is not JSON'),
    releaseAnswered: true,
  },
  {
    title: 'a fencing token that went backwards',
    fault: { kind: 'token-backwards' },
    message: () => INVALID,
    forwards: true,
    releaseAnswered: true,
  },
  {
    title: 'a 200 naming a wrong holder',
    fault: { kind: 'wrong-holder', holder: 'cluster-west' },
    message: () => INVALID,
    forwards: true,
    releaseAnswered: true,
  },
];

const slug = (c: FaultCase): string => c.fault.kind;

/** Gives the central key a history, so the first acquisition gets token EARLIER_TOKEN + 1. */
async function seedToken(central: Central, namespace: string, name: string): Promise<void> {
  const now = Date.now();
  await central.store.inner.put(0, {
    key: { namespace, name },
    holder: '',
    ttlMs: 0,
    acquiredAt: now,
    renewedAt: now,
    fencingToken: EARLIER_TOKEN,
    version: 0,
  });
}

/** The fault applied to the calls (a downed port is never reached: nothing to count). */
function expectReached(front: CentralFaultFront): void {
  if (front.fault?.kind !== 'down') expect(front.hits()).toBeGreaterThan(0);
}

const condition = (lease: BerthLease, type: string) => findCondition(lease.status, type);

function expectHeld(lease: BerthLease, token: number): void {
  expect(lease.status).toMatchObject({
    leaseState: 'held',
    fencingToken: token,
    currentHolder: 'cluster-east',
  });
  expect(condition(lease, 'Acquired')).toMatchObject({
    status: 'True',
    reason: 'Held',
    message: `lease held with fencing token ${token}`,
  });
  expect(condition(lease, 'HeartbeatHealthy')).toMatchObject({
    status: 'True',
    reason: 'Heartbeating',
    message: 'lease renewed',
  });
}

function expectAcquireFailed(lease: BerthLease, message: string): void {
  expect(condition(lease, 'HeartbeatHealthy')).toMatchObject({
    status: 'False',
    reason: 'AcquireFailed',
    message,
  });
}

describe('lease-only: a held lease under central faults', () => {
  let cluster: Cluster;

  beforeAll(async () => {
    cluster = await Cluster.start('east');
  }, 60_000);
  afterAll(async () => {
    await cluster?.stop();
  });

  it.each(CASES)('$title', async (c) => {
    const name = `lo-${slug(c)}`;
    const clock = newClock();
    const central = await startCentral(clock);
    const front = await CentralFaultFront.start(central.url);
    const op: Operator = createOperator(cluster, { clusterId: 'cluster-east', centralUrl: front.url, clock });
    try {
      await seedToken(central, LEASE_NS, name);
      await cluster.createLease(
        name,
        leaseOnlySpec({ leaseName: name, ttlSeconds: TTL_S, heartbeatIntervalSeconds: HEARTBEAT_S }),
      );
      const token = EARLIER_TOKEN + 1;
      // The first pass adds the finalizer and acquires.
      expect(await op.reconcile(name)).toEqual({ requeueAfter: HEARTBEAT_S * 1000 });
      const held = await cluster.mustLease(name);
      expectHeld(held, token);
      const expiresAt = held.status?.expiresAt;
      expect(expiresAt).toBe(formatTime(clock.now() + TTL_S * 1000));

      await front.set(c.fault);
      clock.advance(10_000);
      // Within the expiry: still held, only HeartbeatHealthy changes; retried within 1 s.
      expect(await op.reconcile(name)).toEqual({ requeueAfter: 1_000 });
      expectReached(front);
      const during = await cluster.mustLease(name);
      expect(during.status).toMatchObject({ leaseState: 'held', fencingToken: token, expiresAt });
      expect(condition(during, 'Acquired')).toMatchObject({ status: 'True', reason: 'Held' });
      expectAcquireFailed(during, c.message(name, front));

      // Past the expiry the status no longer claims the lease.
      clock.advance(TTL_S * 1000 - 10_000 + 1_000);
      await op.reconcile(name);
      const expired = await cluster.mustLease(name);
      expect(expired.status).toMatchObject({ leaseState: 'waiting', fencingToken: 0, currentHolder: '' });
      expect(condition(expired, 'Acquired')).toMatchObject({
        status: 'False',
        reason: 'Expired',
        message: `lease expired at ${expiresAt} without renewal`,
      });
      expectAcquireFailed(expired, c.message(name, front));

      // Healthy again: reacquired; with the next token, unless the calls the front let through kept
      // renewing the central lease in place.
      await front.clear();
      expect(await op.reconcile(name)).toEqual({ requeueAfter: HEARTBEAT_S * 1000 });
      expectHeld(await cluster.mustLease(name), c.forwards ? token : token + 1);
    } finally {
      await op.stop();
      await front.stop();
      await central.stop();
    }
  });
});

describe('managed: a running workload under central faults', () => {
  let cluster: ManagedCluster;
  let monitor: InvariantMonitor;

  beforeAll(async () => {
    cluster = await ManagedCluster.start('east');
    monitor = await InvariantMonitor.start([{ name: 'east', kc: cluster.t.kc }]);
  }, 60_000);
  afterAll(async () => {
    await monitor?.stop();
    await cluster?.stop();
  });

  const podsOf = (name: string) => cluster.pods(`app=${name}`);

  /** Reconciles until `n` Pods run ungated. */
  const permitted = (op: ManagedOperator, name: string, n: number) =>
    until(
      async () => {
        await op.reconcile(name);
        const pods = await podsOf(name);
        return pods.length === n && pods.every((p) => !isGated(p) && isRunning(p)) ? pods : undefined;
      },
      { timeoutMs: 15_000, intervalMs: 50 },
    );

  it.each(CASES)(
    '$title',
    async (c) => {
      const name = `m-${slug(c)}`;
      const clock = newClock();
      const central = await startCentral(clock);
      const front = await CentralFaultFront.start(central.url);
      const op = createManagedOperator(cluster, { clusterId: 'cluster-east', centralUrl: front.url, clock });
      try {
        await seedToken(central, NS, name);
        // As if a first reconcile had added the finalizer; the target comes after the lease.
        await cluster.createLease(
          name,
          deploymentLease(name, 2, { ttlSeconds: TTL_S, heartbeatIntervalSeconds: HEARTBEAT_S }),
          NS,
          [FINALIZER],
        );
        await cluster.createDeployment(name, 0);
        await eventually(async () => !!(await cluster.mustLease(name)).status?.workload?.targetUID);
        await permitted(op, name, 2);
        const token = EARLIER_TOKEN + 1;
        const held = await cluster.mustLease(name);
        expectHeld(held, token);
        const deadline = Date.parse(held.status?.workload?.deadline ?? '');
        expect(deadline).toBe(clock.now() - (clock.now() % 1000) + TTL_S * 1000);

        await front.set(c.fault);
        // Up to the activation's end (the stop lead before the deadline) the workload keeps running; each
        // retry is due before that end.
        const end = deadline - DEFAULT_STOP_LEAD_MS;
        clock.advance(end - 1_500 - clock.now());
        expect(await op.reconcile(name)).toEqual({ requeueAfter: 1_000 });
        expectReached(front);
        const during = await cluster.mustLease(name);
        expect(during.status?.workload).toMatchObject({
          phase: 'Active',
          token,
          deadline: formatTime(deadline),
        });
        expectAcquireFailed(during, c.message(name, front));
        expect(await cluster.replicas(name)).toBe(2);
        expect((await podsOf(name)).filter(isRunning)).toHaveLength(2);
        clock.advance(1_000);
        expect((await op.reconcile(name)).requeueAfter).toBe(500);
        expect(await cluster.replicas(name)).toBe(2);

        // At the activation's end: Stopping is committed, the Deployment scaled to 0, the Pods deleted.
        clock.advance(end - clock.now());
        await op.reconcile(name);
        const stopping = await cluster.mustLease(name);
        expect(stopping.status?.workload?.phase).toBe('Stopping');
        expect(condition(stopping, 'Acquired')).toMatchObject({
          status: 'False',
          reason: 'Stopping',
          message: 'waiting for managed Pods to terminate',
        });
        expect(await cluster.replicas(name)).toBe(0);
        // Where the release is answered during the fault, the stop completes before the fault is removed:
        // waiting for the Pods alone would race the reconcile that observes them gone and releases.
        const stopDone = async (): Promise<boolean> =>
          !c.releaseAnswered || condition(await cluster.mustLease(name), 'Acquired')?.reason === 'Stopped';
        await eventually(
          async () => {
            await op.reconcile(name);
            return (await podsOf(name)).length === 0 && (await stopDone());
          },
          { timeoutMs: 15_000, intervalMs: 50 },
        );

        // Healthy again: the stop completes (released) and the workload is activated anew.
        await front.clear();
        await eventually(
          async () => {
            await op.reconcile(name);
            return (await cluster.mustLease(name)).status?.leaseState === 'held';
          },
          { timeoutMs: 15_000, intervalMs: 50 },
        );
        await permitted(op, name, 2);
        // The next token after a release; the same one when the release got a (garbage) 200 without
        // reaching the central server, which still had the lease unexpired.
        const releasedCentrally = !c.releaseAnswered || c.forwards;
        expectHeld(await cluster.mustLease(name), releasedCentrally ? token + 1 : token);
        expect(await cluster.replicas(name)).toBe(2);
        await monitor.settle();
        monitor.assertClean();
      } finally {
        await op.stop();
        await front.stop();
        await central.stop();
      }
    },
    60_000,
  );
});
