// Two clusters (E2E_KUBECONFIG and E2E_KUBECONFIG_2, or two control planes of this file's own), each with
// an operator running the BerthLease controller leader-only, configured through the real flags
// (`cluster-east` / `cluster-west`), and one embedded central lease server. The same lease-only
// BerthLease is applied to both. A sampler reads both statuses continuously and checks that no two clusters
// ever claim the lease at once (a claim: `held` with the recorded expiry still ahead; a stopped operator's
// last status stays `held` but its claim ends at its expiry), and that in steady state exactly one does.
// Then: stop the holder's operator -> the other holds within ttl + heartbeat; delete the lease on the
// holder -> released, the finalizer cleared, the other acquires; a central outage keeps the holder `held`
// until its TTL and marks it unhealthy. (The managed-workload failover is two-clusters.test.ts.)
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { BerthLease } from '../../src/berth/api.ts';
import { berthFlags, leaseClientFor, parseBerthConfig } from '../../src/berth/config.ts';
import { BerthLeaseController } from '../../src/berth/controller.ts';
import { findCondition, parseTime } from '../../src/berth/status.ts';
import { parseFlags } from '../../src/cli.ts';
import { EventRecorder, eventSinkFor } from '../../src/kube/events.ts';
import { Manager } from '../../src/kube/manager.ts';
import { KubeTransport } from '../../src/kube/transport.ts';
import { createLogger } from '../../src/observability/logger.ts';
import { createRegistry } from '../../src/observability/metrics.ts';
import { BerthLeaseBuilder } from '../builders/berthlease.ts';
import { type Central, startCentral } from '../helpers/central.ts';
import { eventually } from '../helpers/eventually.ts';
import { berthLeaseRef, E2eCluster, RUN_ID } from './cluster.ts';
import { type E2eTarget, e2eTarget, skipReason } from './env.ts';
import { createLease, readLease } from './workloads.ts';

const skip = skipReason('the two-cluster lease scenario', ['kubeconfig', 'kubeconfig2']);

const NS = `berth-e2e-${RUN_ID}-leases`;
/** Lease-only: no BerthLease of this suite is refused for being in the operator namespace. */
const OPERATOR_NS = `berth-e2e-${RUN_ID}-system`;
const TTL_S = 3;
const HEARTBEAT_S = 1;
const TTL_MS = TTL_S * 1000;
const HEARTBEAT_MS = HEARTBEAT_S * 1000;
const LEASE = 'singleton';
const leaseSpec = new BerthLeaseBuilder(LEASE)
  .holderIdentity('worker-east-1')
  .ttlSeconds(TTL_S)
  .heartbeatIntervalSeconds(HEARTBEAT_S)
  .spec();

/** One of the two clusters: its admin clients, and reads and writes of the suite's BerthLease. */
class Cluster {
  readonly name: string;
  readonly e2e: E2eCluster;

  constructor(e2e: E2eCluster) {
    this.name = e2e.name;
    this.e2e = e2e;
  }

  createLease(name: string, spec: typeof leaseSpec): Promise<BerthLease> {
    return createLease(this.e2e, NS, name, spec);
  }

  lease(name: string): Promise<BerthLease | undefined> {
    return readLease(this.e2e, NS, name);
  }

  async mustLease(name: string): Promise<BerthLease> {
    const lease = await this.lease(name);
    if (lease === undefined) throw new Error(`BerthLease ${name} not found in ${this.name}`);
    return lease;
  }

  async deleteLease(name: string): Promise<void> {
    await this.e2e.custom.deleteNamespacedCustomObject({ ...berthLeaseRef(NS), name });
  }
}

interface RunningOperator {
  clusterId: string;
  controller: BerthLeaseController;
  stop(): Promise<void>;
}

async function runOperator(
  cluster: Cluster,
  clusterId: string,
  centralUrl: string,
): Promise<RunningOperator> {
  const flags = parseFlags({ name: 'run', summary: '', flags: berthFlags }, [
    `--berth-api-server=${centralUrl}`,
    `--cluster-id=${clusterId}`,
  ]);
  const config = parseBerthConfig(flags);
  const logger = createLogger({ level: process.env.BERTH_TEST_LOGS ? 'debug' : 'silent' });
  const kc = cluster.e2e.kc;
  const transport = new KubeTransport(kc);
  const registry = createRegistry({ defaultMetrics: false });
  const leaseClient = leaseClientFor(config, logger);
  const recorder = new EventRecorder({
    sink: eventSinkFor(transport),
    reportingController: 'berth.skaphos.io/berth-operator',
    reportingInstance: clusterId,
    logger,
  });
  const controller = new BerthLeaseController({
    transport,
    leaseClient,
    clusterIdentity: config.clusterId,
    operatorNamespace: OPERATOR_NS,
    maxConcurrentReconciles: config.maxConcurrentReconciles,
    recorder,
    registry,
    logger,
  });
  const manager = new Manager({
    logger,
    registry,
    healthProbeBindAddress: '0',
    metricsBindAddress: '0',
    gracefulShutdownTimeoutMs: 10_000,
    drainWindowMs: 0,
  });
  for (const runnable of controller.runnables()) manager.add(runnable);
  const done = manager.run();
  await manager.elected;
  let stopping: Promise<void> | undefined;
  return {
    clusterId,
    controller,
    stop() {
      stopping ??= (async () => {
        manager.stop('test');
        await done;
        await recorder.flush();
        leaseClient.close();
        await transport.close();
      })();
      return stopping;
    },
  };
}

interface Sample {
  /** Wall-clock time after both reads. */
  at: number;
  /** The cluster claiming the lease, per cluster name. */
  claims: string[];
  tokens: Record<string, number>;
}

/** `held` with the recorded expiry still ahead at `at`. */
const claims = (lease: BerthLease | undefined, at: number): boolean => {
  if (lease?.status?.leaseState !== 'held') return false;
  const expiresAt = parseTime(lease.status.expiresAt);
  return expiresAt !== undefined && expiresAt > at;
};

class Sampler {
  readonly samples: Sample[] = [];
  readonly violations: Sample[] = [];
  #running = true;
  readonly #loop: Promise<void>;

  readonly clusters: Cluster[];

  constructor(clusters: Cluster[]) {
    this.clusters = clusters;
    this.#loop = this.#run();
  }

  async #run(): Promise<void> {
    let flip = false;
    while (this.#running) {
      flip = !flip;
      const order = flip ? this.clusters : [...this.clusters].reverse();
      const leases = await Promise.all(order.map((c) => c.lease(LEASE).catch(() => undefined)));
      const at = Date.now();
      const sample: Sample = { at, claims: [], tokens: {} };
      leases.forEach((lease, i) => {
        const name = order[i]?.name ?? '?';
        if (claims(lease, at)) {
          sample.claims.push(name);
          sample.tokens[name] = lease?.status?.fencingToken ?? 0;
        }
      });
      this.samples.push(sample);
      if (sample.claims.length > 1) this.violations.push(sample);
      await new Promise((resolve) => setTimeout(resolve, 10));
    }
  }

  /** The cluster claiming the lease in the latest sample after `since`, if exactly one. */
  holderSince(since: number): string | undefined {
    const last = this.samples.at(-1);
    return last !== undefined && last.at >= since && last.claims.length === 1 ? last.claims[0] : undefined;
  }

  /** Samples taken in [from, to]. */
  between(from: number, to: number): Sample[] {
    return this.samples.filter((s) => s.at >= from && s.at <= to);
  }

  async stop(): Promise<void> {
    this.#running = false;
    await this.#loop;
  }
}

let target: E2eTarget | undefined;
let east: Cluster;
let west: Cluster;
let central: Central;
let sampler: Sampler | undefined;
const operators = new Map<string, RunningOperator>();

beforeAll(async () => {
  if (skip) return;
  target = await e2eTarget(2);
  const [eastConfig, westConfig] = target.kubeconfigs;
  east = new Cluster(new E2eCluster('east', eastConfig!));
  west = new Cluster(new E2eCluster('west', westConfig!));
  for (const c of [east, west]) {
    await c.e2e.installCrd();
    await c.e2e.createNamespace(NS);
    // Before the namespace goes: the operators, still running, release what is left.
    c.e2e.onCleanup('BerthLeases', () => c.e2e.removeBerthLeases(NS));
  }
  central = await startCentral();
});
afterAll(async () => {
  await sampler?.stop();
  const failed: string[] = [];
  for (const c of [east, west]) if (c) failed.push(...(await c.e2e.cleanup()));
  for (const op of operators.values()) await op.stop();
  await central?.stop();
  if (failed.length > 0) console.warn(`e2e cleanup left something behind:\n${failed.join('\n')}`);
  await target?.stop();
});

const clusterOf = (name: string): Cluster => (name === 'east' ? east : west);
const otherOf = (name: string): string => (name === 'east' ? 'west' : 'east');
const idOf = (name: string): string => `cluster-${name}`;

async function start(name: string): Promise<void> {
  operators.set(name, await runOperator(clusterOf(name), idOf(name), central.url));
}

async function stop(name: string): Promise<void> {
  await operators.get(name)?.stop();
  operators.delete(name);
}

/** Waits until `name`, and only it, claims the lease in a sample taken after `since`; returns that sample's time. */
async function claimedBy(name: string, since: number, timeoutMs: number): Promise<number> {
  return defined(
    await eventually(
      () => sampler?.samples.find((s) => s.at >= since && s.claims.length === 1 && s.claims[0] === name)?.at,
      { timeoutMs, intervalMs: 5 },
    ),
  );
}

function defined<T>(value: T | undefined): T {
  if (value === undefined) throw new Error('expected a value');
  return value;
}

/** Waits until exactly one cluster claims the lease (in a sample taken after `since`). */
async function holder(since: number, timeoutMs: number): Promise<string> {
  return defined(await eventually(() => sampler?.holderSince(since), { timeoutMs, intervalMs: 5 }));
}

const measured: Record<string, number> = {};

describe.skipIf(skip)('two clusters, one central lease server', () => {
  it('holds the same BerthLease in exactly one cluster at every instant, through failover, deletion and an outage', async () => {
    await start('east');
    await start('west');
    await Promise.all([east.createLease(LEASE, leaseSpec), west.createLease(LEASE, leaseSpec)]);
    sampler = new Sampler([east, west]);

    // 1. Exactly one holds; the other waits and shows it.
    const first = await holder(0, 10_000);
    const standby = otherOf(first);
    await eventually(
      async () => {
        const s = (await clusterOf(standby).mustLease(LEASE)).status;
        return s?.leaseState === 'waiting' && s.currentHolder === idOf(first);
      },
      { timeoutMs: 5_000 },
    );
    // Stable for more than two heartbeats: exactly one claim in every sample.
    const steadyFrom = Date.now();
    await eventually(() => Date.now() - steadyFrom >= 2.5 * HEARTBEAT_MS && sampler!.samples.length > 0, {
      timeoutMs: 5_000,
      intervalMs: 50,
    });
    const steady = sampler.between(steadyFrom, Date.now());
    expect(steady.length).toBeGreaterThan(20);
    expect(steady.every((s) => s.claims.length === 1 && s.claims[0] === first)).toBe(true);

    // 2. Stop the holder's operator: the other holds within ttl + heartbeat.
    const stoppedAt = Date.now();
    await stop(first);
    const second = standby;
    measured.failoverMs = (await claimedBy(second, stoppedAt, TTL_MS + HEARTBEAT_MS + 3_000)) - stoppedAt;
    // ttl + heartbeat, plus scheduling slack for a loaded two-core machine (measured: about ttl).
    expect(measured.failoverMs).toBeLessThanOrEqual(TTL_MS + HEARTBEAT_MS + 1_000);

    // The stopped operator comes back: it waits behind the new holder.
    await start(first);
    await eventually(
      async () => {
        const s = (await clusterOf(first).mustLease(LEASE)).status;
        return s?.leaseState === 'waiting' && s.currentHolder === idOf(second);
      },
      { timeoutMs: 5_000 },
    );

    // 3. Delete the lease on the holder: released centrally, finalizer cleared, the other acquires.
    const deletedAt = Date.now();
    await clusterOf(second).deleteLease(LEASE);
    await eventually(async () => (await clusterOf(second).lease(LEASE)) === undefined, { timeoutMs: 5_000 });
    measured.finalizerClearedMs = Date.now() - deletedAt;
    measured.handoverAfterDeleteMs = (await claimedBy(first, deletedAt, TTL_MS + HEARTBEAT_MS)) - deletedAt;
    // Released, not expired: no need to wait for the TTL.
    expect(measured.handoverAfterDeleteMs).toBeLessThan(TTL_MS);
    const centralState = await central.server.store.get({ namespace: NS, name: LEASE });
    expect(centralState?.holder).toBe(idOf(first));

    // 4. A central outage: the holder stays held until its TTL, marked unhealthy; then no longer claims.
    await clusterOf(second).createLease(LEASE, leaseSpec);
    await eventually(
      async () => (await clusterOf(second).mustLease(LEASE)).status?.currentHolder === idOf(first),
      { timeoutMs: 5_000 },
    );
    const holderCluster = clusterOf(first);
    const before = (await holderCluster.mustLease(LEASE)).status;
    const lastExpiry = parseTime(before?.expiresAt);
    const outageAt = Date.now();
    central.store.down = true;
    const unhealthy = defined(
      await eventually(
        async () => {
          const lease = await holderCluster.mustLease(LEASE);
          const c = findCondition(lease.status, 'HeartbeatHealthy');
          return c?.status === 'False' && c.reason === 'AcquireFailed' ? lease : undefined;
        },
        { timeoutMs: 3_000 },
      ),
    );
    expect(unhealthy.status?.leaseState).toBe('held');
    expect(findCondition(unhealthy.status, 'Acquired')).toMatchObject({ status: 'True', reason: 'Held' });
    expect(findCondition(unhealthy.status, 'HeartbeatHealthy')?.message).toBe(
      `acquire ${NS}/${LEASE}: server status 500: internal error`,
    );
    // Held (and claimed) until the recorded expiry; after it, no claim and the status says so.
    const expired = defined(
      await eventually(
        async () => {
          const lease = await holderCluster.mustLease(LEASE);
          return findCondition(lease.status, 'Acquired')?.reason === 'Expired' ? lease : undefined;
        },
        { timeoutMs: TTL_MS + 2_000 },
      ),
    );
    const expiresAt = parseTime(expired.status?.expiresAt)!;
    expect(expiresAt).toBeGreaterThan(outageAt);
    expect(lastExpiry).toBeDefined();
    expect(sampler.between(outageAt, expiresAt - 100).every((s) => s.claims.length === 1)).toBe(true);
    measured.heldDuringOutageMs = expiresAt - outageAt;
    expect(expired.status).toMatchObject({ leaseState: 'waiting', fencingToken: 0 });
    // The standby stays a standby (unhealthy too) and acquires nothing while the central API is down.
    const standbyStatus = (await clusterOf(second).mustLease(LEASE)).status;
    expect(standbyStatus?.leaseState).toBe('waiting');
    expect(findCondition(standbyStatus, 'HeartbeatHealthy')).toMatchObject({
      status: 'False',
      reason: 'AcquireFailed',
    });

    // The central API recovers: exactly one holds again, with a higher token.
    const recoveredAt = Date.now();
    central.store.down = false;
    const afterOutage = await holder(recoveredAt, 5_000);
    const tokenAfter = sampler.samples.at(-1)!.tokens[afterOutage]!;
    expect(tokenAfter).toBeGreaterThan(before?.fencingToken ?? 0);

    await sampler.stop();
    // Never two claims at once, over the whole run.
    expect(sampler.violations).toEqual([]);
    // Tokens of successive holders strictly increase.
    const epochs: number[] = [];
    for (const s of sampler.samples) {
      const name = s.claims[0];
      if (name === undefined) continue;
      const token = s.tokens[name]!;
      if (epochs.at(-1) !== token) epochs.push(token);
    }
    expect(epochs).toEqual([...epochs].sort((a, b) => a - b));
    expect(new Set(epochs).size).toBe(epochs.length);
    console.info(
      `berth e2e (ttl ${TTL_S}s, heartbeat ${HEARTBEAT_S}s): ${sampler.samples.length} samples, ` +
        `failover after stop ${measured.failoverMs}ms, finalizer cleared ${measured.finalizerClearedMs}ms, ` +
        `handover after delete ${measured.handoverAfterDeleteMs}ms, held during outage ${measured.heldDuringOutageMs}ms, ` +
        `tokens ${epochs.join(' -> ')}`,
    );
  });
});
