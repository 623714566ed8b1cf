// The opt-in workload admission scope on the real control plane (docs/admission.md, "The admission scope"):
// kube-apiserver never calls the workload webhooks for a namespace outside it; a BerthLease with a target is
// refused there with the command that opts the namespace in; a namespace cannot leave the scope while it
// holds a BerthLease with a target or a stamped object (by any write of its labels, the status subresource
// included); and the reconciler closes the race between leaving the scope and creating a lease, forced here
// with the API proxy's holds: a lease whose namespace left is never activated, and an active workload whose
// namespace left is stopped and drained before its release.
import { AdmissionregistrationV1Api, type V1Pod } from '@kubernetes/client-node';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { FINALIZER, outOfScopeMessage, SCOPE_LABEL } from '../../../src/berth/api.ts';
import { findCondition } from '../../../src/berth/status.ts';
import { ScopeMessage } from '../../../webhooks/scope.ts';
import { IN_SCOPE } from '../../helpers/cluster.ts';
import { eventually } from '../../helpers/eventually.ts';
import { rejection } from '../../helpers/rejection.ts';
import { type Central, type RecordingLeaseClient, startCentral, sumMetric } from '../berth/harness.ts';
import {
  createManagedOperator,
  deploymentLease,
  isGated,
  isRunning,
  ManagedCluster,
  type ManagedOperator,
  OPERATOR_USER,
} from './harness.ts';

const SCOPE_DENIED = 'admission webhook "namespace-scope.berth.skaphos.io" denied the request: ';
const LEASE_DENIED = 'admission webhook "berthlease-scope.berth.skaphos.io" denied the request: ';

let cluster: ManagedCluster;
let central: Central;
let op: ManagedOperator | undefined;

beforeAll(async () => {
  cluster = await ManagedCluster.start('east');
  central = await startCentral();
}, 90_000);
afterAll(async () => {
  await op?.stop();
  await central?.stop();
  await cluster?.stop();
});

const startOperator = async (wrap?: (inner: RecordingLeaseClient) => RecordingLeaseClient) => {
  await op?.stop();
  op = createManagedOperator(cluster, {
    clusterId: 'cluster-east',
    centralUrl: central.url,
    ...(wrap ? { leaseClient: wrap } : {}),
  });
  await op.start();
  return op;
};

const reviews = async (): Promise<number> =>
  (await sumMetric(cluster.admissionRegistry, 'controller_runtime_webhook_requests_total')) ?? 0;

/** How many reads of `kind` the scope path's reviews have finished (the histogram's count). */
async function scopeReadsDone(kind: string): Promise<number> {
  const metric = cluster.admissionRegistry.getSingleMetric('berth_webhook_api_read_duration_seconds');
  const values = (await metric?.get())?.values ?? [];
  return values
    .filter(
      (v) =>
        (v as { metricName?: string }).metricName === 'berth_webhook_api_read_duration_seconds_count' &&
        v.labels.webhook === '/validate-admission-scope' &&
        v.labels.kind === kind,
    )
    .reduce((sum, v) => sum + v.value, 0);
}

const unlabel = (ns: string) => cluster.t.kubectl(['label', 'namespace', ns, `${SCOPE_LABEL}-`]);
const labelled = async (ns: string): Promise<boolean> =>
  (await cluster.core.readNamespace({ name: ns })).metadata?.labels?.[SCOPE_LABEL] === 'enabled';

const orphanPod = (name: string): V1Pod => ({
  metadata: {
    name,
    ownerReferences: [
      {
        apiVersion: 'apps/v1',
        kind: 'ReplicaSet',
        name: 'gone',
        uid: '00000000-0000-0000-0000-000000000001',
        controller: true,
      },
    ],
  },
  spec: { containers: [{ name: 'app', image: 'registry.example.com/app:1' }] },
});

describe('outside the scope', () => {
  it('no workload write reaches the operator', async () => {
    const ns = await cluster.t.namespace('plain');
    const before = await reviews();
    // In scope this Pod is denied (its owner is gone); outside, nothing reviews it.
    await cluster.core.createNamespacedPod({ namespace: ns, body: orphanPod('orphan') });
    await cluster.createDeployment('web', 1, ns);
    await eventually(async () => (await cluster.pods('app=web', ns)).length === 1);
    expect(await reviews()).toBe(before);
    const inScope = await cluster.t.namespace('scoped', IN_SCOPE);
    expect(
      await rejection(cluster.core.createNamespacedPod({ namespace: inScope, body: orphanPod('orphan') })),
    ).toContain('resolve controller owner');
    expect(await reviews()).toBeGreaterThan(before);
  });

  it('refuses a BerthLease with a target, saying how to opt in; a lease-only one is admitted', async () => {
    const ns = await cluster.t.namespace('unscoped');
    expect(await rejection(cluster.createLease('web', deploymentLease('web', 1), ns))).toBe(
      `${LEASE_DENIED}${ScopeMessage.leaseOutOfScope(ns)}`,
    );
    const { target: _t, acquireAction: _a, releaseAction: _r, ...leaseOnly } = deploymentLease('ingest', 0);
    await cluster.createLease('ingest', leaseOnly, ns);
    // Opted in, the lease is admitted (once kube-apiserver's cache of the namespace has the label).
    await cluster.t.kubectl(['label', 'namespace', ns, `${SCOPE_LABEL}=enabled`]);
    await eventually(() => cluster.createLease('web', deploymentLease('web', 1), ns));
  });
});

describe('leaving the scope', () => {
  it('is refused while a BerthLease with a target or a stamped object is left, by any write of the labels', async () => {
    await startOperator();
    const ns = await cluster.t.namespace('busy', IN_SCOPE);
    await cluster.createLease('web', deploymentLease('web', 0), ns);
    await cluster.createDeployment('web', 0, ns);
    const holdsLease = `${SCOPE_DENIED}${ScopeMessage.holdsLease(ns, 'web', 'Deployment "web"')}`;
    const removed = await unlabel(ns);
    expect(removed.code).not.toBe(0);
    expect(removed.stderr).toContain(holdsLease);
    // A changed value leaves too; so does a write through the status subresource, which keeps labels.
    expect(
      (await cluster.t.kubectl(['label', 'namespace', ns, `${SCOPE_LABEL}=off`, '--overwrite'])).stderr,
    ).toContain(holdsLease);
    const ns0 = await cluster.core.readNamespace({ name: ns });
    const viaStatus = cluster.core.replaceNamespaceStatus({
      name: ns,
      body: { ...ns0, metadata: { ...ns0.metadata, labels: { 'kubernetes.io/metadata.name': ns } } },
    });
    expect(await rejection(viaStatus)).toBe(holdsLease);
    expect(await labelled(ns)).toBe(true);

    // The lease goes (its finalizer released by the operator); the stamped Deployment is still there.
    await cluster.deleteLease('web', ns);
    await eventually(async () => (await cluster.lease('web', ns)) === undefined, { timeoutMs: 15_000 });
    const stamped = await unlabel(ns);
    expect(stamped.stderr).toContain(SCOPE_DENIED);
    expect(stamped.stderr).toContain(`holds Deployment "web", managed for BerthLease "web"`);
    await cluster.apps.deleteNamespacedDeployment({
      name: 'web',
      namespace: ns,
      propagationPolicy: 'Foreground',
    });
    await eventually(async () => (await unlabel(ns)).code === 0, { timeoutMs: 30_000 });
    expect(await labelled(ns)).toBe(false);
  }, 90_000);
});

describe('the race between leaving the scope and creating a lease, closed by the reconciler', () => {
  it('a lease created while its namespace leaves the scope is never activated', async () => {
    await op?.stop();
    op = undefined;
    const ns = await cluster.t.namespace('race', IN_SCOPE);
    // The guard's LIST of stamped Pods is held: its LIST of BerthLeases has answered (empty) by then.
    const release = Promise.withResolvers<void>();
    const held = cluster.proxy.inject({
      verbs: ['list'],
      resource: 'pods',
      namespace: ns,
      user: OPERATOR_USER,
      until: release.promise,
      times: 1,
    });
    const listedBefore = await scopeReadsDone('list-leases');
    const leaving = unlabel(ns);
    try {
      await eventually(async () => held.hits() === 1 && (await scopeReadsDone('list-leases')) > listedBefore);
      // Meanwhile the namespace is still in scope: the lease and its target are admitted and recorded.
      await cluster.createLease('racer', deploymentLease('racer', 2), ns, [FINALIZER]);
      await cluster.createDeployment('racer', 0, ns);
      await eventually(
        async () => (await cluster.lease('racer', ns))?.status?.workload?.targetUID !== undefined,
      );
    } finally {
      release.resolve();
      held.remove();
    }
    expect((await leaving).code).toBe(0);
    expect(await labelled(ns)).toBe(false);

    // Outside the scope with a lease and an admitted target: the reconciler never activates it.
    const o = await startOperator();
    await eventually(
      async () =>
        findCondition((await cluster.lease('racer', ns))?.status, 'Acquired')?.message ===
        outOfScopeMessage(ns),
      { timeoutMs: 15_000 },
    );
    expect(o.central.calls.filter((c) => c.name === 'racer')).toEqual([]);
    expect(
      (await cluster.apps.readNamespacedDeployment({ name: 'racer', namespace: ns })).spec?.replicas,
    ).toBe(0);

    // Opted in again, the namespace's leases are reconciled at once, and this one starts.
    await cluster.t.kubectl(['label', 'namespace', ns, `${SCOPE_LABEL}=enabled`]);
    await eventually(async () => (await cluster.lease('racer', ns))?.status?.workload?.phase === 'Active', {
      timeoutMs: 15_000,
    });
  }, 120_000);

  it('an active workload whose namespace left the scope is stopped, its Pods gone before the release', async () => {
    const ns = await cluster.t.namespace('left', IN_SCOPE);
    const podsAtRelease: number[] = [];
    const o = await startOperator((inner) => {
      const release = inner.release.bind(inner);
      inner.release = async (...args) => {
        if (args[1] === 'leaver') podsAtRelease.push((await cluster.pods('app=leaver', ns)).length);
        return release(...args);
      };
      return inner;
    });
    await cluster.createLease('leaver', deploymentLease('leaver', 2), ns);
    await eventually(async () => (await cluster.lease('leaver', ns))?.metadata.finalizers?.length === 1);
    await cluster.createDeployment('leaver', 0, ns);
    await eventually(
      async () => {
        const pods = await cluster.pods('app=leaver', ns);
        return pods.length === 2 && pods.every((p) => !isGated(p) && isRunning(p));
      },
      { timeoutMs: 30_000 },
    );
    // The guard would refuse; an admin goes around it (break-glass), as the race above could.
    const admission = cluster.t.kc.makeApiClient(AdmissionregistrationV1Api);
    const name = 'berth-operator-injection-workloads';
    const validating = await admission.readValidatingWebhookConfiguration({ name });
    await admission.deleteValidatingWebhookConfiguration({ name });
    try {
      expect((await unlabel(ns)).code).toBe(0);
    } finally {
      const { resourceVersion: _rv, uid: _uid, ...metadata } = validating.metadata ?? {};
      await admission.createValidatingWebhookConfiguration({ body: { ...validating, metadata } });
    }
    await eventually(() => o.central.calls.some((c) => c.op === 'release' && c.name === 'leaver'), {
      timeoutMs: 30_000,
    });
    expect(podsAtRelease).toEqual([0]);
    // Stopped, then held back like any lease outside the scope.
    await eventually(
      async () =>
        findCondition((await cluster.lease('leaver', ns))?.status, 'Acquired')?.message ===
        outOfScopeMessage(ns),
    );
    expect(
      (await cluster.apps.readNamespacedDeployment({ name: 'leaver', namespace: ns })).spec?.replicas,
    ).toBe(0);
  }, 120_000);
});
