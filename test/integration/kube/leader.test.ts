// Three electors against the real API server through client-node (each its own user, with the install's
// least-privilege Lease rules, through the fault proxy): at most one leader at every instant (sampled every
// few ms for the whole test, and cross-checked against the Lease), hand-over on release, failover when the
// leader stops renewing.
import { CoordinationV1Api, type V1PolicyRule } from '@kubernetes/client-node';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { kubeLeaseClient, LeaderElector, type LeaderRunResult } from '../../../src/kube/leader.ts';
import { JITTER_FACTOR, leaseDurationSeconds } from '../../../src/kube/leader-decision.ts';
import { DispatcherReuse } from '../../../src/kube/transport.ts';
import { createRegistry } from '../../../src/observability/metrics.ts';
import { typedRequestOptions } from '../../helpers/api.ts';
import { ApiProxy } from '../../helpers/api-proxy.ts';
import { TestCluster, uniqueName } from '../../helpers/cluster.ts';
import { eventually } from '../../helpers/eventually.ts';

const LEASE = 'elector-test';
const LEASE_MS = 2_000;
const RENEW_DEADLINE_MS = 1_000;
const RETRY_MS = 250;

let t: TestCluster;
let proxy: ApiProxy;
let ns: string;
beforeAll(async () => {
  t = await TestCluster.shared();
  ns = await t.namespace('leader');
  proxy = await ApiProxy.start(t);
});
afterAll(async () => {
  await proxy?.stop();
  await t?.stop();
});

/** What the install grants for leader election (scripts/deploy-rbac.ts), for Lease `name`. */
const leaseRules = (name: string): V1PolicyRule[] => [
  { apiGroups: ['coordination.k8s.io'], resources: ['leases'], verbs: ['create'] },
  {
    apiGroups: ['coordination.k8s.io'],
    resources: ['leases'],
    resourceNames: [name],
    verbs: ['get', 'list', 'update', 'watch'],
  },
];

interface Candidate {
  /** The user name, unique in the run (faults target it). */
  user: string;
  elector: LeaderElector;
  stop: AbortController;
  done: Promise<LeaderRunResult>;
  startedAt: number[];
}

async function candidate(
  name: string,
  timing: { lease: string; leaseMs: number; renewMs: number; retryMs: number } = {
    lease: LEASE,
    leaseMs: LEASE_MS,
    renewMs: RENEW_DEADLINE_MS,
    retryMs: RETRY_MS,
  },
): Promise<Candidate> {
  const { username: user, kubeconfig } = await t.user(uniqueName(name));
  await t.grant(user, leaseRules(timing.lease), ns);
  const kc = t.kubeConfigFor(proxy.kubeconfigFor(kubeconfig));
  const elector = new LeaderElector({
    client: kubeLeaseClient(t.transport(kc)),
    namespace: ns,
    name: timing.lease,
    identity: `${user}_id`,
    leaseDurationMs: timing.leaseMs,
    renewDeadlineMs: timing.renewMs,
    retryPeriodMs: timing.retryMs,
    releaseOnCancel: true,
    registry: createRegistry({ defaultMetrics: false }),
  });
  const stop = new AbortController();
  const startedAt: number[] = [];
  const done = elector.run(stop.signal, { onStartedLeading: () => startedAt.push(Date.now()) });
  return { user, elector, stop, done, startedAt };
}

describe('leader election against the API server', () => {
  it('keeps at most one leader at every instant through release hand-over and failover', async () => {
    const leases = t.kc.makeApiClient(CoordinationV1Api);
    // One connection for the checker's reads (client-node would open a new TLS connection per read,
    // a hundred a second, starving this process's event loop and with it the electors and the monitor).
    const checkerPool = new DispatcherReuse();
    const checkerOptions = typedRequestOptions({ pool: checkerPool });
    const all: Candidate[] = [];
    const leaders = (): Candidate[] => all.filter((c) => c.elector.isLeader());
    const soleLeader = (): Candidate => {
      const now = leaders();
      if (now.length !== 1 || now[0] === undefined) throw new Error(`${now.length} leaders`);
      return now[0];
    };

    // Sample the electors every 2 ms for the whole test.
    const violations: string[] = [];
    let samples = 0;
    const monitor = setInterval(() => {
      samples++;
      const now = leaders();
      if (now.length > 1) violations.push(`${new Date().toISOString()}: ${now.map((c) => c.user).join(',')}`);
    }, 2);
    // Cross-check with the Lease: a candidate that is leader before and after a read must be its holder.
    let checking = true;
    const holderMismatches: string[] = [];
    let leaseChecks = 0;
    const checker = (async () => {
      while (checking) {
        const before = leaders();
        const lease = await leases
          .readNamespacedLease({ name: LEASE, namespace: ns }, checkerOptions)
          .catch(() => undefined);
        const after = leaders();
        if (lease && before.length === 1 && after.length === 1 && before[0] === after[0]) {
          leaseChecks++;
          const holder = lease.spec?.holderIdentity;
          if (holder !== before[0]?.elector.identity)
            holderMismatches.push(`${before[0]?.user} leads, Lease says ${holder}`);
        }
        await new Promise((r) => setTimeout(r, 10));
      }
    })();

    try {
      all.push(...(await Promise.all([candidate('a'), candidate('b'), candidate('c')])));
      const first = await eventually(soleLeader, { timeoutMs: 5_000 });

      // Steady state: the same single leader, renewing, for several lease durations' worth of retries.
      const steadyUntil = Date.now() + 1_500;
      while (Date.now() < steadyUntil) {
        expect(leaders()).toEqual([first]);
        await new Promise((r) => setTimeout(r, 25));
      }
      const lease = await leases.readNamespacedLease({ name: LEASE, namespace: ns });
      expect(lease.spec?.holderIdentity).toBe(first.elector.identity);
      expect(lease.spec?.leaseDurationSeconds).toBe(leaseDurationSeconds(LEASE_MS));
      expect(lease.spec?.leaseTransitions).toBe(0);
      // What the API server stored is MicroTime with exactly six fractional digits.
      const raw = await t.kubectl(['get', 'lease', LEASE, '-n', ns, '-o', 'json']);
      const spec = (JSON.parse(raw.stdout) as { spec: { renewTime: string; acquireTime: string } }).spec;
      expect(spec.renewTime).toMatch(/\.\d{6}Z$/);
      expect(spec.acquireTime).toMatch(/\.\d{6}Z$/);
      for (const c of all) expect(c.elector.getLeader()).toBe(first.elector.identity);

      // Hand-over on release: the leader gives up cleanly; a waiting candidate takes over at its
      // next poll. Without the release it could not before the old record expired: the leader renewed
      // at most one retry period before it stopped, so that is at least LEASE_MS - RETRY_MS later. The
      // bound tells the two apart and leaves a loaded machine room for the poll itself.
      first.stop.abort();
      expect(await first.done).toEqual({ led: true, lost: false, released: true });
      const releasedAt = Date.now();
      const second = await eventually(soleLeader, {
        timeoutMs: 5_000,
        intervalMs: 2,
      });
      const handover = (second.startedAt[0] ?? Number.NaN) - releasedAt;
      expect(second).not.toBe(first);
      expect(handover).toBeLessThan(LEASE_MS - RETRY_MS);
      expect((await leases.readNamespacedLease({ name: LEASE, namespace: ns })).spec).toMatchObject({
        holderIdentity: second.elector.identity,
        leaseTransitions: 1,
      });

      // Failover: the leader is cut off from the API server (every Lease request of its user fails).
      // It must step down within its renew deadline, and the last candidate must take over once the
      // record has not changed for the lease duration: within lease duration + one (jittered) poll.
      const fault = proxy.inject({ user: second.user, resource: 'leases', status: 503 });
      const cutAt = Date.now();
      try {
        expect(await second.done).toEqual({ led: true, lost: true, released: false });
        expect(Date.now() - cutAt).toBeLessThanOrEqual(RENEW_DEADLINE_MS + 100);
        const third = await eventually(soleLeader, {
          timeoutMs: 10_000,
          intervalMs: 2,
        });
        const failover = (third.startedAt[0] ?? Number.NaN) - cutAt;
        expect(failover).toBeGreaterThanOrEqual(LEASE_MS - RETRY_MS - 50); // it did wait for expiry
        expect(failover).toBeLessThanOrEqual(LEASE_MS + (1 + JITTER_FACTOR) * RETRY_MS + 300);
        expect((await leases.readNamespacedLease({ name: LEASE, namespace: ns })).spec).toMatchObject({
          holderIdentity: third.elector.identity,
          leaseTransitions: 2,
        });
        third.stop.abort();
        expect(await third.done).toMatchObject({ released: true });
      } finally {
        fault.remove();
      }
      const final = await leases.readNamespacedLease({ name: LEASE, namespace: ns });
      expect(final.spec).toMatchObject({ holderIdentity: '', leaseDurationSeconds: 1, leaseTransitions: 2 });
    } finally {
      for (const c of all) c.stop.abort();
      await Promise.all(all.map((c) => c.done));
      checking = false;
      await checker;
      await checkerPool.close();
      clearInterval(monitor);
    }
    expect(violations).toEqual([]);
    expect(holderMismatches).toEqual([]);
    expect(samples).toBeGreaterThan(500);
    expect(leaseChecks).toBeGreaterThan(20);
  });

  it('a waiting candidate takes a released Lease at once (it watches it), not at its next retry', async () => {
    // Retries at least 40 s apart: only the watch of the Lease can explain a take-over within the deadline below.
    const slow = { lease: 'watched', leaseMs: 90_000, renewMs: 60_000, retryMs: 40_000 };
    const first = await candidate('watch-a', slow);
    await eventually(() => first.elector.isLeader(), { timeoutMs: 10_000 });
    const second = await candidate('watch-b', slow);
    await eventually(() => second.elector.getLeader() === first.elector.identity, { timeoutMs: 10_000 });
    first.stop.abort();
    expect((await first.done).released).toBe(true);
    await eventually(() => second.elector.isLeader(), { timeoutMs: 10_000 });
    second.stop.abort();
    await second.done;
  });
});
