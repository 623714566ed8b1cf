// WorkloadAdmission's rules and exact messages (docs/behaviour.md §4.4), §6.2 scenarios 24-27 and 31-33.
import { describe, expect, it } from 'vitest';
import type { JsonObject } from '../../../src/workloads/model.ts';
import type { Binding } from '../../../webhooks/resolve.ts';
import {
  activeWorkload,
  berthLease,
  bindingRequest,
  type Kind,
  OPERATOR_USER,
  request,
  stamped,
  withChange,
  workload,
} from '../../fixtures/webhooks/objects.ts';
import { applyDecision, NOW, type World, world } from '../../fixtures/webhooks/world.ts';

const GATE = 'berth.skaphos.io/lease-held';

type Meta = {
  annotations?: Record<string, string>;
  labels?: Record<string, string>;
  uid?: string;
  name?: string;
};
const meta = (o: JsonObject): Meta => o.metadata as Meta;
const podSpec = (o: JsonObject): { nodeName?: string; schedulingGates?: { name: string }[] } =>
  o.spec as { nodeName?: string; schedulingGates?: { name: string }[] };

/** A Pod the ReplicaSet of the managed Deployment creates, as the mutating webhook leaves it. */
function managedPod(w: World, name = 'web-5d9c-x1', uid?: string): JsonObject {
  const pod = workload('Pod', name, {
    owner: { kind: 'ReplicaSet', name: 'web-5d9c', uid: w.uids.replicaSet },
    ...(uid ? { uid } : {}),
  });
  return stamped('Pod', pod, w.binding);
}

const denial = (message: string) => ({ allowed: false, code: 403, message });

describe('TestManagedTemplatesAllKinds (scenario 27): stamp then validate every kind', () => {
  const cases: {
    kind: Kind;
    make: (w: World) => JsonObject;
    binding: (w: World) => Binding;
    root: boolean;
  }[] = [
    { kind: 'Deployment', make: () => workload('Deployment', 'web'), binding: (w) => w.binding, root: true },
    {
      kind: 'ReplicaSet',
      make: (w) =>
        workload('ReplicaSet', 'web-7f00', {
          owner: { kind: 'Deployment', name: 'web', uid: w.uids.deployment },
        }),
      binding: (w) => w.binding,
      root: false,
    },
    {
      kind: 'Pod',
      make: (w) =>
        workload('Pod', 'web-5d9c-x1', {
          owner: { kind: 'ReplicaSet', name: 'web-5d9c', uid: w.uids.replicaSet },
        }),
      binding: (w) => w.binding,
      root: false,
    },
    {
      kind: 'Job',
      make: (w) =>
        workload('Job', 'nightly-1', { owner: { kind: 'CronJob', name: 'nightly', uid: w.uids.cronJob } }),
      binding: (w) => w.cronBinding,
      root: false,
    },
  ];
  for (const kind of ['StatefulSet', 'ReplicaSet', 'CronJob'] as const) {
    cases.push({
      kind,
      make: () => workload(kind, 'solo'),
      binding: (w) => ({ ...w.binding, name: 'solo' }),
      root: true,
    });
  }

  for (const c of cases) {
    it(`${c.kind}${c.root ? ' (target)' : ''}`, async () => {
      const w = world();
      let binding = c.binding(w);
      // The world's Deployment "web" would already exist: this CREATE makes a new one.
      if (c.kind === 'Deployment') w.io.workloads.delete('Deployment/shop/web');
      if (c.root && c.kind !== 'Deployment') {
        const lease = w.io.addLease(berthLease('solo', { target: { kind: c.kind, name: 'solo' } }));
        binding = { ...binding, uid: (lease.metadata as Meta).uid! };
        w.io.leases.delete('shop/web');
      }
      const original = c.make(w);
      const decision = await w.mutate(request(c.kind, 'CREATE', original));
      const out = applyDecision(original, decision);
      // The object, its Pod template (and a CronJob's jobTemplate) carry the binding; the template is gated.
      const template =
        c.kind === 'Pod'
          ? out
          : c.kind === 'CronJob'
            ? ((out.spec as JsonObject).jobTemplate as { spec: { template: JsonObject } }).spec.template
            : ((out.spec as JsonObject).template as JsonObject);
      const holders = [out, template];
      if (c.kind === 'CronJob') holders.push((out.spec as JsonObject).jobTemplate as JsonObject);
      for (const h of holders) {
        expect(meta(h).annotations).toMatchObject({
          'berth.skaphos.io/managed-lease': binding.name,
          'berth.skaphos.io/managed-lease-uid': binding.uid,
        });
        expect(meta(h).labels).toMatchObject({ 'berth.skaphos.io/managed-lease-uid': binding.uid });
      }
      expect(podSpec(template).schedulingGates).toEqual([{ name: GATE }]);
      // Idempotent: stamping the stamped object changes nothing.
      const again = await w.mutate(request(c.kind, 'CREATE', out));
      expect(again).toEqual({ allowed: true, patch: [] });
      // The final CREATE (with the API-assigned uid) passes validation.
      const created = withChange(out, (o) => {
        (o.metadata as Meta).uid = `uid-of-${c.kind}`;
      });
      const v = await w.validate(request(c.kind, 'CREATE', created));
      expect(v).toEqual({ allowed: true });
      const writes = w.io.calls.filter((x) => x.op === 'update-lease-status');
      expect(writes).toHaveLength(c.root ? 1 : 0);
    });
  }

  it('keeps other scheduling gates and adds ours once', async () => {
    const w = world();
    const dep = workload('Deployment', 'web', { gates: ['example.com/quota'] });
    const out = applyDecision(dep, await w.mutate(request('Deployment', 'CREATE', dep)));
    const template = (out.spec as JsonObject).template as JsonObject;
    expect(podSpec(template).schedulingGates).toEqual([{ name: 'example.com/quota' }, { name: GATE }]);
  });

  it('a managed workload without a Pod template is denied on both paths', async () => {
    const w = world();
    const dep = workload('Deployment', 'web');
    delete (dep.spec as JsonObject).template;
    expect(await w.mutate(request('Deployment', 'CREATE', dep))).toEqual({
      allowed: false,
      code: 403,
      reason: 'missingTemplate',
      message: 'managed workload requires a Pod template',
    });
    const v = withChange(dep, (o) => {
      (o.metadata as Meta).annotations = {
        'berth.skaphos.io/managed-lease': 'web',
        'berth.skaphos.io/managed-lease-uid': w.uids.lease,
      };
      (o.metadata as Meta).labels = { 'berth.skaphos.io/managed-lease-uid': w.uids.lease };
    });
    expect(await w.validate(request('Deployment', 'CREATE', v))).toMatchObject(
      denial('missing managed Pod template'),
    );
  });
});

describe('TestFinalAdmissionRejectsLateMutationAndPrebinding (scenario 24)', () => {
  it('allows a legitimate gated Pod', async () => {
    const w = world();
    expect(await w.validate(request('Pod', 'CREATE', managedPod(w, 'ok', 'pod-uid')))).toEqual({
      allowed: true,
    });
  });

  it('denies stripped binding metadata', async () => {
    const w = world();
    for (const strip of [
      (o: JsonObject) => delete meta(o).annotations!['berth.skaphos.io/managed-lease'],
      (o: JsonObject) => delete meta(o).annotations!['berth.skaphos.io/managed-lease-uid'],
      (o: JsonObject) => delete meta(o).labels!['berth.skaphos.io/managed-lease-uid'],
      (o: JsonObject) => {
        delete meta(o).annotations;
        delete meta(o).labels;
      },
    ]) {
      const pod = withChange(managedPod(w, 'p', 'pod-uid'), strip);
      expect(await w.validate(request('Pod', 'CREATE', pod))).toMatchObject(
        denial('managed workload binding cannot be removed or changed'),
      );
    }
  });

  it('denies a changed lease UID or name', async () => {
    const w = world();
    const otherUid = stamped(
      'Pod',
      workload('Pod', 'p', {
        uid: 'u',
        owner: { kind: 'ReplicaSet', name: 'web-5d9c', uid: w.uids.replicaSet },
      }),
      {
        ...w.binding,
        uid: 'some-other-lease-uid',
      },
    );
    expect(await w.validate(request('Pod', 'CREATE', otherUid))).toMatchObject(
      denial('managed workload binding cannot be removed or changed'),
    );
    const otherName = withChange(managedPod(w, 'p', 'u'), (o) => {
      meta(o).annotations!['berth.skaphos.io/managed-lease'] = 'nightly';
    });
    expect(await w.validate(request('Pod', 'CREATE', otherName))).toMatchObject(
      denial('managed workload binding cannot be removed or changed'),
    );
  });

  it('denies a Pod without the gate', async () => {
    const w = world();
    const pod = withChange(managedPod(w, 'p', 'u'), (o) => {
      delete podSpec(o).schedulingGates;
    });
    expect(await w.validate(request('Pod', 'CREATE', pod))).toMatchObject(
      denial('managed Pod must be created with the Berth scheduling gate'),
    );
  });

  it('denies prebinding through nodeName on a Pod CREATE and on any template', async () => {
    const w = world();
    const pod = withChange(managedPod(w, 'p', 'u'), (o) => {
      podSpec(o).nodeName = 'node-1';
    });
    expect(await w.validate(request('Pod', 'CREATE', pod))).toMatchObject(
      denial('managed Pods cannot be prebound using nodeName'),
    );
    const dep = withChange(w.deployment, (o) => {
      podSpec((o.spec as JsonObject).template as JsonObject).nodeName = 'node-1';
    });
    expect(await w.validate(request('Deployment', 'UPDATE', dep, { old: w.deployment }))).toMatchObject(
      denial('managed Pods cannot be prebound using nodeName'),
    );
  });

  it('denies removing the binding from a CronJob jobTemplate', async () => {
    const w = world();
    const cj = withChange(w.cronJob, (o) => {
      delete ((o.spec as JsonObject).jobTemplate as JsonObject).metadata;
    });
    expect(await w.validate(request('CronJob', 'UPDATE', cj, { old: w.cronJob }))).toMatchObject(
      denial('managed workload binding cannot be removed or changed'),
    );
  });

  it('denies removing the gate from a Deployment template', async () => {
    const w = world();
    const dep = withChange(w.deployment, (o) => {
      delete podSpec((o.spec as JsonObject).template as JsonObject).schedulingGates;
    });
    expect(await w.validate(request('Deployment', 'UPDATE', dep, { old: w.deployment }))).toMatchObject(
      denial('managed Pod must be created with the Berth scheduling gate'),
    );
  });

  it('denies removing the binding annotations from an admitted Deployment', async () => {
    const w = world();
    const dep = withChange(w.deployment, (o) => {
      delete meta(o).annotations;
    });
    expect(await w.validate(request('Deployment', 'UPDATE', dep, { old: w.deployment }))).toMatchObject(
      denial('managed workload binding cannot be removed or changed'),
    );
  });
});

describe('managed Pod UPDATEs', () => {
  it('owners are immutable', async () => {
    const w = world();
    const old = managedPod(w, 'p', 'pod-uid');
    const next = withChange(old, (o) => {
      (o.metadata as { ownerReferences: unknown[] }).ownerReferences = [];
    });
    expect(await w.validate(request('Pod', 'UPDATE', next, { old }))).toMatchObject(
      denial('managed Pod owner identity is immutable'),
    );
  });

  it('nodeName may only be set through the binding subresource', async () => {
    const w = world();
    const old = withChange(managedPod(w, 'p', 'pod-uid'), (o) => {
      podSpec(o).schedulingGates = [];
    });
    const next = withChange(old, (o) => {
      podSpec(o).nodeName = 'node-1';
    });
    expect(await w.validate(request('Pod', 'UPDATE', next, { old, username: OPERATOR_USER }))).toMatchObject(
      denial('managed Pods must use the binding subresource'),
    );
  });

  it('metadata-only updates of a gated Pod are allowed', async () => {
    const w = world();
    const old = managedPod(w, 'p', 'pod-uid');
    const next = withChange(old, (o) => {
      meta(o).labels!.extra = 'yes';
    });
    expect(await w.validate(request('Pod', 'UPDATE', next, { old }))).toEqual({ allowed: true });
  });
});

describe('TestUngateRequiresRegisteredUIDAndOperator (scenario 25)', () => {
  const ungate = (pod: JsonObject): JsonObject =>
    withChange(pod, (o) => {
      podSpec(o).schedulingGates = [];
    });
  const active = (w: World, pods: { name: string; uid: string }[]) =>
    w.setWorkload(activeWorkload(w.uids.deployment, NOW + 30_000, pods));

  it('allows the operator to ungate a registered Pod while the lease is active', async () => {
    const w = world();
    active(w, [{ name: 'p', uid: 'pod-uid' }]);
    const old = managedPod(w, 'p', 'pod-uid');
    expect(await w.validate(request('Pod', 'UPDATE', ungate(old), { old, username: OPERATOR_USER }))).toEqual(
      {
        allowed: true,
      },
    );
  });

  it('denies anyone else, even for a registered Pod', async () => {
    const w = world();
    active(w, [{ name: 'p', uid: 'pod-uid' }]);
    const old = managedPod(w, 'p', 'pod-uid');
    for (const username of [
      'alice',
      'system:serviceaccount:berth-system:other',
      'system:serviceaccount:shop:berth-operator',
    ]) {
      expect(await w.validate(request('Pod', 'UPDATE', ungate(old), { old, username }))).toMatchObject(
        denial('only the operator may remove the Berth scheduling gate'),
      );
    }
  });

  it('denies an unregistered Pod, even from the operator', async () => {
    const w = world();
    active(w, [{ name: 'other', uid: 'other-uid' }]);
    const old = managedPod(w, 'p', 'pod-uid');
    expect(
      await w.validate(request('Pod', 'UPDATE', ungate(old), { old, username: OPERATOR_USER })),
    ).toMatchObject(denial('pod UID was not durably registered'));
  });

  it('denies a Pod that reuses a registered name with a new UID', async () => {
    const w = world();
    active(w, [{ name: 'p', uid: 'first-uid' }]);
    const old = managedPod(w, 'p', 'second-uid');
    expect(
      await w.validate(request('Pod', 'UPDATE', ungate(old), { old, username: OPERATOR_USER })),
    ).toMatchObject(denial('pod UID was not durably registered'));
  });

  it('denies when the lease does not permit Pod starts', async () => {
    const pods = [{ name: 'p', uid: 'pod-uid' }];
    const variants: [string, (w: World) => void][] = [
      ['deadline passed', (w) => w.setWorkload(activeWorkload(w.uids.deployment, NOW, pods))],
      [
        'Stopping',
        (w) => w.setWorkload({ ...activeWorkload(w.uids.deployment, NOW + 30_000, pods), phase: 'Stopping' }),
      ],
      ['no phase', (w) => w.setWorkload({ targetUID: w.uids.deployment, pods })],
      ['token 0', (w) => w.setWorkload(activeWorkload(w.uids.deployment, NOW + 30_000, pods, 0))],
      [
        'zero-time deadline',
        (w) =>
          w.setWorkload({
            ...activeWorkload(w.uids.deployment, NOW + 30_000, pods),
            deadline: '0001-01-01T00:00:00Z',
          }),
      ],
      ['no status', (w) => w.setWorkload(undefined)],
      [
        'lease deleting',
        (w) => {
          active(w, pods);
          const l = structuredClone(w.io.lease('shop', 'web')!);
          (l.metadata as Record<string, unknown>).deletionTimestamp = '2026-01-01T11:00:00Z';
          w.io.addLease(l);
        },
      ],
      ['lease gone', (w) => w.io.leases.delete('shop/web')],
    ];
    for (const [what, setup] of variants) {
      const w = world();
      setup(w);
      const old = managedPod(w, 'p', 'pod-uid');
      const d = await w.validate(request('Pod', 'UPDATE', ungate(old), { old, username: OPERATOR_USER }));
      expect(d, what).toMatchObject(denial('lease no longer permits Pod starts'));
    }
  });
});

describe('TestLatePodAndJobAfterLeaseDeletionAreRemoved / TestRecreatedLeaseCannotAuthorizeOldPod (scenario 26)', () => {
  it('a late Pod of a managed ReplicaSet after its lease is gone is denied', async () => {
    const w = world();
    w.io.leases.delete('shop/web');
    const pod = workload('Pod', 'late', {
      owner: { kind: 'ReplicaSet', name: 'web-5d9c', uid: w.uids.replicaSet },
    });
    expect(await w.mutate(request('Pod', 'CREATE', pod))).toMatchObject(
      denial('managed binding has no matching live target lease'),
    );
  });

  it('a late Job of a managed CronJob after its lease is gone is denied', async () => {
    const w = world();
    w.io.leases.delete('shop/nightly');
    const job = workload('Job', 'nightly-2', {
      owner: { kind: 'CronJob', name: 'nightly', uid: w.uids.cronJob },
    });
    expect(await w.mutate(request('Job', 'CREATE', job))).toMatchObject(
      denial('managed binding has no matching live target lease'),
    );
  });

  it('a Pod created while its lease is being deleted is denied at the final CREATE', async () => {
    const w = world();
    const l = structuredClone(w.io.lease('shop', 'web')!);
    (l.metadata as Record<string, unknown>).deletionTimestamp = '2026-01-01T11:00:00Z';
    w.io.addLease(l);
    expect(await w.validate(request('Pod', 'CREATE', managedPod(w, 'late', 'u')))).toMatchObject(
      denial('target lease is deleted or replaced'),
    );
  });

  it('a recreated lease (new UID) cannot authorize an old Pod', async () => {
    const w = world();
    const old = managedPod(w, 'p', 'pod-uid');
    const recreated = structuredClone(w.io.lease('shop', 'web')!);
    (recreated.metadata as Record<string, unknown>).uid = 'lease-uid-web-2';
    recreated.status = {
      workload: activeWorkload(w.uids.deployment, NOW + 30_000, [{ name: 'p', uid: 'pod-uid' }]),
    };
    w.io.addLease(recreated);
    const next = withChange(old, (o) => {
      podSpec(o).schedulingGates = [];
    });
    expect(await w.validate(request('Pod', 'UPDATE', next, { old, username: OPERATOR_USER }))).toMatchObject(
      denial('lease no longer permits Pod starts'),
    );
    // And a new Pod still stamped with the old UID does not validate against the new lease.
    expect(await w.validate(request('Pod', 'CREATE', managedPod(w, 'p2', 'u2')))).toMatchObject(
      denial('managed workload binding cannot be removed or changed'),
    );
  });
});

describe('TestStoppingAllowsControllerBookkeeping (scenario 31)', () => {
  const stopping = (w: World) =>
    w.setWorkload({ ...activeWorkload(w.uids.deployment, NOW + 30_000), phase: 'Stopping' });

  it('allows a metadata-only ReplicaSet update while Stopping', async () => {
    const w = world();
    stopping(w);
    const next = withChange(w.replicaSet, (o) => {
      meta(o).annotations!['deployment.kubernetes.io/revision'] = '2';
    });
    expect(await w.validate(request('ReplicaSet', 'UPDATE', next, { old: w.replicaSet }))).toEqual({
      allowed: true,
    });
  });

  it('allows scaling down while Stopping', async () => {
    const w = world();
    stopping(w);
    const next = withChange(w.replicaSet, (o) => {
      (o.spec as JsonObject).replicas = 0;
    });
    expect(await w.validate(request('ReplicaSet', 'UPDATE', next, { old: w.replicaSet }))).toEqual({
      allowed: true,
    });
  });

  it('denies a replicas increase while Stopping and allows it while Active', async () => {
    const w = world();
    stopping(w);
    const next = withChange(w.replicaSet, (o) => {
      (o.spec as JsonObject).replicas = 3;
    });
    expect(await w.validate(request('ReplicaSet', 'UPDATE', next, { old: w.replicaSet }))).toMatchObject(
      denial('lease does not authorize workload activation'),
    );
    w.setWorkload(activeWorkload(w.uids.deployment, NOW + 30_000));
    expect(await w.validate(request('ReplicaSet', 'UPDATE', next, { old: w.replicaSet }))).toEqual({
      allowed: true,
    });
  });

  it('denies resuming a CronJob or a Job unless the lease is active', async () => {
    const w = world();
    const suspended = withChange(w.cronJob, (o) => {
      (o.spec as JsonObject).suspend = true;
    });
    expect(await w.validate(request('CronJob', 'UPDATE', w.cronJob, { old: suspended }))).toMatchObject(
      denial('lease does not authorize workload activation'),
    );
    w.setWorkload(activeWorkload(w.uids.cronJob, NOW + 30_000), 'cron');
    expect(await w.validate(request('CronJob', 'UPDATE', w.cronJob, { old: suspended }))).toEqual({
      allowed: true,
    });

    const job = stamped(
      'Job',
      workload('Job', 'nightly-1', {
        uid: 'job-uid',
        suspend: true,
        owner: { kind: 'CronJob', name: 'nightly', uid: w.uids.cronJob },
      }),
      w.cronBinding,
    );
    const resumed = withChange(job, (o) => {
      (o.spec as JsonObject).suspend = false;
    });
    w.setWorkload({ ...activeWorkload(w.uids.cronJob, NOW + 30_000), phase: 'Stopping' }, 'cron');
    expect(await w.validate(request('Job', 'UPDATE', resumed, { old: job }))).toMatchObject(
      denial('lease does not authorize workload activation'),
    );
  });

  it('a Deployment scale-up with a replaced lease is denied', async () => {
    const w = world();
    const l = structuredClone(w.io.lease('shop', 'web')!);
    (l.metadata as Record<string, unknown>).uid = 'replaced';
    l.status = { workload: activeWorkload(w.uids.deployment, NOW + 30_000) };
    w.io.addLease(l);
    const next = withChange(w.deployment, (o) => {
      (o.spec as JsonObject).replicas = 5;
    });
    expect(await w.validate(request('Deployment', 'UPDATE', next, { old: w.deployment }))).toMatchObject(
      denial('lease does not authorize workload activation'),
    );
  });
});

describe('TestBindingRequiresCurrentPodUIDAndRemovedGate (scenario 32)', () => {
  const storePod = (w: World, gated: boolean): JsonObject => {
    const pod = withChange(managedPod(w, 'p', 'pod-uid'), (o) => {
      if (!gated) podSpec(o).schedulingGates = [];
    });
    w.io.addWorkload('Pod', pod);
    return pod;
  };

  it('allows binding an unmanaged Pod', async () => {
    const w = world();
    w.io.addWorkload('Pod', workload('Pod', 'p', { uid: 'pod-uid', gates: ['other'] }));
    expect(await w.validate(bindingRequest('p', undefined))).toEqual({ allowed: true });
  });

  it('requires the observed Pod UID', async () => {
    const w = world();
    storePod(w, false);
    for (const uid of [undefined, '', 'stale-uid']) {
      expect(await w.validate(bindingRequest('p', uid)), String(uid)).toMatchObject(
        denial('managed Pod binding must name the observed Pod UID'),
      );
    }
  });

  it('requires the gate to be removed', async () => {
    const w = world();
    storePod(w, true);
    expect(await w.validate(bindingRequest('p', 'pod-uid'))).toMatchObject(
      denial('managed Pod is still scheduling gated'),
    );
  });

  it('allows binding an ungated managed Pod under its UID, on either path', async () => {
    const w = world();
    storePod(w, false);
    expect(await w.validate(bindingRequest('p', 'pod-uid'))).toEqual({ allowed: true });
    expect(await w.mutate(bindingRequest('p', 'pod-uid'))).toEqual({ allowed: true });
    expect(w.io.reads().filter((c) => c.op === 'get-workload')).toHaveLength(2);
  });

  it('denies binding a Pod that cannot be read', async () => {
    const w = world();
    expect(await w.validate(bindingRequest('missing', 'x'))).toMatchObject({
      allowed: false,
      message: 'get Pod "missing": pods "missing" not found',
    });
  });
});

describe('TestAdmissionRejectsUnregisteredPodAdoption (scenario 33)', () => {
  it('denies controller adoption of a running orphan', async () => {
    const w = world();
    const orphan = workload('Pod', 'orphan', { uid: 'orphan-uid', nodeName: 'node-1' });
    const adopted = withChange(orphan, (o) => {
      (o.metadata as JsonObject).ownerReferences = [
        {
          apiVersion: 'apps/v1',
          kind: 'ReplicaSet',
          name: 'web-5d9c',
          uid: w.uids.replicaSet,
          controller: true,
        },
      ];
    });
    expect(await w.validate(request('Pod', 'UPDATE', adopted, { old: orphan }))).toMatchObject(
      denial('managed controllers cannot adopt unadmitted objects'),
    );
  });

  it('allows adding cleanup metadata only to an unadmitted owned Pod', async () => {
    const w = world();
    const legacy = workload('Pod', 'legacy', {
      uid: 'legacy-uid',
      nodeName: 'node-1',
      owner: { kind: 'ReplicaSet', name: 'web-5d9c', uid: w.uids.replicaSet },
    });
    const next = withChange(legacy, (o) => {
      (o.metadata as JsonObject).finalizers = ['example.com/cleanup'];
      (o.metadata as JsonObject).labels = { drained: 'true' };
    });
    expect(await w.validate(request('Pod', 'UPDATE', next, { old: legacy }))).toEqual({ allowed: true });
  });

  it('denies changing the spec of, or claiming the identity for, an unadmitted Pod', async () => {
    const w = world();
    const legacy = workload('Pod', 'legacy', {
      uid: 'legacy-uid',
      owner: { kind: 'ReplicaSet', name: 'web-5d9c', uid: w.uids.replicaSet },
    });
    const respec = withChange(legacy, (o) => {
      podSpec(o).nodeName = 'node-2';
    });
    expect(await w.validate(request('Pod', 'UPDATE', respec, { old: legacy }))).toMatchObject(
      denial('drain and recreate legacy managed targets under admission'),
    );
    const claimed = stamped('Pod', legacy, w.binding);
    const claimedSameSpec = withChange(claimed, (o) => {
      o.spec = structuredClone(legacy.spec);
    });
    expect(await w.validate(request('Pod', 'UPDATE', claimedSameSpec, { old: legacy }))).toMatchObject(
      denial('drain and recreate legacy managed targets under admission'),
    );
  });

  it('a legacy target may only be stopped', async () => {
    const w = world();
    const legacy = workload('Deployment', 'web', { uid: 'legacy-deploy', replicas: 2 });
    const stopped = withChange(legacy, (o) => {
      (o.spec as JsonObject).replicas = 0;
    });
    expect(await w.validate(request('Deployment', 'UPDATE', stopped, { old: legacy }))).toEqual({
      allowed: true,
    });
    const touched = withChange(legacy, (o) => {
      meta(o).labels = { x: 'y' };
    });
    expect(await w.validate(request('Deployment', 'UPDATE', touched, { old: legacy }))).toMatchObject(
      denial('drain and recreate legacy managed targets under admission'),
    );
    const legacyCron = workload('CronJob', 'nightly', { uid: 'legacy-cron' });
    const suspended = withChange(legacyCron, (o) => {
      (o.spec as JsonObject).suspend = true;
    });
    expect(await w.validate(request('CronJob', 'UPDATE', suspended, { old: legacyCron }))).toEqual({
      allowed: true,
    });
    expect(await w.validate(request('CronJob', 'UPDATE', legacyCron, { old: suspended }))).toMatchObject(
      denial('drain and recreate legacy managed targets under admission'),
    );
  });
});

describe('malformed requests are denied, never allowed', () => {
  it('a CREATE without an object', async () => {
    const w = world();
    expect(await w.validate(request('Pod', 'CREATE', null))).toMatchObject({ allowed: false, code: 400 });
  });

  it('an UPDATE without an old object', async () => {
    const w = world();
    expect(await w.validate(request('Pod', 'UPDATE', managedPod(w)))).toMatchObject({
      allowed: false,
      code: 400,
    });
  });

  it('an object whose metadata is not Kubernetes-shaped', async () => {
    const w = world();
    const pod = withChange(managedPod(w), (o) => {
      (o.metadata as JsonObject).annotations = { a: 1 };
    });
    expect(await w.mutate(request('Pod', 'CREATE', pod))).toMatchObject({
      allowed: false,
      code: 400,
      message:
        'malformed AdmissionReview: request.object.metadata.annotations.a: Invalid input: expected string, received number',
    });
  });

  it('a Pod review without a namespace', async () => {
    const w = world();
    const req = request('Pod', 'CREATE', managedPod(w));
    delete req.namespace;
    expect(await w.mutate(req)).toMatchObject({ allowed: false, code: 400 });
  });
});
