// Integration harness: the guard runs as its own service account with only the RBAC objects of
// src/nodetaint/rbac.ts, against a real kube-apiserver (the run's shared one: Nodes get unique names, and
// the agent and operator namespaces are the suite's own, so the guard acts only on the suite's Nodes).
// The guard's requests go through an ApiProxy (faults, counted patches). The tests create Nodes without
// KWOK's label, so that no fake kubelet touches them or their Pods, and write the agent Pods' Ready
// condition through pods/status as a kubelet would. Time that decides (the grace window, requeues) comes
// from a ManualClock; everything else is real.
import {
  CoordinationV1Api,
  CoreV1Api,
  EventsV1Api,
  type EventsV1Event,
  type KubeConfig,
  PatchStrategy,
  RbacAuthorizationV1Api,
  setHeaderOptions,
  type V1ClusterRole,
  type V1ClusterRoleBinding,
  V1MicroTime,
  type V1Node,
  type V1Pod,
  type V1PodCondition,
  type V1Role,
  type V1RoleBinding,
  type V1Taint,
} from '@kubernetes/client-node';
import type { Registry } from 'prom-client';
import { parseFlags } from '../../../src/cli.ts';
import { isNotFound } from '../../../src/kube/client.ts';
import { ManualClock } from '../../../src/kube/clock.ts';
import { EventRecorder, eventSinkFor } from '../../../src/kube/events.ts';
import { KubeTransport } from '../../../src/kube/transport.ts';
import { type NodeTaintConfig, nodeTaintFlags, parseNodeTaintConfig } from '../../../src/nodetaint/config.ts';
import { NodeTaintGuard } from '../../../src/nodetaint/controller.ts';
import { nodeTaintRbacObjects } from '../../../src/nodetaint/rbac.ts';
import { createRegistry } from '../../../src/observability/metrics.ts';
import { ApiProxy } from '../../helpers/api-proxy.ts';
import { type TestCluster, uniqueName } from '../../helpers/cluster.ts';
import { eventually } from '../../helpers/eventually.ts';
import { captureLogs, type LogCapture } from '../../unit/nodetaint/fixtures.ts';

export const SERVICE_ACCOUNT = 'berth-operator';
export const TAINT_KEY = 'aether.io/agent-not-ready';
export const GRACE_MS = 300;
/** A whole-second `lastTransitionTime` stands for the end of its second (decide.ts). */
export const SECOND_END = 999;
export const AGENT_LABELS = { 'app.kubernetes.io/name': 'aether-agent' };
/** The reportingController of the guard's Events. */
export const REPORTING_CONTROLLER = 'berth.skaphos.io/berth-operator';

/** A kubelet's Lease: 40 s, renewed every 10 s (kube-controller-manager waits 50 s for a renewal). */
const NODE_LEASE_SECONDS = 40;
const NODE_LEASE_RENEW_MS = 10_000;
/** Set on every Node by kube-controller-manager's TTL controller, right after the Node is created. */
const TTL_ANNOTATION = 'node.alpha.kubernetes.io/ttl';

const merge = setHeaderOptions('Content-Type', PatchStrategy.MergePatch);
const jsonPatch = setHeaderOptions('Content-Type', PatchStrategy.JsonPatch);

/** RFC 3339 at whole seconds, as Kubernetes writes `metav1.Time`. */
export const rfc3339 = (ms: number): string => new Date(ms).toISOString().replace(/\.\d+Z$/, 'Z');

const sameTaints = (a: readonly V1Taint[], b: readonly V1Taint[]): boolean =>
  a.length === b.length &&
  a.every(
    (t, i) => t.key === b[i]?.key && (t.value ?? '') === (b[i]?.value ?? '') && t.effect === b[i]?.effect,
  );

export class Cluster {
  readonly t: TestCluster;
  readonly core: CoreV1Api;
  readonly events: EventsV1Api;
  readonly coordination: CoordinationV1Api;
  /** In front of the API server for the guard only: its requests are recorded, counted and faulted. */
  readonly proxy: ApiProxy;
  /** The suite's agent namespace (`--agent-namespace`). */
  readonly agentNs: string;
  /** The guard's service account lives here. */
  readonly operatorNs: string;
  readonly guardUser: string;
  readonly #guardKubeconfig: string;
  readonly #heartbeats = new Map<string, NodeJS.Timeout>();

  private constructor(
    t: TestCluster,
    proxy: ApiProxy,
    namespaces: { agent: string; operator: string },
    guard: { username: string; kubeconfig: string },
  ) {
    this.t = t;
    this.core = t.kc.makeApiClient(CoreV1Api);
    this.events = t.kc.makeApiClient(EventsV1Api);
    this.coordination = t.kc.makeApiClient(CoordinationV1Api);
    this.proxy = proxy;
    this.agentNs = namespaces.agent;
    this.operatorNs = namespaces.operator;
    this.guardUser = guard.username;
    this.#guardKubeconfig = guard.kubeconfig;
  }

  /**
   * Namespaces of the suite's own, the guard's RBAC objects (uniquely named; removed at t.stop()) bound
   * to its service account, in effect once this resolves, and the proxy.
   */
  static async start(t: TestCluster): Promise<Cluster> {
    const agent = await t.namespace('aether-system');
    const operator = await t.namespace('berth-system');
    const rbac = t.kc.makeApiClient(RbacAuthorizationV1Api);
    const name = uniqueName('berth-operator-node-taint-guard');
    const objects = nodeTaintRbacObjects({
      name,
      agentNamespace: agent,
      subject: { kind: 'ServiceAccount', name: SERVICE_ACCOUNT, namespace: operator },
    });
    const gone = (err: unknown): void => {
      if (!isNotFound(err)) throw err;
    };
    for (const o of objects) {
      const ns = o.metadata?.namespace ?? '';
      if (o.kind === 'ClusterRole') {
        await rbac.createClusterRole({ body: o as V1ClusterRole });
        t.onCleanup(`ClusterRole ${name}`, () => rbac.deleteClusterRole({ name }).catch(gone));
      } else if (o.kind === 'ClusterRoleBinding') {
        await rbac.createClusterRoleBinding({ body: o as V1ClusterRoleBinding });
        t.onCleanup(`ClusterRoleBinding ${name}`, () => rbac.deleteClusterRoleBinding({ name }).catch(gone));
      } else if (o.kind === 'Role') {
        await rbac.createNamespacedRole({ namespace: ns, body: o as V1Role });
        t.onCleanup(`Role ${ns}/${name}`, () =>
          rbac.deleteNamespacedRole({ namespace: ns, name }).catch(gone),
        );
      } else {
        await rbac.createNamespacedRoleBinding({ namespace: ns, body: o as V1RoleBinding });
        t.onCleanup(`RoleBinding ${ns}/${name}`, () =>
          rbac.deleteNamespacedRoleBinding({ namespace: ns, name }).catch(gone),
        );
      }
    }
    const sa = await t.serviceAccount(operator, SERVICE_ACCOUNT);
    // The RBAC authorizer sees new bindings through its informer, a moment after the writes.
    const asGuard = sa.kc.makeApiClient(CoreV1Api);
    await eventually(async () => {
      await asGuard.listNode({ limit: 1 });
      await asGuard.listNamespacedPod({ namespace: agent, limit: 1 });
      return true;
    });
    const proxy = await ApiProxy.start(t);
    return new Cluster(t, proxy, { agent, operator }, sa);
  }

  /** The guard's service account, through the proxy. */
  guardKubeConfig(): KubeConfig {
    return this.t.kubeConfigFor(this.proxy.kubeconfigFor(this.#guardKubeconfig));
  }

  /**
   * A Node as a kubelet registers it: Ready, with a Lease renewed until cleanUp() (so that
   * kube-controller-manager's node lifecycle controller never finds it unresponsive, taints it
   * `unreachable` or marks its Pods not Ready), and returned only once the controllers are done with
   * it: the `not-ready` taint of TaintNodesByCondition removed again, the TTL annotation set. After that
   * no component but the test and the guard writes the Node, so that a resourceVersion-guarded write
   * meets only the conflicts a test makes. It reports no allocatable resources: the scheduler never
   * places other suites' Pods on it (a test binds its Pods by `spec.nodeName`).
   */
  async createNode(name: string, taints: V1Taint[] = []): Promise<void> {
    const node = await this.core.createNode({
      body: { metadata: { name }, spec: taints.length ? { taints } : {} },
    });
    const now = rfc3339(Date.now());
    await this.core.patchNodeStatus(
      {
        name,
        body: {
          status: {
            conditions: [
              {
                type: 'Ready',
                status: 'True',
                reason: 'KubeletReady',
                message: 'written by the test',
                lastHeartbeatTime: now,
                lastTransitionTime: now,
              },
            ],
          },
        },
      },
      merge,
    );
    await this.coordination.createNamespacedLease({
      namespace: 'kube-node-lease',
      body: {
        metadata: {
          name,
          // As the kubelet's: garbage-collected with the Node.
          ownerReferences: [{ apiVersion: 'v1', kind: 'Node', name, uid: node.metadata?.uid ?? '' }],
        },
        spec: {
          holderIdentity: name,
          leaseDurationSeconds: NODE_LEASE_SECONDS,
          renewTime: new V1MicroTime(Date.now()),
        },
      },
    });
    const renew = setInterval(() => {
      // A failed renewal is retried at the next tick, as by a kubelet; 50 s of grace cover several.
      this.coordination
        .patchNamespacedLease(
          { namespace: 'kube-node-lease', name, body: { spec: { renewTime: new V1MicroTime(Date.now()) } } },
          merge,
        )
        .catch(() => {});
    }, NODE_LEASE_RENEW_MS);
    renew.unref();
    this.#heartbeats.set(name, renew);
    await eventually(async () => {
      const n = await this.node(name);
      return (
        n.metadata?.annotations?.[TTL_ANNOTATION] !== undefined && sameTaints(n.spec?.taints ?? [], taints)
      );
    });
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

  /** A Pod bound to `nodeName` at creation (no scheduler), in the agent namespace unless told. */
  async createPod(
    name: string,
    nodeName: string,
    o: { namespace?: string; labels?: Record<string, string> } = {},
  ): Promise<void> {
    const body: V1Pod = {
      metadata: { name, labels: o.labels ?? AGENT_LABELS },
      spec: { nodeName, containers: [{ name: 'agent', image: 'aether/agent:1' }] },
    };
    await this.core.createNamespacedPod({ namespace: o.namespace ?? this.agentNs, body });
  }

  /** Writes the Ready condition through the status subresource, as the kubelet does. */
  async setReady(
    name: string,
    ready: boolean,
    since: number,
    o: { namespace?: string; restartCount?: number } = {},
  ): Promise<void> {
    const namespace = o.namespace ?? this.agentNs;
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
      namespace: o.namespace ?? this.agentNs,
      ...(o.now ? { gracePeriodSeconds: 0 } : {}),
    });
  }

  /** The guard's Events about a Node (kube-controller-manager reports on Nodes too, e.g. RegisteredNode). */
  async nodeEvents(name: string): Promise<EventsV1Event[]> {
    const list = await this.events.listNamespacedEvent({ namespace: 'default' });
    return list.items.filter(
      (e) =>
        e.regarding?.kind === 'Node' &&
        e.regarding?.name === name &&
        e.reportingController === REPORTING_CONTROLLER,
    );
  }

  /** Deletes the nodes and every pod on them (in any namespace), at once. */
  async cleanUp(nodes: string[]): Promise<void> {
    for (const name of nodes) {
      clearInterval(this.#heartbeats.get(name));
      this.#heartbeats.delete(name);
    }
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
    return this.proxy.inject({ verbs: ['patch'], resource: 'nodes', name, user: this.guardUser });
  }

  /** Stops the heartbeats and the proxy (the namespaces and RBAC objects go at t.stop()). */
  async stop(): Promise<void> {
    for (const timer of this.#heartbeats.values()) clearInterval(timer);
    this.#heartbeats.clear();
    await this.proxy.stop();
  }
}

export interface RunningGuard {
  guard: NodeTaintGuard;
  clock: ManualClock;
  registry: Registry;
  logs: LogCapture;
  recorder: EventRecorder;
  /**
   * Times `node` was added to the guard's queue (its workqueue_adds_total, per key: the guard watches
   * every Node of the shared cluster, other suites' too).
   */
  addsOf(node: string): number;
  /** Reconciles of `node` finished so far. */
  reconcilesOf(node: string): number;
  metric(name: string): Promise<number>;
  stop(): Promise<void>;
}

/** `--taint-grace` etc. through the real flag parser, then the injected grace. */
export function guardConfig(agentNamespace: string, operatorNamespace: string): NodeTaintConfig {
  const values = parseFlags({ name: 'run', summary: '', flags: nodeTaintFlags }, [
    `--agent-namespace=${agentNamespace}`,
    `--taint-grace=${GRACE_MS}ms`,
  ]);
  return parseNodeTaintConfig(values, { operatorNamespace });
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

const increment = (counts: Map<string, number>, key: string): void => {
  counts.set(key, (counts.get(key) ?? 0) + 1);
};

/** A guard not started yet (e.g. for a Manager). */
export function createGuard(cluster: Cluster, clock: ManualClock, instance = 'a'): RunningGuard {
  const kc = cluster.guardKubeConfig();
  const transport = new KubeTransport(kc);
  const registry = createRegistry({ defaultMetrics: false });
  const logs = captureLogs();
  const recorder = new EventRecorder({
    sink: eventSinkFor(transport),
    reportingController: REPORTING_CONTROLLER,
    reportingInstance: `berth-operator-${instance}`,
    logger: logs.logger,
  });
  const guard = new NodeTaintGuard({
    config: guardConfig(cluster.agentNs, cluster.operatorNs),
    transport,
    recorder,
    clock,
    registry,
    logger: logs.logger,
  });
  // Per-key counts of the queue's adds and finished items (the Controller calls done() after each
  // reconcile).
  const adds = new Map<string, number>();
  const done = new Map<string, number>();
  const queue = guard.controller.queue;
  const add = queue.add.bind(queue);
  const finish = queue.done.bind(queue);
  queue.add = (key: string): void => {
    increment(adds, key);
    add(key);
  };
  queue.done = (key: string): void => {
    finish(key);
    increment(done, key);
  };
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
    addsOf: (node) => adds.get(node) ?? 0,
    reconcilesOf: (node) => done.get(node) ?? 0,
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
