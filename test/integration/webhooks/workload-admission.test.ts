// WorkloadAdmission served by the operator's HTTPS server in this process, as the operator's service
// account with its least-privilege RBAC, called by the real kube-apiserver through the install's
// fail-closed webhook configurations (fixed names, every namespace but the operator's and kube-system),
// which name the webhook Service: so this file runs on a control plane of its own. The real Deployment
// and ReplicaSet controllers create the ReplicaSets and Pods, the real scheduler honours the gate.
import {
  AdmissionregistrationV1Api,
  type ApiException,
  AppsV1Api,
  CoreV1Api,
  CustomObjectsApi,
  RbacAuthorizationV1Api,
  type V1Deployment,
  type V1Pod,
} from '@kubernetes/client-node';
import { Registry } from 'prom-client';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createAuthority } from '../../../hack/controlplane/pki.ts';
import { berthLeaseRbacObjects } from '../../../src/berth/rbac.ts';
import { KubeTransport } from '../../../src/kube/transport.ts';
import {
  mutatingWebhookConfiguration,
  readWebhookConfigurations,
  validatingWebhookConfiguration,
  verifyWebhookConfigurations,
} from '../../../webhooks/configurations.ts';
import { AdmissionServer } from '../../../webhooks/server.ts';
import { kubeWorkloadAdmission } from '../../../webhooks/workload-admission.ts';
import { SwappableCertificates } from '../../fixtures/webhooks/certs.ts';
import { untilAdmissionServed } from '../../helpers/admission-probe.ts';
import { jsonPatch } from '../../helpers/api.ts';
import { IN_SCOPE, type ServiceAccountUser, TestCluster, type TestUser } from '../../helpers/cluster.ts';
import { eventually } from '../../helpers/eventually.ts';
import { rejection, whenSettled } from '../../helpers/rejection.ts';
import { startScopeView } from '../../helpers/scope-view.ts';

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

let t: TestCluster;
let server: AdmissionServer;
let transport: KubeTransport;
let registry: Registry;
let core: CoreV1Api;
let apps: AppsV1Api;
let custom: CustomObjectsApi;
let alice: TestUser;
let operator: ServiceAccountUser;

const params = (caBundle: string) =>
  ({ namespace: OPERATOR_NS, serviceName: SERVICE, caBundle, scope: 'opt-in' }) as const;

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
const leaseRef = { group: GROUP, version: 'v1alpha1', namespace: NS, plural: 'berthleases' };
/** Creates the BerthLease `name` targeting the Deployment `name`, retried while the scope settles. */
const createLease = (name: string): Promise<unknown> =>
  whenSettled(() => custom.createNamespacedCustomObject({ ...leaseRef, body: leaseBody(name, name) }));
const getLease = async (name: string): Promise<Lease> =>
  (await custom.getNamespacedCustomObject({ ...leaseRef, name })) as Lease;

/** Replaces the lease's status.workload (as the reconciler writes it). */
async function writeWorkloadStatus(name: string, workload: Record<string, unknown>): Promise<void> {
  const lease = await getLease(name);
  await custom.replaceNamespacedCustomObjectStatus({
    ...leaseRef,
    name,
    body: { ...lease, status: { ...lease.status, workload } },
  });
}

const deploymentBody = (name: string, replicas = 0, gates: string[] = []): V1Deployment => ({
  metadata: { name, namespace: NS },
  spec: {
    replicas,
    selector: { matchLabels: { app: name } },
    template: {
      metadata: { labels: { app: name } },
      spec: {
        containers: [{ name: 'app', image: 'registry.example.com/app:1' }],
        ...(gates.length ? { schedulingGates: gates.map((gate) => ({ name: gate })) } : {}),
      },
    },
  },
});

const errorMessage = (err: unknown): string => {
  const body = (err as ApiException<string>).body;
  return typeof body === 'string' ? (JSON.parse(body) as { message: string }).message : String(err);
};

/** The Pods of app `app`, oldest first. */
async function appPods(app: string): Promise<V1Pod[]> {
  const list = await core.listNamespacedPod({ namespace: NS, labelSelector: `app=${app}` });
  return list.items.sort((a, b) =>
    String(a.metadata?.creationTimestamp?.toISOString()).localeCompare(
      String(b.metadata?.creationTimestamp?.toISOString()),
    ),
  );
}

/** Polls until `probe` finds what it looks for. */
function found<T>(what: string, probe: () => Promise<T | undefined>): Promise<T> {
  return eventually(async () => {
    const value = await probe();
    if (value === undefined) throw new Error(`no ${what} yet`);
    return value;
  });
}

beforeAll(async () => {
  t = await TestCluster.own();
  core = t.kc.makeApiClient(CoreV1Api);
  apps = t.kc.makeApiClient(AppsV1Api);
  custom = t.kc.makeApiClient(CustomObjectsApi);
  await t.createNamespace(OPERATOR_NS);
  await t.createNamespace(NS, IN_SCOPE);
  await t.installBerthLeaseCrd();
  const rbac = t.kc.makeApiClient(RbacAuthorizationV1Api);
  const [role, binding] = berthLeaseRbacObjects({
    name: 'berth-operator',
    serviceAccount: { namespace: OPERATOR_NS, name: OPERATOR_SA },
    managedWorkloads: true,
    admissionScope: true,
  });
  await rbac.createClusterRole({ body: role });
  await rbac.createClusterRoleBinding({ body: binding });
  operator = await t.serviceAccount(OPERATOR_NS, OPERATOR_SA);
  // An ordinary user who may edit workloads in the namespace: only admission stands in their way.
  alice = await t.user('alice');
  await rbac.createNamespacedRoleBinding({
    namespace: NS,
    body: {
      metadata: { name: 'alice-edit' },
      roleRef: { apiGroup: 'rbac.authorization.k8s.io', kind: 'ClusterRole', name: 'edit' },
      subjects: [{ apiGroup: 'rbac.authorization.k8s.io', kind: 'User', name: alice.username }],
    },
  });

  const ca = await createAuthority('berth-webhook-ca');
  const pair = await ca.serving([`${SERVICE}.${OPERATOR_NS}.svc`]);
  const caBundle = Buffer.from(ca.cert).toString('base64');
  transport = new KubeTransport(t.kc);
  registry = new Registry();
  server = new AdmissionServer({
    port: 0,
    certificates: new SwappableCertificates({ ...pair, ca: ca.cert }),
    handlers: kubeWorkloadAdmission({
      transport: t.transport(operator.kc),
      operatorUser: OPERATOR_USER,
      scope: 'opt-in',
      scopeEntries: await startScopeView(t.transport(operator.kc)),
      registry,
    }),
    registry,
  });
  await server.start();
  await t.routeService(OPERATOR_NS, SERVICE, [{ port: server.port }]);
  const configs = t.kc.makeApiClient(AdmissionregistrationV1Api);
  await configs.createMutatingWebhookConfiguration({ body: mutatingWebhookConfiguration(params(caBundle)) });
  await configs.createValidatingWebhookConfiguration({
    body: validatingWebhookConfiguration(params(caBundle)),
  });
  await untilAdmissionServed(core, NS, registry);
  // RBAC sees alice's binding a moment after it is written.
  await eventually(() => alice.kc.makeApiClient(CoreV1Api).listNamespacedPod({ namespace: NS }));
});

afterAll(async () => {
  await server?.close();
  await transport?.close();
  await t?.stop();
});

describe('start-up check against the live configurations', () => {
  it('passes for what the builders made and names an unsafe edit', async () => {
    const live = await readWebhookConfigurations(transport, 'berth-operator-injection-workloads');
    expect(verifyWebhookConfigurations(live, { namespace: OPERATOR_NS, scope: 'opt-in' })).toEqual([]);
    // Reading as if the operator ran in another namespace: that namespace is not excluded.
    expect(verifyWebhookConfigurations(live, { namespace: 'elsewhere', scope: 'opt-in' })).toContain(
      'MutatingWebhookConfiguration "berth-operator-injection-workloads" webhook "mutate-workloads.berth.skaphos.io" does not exclude the operator namespace "elsewhere" (namespaceSelector must exclude kubernetes.io/metadata.name NotIn [elsewhere, kube-system])',
    );
  });
});

describe('a BerthLease, then the Deployment it targets', () => {
  let deployment: V1Deployment;

  beforeAll(async () => {
    await createLease('web');
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
    await createLease('api');
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
  let aliceKubeconfig: string;
  let operatorKubeconfig: string;

  const ungate = (name: string, kubeconfig: string) =>
    t.kubectl(
      [
        'patch',
        'pod',
        name,
        '-n',
        NS,
        '--type=json',
        '-p',
        '[{"op":"remove","path":"/spec/schedulingGates"}]',
      ],
      { kubeconfig },
    );
  /** What the reconciler writes before it scales the target up or ungates Pods (docs/behaviour.md §2.7). */
  const activate = async (pods: V1Pod[] = []): Promise<void> => {
    const lease = await getLease('web');
    const deadline = new Date(Date.now() + 60_000).toISOString().replace(/\.\d{3}Z$/, 'Z');
    await writeWorkloadStatus('web', {
      ...lease.status?.workload,
      phase: 'Active',
      deadline,
      leaseName: 'web',
      holder: 'cluster-east',
      token: 3,
      pods: pods.map((p) => ({ name: p.metadata!.name!, uid: p.metadata!.uid! })),
    });
  };
  const scale = (replicas: number) =>
    apps.patchNamespacedDeployment(
      { namespace: NS, name: 'web', body: [{ op: 'replace', path: '/spec/replicas', value: replicas }] },
      jsonPatch,
    );

  beforeAll(async () => {
    // The Deployment and ReplicaSet controllers create the Pod once the lease authorizes the scale-up;
    // then the lease is back to its inactive record.
    const inactive = (await getLease('web')).status?.workload;
    await activate();
    await scale(1);
    pod = await found('Pod of web', async () => {
      const pods = await appPods('web');
      return pods.length === 1 ? pods[0] : undefined;
    });
    await writeWorkloadStatus('web', { ...inactive });
    aliceKubeconfig = await t.writeKubeconfig(alice.kubeconfig);
    operatorKubeconfig = await t.writeKubeconfig(operator.kubeconfig);
  });

  it('are born gated and stamped, and the scheduler leaves them alone', async () => {
    expect(pod.metadata?.ownerReferences?.[0]).toMatchObject({ kind: 'ReplicaSet', controller: true });
    expect(pod.spec?.schedulingGates).toEqual([{ name: GATE }]);
    expect(pod.metadata?.annotations).toMatchObject({ [MANAGED_LEASE]: 'web' });
    await eventually(async () => {
      const p = await core.readNamespacedPod({ namespace: NS, name: pod.metadata!.name! });
      return p.status?.conditions?.some((c) => c.type === 'PodScheduled' && c.reason === 'SchedulingGated');
    });
    expect((await core.readNamespacedPod({ namespace: NS, name: pod.metadata!.name! })).spec?.nodeName).toBe(
      undefined,
    );
  });

  it('an ordinary user removing the gate is denied with the exact message (kubectl)', async () => {
    const res = await ungate(pod.metadata!.name!, aliceKubeconfig);
    expect(res.code).not.toBe(0);
    expect(res.stderr).toContain(`${VALIDATE}only the operator may remove the Berth scheduling gate`);
  });

  it('an ordinary user stripping the binding is denied (client-node)', async () => {
    const aliceApi = alice.kc.makeApiClient(CoreV1Api);
    const patch = [{ op: 'remove', path: `/metadata/labels/${MANAGED_UID.replace('/', '~1')}` }];
    await expect(
      aliceApi.patchNamespacedPod({ namespace: NS, name: pod.metadata!.name!, body: patch }),
    ).rejects.toSatisfy(
      (err) => errorMessage(err) === `${VALIDATE}managed workload binding cannot be removed or changed`,
    );
  });

  it('the operator cannot remove the gate while the lease is not active', async () => {
    const res = await ungate(pod.metadata!.name!, operatorKubeconfig);
    expect(res.stderr).toContain(`${VALIDATE}lease no longer permits Pod starts`);
  });

  it('the operator removes the gate of a registered Pod while the lease is Active; binding needs the Pod UID', async () => {
    // What the reconciler does before ungating: activate and register the Pod UID in status (§2.7).
    await activate([pod]);
    const res = await ungate(pod.metadata!.name!, operatorKubeconfig);
    expect(res.stderr).toBe('');
    expect(res.code).toBe(0);
    const ungated = await core.readNamespacedPod({ namespace: NS, name: pod.metadata!.name! });
    expect(ungated.spec?.schedulingGates ?? []).toEqual([]);

    // Another Pod of the same ReplicaSet, never registered: even the operator may not ungate it.
    await scale(2);
    const other = await found('second Pod of web', async () =>
      (await appPods('web')).find((p) => p.metadata?.uid !== pod.metadata?.uid),
    );
    expect(other.spec?.schedulingGates).toEqual([{ name: GATE }]);
    const denied = await ungate(other.metadata!.name!, operatorKubeconfig);
    expect(denied.code).not.toBe(0);
    expect(denied.stderr).toContain(`${VALIDATE}pod UID was not durably registered`);

    await expect(
      core.createNamespacedPodBinding({
        namespace: NS,
        name: pod.metadata!.name!,
        body: {
          metadata: { name: pod.metadata!.name!, uid: 'not-the-pod-uid' },
          target: { apiVersion: 'v1', kind: 'Node', name: t.nodeNames[0] },
        },
      }),
    ).rejects.toSatisfy(
      (err) => errorMessage(err) === `${VALIDATE}managed Pod binding must name the observed Pod UID`,
    );
    // The scheduler's Binding names the Pod's UID: admitted, the Pod lands on a (KWOK) Node.
    const bound = await found('bound Pod', async () => {
      const p = await core.readNamespacedPod({ namespace: NS, name: pod.metadata!.name! });
      return p.spec?.nodeName ? p : undefined;
    });
    expect(t.nodeNames).toContain(bound.spec?.nodeName);
    // The unregistered one stays gated, unscheduled.
    const still = await core.readNamespacedPod({ namespace: NS, name: other.metadata!.name! });
    expect(still.spec?.schedulingGates).toEqual([{ name: GATE }]);
    expect(still.spec?.nodeName).toBeUndefined();
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
    await apps.createNamespacedDeployment({ namespace: NS, body: deploymentBody('legacy', 1, [GATE]) });
    const pod = await found('Pod of legacy', async () => (await appPods('legacy'))[0]);
    expect(pod.spec?.schedulingGates).toEqual([{ name: GATE }]);
    expect(pod.metadata?.annotations ?? {}).not.toHaveProperty(MANAGED_UID);
    const owner = pod.metadata?.ownerReferences?.[0];
    expect(owner).toMatchObject({ kind: 'ReplicaSet', controller: true });
    // Now a lease targets the Deployment: the Pod belongs to a managed chain it was never admitted into.
    await createLease('legacy');
    const aliceApi = alice.kc.makeApiClient(CoreV1Api);
    const orphanAndUngate = [
      { op: 'remove', path: '/metadata/ownerReferences' },
      { op: 'remove', path: '/spec/schedulingGates' },
    ];
    await expect(
      aliceApi.patchNamespacedPod({ namespace: NS, name: pod.metadata!.name!, body: orphanAndUngate }),
    ).rejects.toSatisfy(
      (err) => errorMessage(err) === `${VALIDATE}managed controllers cannot adopt unadmitted objects`,
    );
    const after = await core.readNamespacedPod({ namespace: NS, name: pod.metadata!.name! });
    expect(after.spec?.schedulingGates).toEqual([{ name: GATE }]);
    expect(after.metadata?.ownerReferences?.[0]?.name).toBe(owner?.name);
  });
});

describe('unmanaged workloads', () => {
  it('a Deployment no lease targets is admitted unchanged', async () => {
    const dep = await apps.createNamespacedDeployment({ namespace: NS, body: deploymentBody('plain') });
    expect(dep.metadata?.annotations ?? {}).not.toHaveProperty(MANAGED_UID);
    expect(dep.spec?.template.spec?.schedulingGates).toBeUndefined();
  });

  it('a Pod whose owner is gone is denied, also in a namespace in scope without leases (the owner may have been stamped)', async () => {
    await t.createNamespace('no-leases', IN_SCOPE);
    const denied = core.createNamespacedPod({
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
    expect(await rejection(denied)).toContain('resolve controller owner: replicasets.apps "gone" not found');
  });
});
