import {
  AdmissionregistrationV1Api,
  type ApiException,
  AppsV1Api,
  CoreV1Api,
  CustomObjectsApi,
  type V1Deployment,
  type V1Pod,
} from '@kubernetes/client-node';
import { Registry } from 'prom-client';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { installBerthLeaseCrd } from '../../../src/berth/crd.ts';
import { KubeTransport } from '../../../src/kube/client.ts';
import {
  mutatingWebhookConfiguration,
  readWebhookConfigurations,
  validatingWebhookConfiguration,
  verifyWebhookConfigurations,
} from '../../../webhooks/configurations.ts';
import { AdmissionServer } from '../../../webhooks/server.ts';
import { type KubeWorkloadAdmission, kubeWorkloadAdmission } from '../../../webhooks/workload-admission.ts';
import { SwappableCertificates, testPki } from '../../fixtures/webhooks/certs.ts';
import { eventually } from '../../helpers/eventually.ts';
import {
  kubectlAvailable,
  startTestSandbox,
  type TestSandbox,
  writeTempKubeconfig,
} from '../../helpers/sandbox.ts';

const OPERATOR_NS = 'berth-system';
const SERVICE = 'berth-operator-webhook';
const OPERATOR_SA = 'berth-operator';
const OPERATOR_USER = `system:serviceaccount:${OPERATOR_NS}:${OPERATOR_SA}`;
const NS = 'shop';
const GROUP = 'berth.skaphos.io';
const GATE = 'berth.skaphos.io/lease-held';
const MANAGED_LEASE = 'berth.skaphos.io/managed-lease';
const MANAGED_UID = 'berth.skaphos.io/managed-lease-uid';
const VALIDATE = 'admission webhook "validate-workloads.berth.skaphos.io" denied the request: ';

let t: TestSandbox;
let server: AdmissionServer;
let admission: KubeWorkloadAdmission;
let transport: KubeTransport;
let registry: Registry;
let core: CoreV1Api;
let apps: AppsV1Api;
let custom: CustomObjectsApi;
let hasKubectl = false;

const params = (caBundle: string) => ({ namespace: OPERATOR_NS, serviceName: SERVICE, caBundle });

async function installCrd(): Promise<void> {
  await installBerthLeaseCrd(t.kc);
  await eventually(() =>
    custom.listNamespacedCustomObject({
      group: GROUP,
      version: 'v1alpha1',
      namespace: 'default',
      plural: 'berthleases',
    }),
  );
}

function leaseBody(name: string, target: string): Record<string, unknown> {
  return {
    apiVersion: `${GROUP}/v1alpha1`,
    kind: 'BerthLease',
    metadata: { name, namespace: NS },
    spec: {
      leaseName: name,
      holderIdentity: 'cluster-east',
      ttlSeconds: 30,
      heartbeatIntervalSeconds: 10,
      semantics: 'at-most-once',
      target: { apiVersion: 'apps/v1', kind: 'Deployment', name: target },
      acquireAction: { scale: { replicas: 1 } },
      releaseAction: { scale: { replicas: 0 } },
    },
  };
}

type Lease = {
  metadata: { uid: string; resourceVersion: string };
  status?: { workload?: Record<string, unknown> };
};
const getLease = async (name: string): Promise<Lease> =>
  (await custom.getNamespacedCustomObject({
    group: GROUP,
    version: 'v1alpha1',
    namespace: NS,
    plural: 'berthleases',
    name,
  })) as Lease;

const deploymentBody = (name: string): V1Deployment => ({
  metadata: { name, namespace: NS },
  spec: {
    replicas: 0,
    selector: { matchLabels: { app: name } },
    template: {
      metadata: { labels: { app: name } },
      spec: { containers: [{ name: 'app', image: 'registry.example.com/app:1' }] },
    },
  },
});

const errorMessage = (err: unknown): string => {
  const body = (err as ApiException<string>).body;
  return typeof body === 'string' ? (JSON.parse(body) as { message: string }).message : String(err);
};

beforeAll(async () => {
  t = await startTestSandbox();
  core = t.kc.makeApiClient(CoreV1Api);
  apps = t.kc.makeApiClient(AppsV1Api);
  custom = t.kc.makeApiClient(CustomObjectsApi);
  hasKubectl = await kubectlAvailable();
  await core.createNamespace({ body: { metadata: { name: OPERATOR_NS } } });
  await core.createNamespace({ body: { metadata: { name: NS } } });
  await installCrd();

  const pki = await testPki([`${SERVICE}.${OPERATOR_NS}.svc`]);
  transport = new KubeTransport(t.kc);
  registry = new Registry();
  admission = kubeWorkloadAdmission({ kc: t.kc, operatorUser: OPERATOR_USER, registry });
  server = new AdmissionServer({
    port: 0,
    host: '127.0.0.1',
    certificates: new SwappableCertificates(pki.pair),
    handlers: admission.handlers,
    registry,
  });
  await server.start();
  t.sandbox.services.map(OPERATOR_NS, SERVICE, { host: '127.0.0.1', port: server.port });
  const configs = t.kc.makeApiClient(AdmissionregistrationV1Api);
  await configs.createMutatingWebhookConfiguration({
    body: mutatingWebhookConfiguration(params(pki.caBundle)),
  });
  await configs.createValidatingWebhookConfiguration({
    body: validatingWebhookConfiguration(params(pki.caBundle)),
  });
}, 60_000);

afterAll(async () => {
  await server?.close();
  await admission?.close();
  await transport?.close();
  await t?.stop();
});

describe('start-up check against the live configurations', () => {
  it('passes for what the builders made and names an unsafe edit', async () => {
    const live = await readWebhookConfigurations(transport, 'berth-operator-injection-workloads');
    expect(verifyWebhookConfigurations(live, { namespace: OPERATOR_NS })).toEqual([]);
    // Reading as if the operator ran in another namespace: that namespace is not excluded.
    expect(verifyWebhookConfigurations(live, { namespace: 'elsewhere' })).toContain(
      'MutatingWebhookConfiguration "berth-operator-injection-workloads" webhook "mutate-workloads.berth.skaphos.io" does not exclude the operator namespace "elsewhere" (namespaceSelector must exclude kubernetes.io/metadata.name NotIn [elsewhere, kube-system])',
    );
  });
});

describe('a BerthLease, then the Deployment it targets', () => {
  let deployment: V1Deployment;

  beforeAll(async () => {
    await custom.createNamespacedCustomObject({
      group: GROUP,
      version: 'v1alpha1',
      namespace: NS,
      plural: 'berthleases',
      body: leaseBody('web', 'web'),
    });
    deployment = await apps.createNamespacedDeployment({ namespace: NS, body: deploymentBody('web') });
  });

  it('stamps the Deployment and its Pod template and gates the template', async () => {
    const lease = await getLease('web');
    const binding = { [MANAGED_LEASE]: 'web', [MANAGED_UID]: lease.metadata.uid };
    expect(deployment.metadata?.annotations).toMatchObject(binding);
    expect(deployment.metadata?.labels).toMatchObject({ [MANAGED_UID]: lease.metadata.uid });
    expect(deployment.spec?.template.metadata?.annotations).toMatchObject(binding);
    expect(deployment.spec?.template.metadata?.labels).toMatchObject({
      app: 'web',
      [MANAGED_UID]: lease.metadata.uid,
    });
    expect(deployment.spec?.template.spec?.schedulingGates).toEqual([{ name: GATE }]);
  });

  it('records the API-assigned UID of the target in the lease status', async () => {
    const lease = await getLease('web');
    expect(lease.status?.workload).toEqual({ targetUID: deployment.metadata?.uid });
  });

  it('denies removing the gate from the Deployment template', async () => {
    const patch = [{ op: 'remove', path: '/spec/template/spec/schedulingGates' }];
    await expect(
      apps.patchNamespacedDeployment({ namespace: NS, name: 'web', body: patch }),
    ).rejects.toSatisfy(
      (err) => errorMessage(err) === `${VALIDATE}managed Pod must be created with the Berth scheduling gate`,
    );
  });

  it('denies scaling up while the lease does not authorize activation', async () => {
    const patch = [{ op: 'replace', path: '/spec/replicas', value: 3 }];
    await expect(
      apps.patchNamespacedDeployment({ namespace: NS, name: 'web', body: patch }),
    ).rejects.toSatisfy(
      (err) => errorMessage(err) === `${VALIDATE}lease does not authorize workload activation`,
    );
  });

  it('a dry-run CREATE of another target is stamped but records nothing', async () => {
    await custom.createNamespacedCustomObject({
      group: GROUP,
      version: 'v1alpha1',
      namespace: NS,
      plural: 'berthleases',
      body: leaseBody('api', 'api'),
    });
    const dry = await apps.createNamespacedDeployment({
      namespace: NS,
      body: deploymentBody('api'),
      dryRun: 'All',
    });
    expect(dry.spec?.template.spec?.schedulingGates).toEqual([{ name: GATE }]);
    expect((await getLease('api')).status?.workload).toBeUndefined();
  });
});

describe('managed Pods', () => {
  let pod: V1Pod;
  let podTemplate: V1Pod & { metadata: NonNullable<V1Pod['metadata']> };
  let alice: string;
  let operator: string;

  beforeAll(async () => {
    const dep = await apps.readNamespacedDeployment({ namespace: NS, name: 'web' });
    // No Deployment controller runs in the sandbox: create the ReplicaSet and Pod as it would.
    const rs = await apps.createNamespacedReplicaSet({
      namespace: NS,
      body: {
        metadata: {
          name: 'web-5d9c',
          namespace: NS,
          labels: { app: 'web' },
          ownerReferences: [
            {
              apiVersion: 'apps/v1',
              kind: 'Deployment',
              name: 'web',
              uid: dep.metadata!.uid!,
              controller: true,
              blockOwnerDeletion: true,
            },
          ],
        },
        spec: {
          replicas: 0,
          selector: { matchLabels: { app: 'web' } },
          template: structuredClone(dep.spec!.template),
        },
      },
    });
    podTemplate = {
      metadata: {
        name: 'web-5d9c-x1',
        namespace: NS,
        labels: { app: 'web' },
        ownerReferences: [
          {
            apiVersion: 'apps/v1',
            kind: 'ReplicaSet',
            name: 'web-5d9c',
            uid: rs.metadata!.uid!,
            controller: true,
            blockOwnerDeletion: true,
          },
        ],
      },
      spec: { containers: [{ name: 'app', image: 'registry.example.com/app:1' }] },
    };
    pod = await core.createNamespacedPod({ namespace: NS, body: structuredClone(podTemplate) });
    alice = await writeTempKubeconfig(t.sandbox.users.add('alice').kubeconfig);
    operator = await writeTempKubeconfig(t.sandbox.users.serviceAccount(OPERATOR_NS, OPERATOR_SA).kubeconfig);
  });

  it('are born gated and stamped', () => {
    expect(pod.spec?.schedulingGates).toEqual([{ name: GATE }]);
    expect(pod.metadata?.annotations).toMatchObject({ [MANAGED_LEASE]: 'web' });
  });

  it('an ordinary user removing the gate is denied with the exact message (kubectl)', async (ctx) => {
    if (!hasKubectl) ctx.skip();
    const res = await t.kubectl(
      [
        'patch',
        'pod',
        pod.metadata!.name!,
        '-n',
        NS,
        '--type=json',
        '-p',
        '[{"op":"remove","path":"/spec/schedulingGates"}]',
      ],
      { kubeconfig: alice },
    );
    expect(res.code).not.toBe(0);
    expect(res.stderr).toContain(`${VALIDATE}only the operator may remove the Berth scheduling gate`);
  });

  it('an ordinary user stripping the binding is denied (client-node)', async () => {
    const aliceApi = t.kubeConfigFor(t.sandbox.users.add('alice').kubeconfig).makeApiClient(CoreV1Api);
    const patch = [{ op: 'remove', path: `/metadata/labels/${MANAGED_UID.replace('/', '~1')}` }];
    await expect(
      aliceApi.patchNamespacedPod({ namespace: NS, name: pod.metadata!.name!, body: patch }),
    ).rejects.toSatisfy(
      (err) => errorMessage(err) === `${VALIDATE}managed workload binding cannot be removed or changed`,
    );
  });

  it('the operator cannot remove the gate while the lease is not active', async (ctx) => {
    if (!hasKubectl) ctx.skip();
    const res = await t.kubectl(
      [
        'patch',
        'pod',
        pod.metadata!.name!,
        '-n',
        NS,
        '--type=json',
        '-p',
        '[{"op":"remove","path":"/spec/schedulingGates"}]',
      ],
      { kubeconfig: operator },
    );
    expect(res.stderr).toContain(`${VALIDATE}lease no longer permits Pod starts`);
  });

  it('the operator removes the gate of a registered Pod while the lease is Active; binding needs the Pod UID', async (ctx) => {
    if (!hasKubectl) ctx.skip();
    // What the reconciler does before ungating: activate and register the Pod UID in status (§2.7).
    const lease = await getLease('web');
    const deadline = new Date(Date.now() + 60_000).toISOString().replace(/\.\d{3}Z$/, 'Z');
    await custom.replaceNamespacedCustomObjectStatus({
      group: GROUP,
      version: 'v1alpha1',
      namespace: NS,
      plural: 'berthleases',
      name: 'web',
      body: {
        ...lease,
        status: {
          ...lease.status,
          workload: {
            ...lease.status?.workload,
            phase: 'Active',
            deadline,
            leaseName: 'web',
            holder: 'cluster-east',
            token: 3,
            pods: [{ name: pod.metadata!.name!, uid: pod.metadata!.uid! }],
          },
        },
      },
    });
    const res = await t.kubectl(
      [
        'patch',
        'pod',
        pod.metadata!.name!,
        '-n',
        NS,
        '--type=json',
        '-p',
        '[{"op":"remove","path":"/spec/schedulingGates"}]',
      ],
      { kubeconfig: operator },
    );
    expect(res.stderr).toBe('');
    expect(res.code).toBe(0);
    const ungated = await core.readNamespacedPod({ namespace: NS, name: pod.metadata!.name! });
    expect(ungated.spec?.schedulingGates ?? []).toEqual([]);

    // Another Pod of the same ReplicaSet, never registered: even the operator may not ungate it.
    const other = await core.createNamespacedPod({
      namespace: NS,
      body: {
        ...structuredClone(podTemplate),
        metadata: { ...structuredClone(podTemplate.metadata), name: 'web-5d9c-x2' },
      },
    });
    const denied = await t.kubectl(
      [
        'patch',
        'pod',
        other.metadata!.name!,
        '-n',
        NS,
        '--type=json',
        '-p',
        '[{"op":"remove","path":"/spec/schedulingGates"}]',
      ],
      { kubeconfig: operator },
    );
    expect(denied.code).not.toBe(0);
    expect(denied.stderr).toContain(`${VALIDATE}pod UID was not durably registered`);

    const bind = (uid: string) =>
      core.createNamespacedPodBinding({
        namespace: NS,
        name: pod.metadata!.name!,
        body: {
          metadata: { name: pod.metadata!.name!, uid },
          target: { apiVersion: 'v1', kind: 'Node', name: 'node-1' },
        },
      });
    await expect(bind('not-the-pod-uid')).rejects.toSatisfy(
      (err) => errorMessage(err) === `${VALIDATE}managed Pod binding must name the observed Pod UID`,
    );
    await bind(pod.metadata!.uid!);
    const bound = await core.readNamespacedPod({ namespace: NS, name: pod.metadata!.name! });
    expect(bound.spec?.nodeName).toBe('node-1');
  });

  it('the operator namespace is never sent to the webhooks', async () => {
    const forged = await core.createNamespacedPod({
      namespace: OPERATOR_NS,
      body: {
        metadata: { name: 'operator-0', annotations: { [MANAGED_UID]: 'forged' } },
        spec: { containers: [{ name: 'app', image: 'registry.example.com/operator:1' }] },
      },
    });
    expect(forged.spec?.schedulingGates).toBeUndefined();
  });

  it('counts its API reads', async () => {
    const text = await registry.getSingleMetricAsString('berth_webhook_api_reads_total');
    expect(text).toMatch(
      /berth_webhook_api_reads_total\{webhook="\/validate-managed-workloads",kind="list-leases"\} [1-9]/,
    );
  });
});

describe('a Pod of a chain that a lease governs only after the Pod was admitted', () => {
  it('cannot be taken out of the chain together with its gate by an ordinary user', async () => {
    // A Deployment, its ReplicaSet and a (self-)gated Pod, all admitted while no lease targeted them.
    const dep = await apps.createNamespacedDeployment({ namespace: NS, body: deploymentBody('legacy') });
    const rs = await apps.createNamespacedReplicaSet({
      namespace: NS,
      body: {
        metadata: {
          name: 'legacy-1',
          namespace: NS,
          labels: { app: 'legacy' },
          ownerReferences: [
            {
              apiVersion: 'apps/v1',
              kind: 'Deployment',
              name: 'legacy',
              uid: dep.metadata!.uid!,
              controller: true,
            },
          ],
        },
        spec: { replicas: 0, selector: { matchLabels: { app: 'legacy' } }, template: dep.spec!.template },
      },
    });
    const pod = await core.createNamespacedPod({
      namespace: NS,
      body: {
        metadata: {
          name: 'legacy-1-a',
          labels: { app: 'legacy' },
          ownerReferences: [
            {
              apiVersion: 'apps/v1',
              kind: 'ReplicaSet',
              name: 'legacy-1',
              uid: rs.metadata!.uid!,
              controller: true,
            },
          ],
        },
        spec: {
          containers: [{ name: 'app', image: 'registry.example.com/app:1' }],
          schedulingGates: [{ name: GATE }],
        },
      },
    });
    expect(pod.metadata?.annotations ?? {}).not.toHaveProperty(MANAGED_UID);
    // Now a lease targets the Deployment: the Pod belongs to a managed chain it was never admitted into.
    await custom.createNamespacedCustomObject({
      group: GROUP,
      version: 'v1alpha1',
      namespace: NS,
      plural: 'berthleases',
      body: leaseBody('legacy', 'legacy'),
    });
    const aliceApi = t.kubeConfigFor(t.sandbox.users.add('alice').kubeconfig).makeApiClient(CoreV1Api);
    const orphanAndUngate = [
      { op: 'remove', path: '/metadata/ownerReferences' },
      { op: 'remove', path: '/spec/schedulingGates' },
    ];
    await expect(
      aliceApi.patchNamespacedPod({ namespace: NS, name: 'legacy-1-a', body: orphanAndUngate }),
    ).rejects.toSatisfy(
      (err) => errorMessage(err) === `${VALIDATE}managed controllers cannot adopt unadmitted objects`,
    );
    const after = await core.readNamespacedPod({ namespace: NS, name: 'legacy-1-a' });
    expect(after.spec?.schedulingGates).toEqual([{ name: GATE }]);
    expect(after.metadata?.ownerReferences?.[0]?.name).toBe('legacy-1');
  });
});

describe('unmanaged workloads', () => {
  it('a Deployment no lease targets is admitted unchanged', async () => {
    const dep = await apps.createNamespacedDeployment({ namespace: NS, body: deploymentBody('plain') });
    expect(dep.metadata?.annotations ?? {}).not.toHaveProperty(MANAGED_UID);
    expect(dep.spec?.template.spec?.schedulingGates).toBeUndefined();
  });

  it('a Pod whose owner is gone is admitted in a namespace without leases', async () => {
    await core.createNamespace({ body: { metadata: { name: 'no-leases' } } });
    const p = await core.createNamespacedPod({
      namespace: 'no-leases',
      body: {
        metadata: {
          name: 'orphan',
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
      },
    });
    expect(p.spec?.schedulingGates).toBeUndefined();
  });
});
