// The opt-in workload admission scope on the real control plane (docs/admission.md, "The admission scope"):
// kube-apiserver never calls the workload webhooks for a namespace outside it; a BerthLease with a target
// is refused there (saying how to opt in), and in a namespace that entered the scope moments ago (saying
// when to retry); a namespace leaves in two steps, `leaving` and then the operator's removal of the label
// once nothing managed is left, guarded by the resourceVersion it saw (forced here with the API proxy's
// holds); and, behind the guards, the reconciler: a lease whose namespace went out of the scope (the
// guards bypassed) is never activated, and an active workload there is stopped and drained before its
// release.
import { AdmissionregistrationV1Api, type V1Pod } from '@kubernetes/client-node';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { FINALIZER, outOfScopeMessage, SCOPE_LABEL, SCOPE_SETTLE_MS } from '../../../src/berth/api.ts';
import { findCondition } from '../../../src/berth/status.ts';
import { ScopeMessage } from '../../../webhooks/scope.ts';
import { IN_SCOPE } from '../../helpers/cluster.ts';
import { eventually } from '../../helpers/eventually.ts';
import { rejection, settling } from '../../helpers/rejection.ts';
import { type Central, type RecordingLeaseClient, startCentral, sumMetric } from '../berth/harness.ts';
import {
  createManagedOperator,
  deploymentLease,
  isGated,
  isRunning,
  ManagedCluster,
  type ManagedOperator,
  OPERATOR_USER,
  until,
} from './harness.ts';

const SCOPE_DENIED = 'admission webhook "namespace-scope.berth.skaphos.io" denied the request: ';
const LEASE_DENIED = 'admission webhook "berthlease-scope.berth.skaphos.io" denied the request: ';
const CONFIGURATION = 'berth-operator-injection-workloads';

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

const label = (ns: string, value: string | null) =>
  cluster.t.kubectl([
    'label',
    'namespace',
    ns,
    value === null ? `${SCOPE_LABEL}-` : `${SCOPE_LABEL}=${value}`,
    '--overwrite',
  ]);
const scopeOf = async (ns: string): Promise<string | undefined> =>
  (await cluster.core.readNamespace({ name: ns })).metadata?.labels?.[SCOPE_LABEL];

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

/** A BerthLease created directly, without waiting out a settle period (what the guard decides is tested). */
const createNow = (name: string, ns: string, replicas = 1) =>
  cluster.custom.createNamespacedCustomObject({
    ...cluster.ref(),
    namespace: ns,
    body: {
      apiVersion: 'berth.skaphos.io/v1alpha1',
      kind: 'BerthLease',
      metadata: { name },
      spec: deploymentLease(name, replicas),
    },
  });

/** Breaks the glass (the configurations deleted), runs `body`, restores the validating configuration. */
async function withoutGuards(body: () => Promise<void>): Promise<void> {
  const admission = cluster.t.kc.makeApiClient(AdmissionregistrationV1Api);
  const validating = await admission.readValidatingWebhookConfiguration({ name: CONFIGURATION });
  await admission.deleteValidatingWebhookConfiguration({ name: CONFIGURATION });
  try {
    await body();
  } finally {
    const { resourceVersion: _rv, uid: _uid, ...metadata } = validating.metadata ?? {};
    await admission.createValidatingWebhookConfiguration({ body: { ...validating, metadata } });
  }
}

describe('entering the scope', () => {
  it('outside it, no workload write reaches the operator', async () => {
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

  it('a BerthLease with a target is refused outside (how to opt in), then until the label settled (when to retry)', async () => {
    const ns = await cluster.t.namespace('unscoped');
    expect(await rejection(createNow('web', ns))).toBe(`${LEASE_DENIED}${ScopeMessage.leaseOutOfScope(ns)}`);
    const { target: _t, acquireAction: _a, releaseAction: _r, ...leaseOnly } = deploymentLease('ingest', 0);
    await cluster.createLease('ingest', leaseOnly, ns);
    const labelled = Date.now();
    expect((await label(ns, 'enabled')).code).toBe(0);
    // Once the webhook replica has seen the label, and until it has seen it for the settle period.
    const early = await until(async () => {
      const message = await rejection(createNow('web', ns));
      return message.includes('entered the workload admission scope moments ago') ? message : undefined;
    });
    expect(settling(early)).toBe(true);
    await cluster.createLease('web', deploymentLease('web', 1), ns);
    expect(Date.now() - labelled).toBeGreaterThanOrEqual(SCOPE_SETTLE_MS);
  });
});

describe('leaving the scope', () => {
  it('takes two steps: leaving refuses new leases; the operator removes the label once nothing managed is left', async () => {
    await startOperator();
    const ns = await cluster.t.namespace('busy', IN_SCOPE);
    await cluster.createLease('web', deploymentLease('web', 0), ns);
    await cluster.createDeployment('web', 0, ns);
    await eventually(async () => (await cluster.lease('web', ns))?.status?.workload?.targetUID !== undefined);
    // Not in one step, by no write of the labels.
    const inTwoSteps = `${SCOPE_DENIED}${ScopeMessage.exitInTwoSteps(ns)}`;
    expect((await label(ns, null)).stderr).toContain(inTwoSteps);
    expect((await label(ns, 'off')).stderr).toContain(inTwoSteps);
    const ns0 = await cluster.core.readNamespace({ name: ns });
    const viaStatus = cluster.core.replaceNamespaceStatus({
      name: ns,
      body: { ...ns0, metadata: { ...ns0.metadata, labels: { 'kubernetes.io/metadata.name': ns } } },
    });
    expect(await rejection(viaStatus)).toBe(inTwoSteps);

    expect((await label(ns, 'leaving')).code).toBe(0);
    expect(await rejection(createNow('other', ns))).toBe(`${LEASE_DENIED}${ScopeMessage.leaseLeaving(ns)}`);
    // Still reviewed while it leaves, and kept while the lease is there, past the settle period.
    expect(
      await rejection(cluster.core.createNamespacedPod({ namespace: ns, body: orphanPod('o') })),
    ).toContain('resolve controller owner');
    await eventually(
      async () => {
        const events = await cluster.core.listNamespacedEvent({ namespace: 'default' });
        return events.items.some(
          (e) =>
            e.involvedObject.name === ns &&
            e.reason === 'ScopeExitWaiting' &&
            e.message?.includes('BerthLease "web"'),
        );
      },
      { timeoutMs: SCOPE_SETTLE_MS + 10_000 },
    );
    expect(await scopeOf(ns)).toBe('leaving');

    // The lease goes (drained and released by the operator); its stamped Deployment still holds the scope.
    await cluster.deleteLease('web', ns);
    await eventually(async () => (await cluster.lease('web', ns)) === undefined, { timeoutMs: 15_000 });
    expect(await scopeOf(ns)).toBe('leaving');
    await cluster.apps.deleteNamespacedDeployment({
      name: 'web',
      namespace: ns,
      propagationPolicy: 'Foreground',
    });
    await eventually(async () => (await scopeOf(ns)) === undefined, { timeoutMs: 30_000 });
  }, 90_000);

  it('the removal is guarded by the version the operator saw: a namespace set back to enabled keeps its label', async () => {
    await startOperator();
    const ns = await cluster.t.namespace('back', IN_SCOPE);
    // The exit controller's LIST of stamped Pods is held until the namespace is enabled again.
    const back = Promise.withResolvers<void>();
    const held = cluster.proxy.inject({
      verbs: ['list'],
      resource: 'pods',
      namespace: ns,
      user: OPERATOR_USER,
      until: back.promise,
      times: 1,
    });
    try {
      expect((await label(ns, 'leaving')).code).toBe(0);
      await eventually(() => held.hits() === 1, { timeoutMs: SCOPE_SETTLE_MS + 10_000 });
      expect((await label(ns, 'enabled')).code).toBe(0);
    } finally {
      back.resolve();
      held.remove();
    }
    // Its PATCH carried the leaving version: refused with 409, the label stays.
    await eventually(() =>
      cluster.proxy.records.some(
        (r) => r.verb === 'patch' && r.resource === 'namespaces' && r.name === ns && r.status === 409,
      ),
    );
    expect(await scopeOf(ns)).toBe('enabled');
  }, 60_000);
});

describe('behind the guards, the reconciler', () => {
  it('never activates a lease whose namespace went out of the scope', async () => {
    await op?.stop();
    op = undefined;
    const ns = await cluster.t.namespace('bypassed', IN_SCOPE);
    await cluster.createLease('bypassed', deploymentLease('bypassed', 2), ns, [FINALIZER]);
    await cluster.createDeployment('bypassed', 0, ns);
    await eventually(
      async () => (await cluster.lease('bypassed', ns))?.status?.workload?.targetUID !== undefined,
    );
    await withoutGuards(async () => {
      expect((await label(ns, null)).code).toBe(0);
    });
    const o = await startOperator();
    await eventually(
      async () =>
        findCondition((await cluster.lease('bypassed', ns))?.status, 'Acquired')?.message ===
        outOfScopeMessage(ns),
      { timeoutMs: 15_000 },
    );
    expect(o.central.calls.filter((c) => c.name === 'bypassed')).toEqual([]);
    expect(
      (await cluster.apps.readNamespacedDeployment({ name: 'bypassed', namespace: ns })).spec?.replicas,
    ).toBe(0);
    // In the scope again, the namespace's leases are reconciled at once, and this one starts.
    expect((await label(ns, 'enabled')).code).toBe(0);
    await eventually(
      async () => (await cluster.lease('bypassed', ns))?.status?.workload?.phase === 'Active',
      {
        timeoutMs: 15_000,
      },
    );
  }, 120_000);

  it('stops an active workload whose namespace went out of the scope, its Pods gone before the release', async () => {
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
    await withoutGuards(async () => {
      expect((await label(ns, null)).code).toBe(0);
    });
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
