// Integration harness: the guard runs as its own service account with only the RBAC objects of
// src/nodetaint/rbac.ts (the sandbox enforces RBAC), against Nodes and agent Pods the tests create and
// whose status (the Ready condition) they write like a kubelet would. Time that decides (the grace
// window, requeues) comes from a ManualClock; everything else is real.
import {
  CoreV1Api,
  EventsV1Api,
  type EventsV1Event,
  type KubeConfig,
  PatchStrategy,
  RbacAuthorizationV1Api,
  setHeaderOptions,
  type V1ClusterRole,
  type V1ClusterRoleBinding,
  type V1Node,
  type V1Pod,
  type V1PodCondition,
  type V1Role,
  type V1RoleBinding,
  type V1Taint,
} from '@kubernetes/client-node';
import type { Registry } from 'prom-client';
import { parseFlags } from '../../../src/cli.ts';
import { KubeTransport } from '../../../src/kube/client.ts';
import { ManualClock } from '../../../src/kube/clock.ts';
import { EventRecorder, eventSinkFor } from '../../../src/kube/events.ts';
import { type NodeTaintConfig, nodeTaintFlags, parseNodeTaintConfig } from '../../../src/nodetaint/config.ts';
import { NodeTaintGuard } from '../../../src/nodetaint/controller.ts';
import { nodeTaintRbacObjects } from '../../../src/nodetaint/rbac.ts';
import { createRegistry } from '../../../src/observability/metrics.ts';
import { kubeConfigFrom, type TestSandbox } from '../../helpers/sandbox.ts';
import { captureLogs, type LogCapture } from '../../unit/nodetaint/fixtures.ts';

export const AGENT_NS = 'aether-system';
export const OPERATOR_NS = 'berth-system';
export const SERVICE_ACCOUNT = 'berth-operator';
export const GUARD_USER = `system:serviceaccount:${OPERATOR_NS}:${SERVICE_ACCOUNT}`;
export const TAINT_KEY = 'aether.io/agent-not-ready';
export const GRACE_MS = 300;
/** A whole-second `lastTransitionTime` stands for the end of its second (decide.ts). */
export const SECOND_END = 999;
export const AGENT_LABELS = { 'app.kubernetes.io/name': 'aether-agent' };

const merge = setHeaderOptions('Content-Type', PatchStrategy.MergePatch);
const jsonPatch = setHeaderOptions('Content-Type', PatchStrategy.JsonPatch);

/** RFC 3339 at whole seconds, as Kubernetes writes `metav1.Time`. */
export const rfc3339 = (ms: number): string => new Date(ms).toISOString().replace(/\.\d+Z$/, 'Z');

export class Cluster {
  readonly t: TestSandbox;
  readonly core: CoreV1Api;
  readonly events: EventsV1Api;

  constructor(t: TestSandbox) {
    this.t = t;
    this.core = t.kc.makeApiClient(CoreV1Api);
    this.events = t.kc.makeApiClient(EventsV1Api);
  }

  /** Namespaces, and the guard's RBAC objects bound to its service account. */
  async setUp(): Promise<void> {
    for (const name of [AGENT_NS, OPERATOR_NS])
      await this.core.createNamespace({ body: { metadata: { name } } });
    const rbac = this.t.kc.makeApiClient(RbacAuthorizationV1Api);
    const objects = nodeTaintRbacObjects({
      name: 'berth-operator-node-taint-guard',
      agentNamespace: AGENT_NS,
      subject: { kind: 'ServiceAccount', name: SERVICE_ACCOUNT, namespace: OPERATOR_NS },
    });
    for (const o of objects) {
      const ns = o.metadata?.namespace ?? '';
      if (o.kind === 'ClusterRole') await rbac.createClusterRole({ body: o as V1ClusterRole });
      else if (o.kind === 'ClusterRoleBinding')
        await rbac.createClusterRoleBinding({ body: o as V1ClusterRoleBinding });
      else if (o.kind === 'Role') await rbac.createNamespacedRole({ namespace: ns, body: o as V1Role });
      else await rbac.createNamespacedRoleBinding({ namespace: ns, body: o as V1RoleBinding });
    }
  }

  guardKubeConfig(): KubeConfig {
    return kubeConfigFrom(this.t.sandbox.users.serviceAccount(OPERATOR_NS, SERVICE_ACCOUNT).kubeconfig);
  }

  async createNode(name: string, taints: V1Taint[] = []): Promise<void> {
    await this.core.createNode({ body: { metadata: { name }, spec: taints.length ? { taints } : {} } });
  }

  async node(name: string): Promise<V1Node> {
    return this.core.readNode({ name });
  }

  async taints(name: string): Promise<V1Taint[]> {
    return (await this.node(name)).spec?.taints ?? [];
  }

  async guardTaints(name: string): Promise<V1Taint[]> {
    return (await this.taints(name)).filter((t) => t.key === TAINT_KEY);
  }

  /** Appends a taint with a JSON patch guarded by a `test` of the resourceVersion. */
  async addTaint(name: string, taint: V1Taint): Promise<void> {
    const n = await this.node(name);
    const ops = n.spec?.taints
      ? [{ op: 'add', path: '/spec/taints/-', value: taint }]
      : [{ op: 'add', path: '/spec/taints', value: [taint] }];
    await this.core.patchNode(
      {
        name,
        body: [{ op: 'test', path: '/metadata/resourceVersion', value: n.metadata?.resourceVersion }, ...ops],
      },
      jsonPatch,
    );
  }

  /** What the agent's remover does: drop every taint with the key, keep the others (locked). */
  async removeGuardTaint(name: string): Promise<void> {
    const n = await this.node(name);
    const taints = (n.spec?.taints ?? []).filter((t) => t.key !== TAINT_KEY);
    await this.core.patchNode(
      { name, body: { metadata: { resourceVersion: n.metadata?.resourceVersion }, spec: { taints } } },
      merge,
    );
  }

  async createPod(
    name: string,
    nodeName: string,
    o: { namespace?: string; labels?: Record<string, string> } = {},
  ): Promise<void> {
    const body: V1Pod = {
      metadata: { name, labels: o.labels ?? AGENT_LABELS },
      spec: { nodeName, containers: [{ name: 'agent', image: 'aether/agent:1' }] },
    };
    await this.core.createNamespacedPod({ namespace: o.namespace ?? AGENT_NS, body });
  }

  /** Writes the Ready condition through the status subresource, as the kubelet does. */
  async setReady(
    name: string,
    ready: boolean,
    since: number,
    o: { namespace?: string; restartCount?: number } = {},
  ): Promise<void> {
    const namespace = o.namespace ?? AGENT_NS;
    const current = await this.core.readNamespacedPodStatus({ name, namespace });
    const conditions: V1PodCondition[] = [
      ...(current.status?.conditions ?? []).filter((c) => c.type !== 'Ready'),
      {
        type: 'Ready',
        status: ready ? 'True' : 'False',
        lastTransitionTime: rfc3339(since) as unknown as Date,
      },
    ];
    const status: Record<string, unknown> = { phase: 'Running', conditions };
    if (o.restartCount !== undefined)
      status.containerStatuses = [
        {
          name: 'agent',
          image: 'aether/agent:1',
          imageID: 'sha256:1',
          ready,
          restartCount: o.restartCount,
          started: ready,
        },
      ];
    await this.core.patchNamespacedPodStatus({ name, namespace, body: { status } }, merge);
  }

  /** A graceful delete: a Pod bound to a node stays terminating (no kubelet to finish it). */
  async deletePod(name: string, o: { now?: boolean; namespace?: string } = {}): Promise<void> {
    await this.core.deleteNamespacedPod({
      name,
      namespace: o.namespace ?? AGENT_NS,
      ...(o.now ? { gracePeriodSeconds: 0 } : {}),
    });
  }

  async nodeEvents(name: string): Promise<EventsV1Event[]> {
    const list = await this.events.listNamespacedEvent({ namespace: 'default' });
    return list.items.filter((e) => e.regarding?.kind === 'Node' && e.regarding?.name === name);
  }

  /** Deletes the nodes and every pod on them (in any namespace), at once. */
  async cleanUp(nodes: string[]): Promise<void> {
    const pods = await this.core.listPodForAllNamespaces();
    for (const p of pods.items) {
      if (!nodes.includes(p.spec?.nodeName ?? '')) continue;
      await this.core
        .deleteNamespacedPod({
          name: p.metadata!.name!,
          namespace: p.metadata!.namespace!,
          gracePeriodSeconds: 0,
        })
        .catch(() => {});
    }
    for (const name of nodes) await this.core.deleteNode({ name }).catch(() => {});
  }

  /** Counts the guard's patches of a node (a rule with no effect, only counted). */
  countGuardPatches(name: string): { hits(): number; remove(): void } {
    return this.t.sandbox.faults.inject({ verbs: ['patch'], resource: 'nodes', name, user: GUARD_USER });
  }
}

export interface RunningGuard {
  guard: NodeTaintGuard;
  clock: ManualClock;
  registry: Registry;
  logs: LogCapture;
  recorder: EventRecorder;
  /** Reconciles finished so far (controller_runtime_reconcile_total, all results). */
  reconciles(): Promise<number>;
  metric(name: string): Promise<number>;
  stop(): Promise<void>;
}

/** `--taint-grace` etc. through the real flag parser, then the injected grace. */
export function guardConfig(): NodeTaintConfig {
  const values = parseFlags({ name: 'run', summary: '', flags: nodeTaintFlags }, [
    `--agent-namespace=${AGENT_NS}`,
    `--taint-grace=${GRACE_MS}ms`,
  ]);
  return parseNodeTaintConfig(values, { operatorNamespace: OPERATOR_NS });
}

/** Whole-second start, so that the tests' `lastTransitionTime`s are exact. */
export const newClock = (): ManualClock => new ManualClock(Math.floor(Date.now() / 1000) * 1000);

export async function startGuard(
  cluster: Cluster,
  clock: ManualClock,
  instance = 'a',
): Promise<RunningGuard> {
  const g = createGuard(cluster, clock, instance);
  await g.guard.start();
  return g;
}

/** A guard not started yet (e.g. for a Manager). */
export function createGuard(cluster: Cluster, clock: ManualClock, instance = 'a'): RunningGuard {
  const kc = cluster.guardKubeConfig();
  const transport = new KubeTransport(kc);
  const registry = createRegistry({ defaultMetrics: false });
  const logs = captureLogs();
  const recorder = new EventRecorder({
    sink: eventSinkFor(kc),
    reportingController: 'berth.skaphos.io/berth-operator',
    reportingInstance: `berth-operator-${instance}`,
    logger: logs.logger,
  });
  const guard = new NodeTaintGuard({
    config: guardConfig(),
    transport,
    recorder,
    clock,
    registry,
    logger: logs.logger,
  });
  const metric = async (name: string): Promise<number> => {
    const values = (await registry.getSingleMetric(name)?.get())?.values ?? [];
    return values.reduce((sum, v) => sum + v.value, 0);
  };
  return {
    guard,
    clock,
    registry,
    logs,
    recorder,
    reconciles: () => metric('controller_runtime_reconcile_total'),
    metric,
    async stop() {
      await guard.stop();
      await recorder.flush();
      await transport.close();
    },
  };
}

/** Debug lines of the guard's reconciles of one node that ended in `reason` (decide.ts ForgetReason). */
export function forgets(g: RunningGuard, node: string, reason: string): number {
  return g.logs.lines().filter((l) => l.name === node && l.reason === reason).length;
}
