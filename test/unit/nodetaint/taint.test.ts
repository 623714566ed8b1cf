// The taint writer: re-read, skip when present, keep other taints, optimistic lock, bounded 409 retry.
import { describe, expect, it } from 'vitest';
import { isConflict, KubeApiError } from '../../../src/kube/client.ts';
import { type Clock, realClock } from '../../../src/kube/clock.ts';
import {
  armTaint,
  DEFAULT_ARM_ATTEMPTS,
  type NodeApi,
  nodeApi,
  taintPatch,
} from '../../../src/nodetaint/taint.ts';
import { FakeCluster, NODE, node, TAINT } from './fixtures.ts';

function recordingClock(): { clock: Clock; sleeps: number[] } {
  const sleeps: number[] = [];
  return { clock: { ...realClock, now: () => 0, sleep: async (ms) => void sleeps.push(ms) }, sleeps };
}

const OTHER = { key: 'example.com/maintenance', value: 'yes', effect: 'NoSchedule' };

describe('taintPatch', () => {
  it('appends to the current taints and carries the resourceVersion', () => {
    const n = node(NODE, false, [OTHER]);
    expect(taintPatch(n, TAINT)).toEqual({
      metadata: { resourceVersion: '1' },
      spec: { taints: [OTHER, { key: TAINT.key, value: 'true', effect: 'NoSchedule' }] },
    });
  });

  it('is undefined when the key is present with any value or effect', () => {
    expect(taintPatch(node(NODE, false, [{ key: TAINT.key, effect: 'PreferNoSchedule' }]), TAINT)).toBe(
      undefined,
    );
  });

  it('refuses to write without a resourceVersion (no unlocked writes)', () => {
    const n = node(NODE, false);
    delete n.metadata!.resourceVersion;
    expect(() => taintPatch(n, TAINT)).toThrow(/resourceVersion/);
  });
});

describe('armTaint', () => {
  it('writes once, with the field manager, keeping other taints', async () => {
    const cluster = new FakeCluster().add(node(NODE, false, [OTHER]));
    const result = await armTaint(cluster, NODE, TAINT);
    expect(result).toMatchObject({ outcome: 'armed', attempts: 1 });
    expect(cluster.taintsOf(NODE)).toEqual([OTHER, { key: TAINT.key, value: 'true', effect: 'NoSchedule' }]);
    expect(cluster.patches).toMatchObject([{ fieldManager: 'aether-controller', locked: true }]);
  });

  it('re-reads after a 409 and keeps what the other writer changed', async () => {
    const cluster = new FakeCluster().add(node(NODE, false));
    // A concurrent writer adds a taint between our read and our first patch: a real stale write.
    cluster.beforePatch = (attempt) => {
      if (attempt === 1)
        cluster.update(NODE, (n) => {
          n.spec = { taints: [OTHER] };
        });
    };
    const { clock, sleeps } = recordingClock();
    const result = await armTaint(cluster, NODE, TAINT, { clock, random: () => 0.5 });
    expect(result).toMatchObject({ outcome: 'armed', attempts: 2 });
    expect(cluster.gets).toBe(2);
    expect(cluster.taintsOf(NODE)).toEqual([OTHER, { key: TAINT.key, value: 'true', effect: 'NoSchedule' }]);
    expect(sleeps).toEqual([10.5]);
  });

  it('stops when the re-read after a 409 shows the taint (someone else armed it)', async () => {
    const cluster = new FakeCluster().add(node(NODE, false));
    cluster.beforePatch = () =>
      cluster.update(NODE, (n) => {
        n.spec = { taints: [{ ...TAINT }] };
      });
    const { clock } = recordingClock();
    await expect(armTaint(cluster, NODE, TAINT, { clock })).resolves.toMatchObject({
      outcome: 'already-present',
    });
    expect(cluster.patches).toHaveLength(1);
    expect(cluster.keyCount(NODE)).toBe(1);
  });

  it(`gives up after ${DEFAULT_ARM_ATTEMPTS} conflicting attempts and throws the conflict`, async () => {
    const cluster = new FakeCluster().add(node(NODE, false));
    cluster.conflicts = Number.POSITIVE_INFINITY;
    const { clock, sleeps } = recordingClock();
    const err = await armTaint(cluster, NODE, TAINT, { clock }).catch((e: unknown) => e);
    expect(isConflict(err)).toBe(true);
    expect(cluster.patches).toHaveLength(5);
    expect(cluster.gets).toBe(5);
    expect(sleeps).toHaveLength(4);
    for (const ms of sleeps) expect(ms).toBeGreaterThanOrEqual(10);
    for (const ms of sleeps) expect(ms).toBeLessThanOrEqual(11);
    expect(cluster.keyCount(NODE)).toBe(0);
  });

  it('does not retry other errors', async () => {
    const api: NodeApi = {
      getNode: async () => node(NODE, false),
      mergePatchNode: async () => {
        throw new KubeApiError(403, { reason: 'Forbidden', code: 403, message: 'no' });
      },
    };
    await expect(armTaint(api, NODE, TAINT)).rejects.toMatchObject({ code: 403 });
  });

  it('reports a node deleted before or during the write', async () => {
    const cluster = new FakeCluster();
    await expect(armTaint(cluster, NODE, TAINT)).resolves.toEqual({ outcome: 'node-gone', attempts: 0 });
    cluster.add(node(NODE, false));
    cluster.beforePatch = () => cluster.nodes.delete(NODE);
    await expect(armTaint(cluster, NODE, TAINT)).resolves.toEqual({ outcome: 'node-gone', attempts: 1 });
  });

  it('stops between attempts when aborted', async () => {
    const cluster = new FakeCluster().add(node(NODE, false));
    cluster.conflicts = Number.POSITIVE_INFINITY;
    const ac = new AbortController();
    cluster.beforePatch = () => ac.abort(new Error('stopping'));
    await expect(armTaint(cluster, NODE, TAINT, { signal: ac.signal })).rejects.toThrow('stopping');
    expect(cluster.patches).toHaveLength(1);
  });
});

describe('nodeApi over a raw transport', () => {
  it('sends a merge patch with the field manager and reads errors as API errors', async () => {
    const requests: Array<Record<string, unknown>> = [];
    const api = nodeApi({
      request: async (req) => {
        requests.push({ ...req });
        const conflict = req.method === 'PATCH';
        const body = conflict
          ? { kind: 'Status', code: 409, reason: 'Conflict', message: 'modified' }
          : node(NODE, false);
        return {
          status: conflict ? 409 : 200,
          headers: {},
          text: async () => JSON.stringify(body),
          stream: () => null,
        };
      },
    });
    await expect(api.getNode('a/b')).resolves.toMatchObject({ metadata: { name: NODE } });
    const err = await api
      .mergePatchNode(
        NODE,
        { metadata: { resourceVersion: '1' }, spec: { taints: [] } },
        { fieldManager: 'fm' },
      )
      .catch((e: unknown) => e);
    expect(isConflict(err)).toBe(true);
    expect(requests[0]).toMatchObject({ path: '/api/v1/nodes/a%2Fb' });
    expect(requests[1]).toMatchObject({
      method: 'PATCH',
      path: `/api/v1/nodes/${NODE}`,
      query: { fieldManager: 'fm' },
      contentType: 'application/merge-patch+json',
      body: { metadata: { resourceVersion: '1' } },
    });
  });
});
