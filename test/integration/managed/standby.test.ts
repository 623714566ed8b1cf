// The managed standby's write rate (docs/decisions/0001-quiet-managed-standby.md): a lease with a target
// held by another cluster, the operator's controllers running for a fixed window, the operator's writes
// to the BerthLease and to the target counted at the API server. The standby waits quietly: no write at
// all, one Acquire per min(heartbeat, ttl/3). (The Go original runs stopAndRelease on every reconcile:
// Stopping and back, two status writes and a stop-fence write per cycle, every second.)
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { HttpLeaseClient } from '../../../src/berth/leaseclient.ts';
import { eventually } from '../../helpers/eventually.ts';
import { type Central, startCentral } from '../berth/harness.ts';
import { createManagedOperator, deploymentLease, ManagedCluster, NS } from './harness.ts';

const WINDOW_MS = 5_000;
const LEASE = 'standby';

let cluster: ManagedCluster;
let central: Central;
let west: HttpLeaseClient;
let renewing: ReturnType<typeof setInterval> | undefined;

beforeAll(async () => {
  cluster = await ManagedCluster.start('east');
  central = await startCentral();
  west = new HttpLeaseClient({ baseUrl: central.url });
  // cluster-west holds the lease and keeps renewing it.
  await west.acquire(NS, LEASE, 'cluster-west', 3);
  renewing = setInterval(() => void west.acquire(NS, LEASE, 'cluster-west', 3).catch(() => {}), 500);
  await cluster.createLease(LEASE, deploymentLease(LEASE, 2, { ttlSeconds: 3, heartbeatIntervalSeconds: 1 }));
  await cluster.createDeployment(LEASE, 2);
  await eventually(async () => !!(await cluster.mustLease(LEASE)).status?.workload?.targetUID);
}, 60_000);
afterAll(async () => {
  if (renewing) clearInterval(renewing);
  west?.close();
  await central?.stop();
  await cluster?.stop();
});

interface Rate {
  statusWrites: number;
  targetWrites: number;
  acquires: number;
  seconds: number;
}

async function measure(): Promise<Rate> {
  const op = createManagedOperator(cluster, { clusterId: 'cluster-east', centralUrl: central.url });
  try {
    await op.start();
    // Settled: the target is stopped and the standby has reconciled at least twice.
    await eventually(
      async () => (await cluster.replicas(LEASE)) === 0 && op.central.of('acquire').length >= 2,
      {
        timeoutMs: 10_000,
      },
    );
    const statusWrites = cluster.countOperatorWrites('berthleases', 'status');
    const targetWrites = cluster.countOperatorWrites('deployments');
    const acquiresBefore = op.central.of('acquire').length;
    const started = performance.now();
    await new Promise((resolve) => setTimeout(resolve, WINDOW_MS));
    const seconds = (performance.now() - started) / 1000;
    return {
      statusWrites: statusWrites(),
      targetWrites: targetWrites(),
      acquires: op.central.of('acquire').length - acquiresBefore,
      seconds,
    };
  } finally {
    await op.stop();
    cluster.proxy.clear();
  }
}

const perSecond = (n: number, seconds: number): string => (n / seconds).toFixed(2);

describe('a managed standby (ttl 3 s, heartbeat 1 s, held by another cluster)', () => {
  it('writes nothing while it waits', async () => {
    const rate = await measure();
    console.info(
      `managed standby over ${WINDOW_MS / 1000}s: ${perSecond(rate.statusWrites, rate.seconds)} status writes/s, ` +
        `${perSecond(rate.targetWrites, rate.seconds)} target writes/s, ${perSecond(rate.acquires, rate.seconds)} acquires/s`,
    );
    // Nothing written; the central API is still asked every min(heartbeat, ttl/3) = 1 s.
    expect(rate.statusWrites).toBe(0);
    expect(rate.targetWrites).toBe(0);
    expect(rate.acquires).toBeGreaterThanOrEqual(WINDOW_MS / 2000);
    expect(rate.acquires).toBeLessThanOrEqual(WINDOW_MS / 1000 + 1);
    const lease = await cluster.mustLease(LEASE);
    expect(lease.status).toMatchObject({ leaseState: 'waiting', currentHolder: 'cluster-west' });
  }, 60_000);
});
