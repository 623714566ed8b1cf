// Binding resolution (docs/behaviour.md §4.3) and its read cost (issue #6 "Cost per review"), through the shared handler
// flow with an in-memory AdmissionIO.

import { describe, expect, it } from 'vitest';
import { SCHEDULING_GATE } from '../../../src/berth/api.ts';
import { KubeApiError } from '../../../src/kube/client.ts';
import type { JsonObject } from '../../../src/workloads/model.ts';
import { berthLease, request, stamped, workload } from '../../fixtures/webhooks/objects.ts';
import { applyDecision, world } from '../../fixtures/webhooks/world.ts';

const rsOwner = (uid: string) => ({ kind: 'ReplicaSet' as const, name: 'web-5d9c', uid });

describe('decisions without any API read', () => {
  it('a Pod without a controller owner', async () => {
    const w = world();
    const d = await w.mutate(request('Pod', 'CREATE', workload('Pod', 'bare')));
    expect(d).toEqual({ allowed: true });
    expect(w.io.calls).toEqual([]);
  });

  it('a Pod owned by a kind that cannot be managed (DaemonSet)', async () => {
    const w = world();
    const pod = workload('Pod', 'ds-pod');
    (pod.metadata as Record<string, unknown>).ownerReferences = [
      { apiVersion: 'apps/v1', kind: 'DaemonSet', name: 'agent', uid: 'ds-uid', controller: true },
    ];
    expect(await w.validate(request('Pod', 'CREATE', pod))).toEqual({ allowed: true });
    expect(w.io.calls).toEqual([]);
  });

  it('a Job without an owner', async () => {
    const w = world();
    expect(await w.mutate(request('Job', 'CREATE', workload('Job', 'once')))).toEqual({ allowed: true });
    expect(w.io.calls).toEqual([]);
  });

  it('a non-controller owner reference is not followed', async () => {
    const w = world();
    const pod = workload('Pod', 'p');
    (pod.metadata as Record<string, unknown>).ownerReferences = [
      { apiVersion: 'apps/v1', kind: 'ReplicaSet', name: 'web-5d9c', uid: w.uids.replicaSet },
    ];
    expect(await w.mutate(request('Pod', 'CREATE', pod))).toEqual({ allowed: true });
    expect(w.io.calls).toEqual([]);
  });

  it('the mutating path leaves UPDATEs alone', async () => {
    const w = world();
    const pod = workload('Pod', 'p', { owner: rsOwner(w.uids.replicaSet) });
    expect(await w.mutate(request('Pod', 'UPDATE', pod, { old: pod }))).toEqual({ allowed: true });
    expect(w.io.calls).toEqual([]);
  });

  it('DELETE and CONNECT are allowed', async () => {
    const w = world();
    expect(await w.validate(request('Deployment', 'DELETE', null, { old: w.deployment }))).toEqual({
      allowed: true,
    });
    expect(w.io.calls).toEqual([]);
  });
});

describe('owner chains are always walked, as in the Go operator', () => {
  it('a Pod adopted into a chain stamped for a lease that is gone is denied, even with no lease left', async () => {
    const w = world();
    // The Deployment and its ReplicaSet keep the stamp of lease web, which is deleted.
    w.io.leases.clear();
    const pod = workload('Pod', 'stray', { owner: rsOwner(w.uids.replicaSet) });
    for (const decide of [w.mutate, w.validate])
      expect(await decide(request('Pod', 'CREATE', pod))).toMatchObject({
        allowed: false,
        code: 403,
        reason: 'no-live-lease',
      });
  });

  it('a Pod whose owner is gone is denied, lease or none (the owner may have been managed)', async () => {
    const w = world();
    w.io.leases.clear();
    const pod = workload('Pod', 'orphan', { owner: { kind: 'ReplicaSet', name: 'gone', uid: 'gone-uid' } });
    expect(await w.validate(request('Pod', 'CREATE', pod))).toMatchObject({
      allowed: false,
      code: 403,
      message: 'resolve controller owner: replicasets.apps "gone" not found',
    });
  });

  it('an owner-less root object in a namespace without BerthLeases costs one LIST (limit=1)', async () => {
    const w = world();
    const d = await w.mutate(
      request('Deployment', 'CREATE', workload('Deployment', 'api', { namespace: 'other' })),
    );
    expect(d).toEqual({ allowed: true });
    expect(w.io.calls).toEqual([{ op: 'list-leases', namespace: 'other', limit: 1 }]);
  });

  it("a managed Pod costs its stamped ReplicaSet and the namespace's leases: 2 reads (issue #21)", async () => {
    const w = world();
    const pod = workload('Pod', 'web-5d9c-x1', { owner: rsOwner(w.uids.replicaSet) });
    for (const decide of [w.mutate, w.validate]) {
      w.io.calls.length = 0;
      const d = await decide(
        request('Pod', 'CREATE', decide === w.mutate ? pod : stamped('Pod', pod, w.binding)),
      );
      expect(d.allowed).toBe(true);
      // The LIST goes out beside the walk's GET (the review waits for the slower, not for both).
      expect(w.io.calls).toEqual([
        { op: 'list-leases', namespace: 'shop', limit: undefined },
        { op: 'get-workload', kind: 'ReplicaSet', namespace: 'shop', name: 'web-5d9c' },
      ]);
    }
  });

  it('an unstamped ReplicaSet is walked to its Deployment: its stamp is what a lease that is gone leaves', async () => {
    // The stale-stamp chain with an unstamped ReplicaSet: skipping the Deployment here would find no lease
    // and no stamp, and let the Pod in ungated.
    const w = world();
    w.io.leases.clear();
    w.io.addWorkload(
      'ReplicaSet',
      workload('ReplicaSet', 'web-5d9c', {
        uid: w.uids.replicaSet,
        owner: { kind: 'Deployment', name: 'web', uid: w.uids.deployment },
      }),
    );
    const pod = workload('Pod', 'stray', { owner: rsOwner(w.uids.replicaSet) });
    for (const decide of [w.mutate, w.validate]) {
      w.io.calls.length = 0;
      expect(await decide(request('Pod', 'CREATE', pod))).toMatchObject({
        allowed: false,
        reason: 'no-live-lease',
      });
      expect(w.io.calls.map((c) => (c.op === 'get-workload' ? c.kind : c.op))).toEqual([
        'list-leases',
        'ReplicaSet',
        'Deployment',
      ]);
    }
  });

  it("a Job's Pod lists leases only once the walk has found a CronJob above the Job", async () => {
    const w = world();
    w.io.addWorkload('Job', workload('Job', 'once', { uid: 'job-1' }));
    const pod = workload('Pod', 'once-x', { owner: { kind: 'Job', name: 'once', uid: 'job-1' } });
    expect(await w.mutate(request('Pod', 'CREATE', pod))).toEqual({ allowed: true });
    // No lease can target a Job: its Pod costs the Job's GET and nothing else.
    expect(w.io.calls.map((c) => c.op)).toEqual(['get-workload']);

    w.io.calls.length = 0;
    w.io.addWorkload('CronJob', workload('CronJob', 'hourly', { uid: 'cj-1' }));
    w.io.addWorkload(
      'Job',
      workload('Job', 'hourly-1', {
        uid: 'job-2',
        owner: { kind: 'CronJob', name: 'hourly', uid: 'cj-1' },
      }),
    );
    const scheduled = workload('Pod', 'hourly-1-x', {
      owner: { kind: 'Job', name: 'hourly-1', uid: 'job-2' },
    });
    expect(await w.mutate(request('Pod', 'CREATE', scheduled))).toEqual({ allowed: true });
    expect(w.io.calls.map((c) => (c.op === 'get-workload' ? c.kind : c.op))).toEqual([
      'Job',
      'CronJob',
      'list-leases',
    ]);
  });

  it('under a stamped ReplicaSet whose Deployment was replaced, a Pod is born gated, never let in ungated', async () => {
    // The Deployment the ReplicaSet names is gone; a new one of the same name has another UID. Reading it
    // would deny; without the read the Pod is bound, and only the permit path (its own live walk, which
    // refuses the replaced owner: permit.test.ts) could ever lift its gate.
    const w = world();
    w.io.addWorkload('Deployment', {
      ...w.deployment,
      metadata: { ...(w.deployment.metadata as object), uid: 'new' },
    });
    const pod = workload('Pod', 'web-5d9c-x2', { owner: rsOwner(w.uids.replicaSet) });
    const mutated = await w.mutate(request('Pod', 'CREATE', pod));
    expect(mutated.allowed).toBe(true);
    const admitted = applyDecision(pod, mutated);
    expect((admitted.spec as { schedulingGates?: { name: string }[] }).schedulingGates).toContainEqual({
      name: SCHEDULING_GATE,
    });
    // The validating webhook refuses the same Pod without the gate, or without the stamp.
    const ungated = structuredClone(admitted);
    (ungated.spec as JsonObject).schedulingGates = [];
    expect(await w.validate(request('Pod', 'CREATE', ungated))).toMatchObject({
      allowed: false,
      reason: 'gateRequired',
    });
    expect(await w.validate(request('Pod', 'CREATE', pod))).toMatchObject({
      allowed: false,
      reason: 'bindingChanged',
    });
  });

  it('never caches across reviews: a lease created just before its target is seen', async () => {
    const w = world();
    const d1 = await w.mutate(
      request('Deployment', 'CREATE', workload('Deployment', 'api', { namespace: 'fresh' })),
    );
    expect(d1).toEqual({ allowed: true });
    w.io.addLease(berthLease('api', { namespace: 'fresh', target: { kind: 'Deployment', name: 'api' } }));
    const d2 = await w.mutate(
      request('Deployment', 'CREATE', workload('Deployment', 'api', { namespace: 'fresh' })),
    );
    expect(d2.allowed && d2.patch !== undefined && d2.patch.length > 0).toBe(true);
  });
});

describe('resolution errors (§4.3)', () => {
  it('a missing parent never downgrades to unmanaged (scenario 27)', async () => {
    const w = world();
    const pod = workload('Pod', 'p', { owner: { kind: 'ReplicaSet', name: 'gone', uid: 'gone-uid' } });
    for (const decide of [w.mutate, w.validate]) {
      expect(await decide(request('Pod', 'CREATE', pod))).toEqual({
        allowed: false,
        code: 403,
        reason: 'resolve-owner',
        message: 'resolve controller owner: replicasets.apps "gone" not found',
      });
    }
  });

  it('a failing owner GET is a denial naming the error', async () => {
    const w = world();
    w.io.fail(
      'get-workload',
      new KubeApiError(500, { code: 500, reason: 'InternalError', message: 'etcdserver: request timed out' }),
    );
    const pod = workload('Pod', 'p', { owner: rsOwner(w.uids.replicaSet) });
    expect(await w.mutate(request('Pod', 'CREATE', pod))).toMatchObject({
      allowed: false,
      message: 'resolve controller owner: etcdserver: request timed out',
    });
  });

  it('a failing LIST of BerthLeases is a denial', async () => {
    const w = world();
    w.io.fail(
      'list-leases',
      new KubeApiError(503, { code: 503, reason: 'ServiceUnavailable', message: 'try later' }),
    );
    const d = await w.mutate(request('Deployment', 'CREATE', workload('Deployment', 'web')));
    expect(d).toMatchObject({ allowed: false, code: 403, message: 'list BerthLeases: try later' });
  });

  it('an owner whose UID changed', async () => {
    const w = world();
    const pod = workload('Pod', 'p', { owner: rsOwner('an-older-replicaset-uid') });
    expect(await w.mutate(request('Pod', 'CREATE', pod))).toMatchObject({
      allowed: false,
      message: 'controller owner UID changed',
    });
  });

  it('an owner chain deeper than 4', async () => {
    const w = world();
    // rs-0 <- rs-1 <- ... <- rs-5, each owned by the previous one.
    for (let i = 0; i <= 5; i++) {
      const owner =
        i === 0 ? undefined : { kind: 'ReplicaSet' as const, name: `rs-${i - 1}`, uid: `uid-${i - 1}` };
      w.io.addWorkload(
        'ReplicaSet',
        workload('ReplicaSet', `rs-${i}`, { uid: `uid-${i}`, ...(owner ? { owner } : {}) }),
      );
    }
    const pod = workload('Pod', 'p', { owner: { kind: 'ReplicaSet', name: 'rs-5', uid: 'uid-5' } });
    expect(await w.mutate(request('Pod', 'CREATE', pod))).toMatchObject({
      allowed: false,
      message: 'workload owner chain exceeds supported depth',
    });
  });

  it('a chain of depth 4 resolves', async () => {
    const w = world();
    for (let i = 0; i <= 3; i++) {
      const owner =
        i === 0 ? undefined : { kind: 'ReplicaSet' as const, name: `rs-${i - 1}`, uid: `uid-${i - 1}` };
      w.io.addWorkload(
        'ReplicaSet',
        workload('ReplicaSet', `rs-${i}`, { uid: `uid-${i}`, ...(owner ? { owner } : {}) }),
      );
    }
    const pod = workload('Pod', 'p', { owner: { kind: 'ReplicaSet', name: 'rs-3', uid: 'uid-3' } });
    expect(await w.mutate(request('Pod', 'CREATE', pod))).toEqual({ allowed: true });
  });

  it('two BerthLeases for the same target', async () => {
    const w = world();
    w.io.addLease(berthLease('web-again', { target: { kind: 'Deployment', name: 'web' } }));
    expect(await w.mutate(request('Deployment', 'CREATE', workload('Deployment', 'web')))).toMatchObject({
      allowed: false,
      message: 'multiple BerthLeases refer to the same target',
    });
  });

  it('managed annotations without a live lease', async () => {
    const w = world();
    for (const annotation of ['berth.skaphos.io/managed-lease', 'berth.skaphos.io/managed-lease-uid']) {
      const pod = workload('Pod', 'p', { annotations: { [annotation]: 'x' } });
      expect(await w.mutate(request('Pod', 'CREATE', pod))).toMatchObject({
        allowed: false,
        message: 'managed binding has no matching live target lease',
      });
      const dep = workload('Deployment', 'not-targeted', { annotations: { [annotation]: 'x' } });
      expect(await w.mutate(request('Deployment', 'CREATE', dep))).toMatchObject({
        allowed: false,
        message: 'managed binding has no matching live target lease',
      });
    }
  });

  it('matches the target by apiVersion, kind and name', async () => {
    const w = world();
    // Same name, other kind: a StatefulSet "web" is not the Deployment "web".
    expect(await w.mutate(request('StatefulSet', 'CREATE', workload('StatefulSet', 'web')))).toEqual({
      allowed: true,
    });
  });

  it('an UPDATE that fails to resolve but is unmanaged and keeps its owners is allowed', async () => {
    const w = world();
    const pod = workload('Pod', 'p', { owner: { kind: 'ReplicaSet', name: 'gone', uid: 'gone-uid' } });
    const next = structuredClone(pod);
    (next.metadata as Record<string, unknown>).labels = { touched: 'yes' };
    expect(await w.validate(request('Pod', 'UPDATE', next, { old: pod }))).toEqual({ allowed: true });
    const reowned = structuredClone(next);
    (reowned.metadata as { ownerReferences: { name: string }[] }).ownerReferences[0]!.name = 'other';
    expect(await w.validate(request('Pod', 'UPDATE', reowned, { old: pod }))).toMatchObject({
      allowed: false,
      message: 'resolve controller owner: replicasets.apps "other" not found',
    });
  });
});
