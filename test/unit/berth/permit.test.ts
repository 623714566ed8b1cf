// Pod permitting (docs/behaviour.md §2.7, §6.2 18-20): the pure plan and permitPods against an in-memory API.
import { describe, expect, it } from 'vitest';
import {
  AdmissionMessage,
  type BerthLease,
  type BerthLeaseStatus,
  MANAGED_UID,
  MAX_PERMITTED_PODS,
  ReconcileError,
  SCHEDULING_GATE,
} from '../../../src/berth/api.ts';
import {
  type LeaseSession,
  needsPermit,
  PermitError,
  type PodCheck,
  permitPods,
  planPermits,
  ungatePatch,
} from '../../../src/berth/permit.ts';
import { createLogger } from '../../../src/observability/logger.ts';
import { deployment, managedLease, pod, RS_UID, replicaSet, T0, TARGET_UID } from './managed-fixtures.ts';
import { conflictError, FakeWorkloadApi } from './workload-fakes.ts';

const root = { kind: 'Deployment' as const, apiVersion: 'apps/v1', name: 'web', uid: TARGET_UID };
const checked = (p: ReturnType<typeof pod>, r = root): PodCheck => ({ pod: p, root: r });

describe('planPermits', () => {
  it('plans nothing unless the lease is activeAt(now)', () => {
    for (const lease of [
      managedLease({ phase: 'Stopping' }),
      managedLease({ token: 0 }),
      managedLease({}, { deleting: true }),
    ]) {
      expect(planPermits(lease, [checked(pod('a'))], T0, 0)).toEqual({
        register: [],
        ungate: [],
        errors: [],
      });
    }
    expect(planPermits(managedLease(), [checked(pod('a'))], T0 + 30_000, 0).register).toEqual([]);
    // Within the stop lead of the deadline (30 s ahead) the activation has ended.
    expect(planPermits(managedLease(), [checked(pod('a'))], T0 + 25_000, 5_000).register).toEqual([]);
    expect(planPermits(managedLease(), [checked(pod('a'))], T0 + 24_999, 5_000).register).toHaveLength(1);
  });

  it('registers gated Pods and then ungates them; registered ones are only ungated', () => {
    const lease = managedLease({ pods: [{ name: 'b', uid: 'uid-b' }] });
    const plan = planPermits(
      lease,
      [checked(pod('a')), checked(pod('b')), checked(pod('c', { deleting: true }))],
      T0,
      0,
    );
    expect(plan.register).toEqual([{ name: 'a', uid: 'uid-a' }]);
    expect(plan.ungate.map((p) => p.metadata.name)).toEqual(['a', 'b']);
    expect(plan.errors).toEqual([]);
  });

  it('reports each failing check with its exact message and still permits the others', () => {
    const lease = managedLease();
    const plan = planPermits(
      lease,
      [
        checked(pod('mismatch', { annotations: { [MANAGED_UID]: 'other' } })),
        {
          pod: pod('orphan'),
          ancestryError: `${AdmissionMessage.resolveOwnerPrefix}replicasets.apps "x" not found`,
        },
        checked(pod('elsewhere'), { ...root, uid: 'another-deployment' }),
        checked(pod('ungated', { gated: false })),
        checked(pod('good')),
      ],
      T0,
      0,
    );
    expect(plan.errors).toEqual([
      ReconcileError.podBindingMismatch,
      'resolve controller owner: replicasets.apps "x" not found',
      ReconcileError.podAncestryDiffers,
      ReconcileError.unregisteredPodNoGate,
    ]);
    expect(plan.register).toEqual([{ name: 'good', uid: 'uid-good' }]);
  });

  it('stops registering at 1024 Pods', () => {
    const full = Array.from({ length: MAX_PERMITTED_PODS - 1 }, (_, i) => ({ name: `p${i}`, uid: `u${i}` }));
    const plan = planPermits(managedLease({ pods: full }), [checked(pod('x')), checked(pod('y'))], T0, 0);
    expect(plan.register).toEqual([{ name: 'x', uid: 'uid-x' }]);
    expect(plan.errors).toEqual([ReconcileError.maxPods]);
    expect(ReconcileError.maxPods).toBe('maximum 1024 active Pod registrations reached');
  });

  it('a Pod reusing a registered name with a new UID is a new registration', () => {
    const plan = planPermits(managedLease({ pods: [{ name: 'a', uid: 'old' }] }), [checked(pod('a'))], T0, 0);
    expect(plan.register).toEqual([{ name: 'a', uid: 'uid-a' }]);
  });
});

describe('ungatePatch and needsPermit', () => {
  it('removes only the Berth gate, guarded by resourceVersion and uid', () => {
    const p = pod('a');
    p.metadata.resourceVersion = '7';
    p.spec = { schedulingGates: [{ name: 'other' }, { name: SCHEDULING_GATE }] };
    expect(ungatePatch(p)).toEqual({
      metadata: { resourceVersion: '7', uid: 'uid-a' },
      spec: { schedulingGates: [{ name: 'other' }] },
    });
    expect(ungatePatch(pod('b')).spec).toEqual({ schedulingGates: null });
  });

  it('a registered, ungated Pod needs nothing', () => {
    const lease = managedLease({ pods: [{ name: 'a', uid: 'uid-a' }] });
    expect(needsPermit(lease, pod('a', { gated: false }))).toBe(false);
    expect(needsPermit(lease, pod('a'))).toBe(true);
    expect(needsPermit(lease, pod('b', { gated: false }))).toBe(true);
    expect(needsPermit(lease, pod('c', { deleting: true }))).toBe(false);
  });
});

/** A session over an in-memory lease whose status writes can be made to fail. */
function session(lease: BerthLease, fail?: Error): LeaseSession & { writes: BerthLeaseStatus[] } {
  let current = lease;
  const writes: BerthLeaseStatus[] = [];
  return {
    writes,
    get lease() {
      return current;
    },
    signal: new AbortController().signal,
    log: createLogger({ level: 'silent' }),
    now: () => T0,
    stopLeadMs: 5_000,
    stamp: () => ({ now: T0, generation: 1 }),
    async writeStatus(status) {
      if (fail !== undefined) throw fail;
      writes.push(status);
      current = { ...current, status };
      return current;
    },
  };
}

function world(): FakeWorkloadApi {
  const api = new FakeWorkloadApi();
  api.put('Deployment', deployment(3));
  api.put('ReplicaSet', replicaSet());
  return api;
}

describe('permitPods', () => {
  it('registers every new Pod in one status write, then ungates each', async () => {
    const api = world();
    for (const name of ['a', 'b', 'c']) api.put('Pod', pod(name));
    const s = session(managedLease());
    const outcome = await permitPods(s, api);
    expect(s.writes).toHaveLength(1);
    expect(s.writes[0]?.workload?.pods?.map((p) => p.name).sort()).toEqual(['a', 'b', 'c']);
    expect(outcome.ungated).toHaveLength(3);
    for (const name of ['a', 'b', 'c'])
      expect(api.stored('Pod', name)?.spec?.schedulingGates).toBeUndefined();
    // The owners were read once for all three Pods.
    expect(api.calls.filter((c) => c.startsWith('get ')).sort()).toEqual([
      'get Deployment/web',
      'get ReplicaSet/web-abc',
    ]);
    // A second pass has nothing to do: one LIST, no reads, no writes.
    api.calls.length = 0;
    await permitPods(s, api);
    expect(api.calls).toEqual([`list Pod ${MANAGED_UID}=lease-uid`]);
  });

  it('never ungates when the registration did not land', async () => {
    const api = world();
    api.put('Pod', pod('a'));
    const error = await permitPods(session(managedLease(), new Error('conflict')), api).catch(
      (e: unknown) => e,
    );
    expect(error).toBeInstanceOf(PermitError);
    expect((error as Error).message).toBe('register Pod UID: conflict');
    expect(api.writes()).toEqual([]);
    expect(api.stored('Pod', 'a')?.spec?.schedulingGates).toEqual([{ name: SCHEDULING_GATE }]);
  });

  it('a Pod under a Deployment replaced since its ReplicaSet was made stays gated (admission may not have read it)', async () => {
    const api = world();
    const replaced = deployment(3);
    replaced.metadata.uid = 'a-newer-deployment-uid';
    api.put('Deployment', replaced);
    api.put('Pod', pod('late'));
    await expect(permitPods(session(managedLease()), api)).rejects.toThrow(AdmissionMessage.ownerUIDChanged);
    expect(api.stored('Pod', 'late')?.spec?.schedulingGates).toEqual([{ name: SCHEDULING_GATE }]);
    expect(api.writes()).toEqual([]);
  });

  it('a Pod whose ReplicaSet was replaced is not permitted; the others are, then the error is returned', async () => {
    const api = world();
    api.put('Pod', pod('stale', { rs: 'old-rs-uid' }));
    api.put('Pod', pod('good'));
    const s = session(managedLease());
    await expect(permitPods(s, api)).rejects.toThrow(AdmissionMessage.ownerUIDChanged);
    expect(api.stored('Pod', 'good')?.spec?.schedulingGates).toBeUndefined();
    expect(api.stored('Pod', 'stale')?.spec?.schedulingGates).toEqual([{ name: SCHEDULING_GATE }]);
    expect(s.lease.status?.workload?.pods).toEqual([{ name: 'good', uid: 'uid-good' }]);
    expect(RS_UID).not.toBe('old-rs-uid');
  });

  it('a failed gate removal is reported with its prefix; a Pod gone meanwhile is no error', async () => {
    const api = world();
    api.put('Pod', pod('a'));
    api.put('Pod', pod('b'));
    api.failures.set('patch Pod/a', [conflictError(), conflictError()]);
    const s = session(managedLease());
    const error = (await permitPods(s, api).catch((e: unknown) => e)) as PermitError;
    expect(error.messages).toEqual([`${ReconcileError.removeGatePrefix}the object has been modified`]);
    expect(api.stored('Pod', 'b')?.spec?.schedulingGates).toBeUndefined();
  });

  it('does nothing for a lease that is not active', async () => {
    const api = world();
    api.put('Pod', pod('a'));
    await permitPods(session(managedLease({ phase: 'Stopping' })), api);
    expect(api.calls).toEqual([]);
  });
});
