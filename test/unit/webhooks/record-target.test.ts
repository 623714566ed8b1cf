// recordTarget (docs/behaviour.md §4.4 step 7e): the target's final CREATE records its UID in BerthLease status, never on
// dry-run, never over a lease with cleanup responsibility or over an existing target.
import { describe, expect, it } from 'vitest';
import { KubeApiError } from '../../../src/kube/client.ts';
import type { JsonObject } from '../../../src/workloads/model.ts';
import { berthLease, request, stamped, workload } from '../../fixtures/webhooks/objects.ts';
import { type World, world } from '../../fixtures/webhooks/world.ts';

const conflict = (): KubeApiError =>
  new KubeApiError(409, { code: 409, reason: 'Conflict', message: 'the object has been modified' });

/** A fresh namespace "apps" with a lease "api" targeting Deployment "api", which does not exist yet. */
function setup(leaseOpts: Parameters<typeof berthLease>[1] = {}): {
  w: World;
  create: (o?: { dryRun?: boolean; uid?: string }) => ReturnType<World['validate']>;
} {
  const w = world();
  const lease = w.io.addLease(
    berthLease('api', {
      namespace: 'apps',
      uid: 'lease-api',
      target: { kind: 'Deployment', name: 'api' },
      ...leaseOpts,
    }),
  );
  const binding = { name: 'api', uid: (lease.metadata as { uid: string }).uid, targetUID: '' };
  return {
    w,
    create: (o = {}) => {
      const dep = stamped(
        'Deployment',
        workload('Deployment', 'api', { namespace: 'apps', uid: o.uid ?? 'api-uid-1' }),
        binding,
      );
      if (o.uid === '') delete (dep.metadata as JsonObject).uid;
      return w.validate(request('Deployment', 'CREATE', dep, { dryRun: o.dryRun ?? false }));
    },
  };
}

const workloadOf = (w: World): unknown =>
  (w.io.lease('apps', 'api')!.status as JsonObject | undefined)?.workload;

describe('recordTarget', () => {
  it('records the API-assigned UID with a status write carrying the read resourceVersion', async () => {
    const { w, create } = setup();
    expect(await create()).toEqual({ allowed: true });
    expect(workloadOf(w)).toEqual({ targetUID: 'api-uid-1' });
    // One LIST (complete, so it also served the lease lookup) and the existence check of the target.
    expect(w.io.calls.map((c) => c.op)).toEqual(['list-leases', 'get-workload', 'update-lease-status']);
  });

  it('replaces an unused previous record', async () => {
    const { w, create } = setup({ workload: { targetUID: 'from-an-aborted-create' } });
    expect(await create({ uid: 'api-uid-2' })).toEqual({ allowed: true });
    expect(workloadOf(w)).toEqual({ targetUID: 'api-uid-2' });
  });

  it('writes nothing on dry-run', async () => {
    const { w, create } = setup();
    expect(await create({ dryRun: true })).toEqual({ allowed: true });
    expect(w.io.calls.some((c) => c.op === 'update-lease-status')).toBe(false);
    expect(workloadOf(w)).toBeUndefined();
  });

  it('requires a Kubernetes UID', async () => {
    const { create } = setup();
    expect(await create({ uid: '' })).toMatchObject({
      allowed: false,
      message: 'final target CREATE admission requires a Kubernetes UID',
    });
  });

  it('refuses while cleanup responsibility is active (phase or registered Pods)', async () => {
    for (const workloadStatus of [
      { targetUID: 'old', phase: 'Stopping' },
      { targetUID: 'old', phase: 'Active' },
      { targetUID: 'old', pods: [{ name: 'p', uid: 'u' }] },
    ]) {
      const { w, create } = setup({ workload: workloadStatus });
      expect(await create()).toMatchObject({
        allowed: false,
        message: 'target cannot be replaced while cleanup responsibility is active',
      });
      expect(w.io.calls.some((c) => c.op === 'update-lease-status')).toBe(false);
    }
  });

  it('refuses when the target already exists, also on dry-run', async () => {
    for (const dryRun of [false, true]) {
      const { w, create } = setup();
      w.io.addWorkload('Deployment', workload('Deployment', 'api', { namespace: 'apps', uid: 'running' }));
      expect(await create({ dryRun })).toMatchObject({
        allowed: false,
        message: 'target already exists; CREATE cannot replace its admission record',
      });
    }
  });

  it('refuses a deleting lease', async () => {
    const { create } = setup({ deleting: true });
    expect(await create()).toMatchObject({ allowed: false, message: 'target lease is deleted or replaced' });
  });

  it('refuses when the lease is replaced while the write races', async () => {
    const { w, create } = setup();
    const realUpdate = w.io.updateLeaseStatus.bind(w.io);
    let first = true;
    w.io.updateLeaseStatus = async (lease) => {
      if (first) {
        first = false;
        // Deleted and recreated under the same name: a new UID (and resourceVersion).
        const l = structuredClone(w.io.lease('apps', 'api')!);
        (l.metadata as JsonObject).uid = 'lease-api-2';
        w.io.addLease(l);
      }
      return realUpdate(lease);
    };
    expect(await create()).toMatchObject({ allowed: false, message: 'target lease is deleted or replaced' });
    expect((w.io.lease('apps', 'api')!.status as JsonObject | undefined)?.workload).toBeUndefined();
  });

  it('denies with the reconciler rule when the lease spec is not a valid managed spec', async () => {
    const { create } = setup({ spec: { releaseAction: null } });
    expect(await create()).toMatchObject({
      allowed: false,
      message: 'managed targets require acquireAction and releaseAction',
    });
  });

  it('does not record descendants (a ReplicaSet of the target Deployment)', async () => {
    const w = world();
    const rs = stamped(
      'ReplicaSet',
      workload('ReplicaSet', 'web-6b7', {
        uid: 'rs-2',
        owner: { kind: 'Deployment', name: 'web', uid: w.uids.deployment },
      }),
      w.binding,
    );
    expect(await w.validate(request('ReplicaSet', 'CREATE', rs))).toEqual({ allowed: true });
    expect(w.io.calls.some((c) => c.op === 'update-lease-status')).toBe(false);
  });

  it('retries a conflicting status write from a fresh read', async () => {
    const { w, create } = setup();
    w.io.fail('update-lease-status', conflict());
    expect(await create()).toEqual({ allowed: true });
    expect(w.io.calls.map((c) => c.op)).toEqual([
      'list-leases',
      'get-workload',
      'update-lease-status',
      'get-lease',
      'update-lease-status',
    ]);
    expect(workloadOf(w)).toEqual({ targetUID: 'api-uid-1' });
  });

  it('re-checks the fresh read: a Stopping committed meanwhile wins', async () => {
    const { w, create } = setup();
    const realUpdate = w.io.updateLeaseStatus.bind(w.io);
    let first = true;
    w.io.updateLeaseStatus = async (lease) => {
      if (first) {
        first = false;
        const l = structuredClone(w.io.lease('apps', 'api')!);
        l.status = { workload: { targetUID: 'other', phase: 'Stopping' } };
        w.io.addLease(l);
      }
      return realUpdate(lease);
    };
    expect(await create()).toMatchObject({
      allowed: false,
      message: 'target cannot be replaced while cleanup responsibility is active',
    });
  });

  it('gives up after repeated conflicts with a denial', async () => {
    const { w, create } = setup();
    w.io.fail('update-lease-status', conflict(), 3);
    expect(await create()).toMatchObject({
      allowed: false,
      message: 'record target UID in BerthLease status: conflicting writes after 3 attempts',
    });
  });

  it('denies when the status write fails otherwise', async () => {
    const { w, create } = setup();
    w.io.fail(
      'update-lease-status',
      new KubeApiError(403, { code: 403, reason: 'Forbidden', message: 'no RBAC' }),
    );
    expect(await create()).toMatchObject({
      allowed: false,
      message: 'record target UID in BerthLease status: no RBAC',
    });
  });
});
