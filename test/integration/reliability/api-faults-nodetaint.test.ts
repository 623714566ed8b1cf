// The node taint guard under Kubernetes API faults (issue #10): its taint write (a GET of the Node, then
// a merge patch guarded by the resourceVersion) fails with 500, 503, a persistent 409, 410, 429 with
// Retry-After or a reset connection. The guard keeps retrying (each fault must be hit several times) and,
// once the fault is gone, the node carries the taint exactly once. Retries run on the guard's injected
// clock; nothing may crash or leave an unhandled rejection behind. On the shared cluster: the suite's
// own namespaces and uniquely named Nodes (see ../nodetaint/harness.ts).
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { RECONCILE_TIMEOUT_MS } from '../../../src/nodetaint/controller.ts';
import type { FaultRule } from '../../helpers/api-proxy.ts';
import { TestCluster, uniqueName } from '../../helpers/cluster.ts';
import { eventually } from '../../helpers/eventually.ts';
import {
  Cluster,
  GRACE_MS,
  newClock,
  type RunningGuard,
  startGuard,
  TAINT_KEY,
} from '../nodetaint/harness.ts';
import { advanceUntil, collectUncaught } from './api-faults-harness.ts';

const uncaught = collectUncaught();
let t: TestCluster;
let cluster: Cluster;
let g: RunningGuard;
const nodes: string[] = [];

beforeAll(async () => {
  t = await TestCluster.shared();
  cluster = await Cluster.start(t);
  g = await startGuard(cluster, newClock());
});
afterEach(async () => {
  cluster.proxy.clear();
  await cluster.cleanUp(nodes.splice(0));
  expect(uncaught.errors).toEqual([]);
});
afterAll(async () => {
  uncaught.dispose();
  await g?.stop();
  await cluster?.stop();
  await t?.stop();
});

/** A Node name of this test's own (Nodes are cluster-wide). */
const nodeName = (prefix: string): string => {
  const name = uniqueName(prefix);
  nodes.push(name);
  return name;
};

const STEP_MS = 50;
const CONVERGE = { timeoutMs: 15_000, intervalMs: 20 };
/** The guard's failed attempts each fault must see before it is lifted. */
const HITS = 3;

/** A node whose agent Pod has not been Ready for longer than the grace: the guard arms at once. */
async function overdueNode(name: string): Promise<void> {
  await cluster.createNode(name);
  await cluster.createPod(`agent-${name}`, name);
  await cluster.setReady(`agent-${name}`, false, g.clock.now() - 10 * GRACE_MS - 1000);
}

const rows: Array<{ name: string; rule: FaultRule; hits?: number }> = [
  { name: '500 on reading the Node', rule: { verbs: ['get'], status: 500 } },
  { name: '503 on the taint patch', rule: { verbs: ['patch'], status: 503 } },
  { name: '410 on the taint patch', rule: { verbs: ['patch'], status: 410 } },
  // Five attempts per reconcile (taint.ts) before the conflict is handed to the controller's backoff.
  { name: 'a persistent 409 on the taint patch', rule: { verbs: ['patch'], status: 409 }, hits: 6 },
  { name: 'reset connections on reading the Node', rule: { verbs: ['get'], resetConnection: true } },
];

describe('a hung taint write', () => {
  it('is cut at the reconcile deadline, so the single worker moves on and the retry arms the taint', async () => {
    const node = nodeName('hung-patch');
    // Far longer than the test's own deadline: only the guard's reconcile bound can end it.
    const fault = cluster.proxy.inject({
      verbs: ['patch'],
      resource: 'nodes',
      name: node,
      user: cluster.guardUser,
      delayMs: 120_000,
      times: 1,
    });
    await overdueNode(node);
    await advanceUntil(g.clock, STEP_MS, () => fault.hits() >= 1, CONVERGE);
    expect(await cluster.guardTaints(node)).toEqual([]);
    g.clock.advance(RECONCILE_TIMEOUT_MS);
    await advanceUntil(g.clock, STEP_MS, async () => (await cluster.guardTaints(node)).length > 0, CONVERGE);
    expect(await cluster.guardTaints(node)).toEqual([
      { key: TAINT_KEY, value: 'true', effect: 'NoSchedule' },
    ]);
  });
});

describe('the taint write fails', () => {
  let index = 0;

  it.each(rows)('$name: retried, and the taint is there once after', async ({ rule, hits = HITS }) => {
    const node = nodeName(`faulty-${++index}`);
    const fault = cluster.proxy.inject({ ...rule, resource: 'nodes', name: node, user: cluster.guardUser });
    await overdueNode(node);
    await advanceUntil(g.clock, STEP_MS, () => fault.hits() >= hits, CONVERGE);
    expect(await cluster.guardTaints(node)).toEqual([]);
    fault.remove();
    await advanceUntil(g.clock, STEP_MS, async () => (await cluster.guardTaints(node)).length > 0, CONVERGE);
    expect(await cluster.guardTaints(node)).toEqual([
      { key: TAINT_KEY, value: 'true', effect: 'NoSchedule' },
    ]);
  });

  it('429 with Retry-After on the taint patch: the retry waits as long as the server said', async () => {
    const node = nodeName('throttled');
    const retryAfterSeconds = 3;
    // The guard watches every Node of the shared cluster: only this node's adds count. Reconcile errors
    // are the guard's (only the suite's Nodes have agent Pods, so only they are ever patched).
    const adds = (): number => g.addsOf(node);
    const errors = async (): Promise<number> => g.metric('controller_runtime_reconcile_errors_total');
    const failedBefore = await errors();
    // The agent Pod is overdue before its Node appears: no earlier grace-window requeue is pending.
    await cluster.createPod(`agent-${node}`, node);
    await cluster.setReady(`agent-${node}`, false, g.clock.now() - 10 * GRACE_MS - 1000);
    const fault = cluster.proxy.inject({
      verbs: ['patch'],
      resource: 'nodes',
      name: node,
      user: cluster.guardUser,
      status: 429,
      retryAfterSeconds,
    });
    await cluster.createNode(node);
    // Quiet: every event of the node and its Pod handled, the last (throttled) attempt's retry queued.
    await eventually(async () => {
      const pod = g.guard.agentPods.getByName(`agent-${node}`, cluster.agentNs);
      const notReady = pod?.status?.conditions?.some((c) => c.type === 'Ready' && c.status === 'False');
      const idle =
        g.guard.controller.queue.len() === 0 && (await g.metric('controller_runtime_active_workers')) === 0;
      return (
        notReady === true && idle && fault.hits() > 0 && (await errors()) - failedBefore === fault.hits()
      );
    }, CONVERGE);
    const queued = adds();
    const hits = fault.hits();
    g.clock.advance(retryAfterSeconds * 1000 - 1);
    expect(adds()).toBe(queued);
    fault.remove();
    g.clock.advance(1);
    expect(adds()).toBe(queued + 1);
    await eventually(async () => (await cluster.guardTaints(node)).length === 1, CONVERGE);
    expect(fault.hits()).toBe(hits);
  });
});
