// The one owner-chain walk (docs/behaviour.md §4.3 steps 1-2) that permitting and binding resolution
// share, against in-memory reads: what it follows, what it refuses, its depth limit and its messages.
import { describe, expect, it } from 'vitest';
import { KubeApiError } from '../../../src/kube/client.ts';
import type { JsonObject, OwnerKind } from '../../../src/workloads/model.ts';
import {
  MAX_OWNER_DEPTH,
  OwnerChainError,
  OwnerChainMessage,
  type OwnerReads,
  walkOwnerChain,
} from '../../../src/workloads/owner-chain.ts';

interface Owner {
  apiVersion?: string;
  kind: string;
  name: string;
  uid: string;
  controller?: boolean;
}

const object = (name: string, uid: string, owner?: Owner): JsonObject => ({
  metadata: {
    name,
    uid,
    namespace: 'shop',
    ...(owner === undefined
      ? {}
      : { ownerReferences: [{ apiVersion: 'apps/v1', controller: true, ...owner }] }),
  },
});

/** Reads from a map `Kind/name`, recording each; `fail` makes every read throw it. */
function reads(objects: Record<string, unknown>, fail?: Error): OwnerReads & { calls: string[] } {
  const calls: string[] = [];
  return {
    calls,
    async get(kind: OwnerKind, name: string) {
      calls.push(`${kind}/${name}`);
      if (fail !== undefined) throw fail;
      return objects[`${kind}/${name}`];
    },
    describe: (err) => `described(${err instanceof Error ? err.message : String(err)})`,
  };
}

const pod = (owner?: Owner) => ({
  object: object('web-5d9c-x1', 'pod-uid', owner),
  kind: 'Pod' as const,
  apiVersion: 'v1',
});
const rsOwner: Owner = { kind: 'ReplicaSet', name: 'web-5d9c', uid: 'rs-uid' };
const deployment = object('web', 'deploy-uid');
const replicaSet = object('web-5d9c', 'rs-uid', { kind: 'Deployment', name: 'web', uid: 'deploy-uid' });

async function failure(run: Promise<unknown>): Promise<OwnerChainError> {
  const err = await run.then(
    () => undefined,
    (e: unknown) => e,
  );
  expect(err).toBeInstanceOf(OwnerChainError);
  return err as OwnerChainError;
}

describe('walkOwnerChain', () => {
  it('follows the controller owners to the root, each with the kind and apiVersion it was read at', async () => {
    const r = reads({ 'ReplicaSet/web-5d9c': replicaSet, 'Deployment/web': deployment });
    const { links, unread } = await walkOwnerChain(pod(rsOwner), r);
    expect(unread).toBeUndefined();
    expect(links.map((l) => [l.kind, l.apiVersion, l.object.metadata?.name])).toEqual([
      ['Pod', 'v1', 'web-5d9c-x1'],
      ['ReplicaSet', 'apps/v1', 'web-5d9c'],
      ['Deployment', 'apps/v1', 'web'],
    ]);
    expect(r.calls).toEqual(['ReplicaSet/web-5d9c', 'Deployment/web']);
  });

  it('an object without a controller owner is its own root, with the apiVersion its caller gave', async () => {
    const r = reads({});
    const start = { object: object('web', 'u'), kind: 'Deployment' as const, apiVersion: 'apps/v1beta2' };
    expect(await walkOwnerChain(start, r)).toEqual({ links: [start] });
    expect(r.calls).toEqual([]);
  });

  it('follows only a controller reference to a kind that can own a workload, by group', async () => {
    const notFollowed: Owner[] = [
      { ...rsOwner, controller: false },
      { apiVersion: 'apps/v1', kind: 'DaemonSet', name: 'agent', uid: 'ds' },
      { apiVersion: 'example.com/v1', kind: 'ReplicaSet', name: 'web-5d9c', uid: 'rs-uid' },
      { apiVersion: 'v1', kind: 'Pod', name: 'other', uid: 'p' },
    ];
    for (const owner of notFollowed) {
      const r = reads({ 'ReplicaSet/web-5d9c': replicaSet });
      expect((await walkOwnerChain(pod(owner), r)).links).toHaveLength(1);
      expect(r.calls).toEqual([]);
    }
    // Another version of the same group is the same resource (read at its v1).
    const r = reads({ 'ReplicaSet/web-5d9c': object('web-5d9c', 'rs-uid') });
    const { links } = await walkOwnerChain(pod({ ...rsOwner, apiVersion: 'apps/v1beta2' }), r);
    expect(links[1]?.apiVersion).toBe('apps/v1');
  });

  it('a missing parent is an error, never the end of the chain', async () => {
    const err = await failure(walkOwnerChain(pod(rsOwner), reads({})));
    expect(err.message).toBe('resolve controller owner: replicasets.apps "web-5d9c" not found');
    expect([err.reason, err.readFailed]).toEqual(['resolve-owner', false]);
  });

  it('a parent replaced under the same name (another UID) is an error', async () => {
    const r = reads({ 'ReplicaSet/web-5d9c': object('web-5d9c', 'a-newer-uid') });
    const err = await failure(walkOwnerChain(pod(rsOwner), r));
    expect([err.reason, err.message, err.readFailed]).toEqual([
      'owner-uid-changed',
      OwnerChainMessage.uidChanged,
      false,
    ]);
  });

  it('a failed read is an error named by the caller, marked as a failed read', async () => {
    const cause = new KubeApiError(500, { code: 500, message: 'etcdserver: request timed out' });
    const err = await failure(walkOwnerChain(pod(rsOwner), reads({}, cause)));
    expect(err.message).toBe(`resolve controller owner: described(${cause.message})`);
    expect([err.reason, err.readFailed]).toEqual(['resolve-owner', true]);
  });

  it('a malformed parent is an error naming the field', async () => {
    const bad = { ...replicaSet, spec: { replicas: 'three' } };
    const err = await failure(walkOwnerChain(pod(rsOwner), reads({ 'ReplicaSet/web-5d9c': bad })));
    expect(err.message).toBe(
      'resolve controller owner: malformed owner: spec.replicas: Invalid input: expected number, received string',
    );
    expect(err.readFailed).toBe(false);
  });

  // rs-0 <- rs-1 <- ... <- rs-(n-1) <- the Pod: the Pod is depth 0, rs-0 (no owner) depth n.
  const ladder = (n: number): { objects: Record<string, unknown>; start: ReturnType<typeof pod> } => {
    const objects: Record<string, unknown> = {};
    for (let i = 0; i < n; i++) {
      const owner = i === 0 ? undefined : { kind: 'ReplicaSet', name: `rs-${i - 1}`, uid: `uid-${i - 1}` };
      objects[`ReplicaSet/rs-${i}`] = object(`rs-${i}`, `uid-${i}`, owner);
    }
    return { objects, start: pod({ kind: 'ReplicaSet', name: `rs-${n - 1}`, uid: `uid-${n - 1}` }) };
  };

  it(`resolves a chain of depth ${MAX_OWNER_DEPTH}, and refuses one deeper even when it ends there`, async () => {
    const ok = ladder(MAX_OWNER_DEPTH);
    expect((await walkOwnerChain(ok.start, reads(ok.objects))).links).toHaveLength(MAX_OWNER_DEPTH + 1);
    const deep = ladder(MAX_OWNER_DEPTH + 1);
    const err = await failure(walkOwnerChain(deep.start, reads(deep.objects)));
    expect([err.reason, err.message]).toEqual(['owner-chain-too-deep', OwnerChainMessage.tooDeep]);
  });

  it('a loop of owners ends at the depth limit, after a bounded number of reads', async () => {
    // A ReplicaSet naming itself as its controller.
    const r = reads({ 'ReplicaSet/web-5d9c': object('web-5d9c', 'rs-uid', rsOwner) });
    const err = await failure(walkOwnerChain(pod(rsOwner), r));
    expect(err.reason).toBe('owner-chain-too-deep');
    expect(r.calls).toHaveLength(MAX_OWNER_DEPTH + 1);
  });

  describe('endAt', () => {
    it("ends at an owner's controller reference without reading it", async () => {
      const r = reads({ 'ReplicaSet/web-5d9c': replicaSet, 'Deployment/web': deployment });
      const asked: string[] = [];
      const chain = await walkOwnerChain(pod(rsOwner), r, {
        endAt: (owner, next) => {
          asked.push(`${owner.kind} -> ${next.kind}/${next.name}`);
          return true;
        },
      });
      expect(chain.links.map((l) => l.kind)).toEqual(['Pod', 'ReplicaSet']);
      expect(chain.unread).toEqual({ kind: 'Deployment', name: 'web', uid: 'deploy-uid' });
      expect(r.calls).toEqual(['ReplicaSet/web-5d9c']);
      // Never asked for the walked object (its references are the request's, not the API server's).
      expect(asked).toEqual(['ReplicaSet -> Deployment/web']);
    });

    it('keeps every check on what it reads, and the depth limit counts the unread owner', async () => {
      const replaced = reads({ 'ReplicaSet/web-5d9c': object('web-5d9c', 'a-newer-uid', rsOwner) });
      const err = await failure(walkOwnerChain(pod(rsOwner), replaced, { endAt: () => true }));
      expect(err.reason).toBe('owner-uid-changed');
      const deep = ladder(MAX_OWNER_DEPTH + 1);
      const ends = (owner: { object: { metadata?: { name?: string | null } | null } }) =>
        owner.object.metadata?.name === 'rs-1';
      // rs-1 is at the depth limit: its owner rs-0 would be past it, so the walk reads on and refuses.
      const tooDeep = await failure(walkOwnerChain(deep.start, reads(deep.objects), { endAt: ends }));
      expect(tooDeep.reason).toBe('owner-chain-too-deep');
    });
  });
});
