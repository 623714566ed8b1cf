// The reconciler's owner-chain adapter (docs/behaviour.md §2.7 step 3): the root of a Pod's live chain,
// walked by src/workloads/owner-chain.ts with the reconciler's reads, with the webhook's messages.
import { describe, expect, it } from 'vitest';
import { memoizedOwners, resolveRoot } from '../../../src/berth/ancestry.ts';
import { AdmissionMessage, MANAGED_LEASE } from '../../../src/berth/api.ts';
import { deployment, pod, replicaSet, TARGET_UID } from './managed-fixtures.ts';
import { FakeWorkloadApi, serverError } from './workload-fakes.ts';

describe('resolveRoot', () => {
  const api = new FakeWorkloadApi();
  api.put('Deployment', deployment(3));
  api.put('ReplicaSet', replicaSet());
  const get = (kind: Parameters<FakeWorkloadApi['get']>[0], name: string) => api.get(kind, 'team-a', name);

  it('follows controller owners to the target', async () => {
    expect(await resolveRoot(pod('a'), 'Pod', get)).toEqual({
      kind: 'Deployment',
      apiVersion: 'apps/v1',
      name: 'web',
      uid: TARGET_UID,
    });
  });

  it('fails on a missing or replaced parent and on a chain too deep, with the webhook’s messages', async () => {
    await expect(resolveRoot(pod('a', { rs: 'other' }), 'Pod', get)).rejects.toThrow(
      AdmissionMessage.ownerUIDChanged,
    );
    const orphan = pod('b');
    orphan.metadata.ownerReferences = [
      { apiVersion: 'apps/v1', kind: 'ReplicaSet', name: 'ghost', uid: 'g', controller: true },
    ];
    await expect(resolveRoot(orphan, 'Pod', get)).rejects.toThrow(
      'resolve controller owner: replicasets.apps "ghost" not found',
    );
    const loop = new FakeWorkloadApi();
    const rs = replicaSet({
      uid: 'loop',
      ownerReferences: [
        { apiVersion: 'apps/v1', kind: 'ReplicaSet', name: 'web-abc', uid: 'loop', controller: true },
      ],
    });
    loop.put('ReplicaSet', rs);
    const looped = pod('c', { rs: 'loop' });
    await expect(resolveRoot(looped, 'Pod', (k, n) => loop.get(k, 'team-a', n))).rejects.toThrow(
      AdmissionMessage.ownerChainTooDeep,
    );
  });

  it('a Pod without a controller owner is its own root', async () => {
    const bare = pod('d');
    bare.metadata.ownerReferences = [];
    bare.metadata.annotations = { [MANAGED_LEASE]: 'web' };
    expect((await resolveRoot(bare, 'Pod', get)).kind).toBe('Pod');
  });

  it('names a failed read as the reconciler names API errors (the Status message)', async () => {
    const failing = new FakeWorkloadApi();
    failing.failures.set('get ReplicaSet', [serverError('etcdserver: request timed out')]);
    await expect(resolveRoot(pod('e'), 'Pod', (k, n) => failing.get(k, 'team-a', n))).rejects.toThrow(
      'resolve controller owner: etcdserver: request timed out',
    );
  });
});

describe('memoizedOwners', () => {
  it('reads each owner once for the Pods of one pass', async () => {
    const api = new FakeWorkloadApi();
    api.put('Deployment', deployment(3));
    api.put('ReplicaSet', replicaSet());
    const owners = memoizedOwners(api, 'team-a');
    const roots = await Promise.all(['a', 'b', 'c'].map((name) => resolveRoot(pod(name), 'Pod', owners)));
    expect(roots.map((r) => r.uid)).toEqual([TARGET_UID, TARGET_UID, TARGET_UID]);
    expect(api.calls).toEqual(['get ReplicaSet/web-abc', 'get Deployment/web']);
  });
});
