// Pod rules of kube-apiserver that the operator relies on: scheduling gates, binding, immutability.
import { CoreV1Api, type V1Pod } from '@kubernetes/client-node';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { apiFailure, jsonPatch, mergePatch } from '../../helpers/api.ts';
import { startTestSandbox, type TestSandbox } from '../../helpers/sandbox.ts';

let t: TestSandbox;
let core: CoreV1Api;

beforeAll(async () => {
  t = await startTestSandbox();
  core = t.kc.makeApiClient(CoreV1Api);
});
afterAll(async () => {
  await t.stop();
});

const pod = (name: string, extra: Partial<V1Pod['spec']> = {}): V1Pod => ({
  metadata: { name },
  spec: { containers: [{ name: 'app', image: 'busybox:1.36' }], ...extra },
});

describe('scheduling gates', () => {
  it('creates a gated Pod as Pending with PodScheduled=False/SchedulingGated', async () => {
    const created = await core.createNamespacedPod({
      namespace: 'default',
      body: pod('gated', { schedulingGates: [{ name: 'example.com/a' }, { name: 'example.com/b' }] }),
    });
    expect(created.status?.phase).toBe('Pending');
    const cond = created.status?.conditions?.find((c) => c.type === 'PodScheduled');
    expect(cond?.status).toBe('False');
    expect(cond?.reason).toBe('SchedulingGated');
  });

  it('allows removing a gate but never adding one after creation', async () => {
    await core.createNamespacedPod({
      namespace: 'default',
      body: pod('gates', { schedulingGates: [{ name: 'example.com/a' }] }),
    });
    const add = await apiFailure(
      core.patchNamespacedPod(
        {
          namespace: 'default',
          name: 'gates',
          body: [{ op: 'add', path: '/spec/schedulingGates/-', value: { name: 'example.com/new' } }],
        },
        jsonPatch,
      ),
    );
    expect(add.code).toBe(422);
    expect(add.message).toContain(
      "spec.schedulingGates: Forbidden: only deletion is allowed, but found new scheduling gate 'example.com/new'",
    );
    const removed = await core.patchNamespacedPod(
      { namespace: 'default', name: 'gates', body: [{ op: 'remove', path: '/spec/schedulingGates/0' }] },
      jsonPatch,
    );
    expect(removed.spec?.schedulingGates ?? []).toEqual([]);
  });

  it('refuses nodeName together with scheduling gates at creation', async () => {
    const res = await apiFailure(
      core.createNamespacedPod({
        namespace: 'default',
        body: pod('prebound', { nodeName: 'n1', schedulingGates: [{ name: 'example.com/a' }] }),
      }),
    );
    expect(res.code).toBe(422);
    expect(res.message).toContain(
      'spec.nodeName: Forbidden: cannot be set until all schedulingGates have been cleared',
    );
  });
});

describe('binding and immutability', () => {
  it('binds through the binding subresource once, and not while gated', async () => {
    await core.createNamespacedPod({ namespace: 'default', body: pod('bindme') });
    await core.createNamespacedPodBinding({
      namespace: 'default',
      name: 'bindme',
      body: { metadata: { name: 'bindme' }, target: { kind: 'Node', name: 'node-1' } },
    });
    const bound = await core.readNamespacedPod({ namespace: 'default', name: 'bindme' });
    expect(bound.spec?.nodeName).toBe('node-1');
    const again = await apiFailure(
      core.createNamespacedPodBinding({
        namespace: 'default',
        name: 'bindme',
        body: { metadata: { name: 'bindme' }, target: { kind: 'Node', name: 'node-2' } },
      }),
    );
    expect(again.code).toBe(409);
    await core.createNamespacedPod({
      namespace: 'default',
      body: pod('gated-bind', { schedulingGates: [{ name: 'example.com/a' }] }),
    });
    const gated = await apiFailure(
      core.createNamespacedPodBinding({
        namespace: 'default',
        name: 'gated-bind',
        body: { metadata: { name: 'gated-bind' }, target: { kind: 'Node', name: 'node-1' } },
      }),
    );
    expect(gated.message).toContain('non-empty .spec.schedulingGates');
  });

  it('forbids changing immutable Pod spec fields but allows the image', async () => {
    await core.createNamespacedPod({ namespace: 'default', body: pod('immut') });
    const node = await apiFailure(
      core.patchNamespacedPod(
        { namespace: 'default', name: 'immut', body: { spec: { nodeName: 'n9' } } },
        mergePatch,
      ),
    );
    expect(node.code).toBe(422);
    expect(node.message).toContain('spec: Forbidden: pod updates may not change fields other than');
    const image = await core.patchNamespacedPod(
      {
        namespace: 'default',
        name: 'immut',
        body: [{ op: 'replace', path: '/spec/containers/0/image', value: 'busybox:1.37' }],
      },
      jsonPatch,
    );
    expect(image.spec?.containers[0]?.image).toBe('busybox:1.37');
  });

  it('keeps a bound Pod terminating until a zero-grace delete, like a kubelet would', async () => {
    await core.createNamespacedPod({ namespace: 'default', body: pod('graceful', { nodeName: 'node-1' }) });
    await core.deleteNamespacedPod({ namespace: 'default', name: 'graceful' });
    const terminating = await core.readNamespacedPod({ namespace: 'default', name: 'graceful' });
    expect(terminating.metadata?.deletionTimestamp).toBeInstanceOf(Date);
    expect(terminating.metadata?.deletionGracePeriodSeconds).toBe(30);
    await core.deleteNamespacedPod({ namespace: 'default', name: 'graceful', gracePeriodSeconds: 0 });
    expect((await apiFailure(core.readNamespacedPod({ namespace: 'default', name: 'graceful' }))).code).toBe(
      404,
    );
  });

  it('lists Pods by spec.nodeName and status.phase', async () => {
    await core.createNamespace({ body: { metadata: { name: 'fields' } } });
    await core.createNamespacedPod({ namespace: 'fields', body: pod('on-a', { nodeName: 'a' }) });
    await core.createNamespacedPod({ namespace: 'fields', body: pod('on-b', { nodeName: 'b' }) });
    const onA = await core.listNamespacedPod({
      namespace: 'fields',
      fieldSelector: 'spec.nodeName=a,status.phase=Pending',
    });
    expect(onA.items.map((p) => p.metadata?.name)).toEqual(['on-a']);
  });
});
