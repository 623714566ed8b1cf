// The system a soak run churns, with the product in processes of its own, as installed:
// - two clusters (real control planes with KWOK Nodes, the BerthLease CRD, the install's RBAC, webhook
//   Service and fail-closed webhook configurations: OperatorCluster of
//   test/integration/reliability/operator-cluster.ts), each with one operator replica: `berth-operator
//   run` compiled as the image ships it (scripts/build.ts) in a child process, with the image's and the
//   install's Node.js environment (test/helpers/image.ts), leader election with the install's
//   durations, workload admission (selfsigned, the leader registers the caBundle), the managed-workload
//   controllers and the node taint guard, talking to its API server through the cluster's fault proxy;
// - one central lease server (`berth-operator central`, compiled, HTTPS, mem store) in a child process,
//   which each operator reaches through its own fault front (so a central fault can hit one cluster, as
//   a partition would);
// - one injected helper Pod (helper-pod.ts: `helper acquire`, then the `helper renew` sidecar, compiled)
//   holding a lease of its own at the central server for the whole run, straight (no faults);
// - the invariant monitor on both clusters.
// The fault fronts, the API proxies, the churn and the monitor stay in the soak's process (the harness).
// Every product process gets INSPECT_OPTION in its NODE_OPTIONS, so that probe.ts can measure it.
import { mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import type { V1Deployment } from '@kubernetes/client-node';
import { build } from '../../scripts/build.ts';
import { find, parseManifests } from '../../scripts/install-manifest.ts';
import { nodeTaintRbacObjects } from '../../src/nodetaint/rbac.ts';
import { CentralFaultFront } from '../helpers/central-faults.ts';
import { centralTls } from '../helpers/central-tls.ts';
import {
  type CentralProcess,
  type HelperPod,
  startCentralProcess,
  startHelperPod,
} from '../helpers/helper-pod.ts';
import { imageEnv, nodeOptionsInContainer, shippedEnv } from '../helpers/image.ts';
import { InvariantMonitor } from '../helpers/invariants.ts';
import type { OperatorProcess } from '../helpers/operator-process.ts';
import {
  createObjects,
  OPERATOR_NS,
  OperatorCluster,
  SERVICE_ACCOUNT,
} from '../integration/reliability/operator-cluster.ts';
import { INSPECT_OPTION, ProcessProbe } from './probe.ts';
import { LEADER_ELECTION } from './timing.ts';

/** Agent Pods of the node taint guard live in the operator namespace (its default). */
export const AGENT_NS = OPERATOR_NS;
export const AGENT_LABEL = 'app.kubernetes.io/name';
export const AGENT_VALUE = 'aether-agent';
/** Short, so that taints are re-armed during a run. */
const TAINT_GRACE = '2s';
/** How long a restarted operator may take to be ready (a kubelet's startup probe would allow as much). */
const RESTART_TIMEOUT_MS = 120_000;
/** The helper Pod's lease at the central server (a namespace/name no BerthLease of the churn uses). */
const HELPER_LEASE = 'soak-helper';

export interface Site {
  name: string;
  cluster: OperatorCluster;
  front: CentralFaultFront;
  /** The current operator process (a new one after each restart). */
  operator: OperatorProcess;
  restarts: number;
}

export interface World {
  central: CentralProcess;
  helper: HelperPod;
  sites: Site[];
  monitor: InvariantMonitor;
  /** One per product process: `operator-east`, `operator-west`, `central`, `helper`. */
  probes: ProcessProbe[];
  /** The Node.js environment each kind of product process runs with. */
  env: Record<string, string>;
  /**
   * The failures that end a run: the central server or the helper sidecar exited, or an operator did not
   * come back within RESTART_TIMEOUT_MS of its restart.
   */
  exits(): string[];
  /**
   * Operators that exited (`run` exits on lost leadership, by design), started again as the kubelet
   * restarts a container; each restart is logged and counted, and the exited process's log is kept.
   * Returns at once with the sites restarted now: each comes back (ready, then routed) in the background,
   * so that the run goes on meanwhile, and the fault that made the operator exit is lifted on time.
   */
  restartExited(log: (line: string) => void): Site[];
  stop(): Promise<void>;
}

const withInspector = (env: Record<string, string>): Record<string, string> => ({
  ...env,
  NODE_OPTIONS: `${env.NODE_OPTIONS ?? ''} ${INSPECT_OPTION}`.trim(),
});

/** The central server's Node.js environment: the image's, with its install's NODE_OPTIONS. */
function centralEnv(): Record<string, string> {
  const objects = parseManifests(readFileSync(join(process.cwd(), 'deploy/install-apiserver.yaml'), 'utf8'));
  const container = find<V1Deployment>(objects, 'Deployment').spec?.template.spec?.containers[0];
  const env = imageEnv();
  const options = container?.env?.find((e) => e.name === 'NODE_OPTIONS')?.value;
  const limit = container?.resources?.limits?.memory;
  if (options !== undefined)
    env.NODE_OPTIONS =
      limit === undefined ? options : nodeOptionsInContainer(options, quantityMiB(String(limit)) * 2 ** 20);
  return env;
}

function quantityMiB(q: string): number {
  const m = /^(\d+)(Mi|Gi)$/.exec(q);
  if (m === null) throw new Error(`memory limit ${q}: want Mi or Gi`);
  return Number(m[1]) * (m[2] === 'Gi' ? 1024 : 1);
}

function startOperator(
  name: string,
  cluster: OperatorCluster,
  front: CentralFaultFront,
  main: string,
  env: Record<string, string>,
): OperatorProcess {
  return cluster.startOperator({
    name: `operator-${name}`,
    central: { url: front.url, clusterId: `cluster-${name}` },
    args: [
      ...LEADER_ELECTION,
      '--node-taint-guard',
      `--agent-namespace=${AGENT_NS}`,
      `--taint-grace=${TAINT_GRACE}`,
    ],
    main,
    env: withInspector(env),
    logLimit: 1_000,
  });
}

async function startSite(
  name: string,
  cluster: OperatorCluster,
  centralUrl: string,
  main: string,
  env: Record<string, string>,
): Promise<Site> {
  // Nothing of a long run may pile up in the harness: the proxy keeps no request records (403s only),
  // the operator's log is kept as its start-up and its newest lines.
  cluster.proxy.keepRecords = false;
  const front = await CentralFaultFront.start(centralUrl);
  // The install's node-taint-guard component, for the soak's agent namespace.
  await createObjects(
    cluster.t.kc,
    nodeTaintRbacObjects({
      name: 'berth-operator-node-taint-guard',
      agentNamespace: AGENT_NS,
      subject: { kind: 'ServiceAccount', name: SERVICE_ACCOUNT, namespace: OPERATOR_NS },
    }),
  );
  const operator = startOperator(name, cluster, front, main, env);
  await operator.ready(90_000);
  await cluster.route([operator]);
  await cluster.admissionWorks(90_000);
  return { name, cluster, front, operator, restarts: 0 };
}

/** What a product process logged (its start-up and newest lines) and its stderr, for a report. */
function dumpLog(dir: string, name: string, lines: readonly object[], stderr: string): void {
  mkdirSync(dir, { recursive: true });
  writeFileSync(
    join(dir, `${name}.log`),
    `${lines.map((l) => JSON.stringify(l)).join('\n')}\n--- stderr ---\n${stderr.slice(-20_000)}`,
  );
}

async function stopSite(site: Site): Promise<void> {
  site.cluster.proxy.clear();
  site.operator.kill('SIGTERM');
  const killer = setTimeout(() => site.operator.kill('SIGKILL'), 40_000);
  await site.operator.exited;
  clearTimeout(killer);
  await site.front.stop();
  await site.cluster.stop();
}

/** Starts everything; `dir` holds the central certificate and the helper Pod's state. */
export async function startWorld(dir: string, log: (line: string) => void): Promise<World> {
  mkdirSync(dir, { recursive: true });
  // Inside the checkout (gitignored), where the compiled imports resolve node_modules, as in the image.
  const buildDir = join(process.cwd(), 'build/soak');
  log(`soak: building the operator as the image ships it into ${buildDir}`);
  const main = build(buildDir);
  const operatorEnv = shippedEnv();
  const tls = await centralTls();
  const certFile = join(dir, 'central.crt');
  const keyFile = join(dir, 'central.key');
  writeFileSync(certFile, tls.cert);
  writeFileSync(keyFile, tls.key, { mode: 0o600 });
  const cEnv = centralEnv();
  const central = await startCentralProcess({
    certFile,
    keyFile,
    args: ['--store-backend=mem'],
    main,
    env: withInspector(cEnv),
  });
  const sites: Site[] = [];
  const names = ['east', 'west'];
  const started = await Promise.allSettled(names.map(() => OperatorCluster.start()));
  const clusters = started.flatMap((r) => (r.status === 'fulfilled' ? [r.value] : []));
  let helper: HelperPod | undefined;
  const probes: ProcessProbe[] = [];
  try {
    const failed = started.find((r) => r.status === 'rejected');
    if (failed !== undefined) throw failed.reason;
    for (const [i, cluster] of clusters.entries())
      sites.push(await startSite(names[i] ?? '', cluster, central.url, main, operatorEnv));
    const hEnv = imageEnv();
    helper = await startHelperPod({
      name: 'soak-helper',
      dir: join(dir, 'helper'),
      main,
      env: withInspector({
        ...hEnv,
        BERTH_LEASE_NAME: HELPER_LEASE,
        BERTH_TTL_SECONDS: '15',
        BERTH_HEARTBEAT_SECONDS: '2',
        BERTH_API_SERVER: central.url,
        BERTH_CA_BUNDLE_FILE: tls.caFile,
        BERTH_CLUSTER_ID: 'cluster-east',
      }),
    });
    await helper.waitFor('running', 60_000);
    const sidecar = helper.sidecar;
    if (sidecar === undefined) throw new Error('the helper Pod has no sidecar');
    for (const site of sites)
      probes.push(
        new ProcessProbe(`operator-${site.name}`, () => ({
          pid: site.operator.child.pid ?? 0,
          stderr: () => site.operator.stderr(),
        })),
      );
    probes.push(
      new ProcessProbe('central', () => ({
        pid: central.proc.child.pid ?? 0,
        stderr: () => central.proc.stderr(),
      })),
    );
    probes.push(
      new ProcessProbe('helper', () => ({ pid: sidecar.child.pid ?? 0, stderr: () => sidecar.stderr() })),
    );
    for (const p of probes) await p.ready();
    const monitor = await InvariantMonitor.start(sites.map((s) => ({ name: s.name, kc: s.cluster.t.kc })));
    const h = helper;
    const logs = join(dir, 'logs');
    const restarting = new Set<Site>();
    const restartFailures: string[] = [];
    return {
      central,
      helper: h,
      sites,
      monitor,
      probes,
      env: {
        operator: operatorEnv.NODE_OPTIONS ?? '',
        central: cEnv.NODE_OPTIONS ?? '',
        helper: hEnv.NODE_OPTIONS ?? '',
      },
      exits() {
        const out = [...restartFailures];
        if (central.proc.hasExited()) out.push(`central exited: ${central.proc.stderr().slice(-300)}`);
        if (sidecar.hasExited()) out.push(`helper sidecar exited: ${sidecar.stderr().slice(-300)}`);
        return out;
      },
      restartExited(log) {
        const exited = sites.filter((site) => site.operator.hasExited() && !restarting.has(site));
        for (const site of exited) {
          const old = site.operator;
          const { exitCode, signalCode } = old.child;
          const stopped = old.logs().findLast((l) => l.msg === 'berth-operator stopped');
          const kept = `operator-${site.name}.${site.restarts}`;
          dumpLog(logs, kept, old.logs(), old.stderr());
          log(
            `soak: operator-${site.name} exited (${exitCode ?? signalCode}${stopped ? `: ${String(stopped.reason)}` : ''}; log in ${join(logs, `${kept}.log`)}); restarting it`,
          );
          const next = startOperator(site.name, site.cluster, site.front, main, operatorEnv);
          site.operator = next;
          site.restarts++;
          restarting.add(site);
          void (async () => {
            await next.ready(RESTART_TIMEOUT_MS);
            await site.cluster.route([next]);
          })().then(
            () => restarting.delete(site),
            (err: unknown) => {
              restartFailures.push(
                `operator-${site.name} did not come back after its restart: ${err instanceof Error ? err.message : String(err)}`,
              );
            },
          );
        }
        return exited;
      },
      async stop() {
        for (const s of sites) dumpLog(logs, `operator-${s.name}`, s.operator.logs(), s.operator.stderr());
        dumpLog(logs, 'central', central.proc.logs().slice(-2_000), central.proc.stderr());
        dumpLog(logs, 'helper', sidecar.logs().slice(-2_000), sidecar.stderr());
        await monitor.stop();
        await h.terminate();
        for (const site of sites) await stopSite(site);
        await central.stop();
      },
    };
  } catch (err) {
    helper?.killAll();
    for (const site of sites) await stopSite(site).catch(() => {});
    for (const cluster of clusters.slice(sites.length)) await cluster.stop().catch(() => {});
    await central.stop();
    throw err;
  }
}
