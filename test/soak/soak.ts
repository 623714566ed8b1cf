// One soak run: the world (world.ts: the product in processes of its own) under churn (churn.ts) and
// random faults (faults.ts), the invariant monitor on, every product process's memory sampled from
// outside (sampler.ts, probe.ts) and the harness's own health apart. At the end faults are removed and
// every live lease must converge (each managed workload running in exactly one cluster with its
// replicas, each lease held by exactly one cluster) within a bound. The run fails on an invariant
// breach, no convergence, a product process that exited, a memory trend of a product process beyond
// LIMITS (limits.ts), or the harness's event-loop lag p99 above its limit. The memory curves are
// written as an SVG picture (svg.ts); with `heapSnapshots`, heap snapshots of every process early (a
// quarter into the run) and late (at its end), for heapdiff.ts.

import { mkdirSync, writeFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { writeHeapSnapshot } from 'node:v8';
import { type KubeConfig, KubernetesObjectApi, type V1Pod } from '@kubernetes/client-node';
import { mergePatch } from '../helpers/api.ts';
import { eventually } from '../helpers/eventually.ts';
import type { Breach } from '../helpers/invariants.ts';
import { GATE, NS } from '../integration/managed/harness.ts';
import { type ActionCounts, Churn, type ChurnLimits } from './churn.ts';
import { FaultInjector } from './faults.ts';
import { LIMITS } from './limits.ts';
import { Random } from './random.ts';
import { type HealthSummary, judgeProcess, type ProcessSummary, ProductSampler, Sampler } from './sampler.ts';
import { memorySvg } from './svg.ts';
import { CRASH_WINDOW, LEASE_TIMES } from './timing.ts';
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
  /** The central certificate, the helper Pod's state, the memory curves and the snapshots go below it. */
  outDir: string;
  /** Where the memory curves go (SVG); default `<outDir>/memory.svg`. */
  svgPath?: string;
  /** Heap snapshots of every process a quarter into the run and at its end, into `<outDir>/snapshots`. */
  heapSnapshots: boolean;
  log: (line: string) => void;
}

export const DEFAULT_OPTIONS: Omit<SoakOptions, 'durationMs' | 'seed' | 'log' | 'outDir'> = {
  sampleMs: 5_000,
  churnEveryMs: 400,
  faultChance: 0.15,
  limits: { workloads: 6, leaseOnly: 6, nodes: 4, agents: 6 },
  convergeTimeoutMs: 90_000,
  injectBreach: false,
  heapSnapshots: false,
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
  /** Each product process (operator-east, operator-west, central, helper), judged against LIMITS. */
  processes: Record<string, ProcessSummary>;
  /** Samples that failed per process (not judged). */
  sampleErrors: Record<string, number>;
  /** NODE_OPTIONS per kind of product process (without the soak's inspector). */
  nodeOptions: Record<string, string>;
  /** The harness (this process): reported, only its event-loop lag is judged. */
  harness: HealthSummary;
  limits: typeof LIMITS;
  svg: string;
  snapshots: string[];
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

/** Heap snapshots of every product process and of the harness, named `<process>-<label>.heapsnapshot`. */
async function snapshots(
  world: World,
  dir: string,
  label: string,
  log: (line: string) => void,
): Promise<string[]> {
  mkdirSync(dir, { recursive: true });
  const out: string[] = [];
  for (const probe of world.probes) {
    const path = join(dir, `${probe.name}-${label}.heapsnapshot`);
    try {
      await probe.snapshot(path);
      out.push(path);
    } catch (err) {
      log(`soak: heap snapshot of ${probe.name} failed: ${(err as Error).message}; ${await probe.state()}`);
    }
  }
  const path = join(dir, `harness-${label}.heapsnapshot`);
  writeHeapSnapshot(path);
  out.push(path);
  log(`soak: heap snapshots (${label}) in ${dir}`);
  return out;
}

function writeSvg(path: string, o: SoakOptions, product: ProductSampler, harness: Sampler): void {
  const minutes = <S extends { t: number }>(samples: readonly S[], v: (s: S) => number) =>
    samples.map((s) => ({ t: Math.round((s.t / 60) * 100) / 100, v: v(s) }));
  const curves = (v: (s: { heapMB: number; rssMB: number }) => number) => [
    ...Object.entries(product.series).map(([name, samples]) => ({ name, points: minutes(samples, v) })),
    { name: 'harness (soak)', points: minutes(harness.samples, v), dashed: true },
  ];
  mkdirSync(dirname(path), { recursive: true });
  writeFileSync(
    path,
    memorySvg(`npm run soak: seed ${o.seed}, ${Math.round(o.durationMs / 60_000)} min, every fault kind`, [
      { title: 'Heap in use after a full GC (MB)', curves: curves((s) => s.heapMB) },
      { title: 'RSS (MB)', curves: curves((s) => s.rssMB) },
    ]),
  );
}

export async function runSoak(o: SoakOptions): Promise<SoakSummary> {
  const random = new Random(o.seed);
  const started = Date.now();
  o.log(`soak: seed ${o.seed}, ${Math.round(o.durationMs / 1000)} s; starting two clusters`);
  const world = await startWorld(o.outDir, o.log);
  const sampler = new Sampler();
  const product = new ProductSampler(world.probes, o.log);
  const churn = new Churn(world.sites, random, o.limits);
  const faults = new FaultInjector(world.sites, random, o.log);
  let convergence: SoakSummary['convergence'] = { ok: false, seconds: 0, pending: [] };
  let health: HealthSummary | undefined;
  let processes: Record<string, ProcessSummary> = {};
  const taken: string[] = [];
  const exits: string[] = [];
  const objects: SoakSummary['objects'] = {};
  const svg = o.svgPath ?? join(o.outDir, 'memory.svg');
  try {
    if (o.injectBreach) await startProbe(world);
    sampler.start(o.sampleMs);
    product.start(o.sampleMs);
    const end = Date.now() + o.durationMs;
    let injected = !o.injectBreach;
    let early = !o.heapSnapshots;
    let nextProgress = Date.now() + o.sampleMs;
    let nextFaultTick = Date.now();
    let reported = 0;
    while (Date.now() < end) {
      const stepStart = Date.now();
      await churn.step();
      if (Date.now() >= nextFaultTick) {
        await faults.tick(o.faultChance, Date.now() < end - o.durationMs * (1 - CRASH_WINDOW));
        nextFaultTick += 1_000;
      }
      if (!injected && Date.now() >= end - o.durationMs / 2) {
        injected = true;
        await injectTokenDecrease(world, o.log);
      }
      if (!early && Date.now() >= end - (o.durationMs * 3) / 4) {
        early = true;
        taken.push(...(await snapshots(world, join(o.outDir, 'snapshots'), 'early', o.log)));
      }
      for (const b of world.monitor.breaches().slice(reported)) {
        reported++;
        o.log(`BREACH ${b.kind} ${b.key} [${b.clusters.join(', ')}]: ${b.detail}`);
        o.log(`  leases: ${await leaseStates(world, b.key.split('/')[1] ?? '')}`);
        o.log(`  faults in force: ${faults.active().join('; ') || 'none'}`);
      }
      for (const site of world.restartExited(o.log)) product.restarted(`operator-${site.name}`);
      const gone = world.exits();
      if (gone.length > 0) {
        exits.push(...gone);
        o.log(`soak: ${gone.join('; ')}`);
        break;
      }
      if (Date.now() >= nextProgress) {
        nextProgress += o.sampleMs;
        const last = sampler.samples[sampler.samples.length - 1];
        const heaps = Object.entries(product.series)
          .map(([name, samples]) => {
            const s = samples[samples.length - 1];
            return `${name} ${s?.heapMB}/${s?.rssMB}`;
          })
          .join(', ');
        o.log(
          `soak: ${Math.round((Date.now() - started) / 1000)} s, ${churn.workloads.size} workloads, ` +
            `running east=${world.monitor.running('east')} west=${world.monitor.running('west')}, ` +
            `breaches ${world.monitor.breaches().length}; heap/rss MB ${heaps}; ` +
            `harness ${last?.heapMB}/${last?.rssMB}, lag p99 ${last?.lagP99Ms} ms`,
        );
      }
      await sleep(Math.max(0, o.churnEveryMs - (Date.now() - stepStart)));
    }
    // Health is judged over the churn; the convergence polling below is the runner's own load.
    if (o.heapSnapshots) taken.push(...(await snapshots(world, join(o.outDir, 'snapshots'), 'late', o.log)));
    processes = await product.stop();
    health = sampler.stop();
    writeSvg(svg, o, product, sampler);
    o.log(`soak: memory curves in ${svg}`);
    await faults.clear();
    o.log('soak: churn and faults stopped; waiting for convergence');
    const convergeStart = Date.now();
    let pending = await pendingConvergence(world, churn);
    while (pending.length > 0 && Date.now() - convergeStart < o.convergeTimeoutMs) {
      // An operator crashed or deposed by the last faults comes back here too.
      for (const site of world.restartExited(o.log)) product.restarted(`operator-${site.name}`);
      await sleep(500);
      pending = await pendingConvergence(world, churn);
    }
    for (const gone of world.exits()) if (!exits.includes(gone)) exits.push(gone);
    convergence = { ok: pending.length === 0, seconds: (Date.now() - convergeStart) / 1000, pending };
    await world.monitor.settle();
    for (const site of world.sites) objects[site.name] = await countObjects(site.cluster.t.kc);
  } finally {
    if (health === undefined) {
      sampler.stop();
      await product.stop().catch(() => {});
    }
    await world.stop();
  }
  const breaches = world.monitor.breaches();
  const failures: string[] = [];
  if (breaches.length > LIMITS.breaches) failures.push(`${breaches.length} invariant breach(es)`);
  if (!convergence.ok) failures.push(`no convergence within ${o.convergeTimeoutMs / 1000} s`);
  failures.push(...exits);
  for (const [name, p] of Object.entries(processes)) failures.push(...judgeProcess(name, p));
  if (health.lag.p99Ms > LIMITS.harnessLagP99Ms)
    failures.push(`event-loop lag p99 ${health.lag.p99Ms} ms above ${LIMITS.harnessLagP99Ms} ms`);
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
    processes,
    sampleErrors: product.errors,
    nodeOptions: world.env,
    harness: health,
    limits: LIMITS,
    svg,
    snapshots: taken,
    objects,
  };
}
