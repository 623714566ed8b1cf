// The opt-in scope's guards (webhooks/scope.ts): a BerthLease with a target is admitted only once its
// namespace has been `enabled` for the settle period as this replica saw it; a namespace leaves the scope in
// two steps, the last one the operator's, once it has been `leaving` for the settle period and nothing
// managed is left (named in the denial); a failed read refuses. Their wiring to kube-apiserver (selectors,
// matchConditions) and the exit controller are tested on the real control plane:
// test/integration/managed/scope.test.ts.
import { describe, expect, it } from 'vitest';
import { SCOPE_SETTLE_MS } from '../../../src/berth/api.ts';
import { KubeApiError } from '../../../src/kube/client.ts';
import type { JsonObject } from '../../../src/workloads/model.ts';
import { type AdmissionRequest, admissionRequestSchema } from '../../../webhooks/review.ts';
import { decideScopeReview, type ScopeEntries, ScopeMessage } from '../../../webhooks/scope.ts';
import { FakeIO } from '../../fixtures/webhooks/fake-io.ts';
import { berthLease, NS, OPERATOR_USER, stamped, workload } from '../../fixtures/webhooks/objects.ts';

const SCOPE = 'berth.skaphos.io/workload-admission';
const NOW = Date.UTC(2026, 0, 1, 12, 0, 0);

function review(
  kind: { group: string; version: string; kind: string; resource: string },
  operation: 'CREATE' | 'UPDATE' | 'DELETE',
  object: JsonObject,
  o: { old?: JsonObject; namespace?: string; name?: string; username?: string } = {},
): AdmissionRequest {
  const { resource, ...gvk } = kind;
  return admissionRequestSchema.parse({
    uid: 'a1b2',
    kind: gvk,
    resource: { group: kind.group, version: kind.version, resource },
    ...(o.namespace === undefined ? {} : { namespace: o.namespace }),
    name: o.name ?? '',
    operation,
    userInfo: { username: o.username ?? 'alice' },
    object,
    oldObject: o.old ?? null,
  });
}

const LEASE = { group: 'berth.skaphos.io', version: 'v1alpha1', kind: 'BerthLease', resource: 'berthleases' };
const NAMESPACE = { group: '', version: 'v1', kind: 'Namespace', resource: 'namespaces' };

const namespace = (labels: Record<string, string>): JsonObject => ({
  apiVersion: 'v1',
  kind: 'Namespace',
  metadata: { name: NS, labels: { 'kubernetes.io/metadata.name': NS, ...labels } },
});
const ENABLED = namespace({ [SCOPE]: 'enabled' });
const LEAVING = namespace({ [SCOPE]: 'leaving' });
const OUT = namespace({});

/** This replica's view: the namespace with `value`, seen since `agoMs` before NOW. */
const seen = (value: string | 'out' | undefined, agoMs = SCOPE_SETTLE_MS): ScopeEntries => ({
  entry: () =>
    value === undefined || value === 'out' ? value : { value, since: NOW - agoMs, resourceVersion: '7' },
});

const decide = (req: AdmissionRequest, scope: ScopeEntries, io = new FakeIO()) =>
  decideScopeReview(req, { io, scope, operatorUser: OPERATOR_USER, now: () => NOW });

const targeted = () => berthLease('web', { target: { kind: 'Deployment', name: 'web' } });
const createLease = (lease = targeted()) => review(LEASE, 'CREATE', lease, { namespace: NS, name: 'web' });
const relabel = (from: JsonObject, to: JsonObject, username?: string) =>
  review(NAMESPACE, 'UPDATE', to, { old: from, name: NS, ...(username ? { username } : {}) });

describe('a BerthLease with a target', () => {
  it('is admitted once the namespace has been in the scope for the settle period, without a read', async () => {
    const io = new FakeIO();
    expect(await decide(createLease(), seen('enabled'), io)).toEqual({ allowed: true });
    expect(io.calls).toEqual([]);
  });

  it('is refused while the namespace entered the scope moments ago, saying when to retry', async () => {
    expect(await decide(createLease(), seen('enabled', 1_200))).toEqual({
      allowed: false,
      code: 403,
      reason: 'scope-settling',
      message: ScopeMessage.leaseSettling(NS, SCOPE_SETTLE_MS - 1_200),
    });
    expect(ScopeMessage.leaseSettling(NS, 3_800)).toBe(
      'namespace "shop" entered the workload admission scope moments ago: BerthLeases with spec.target are admitted once every API server reviews it, in 4 s; retry then',
    );
  });

  it('is refused outside the scope (with the opt-in command), while leaving, and before the first list', async () => {
    expect(await decide(createLease(), seen('out'))).toMatchObject({
      allowed: false,
      reason: 'out-of-scope',
      message:
        'BerthLeases with spec.target are only admitted in namespaces in the workload admission scope, and "shop" is not in it: a cluster admin opts it in with `kubectl label namespace shop berth.skaphos.io/workload-admission=enabled`',
    });
    expect(await decide(createLease(), seen('leaving', 60_000))).toMatchObject({
      allowed: false,
      reason: 'scope-leaving',
    });
    expect(await decide(createLease(), seen(undefined))).toMatchObject({
      allowed: false,
      code: 503,
      reason: 'scope-unknown',
    });
  });

  it('a lease-only BerthLease needs no scope, and only CREATEs are judged', async () => {
    expect(
      (await decide(review(LEASE, 'CREATE', berthLease('ingest'), { namespace: NS }), seen('out'))).allowed,
    ).toBe(true);
    const managed = targeted();
    expect(
      (await decide(review(LEASE, 'UPDATE', managed, { namespace: NS, old: managed }), seen('out'))).allowed,
    ).toBe(true);
  });
});

describe('a namespace leaving the scope', () => {
  it('switches between enabled and leaving freely, and other label changes are not judged', async () => {
    const io = new FakeIO();
    io.addLease(targeted());
    for (const [from, to] of [
      [ENABLED, LEAVING],
      [LEAVING, ENABLED],
      [ENABLED, namespace({ [SCOPE]: 'enabled', team: 'a' })],
      [OUT, ENABLED],
    ] as const)
      expect((await decide(relabel(from, to), seen('enabled'), io)).allowed).toBe(true);
    expect(io.calls).toEqual([]);
  });

  it('loses the label only in two steps: nobody removes or changes it from enabled', async () => {
    for (const to of [OUT, namespace({ [SCOPE]: 'off' })])
      for (const username of ['alice', OPERATOR_USER])
        expect(await decide(relabel(ENABLED, to, username), seen('enabled'))).toEqual({
          allowed: false,
          code: 403,
          reason: 'scope-exit',
          message:
            'namespace "shop" leaves the workload admission scope in two steps: `kubectl label namespace shop berth.skaphos.io/workload-admission=leaving --overwrite`, then the operator removes the label once nothing managed is left in it',
        });
  });

  it('from leaving, only the operator removes it, once leaving has settled and nothing managed is left', async () => {
    const io = new FakeIO();
    io.addLease(berthLease('ingest'));
    io.addWorkload('Deployment', workload('Deployment', 'plain'));
    expect((await decide(relabel(LEAVING, OUT, 'alice'), seen('leaving'), io)).allowed).toBe(false);
    expect(await decide(relabel(LEAVING, OUT, OPERATOR_USER), seen('leaving', 1_000), io)).toMatchObject({
      allowed: false,
      reason: 'scope-settling',
    });
    expect(io.calls).toEqual([]);
    expect(await decide(relabel(LEAVING, OUT, OPERATOR_USER), seen('leaving'), io)).toEqual({
      allowed: true,
    });
    expect(io.calls.filter((c) => c.op === 'list-stamped')).toHaveLength(6);
  });

  it('is refused while a BerthLease with a target or a stamped object is left, naming it', async () => {
    const io = new FakeIO();
    io.addLease(targeted());
    expect(await decide(relabel(LEAVING, OUT, OPERATOR_USER), seen('leaving'), io)).toMatchObject({
      allowed: false,
      reason: 'scope-in-use',
      message:
        'namespace "shop" cannot leave the workload admission scope while it holds BerthLease "web" (its target Deployment "web" would no longer be admitted): delete the BerthLease and let its workload drain first',
    });
    io.leases.clear();
    const binding = { name: 'gone', uid: 'u-gone', targetUID: '' };
    io.addWorkload('Pod', stamped('Pod', workload('Pod', 'web-1'), binding));
    io.addWorkload('ReplicaSet', stamped('ReplicaSet', workload('ReplicaSet', 'web-5d9c'), binding));
    expect(await decide(relabel(LEAVING, OUT, OPERATOR_USER), seen('leaving'), io)).toMatchObject({
      allowed: false,
      message:
        'namespace "shop" cannot leave the workload admission scope while it holds ReplicaSet "web-5d9c", managed for BerthLease "gone": delete it first',
    });
  });

  it('is refused when a read fails: nothing is concluded from a missing answer', async () => {
    const io = new FakeIO();
    io.fail(
      'list-stamped',
      new KubeApiError(500, { kind: 'Status', status: 'Failure', code: 500, message: 'etcdserver: timeout' }),
    );
    expect(await decide(relabel(LEAVING, OUT, OPERATOR_USER), seen('leaving'), io)).toEqual({
      allowed: false,
      code: 403,
      reason: 'api-error',
      message:
        'cannot tell whether namespace "shop" may leave the workload admission scope: etcdserver: timeout',
    });
  });
});
