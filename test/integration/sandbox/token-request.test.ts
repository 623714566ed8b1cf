// TokenRequest (`serviceaccounts/token`): how a client outside the cluster (kubectl create token, the
// end-to-end suite) gets a service account's credentials from a real API server.
import { CoreV1Api, KubeConfig, RbacAuthorizationV1Api } from '@kubernetes/client-node';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestSandbox, type TestSandbox } from '../../helpers/sandbox.ts';

let t: TestSandbox;
let core: CoreV1Api;

beforeAll(async () => {
  t = await startTestSandbox({ rbac: true });
  core = t.kc.makeApiClient(CoreV1Api);
  await core.createNamespace({ body: { metadata: { name: 'ops' } } });
  await core.createNamespacedServiceAccount({ namespace: 'ops', body: { metadata: { name: 'robot' } } });
});
afterAll(() => t?.stop());

/** A kubeconfig for the sandbox with `token` as its only credential. */
function withToken(token: string): KubeConfig {
  const admin = t.kc.getCurrentCluster()!;
  const kc = new KubeConfig();
  kc.loadFromOptions({
    clusters: [admin],
    users: [{ name: 'robot', token }],
    contexts: [{ name: 'robot', cluster: admin.name, user: 'robot' }],
    currentContext: 'robot',
  });
  return kc;
}

describe('serviceaccounts/token', () => {
  it('issues a token that authenticates as the service account, with its groups', async () => {
    const before = Date.now();
    const issued = await core.createNamespacedServiceAccountToken({
      namespace: 'ops',
      name: 'robot',
      body: { spec: { audiences: [], expirationSeconds: 600 } },
    });
    expect(issued.kind).toBe('TokenRequest');
    expect(issued.spec?.expirationSeconds).toBe(600);
    const expires = issued.status?.expirationTimestamp?.getTime() ?? 0;
    expect(expires).toBeGreaterThanOrEqual(Math.floor(before / 1000) * 1000 + 600_000);
    const kc = withToken(issued.status?.token ?? '');
    // With RBAC on and no binding, the service account may do nothing: a 403 that names it.
    await expect(kc.makeApiClient(CoreV1Api).listNamespacedPod({ namespace: 'ops' })).rejects.toMatchObject({
      code: 403,
      body: expect.stringContaining(
        'User \\"system:serviceaccount:ops:robot\\" cannot list resource \\"pods\\"',
      ),
    });
    // Bound to a Role, the same token may do what the Role allows.
    const rbac = t.kc.makeApiClient(RbacAuthorizationV1Api);
    await rbac.createNamespacedRole({
      namespace: 'ops',
      body: {
        metadata: { name: 'pod-reader' },
        rules: [{ apiGroups: [''], resources: ['pods'], verbs: ['list'] }],
      },
    });
    await rbac.createNamespacedRoleBinding({
      namespace: 'ops',
      body: {
        metadata: { name: 'robot-reads-pods' },
        roleRef: { apiGroup: 'rbac.authorization.k8s.io', kind: 'Role', name: 'pod-reader' },
        subjects: [{ kind: 'ServiceAccount', namespace: 'ops', name: 'robot' }],
      },
    });
    expect((await kc.makeApiClient(CoreV1Api).listNamespacedPod({ namespace: 'ops' })).items).toEqual([]);
  });

  it('refuses a missing service account and a lifetime under ten minutes', async () => {
    await expect(
      core.createNamespacedServiceAccountToken({
        namespace: 'ops',
        name: 'ghost',
        body: { spec: { audiences: [] } },
      }),
    ).rejects.toMatchObject({ code: 404 });
    await expect(
      core.createNamespacedServiceAccountToken({
        namespace: 'ops',
        name: 'robot',
        body: { spec: { audiences: [], expirationSeconds: 60 } },
      }),
    ).rejects.toMatchObject({ code: 400 });
  });
});
