// Authentication (bearer tokens) and optional RBAC authorization from the stored roles and bindings.
import { CoreV1Api, RbacAuthorizationV1Api } from '@kubernetes/client-node';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { apiOutcome } from '../../helpers/api.ts';
import { eventually } from '../../helpers/eventually.ts';
import {
  kubeConfigFrom,
  startTestSandbox,
  type TestSandbox,
  writeTempKubeconfig,
} from '../../helpers/sandbox.ts';

let t: TestSandbox;

beforeAll(async () => {
  t = await startTestSandbox({ rbac: true });
});
afterAll(async () => {
  await t.stop();
});

describe('authentication and RBAC', () => {
  it('rejects a request without a valid token with 401', async () => {
    const kc = kubeConfigFrom(t.sandbox.kubeconfig.replace(t.sandbox.users.admin.token, 'not-a-token'));
    expect((await apiOutcome(kc.makeApiClient(CoreV1Api).listNamespace())).code).toBe(401);
  });

  it('forbids a service account until a Role and RoleBinding allow it', async () => {
    const sa = t.sandbox.users.serviceAccount('default', 'operator');
    const core = kubeConfigFrom(sa.kubeconfig).makeApiClient(CoreV1Api);
    const denied = await apiOutcome(core.listNamespacedConfigMap({ namespace: 'default' }));
    expect(denied.code).toBe(403);
    expect(denied.message).toBe(
      'configmaps is forbidden: User "system:serviceaccount:default:operator" cannot list resource "configmaps" in API group "" in the namespace "default"',
    );
    const rbac = t.kc.makeApiClient(RbacAuthorizationV1Api);
    await rbac.createNamespacedRole({
      namespace: 'default',
      body: {
        metadata: { name: 'cm-reader' },
        rules: [{ apiGroups: [''], resources: ['configmaps'], verbs: ['get', 'list', 'watch'] }],
      },
    });
    await rbac.createNamespacedRoleBinding({
      namespace: 'default',
      body: {
        metadata: { name: 'cm-reader' },
        roleRef: { apiGroup: 'rbac.authorization.k8s.io', kind: 'Role', name: 'cm-reader' },
        subjects: [{ kind: 'ServiceAccount', name: 'operator', namespace: 'default' }],
      },
    });
    await eventually(
      async () => (await apiOutcome(core.listNamespacedConfigMap({ namespace: 'default' }))).code === 200,
    );
    expect((await apiOutcome(core.listNamespacedConfigMap({ namespace: 'kube-system' }))).code).toBe(403);
    expect(
      (
        await apiOutcome(
          core.createNamespacedConfigMap({ namespace: 'default', body: { metadata: { name: 'x' } } }),
        )
      ).code,
    ).toBe(403);
  });

  it('authorizes a list or watch with a metadata.name field selector against resourceNames', async () => {
    const sa = t.sandbox.users.serviceAccount('default', 'named');
    const core = kubeConfigFrom(sa.kubeconfig).makeApiClient(CoreV1Api);
    const rbac = t.kc.makeApiClient(RbacAuthorizationV1Api);
    await rbac.createNamespacedRole({
      namespace: 'default',
      body: {
        metadata: { name: 'one-cm' },
        rules: [
          {
            apiGroups: [''],
            resources: ['configmaps'],
            resourceNames: ['only-this'],
            verbs: ['get', 'list', 'watch'],
          },
        ],
      },
    });
    await rbac.createNamespacedRoleBinding({
      namespace: 'default',
      body: {
        metadata: { name: 'one-cm' },
        roleRef: { apiGroup: 'rbac.authorization.k8s.io', kind: 'Role', name: 'one-cm' },
        subjects: [{ kind: 'ServiceAccount', name: 'named', namespace: 'default' }],
      },
    });
    await eventually(
      async () =>
        (
          await apiOutcome(
            core.listNamespacedConfigMap({ namespace: 'default', fieldSelector: 'metadata.name=only-this' }),
          )
        ).code === 200,
    );
    expect((await apiOutcome(core.listNamespacedConfigMap({ namespace: 'default' }))).code).toBe(403);
    expect(
      (
        await apiOutcome(
          core.listNamespacedConfigMap({ namespace: 'default', fieldSelector: 'metadata.name=other' }),
        )
      ).code,
    ).toBe(403);
  });

  it('lets an authenticated user read discovery but not resources', async () => {
    const user = t.sandbox.users.add('alice');
    const path = await writeTempKubeconfig(user.kubeconfig);
    const version = await t.kubectl(['version', '-o', 'json'], { kubeconfig: path });
    expect(JSON.parse(version.stdout).serverVersion.minor).toBe('32');
    const denied = await t.kubectl(['get', 'namespaces'], { kubeconfig: path });
    expect(denied.stderr.trim()).toBe(
      'Error from server (Forbidden): namespaces is forbidden: User "alice" cannot list resource "namespaces" in API group "" at the cluster scope',
    );
  });
});
