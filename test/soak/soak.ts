// One soak run: the world (world.ts) under churn (churn.ts) and random faults (faults.ts), the invariant
// monitor on, process health sampled (sampler.ts). At the end faults are removed and every live lease
// must converge (each managed workload running in exactly one cluster with its replicas, each lease
// held by exactly one cluster) within a bound. The run fails on an invariant breach, no convergence, a
// leak trend, or event-loop lag p99 above 100 ms.

import { setTimeout as sleep } from 'node:timers/promises';
import { type KubeConfig, KubernetesObjectApi, type V1Pod } from '@kubernetes/client-node';
import { mergePatch } from '../helpers/api.ts';
import { eventually } from '../helpers/eventually.ts';
import type { Breach } from '../helpers/invariants.ts';
import { GATE, NS } from '../integration/managed/harness.ts';
import { type ActionCounts, Churn, type ChurnLimits, LEASE_TIMES } from './churn.ts';
import { FaultInjector } from './faults.ts';
import { Random } from './random.ts';
import { type HealthSummary, LAG_P99_LIMIT_MS, leaks, Sampler } from './sampler.ts';
import { startWorld, type World } from './world.ts';

export interface SoakOptions {
  durationMs: number;
  seed: number;
  /** Health sample and progress line period. */
  sampleMs: number;
  /** Pause between churn actions. */
  churnEveryMs: number;
  /** Chance per second that a cluster without a fault gets one (API or central). */
  faultChance: number;
  limits: ChurnLimits;
  convergeTimeoutMs: number;
  /** Writes a fencing token that goes backwards halfway through (proves the run fails on a breach). */
  injectBreach: boolean;
  log: (line: string) => void;
}

export const DEFAULT_OPTIONS: Omit<SoakOptions, 'durationMs' | 'seed' | 'log'> = {
  sampleMs: 5_000,
  churnEveryMs: 400,
  faultChance: 0.15,
  limits: { workloads: 6, leaseOnly: 6, nodes: 4, agents: 6 },
  convergeTimeoutMs: 60_000,
  injectBreach: false,
};

export interface SoakSummary {
  ok: boolean;
  failures: string[];
  seed: number;
  durationS: number;
  actions: ActionCounts;
  faults: Record<string, number>;
  convergence: { ok: boolean; seconds: number; pending: string[] };
  breaches: Breach[];
  monitorWatchRestarts: number;
  health: HealthSummary;
  /** Objects stored per cluster at the end, listed through the API. */
  objects: Record<string, Record<string, number>>;
}

/** label, apiVersion, kind */
const COUNTED: Array<[string, string, string]> = [
  ['events', 'events.k8s.io/v1', 'Event'],
  ['pods', 'v1', 'Pod'],
  ['berthleases', 'berth.skaphos.io/v1alpha1', 'BerthLease'],
  ['replicasets', 'apps/v1', 'ReplicaSet'],
];

/** How many objects of each COUNTED kind the cluster holds (all namespaces). */
async function countObjects(kc: KubeConfig): Promise<Record<string, number>> {
  const api = KubernetesObjectApi.makeApiClient(kc);
  const counts: Record<string, number> = {};
  for (const [label, apiVersion, kind] of COUNTED)
    counts[label] = (await api.list(apiVersion, kind)).items.length;
  return counts;
}

const isRunningPod = (p: V1Pod): boolean =>
  p.status?.phase === 'Running' &&
  !p.metadata?.deletionTimestamp &&
  !(p.spec?.schedulingGates ?? []).some((g) => g.name === GATE);

/** What still differs from the converged state (empty when converged). */
async function pendingConvergence(world: World, churn: Churn): Promise<string[]> {
  const pending: string[] = [];
  for (const [name, replicas] of churn.workloads) {
    const states = await Promise.all(
      world.sites.map(async (s) => ({
        site: s.name,
        held: (await s.cluster.lease(name))?.status?.leaseState === 'held',
        running: (await s.cluster.pods(`app=${name}`)).filter(isRunningPod).length,
      })),
    );
    const holders = states.filter((s) => s.held);
    const ok =
      holders.length === 1 && states.every((s) => (s.held ? s.running === replicas : s.running === 0));
    if (!ok)
      pending.push(
        `${name}: ${states.map((s) => `${s.site} held=${s.held} running=${s.running}`).join(', ')} (want ${replicas})`,
      );
  }
  for (const name of churn.leaseOnlyNames()) {
    const held = await Promise.all(
      world.sites.map(async (s) => (await s.cluster.lease(name))?.status?.leaseState === 'held'),
    );
    if (held.filter(Boolean).length !== 1)
      pending.push(`${name}: held in ${held.filter(Boolean).length} clusters`);
  }
  return pending;
}

/** The BerthLease statuses of a name in every cluster, for a breach report. */
async function leaseStates(world: World, name: string): Promise<string> {
  const states = await Promise.all(
    world.sites.map(async (s) => {
      const st = (await s.cluster.lease(name).catch(() => undefined))?.status;
      const conditions = (st?.conditions ?? []).map((c) => `${c.type}=${c.status}/${c.reason}`).join(' ');
      return `${s.name}: ${st?.leaseState} token=${st?.fencingToken} phase=${st?.workload?.phase} deadline=${st?.workload?.deadline} ${conditions}`;
    }),
  );
  return states.join(' | ');
}

/** The subject of an injected breach: a lease-only BerthLease of the first cluster, held before churn and faults start. */
const PROBE = 'breach-probe';

async function startProbe(world: World): Promise<void> {
  const site = world.sites[0];
  if (site === undefined) throw new Error('no cluster for the breach probe');
  await site.cluster.createLease(PROBE, {
    leaseName: PROBE,
    holderIdentity: 'unused-with-cluster-id',
    semantics: 'at-most-once',
    ...LEASE_TIMES,
  });
  await eventually(() => (world.monitor.token(site.name, `${NS}/${PROBE}`) ?? 0) > 0, {
    timeoutMs: 20_000,
    intervalMs: 100,
  });
}

/**
 * A fencing token that goes up and back down in the probe's status (restored, so nothing locks up). The
 * probe, not whatever the churn holds at that moment, so the breach happens whatever the faults did.
 */
async function injectTokenDecrease(world: World, log: (line: string) => void): Promise<void> {
  const site = world.sites[0];
  if (site === undefined) return;
  const key = `${NS}/${PROBE}`;
  const token = world.monitor.token(site.name, key) ?? 0;
  const write = (fencingToken: number) =>
    site.cluster.custom.patchNamespacedCustomObjectStatus(
      { ...site.cluster.ref(), name: PROBE, body: { status: { fencingToken } } },
      mergePatch,
    );
  await write(token + 1);
  // The raised token must be seen before it is lowered: a watch dropped by a fault in between would
  // otherwise relist straight to the restored value and the breach would go unseen.
  await eventually(() => (world.monitor.token(site.name, key) ?? 0) >= token + 1, { timeoutMs: 10_000 });
  await write(token);
  log(`injected: ${site.name} BerthLease ${PROBE} fencingToken ${token + 1} -> ${token}`);
}

export async function runSoak(o: SoakOptions): Promise<SoakSummary> {
  const random = new Random(o.seed);
  const started = Date.now();
  o.log(`soak: seed ${o.seed}, ${Math.round(o.durationMs / 1000)} s; starting two clusters`);
  const world = await startWorld();
  const sampler = new Sampler();
  const churn = new Churn(world.sites, random, o.limits);
  const faults = new FaultInjector(world.sites, random, o.log);
  let convergence: SoakSummary['convergence'] = { ok: false, seconds: 0, pending: [] };
  let health: HealthSummary | undefined;
  const objects: SoakSummary['objects'] = {};
  try {
    if (o.injectBreach) await startProbe(world);
    sampler.start(o.sampleMs);
    const end = Date.now() + o.durationMs;
    let injected = !o.injectBreach;
    let nextProgress = Date.now() + o.sampleMs;
    let nextFaultTick = Date.now();
    let reported = 0;
    while (Date.now() < end) {
      const stepStart = Date.now();
      await churn.step();
      if (Date.now() >= nextFaultTick) {
        await faults.tick(o.faultChance);
        nextFaultTick += 1_000;
      }
      if (!injected && Date.now() >= end - o.durationMs / 2) {
        injected = true;
        await injectTokenDecrease(world, o.log);
      }
      for (const b of world.monitor.breaches().slice(reported)) {
        reported++;
        o.log(`BREACH ${b.kind} ${b.key} [${b.clusters.join(', ')}]: ${b.detail}`);
        o.log(`  leases: ${await leaseStates(world, b.key.split('/')[1] ?? '')}`);
        o.log(`  faults in force: ${faults.active().join('; ') || 'none'}`);
      }
      if (Date.now() >= nextProgress) {
        nextProgress += o.sampleMs;
        const last = sampler.samples[sampler.samples.length - 1];
        o.log(
          `soak: ${Math.round((Date.now() - started) / 1000)} s, ${churn.workloads.size} workloads, ` +
            `running east=${world.monitor.running('east')} west=${world.monitor.running('west')}, ` +
            `breaches ${world.monitor.breaches().length}, rss ${last?.rssMB} MB, handles ${last?.handles}, ` +
            `lag p99 ${last?.lagP99Ms} ms`,
        );
      }
      await sleep(Math.max(0, o.churnEveryMs - (Date.now() - stepStart)));
    }
    // Health is judged over the churn; the convergence polling below is the runner's own load.
    health = sampler.stop();
    await faults.clear();
    o.log('soak: churn and faults stopped; waiting for convergence');
    const convergeStart = Date.now();
    let pending = await pendingConvergence(world, churn);
    while (pending.length > 0 && Date.now() - convergeStart < o.convergeTimeoutMs) {
      await sleep(500);
      pending = await pendingConvergence(world, churn);
    }
    convergence = { ok: pending.length === 0, seconds: (Date.now() - convergeStart) / 1000, pending };
    await world.monitor.settle();
    for (const site of world.sites) objects[site.name] = await countObjects(site.cluster.t.kc);
  } finally {
    if (health === undefined) sampler.stop();
    await world.stop();
  }
  const breaches = world.monitor.breaches();
  const failures: string[] = [];
  if (breaches.length > 0) failures.push(`${breaches.length} invariant breach(es)`);
  if (!convergence.ok) failures.push(`no convergence within ${o.convergeTimeoutMs / 1000} s`);
  failures.push(...leaks(health, sampler.samples));
  if (health.lag.p99Ms > LAG_P99_LIMIT_MS)
    failures.push(`event-loop lag p99 ${health.lag.p99Ms} ms above ${LAG_P99_LIMIT_MS} ms`);
  return {
    ok: failures.length === 0,
    failures,
    seed: o.seed,
    durationS: (Date.now() - started) / 1000,
    actions: churn.counts,
    faults: faults.counts,
    convergence,
    breaches,
    monitorWatchRestarts: world.monitor.watchErrors(),
    health,
    objects,
  };
}
