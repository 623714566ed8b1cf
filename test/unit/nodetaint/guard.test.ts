// aether's guard_test.go and guard_conflict_test.go (docs/nodetaint.md §5.1–5.2), ported to the reconciler with an
// injected clock: where the Go tests backdate `missingSince`, these advance a ManualClock by the grace.
import { describe, expect, it } from 'vitest';
import { isConflict } from '../../../src/kube/client.ts';
import { type Clock, ManualClock, realClock } from '../../../src/kube/clock.ts';
import { podToNode } from '../../../src/nodetaint/controller.ts';
import { NodeTaintReconciler, REARM_LOG_MESSAGE } from '../../../src/nodetaint/reconciler.ts';
import { armTaint } from '../../../src/nodetaint/taint.ts';
import {
  AGENT_NS,
  agentPod,
  captureLogs,
  FakeCluster,
  GRACE_MS,
  NODE,
  node,
  reconcileContext,
  SCOPE,
  setReady,
  TAINT,
} from './fixtures.ts';

// The retry delays of the taint write are not what these tests are about: no waiting between attempts.
const noWaitClock: Clock = { ...realClock, now: () => realClock.now(), sleep: async () => {} };

function guard(cluster: FakeCluster, clock = new ManualClock()) {
  const logs = captureLogs();
  const reconciler = new NodeTaintReconciler({
    taint: TAINT,
    graceMs: GRACE_MS,
    nodes: cluster.nodeReader,
    agentPods: cluster.podReader,
    api: cluster,
    clock,
    arm: { clock: noWaitClock },
  });
  const reconcileNode = async () =>
    (await reconciler.reconcile(NODE, reconcileContext(NODE, logs.logger))) ?? {};
  const tainted = () => cluster.keyCount(NODE) > 0;
  return { reconciler, clock, logs, reconcileNode, tainted };
}

/** The Go conflict tests' helper: an untainted node, a not-Ready pod, and a window already elapsed. */
async function elapsedWindow(cluster: FakeCluster) {
  cluster.add(node(NODE, false));
  cluster.pods = [agentPod('a', NODE, false)];
  const g = guard(cluster);
  expect((await g.reconcileNode()).requeueAfter).toBe(GRACE_MS);
  g.clock.advance(GRACE_MS);
  return g;
}

describe('guard_test.go', () => {
  describe('TestReadyAgent', () => {
    it('ready agent -> node stays untainted', async () => {
      const cluster = new FakeCluster().add(node(NODE, false));
      cluster.pods = [agentPod('a', NODE, true)];
      const g = guard(cluster);
      const result = await g.reconcileNode();
      expect(g.tainted()).toBe(false);
      expect(result.requeueAfter ?? 0).toBe(0);
      expect(cluster.patches).toHaveLength(0);
    });

    it('guard never removes an existing taint', async () => {
      const cluster = new FakeCluster().add(node(NODE, true));
      cluster.pods = [agentPod('a', NODE, true)];
      const g = guard(cluster);
      await g.reconcileNode();
      g.clock.advance(10 * GRACE_MS);
      await g.reconcileNode();
      expect(g.tainted()).toBe(true);
      expect(cluster.patches).toHaveLength(0);
    });
  });

  it('TestMissingAgentArmsAfterGrace', async () => {
    const cluster = new FakeCluster().add(node(NODE, false));
    cluster.pods = [agentPod('a', NODE, false)];
    const g = guard(cluster);

    const first = await g.reconcileNode();
    expect(g.tainted()).toBe(false);
    expect(first.requeueAfter).toBe(GRACE_MS);

    // A reconcile while waiting does not restart the clock: it gets the remaining time back.
    g.clock.advance(GRACE_MS - 1);
    expect((await g.reconcileNode()).requeueAfter).toBe(1);
    expect(g.tainted()).toBe(false);

    g.clock.advance(1);
    expect((await g.reconcileNode()).requeueAfter ?? 0).toBe(0);
    expect(g.tainted()).toBe(true);
    expect(cluster.taintsOf(NODE)).toEqual([{ key: TAINT.key, value: 'true', effect: 'NoSchedule' }]);
    expect(cluster.patches).toHaveLength(1);
    expect(cluster.patches[0]?.fieldManager).toBe('aether-controller');
    expect(g.reconciler.memoryOf(NODE)).toEqual({ state: 'tainted' });
    const warns = g.logs.lines().filter((l) => l.level === 'warn');
    expect(warns).toHaveLength(1);
    expect(warns[0]).toMatchObject({ msg: REARM_LOG_MESSAGE, node: NODE, grace: '30s' });
  });

  it('TestFlapWithinGrace', async () => {
    const cluster = new FakeCluster().add(node(NODE, false));
    const pod = agentPod('a', NODE, false);
    cluster.pods = [pod];
    const g = guard(cluster);

    expect((await g.reconcileNode()).requeueAfter).toBeGreaterThan(0);
    expect(g.tainted()).toBe(false);
    expect(g.reconciler.nodesInGrace).toBe(1);

    setReady(pod, true);
    await g.reconcileNode();
    expect(g.tainted()).toBe(false);
    expect(g.reconciler.memoryOf(NODE)).toBeUndefined();
    expect(g.reconciler.nodesInGrace).toBe(0);

    // A later miss starts a fresh window.
    setReady(pod, false);
    g.clock.advance(GRACE_MS);
    expect((await g.reconcileNode()).requeueAfter).toBe(GRACE_MS);
    expect(g.tainted()).toBe(false);
  });

  it('TestIdempotentWhenAlreadyTainted', async () => {
    const cluster = new FakeCluster().add(node(NODE, true));
    const g = guard(cluster);
    await g.reconcileNode();
    expect(cluster.keyCount(NODE)).toBe(1);
    expect(cluster.patches).toHaveLength(0);
  });

  it('TestOtherNodeAgentIgnored', async () => {
    const cluster = new FakeCluster().add(node(NODE, false)).add(node('node-b', false));
    cluster.pods = [agentPod('a', NODE, false), agentPod('b', 'node-b', true)];
    const g = guard(cluster);

    expect((await g.reconcileNode()).requeueAfter).toBe(GRACE_MS);
    expect(g.tainted()).toBe(false);
    g.clock.advance(GRACE_MS);
    await g.reconcileNode();
    expect(g.tainted()).toBe(true);
    expect(cluster.keyCount('node-b')).toBe(0);
  });

  it('TestIneligibleNodeNeverTainted (main-cp-01)', async () => {
    const cluster = new FakeCluster().add(node(NODE, false));
    cluster.pods = [agentPod('b', 'node-b', false)];
    const g = guard(cluster);

    expect((await g.reconcileNode()).requeueAfter ?? 0).toBe(0);
    expect(g.tainted()).toBe(false);
    expect(g.reconciler.memoryOf(NODE)).toBeUndefined();

    g.clock.advance(2 * GRACE_MS);
    expect((await g.reconcileNode()).requeueAfter ?? 0).toBe(0);
    expect(g.tainted()).toBe(false);
    expect(cluster.patches).toHaveLength(0);
  });

  it('TestIneligibleNodeNeverTainted: a node whose window had run out loses it with its last agent pod', async () => {
    const cluster = new FakeCluster().add(node(NODE, false));
    cluster.pods = [agentPod('a', NODE, false)];
    const g = guard(cluster);
    await g.reconcileNode();
    g.clock.advance(2 * GRACE_MS);
    cluster.pods = [];
    await g.reconcileNode();
    expect(g.tainted()).toBe(false);
    expect(g.reconciler.memoryOf(NODE)).toBeUndefined();
  });

  it('TestPodToNode', () => {
    expect(podToNode(agentPod('a', NODE, true), SCOPE)).toEqual([NODE]);
    expect(podToNode(agentPod('a', NODE, true, { labels: { app: 'other' } }), SCOPE)).toEqual([]);
    expect(podToNode(agentPod('a', NODE, true, { namespace: 'default' }), SCOPE)).toEqual([]);
    expect(podToNode(agentPod('a', '', true), SCOPE)).toEqual([]);
    expect(AGENT_NS).toBe('aether-system');
  });
});

describe('guard_conflict_test.go', () => {
  it('TestArmTaintRetriesOnConflict', async () => {
    const cluster = new FakeCluster();
    const g = await elapsedWindow(cluster);
    cluster.conflicts = 1;
    await g.reconcileNode();
    expect(cluster.patches.every((p) => p.locked)).toBe(true);
    expect(cluster.patches).toHaveLength(2);
    expect(g.tainted()).toBe(true);
    expect(cluster.keyCount(NODE)).toBe(1);
  });

  it('TestArmTaintSurfacesPersistentConflicts', async () => {
    const cluster = new FakeCluster();
    const g = await elapsedWindow(cluster);
    cluster.conflicts = Number.POSITIVE_INFINITY;
    const err = await g.reconcileNode().then(
      () => undefined,
      (e: unknown) => e,
    );
    expect(isConflict(err)).toBe(true);
    expect(cluster.patches.length).toBeGreaterThan(0);
    expect(cluster.patches.length).toBeLessThan(10);
    expect(cluster.patches).toHaveLength(5);
    expect(g.tainted()).toBe(false);

    // The window is kept: once the conflicts stop, the retry arms at once.
    cluster.conflicts = 0;
    await g.reconcileNode();
    expect(g.tainted()).toBe(true);
  });

  it('TestArmTaintIsIdempotentUnderRaces', async () => {
    const cluster = new FakeCluster().add(node(NODE, true));
    await expect(armTaint(cluster, NODE, TAINT)).resolves.toMatchObject({ outcome: 'already-present' });
    expect(cluster.keyCount(NODE)).toBe(1);
    expect(cluster.patches).toHaveLength(0);
  });

  it('someone else armed after the cached read: the re-read sees it, nothing is written', async () => {
    const cluster = new FakeCluster().add(node(NODE, false));
    const clock = new ManualClock();
    // The Pod has been NotReady for twice the grace: the decision on the cached Node is "arm".
    cluster.pods = [agentPod('a', NODE, false, { since: clock.now() - 2 * GRACE_MS })];
    const stale = structuredClone(cluster.nodes.get(NODE)!);
    cluster.update(NODE, (n) => {
      n.spec = { taints: [{ key: TAINT.key, value: 'other', effect: 'PreferNoSchedule' }] };
    });
    const warnings: string[] = [];
    const reconciler = new NodeTaintReconciler({
      taint: TAINT,
      graceMs: GRACE_MS,
      nodes: { get: () => stale },
      agentPods: cluster.podReader,
      api: cluster,
      clock,
      recorder: { warning: async (_n, reason) => void warnings.push(reason) },
    });
    await reconciler.reconcile(NODE, reconcileContext(NODE));
    expect(cluster.gets).toBe(1);
    expect(cluster.patches).toHaveLength(0);
    expect(cluster.keyCount(NODE)).toBe(1);
    expect(reconciler.memoryOf(NODE)).toEqual({ state: 'tainted' });
    expect(warnings).toEqual([]);
  });
});
