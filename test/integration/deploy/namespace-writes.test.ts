// The installs' ValidatingAdmissionPolicy berth-operator-namespace-writes (src/berth/rbac.ts
// namespaceWritesPolicy) on the real kube-apiserver: the operator's namespace `patch` right adds the opt-in
// scope's label and does nothing else; other users are not affected. A control plane of its own (the policy
// is cluster-wide).
import { AdmissionregistrationV1Api, CoreV1Api, RbacAuthorizationV1Api } from '@kubernetes/client-node';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { SCOPE_LABEL } from '../../../src/berth/api.ts';
import { namespaceWritesPolicy } from '../../../src/berth/rbac.ts';
import { mergePatch } from '../../helpers/api.ts';
import { TestCluster, type TestUser } from '../../helpers/cluster.ts';
import { eventually } from '../../helpers/eventually.ts';
import { rejection } from '../../helpers/rejection.ts';

const OPERATOR = 'berth-operator-under-test';
const DENIED =
  'the operator may only add the label berth.skaphos.io/workload-admission=enabled to a namespace without it, or remove it when it says leaving';

let t: TestCluster;
let operator: TestUser;
let asOperator: CoreV1Api;

beforeAll(async () => {
  t = await TestCluster.own();
  operator = await t.user(OPERATOR);
  const rbac = t.kc.makeApiClient(RbacAuthorizationV1Api);
  await rbac.createClusterRole({
    body: {
      metadata: { name: OPERATOR },
      rules: [
        {
          apiGroups: [''],
          resources: ['namespaces', 'namespaces/status'],
          verbs: ['get', 'patch', 'update'],
        },
      ],
    },
  });
  await rbac.createClusterRoleBinding({
    body: {
      metadata: { name: OPERATOR },
      roleRef: { apiGroup: 'rbac.authorization.k8s.io', kind: 'ClusterRole', name: OPERATOR },
      subjects: [{ apiGroup: 'rbac.authorization.k8s.io', kind: 'User', name: OPERATOR }],
    },
  });
  const admission = t.kc.makeApiClient(AdmissionregistrationV1Api);
  const [policy, binding] = namespaceWritesPolicy(OPERATOR);
  await admission.createValidatingAdmissionPolicy({ body: policy });
  await admission.createValidatingAdmissionPolicyBinding({ body: binding });
  asOperator = operator.kc.makeApiClient(CoreV1Api);
}, 120_000);

afterAll(async () => {
  await t?.stop();
});

const patch = (client: CoreV1Api, name: string, body: object) =>
  client.patchNamespace({ name, body }, mergePatch);

let probes = 0;
/** Until kube-apiserver enforces the policy (its informer sees it a moment after it is created). */
const enforced = (ns: string) =>
  eventually(async () =>
    (await rejection(patch(asOperator, ns, { metadata: { labels: { probe: String(++probes) } } }))).includes(
      DENIED,
    ),
  );

describe('the operator’s namespace writes', () => {
  it('may add the scope label, and nothing else', async () => {
    const ns = await t.namespace('apps', { team: 'a', 'pod-security.kubernetes.io/enforce': 'restricted' });
    await enforced(ns);
    const added = await patch(asOperator, ns, { metadata: { labels: { [SCOPE_LABEL]: 'enabled' } } });
    expect(added.metadata?.labels?.[SCOPE_LABEL]).toBe('enabled');
    // Unchanged, the patch is a no-op and passes.
    await patch(asOperator, ns, { metadata: { labels: { [SCOPE_LABEL]: 'enabled' } } });
    for (const body of [
      // Removing it while it says enabled, or changing it.
      { metadata: { labels: { [SCOPE_LABEL]: null } } },
      { metadata: { labels: { [SCOPE_LABEL]: 'off' } } },
      { metadata: { labels: { [SCOPE_LABEL]: 'leaving' } } },
      { metadata: { labels: { 'pod-security.kubernetes.io/enforce': null } } },
      { metadata: { labels: { 'pod-security.kubernetes.io/enforce': 'privileged' } } },
      { metadata: { labels: { extra: 'x' } } },
      { metadata: { annotations: { note: 'x' } } },
      { metadata: { finalizers: ['example.com/hold'] } },
    ])
      expect(await rejection(patch(asOperator, ns, body)), JSON.stringify(body)).toContain(DENIED);
    // (spec.finalizers can only be written through the finalize subresource, which the status case covers.)
    const current = await t.core.readNamespace({ name: ns });
    const viaStatus = asOperator.replaceNamespaceStatus({ name: ns, body: current });
    expect(await rejection(viaStatus)).toContain(DENIED);
    expect((await t.core.readNamespace({ name: ns })).metadata?.labels).toMatchObject({
      team: 'a',
      'pod-security.kubernetes.io/enforce': 'restricted',
      [SCOPE_LABEL]: 'enabled',
    });
  });

  it('may remove the scope label when it says leaving, and not turn it back', async () => {
    const ns = await t.namespace('leaving', { [SCOPE_LABEL]: 'leaving', team: 'a' });
    await enforced(ns);
    expect(
      await rejection(patch(asOperator, ns, { metadata: { labels: { [SCOPE_LABEL]: 'enabled' } } })),
    ).toContain(DENIED);
    expect(
      await rejection(patch(asOperator, ns, { metadata: { labels: { [SCOPE_LABEL]: null, team: null } } })),
    ).toContain(DENIED);
    const removed = await patch(asOperator, ns, { metadata: { labels: { [SCOPE_LABEL]: null } } });
    expect(removed.metadata?.labels?.[SCOPE_LABEL]).toBeUndefined();
    expect(removed.metadata?.labels?.team).toBe('a');
  });

  it('do not bind anyone else', async () => {
    const ns = await t.namespace('others');
    await enforced(ns);
    const out = await patch(t.core, ns, { metadata: { labels: { x: 'y' }, annotations: { a: 'b' } } });
    expect(out.metadata?.labels?.x).toBe('y');
  });
});
