// Only the operator lifts the Berth gate from a Pod that is or was managed, whatever its old version's
// managed-lease metadata and whatever the UPDATE does to its owners (docs/behaviour.md §4.3-4.4.1). Pinned from the CI
// counterexample of property.test.ts (seed -186193975, path 40:2:2:2:2:2:3:2:4:4:4:4): an ordinary user's
// UPDATE dropped the controller owner, the metadata and the gate of a Pod of the managed ReplicaSet whose
// old version carried only the managed-lease name annotation, and it was allowed because the binding was
// resolved through the new object's owners alone.
import { describe, expect, it } from 'vitest';
import type { JsonObject } from '../../../src/workloads/model.ts';
import {
  activeWorkload,
  OPERATOR_USER,
  request,
  stamped,
  withChange,
  workload,
} from '../../fixtures/webhooks/objects.ts';
import { NOW, type World, world } from '../../fixtures/webhooks/world.ts';

const GATE = 'berth.skaphos.io/lease-held';
const LEASE_ANNOTATION = 'berth.skaphos.io/managed-lease';
const UID_KEY = 'berth.skaphos.io/managed-lease-uid';
const POD = 'web-5d9c-x1';

const CANNOT_ADOPT = 'managed controllers cannot adopt unadmitted objects';
const DRAIN_LEGACY = 'drain and recreate legacy managed targets under admission';
const BINDING_CHANGED = 'managed workload binding cannot be removed or changed';
const OWNER_IMMUTABLE = 'managed Pod owner identity is immutable';
const NO_LIVE_LEASE = 'managed binding has no matching live target lease';
const ONLY_OPERATOR = 'only the operator may remove the Berth scheduling gate';

const denial = (message: string) => ({ allowed: false, code: 403, message });

type Meta = {
  annotations?: Record<string, string>;
  labels?: Record<string, string>;
  ownerReferences?: unknown[];
};
const meta = (o: JsonObject): Meta => o.metadata as Meta;

/** The world of the property test: the lease is active and this very Pod (name, UID) is registered. */
function registeredWorld(): World {
  const w = world();
  w.setWorkload(activeWorkload(w.uids.deployment, NOW + 60_000, [{ name: POD, uid: 'pod-uid' }]));
  // An unmanaged ReplicaSet (no owner, no lease targets it) to move Pods to.
  w.io.addWorkload('ReplicaSet', workload('ReplicaSet', 'batch-7c1', { uid: 'rs-uid-batch' }));
  return w;
}

type Owner =
  | 'managed-rs'
  | 'none'
  | 'unmanaged-rs'
  | 'daemonset'
  | 'not-controller'
  | 'forged-rs-uid'
  | 'missing-rs';

function ownerRefs(w: World, owner: Owner): unknown[] | undefined {
  const rs = {
    apiVersion: 'apps/v1',
    kind: 'ReplicaSet',
    name: 'web-5d9c',
    uid: w.uids.replicaSet,
    controller: true,
  };
  switch (owner) {
    case 'managed-rs':
      return [rs];
    case 'none':
      return undefined;
    case 'unmanaged-rs':
      return [{ ...rs, name: 'batch-7c1', uid: 'rs-uid-batch' }];
    case 'daemonset':
      return [{ apiVersion: 'apps/v1', kind: 'DaemonSet', name: 'agent', uid: 'ds-uid', controller: true }];
    case 'not-controller':
      return [{ ...rs, controller: false }];
    case 'forged-rs-uid':
      return [{ ...rs, uid: 'forged' }];
    case 'missing-rs':
      return [{ ...rs, name: 'gone', uid: 'gone-uid' }];
  }
}

/** Which managed-lease metadata the old Pod carries. */
type Stamp = 'full' | 'lease-annotation' | 'label' | 'uid-annotation' | 'none';

function pod(w: World, o: { owner: Owner; stamp: Stamp; gated: boolean }): JsonObject {
  let p = workload('Pod', POD, { uid: 'pod-uid' });
  const refs = ownerRefs(w, o.owner);
  if (refs !== undefined) meta(p).ownerReferences = refs;
  if (o.stamp === 'full') p = stamped('Pod', p, w.binding);
  if (o.stamp === 'lease-annotation') meta(p).annotations = { [LEASE_ANNOTATION]: w.binding.name };
  if (o.stamp === 'label') meta(p).labels = { ...meta(p).labels, [UID_KEY]: w.binding.uid };
  if (o.stamp === 'uid-annotation') meta(p).annotations = { [UID_KEY]: w.binding.uid };
  const spec = p.spec as JsonObject;
  if (o.gated) spec.schedulingGates = [{ name: GATE }];
  else delete spec.schedulingGates;
  return p;
}

const ungated = (p: JsonObject): JsonObject =>
  withChange(p, (o) => {
    delete (o.spec as JsonObject).schedulingGates;
  });

const withOwner = (w: World, p: JsonObject, owner: Owner): JsonObject =>
  withChange(p, (o) => {
    const refs = ownerRefs(w, owner);
    if (refs === undefined) delete meta(o).ownerReferences;
    else meta(o).ownerReferences = refs;
  });

const USERS = ['alice', OPERATOR_USER, '', 'system:serviceaccount:berth-system:other'];

describe('the CI counterexample (seed -186193975): owner, metadata and gate dropped in one UPDATE', () => {
  // As the property built it: no UID on either version, no label, no schedulingGates field at all.
  const exact = (w: World) => {
    const noUid = (p: JsonObject): JsonObject =>
      withChange(p, (o) => {
        delete (o.metadata as { uid?: string }).uid;
      });
    const old = noUid(pod(w, { owner: 'managed-rs', stamp: 'lease-annotation', gated: true }));
    const next = noUid(pod(w, { owner: 'none', stamp: 'none', gated: false }));
    expect(meta(old)).toEqual({
      name: POD,
      namespace: 'shop',
      annotations: { [LEASE_ANNOTATION]: 'web' },
      ownerReferences: [
        {
          apiVersion: 'apps/v1',
          kind: 'ReplicaSet',
          name: 'web-5d9c',
          uid: w.uids.replicaSet,
          controller: true,
        },
      ],
    });
    expect(meta(next)).toEqual({ name: POD, namespace: 'shop' });
    expect((next.spec as JsonObject).schedulingGates).toBeUndefined();
    return { old, next };
  };

  it('is denied for alice: the old Pod belongs to the managed ReplicaSet, so this is an owner change', async () => {
    const w = registeredWorld();
    const { old, next } = exact(w);
    expect(await w.validate(request('Pod', 'UPDATE', next, { old, username: 'alice' }))).toMatchObject(
      denial(CANNOT_ADOPT),
    );
  });

  it('is denied for everyone, the operator included: the Pod was never admitted under a binding', async () => {
    for (const username of USERS) {
      const w = registeredWorld();
      const { old, next } = exact(w);
      expect(await w.validate(request('Pod', 'UPDATE', next, { old, username })), username).toMatchObject(
        denial(CANNOT_ADOPT),
      );
    }
  });

  it('is decided from the live owner chain of the old Pod, not without reads', async () => {
    const w = registeredWorld();
    const { old, next } = exact(w);
    await w.validate(request('Pod', 'UPDATE', next, { old }));
    // The live ReplicaSet carries the lease's stamp, so its Deployment is matched by reference, unread
    // (docs/admission.md, "Reads per review"); an unstamped one is walked on (resolve.test.ts).
    expect(w.io.reads()).toEqual([
      { op: 'list-leases', namespace: 'shop', limit: undefined },
      { op: 'get-workload', kind: 'ReplicaSet', namespace: 'shop', name: 'web-5d9c' },
    ]);
  });
});

describe('neighbouring cases: alice removes the gate from a Pod of the managed ReplicaSet', () => {
  // [old metadata, what the UPDATE does to the owner and the metadata, expected denial]
  const cases: [Stamp, string, (w: World, old: JsonObject) => JsonObject, string][] = [
    // An admitted Pod keeps the identity its old version carries (§4.4 step 4) and its owners (7b).
    ['full', 'keeps everything', (_w, old) => ungated(old), ONLY_OPERATOR],
    ['full', 'drops the owner', (w, old) => ungated(withOwner(w, old, 'none')), OWNER_IMMUTABLE],
    [
      'full',
      'moves to an unmanaged ReplicaSet',
      (w, old) => ungated(withOwner(w, old, 'unmanaged-rs')),
      OWNER_IMMUTABLE,
    ],
    [
      'full',
      'drops the owner and the metadata',
      (w) => pod(w, { owner: 'none', stamp: 'none', gated: false }),
      BINDING_CHANGED,
    ],
    // Only the UID annotation: the identity is {name: '', uid}, which the new object must carry in full.
    ['uid-annotation', 'keeps everything', (_w, old) => ungated(old), BINDING_CHANGED],
    ['uid-annotation', 'drops the owner', (w, old) => ungated(withOwner(w, old, 'none')), BINDING_CHANGED],
    [
      'uid-annotation',
      'drops the owner and the metadata',
      (w) => pod(w, { owner: 'none', stamp: 'none', gated: false }),
      BINDING_CHANGED,
    ],
    // Unadmitted (no UID annotation): the binding comes from the live owners of the old and the new Pod.
    ['lease-annotation', 'keeps the owner', (_w, old) => ungated(old), DRAIN_LEGACY],
    // Keeping the annotation while leaving the chain is a claim no live lease backs (§4.3 step 4).
    ['lease-annotation', 'drops the owner', (w, old) => ungated(withOwner(w, old, 'none')), NO_LIVE_LEASE],
    [
      'lease-annotation',
      'moves to an unmanaged ReplicaSet',
      (w, old) => ungated(withOwner(w, old, 'unmanaged-rs')),
      NO_LIVE_LEASE,
    ],
    [
      'lease-annotation',
      'drops the owner and the annotation',
      (w) => pod(w, { owner: 'none', stamp: 'none', gated: false }),
      CANNOT_ADOPT,
    ],
    ['label', 'keeps the owner', (_w, old) => ungated(old), DRAIN_LEGACY],
    [
      'label',
      'drops the owner and the label',
      (w) => pod(w, { owner: 'none', stamp: 'none', gated: false }),
      CANNOT_ADOPT,
    ],
    ['label', 'moves to a DaemonSet', (w, old) => ungated(withOwner(w, old, 'daemonset')), CANNOT_ADOPT],
    ['none', 'keeps the owner', (_w, old) => ungated(old), DRAIN_LEGACY],
    ['none', 'drops the owner', (w, old) => ungated(withOwner(w, old, 'none')), CANNOT_ADOPT],
    [
      'none',
      'makes the owner reference non-controlling',
      (w, old) => ungated(withOwner(w, old, 'not-controller')),
      CANNOT_ADOPT,
    ],
    [
      'none',
      'moves to an unmanaged ReplicaSet',
      (w, old) => ungated(withOwner(w, old, 'unmanaged-rs')),
      CANNOT_ADOPT,
    ],
    ['none', 'moves to a DaemonSet', (w, old) => ungated(withOwner(w, old, 'daemonset')), CANNOT_ADOPT],
    [
      'none',
      'forges the owner UID',
      (w, old) => ungated(withOwner(w, old, 'forged-rs-uid')),
      'controller owner UID changed',
    ],
    [
      'none',
      'points at a missing ReplicaSet',
      (w, old) => ungated(withOwner(w, old, 'missing-rs')),
      'resolve controller owner: replicasets.apps "gone" not found',
    ],
  ];
  for (const [stamp, what, change, message] of cases) {
    it(`old ${stamp}, the UPDATE ${what}: ${message}`, async () => {
      const w = registeredWorld();
      const old = pod(w, { owner: 'managed-rs', stamp, gated: true });
      const next = change(w, old);
      expect(await w.validate(request('Pod', 'UPDATE', next, { old, username: 'alice' }))).toMatchObject(
        denial(message),
      );
    });
  }

  it('the owner may not be dropped even with the gate and the spec untouched', async () => {
    const w = registeredWorld();
    const old = pod(w, { owner: 'managed-rs', stamp: 'none', gated: true });
    const next = withOwner(w, old, 'none');
    expect(await w.validate(request('Pod', 'UPDATE', next, { old }))).toMatchObject(denial(CANNOT_ADOPT));
  });

  it('the operator still ungates the admitted, registered Pod (the one allowed ungate)', async () => {
    const w = registeredWorld();
    const old = pod(w, { owner: 'managed-rs', stamp: 'full', gated: true });
    expect(
      await w.validate(request('Pod', 'UPDATE', ungated(old), { old, username: OPERATOR_USER })),
    ).toEqual({
      allowed: true,
    });
  });
});

describe('owner changes that take other workloads out of a managed chain', () => {
  it('a ReplicaSet of the managed Deployment, never admitted, cannot be orphaned and started', async () => {
    const w = registeredWorld();
    const old = workload('ReplicaSet', 'web-legacy', {
      uid: 'rs-legacy',
      replicas: 0,
      owner: { kind: 'Deployment', name: 'web', uid: w.uids.deployment },
      gates: [GATE],
    });
    const next = withChange(old, (o) => {
      delete meta(o).ownerReferences;
      (o.spec as JsonObject).replicas = 3;
    });
    expect(await w.validate(request('ReplicaSet', 'UPDATE', next, { old }))).toMatchObject(
      denial(CANNOT_ADOPT),
    );
  });

  it('a Job of the managed CronJob, never admitted, cannot be orphaned', async () => {
    const w = registeredWorld();
    const old = workload('Job', 'nightly-29000', {
      uid: 'job-legacy',
      suspend: true,
      owner: { kind: 'CronJob', name: 'nightly', uid: w.uids.cronJob },
    });
    const next = withChange(old, (o) => {
      delete meta(o).ownerReferences;
      (o.spec as JsonObject).suspend = false;
    });
    expect(await w.validate(request('Job', 'UPDATE', next, { old }))).toMatchObject(denial(CANNOT_ADOPT));
  });
});

describe('unmanaged Pods stay unaffected', () => {
  it('a Pod of an unmanaged ReplicaSet may be orphaned and ungated by anyone', async () => {
    const w = registeredWorld();
    const old = pod(w, { owner: 'unmanaged-rs', stamp: 'none', gated: true });
    const next = ungated(withOwner(w, old, 'none'));
    expect(await w.validate(request('Pod', 'UPDATE', next, { old, username: 'alice' }))).toEqual({
      allowed: true,
    });
  });

  it('in a namespace without BerthLeases the new owner chain is still walked (one GET per owner)', async () => {
    const w = registeredWorld();
    w.io.leases.clear();
    const old = pod(w, { owner: 'unmanaged-rs', stamp: 'none', gated: true });
    const next = ungated(withOwner(w, old, 'none'));
    expect(await w.validate(request('Pod', 'UPDATE', next, { old }))).toEqual({ allowed: true });
    expect(w.io.reads().map((r) => r.op)).toEqual(['list-leases', 'get-workload']);
  });

  it('a Pod whose owners do not change is decided without reading the old owners twice', async () => {
    const w = registeredWorld();
    const old = pod(w, { owner: 'daemonset', stamp: 'none', gated: true });
    expect(await w.validate(request('Pod', 'UPDATE', ungated(old), { old }))).toEqual({ allowed: true });
    expect(w.io.reads()).toEqual([]);
  });

  it('a Pod whose (unchanged) owner is gone is still an unmanaged update (§4.4 step 5)', async () => {
    const w = registeredWorld();
    const old = pod(w, { owner: 'missing-rs', stamp: 'none', gated: true });
    expect(await w.validate(request('Pod', 'UPDATE', ungated(old), { old }))).toEqual({ allowed: true });
  });
});
