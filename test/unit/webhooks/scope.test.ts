// The opt-in scope's guards (webhooks/scope.ts): a BerthLease with a target outside the scope is refused
// without a read; a namespace leaving the scope is refused while it holds a BerthLease with a target or a
// stamped object, named in the denial, and a failed read refuses too. Their wiring to kube-apiserver
// (selectors, matchConditions) is tested on the real control plane: test/integration/webhooks/scope.test.ts.
import { describe, expect, it } from 'vitest';
import { KubeApiError } from '../../../src/kube/client.ts';
import type { JsonObject } from '../../../src/workloads/model.ts';
import { type AdmissionRequest, admissionRequestSchema } from '../../../webhooks/review.ts';
import { decideScopeReview, ScopeMessage } from '../../../webhooks/scope.ts';
import { FakeIO } from '../../fixtures/webhooks/fake-io.ts';
import { berthLease, NS, stamped, workload } from '../../fixtures/webhooks/objects.ts';

const SCOPE = 'berth.skaphos.io/workload-admission';

function review(
  kind: { group: string; version: string; kind: string; resource: string },
  operation: 'CREATE' | 'UPDATE' | 'DELETE',
  object: JsonObject,
  o: { old?: JsonObject; namespace?: string; name?: string } = {},
): AdmissionRequest {
  const { resource, ...gvk } = kind;
  return admissionRequestSchema.parse({
    uid: 'a1b2',
    kind: gvk,
    resource: { group: kind.group, version: kind.version, resource },
    ...(o.namespace === undefined ? {} : { namespace: o.namespace }),
    name: o.name ?? '',
    operation,
    userInfo: { username: 'alice' },
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
const IN = namespace({ [SCOPE]: 'enabled' });
const OUT = namespace({});
const leave = (to: JsonObject = OUT): AdmissionRequest =>
  review(NAMESPACE, 'UPDATE', to, { old: IN, name: NS });

describe('a BerthLease outside the scope', () => {
  it('is refused when it has a target, with the command that opts the namespace in', async () => {
    const io = new FakeIO();
    const lease = berthLease('web', { target: { kind: 'Deployment', name: 'web' } });
    const d = await decideScopeReview(review(LEASE, 'CREATE', lease, { namespace: NS, name: 'web' }), io);
    expect(d).toEqual({
      allowed: false,
      code: 403,
      reason: 'out-of-scope',
      message: ScopeMessage.leaseOutOfScope(NS),
    });
    expect(ScopeMessage.leaseOutOfScope(NS)).toBe(
      'BerthLeases with spec.target are only admitted in namespaces in the workload admission scope, and "shop" is not in it: a cluster admin opts it in with `kubectl label namespace shop berth.skaphos.io/workload-admission=enabled`',
    );
    expect(io.calls).toEqual([]);
  });

  it('is allowed without a target (lease-only needs no admission), and on other operations', async () => {
    const io = new FakeIO();
    const leaseOnly = berthLease('ingest');
    expect((await decideScopeReview(review(LEASE, 'CREATE', leaseOnly, { namespace: NS }), io)).allowed).toBe(
      true,
    );
    const managed = berthLease('web', { target: { kind: 'Deployment', name: 'web' } });
    expect(
      (await decideScopeReview(review(LEASE, 'UPDATE', managed, { namespace: NS, old: managed }), io))
        .allowed,
    ).toBe(true);
    expect(io.calls).toEqual([]);
  });
});

describe('a namespace leaving the scope', () => {
  it('is allowed when it holds nothing managed (lease-only leases and unstamped workloads included)', async () => {
    const io = new FakeIO();
    io.addLease(berthLease('ingest'));
    io.addWorkload('Deployment', workload('Deployment', 'plain'));
    io.addWorkload('Pod', workload('Pod', 'plain-1'));
    expect(await decideScopeReview(leave(), io)).toEqual({ allowed: true });
    expect(io.calls.map((c) => c.op).sort()).toEqual([
      'list-leases',
      'list-stamped',
      'list-stamped',
      'list-stamped',
      'list-stamped',
      'list-stamped',
      'list-stamped',
    ]);
  });

  it('is refused while a BerthLease with a target is there, named first', async () => {
    const io = new FakeIO();
    io.addLease(berthLease('web', { target: { kind: 'Deployment', name: 'web' } }));
    io.addWorkload('Pod', stamped('Pod', workload('Pod', 'web-1'), { name: 'web', uid: 'u', targetUID: '' }));
    expect(await decideScopeReview(leave(), io)).toEqual({
      allowed: false,
      code: 403,
      reason: 'scope-in-use',
      message:
        'namespace "shop" cannot leave the workload admission scope while it holds BerthLease "web" (its target Deployment "web" would no longer be admitted): delete the BerthLease and let its workload drain first',
    });
  });

  it('is refused while a stamped object is left (a lease already gone), naming roots before what they own', async () => {
    const io = new FakeIO();
    const binding = { name: 'gone', uid: 'u-gone', targetUID: '' };
    io.addWorkload('Pod', stamped('Pod', workload('Pod', 'web-1'), binding));
    io.addWorkload('ReplicaSet', stamped('ReplicaSet', workload('ReplicaSet', 'web-5d9c'), binding));
    expect(await decideScopeReview(leave(), io)).toMatchObject({
      allowed: false,
      reason: 'scope-in-use',
      message:
        'namespace "shop" cannot leave the workload admission scope while it holds ReplicaSet "web-5d9c", managed for BerthLease "gone": delete it first',
    });
  });

  it('counts a changed value as leaving, and any other namespace write is allowed without reads', async () => {
    const io = new FakeIO();
    io.addLease(berthLease('web', { target: { kind: 'Deployment', name: 'web' } }));
    expect((await decideScopeReview(leave(namespace({ [SCOPE]: 'disabled' })), io)).allowed).toBe(false);
    const reads = io.calls.length;
    const relabelled = namespace({ [SCOPE]: 'enabled', team: 'a' });
    expect(
      (await decideScopeReview(review(NAMESPACE, 'UPDATE', relabelled, { old: IN, name: NS }), io)).allowed,
    ).toBe(true);
    expect(
      (await decideScopeReview(review(NAMESPACE, 'UPDATE', IN, { old: OUT, name: NS }), io)).allowed,
    ).toBe(true);
    expect(io.calls.length).toBe(reads);
  });

  it('is refused when a read fails: nothing is concluded from a missing answer', async () => {
    const io = new FakeIO();
    io.fail(
      'list-stamped',
      new KubeApiError(500, { kind: 'Status', status: 'Failure', code: 500, message: 'etcdserver: timeout' }),
    );
    expect(await decideScopeReview(leave(), io)).toEqual({
      allowed: false,
      code: 403,
      reason: 'api-error',
      message:
        'cannot tell whether namespace "shop" may leave the workload admission scope: etcdserver: timeout',
    });
  });
});
