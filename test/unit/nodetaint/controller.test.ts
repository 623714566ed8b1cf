// The event filters and cache transforms of the guard's controller, and its reconciler's edges
// (Event, metrics, memory across a failover).
import { describe, expect, it } from 'vitest';
import { ManualClock } from '../../../src/kube/clock.ts';
import {
  isAgentPod,
  nodeChangeMatters,
  podChangeMatters,
  slimNode,
  slimPod,
} from '../../../src/nodetaint/controller.ts';
import { nodeTaintRbac, nodeTaintRbacObjects } from '../../../src/nodetaint/rbac.ts';
import { NodeTaintReconciler, REARM_EVENT_REASON } from '../../../src/nodetaint/reconciler.ts';
import { createRegistry } from '../../../src/observability/metrics.ts';
import {
  AGENT_NS,
  agentPod,
  FakeCluster,
  GRACE_MS,
  NODE,
  node,
  reconcileContext,
  SCOPE,
  setReady,
  TAINT,
  timestamp,
} from './fixtures.ts';

describe('node events', () => {
  it('enqueue adds and deletes, and only updates that change the taint key or the object', () => {
    const before = node(NODE, false);
    expect(nodeChangeMatters(TAINT.key, before)).toBe(true);

    const heartbeat = structuredClone(before);
    heartbeat.metadata!.resourceVersion = '2';
    heartbeat.status = { conditions: [{ type: 'Ready', status: 'True' }] };
    heartbeat.metadata!.labels = { 'example.com/x': 'y' };
    expect(nodeChangeMatters(TAINT.key, heartbeat, before)).toBe(false);

    const otherTaint = node(NODE, false, [{ key: 'other', effect: 'NoSchedule' }]);
    expect(nodeChangeMatters(TAINT.key, otherTaint, before)).toBe(false);
    expect(nodeChangeMatters(TAINT.key, node(NODE, true), before)).toBe(true);
    expect(nodeChangeMatters(TAINT.key, before, node(NODE, true))).toBe(true);

    const recreated = structuredClone(before);
    recreated.metadata!.uid = 'another';
    expect(nodeChangeMatters(TAINT.key, recreated, before)).toBe(true);
  });
});

describe('agent pod events', () => {
  const base = agentPod('a', NODE, true, { since: 1000 });
  const changed = (mutate: (p: typeof base) => void) => {
    const next = structuredClone(base);
    mutate(next);
    return podChangeMatters(SCOPE, next, base);
  };

  it('enqueue for readiness, binding, termination and selector changes', () => {
    expect(podChangeMatters(SCOPE, base)).toBe(true);
    expect(changed((p) => setReady(p, false, 2000))).toBe(true);
    expect(changed((p) => setReady(p, true, 2000))).toBe(true);
    expect(
      changed((p) => {
        p.spec!.nodeName = 'node-b';
      }),
    ).toBe(true);
    expect(
      changed((p) => {
        p.metadata!.deletionTimestamp = timestamp(5000);
      }),
    ).toBe(true);
    expect(
      changed((p) => {
        p.metadata!.labels = {};
      }),
    ).toBe(true);
  });

  it('do not enqueue for restart counts, other conditions or resourceVersion-only changes', () => {
    expect(
      changed((p) => {
        p.metadata!.resourceVersion = '9';
      }),
    ).toBe(false);
    expect(
      changed((p) => {
        p.status!.containerStatuses = [
          { name: 'agent', image: 'x', imageID: 'y', ready: false, restartCount: 7 },
        ];
        p.status!.conditions!.push({ type: 'ContainersReady', status: 'False' });
        p.status!.podIP = '10.0.0.7';
      }),
    ).toBe(false);
  });

  it('isAgentPod checks namespace and selector', () => {
    expect(isAgentPod(base, SCOPE)).toBe(true);
    expect(isAgentPod(agentPod('a', NODE, true, { namespace: 'default' }), SCOPE)).toBe(false);
    expect(isAgentPod(agentPod('a', NODE, true, { labels: {} }), SCOPE)).toBe(false);
  });
});

describe('cache transforms', () => {
  it('keep what the guard reads and drop the rest', () => {
    const n = node(NODE, true);
    n.metadata!.managedFields = [{ manager: 'kubelet' }];
    n.status = { images: [{ names: ['big'], sizeBytes: 1 }] };
    const slim = slimNode(n);
    expect(slim.status).toBeUndefined();
    expect(slim.metadata?.managedFields).toBeUndefined();
    expect(slim.spec?.taints).toEqual(n.spec?.taints);
    expect(slim.metadata?.name).toBe(NODE);

    const p = agentPod('a', NODE, false, { since: 1000, terminating: true });
    p.metadata!.managedFields = [{ manager: 'kubelet' }];
    const slimmed = slimPod(p);
    expect(slimmed.spec).toEqual({ nodeName: NODE });
    expect(slimmed.metadata?.managedFields).toBeUndefined();
    expect(slimmed.metadata?.deletionTimestamp).toBe(p.metadata?.deletionTimestamp);
    expect(slimmed.status?.conditions).toEqual(p.status?.conditions);
    expect(slimPod({ metadata: { name: 'x' } }).spec).toBeUndefined();
  });
});

describe('reconciler edges', () => {
  async function armedOnce() {
    const cluster = new FakeCluster().add(node(NODE, false));
    const pod = agentPod('a', NODE, false);
    cluster.pods = [pod];
    const registry = createRegistry({ defaultMetrics: false });
    const clock = new ManualClock();
    const events: Array<{ name?: string; kind?: string; reason: string; action: string; note?: string }> = [];
    const reconciler = new NodeTaintReconciler({
      taint: TAINT,
      graceMs: GRACE_MS,
      nodes: cluster.nodeReader,
      agentPods: cluster.podReader,
      api: cluster,
      clock,
      registry,
      recorder: {
        warning: async (regarding, reason, action, note) => {
          const meta = 'metadata' in regarding ? regarding.metadata : undefined;
          events.push({
            name: meta?.name,
            kind: regarding.kind,
            reason,
            action,
            ...(note ? { note } : {}),
          });
        },
      },
    });
    const metric = async (name: string) =>
      (await registry.getSingleMetric(name)?.get())?.values[0]?.value ?? Number.NaN;
    return { cluster, pod, clock, reconciler, events, metric };
  }

  it('records one TaintRearmed Warning on the Node and counts the arm; the gauge follows the window', async () => {
    const g = await armedOnce();
    await g.reconciler.reconcile(NODE, reconcileContext(NODE));
    expect(await g.metric('berth_nodetaint_nodes_in_grace')).toBe(1);
    expect(await g.metric('berth_nodetaint_rearms_total')).toBe(0);
    g.clock.advance(GRACE_MS);
    await g.reconciler.reconcile(NODE, reconcileContext(NODE));
    await g.reconciler.reconcile(NODE, reconcileContext(NODE));
    expect(await g.metric('berth_nodetaint_rearms_total')).toBe(1);
    expect(await g.metric('berth_nodetaint_nodes_in_grace')).toBe(0);
    expect(g.events).toEqual([
      expect.objectContaining({ name: NODE, kind: 'Node', reason: REARM_EVENT_REASON, action: 'AddTaint' }),
    ]);
    expect(g.events[0]?.note).toContain('aether.io/agent-not-ready=true:NoSchedule');
    expect(g.cluster.patches).toHaveLength(1);
  });

  it('does not fight the agent removing the taint before its pod turns Ready', async () => {
    const g = await armedOnce();
    await g.reconciler.reconcile(NODE, reconcileContext(NODE));
    g.clock.advance(GRACE_MS);
    await g.reconciler.reconcile(NODE, reconcileContext(NODE));
    expect(g.cluster.keyCount(NODE)).toBe(1);
    // The agent removes the taint; the kubelet has not yet reported its pod Ready.
    g.cluster.update(NODE, (n) => {
      n.spec = {};
    });
    g.clock.advance(10 * GRACE_MS);
    const result = await g.reconciler.reconcile(NODE, reconcileContext(NODE));
    expect(result.requeueAfter).toBe(GRACE_MS);
    setReady(g.pod, true);
    await g.reconciler.reconcile(NODE, reconcileContext(NODE));
    g.clock.advance(GRACE_MS);
    await g.reconciler.reconcile(NODE, reconcileContext(NODE));
    expect(g.cluster.keyCount(NODE)).toBe(0);
    expect(g.cluster.patches).toHaveLength(1);
  });

  it('forgets a node deleted during the write', async () => {
    const g = await armedOnce();
    await g.reconciler.reconcile(NODE, reconcileContext(NODE));
    g.clock.advance(GRACE_MS);
    g.cluster.beforePatch = () => g.cluster.nodes.delete(NODE);
    await g.reconciler.reconcile(NODE, reconcileContext(NODE));
    expect(g.reconciler.memoryOf(NODE)).toBeUndefined();
    expect(await g.metric('berth_nodetaint_rearms_total')).toBe(0);
    expect(g.events).toEqual([]);
  });

  it('reset() forgets everything and zeroes the gauge', async () => {
    const g = await armedOnce();
    await g.reconciler.reconcile(NODE, reconcileContext(NODE));
    g.reconciler.reset();
    expect(g.reconciler.memoryOf(NODE)).toBeUndefined();
    expect(await g.metric('berth_nodetaint_nodes_in_grace')).toBe(0);
  });
});

describe('RBAC data', () => {
  it('grants nodes cluster-wide, pods only in the agent namespace, node Events in default', () => {
    expect(nodeTaintRbac(AGENT_NS)).toEqual({
      clusterRules: [{ apiGroups: [''], resources: ['nodes'], verbs: ['get', 'list', 'watch', 'patch'] }],
      namespacedRules: [
        {
          namespace: AGENT_NS,
          rules: [{ apiGroups: [''], resources: ['pods'], verbs: ['get', 'list', 'watch'] }],
        },
        {
          namespace: 'default',
          rules: [{ apiGroups: ['events.k8s.io'], resources: ['events'], verbs: ['create', 'patch'] }],
        },
      ],
    });
  });

  it('builds ClusterRole, Roles and bindings, merging rules when the agent namespace is default', () => {
    const objects = nodeTaintRbacObjects({
      name: 'guard',
      agentNamespace: 'default',
      subject: { kind: 'ServiceAccount', name: 'berth-operator', namespace: 'berth-system' },
    });
    expect(objects.map((o) => `${o.kind}/${o.metadata?.namespace ?? ''}`)).toEqual([
      'ClusterRole/',
      'ClusterRoleBinding/',
      'Role/default',
      'RoleBinding/default',
    ]);
    expect((objects[2] as { rules: unknown[] }).rules).toHaveLength(2);
  });
});
