// SIGKILL of the leader operator process at the worst moments, with a standby replica resuming from what
// is durable (the BerthLease status, the CA Secret, the webhook configurations) and nothing else:
//
//   - in the middle of a reconcile: the central server has granted the lease, the status write recording
//     it is in flight (held by a delay fault of the API proxy) when the leader dies;
//   - in the middle of a stop/drain of a managed Deployment (its scale-down write in flight);
//   - in the middle of a webhook CA rotation (the rotated CA Secret written, the caBundle patch in flight).
//
// Two clusters (east, west) share the central lease server and run the same managed workload; the
// invariant monitor (test/helpers/invariants.ts) watches both throughout: never a running Pod of the
// workload in both clusters, never a fencing token going backwards, never an unregistered managed Pod
// running. Leader election uses a 2 s Lease, so a killed leader is replaced within seconds. The CA
// rotation then runs in east, once its managed case is over (two control planes for the file).
import type { V1Pod, V1Secret } from '@kubernetes/client-node';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { CA_DATA_KEYS } from '../../../certs/authority.ts';
import { generateCa } from '../../../certs/issue.ts';
import { LeaseState, MANAGED_LEASE, SCHEDULING_GATE } from '../../../src/berth/api.ts';
import { type CentralServer, startCentralServer } from '../../../src/central/server.ts';
import { createLogger } from '../../../src/observability/logger.ts';
import { createRegistry } from '../../../src/observability/metrics.ts';
import { CentralFaultFront } from '../../helpers/central-faults.ts';
import { centralTls } from '../../helpers/central-tls.ts';
import { eventually } from '../../helpers/eventually.ts';
import { InvariantMonitor } from '../../helpers/invariants.ts';
import { type OperatorProcess, stopOperatorProcesses } from '../../helpers/operator-process.ts';
import { deploymentLease } from '../managed/harness.ts';
import { CA_SECRET, NS, OPERATOR_NS, OPERATOR_USER, OperatorCluster } from './operator-cluster.ts';

/** Holds a write "forever" (until the test removes the fault or the writer's connection closes). */
const HOLD_MS = 60_000;
const LEASE = 'alpha';

let east: OperatorCluster;
let west: OperatorCluster;

beforeAll(async () => {
  [east, west] = await Promise.all([OperatorCluster.start(), OperatorCluster.start()]);
});
afterAll(async () => {
  await stopOperatorProcesses();
  await Promise.all([east?.stop(), west?.stop()]);
});

/** The replica holding the leader Lease of `cluster`, once one of `replicas` does. */
async function leaderOf(cluster: OperatorCluster, replicas: OperatorProcess[]): Promise<OperatorProcess> {
  const leader = await eventually(
    async () => {
      const holder = await cluster.leaderHolder();
      for (const r of replicas) if (!r.hasExited() && (await r.identity()) === holder) return r;
      return undefined;
    },
    { timeoutMs: 20_000 },
  );
  if (leader === undefined) throw new Error('no leader');
  return leader;
}

async function sigkill(replica: OperatorProcess): Promise<void> {
  replica.kill('SIGKILL');
  expect(await replica.exited).toEqual({ code: null, signal: 'SIGKILL' });
}

const isRunning = (pod: V1Pod): boolean =>
  pod.status?.phase === 'Running' &&
  !pod.metadata?.deletionTimestamp &&
  !(pod.spec?.schedulingGates ?? []).some((g) => g.name === SCHEDULING_GATE);

async function runningPods(cluster: OperatorCluster): Promise<V1Pod[]> {
  const pods = await cluster.core.listNamespacedPod({ namespace: NS, labelSelector: `app=${LEASE}` });
  return pods.items.filter(isRunning);
}

async function createDeployment(cluster: OperatorCluster): Promise<void> {
  const labels = { app: LEASE };
  await cluster.apps.createNamespacedDeployment({
    namespace: NS,
    body: {
      metadata: { name: LEASE },
      spec: {
        replicas: 0,
        selector: { matchLabels: labels },
        template: { metadata: { labels }, spec: { containers: [{ name: 'app', image: 'app:1' }] } },
      },
    },
  });
}

describe('SIGKILL of the leader operator', () => {
  describe('a managed lease (two clusters, one central server)', () => {
    let central: CentralServer;
    let front: CentralFaultFront;
    let monitor: InvariantMonitor;
    /** Every replica this case starts (stopped before the next case). */
    const replicas: OperatorProcess[] = [];

    beforeAll(async () => {
      central = await startCentralServer({
        tls: await centralTls(),
        logger: createLogger({ level: 'silent' }),
        registry: createRegistry({ defaultMetrics: false }),
        gc: false,
      });
      // East reaches the central server through a fault front, so a call can be held in flight.
      front = await CentralFaultFront.start(central.url);
      monitor = await InvariantMonitor.start([
        { name: 'east', kc: east.t.kc },
        { name: 'west', kc: west.t.kc },
      ]);
    });
    afterAll(async () => {
      await monitor?.stop();
      await stopOperatorProcesses(replicas);
      await front?.stop();
      await central?.stop();
    });

    const startEast = (name: string): OperatorProcess => {
      const replica = east.startOperator({ name, central: { url: front.url, clusterId: 'east' } });
      replicas.push(replica);
      return replica;
    };
    const centralRecord = async () =>
      (await central.store.list()).find((r) => r.key.namespace === NS && r.key.name === LEASE);

    it('mid-reconcile (granted centrally, status not yet written), then mid-drain: resumed from status', async () => {
      // East: two replicas, one leads. West: one replica, contending for the same lease.
      const e1 = startEast('east-1');
      const e2 = startEast('east-2');
      const w1 = west.startOperator({ name: 'west-1', central: { url: central.url, clusterId: 'west' } });
      replicas.push(w1);
      await Promise.all([e1.ready(), e2.ready(), w1.ready()]);
      await Promise.all([east.route([e1, e2]), west.route([w1])]);
      await Promise.all([east.admissionWorks(), west.admissionWorks()]);
      const first = await leaderOf(east, [e1, e2]);
      const standby = first === e1 ? e2 : e1;

      // --- (a) SIGKILL between the central grant and the status write ---
      await front.set({ kind: 'slow' }, { op: 'acquire', name: LEASE });
      const spec = deploymentLease(LEASE, 1, { ttlSeconds: 20, heartbeatIntervalSeconds: 1 });
      await east.createLease(LEASE, spec);
      await eventually(async () => ((await east.lease(LEASE))?.metadata.finalizers ?? []).length > 0);
      await createDeployment(east);
      await eventually(() => front.hits() >= 1, { timeoutMs: 10_000 }); // the acquire is in flight
      const statusWrite = east.proxy.inject({
        verbs: ['update'],
        resource: 'berthleases',
        subresource: 'status',
        name: LEASE,
        user: OPERATOR_USER,
        delayMs: HOLD_MS,
      });
      await front.clear(); // the acquire goes through: the central server grants the lease...
      const granted = await eventually(async () => {
        const record = await centralRecord();
        return statusWrite.hits() >= 1 && record?.holder === 'east' ? record : undefined;
      });
      // ...and the status write recording it is in flight when the leader dies.
      await sigkill(first);
      statusWrite.remove();
      // A replacement replica, as the Deployment's controller would start (a standby for part b).
      const e3 = startEast('east-3');
      expect((await east.lease(LEASE))?.status?.fencingToken ?? 0).toBe(0);
      // West contends for the same workload from now on.
      await west.createLease(LEASE, spec);
      await eventually(async () => ((await west.lease(LEASE))?.metadata.finalizers ?? []).length > 0);
      await createDeployment(west);

      const second = await leaderOf(east, [standby, e3]);
      const held = await eventually(
        async () => {
          const lease = await east.lease(LEASE);
          const pods = await runningPods(east);
          const registered = new Set((lease?.status?.workload?.pods ?? []).map((p) => p.uid));
          return lease?.status?.leaseState === LeaseState.Held &&
            pods.length === 1 &&
            registered.has(pods[0]?.metadata?.uid ?? '')
            ? lease
            : undefined;
        },
        { timeoutMs: 20_000 },
      );
      const record = await centralRecord();
      expect(held?.status?.currentHolder).toBe('east');
      expect(held?.status?.fencingToken).toBe(record?.fencingToken);
      expect(record?.fencingToken).toBeGreaterThanOrEqual(granted?.fencingToken ?? Number.NaN);
      expect(await runningPods(west)).toEqual([]);
      expect((await west.lease(LEASE))?.status?.leaseState).not.toBe(LeaseState.Held);

      // --- (b) SIGKILL in the middle of stopping the workload (the BerthLease is deleted) ---
      await e3.ready();
      await east.route([standby, e3]);
      const third = second === e3 ? standby : e3;
      const scaleDown = east.proxy.inject({
        verbs: ['patch', 'update'],
        resource: 'deployments',
        name: LEASE,
        user: OPERATOR_USER,
        delayMs: HOLD_MS,
      });
      await east.custom.deleteNamespacedCustomObject({ ...east.ref(), name: LEASE });
      await eventually(() => scaleDown.hits() >= 1, { timeoutMs: 10_000 });
      await sigkill(second);
      scaleDown.remove();
      // The stop was cut short: the lease is still held by east and its finalizer still there.
      expect((await centralRecord())?.holder).toBe('east');
      expect((await east.lease(LEASE))?.metadata.deletionTimestamp).toBeDefined();

      await leaderOf(east, [third]);
      // The successor finishes the stop: the Deployment at 0, its Pods gone, the lease released at the
      // central server, the finalizer removed.
      await eventually(
        async () =>
          (await east.lease(LEASE)) === undefined &&
          (await runningPods(east)).length === 0 &&
          (await east.apps.readNamespacedDeployment({ namespace: NS, name: LEASE })).spec?.replicas === 0,
        { timeoutMs: 20_000 },
      );
      // West takes the workload over, under a higher fencing token.
      const westHeld = await eventually(
        async () => {
          const lease = await west.lease(LEASE);
          return lease?.status?.leaseState === LeaseState.Held && (await runningPods(west)).length === 1
            ? lease
            : undefined;
        },
        { timeoutMs: 30_000 },
      );
      expect(westHeld?.status?.currentHolder).toBe('west');
      expect(westHeld?.status?.fencingToken).toBeGreaterThan(held?.status?.fencingToken ?? Number.NaN);
      for (const pod of await runningPods(west))
        expect(pod.metadata?.annotations).toHaveProperty(MANAGED_LEASE);

      await monitor.settle();
      monitor.assertClean();
      expect(monitor.running('east')).toBe(0);
    }, 120_000);
  });

  describe('a webhook CA rotation (selfsigned certificates)', () => {
    let cluster: OperatorCluster;
    const replicas: OperatorProcess[] = [];

    beforeAll(async () => {
      cluster = east;
      // The managed case's replicas made a CA of their own: this case starts from the one it writes.
      await cluster.core.deleteNamespacedSecret({ namespace: OPERATOR_NS, name: CA_SECRET });
    });
    afterAll(async () => {
      await stopOperatorProcesses(replicas);
    });

    it('the rotated CA Secret is written, the caBundle patch in flight: the successor makes both agree', async () => {
      // A CA at 5/6 of its life (rotation is due at 2/3) that the webhook configurations already trust,
      // as a previous operator would have left them.
      const hour = 3_600_000;
      const old = await generateCa({ now: Date.now() - 2.5 * hour, validityMs: 3 * hour, name: CA_SECRET });
      await cluster.core.createNamespacedSecret({
        namespace: OPERATOR_NS,
        body: {
          metadata: { name: CA_SECRET },
          type: 'Opaque',
          stringData: { [CA_DATA_KEYS.cert]: old.cert, [CA_DATA_KEYS.key]: old.key },
        },
      });
      const oldBundle = Buffer.from(old.cert).toString('base64');
      await cluster.setCaBundle(oldBundle);
      const bundlePatch = cluster.proxy.inject({
        verbs: ['patch', 'update'],
        group: 'admissionregistration.k8s.io',
        user: OPERATOR_USER,
        delayMs: HOLD_MS,
      });
      const args = ['--cert-leaf-validity=1h', '--cert-ca-validity=3h'];
      const first = cluster.startOperator({ name: 'certs-1', args });
      replicas.push(first);
      // The first replica rotates the CA (the old one stays in the Secret as the previous CA)...
      const rotated = await eventually(
        async () => {
          const secret = await cluster.core.readNamespacedSecret({ namespace: OPERATOR_NS, name: CA_SECRET });
          return decoded(secret, CA_DATA_KEYS.previousCert) === old.cert ? secret : undefined;
        },
        { timeoutMs: 20_000 },
      );
      if (rotated === undefined) throw new Error('not rotated');
      const newCa = decoded(rotated, CA_DATA_KEYS.cert);
      expect(newCa).not.toBe(old.cert);
      // ...leads, and dies while writing the new caBundle.
      await eventually(() => bundlePatch.hits() >= 1, { timeoutMs: 20_000 });
      expect(await cluster.leaderHolder()).toBe(await first.identity());
      const second = cluster.startOperator({ name: 'certs-2', args });
      replicas.push(second);
      await second.waitForLog((l) => l.msg === 'attempting to acquire leader lease');
      await sigkill(first);
      bundlePatch.remove();
      expect(await cluster.caBundles()).toEqual({ mutating: oldBundle, validating: oldBundle });

      // The successor keeps the rotated CA (no second rotation) and writes the bundle the Secret implies:
      // the new CA and the previous one.
      await second.ready();
      await cluster.route([second]);
      const bundles = await eventually(
        async () => {
          const b = await cluster.caBundles();
          return b.mutating !== oldBundle && b.validating !== oldBundle ? b : undefined;
        },
        { timeoutMs: 20_000 },
      );
      expect(pemsOf(bundles?.mutating ?? '')).toEqual([newCa.trim(), old.cert.trim()]);
      expect(bundles?.validating).toBe(bundles?.mutating);
      const secret = await cluster.core.readNamespacedSecret({ namespace: OPERATOR_NS, name: CA_SECRET });
      expect(decoded(secret, CA_DATA_KEYS.cert)).toBe(newCa);
      expect(decoded(secret, CA_DATA_KEYS.previousCert)).toBe(old.cert);
      // Admission works: the API server verifies the successor's serving certificate with that bundle.
      await cluster.admissionWorks();
    }, 90_000);
  });
});

function decoded(secret: V1Secret, key: string): string {
  const value = secret.data?.[key];
  return value === undefined ? '' : Buffer.from(value, 'base64').toString('utf8');
}

/** The certificates of a base64 PEM bundle, in order. */
function pemsOf(bundle: string): string[] {
  const pem = Buffer.from(bundle, 'base64').toString('utf8');
  return [...pem.matchAll(/-----BEGIN CERTIFICATE-----[\s\S]+?-----END CERTIFICATE-----/g)].map((m) => m[0]);
}
