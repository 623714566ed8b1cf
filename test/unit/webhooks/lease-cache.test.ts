// Cached lease lookups (docs/admission.md, "Cached lease lookups"): the root of an owned object's chain is
// matched against the BerthLease informer's view, without a LIST; the object itself as root, and every lease
// a rule decides on (gate removal, activation, the admission record), are read live. A stale cache can only
// deny or bind (and so gate), never let a Pod of a managed chain in ungated; each direction is here.
import { describe, expect, it } from 'vitest';
import { SCHEDULING_GATE } from '../../../src/berth/api.ts';
import type { JsonObject } from '../../../src/workloads/model.ts';
import { decideWorkloadAdmission } from '../../../webhooks/decide-workload.ts';
import type { LeaseCache } from '../../../webhooks/leases.ts';
import type { AdmissionRequest } from '../../../webhooks/review.ts';
import {
  activeWorkload,
  berthLease,
  NS,
  OPERATOR_USER,
  request,
  stamped,
  workload,
} from '../../fixtures/webhooks/objects.ts';
import { applyDecision, NOW, world } from '../../fixtures/webhooks/world.ts';

/** A cache holding `leases` (copies: it does not follow the FakeIO), synced unless told otherwise. */
function cacheOf(leases: JsonObject[], synced = true): LeaseCache {
  const held = leases.map((l) => structuredClone(l));
  return {
    synced: () => synced,
    inNamespace: (namespace) =>
      held.filter((l) => (l.metadata as { namespace?: string }).namespace === namespace),
  };
}

function withCache(w: ReturnType<typeof world>, cache: LeaseCache) {
  const deps = { io: w.io, now: () => NOW, operatorUser: OPERATOR_USER, leaseCache: cache };
  return {
    mutate: (req: AdmissionRequest) => decideWorkloadAdmission(req, 'mutate', deps),
    validate: (req: AdmissionRequest) => decideWorkloadAdmission(req, 'validate', deps),
  };
}

const ops = (w: ReturnType<typeof world>) =>
  w.io.calls.map((c) => (c.op === 'get-workload' ? `get ${c.kind}` : c.op));
const gates = (o: JsonObject) => (o.spec as { schedulingGates?: { name: string }[] }).schedulingGates ?? [];

describe('an owned object is matched against the cache', () => {
  it('a managed Pod costs its stamped ReplicaSet (and on the validating path the live lease), no LIST', async () => {
    const w = world();
    const { mutate, validate } = withCache(w, cacheOf([...w.io.leases.values()]));
    const pod = workload('Pod', 'web-5d9c-x1', {
      owner: { kind: 'ReplicaSet', name: 'web-5d9c', uid: w.uids.replicaSet },
    });
    const d = await mutate(request('Pod', 'CREATE', pod));
    expect(gates(applyDecision(pod, d))).toContainEqual({ name: SCHEDULING_GATE });
    expect(ops(w)).toEqual(['get ReplicaSet']);
    w.io.calls.length = 0;
    expect((await validate(request('Pod', 'CREATE', applyDecision(pod, d)))).allowed).toBe(true);
    // A rule decides on the lease itself (deleted or replaced: §4.4 step 7e): a GET, never the cache.
    expect(ops(w)).toEqual(['get ReplicaSet', 'get-lease']);
  });

  it('a Pod of an unmanaged Deployment costs its two owners and no LIST', async () => {
    const w = world();
    w.io.addWorkload('Deployment', workload('Deployment', 'api', { uid: 'd-api' }));
    w.io.addWorkload(
      'ReplicaSet',
      workload('ReplicaSet', 'api-1', {
        uid: 'rs-api',
        owner: { kind: 'Deployment', name: 'api', uid: 'd-api' },
      }),
    );
    const { mutate } = withCache(w, cacheOf([...w.io.leases.values()]));
    const pod = workload('Pod', 'api-1-x', { owner: { kind: 'ReplicaSet', name: 'api-1', uid: 'rs-api' } });
    expect(await mutate(request('Pod', 'CREATE', pod))).toEqual({ allowed: true });
    expect(ops(w)).toEqual(['get ReplicaSet', 'get Deployment']);
  });

  it('a cache that has not listed yet is not used: the LIST is live', async () => {
    const w = world();
    const { mutate } = withCache(w, cacheOf([], false));
    const pod = workload('Pod', 'web-5d9c-x1', {
      owner: { kind: 'ReplicaSet', name: 'web-5d9c', uid: w.uids.replicaSet },
    });
    expect((await mutate(request('Pod', 'CREATE', pod))).allowed).toBe(true);
    expect(ops(w)).toEqual(['list-leases', 'get ReplicaSet']);
  });
});

describe('a stale cache errs towards denying or gating', () => {
  it('a lease the cache has not seen yet: a Pod of a stamped chain is denied, not let in', async () => {
    const w = world();
    const { mutate, validate } = withCache(w, cacheOf([]));
    const pod = workload('Pod', 'web-5d9c-x1', {
      owner: { kind: 'ReplicaSet', name: 'web-5d9c', uid: w.uids.replicaSet },
    });
    for (const decide of [mutate, validate])
      expect(await decide(request('Pod', 'CREATE', pod))).toMatchObject({
        allowed: false,
        reason: 'no-live-lease',
      });
  });

  it('a lease the cache still shows after its deletion: the Pod is bound and born gated', async () => {
    const w = world();
    const cache = cacheOf([...w.io.leases.values()]);
    w.io.leases.clear();
    const { mutate } = withCache(w, cache);
    const pod = workload('Pod', 'web-5d9c-x1', {
      owner: { kind: 'ReplicaSet', name: 'web-5d9c', uid: w.uids.replicaSet },
    });
    const d = await mutate(request('Pod', 'CREATE', pod));
    expect(gates(applyDecision(pod, d))).toContainEqual({ name: SCHEDULING_GATE });
  });

  it('the cache never lets the gate be lifted: gate removal reads the lease live', async () => {
    const w = world();
    const podUID = 'pod-uid-1';
    // The cache says Active with the Pod registered; the stored lease is Stopping.
    w.setWorkload(activeWorkload(w.uids.deployment, NOW + 60_000, [{ name: 'web-5d9c-x1', uid: podUID }]));
    const cache = cacheOf([...w.io.leases.values()]);
    w.setWorkload({
      ...activeWorkload(w.uids.deployment, NOW + 60_000, [{ name: 'web-5d9c-x1', uid: podUID }]),
      phase: 'Stopping',
    });
    const { validate } = withCache(w, cache);
    const gated = stamped(
      'Pod',
      workload('Pod', 'web-5d9c-x1', {
        uid: podUID,
        owner: { kind: 'ReplicaSet', name: 'web-5d9c', uid: w.uids.replicaSet },
        gates: [SCHEDULING_GATE],
      }),
      w.binding,
    );
    const ungated = structuredClone(gated);
    (ungated.spec as JsonObject).schedulingGates = [];
    const d = await validate(request('Pod', 'UPDATE', ungated, { old: gated, username: OPERATOR_USER }));
    expect(d).toMatchObject({ allowed: false, reason: 'leaseNoLongerPermits' });
    expect(w.io.calls.map((c) => c.op)).toContain('get-lease');
  });
});

describe('the object itself as root is matched live', () => {
  it('a target created just after its lease is stamped although the cache has not seen the lease', async () => {
    const w = world();
    const { mutate } = withCache(w, cacheOf([]));
    w.io.addLease(berthLease('api', { target: { kind: 'Deployment', name: 'api' } }));
    const d = await mutate(request('Deployment', 'CREATE', workload('Deployment', 'api', { namespace: NS })));
    expect(d.allowed && (d.patch ?? []).length > 0).toBe(true);
    expect(w.io.calls.map((c) => c.op)).toEqual(['list-leases', 'list-leases']);
  });
});
