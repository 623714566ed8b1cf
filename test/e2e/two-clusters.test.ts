// The cross-cluster singleton with a real operator in each of two clusters (E2E_KUBECONFIG and
// E2E_KUBECONFIG_2, e.g. two kind clusters that both reach this machine at E2E_WEBHOOK_HOST, or two
// control planes of this file's own). The same BerthLease and Deployment are applied to both, in a
// namespace of the same name (the central lease is keyed by namespace and leaseName), and both operators
// share the embedded central lease server.
// Scenarios of docs/behaviour.md §6.2: 41 (exactly one cluster runs the replicas), 42 (the holder's
// operator stops: the other cluster takes over, and the holder's Pods are gone before any Pod there is
// ungated), 43 (the stopped operator rejoins as standby), 46 (deleting the BerthLease on the holder
// releases it to the other cluster), with the Pods of both clusters watched throughout: never running in
// both at once.

import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { findCondition } from '../../src/berth/status.ts';
import { type CentralServer, startCentralServer } from '../../src/central/server.ts';
import { createLogger } from '../../src/observability/logger.ts';
import { centralTls } from '../helpers/central-tls.ts';
import { IN_SCOPE } from '../helpers/cluster.ts';
import { eventually } from '../helpers/eventually.ts';
import { berthLeaseRef, E2eCluster, RUN_ID } from './cluster.ts';
import { type E2eTarget, e2eTarget, skipReason } from './env.ts';
import { E2eOperator } from './operator.ts';
import { PodWatch, Timeline } from './timeline.ts';
import {
  createLease,
  deployment,
  deploymentLease,
  HEARTBEAT_S,
  leaseWhen,
  readLease,
  TTL_S,
  until,
} from './workloads.ts';

const skip = skipReason('the two-cluster scenarios', ['kubeconfig', 'kubeconfig2', 'webhookHost']);

const PREFIX = `berth-e2e-${RUN_ID}`;
const NS = `${PREFIX}-apps`;
const LEASE = 'singleton';
const REPLICAS = 2;
const NAMES = ['east', 'west'] as const;
type Name = (typeof NAMES)[number];
const idOf = (name: Name): string => `e2e-${name}`;
const otherOf = (name: Name): Name => (name === 'east' ? 'west' : 'east');

describe.skipIf(skip)('one managed Deployment in two real clusters', () => {
  let target: E2eTarget | undefined;
  let central: CentralServer;
  const timeline = new Timeline();
  const clusters = new Map<Name, { cluster: E2eCluster; operator: E2eOperator }>();
  /** Everything made so far, so that a failure halfway through the set-up still cleans up. */
  const created: Array<{ cluster: E2eCluster; watch?: PodWatch }> = [];
  const of = (name: Name) => {
    const c = clusters.get(name);
    if (c === undefined) throw new Error(`no cluster ${name}`);
    return c;
  };

  beforeAll(async () => {
    central = await startCentralServer({
      tls: await centralTls(),
      logger: createLogger({ level: 'silent' }),
    });
    target = await e2eTarget(2);
    const { kubeconfigs, webhookHost } = target;
    const both = NAMES.map((name, i) => new E2eCluster(name, kubeconfigs[i]!));
    const servers = both.map((c) => c.kc.getCurrentCluster()?.server);
    if (servers[0] === servers[1])
      throw new Error(
        `E2E_KUBECONFIG and E2E_KUBECONFIG_2 name the same API server (${servers[0]}): two clusters are needed`,
      );
    for (const cluster of both) {
      const name = cluster.name as Name;
      const made: { cluster: E2eCluster; watch?: PodWatch } = { cluster };
      created.push(made);
      await cluster.installCrd();
      await cluster.createNamespace(NS, IN_SCOPE);
      const operator = await E2eOperator.install(cluster, {
        prefix: `${PREFIX}-${name}`,
        appNamespaces: [NS],
        webhookHost,
      });
      cluster.onCleanup('operator', () => operator.stop());
      cluster.onCleanup('BerthLeases', () => cluster.removeBerthLeases(NS));
      made.watch = new PodWatch(cluster, NS, timeline);
      await made.watch.start();
      clusters.set(name, { cluster, operator });
    }
    await Promise.all(NAMES.map((n) => of(n).operator.start(idOf(n), central.url)));
  });

  afterAll(async () => {
    const failed: string[] = [];
    for (const { cluster, watch } of created) {
      failed.push(...(await cluster.cleanup()));
      await watch?.stop();
    }
    await central?.stop();
    if (failed.length > 0) console.warn(`e2e cleanup left something behind:\n${failed.join('\n')}`);
    await target?.stop();
  });

  it('runs the replicas in exactly one cluster, through a failover, a rejoin and a deletion', async () => {
    for (const name of NAMES) {
      const { cluster } = of(name);
      await createLease(cluster, NS, LEASE, deploymentLease(LEASE, REPLICAS));
      await cluster.apps.createNamespacedDeployment({ namespace: NS, body: deployment(LEASE) });
    }

    // 41. One holder runs the replicas; the other waits behind it and runs none.
    const holder = await until(() => timeline.soleRunner(REPLICAS) as Name | undefined, {
      timeoutMs: 120_000,
      intervalMs: 100,
    });
    const standby = otherOf(holder);
    await leaseWhen(
      of(standby).cluster,
      NS,
      LEASE,
      (l) => l.status?.leaseState === 'waiting' && l.status.currentHolder === idOf(holder),
    );

    // 42. The holder's operator stops (SIGTERM): it drains and releases; the standby takes over without
    //     waiting for the TTL, and ungates its first Pod only after the last Pod of the holder is gone.
    const stoppedAt = performance.now();
    expect(await of(holder).operator.stop()).toBe(0);
    await until(() => (timeline.soleRunner(REPLICAS) === standby ? standby : undefined), {
      timeoutMs: 60_000,
      intervalMs: 100,
    });
    const lastRemoved = timeline.select({ cluster: holder, change: 'removed', since: stoppedAt }).at(-1);
    const firstUngated = timeline.select({ cluster: standby, change: 'ungated', since: stoppedAt })[0];
    expect(lastRemoved && firstUngated).toBeTruthy();
    expect(lastRemoved?.at ?? Number.POSITIVE_INFINITY).toBeLessThan(firstUngated?.at ?? 0);
    // Released, not expired: ungated there before the holder's claim could have run out (its last renewal
    // was at most a heartbeat before the stop).
    expect((firstUngated?.at ?? Number.POSITIVE_INFINITY) - stoppedAt).toBeLessThan(
      (TTL_S - HEARTBEAT_S) * 1000,
    );
    const released = await readLease(of(holder).cluster, NS, LEASE);
    expect(released?.status).toMatchObject({ leaseState: 'waiting', fencingToken: 0 });
    expect(findCondition(released?.status, 'Acquired')?.reason).toBe('Stopped');

    // 43. The stopped operator comes back as a standby behind the new holder; its cluster runs nothing.
    await of(holder).operator.start(idOf(holder), central.url);
    await leaseWhen(
      of(holder).cluster,
      NS,
      LEASE,
      (l) => l.status?.leaseState === 'waiting' && l.status.currentHolder === idOf(standby),
    );
    expect(timeline.soleRunner(REPLICAS)).toBe(standby);

    // 46. Deleting the BerthLease on the (new) holder drains it there, clears its finalizer and releases
    //     the lease, which the first cluster then acquires.
    const deletedAt = performance.now();
    await of(standby).cluster.custom.deleteNamespacedCustomObject({ ...berthLeaseRef(NS), name: LEASE });
    await eventually(async () => (await readLease(of(standby).cluster, NS, LEASE)) === undefined, {
      timeoutMs: 60_000,
      intervalMs: 250,
    });
    await until(() => (timeline.soleRunner(REPLICAS) === holder ? holder : undefined), {
      timeoutMs: 120_000,
      intervalMs: 100,
    });
    const drained = timeline.select({ cluster: standby, change: 'removed', since: deletedAt }).at(-1);
    const resumed = timeline.select({ cluster: holder, change: 'ungated', since: deletedAt })[0];
    expect(drained?.at ?? Number.POSITIVE_INFINITY).toBeLessThan(resumed?.at ?? 0);

    // Never both clusters running replicas at once, over the whole run.
    expect(timeline.violations).toEqual([]);
  });
});
