// Failover benchmark: operator processes (`berth-operator run --leader-elect`, as deployed) against real
// control planes (OperatorCluster: kube-apiserver, etcd, the controllers, the scheduler and KWOK Nodes, whose
// Pods run as soon as they are bound), killed the two ways a replica goes away.
//   leader_graceful  SIGTERM of the leader (it releases its Lease on the way out) until the standby
//                    replica's first BerthLease reconcile (its controller_runtime_reconcile_total > 0);
//   leader_crash     SIGKILL of the leader (the Lease has to expire) until the standby's first reconcile;
//   managed          two clusters sharing one central lease server, a managed Deployment guarded by one
//                    BerthLease in each: SIGKILL of the holding cluster's operator until every replica
//                    of the other cluster is created and ungated.
// Targets: crash <= lease duration + retry period; graceful <= 4 s; managed <= TTL + heartbeat + 2 s.
// Timings are polled every 20 ms. The full run uses the default leader-election durations (15 s / 10 s /
// 2 s) and the default lease TTL / heartbeat (30 s / 10 s); --quick shorter ones. The managed figures now
// include the real Deployment and ReplicaSet controllers, which create the Pods the operator ungates.
import { AppsV1Api, CoreV1Api, type V1Pod } from '@kubernetes/client-node';
import { startCentralServer } from '../../src/central/server.ts';
import { createLogger } from '../../src/observability/logger.ts';
import { centralTls } from '../helpers/central-tls.ts';
import type { OperatorProcess } from '../helpers/operator-process.ts';
import { appDeployment, deploymentLease, GATE } from '../integration/managed/harness.ts';
import { NS, OperatorCluster } from '../integration/reliability/operator-cluster.ts';
import { stopAtExit } from './controlplane.ts';

type Figures = Record<string, number | string | boolean>;

export interface FailoverBenchOptions {
  /** Leader election durations, seconds. */
  leaseDurationSeconds: number;
  renewDeadlineSeconds: number;
  retryPeriodSeconds: number;
  /** The managed BerthLease's TTL and heartbeat, seconds. */
  ttlSeconds: number;
  heartbeatSeconds: number;
  replicas: number;
  /** The two-cluster scenario (--quick leaves it out to stay within its time). */
  managed: boolean;
}

const POLL_MS = 20;
const APP = 'app';
const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/** Polls `probe` until it is true; the seconds from `since` to then (NaN past `timeoutMs`). */
async function secondsUntil(
  since: number,
  probe: () => Promise<boolean>,
  timeoutMs: number,
): Promise<number> {
  while (performance.now() - since < timeoutMs) {
    if (await probe().catch(() => false)) return (performance.now() - since) / 1000;
    await sleep(POLL_MS);
  }
  return Number.NaN;
}

/** The operator's BerthLease reconciles so far, from its /metrics. */
async function reconciles(op: OperatorProcess): Promise<number> {
  const text = await (await fetch(`http://${await op.metrics()}/metrics`)).text();
  return text
    .split('\n')
    .filter(
      (l) => l.startsWith('controller_runtime_reconcile_total{') && l.includes('controller="berthlease"'),
    )
    .reduce((sum, l) => sum + Number(l.split(' ').at(-1)), 0);
}

const leaderFlags = (o: FailoverBenchOptions): string[] => [
  `--leader-election-lease-duration=${o.leaseDurationSeconds * 1000}ms`,
  `--leader-election-renew-deadline=${o.renewDeadlineSeconds * 1000}ms`,
  `--leader-election-retry-period=${o.retryPeriodSeconds * 1000}ms`,
];

/** Starts a replica and waits until it serves /readyz. */
async function replica(
  cluster: OperatorCluster,
  name: string,
  args: string[],
  central: { url: string; clusterId: string },
): Promise<OperatorProcess> {
  const op = cluster.startOperator({ name, args, central });
  await op.ready(60_000);
  return op;
}

async function leaderFailover(o: FailoverBenchOptions, log: (msg: string) => void): Promise<Figures> {
  const central = await startCentralServer({
    tls: await centralTls(),
    logger: createLogger({ level: 'silent' }),
  });
  const cluster = await OperatorCluster.start();
  stopAtExit(cluster.t.controlPlane);
  const ops: OperatorProcess[] = [];
  try {
    const ids = { url: central.url, clusterId: 'bench-east' };
    // One lease, so a new leader has something to reconcile as soon as its controllers start.
    await cluster.createLease('failover', {
      leaseName: 'failover',
      holderIdentity: 'unused-with-cluster-id',
      ttlSeconds: 30,
      heartbeatIntervalSeconds: 10,
      semantics: 'at-most-once',
    });
    const start = async (name: string): Promise<OperatorProcess> => {
      const op = await replica(cluster, name, leaderFlags(o), ids);
      ops.push(op);
      return op;
    };
    const leading = async (op: OperatorProcess): Promise<boolean> =>
      (await cluster.leaderHolder()) === (await op.identity()) && (await reconciles(op)) > 0;
    const out: Figures = {};
    // Two replicas started together; then graceful (SIGTERM of the leader), a third replica, and crash
    // (SIGKILL of the new leader).
    let replicas = await Promise.all([start('replica-1'), start('replica-2')]);
    for (const [kind, signal] of [
      ['graceful', 'SIGTERM'],
      ['crash', 'SIGKILL'],
    ] as const) {
      let leader: OperatorProcess | undefined;
      await secondsUntil(
        performance.now(),
        async () => {
          for (const r of replicas) if (await leading(r)) leader = r;
          return leader !== undefined;
        },
        60_000,
      );
      if (leader === undefined) throw new Error('failover: no replica became the leader');
      const standby = replicas.find((r) => r !== leader)!;
      if ((await reconciles(standby)) !== 0)
        throw new Error('failover: the standby reconciled before leading');
      log(`failover: ${signal} to the leader`);
      const killed = performance.now();
      leader.kill(signal);
      const timeout = (o.leaseDurationSeconds + o.retryPeriodSeconds) * 3000;
      const acquired = secondsUntil(
        killed,
        async () => (await cluster.leaderHolder()) === (await standby.identity()),
        timeout,
      );
      const reconciled = await secondsUntil(killed, async () => (await reconciles(standby)) > 0, timeout);
      out[`leader_${kind}_to_first_reconcile_seconds`] = reconciled;
      out[`leader_${kind}_to_lease_acquired_seconds`] = await acquired;
      const exit = await leader.exited;
      out[`leader_${kind}_exit`] = exit.signal ?? String(exit.code);
      log(`failover: ${kind}: first reconcile of the new leader ${reconciled.toFixed(2)} s after ${signal}`);
      if (kind === 'graceful') replicas = [standby, await start('replica-3')];
    }
    return out;
  } finally {
    for (const op of ops) op.kill('SIGKILL');
    await Promise.all(ops.map((op) => op.exited));
    await cluster.stop();
    await central.stop();
  }
}

const ungated = (pod: V1Pod): boolean =>
  pod.metadata?.deletionTimestamp === undefined &&
  !(pod.spec?.schedulingGates ?? []).some((g) => g.name === GATE);

async function managedFailover(o: FailoverBenchOptions, log: (msg: string) => void): Promise<Figures> {
  const central = await startCentralServer({
    tls: await centralTls(),
    logger: createLogger({ level: 'silent' }),
  });
  const clusters: OperatorCluster[] = [];
  const ops = new Map<OperatorCluster, OperatorProcess>();
  try {
    for (const id of ['east', 'west']) {
      const cluster = await OperatorCluster.start();
      stopAtExit(cluster.t.controlPlane);
      clusters.push(cluster);
      const op = await replica(cluster, `managed-${id}`, [], { url: central.url, clusterId: id });
      ops.set(cluster, op);
      await cluster.route([op]);
      await cluster.admissionWorks();
    }
    for (const cluster of clusters) {
      await cluster.createLease(
        APP,
        deploymentLease(APP, o.replicas, {
          leaseName: 'bench-singleton',
          ttlSeconds: o.ttlSeconds,
          heartbeatIntervalSeconds: o.heartbeatSeconds,
        }),
      );
      await cluster.t.kc
        .makeApiClient(AppsV1Api)
        .createNamespacedDeployment({ namespace: NS, body: appDeployment(APP, 0) });
    }
    const running = async (cluster: OperatorCluster): Promise<number> => {
      const pods = await cluster.t.kc
        .makeApiClient(CoreV1Api)
        .listNamespacedPod({ namespace: NS, labelSelector: `app=${APP}` });
      return pods.items.filter(ungated).length;
    };
    const t0 = performance.now();
    let holder: OperatorCluster | undefined;
    await secondsUntil(
      t0,
      async () => {
        for (const c of clusters) if ((await c.lease(APP))?.status?.leaseState === 'held') holder = c;
        return holder !== undefined && (await running(holder)) === o.replicas;
      },
      60_000,
    );
    if (holder === undefined) throw new Error('failover: neither cluster came to hold the lease');
    const standby = clusters.find((c) => c !== holder)!;
    const out: Figures = { managed_first_hold_seconds: (performance.now() - t0) / 1000 };
    if ((await running(standby)) !== 0) throw new Error('failover: the standby runs replicas');
    log('failover: SIGKILL to the holding cluster operator');
    const killed = performance.now();
    ops.get(holder)?.kill('SIGKILL');
    const timeout = (o.ttlSeconds + o.heartbeatSeconds) * 3000;
    const first = secondsUntil(killed, async () => (await running(standby)) > 0, timeout);
    const all = await secondsUntil(killed, async () => (await running(standby)) === o.replicas, timeout);
    out.managed_holder_killed_to_first_pod_ungated_seconds = await first;
    out.managed_holder_killed_to_all_pods_ungated_seconds = all;
    log(
      `failover: managed: ${o.replicas} Pods ungated in the other cluster ${all.toFixed(2)} s after SIGKILL`,
    );
    return out;
  } finally {
    for (const op of ops.values()) op.kill('SIGKILL');
    await Promise.all([...ops.values()].map((op) => op.exited));
    for (const c of clusters) await c.stop();
    await central.stop();
  }
}

export async function benchFailover(o: FailoverBenchOptions, log: (msg: string) => void): Promise<Figures> {
  const out: Figures = {
    leader_election_lease_duration_seconds: o.leaseDurationSeconds,
    leader_election_renew_deadline_seconds: o.renewDeadlineSeconds,
    leader_election_retry_period_seconds: o.retryPeriodSeconds,
    managed_ttl_seconds: o.ttlSeconds,
    managed_heartbeat_seconds: o.heartbeatSeconds,
    managed_replicas: o.replicas,
    poll_interval_ms: POLL_MS,
    api_server:
      'real control planes (OperatorCluster: kube-apiserver, etcd, controllers, scheduler, KWOK Nodes); the operators reach them as their ServiceAccount through an ApiProxy in this process',
  };
  Object.assign(out, await leaderFailover(o, log));
  if (o.managed) Object.assign(out, await managedFailover(o, log));
  else out.managed_skipped = 'left out of --quick (two control planes and two operators take too long)';
  const within = (key: string, limit: number): string => ((out[key] as number) <= limit ? 'met' : 'missed');
  out.target_crash_within_lease_duration_plus_retry_period = within(
    'leader_crash_to_first_reconcile_seconds',
    o.leaseDurationSeconds + o.retryPeriodSeconds,
  );
  out.target_graceful_within_4_seconds = within('leader_graceful_to_first_reconcile_seconds', 4);
  if (o.managed)
    out.target_managed_within_ttl_plus_heartbeat_plus_2_seconds = within(
      'managed_holder_killed_to_all_pods_ungated_seconds',
      o.ttlSeconds + o.heartbeatSeconds + 2,
    );
  return out;
}
