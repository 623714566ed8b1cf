// The control plane every integration test stands on: real kube-apiserver, controllers, scheduler and
// KWOK Nodes, real kubectl, users and service accounts, Services routed to local servers, and the fault
// proxy. Each case is something the old in-process stand-in got wrong or could not do.
import { createServer as createHttpServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import {
  AdmissionregistrationV1Api,
  AppsV1Api,
  CoreV1Api,
  DiscoveryV1Api,
  EventsV1Api,
  RbacAuthorizationV1Api,
  V1MicroTime,
  Watch,
} from '@kubernetes/client-node';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { DeploymentBuilder } from '../../builders/deployment.ts';
import { PodBuilder } from '../../builders/pod.ts';
import { apiFailure, jsonPatch } from '../../helpers/api.ts';
import { ApiProxy } from '../../helpers/api-proxy.ts';
import { TestCluster, uniqueName } from '../../helpers/cluster.ts';
import { eventually } from '../../helpers/eventually.ts';
import { startWebhookServer } from '../../helpers/webhook-server.ts';

let t: TestCluster;
let ns: string;

beforeAll(async () => {
  t = await TestCluster.shared();
  ns = await t.namespace('cp');
});

afterAll(async () => {
  await t.stop();
});

const PAUSE = { name: 'app', image: 'registry.k8s.io/pause:3.10' };

describe('the real control plane', () => {
  it('serves kubectl generators, which send protobuf', async () => {
    const created = await t.kubectl(['-n', ns, 'create', 'configmap', 'x', '--from-literal=a=b']);
    expect(created.stderr).not.toMatch(/error/i);
    expect(created.code).toBe(0);
    const got = await t.kubectl(['-n', ns, 'get', 'configmap', 'x', '-o', 'jsonpath={.data.a}']);
    expect(got.stdout).toBe('b');
  });

  it('shows events.k8s.io Events in kubectl describe', async () => {
    const events = t.kc.makeApiClient(EventsV1Api);
    const cm = await t.core.createNamespacedConfigMap({
      namespace: ns,
      body: { metadata: { name: 'described' } },
    });
    await events.createNamespacedEvent({
      namespace: ns,
      body: {
        metadata: { generateName: 'described-' },
        eventTime: new V1MicroTime(Date.now()),
        reportingController: 'berth.skaphos.io/test',
        reportingInstance: 'test',
        action: 'Testing',
        reason: 'Observed',
        note: 'seen through core/v1',
        type: 'Normal',
        // kubectl describe finds Events by the object's UID.
        regarding: {
          apiVersion: 'v1',
          kind: 'ConfigMap',
          name: 'described',
          namespace: ns,
          uid: cm.metadata?.uid,
        },
      },
    });
    await eventually(async () => {
      const out = await t.kubectl(['-n', ns, 'describe', 'configmap', 'described']);
      return out.stdout.includes('seen through core/v1');
    });
  });

  it('runs a Deployment to Ready Pods on KWOK Nodes', async () => {
    const apps = t.kc.makeApiClient(AppsV1Api);
    await apps.createNamespacedDeployment({
      namespace: ns,
      body: new DeploymentBuilder('web').replicas(2).containers(PAUSE).obj(),
    });
    await eventually(
      async () =>
        (await apps.readNamespacedDeployment({ namespace: ns, name: 'web' })).status?.readyReplicas === 2,
      {
        timeoutMs: 30_000,
      },
    );
    const pods = await t.core.listNamespacedPod({ namespace: ns, labelSelector: 'app=web' });
    for (const p of pods.items) expect(t.nodeNames).toContain(p.spec?.nodeName);
  });

  it('keeps a gated Pod unscheduled until its gate is removed', async () => {
    await t.core.createNamespacedPod({
      namespace: ns,
      body: new PodBuilder('gated').containers(PAUSE).gates('example.com/hold').obj(),
    });
    await eventually(async () => {
      const p = await t.core.readNamespacedPod({ namespace: ns, name: 'gated' });
      return p.status?.conditions?.some((c) => c.type === 'PodScheduled' && c.reason === 'SchedulingGated');
    });
    expect((await t.core.readNamespacedPod({ namespace: ns, name: 'gated' })).spec?.nodeName).toBeUndefined();
    await t.core.patchNamespacedPod(
      { namespace: ns, name: 'gated', body: [{ op: 'remove', path: '/spec/schedulingGates' }] },
      jsonPatch,
    );
    await eventually(
      async () =>
        (await t.core.readNamespacedPod({ namespace: ns, name: 'gated' })).status?.phase === 'Running',
      { timeoutMs: 30_000 },
    );
  });

  it('authenticates client-certificate users and authorizes them with RBAC', async () => {
    const alice = await t.user(uniqueName('alice'), ['test-readers']);
    const api = alice.kc.makeApiClient(CoreV1Api);
    const denied = await apiFailure(api.listNamespacedConfigMap({ namespace: ns }));
    expect(denied.code).toBe(403);
    expect(denied.message).toContain(alice.username);
    const rbac = t.kc.makeApiClient(RbacAuthorizationV1Api);
    await rbac.createNamespacedRoleBinding({
      namespace: ns,
      body: {
        metadata: { name: 'readers' },
        roleRef: { apiGroup: 'rbac.authorization.k8s.io', kind: 'ClusterRole', name: 'view' },
        subjects: [{ apiGroup: 'rbac.authorization.k8s.io', kind: 'Group', name: 'test-readers' }],
      },
    });
    await eventually(() => api.listNamespacedConfigMap({ namespace: ns }));
  });

  it('issues service-account tokens through the TokenRequest API', async () => {
    const sa = await t.serviceAccount(ns, 'robot');
    expect(sa.username).toBe(`system:serviceaccount:${ns}:robot`);
    const who = await t.kubectl(['auth', 'whoami', '-o', 'jsonpath={.status.userInfo.username}'], {
      kubeconfig: await t.writeKubeconfig(sa.kubeconfig),
    });
    expect(who.stdout).toBe(sa.username);
  });

  // Readiness decides where the API server dials; a connection it keeps open stays in use (as with
  // kube-proxy), so the not-ready server closes its connections as a stopping replica would.
  it('routes a webhook Service to a local server, dialled only while its readiness answers 200', async () => {
    let ready = true;
    const readiness = createHttpServer((_, res) => {
      res.writeHead(ready ? 200 : 503);
      res.end();
    });
    await new Promise<void>((r) => readiness.listen(0, '127.0.0.1', r));
    const service = uniqueName('svc');
    const webhook = await startWebhookServer(
      `${service}.${ns}.svc`,
      (req) => ({
        allowed: req.object?.metadata?.name !== 'refused',
        status: { message: 'refused by the test webhook' },
      }),
      '0.0.0.0',
    );
    const name = uniqueName('validate.test.berth');
    const admission = t.kc.makeApiClient(AdmissionregistrationV1Api);
    try {
      await t.routeService(ns, service, [
        {
          port: webhook.port,
          readinessUrl: `http://127.0.0.1:${(readiness.address() as AddressInfo).port}/`,
        },
      ]);
      await admission.createValidatingWebhookConfiguration({
        body: {
          metadata: { name },
          webhooks: [
            {
              name: 'cm.test.berth.skaphos.io',
              admissionReviewVersions: ['v1'],
              sideEffects: 'None',
              failurePolicy: 'Fail',
              timeoutSeconds: 5,
              clientConfig: {
                service: { namespace: ns, name: service, port: 443 },
                caBundle: webhook.caBundle,
              },
              namespaceSelector: { matchLabels: { 'kubernetes.io/metadata.name': ns } },
              rules: [
                { apiGroups: [''], apiVersions: ['v1'], operations: ['CREATE'], resources: ['configmaps'] },
              ],
            },
          ],
        },
      });
      await eventually(async () => {
        const denied = await apiFailure(
          t.core.createNamespacedConfigMap({ namespace: ns, body: { metadata: { name: 'refused' } } }),
        );
        return denied.message.includes('refused by the test webhook');
      });
      ready = false;
      await eventually(async () => {
        const slices = await t.kc
          .makeApiClient(DiscoveryV1Api)
          .listNamespacedEndpointSlice({ namespace: ns });
        return slices.items.some((s) => s.endpoints?.[0]?.conditions?.ready === false);
      });
      await webhook.stop();
      await eventually(async () => {
        const failed = await apiFailure(
          t.core.createNamespacedConfigMap({ namespace: ns, body: { metadata: { name: 'refused' } } }),
        );
        return failed.message.includes('no endpoints available');
      });
    } finally {
      await admission.deleteValidatingWebhookConfiguration({ name });
      await webhook.stop();
      readiness.close();
    }
  });
});

describe('the fault proxy', () => {
  let proxy: ApiProxy;

  beforeAll(async () => {
    proxy = await ApiProxy.start(t);
  });

  afterAll(async () => {
    await proxy.stop();
  });

  it('forwards a service account as itself and a certificate user by impersonation', async () => {
    const sa = await t.serviceAccount(ns, 'proxied');
    const bob = await t.user(uniqueName('bob'), ['test-proxied']);
    for (const user of [sa, bob]) {
      const kubeconfig = await t.writeKubeconfig(proxy.kubeconfigFor(user.kubeconfig));
      const who = await t.kubectl(['auth', 'whoami', '-o', 'json'], { kubeconfig });
      const info = (
        JSON.parse(who.stdout) as { status: { userInfo: { username: string; groups: string[] } } }
      ).status.userInfo;
      expect(info.username).toBe(user.username);
      if (user === bob) expect(info.groups).toContain('test-proxied');
    }
  });

  it('fails matching requests of one user, as many times as asked', async () => {
    const sa = await t.serviceAccount(ns, 'faulty');
    const core = t.kubeConfigFor(proxy.kubeconfigFor(sa.kubeconfig)).makeApiClient(CoreV1Api);
    const admin = t.kubeConfigFor(proxy.kubeconfigFor(t.kubeconfig)).makeApiClient(CoreV1Api);
    const fault = proxy.inject({ user: sa.username, resource: 'configmaps', status: 503, times: 2 });
    expect((await apiFailure(core.listNamespacedConfigMap({ namespace: ns }))).code).toBe(503);
    await admin.listNamespacedConfigMap({ namespace: ns });
    const second = await apiFailure(core.readNamespacedConfigMap({ namespace: ns, name: 'x' }));
    expect(second).toMatchObject({ code: 503, reason: 'ServiceUnavailable' });
    // The third is forwarded: 403, the account has no read rights.
    expect((await apiFailure(core.listNamespacedConfigMap({ namespace: ns }))).code).toBe(403);
    expect(fault.hits()).toBe(2);
    expect(proxy.records.filter((r) => r.user === sa.username && r.status === 403)).toHaveLength(1);
  });

  it('drops and expires watches: a watch from before the expiry gets 410 Expired', async () => {
    const admin = t.kubeConfigFor(proxy.kubeconfigFor(t.kubeconfig));
    const list = await t.core.listNamespacedConfigMap({ namespace: ns });
    const rv = list.metadata?.resourceVersion ?? '';
    const events: string[] = [];
    const watch = new Watch(admin);
    let ended = false;
    await watch.watch(
      `/api/v1/namespaces/${ns}/configmaps`,
      { resourceVersion: rv },
      (type) => events.push(type),
      () => {
        ended = true;
      },
    );
    await eventually(() => proxy.activeWatches({ resource: 'configmaps', namespace: ns }) === 1);
    expect(proxy.dropWatches({ resource: 'configmaps', namespace: ns })).toBe(1);
    await eventually(() => ended);
    await t.core.createNamespacedConfigMap({
      namespace: ns,
      body: { metadata: { name: uniqueName('after') } },
    });
    await proxy.expireHistory({ resource: 'configmaps' });
    const expired: Array<{ type: string; code?: number }> = [];
    await watch.watch(
      `/api/v1/namespaces/${ns}/configmaps`,
      { resourceVersion: rv },
      (type, obj: { code?: number }) => expired.push({ type, code: obj.code }),
      () => {},
    );
    await eventually(() => expired.some((e) => e.type === 'ERROR' && e.code === 410));
    proxy.clear();
  });
});
