// Object semantics of the sandbox API server through the real @kubernetes/client-node.
import {
  AppsV1Api,
  BatchV1Api,
  CoordinationV1Api,
  CoreV1Api,
  EventsV1Api,
  KubernetesObjectApi,
  PatchStrategy,
  setHeaderOptions,
  type V1ConfigMap,
  type V1Deployment,
} from '@kubernetes/client-node';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { apiFailure, mergePatch } from '../../helpers/api.ts';
import { eventually } from '../../helpers/eventually.ts';
import { startTestSandbox, type TestSandbox } from '../../helpers/sandbox.ts';

let t: TestSandbox;
let core: CoreV1Api;
let apps: AppsV1Api;

beforeAll(async () => {
  t = await startTestSandbox();
  core = t.kc.makeApiClient(CoreV1Api);
  apps = t.kc.makeApiClient(AppsV1Api);
});
afterAll(async () => {
  await t.stop();
});

const deployment = (name: string, labels = { app: name }): V1Deployment => ({
  metadata: { name, labels },
  spec: {
    replicas: 1,
    selector: { matchLabels: labels },
    template: { metadata: { labels }, spec: { containers: [{ name: 'app', image: 'nginx:1.27' }] } },
  },
});

describe('object metadata', () => {
  it('assigns uid, creationTimestamp and a global monotonic resourceVersion', async () => {
    const a = await core.createNamespacedConfigMap({
      namespace: 'default',
      body: { metadata: { name: 'rv-a' } },
    });
    const b = await core.createNamespacedConfigMap({
      namespace: 'default',
      body: { metadata: { name: 'rv-b' } },
    });
    expect(a.metadata?.uid).toMatch(/^[0-9a-f-]{36}$/);
    expect(a.metadata?.creationTimestamp).toBeInstanceOf(Date);
    expect(Number(b.metadata?.resourceVersion)).toBeGreaterThan(Number(a.metadata?.resourceVersion));
  });

  it('generates names from generateName', async () => {
    const cm = await core.createNamespacedConfigMap({
      namespace: 'default',
      body: { metadata: { generateName: 'gen-' } },
    });
    expect(cm.metadata?.name).toMatch(/^gen-[a-z0-9]{5}$/);
  });

  it('answers 409 AlreadyExists for a duplicate name and 404 for a missing object', async () => {
    await core.createNamespacedConfigMap({ namespace: 'default', body: { metadata: { name: 'dup' } } });
    const dup = await apiFailure(
      core.createNamespacedConfigMap({ namespace: 'default', body: { metadata: { name: 'dup' } } }),
    );
    expect(dup.code).toBe(409);
    expect(dup.reason).toBe('AlreadyExists');
    expect(dup.message).toBe('configmaps "dup" already exists');
    const missing = await apiFailure(core.readNamespacedConfigMap({ namespace: 'default', name: 'nope' }));
    expect(missing.code).toBe(404);
    expect(missing.message).toBe('configmaps "nope" not found');
  });

  it('rejects a stale resourceVersion with 409 Conflict', async () => {
    const cm = await core.createNamespacedConfigMap({
      namespace: 'default',
      body: { metadata: { name: 'occ' }, data: { a: '1' } },
    });
    await core.replaceNamespacedConfigMap({
      namespace: 'default',
      name: 'occ',
      body: { ...cm, data: { a: '2' } },
    });
    const stale = await apiFailure(
      core.replaceNamespacedConfigMap({
        namespace: 'default',
        name: 'occ',
        body: { ...cm, data: { a: '3' } },
      }),
    );
    expect(stale.code).toBe(409);
    expect(stale.reason).toBe('Conflict');
    expect(stale.message).toBe(
      'Operation cannot be fulfilled on configmaps "occ": the object has been modified; please apply your changes to the latest version and try again',
    );
  });

  it('does not write (or bump resourceVersion) when an update changes nothing', async () => {
    const cm = await core.createNamespacedConfigMap({
      namespace: 'default',
      body: { metadata: { name: 'noop' }, data: { a: '1' } },
    });
    const again = await core.replaceNamespacedConfigMap({ namespace: 'default', name: 'noop', body: cm });
    expect(again.metadata?.resourceVersion).toBe(cm.metadata?.resourceVersion);
  });

  it('stamps kubernetes.io/metadata.name on namespaces and keeps it', async () => {
    const ns = await core.createNamespace({
      body: { metadata: { name: 'labelled', labels: { team: 'a' } } },
    });
    expect(ns.metadata?.labels).toEqual({ team: 'a', 'kubernetes.io/metadata.name': 'labelled' });
    const patched = await core.patchNamespace(
      { name: 'labelled', body: { metadata: { labels: { 'kubernetes.io/metadata.name': 'other' } } } },
      setHeaderOptions('Content-Type', PatchStrategy.MergePatch),
    );
    expect(patched.metadata?.labels?.['kubernetes.io/metadata.name']).toBe('labelled');
  });

  it('creates nothing in a namespace that does not exist', async () => {
    const res = await apiFailure(
      core.createNamespacedConfigMap({ namespace: 'ghost', body: { metadata: { name: 'x' } } }),
    );
    expect(res.code).toBe(404);
    expect(res.message).toBe('namespaces "ghost" not found');
  });

  it('reports validation errors as 422 Invalid with field causes', async () => {
    const res = await apiFailure(
      core.createNamespacedConfigMap({ namespace: 'default', body: { metadata: { name: 'Bad_Name' } } }),
    );
    expect(res.code).toBe(422);
    expect(res.reason).toBe('Invalid');
    expect(res.message).toMatch(
      /^ConfigMap "Bad_Name" is invalid: metadata.name: Invalid value: "Bad_Name": a lowercase RFC 1123 subdomain/,
    );
    expect(res.causes?.[0]?.field).toBe('metadata.name');
  });

  it('persists nothing on dryRun=All', async () => {
    const cm = await core.createNamespacedConfigMap({
      namespace: 'default',
      dryRun: 'All',
      body: { metadata: { name: 'dry' } },
    });
    expect(cm.metadata?.name).toBe('dry');
    expect((await apiFailure(core.readNamespacedConfigMap({ namespace: 'default', name: 'dry' }))).code).toBe(
      404,
    );
  });
});

describe('generation and the status subresource', () => {
  it('bumps generation on spec changes only and keeps status and spec writes apart', async () => {
    const d = await apps.createNamespacedDeployment({ namespace: 'default', body: deployment('gen') });
    expect(d.metadata?.generation).toBe(1);
    const labelled = await apps.patchNamespacedDeployment(
      { namespace: 'default', name: 'gen', body: { metadata: { labels: { app: 'gen', extra: 'x' } } } },
      setHeaderOptions('Content-Type', PatchStrategy.MergePatch),
    );
    expect(labelled.metadata?.generation).toBe(1);
    const scaled = await apps.patchNamespacedDeployment(
      { namespace: 'default', name: 'gen', body: { spec: { replicas: 3 }, status: { replicas: 99 } } },
      setHeaderOptions('Content-Type', PatchStrategy.MergePatch),
    );
    expect(scaled.metadata?.generation).toBe(2);
    expect(scaled.status?.replicas).toBeUndefined();
    const status = await apps.patchNamespacedDeploymentStatus(
      { namespace: 'default', name: 'gen', body: { spec: { replicas: 7 }, status: { replicas: 3 } } },
      setHeaderOptions('Content-Type', PatchStrategy.MergePatch),
    );
    expect(status.status?.replicas).toBe(3);
    expect(status.spec?.replicas).toBe(3);
    expect(status.metadata?.generation).toBe(2);
  });

  it('serves the scale subresource', async () => {
    await apps.createNamespacedDeployment({ namespace: 'default', body: deployment('scaled') });
    const scale = await apps.readNamespacedDeploymentScale({ namespace: 'default', name: 'scaled' });
    expect(scale.spec?.replicas).toBe(1);
    await apps.replaceNamespacedDeploymentScale({
      namespace: 'default',
      name: 'scaled',
      body: { ...scale, spec: { replicas: 4 } },
    });
    const d = await apps.readNamespacedDeployment({ namespace: 'default', name: 'scaled' });
    expect(d.spec?.replicas).toBe(4);
    expect(d.metadata?.generation).toBe(2);
  });

  it('keeps the Deployment selector immutable', async () => {
    const d = await apps.createNamespacedDeployment({ namespace: 'default', body: deployment('immutable') });
    const res = await apiFailure(
      apps.replaceNamespacedDeployment({
        namespace: 'default',
        name: 'immutable',
        body: {
          ...d,
          spec: {
            ...d.spec!,
            selector: { matchLabels: { app: 'other' } },
            template: { ...d.spec!.template, metadata: { labels: { app: 'other' } } },
          },
        },
      }),
    );
    expect(res.code).toBe(422);
    expect(
      res.causes?.some((c) => c.field === 'spec.selector' && c.message.endsWith('field is immutable')),
    ).toBe(true);
  });
});

describe('deletion', () => {
  it('honours uid and resourceVersion preconditions', async () => {
    const cm = await core.createNamespacedConfigMap({
      namespace: 'default',
      body: { metadata: { name: 'pre' } },
    });
    const wrongUid = await apiFailure(
      core.deleteNamespacedConfigMap({
        namespace: 'default',
        name: 'pre',
        body: { preconditions: { uid: 'nope' } },
      }),
    );
    expect(wrongUid.code).toBe(409);
    expect(wrongUid.message).toContain('Precondition failed: UID in precondition: nope');
    const wrongRv = await apiFailure(
      core.deleteNamespacedConfigMap({
        namespace: 'default',
        name: 'pre',
        body: { preconditions: { resourceVersion: '1' } },
      }),
    );
    expect(wrongRv.code).toBe(409);
    await core.deleteNamespacedConfigMap({
      namespace: 'default',
      name: 'pre',
      body: { preconditions: { uid: cm.metadata!.uid!, resourceVersion: cm.metadata!.resourceVersion! } },
    });
    expect((await apiFailure(core.readNamespacedConfigMap({ namespace: 'default', name: 'pre' }))).code).toBe(
      404,
    );
  });

  it('keeps an object with finalizers until they are removed', async () => {
    await core.createNamespacedConfigMap({
      namespace: 'default',
      body: { metadata: { name: 'fin', finalizers: ['example.com/hold'] } },
    });
    await core.deleteNamespacedConfigMap({ namespace: 'default', name: 'fin' });
    const held = await core.readNamespacedConfigMap({ namespace: 'default', name: 'fin' });
    expect(held.metadata?.deletionTimestamp).toBeInstanceOf(Date);
    const addMore = await apiFailure(
      core.patchNamespacedConfigMap(
        {
          namespace: 'default',
          name: 'fin',
          body: { metadata: { finalizers: ['example.com/hold', 'example.com/more'] } },
        },
        setHeaderOptions('Content-Type', PatchStrategy.MergePatch),
      ),
    );
    expect(addMore.code).toBe(422);
    await core.patchNamespacedConfigMap(
      { namespace: 'default', name: 'fin', body: { metadata: { finalizers: null } } },
      setHeaderOptions('Content-Type', PatchStrategy.MergePatch),
    );
    expect((await apiFailure(core.readNamespacedConfigMap({ namespace: 'default', name: 'fin' }))).code).toBe(
      404,
    );
  });

  it('garbage-collects dependents in the background and orphans on request', async () => {
    const owner = await core.createNamespacedConfigMap({
      namespace: 'default',
      body: { metadata: { name: 'owner' } },
    });
    const ref = {
      apiVersion: 'v1',
      kind: 'ConfigMap',
      name: 'owner',
      uid: owner.metadata!.uid!,
      controller: true,
    };
    await core.createNamespacedConfigMap({
      namespace: 'default',
      body: { metadata: { name: 'dependent', ownerReferences: [ref] } },
    });
    await core.deleteNamespacedConfigMap({ namespace: 'default', name: 'owner' });
    await eventually(
      async () =>
        (await apiFailure(core.readNamespacedConfigMap({ namespace: 'default', name: 'dependent' }))).code ===
        404,
    );

    const owner2 = await core.createNamespacedConfigMap({
      namespace: 'default',
      body: { metadata: { name: 'owner2' } },
    });
    const ref2 = { ...ref, name: 'owner2', uid: owner2.metadata!.uid! };
    await core.createNamespacedConfigMap({
      namespace: 'default',
      body: { metadata: { name: 'orphan', ownerReferences: [ref2] } },
    });
    await core.deleteNamespacedConfigMap({
      namespace: 'default',
      name: 'owner2',
      propagationPolicy: 'Orphan',
    });
    await eventually(
      async () =>
        (await apiFailure(core.readNamespacedConfigMap({ namespace: 'default', name: 'owner2' }))).code ===
        404,
    );
    const orphan = await core.readNamespacedConfigMap({ namespace: 'default', name: 'orphan' });
    expect(orphan.metadata?.ownerReferences ?? []).toEqual([]);
  });

  it('deletes foreground: dependents first, then the owner', async () => {
    const owner = await core.createNamespacedConfigMap({
      namespace: 'default',
      body: { metadata: { name: 'fg-owner' } },
    });
    const ref = {
      apiVersion: 'v1',
      kind: 'ConfigMap',
      name: 'fg-owner',
      uid: owner.metadata!.uid!,
      blockOwnerDeletion: true,
    };
    await core.createNamespacedConfigMap({
      namespace: 'default',
      body: { metadata: { name: 'fg-dep', ownerReferences: [ref], finalizers: ['example.com/hold'] } },
    });
    await core.deleteNamespacedConfigMap({
      namespace: 'default',
      name: 'fg-owner',
      propagationPolicy: 'Foreground',
    });
    const waiting = await core.readNamespacedConfigMap({ namespace: 'default', name: 'fg-owner' });
    expect(waiting.metadata?.finalizers).toContain('foregroundDeletion');
    await eventually(
      async () =>
        (await core.readNamespacedConfigMap({ namespace: 'default', name: 'fg-dep' })).metadata
          ?.deletionTimestamp,
    );
    await core.patchNamespacedConfigMap(
      { namespace: 'default', name: 'fg-dep', body: { metadata: { finalizers: null } } },
      setHeaderOptions('Content-Type', PatchStrategy.MergePatch),
    );
    await eventually(
      async () =>
        (await apiFailure(core.readNamespacedConfigMap({ namespace: 'default', name: 'fg-owner' }))).code ===
        404,
    );
  });

  it('empties and removes a deleted namespace', async () => {
    await core.createNamespace({ body: { metadata: { name: 'doomed' } } });
    await core.createNamespacedConfigMap({ namespace: 'doomed', body: { metadata: { name: 'x' } } });
    await core.deleteNamespace({ name: 'doomed' });
    const terminating = await apiFailure(
      core.createNamespacedConfigMap({ namespace: 'doomed', body: { metadata: { name: 'y' } } }),
    );
    expect([403, 404]).toContain(terminating.code);
    await eventually(async () => (await apiFailure(core.readNamespace({ name: 'doomed' }))).code === 404);
  });
});

describe('reads', () => {
  it('lists with label selectors, field selectors and pagination', async () => {
    await core.createNamespace({ body: { metadata: { name: 'reads' } } });
    for (let i = 0; i < 7; i++) {
      const body: V1ConfigMap = {
        metadata: { name: `item-${i}`, labels: { tier: i % 2 ? 'odd' : 'even', n: String(i) } },
      };
      await core.createNamespacedConfigMap({ namespace: 'reads', body });
    }
    const odd = await core.listNamespacedConfigMap({
      namespace: 'reads',
      labelSelector: 'tier in (odd),n!=3',
    });
    expect(odd.items.map((c) => c.metadata?.name)).toEqual(['item-1', 'item-5']);
    const byName = await core.listNamespacedConfigMap({
      namespace: 'reads',
      fieldSelector: 'metadata.name=item-4',
    });
    expect(byName.items.map((c) => c.metadata?.name)).toEqual(['item-4']);
    const bad = await apiFailure(
      core.listNamespacedConfigMap({ namespace: 'reads', fieldSelector: 'data.x=1' }),
    );
    expect(bad.code).toBe(400);
    const seen: string[] = [];
    let cont: string | undefined;
    do {
      const page = await core.listNamespacedConfigMap({ namespace: 'reads', limit: 3, _continue: cont });
      expect(page.items.length).toBeLessThanOrEqual(3);
      seen.push(...page.items.map((c) => c.metadata!.name!));
      cont = page.metadata?._continue;
    } while (cont);
    expect(seen).toEqual(['item-0', 'item-1', 'item-2', 'item-3', 'item-4', 'item-5', 'item-6']);
  });

  it('serves any stored object through the generic KubernetesObjectApi', async () => {
    const client = KubernetesObjectApi.makeApiClient(t.kc);
    const created = await client.create({
      apiVersion: 'v1',
      kind: 'Secret',
      metadata: { name: 's', namespace: 'default' },
      stringData: { k: 'v' },
    } as never);
    expect((created as { data?: Record<string, string> }).data?.k).toBe(Buffer.from('v').toString('base64'));
  });
});

describe('Leases', () => {
  it('validates Lease specs and MicroTime like kube-apiserver', async () => {
    const coordination = t.kc.makeApiClient(CoordinationV1Api);
    const bad = await apiFailure(
      coordination.createNamespacedLease({
        namespace: 'default',
        body: { metadata: { name: 'bad' }, spec: { leaseDurationSeconds: 0, leaseTransitions: -1 } },
      }),
    );
    expect(bad.code).toBe(422);
    expect(bad.causes.map((c) => c.field)).toEqual(['spec.leaseDurationSeconds', 'spec.leaseTransitions']);
    const millis = await apiFailure(
      coordination.createNamespacedLease({
        namespace: 'default',
        body: { metadata: { name: 'ms' }, spec: { renewTime: '2026-01-01T00:00:00.123Z' as never } },
      }),
    );
    expect(millis.code).toBe(400);
    expect(millis.message).toContain('cannot parse ".123Z" as ".000000"');
    const created = await coordination.createNamespacedLease({
      namespace: 'default',
      body: { metadata: { name: 'utc' }, spec: { renewTime: '2026-01-01T00:00:00.123456+02:00' as never } },
    });
    expect(String(created.spec?.renewTime)).toBe('2025-12-31T22:00:00.123456Z');
  });
});

describe('events.k8s.io/v1 Events', () => {
  it('validates new-style Events and keeps their identity immutable', async () => {
    const events = t.kc.makeApiClient(EventsV1Api);
    const base = {
      metadata: { name: 'ev' },
      eventTime: '2026-01-01T00:00:00.000000Z' as never,
      reportingController: 'example.com/ctl',
      reportingInstance: 'ctl-1',
      action: 'Check',
      reason: 'Checked',
      type: 'Normal',
      regarding: { kind: 'ConfigMap', namespace: 'default', name: 'x' },
    };
    const bad = await apiFailure(
      events.createNamespacedEvent({
        namespace: 'default',
        body: { ...base, reason: 'r'.repeat(129), series: { count: 1, lastObservedTime: base.eventTime } },
      }),
    );
    expect(bad.causes.map((c) => c.field)).toEqual(['reason', 'series.count']);
    await events.createNamespacedEvent({ namespace: 'default', body: base });
    const changed = await apiFailure(
      events.patchNamespacedEvent(
        { namespace: 'default', name: 'ev', body: { reason: 'Other' } },
        mergePatch,
      ),
    );
    expect(changed.code).toBe(422);
    expect(changed.causes[0]?.field).toBe('reason');
  });
});

describe('CronJobs', () => {
  it('rejects an invalid schedule with 422', async () => {
    const batch = t.kc.makeApiClient(BatchV1Api);
    const res = await apiFailure(
      batch.createNamespacedCronJob({
        namespace: 'default',
        body: {
          metadata: { name: 'bad-schedule' },
          spec: {
            schedule: 'every tuesday',
            jobTemplate: {
              spec: {
                template: { spec: { restartPolicy: 'Never', containers: [{ name: 'c', image: 'busybox' }] } },
              },
            },
          },
        },
      }),
    );
    expect(res.code).toBe(422);
    expect(res.causes[0]?.field).toBe('spec.schedule');
  });
});

describe('generateName', () => {
  it('draws another suffix when the generated name is taken, and gives up after 8 draws as kube does', async () => {
    // A suffix source that repeats itself: a, a, b, then only c.
    const draws = ['aaaaa', 'aaaaa', 'bbbbb'];
    const s = await startTestSandbox({ nameSuffix: () => draws.shift() ?? 'ccccc' });
    try {
      const api = s.kc.makeApiClient(CoreV1Api);
      const create = () =>
        api.createNamespacedConfigMap({ namespace: 'default', body: { metadata: { generateName: 'cm-' } } });
      expect((await create()).metadata?.name).toBe('cm-aaaaa');
      expect((await create()).metadata?.name).toBe('cm-bbbbb');
      expect((await create()).metadata?.name).toBe('cm-ccccc');
      const failure = await apiFailure(create());
      expect(failure).toMatchObject({ code: 409, reason: 'AlreadyExists' });
    } finally {
      await s.stop();
    }
  });
});
