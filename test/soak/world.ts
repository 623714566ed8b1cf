// The system a soak run churns: two clusters (real control planes with KWOK Nodes, RBAC, the BerthLease
// CRD and the operator's real WorkloadAdmission webhooks: ManagedCluster of
// test/integration/managed/harness.ts), each with its operator in-process (BerthLease and managed
// controllers talking to the API server through the cluster's fault proxy, plus the node taint guard),
// one embedded central lease server that each operator reaches through its own fault front (so a central
// fault can hit one cluster, as a partition would), and the invariant monitor on both clusters.

import { type CentralServer, startCentralServer } from '../../src/central/server.ts';
import { parseFlags } from '../../src/cli.ts';
import { KubeTransport } from '../../src/kube/transport.ts';
import { NodeTaintGuard, nodeTaintFlags, parseNodeTaintConfig } from '../../src/nodetaint/index.ts';
import { createLogger } from '../../src/observability/logger.ts';
import { createRegistry } from '../../src/observability/metrics.ts';
import { CentralFaultFront } from '../helpers/central-faults.ts';
import { centralTls } from '../helpers/central-tls.ts';
import { InvariantMonitor } from '../helpers/invariants.ts';
import {
  createManagedOperator,
  ManagedCluster,
  type ManagedOperator,
  OPERATOR_NS,
} from '../integration/managed/harness.ts';

/** Agent Pods of the node taint guard live in the operator namespace (its default). */
export const AGENT_NS = OPERATOR_NS;
export const AGENT_LABEL = 'app.kubernetes.io/name';
export const AGENT_VALUE = 'aether-agent';
/** Short, so that taints are re-armed during a run. */
const TAINT_GRACE = '2s';

export interface Site {
  name: string;
  cluster: ManagedCluster;
  front: CentralFaultFront;
  operator: ManagedOperator;
  guard: { guard: NodeTaintGuard; transport: KubeTransport };
}

export interface World {
  central: CentralServer;
  sites: Site[];
  monitor: InvariantMonitor;
  stop(): Promise<void>;
}

async function startSite(name: string, cluster: ManagedCluster, central: CentralServer): Promise<Site> {
  const front = await CentralFaultFront.start(central.url);
  const operator = createManagedOperator(cluster, { clusterId: `cluster-${name}`, centralUrl: front.url });
  const config = parseNodeTaintConfig(
    parseFlags({ name: 'run', summary: '', flags: nodeTaintFlags }, [
      '--node-taint-guard',
      `--agent-namespace=${AGENT_NS}`,
      `--taint-grace=${TAINT_GRACE}`,
    ]),
    { operatorNamespace: OPERATOR_NS },
  );
  // The guard acts as cluster admin here: the soak's API faults target the operator's own account.
  const transport = new KubeTransport(cluster.t.kc);
  const guard = new NodeTaintGuard({
    config,
    transport,
    registry: createRegistry({ defaultMetrics: false }),
  });
  await operator.start();
  await guard.start();
  return { name, cluster, front, operator, guard: { guard, transport } };
}

async function stopSite(site: Site): Promise<void> {
  site.cluster.proxy.clear();
  await site.front.stop();
  await site.operator.stop();
  await site.guard.guard.stop();
  await site.guard.transport.close();
  await site.cluster.stop();
}

export async function startWorld(): Promise<World> {
  const central = await startCentralServer({
    tls: await centralTls(),
    logger: createLogger({ level: 'silent' }),
    registry: createRegistry({ defaultMetrics: false }),
  });
  const sites: Site[] = [];
  const names = ['east', 'west'];
  const started = await Promise.allSettled(names.map((name) => ManagedCluster.start(name)));
  const clusters = started.flatMap((r) => (r.status === 'fulfilled' ? [r.value] : []));
  try {
    const failed = started.find((r) => r.status === 'rejected');
    if (failed !== undefined) throw failed.reason;
    for (const [i, cluster] of clusters.entries()) {
      sites.push(await startSite(names[i] ?? '', cluster, central));
    }
    const monitor = await InvariantMonitor.start(sites.map((s) => ({ name: s.name, kc: s.cluster.t.kc })));
    return {
      central,
      sites,
      monitor,
      async stop() {
        await monitor.stop();
        for (const site of sites) await stopSite(site);
        await central.stop();
      },
    };
  } catch (err) {
    for (const site of sites) await stopSite(site).catch(() => {});
    for (const cluster of clusters.slice(sites.length)) await cluster.stop().catch(() => {});
    await central.stop();
    throw err;
  }
}
