// The node taint guard against the real kube-apiserver (the run's shared one), as its own service
// account with least-privilege RBAC. Scenarios of aether proposal 033 / docs/nodetaint.md §2.9: reboot (G1), crash loop
// (G2), a routine DaemonSet roll inside the grace, an ineligible node, a taint fight with conflicts, the
// agent removing the taint, and a leader failover in the middle of a grace window.
import { PatchStrategy, setHeaderOptions } from '@kubernetes/client-node';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { Manager } from '../../../src/kube/manager.ts';
import { REARM_LOG_MESSAGE } from '../../../src/nodetaint/reconciler.ts';
import { TestCluster, uniqueName } from '../../helpers/cluster.ts';
import { eventually } from '../../helpers/eventually.ts';
import {
  Cluster,
  createGuard,
  forgets,
  GRACE_MS,
  newClock,
  type RunningGuard,
  rfc3339,
  SECOND_END,
  startGuard,
  TAINT_KEY,
} from './harness.ts';

let t: TestCluster;
let cluster: Cluster;
const running: RunningGuard[] = [];
const nodes: string[] = [];

beforeAll(async () => {
  t = await TestCluster.shared();
  cluster = await Cluster.start(t);
});
afterEach(async () => {
  for (const g of running.splice(0)) await g.stop();
  cluster.proxy.clear();
  await cluster.cleanUp(nodes.splice(0));
});
afterAll(async () => {
  await cluster?.stop();
  await t?.stop();
});

async function start(clock = newClock(), instance?: string): Promise<RunningGuard> {
  const g = await startGuard(cluster, clock, instance);
  running.push(g);
  return g;
}

/** A Node of this test's own, named `<prefix>-<random>` (Nodes are cluster-wide). */
async function newNode(prefix: string, taints: Parameters<Cluster['createNode']>[1] = []): Promise<string> {
  const name = uniqueName(prefix);
  nodes.push(name);
  await cluster.createNode(name, taints);
  return name;
}

const memory = (g: RunningGuard, node: string) => g.guard.reconciler.memoryOf(node);
const waitingSince = (g: RunningGuard, node: string) => {
  const m = memory(g, node);
  return m?.state === 'waiting' ? m.firstSeen : undefined;
};

/** Advances the ManualClock and waits until at least one more reconcile of `node` has finished. */
async function advanceAndReconcile(g: RunningGuard, node: string, ms: number): Promise<void> {
  const before = g.reconcilesOf(node);
  g.clock.advance(ms);
  await eventually(() => g.reconcilesOf(node) > before);
}

describe('node taint guard', () => {
  it('reboot: the agent pod goes NotReady -> the taint is armed after the grace, once', async () => {
    const node = await newNode('reboot-1');
    const clock = newClock();
    await cluster.createPod('agent-reboot', node);
    await cluster.setReady('agent-reboot', true, clock.now() - 3_600_000);
    const patches = cluster.countGuardPatches(node);
    const g = await start(clock);
    await eventually(() => forgets(g, node, 'agent-ready') > 0);

    // The node reboots: the DaemonSet pod object persists and goes NotReady.
    const since = clock.now();
    await cluster.setReady('agent-reboot', false, since);
    await eventually(() => waitingSince(g, node) !== undefined);
    expect(await g.metric('berth_nodetaint_nodes_in_grace')).toBe(1);
    // Requeued for exactly the rest of the window.
    expect(clock.nextDueAt()).toBe(since + SECOND_END + GRACE_MS);
    expect(await cluster.guardTaints(node)).toEqual([]);

    clock.advance(SECOND_END + GRACE_MS);
    await eventually(async () => (await cluster.guardTaints(node)).length === 1);
    expect(await cluster.guardTaints(node)).toEqual([
      { key: TAINT_KEY, value: 'true', effect: 'NoSchedule' },
    ]);
    expect(patches.hits()).toBe(1);
    // Counted once the guard has the PATCH's answer, a moment after the API server shows the taint.
    await eventually(async () => (await g.metric('berth_nodetaint_rearms_total')) === 1);
    expect(await g.metric('berth_nodetaint_nodes_in_grace')).toBe(0);
    const warns = g.logs.lines().filter((l) => l.level === 'warn' && l.msg === REARM_LOG_MESSAGE);
    expect(warns).toHaveLength(1);
    expect(warns[0]).toMatchObject({ node, grace: '300ms', controller: 'node-taint-guard' });
    await g.recorder.flush();
    const events = await cluster.nodeEvents(node);
    expect(events).toHaveLength(1);
    expect(events[0]).toMatchObject({ type: 'Warning', reason: 'TaintRearmed', action: 'AddTaint' });
    expect(events[0]?.note).toContain(`${TAINT_KEY}=true:NoSchedule`);

    // The agent is back: Ready, then it removes the taint. The guard leaves it off.
    await cluster.setReady('agent-reboot', true, clock.now());
    await eventually(() => memory(g, node) === undefined);
    const seen = forgets(g, node, 'agent-ready');
    await cluster.removeGuardTaint(node);
    await eventually(() => forgets(g, node, 'agent-ready') > seen);
    clock.advance(10 * GRACE_MS);
    expect(await cluster.guardTaints(node)).toEqual([]);
    expect(patches.hits()).toBe(1);
  });

  it('crash loop: restarts do not restart the window; re-armed after each recovery that fails again', async () => {
    const node = await newNode('crashloop-1');
    const clock = newClock();
    await cluster.createPod('agent-crash', node);
    await cluster.setReady('agent-crash', true, clock.now() - 3_600_000);
    const patches = cluster.countGuardPatches(node);
    const g = await start(clock);
    await eventually(() => forgets(g, node, 'agent-ready') > 0);

    const since = clock.now();
    await cluster.setReady('agent-crash', false, since, { restartCount: 1 });
    await eventually(() => waitingSince(g, node) !== undefined);
    // The container keeps crashing: status updates that do not change readiness.
    clock.advance(200);
    for (const restartCount of [2, 3, 4])
      await cluster.setReady('agent-crash', false, since, { restartCount });
    expect(clock.nextDueAt()).toBe(since + SECOND_END + GRACE_MS);
    clock.advance(SECOND_END + GRACE_MS - 200);
    await eventually(async () => (await cluster.guardTaints(node)).length === 1);
    expect(patches.hits()).toBe(1);

    // It recovers (the agent removes the taint once Ready) and crashes again: armed again (G2).
    await cluster.setReady('agent-crash', true, clock.now(), { restartCount: 5 });
    await eventually(() => memory(g, node) === undefined);
    await cluster.removeGuardTaint(node);
    clock.advance(1000 - (clock.now() % 1000)); // to a whole second, as kubelet timestamps are
    const again = clock.now();
    await cluster.setReady('agent-crash', false, again, { restartCount: 6 });
    await eventually(() => waitingSince(g, node) !== undefined);
    expect(clock.nextDueAt()).toBe(again + SECOND_END + GRACE_MS);
    clock.advance(SECOND_END + GRACE_MS);
    await eventually(async () => (await cluster.guardTaints(node)).length === 1);
    expect(patches.hits()).toBe(2);
    // Counted once the guard has the PATCH's answer, a moment after the API server shows the taint.
    await eventually(async () => (await g.metric('berth_nodetaint_rearms_total')) === 2);
  });

  it('a routine DaemonSet roll inside the grace does not taint', async () => {
    const node = await newNode('roll-1');
    const clock = newClock();
    await cluster.createPod('agent-old', node);
    await cluster.setReady('agent-old', true, clock.now() - 3_600_000);
    const patches = cluster.countGuardPatches(node);
    const g = await start(clock);
    await eventually(() => forgets(g, node, 'agent-ready') > 0);
    const start0 = clock.now();

    // maxUnavailable 1: the old pod terminates (still reporting Ready): the window starts.
    await cluster.deletePod('agent-old');
    await eventually(() => waitingSince(g, node) === start0);
    clock.advance(200);
    // It is gone; the new pod is not bound yet: no agent pod object, the window is dropped.
    await cluster.deletePod('agent-old', { now: true });
    await eventually(() => forgets(g, node, 'no-agent-pod') > 0);
    expect(memory(g, node)).toBeUndefined();
    // The new pod is created on the node; the kubelet has not reported on it yet: a fresh window.
    await cluster.createPod('agent-new', node);
    await eventually(() => waitingSince(g, node) === start0 + 200);
    // Past the first window's end: its stale requeue fires, and finds the fresh window running.
    await advanceAndReconcile(g, node, 200);
    expect(waitingSince(g, node)).toBe(start0 + 200);
    expect(await cluster.guardTaints(node)).toEqual([]);
    // The new pod turns Ready within its grace.
    await cluster.setReady('agent-new', true, clock.now());
    await eventually(() => memory(g, node) === undefined);
    await advanceAndReconcile(g, node, 10 * GRACE_MS);
    expect(await cluster.guardTaints(node)).toEqual([]);
    expect(patches.hits()).toBe(0);
    expect(await g.metric('berth_nodetaint_rearms_total')).toBe(0);
  });

  it('a node with no agent pod is never tainted, whatever pods elsewhere say', async () => {
    const clock = newClock();
    const cp = await newNode('control-plane-1');
    const worker = await newNode('worker-1');
    const longAgo = clock.now() - 3_600_000;
    // The agent on the worker has been NotReady for an hour: armed at first sight.
    await cluster.createPod('agent-worker', worker);
    await cluster.setReady('agent-worker', false, longAgo);
    // Not agent pods of this guard, though bound to the control plane node and NotReady.
    const elsewhere = await t.namespace('elsewhere');
    await cluster.createPod('agent-elsewhere', cp, { namespace: elsewhere });
    await cluster.setReady('agent-elsewhere', false, longAgo, { namespace: elsewhere });
    await cluster.createPod('not-an-agent', cp, { labels: { 'app.kubernetes.io/name': 'other' } });
    await cluster.setReady('not-an-agent', false, longAgo);
    const cpPatches = cluster.countGuardPatches(cp);
    const g = await start(clock);

    await eventually(async () => (await cluster.guardTaints(worker)).length === 1);
    await eventually(() => forgets(g, cp, 'no-agent-pod') > 0);
    // The pod watch is scoped to the agent namespace and selector: the others are not even cached.
    expect(g.guard.agentPods.keys()).toEqual([`${cluster.agentNs}/agent-worker`]);
    // An ineligible node is not requeued: however long it stays, nothing is written.
    clock.advance(100 * GRACE_MS);
    expect(await cluster.taints(cp)).toEqual([]);
    expect(cpPatches.hits()).toBe(0);
    expect(memory(g, cp)).toBeUndefined();
  });

  it('taint fight: injected conflicts are retried and exactly one taint is written; other taints are kept', async () => {
    const clock = newClock();
    const maintenance = { key: 'example.com/maintenance', value: 'yes', effect: 'NoSchedule' };
    const node = await newNode('fight-1', [maintenance]);
    await cluster.createPod('agent-fight', node);
    await cluster.setReady('agent-fight', false, clock.now() - 3_600_000);
    const conflicts = cluster.proxy.inject({
      verbs: ['patch'],
      resource: 'nodes',
      name: node,
      status: 409,
      times: 2,
    });
    const patches = cluster.countGuardPatches(node);
    const g = await start(clock);

    await eventually(async () => (await cluster.guardTaints(node)).length === 1);
    expect(conflicts.hits()).toBe(2);
    expect(patches.hits()).toBe(1);
    expect(await cluster.taints(node)).toEqual([
      maintenance,
      { key: TAINT_KEY, value: 'true', effect: 'NoSchedule' },
    ]);
    expect(await g.metric('controller_runtime_reconcile_errors_total')).toBe(0);
    // Counted once the guard has the PATCH's answer, a moment after the API server shows the taint.
    await eventually(async () => (await g.metric('berth_nodetaint_rearms_total')) === 1);
  });

  it('taint fight: a taint another writer adds during the write is not reverted (real 409, re-read)', async () => {
    const clock = newClock();
    const node = await newNode('fight-2');
    await cluster.createPod('agent-fight-2', node);
    await cluster.setReady('agent-fight-2', false, clock.now() - 3_600_000);
    // Hold the guard's first patch until another writer has changed the node underneath it.
    const changed = Promise.withResolvers<void>();
    const held = cluster.proxy.inject({
      verbs: ['patch'],
      resource: 'nodes',
      name: node,
      user: cluster.guardUser,
      until: changed.promise,
      times: 1,
    });
    const patches = cluster.countGuardPatches(node);
    await start(clock);
    await eventually(() => held.hits() === 1);
    const dedicated = { key: 'example.com/dedicated', value: 'gpu', effect: 'NoSchedule' };
    await cluster.addTaint(node, dedicated).finally(changed.resolve);

    await eventually(async () => (await cluster.guardTaints(node)).length === 1);
    expect(await cluster.taints(node)).toEqual([
      dedicated,
      { key: TAINT_KEY, value: 'true', effect: 'NoSchedule' },
    ]);
    expect(held.hits() + patches.hits()).toBe(2);
  });

  it('taint fight: persistent conflicts surface after 5 attempts; the retry arms at once when they stop', async () => {
    const clock = newClock();
    const node = await newNode('fight-3');
    await cluster.createPod('agent-fight-3', node);
    await cluster.setReady('agent-fight-3', false, clock.now() - 3_600_000);
    const conflicts = cluster.proxy.inject({
      verbs: ['patch'],
      resource: 'nodes',
      name: node,
      status: 409,
    });
    const g = await start(clock);

    await eventually(async () => (await g.metric('controller_runtime_reconcile_errors_total')) === 1);
    expect(conflicts.hits()).toBe(5);
    expect(await cluster.guardTaints(node)).toEqual([]);
    expect(waitingSince(g, node)).toBeDefined();
    expect(g.logs.lines().some((l) => l.level === 'error' && String(l.err).startsWith('409 Conflict'))).toBe(
      true,
    );

    conflicts.remove();
    clock.advance(1000); // the rate-limited retry
    await eventually(async () => (await cluster.guardTaints(node)).length === 1);
    // Counted once the guard has the PATCH's answer, a moment after the API server shows the taint.
    await eventually(async () => (await g.metric('berth_nodetaint_rearms_total')) === 1);
  });

  it('the agent removing the taint is not fought, even before its pod reports Ready', async () => {
    const clock = newClock();
    // Registered with the taint (kubelet --register-with-taints); the agent has been starting for a while.
    const node = await newNode('agent-removes-1', [{ key: TAINT_KEY, value: 'true', effect: 'NoSchedule' }]);
    await cluster.createPod('agent-starting', node);
    await cluster.setReady('agent-starting', false, clock.now() - 3_600_000);
    const patches = cluster.countGuardPatches(node);
    const g = await start(clock);
    await eventually(() => memory(g, node)?.state === 'tainted');

    // The agent is serving and removes the taint; the kubelet's probe has not flipped Ready yet.
    await cluster.removeGuardTaint(node);
    await eventually(() => waitingSince(g, node) === clock.now());
    // Not re-armed at once from the pod's hour-old NotReady transition: a full grace from now.
    expect(clock.nextDueAt()).toBe(clock.now() + GRACE_MS);
    await cluster.setReady('agent-starting', true, clock.now());
    await eventually(() => memory(g, node) === undefined);
    await advanceAndReconcile(g, node, 10 * GRACE_MS);
    expect(await cluster.taints(node)).toEqual([]);
    expect(patches.hits()).toBe(0);
  });

  it('leader failover in the middle of a window: the new leader continues it and writes once', async () => {
    const clock = newClock();
    const node = await newNode('failover-1');
    await cluster.createPod('agent-failover', node);
    await cluster.setReady('agent-failover', true, clock.now() - 3_600_000);
    const patches = cluster.countGuardPatches(node);
    const a = await start(clock, 'a');
    await eventually(() => forgets(a, node, 'agent-ready') > 0);

    const since = clock.now();
    await cluster.setReady('agent-failover', false, since);
    await eventually(() => waitingSince(a, node) === since);
    clock.advance(700);
    // The leader goes away mid-window; a second instance takes over.
    await a.stop();
    running.splice(running.indexOf(a), 1);
    const b = await start(clock, 'b');
    await eventually(() => waitingSince(b, node) === since + 700);
    // The window is not restarted (that would end at since + 700 + grace).
    expect(clock.nextDueAt()).toBe(since + SECOND_END + GRACE_MS);
    expect(await cluster.guardTaints(node)).toEqual([]);

    clock.advance(SECOND_END + GRACE_MS - 700);
    await eventually(async () => (await cluster.guardTaints(node)).length === 1);
    // B sees its own taint arrive (and remembers it); nothing more is written.
    await eventually(() => forgets(b, node, 'already-tainted') > 0);
    clock.advance(10 * GRACE_MS);
    expect(patches.hits()).toBe(1);
    expect(await a.metric('berth_nodetaint_rearms_total')).toBe(0);
    expect(await b.metric('berth_nodetaint_rearms_total')).toBe(1);
    await b.recorder.flush();
    expect(await cluster.nodeEvents(node)).toHaveLength(1);
  });

  it('node heartbeats and pod changes that cannot change the decision enqueue nothing', async () => {
    const clock = newClock();
    const node = await newNode('quiet-1');
    const since = clock.now() - 3_600_000;
    await cluster.createPod('agent-quiet', node);
    await cluster.setReady('agent-quiet', true, since, { restartCount: 0 });
    const g = await start(clock);
    await eventually(() => forgets(g, node, 'agent-ready') > 0);
    const adds = g.addsOf(node);
    const cachedNodeVersion = () => g.guard.nodes.getByName(node)?.metadata?.resourceVersion;
    const cachedPodVersion = () =>
      g.guard.agentPods.getByName('agent-quiet', cluster.agentNs)?.metadata?.resourceVersion;

    // The kubelet's status heartbeat, a label, a taint of someone else's.
    const beat = await cluster.core.patchNodeStatus(
      {
        name: node,
        body: {
          status: {
            conditions: [
              {
                type: 'Ready',
                status: 'True',
                lastHeartbeatTime: rfc3339(Date.now()),
                reason: 'KubeletReady',
              },
            ],
          },
        },
      },
      setHeaderOptions('Content-Type', PatchStrategy.MergePatch),
    );
    await eventually(() => cachedNodeVersion() === beat.metadata?.resourceVersion);
    await cluster.addTaint(node, { key: 'example.com/other', effect: 'NoSchedule' });
    const tainted = await cluster.node(node);
    await eventually(() => cachedNodeVersion() === tainted.metadata?.resourceVersion);
    // The agent's container restarts without its Ready condition changing.
    await cluster.setReady('agent-quiet', true, since, { restartCount: 1 });
    const restarted = await cluster.core.readNamespacedPod({
      name: 'agent-quiet',
      namespace: cluster.agentNs,
    });
    await eventually(() => cachedPodVersion() === restarted.metadata?.resourceVersion);
    expect(g.addsOf(node)).toBe(adds);

    // A change that matters does enqueue.
    await cluster.setReady('agent-quiet', false, clock.now(), { restartCount: 2 });
    await eventually(() => g.addsOf(node) === adds + 1);
    await eventually(() => waitingSince(g, node) !== undefined);
  });

  it('runs under the Manager: caches on every replica, the controller once leading', async () => {
    const clock = newClock();
    const node = await newNode('managed-1');
    await cluster.createPod('agent-managed', node);
    await cluster.setReady('agent-managed', false, clock.now() - 3_600_000);
    const g = createGuard(cluster, clock);
    running.push(g);
    const events: string[] = [];
    const manager = new Manager({
      logger: g.logs.logger,
      registry: g.registry,
      healthProbeBindAddress: '0',
      metricsBindAddress: '0',
      gracefulShutdownTimeoutMs: 10_000,
      drainWindowMs: 0,
      onEvent: (e) => events.push(`${e.step}${e.runnable ? `:${e.runnable}` : ''}`),
    });
    for (const runnable of g.guard.runnables()) manager.add(runnable);
    const done = manager.run();
    await eventually(async () => (await cluster.guardTaints(node)).length === 1);
    manager.stop();
    await expect(done).resolves.toMatchObject({ exitCode: 0 });
    expect(events.indexOf('runnable-started:node-taint-guard-caches')).toBeLessThan(events.indexOf('ready'));
    expect(events.indexOf('ready')).toBeLessThan(events.indexOf('runnable-started:node-taint-guard'));
    expect(events.indexOf('runnable-stopped:node-taint-guard')).toBeLessThan(
      events.indexOf('runnable-stopped:node-taint-guard-caches'),
    );
    expect(g.guard.nodes.isRunning()).toBe(false);
  });

  it('runs with least privilege: pods are only readable in the agent namespace', async () => {
    const kc = cluster.guardKubeConfig();
    const { CoreV1Api } = await import('@kubernetes/client-node');
    const core = kc.makeApiClient(CoreV1Api);
    await expect(core.listNamespacedPod({ namespace: cluster.agentNs })).resolves.toBeDefined();
    await expect(core.listPodForAllNamespaces()).rejects.toMatchObject({ code: 403 });
    await expect(core.listNamespacedPod({ namespace: 'default' })).rejects.toMatchObject({ code: 403 });
    await expect(core.deleteNode({ name: 'anything' })).rejects.toMatchObject({ code: 403 });
  });
});
