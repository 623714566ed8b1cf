// The sandbox's workload simulator end to end: workload controllers, scheduler and kubelet acting through
// the API (and its admission chain), observed with client-node and kubectl like a cluster.
import {
  AdmissionregistrationV1Api,
  AppsV1Api,
  BatchV1Api,
  CoreV1Api,
  type V1Deployment,
  type V1Pod,
  type V1PodTemplateSpec,
} from '@kubernetes/client-node';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { jsonPatch, mergePatch } from '../../helpers/api.ts';
import { eventually } from '../../helpers/eventually.ts';
import { kubectlAvailable, startTestSandbox, type TestSandbox } from '../../helpers/sandbox.ts';
import {
  type ReviewRequest,
  startWebhookServer,
  type TestWebhookServer,
} from '../../helpers/webhook-server.ts';

const hasKubectl = await kubectlAvailable();

let t: TestSandbox;
let core: CoreV1Api;
let apps: AppsV1Api;
let batch: BatchV1Api;
let hook: TestWebhookServer;
/** The test webhook denies Pod creation in the `denied` namespace while this is set. */
let denyPods = true;
const simulatorErrors: string[] = [];

const GATE = 'example.com/held';

beforeAll(async () => {
  t = await startTestSandbox({
    simulateWorkloads: true,
    simulator: {
      terminationGraceMs: 500,
      retryMaxMs: 300,
      onError: (controller, key, err) => simulatorErrors.push(`${controller} ${key}: ${String(err)}`),
    },
  });
  core = t.kc.makeApiClient(CoreV1Api);
  apps = t.kc.makeApiClient(AppsV1Api);
  batch = t.kc.makeApiClient(BatchV1Api);
  hook = await startWebhookServer('hook.hooks.svc', (req, path) => {
    if (path.startsWith('/gate') && req.operation === 'CREATE')
      return {
        allowed: true,
        patch: [{ op: 'add', path: '/spec/schedulingGates', value: [{ name: GATE }] }],
      };
    if (path.startsWith('/deny') && denyPods)
      return { allowed: false, status: { code: 403, message: 'pods are not welcome here yet' } };
    return { allowed: true };
  });
  t.sandbox.services.map('hooks', 'hook', { host: '127.0.0.1', port: hook.port });
  for (const name of ['gated', 'denied', 'workloads'])
    await core.createNamespace({ body: { metadata: { name, labels: { suite: name } } } });
  const admission = t.kc.makeApiClient(AdmissionregistrationV1Api);
  const webhook = (name: string, path: string, namespace: string, resources: string[]) => ({
    name,
    clientConfig: { caBundle: hook.caBundle, service: { namespace: 'hooks', name: 'hook', path } },
    rules: [{ apiGroups: [''], apiVersions: ['v1'], operations: ['CREATE'], resources }],
    sideEffects: 'None',
    admissionReviewVersions: ['v1'],
    namespaceSelector: { matchLabels: { suite: namespace } },
  });
  await admission.createMutatingWebhookConfiguration({
    body: {
      metadata: { name: 'gate-pods' },
      webhooks: [webhook('gate.pods.example.com', '/gate', 'gated', ['pods'])],
    },
  });
  await admission.createValidatingWebhookConfiguration({
    body: {
      metadata: { name: 'pod-rules' },
      webhooks: [
        webhook('deny.pods.example.com', '/deny', 'denied', ['pods']),
        webhook('bindings.pods.example.com', '/bindings', 'gated', ['pods/binding']),
      ],
    },
  });
});

afterAll(async () => {
  await t?.stop();
  await hook?.stop();
});

const template = (app: string, image = 'nginx:1.27'): V1PodTemplateSpec => ({
  metadata: { labels: { app } },
  spec: { containers: [{ name: 'app', image }] },
});

const deployment = (name: string, replicas: number): V1Deployment => ({
  metadata: { name },
  spec: { replicas, selector: { matchLabels: { app: name } }, template: template(name) },
});

const podsOf = async (namespace: string, app: string): Promise<V1Pod[]> =>
  (await core.listNamespacedPod({ namespace, labelSelector: `app=${app}` })).items;

const isReady = (p: V1Pod): boolean =>
  p.status?.phase === 'Running' &&
  p.status.conditions?.some((c) => c.type === 'Ready' && c.status === 'True') === true;

/** Resolves once exactly `n` Pods of the app exist and all are Running, Ready and bound. */
async function readyPods(namespace: string, app: string, n: number): Promise<V1Pod[]> {
  return until(async () => {
    const pods = await podsOf(namespace, app);
    if (
      pods.length !== n ||
      !pods.every((p) => isReady(p) && p.spec?.nodeName && !p.metadata?.deletionTimestamp)
    )
      throw new Error(
        `want ${n} ready pods of ${app}, have ${pods.map((p) => `${p.metadata?.name}:${p.status?.phase}`)}`,
      );
    return pods;
  });
}

/** `eventually`, typed for probes that return undefined until they have their value. */
const until = async <T>(probe: () => T | undefined | false | Promise<T | undefined | false>): Promise<T> =>
  (await eventually(probe)) as T;

const scale = (namespace: string, name: string, replicas: number) =>
  apps.patchNamespacedDeploymentScale({ namespace, name, body: { spec: { replicas } } }, mergePatch);

describe('Deployments and ReplicaSets', () => {
  it('creates a ReplicaSet and Ready Pods bound to the sandbox node', async () => {
    await apps.createNamespacedDeployment({ namespace: 'workloads', body: deployment('web', 3) });
    const pods = await readyPods('workloads', 'web', 3);
    const rsList = (await apps.listNamespacedReplicaSet({ namespace: 'workloads', labelSelector: 'app=web' }))
      .items;
    expect(rsList).toHaveLength(1);
    const rs = rsList[0]!;
    const hash = rs.metadata?.labels?.['pod-template-hash'];
    expect(hash).toMatch(/^[bcdfghjklmnpqrstvwxz2456789]+$/);
    expect(rs.metadata?.name).toBe(`web-${hash}`);
    expect(rs.spec?.selector.matchLabels).toEqual({ app: 'web', 'pod-template-hash': hash });
    expect(rs.metadata?.annotations?.['deployment.kubernetes.io/revision']).toBe('1');
    const d = await apps.readNamespacedDeployment({ namespace: 'workloads', name: 'web' });
    expect(rs.metadata?.ownerReferences).toEqual([
      {
        apiVersion: 'apps/v1',
        kind: 'Deployment',
        name: 'web',
        uid: d.metadata?.uid,
        controller: true,
        blockOwnerDeletion: true,
      },
    ]);
    for (const pod of pods) {
      expect(pod.metadata?.name).toMatch(new RegExp(`^web-${hash}-[a-z0-9]{5}$`));
      expect(pod.metadata?.labels).toEqual({ app: 'web', 'pod-template-hash': hash });
      expect(pod.metadata?.ownerReferences?.[0]).toMatchObject({
        kind: 'ReplicaSet',
        name: rs.metadata?.name,
        controller: true,
      });
      expect(pod.spec?.nodeName).toBe('sandbox-node-1');
      expect(pod.status?.podIP).toMatch(/^10\.244\./);
      expect(pod.status?.containerStatuses?.[0]).toMatchObject({ name: 'app', ready: true, started: true });
    }
    const status = await until(async () => {
      const s = (await apps.readNamespacedDeployment({ namespace: 'workloads', name: 'web' })).status;
      return s?.availableReplicas === 3 &&
        s.conditions?.find((c) => c.type === 'Progressing')?.reason === 'NewReplicaSetAvailable'
        ? s
        : undefined;
    });
    expect(status).toMatchObject({
      replicas: 3,
      readyReplicas: 3,
      updatedReplicas: 3,
      observedGeneration: 1,
    });
    expect(status.conditions?.find((c) => c.type === 'Available')).toMatchObject({
      status: 'True',
      reason: 'MinimumReplicasAvailable',
    });
    const node = await core.readNode({ name: 'sandbox-node-1' });
    expect(node.status?.conditions?.find((c) => c.type === 'Ready')?.status).toBe('True');
  });

  it('scales up and down, and to zero through graceful termination', async () => {
    await readyPods('workloads', 'web', 3);
    await scale('workloads', 'web', 5);
    await readyPods('workloads', 'web', 5);
    await scale('workloads', 'web', 2);
    await readyPods('workloads', 'web', 2);
    await scale('workloads', 'web', 0);
    // Bound Pods are not removed at once: they terminate (deletionTimestamp set) until the kubelet is done.
    const terminating = await until(async () => {
      const pods = await podsOf('workloads', 'web');
      return pods.length > 0 && pods.every((p) => p.metadata?.deletionTimestamp) ? pods : undefined;
    });
    expect(terminating.every((p) => p.metadata?.deletionGracePeriodSeconds === 30)).toBe(true);
    await until(async () => (await podsOf('workloads', 'web')).length === 0);
    const status = await until(async () => {
      const s = (await apps.readNamespacedDeployment({ namespace: 'workloads', name: 'web' })).status;
      return s?.replicas === undefined && s?.observedGeneration === 4 ? s : undefined;
    });
    expect(status.readyReplicas).toBeUndefined();
  });

  it('rolls a template change out to a new ReplicaSet and scales the old one down', async () => {
    await apps.createNamespacedDeployment({ namespace: 'workloads', body: deployment('roll', 2) });
    const before = await readyPods('workloads', 'roll', 2);
    const oldHash = before[0]!.metadata?.labels?.['pod-template-hash'];
    await apps.patchNamespacedDeployment(
      {
        namespace: 'workloads',
        name: 'roll',
        body: [{ op: 'replace', path: '/spec/template/spec/containers/0/image', value: 'nginx:1.28' }],
      },
      jsonPatch,
    );
    const after = await until(async () => {
      const pods = await readyPods('workloads', 'roll', 2);
      return pods.every((p) => p.metadata?.labels?.['pod-template-hash'] !== oldHash) ? pods : undefined;
    });
    expect(after.every((p) => p.spec?.containers[0]?.image === 'nginx:1.28')).toBe(true);
    const rsList = (
      await apps.listNamespacedReplicaSet({ namespace: 'workloads', labelSelector: 'app=roll' })
    ).items;
    expect(rsList).toHaveLength(2);
    const old = rsList.find((rs) => rs.metadata?.labels?.['pod-template-hash'] === oldHash)!;
    const current = rsList.find((rs) => rs !== old)!;
    expect(old.spec?.replicas).toBe(0);
    expect(current.spec?.replicas).toBe(2);
    expect(current.metadata?.annotations?.['deployment.kubernetes.io/revision']).toBe('2');
    const d = await until(async () => {
      const got = await apps.readNamespacedDeployment({ namespace: 'workloads', name: 'roll' });
      return got.status?.updatedReplicas === 2 &&
        got.status.replicas === 2 &&
        got.status.availableReplicas === 2
        ? got
        : undefined;
    });
    expect(d.metadata?.annotations?.['deployment.kubernetes.io/revision']).toBe('2');
  });
});

describe('StatefulSets', () => {
  it('names Pods -0..-N-1, keeps the names stable and scales down from the top', async () => {
    await apps.createNamespacedStatefulSet({
      namespace: 'workloads',
      body: {
        metadata: { name: 'db' },
        spec: {
          replicas: 3,
          serviceName: 'db',
          selector: { matchLabels: { app: 'db' } },
          template: template('db'),
        },
      },
    });
    const pods = await readyPods('workloads', 'db', 3);
    expect(pods.map((p) => p.metadata?.name).sort()).toEqual(['db-0', 'db-1', 'db-2']);
    const db1 = pods.find((p) => p.metadata?.name === 'db-1')!;
    expect(db1.spec?.hostname).toBe('db-1');
    expect(db1.spec?.subdomain).toBe('db');
    expect(db1.metadata?.labels).toMatchObject({
      'statefulset.kubernetes.io/pod-name': 'db-1',
      'apps.kubernetes.io/pod-index': '1',
    });
    expect(db1.metadata?.ownerReferences?.[0]).toMatchObject({
      kind: 'StatefulSet',
      name: 'db',
      controller: true,
    });
    await core.deleteNamespacedPod({ namespace: 'workloads', name: 'db-1' });
    const again = await until(async () => {
      const replaced = (await readyPods('workloads', 'db', 3)).find((p) => p.metadata?.name === 'db-1');
      return replaced && replaced.metadata?.uid !== db1.metadata?.uid ? replaced : undefined;
    });
    expect(again.metadata?.name).toBe('db-1');
    await apps.patchNamespacedStatefulSetScale(
      { namespace: 'workloads', name: 'db', body: { spec: { replicas: 1 } } },
      mergePatch,
    );
    const left = await readyPods('workloads', 'db', 1);
    expect(left[0]?.metadata?.name).toBe('db-0');
    const status = await until(async () => {
      const s = (await apps.readNamespacedStatefulSet({ namespace: 'workloads', name: 'db' })).status;
      return s?.replicas === 1 && s.readyReplicas === 1 ? s : undefined;
    });
    expect(status.currentRevision).toBe(status.updateRevision);
  });
});

describe('CronJobs and Jobs', () => {
  it.skipIf(!hasKubectl)('runs a triggered CronJob: its Job Pod succeeds and the Job completes', async () => {
    const manifest = `
apiVersion: batch/v1
kind: CronJob
metadata:
  name: nightly
  namespace: workloads
spec:
  schedule: "0 3 * * *"
  jobTemplate:
    spec:
      template:
        metadata:
          labels:
            app: nightly
        spec:
          restartPolicy: OnFailure
          containers:
          - name: task
            image: busybox:1.36
`;
    const applied = await t.kubectl(['apply', '-f', '-'], { input: manifest });
    expect(applied.stderr).toBe('');
    const annotated = await t.kubectl([
      'annotate',
      '-n',
      'workloads',
      'cronjob/nightly',
      'sandbox.berth.skaphos.io/trigger=run-1',
    ]);
    expect(annotated.code).toBe(0);
    const job = await until(async () => {
      const jobs = (await batch.listNamespacedJob({ namespace: 'workloads' })).items;
      const found = jobs.find((j) => j.metadata?.ownerReferences?.[0]?.name === 'nightly');
      return found?.status?.conditions?.some((c) => c.type === 'Complete' && c.status === 'True')
        ? found
        : undefined;
    });
    expect(job.metadata?.name).toMatch(/^nightly-\d+$/);
    expect(job.metadata?.annotations?.['sandbox.berth.skaphos.io/trigger']).toBe('run-1');
    expect(job.metadata?.ownerReferences?.[0]).toMatchObject({ kind: 'CronJob', controller: true });
    expect(job.status).toMatchObject({ succeeded: 1, ready: 0 });
    expect(job.status?.active).toBeUndefined();
    expect(job.status?.completionTime).toBeDefined();
    const pods = await podsOf('workloads', 'nightly');
    expect(pods).toHaveLength(1);
    expect(pods[0]?.status?.phase).toBe('Succeeded');
    expect(pods[0]?.spec?.restartPolicy).toBe('OnFailure');
    expect(pods[0]?.metadata?.ownerReferences?.[0]).toMatchObject({ kind: 'Job', name: job.metadata?.name });
    expect(pods[0]?.status?.containerStatuses?.[0]?.state?.terminated?.reason).toBe('Completed');
    const cj = await until(async () => {
      const got = await batch.readNamespacedCronJob({ namespace: 'workloads', name: 'nightly' });
      return got.status?.lastSuccessfulTime ? got : undefined;
    });
    expect(cj.status?.active).toBeUndefined();
    const waited = await t.kubectl([
      'wait',
      '-n',
      'workloads',
      `job/${job.metadata?.name}`,
      '--for=condition=complete',
      '--timeout=5s',
    ]);
    expect(waited.code).toBe(0);
  });

  it('keeps a suspended Job without active Pods, and suspending a running Job deletes its Pods', async () => {
    const jobBody = (name: string, suspend: boolean, runMs: string) => ({
      metadata: { name },
      spec: {
        suspend,
        template: {
          metadata: { labels: { app: name }, annotations: { 'sandbox.berth.skaphos.io/run-ms': runMs } },
          spec: { restartPolicy: 'Never', containers: [{ name: 'task', image: 'busybox:1.36' }] },
        },
      },
    });
    await batch.createNamespacedJob({ namespace: 'workloads', body: jobBody('paused', true, '0') });
    const paused = await until(async () => {
      const got = await batch.readNamespacedJob({ namespace: 'workloads', name: 'paused' });
      return got.status?.conditions?.some((c) => c.type === 'Suspended' && c.status === 'True')
        ? got
        : undefined;
    });
    expect(paused.status?.active).toBeUndefined();
    expect(paused.status?.startTime).toBeUndefined();
    expect(await podsOf('workloads', 'paused')).toHaveLength(0);

    await batch.createNamespacedJob({ namespace: 'workloads', body: jobBody('long', false, '600000') });
    await readyPods('workloads', 'long', 1);
    await until(
      async () =>
        (await batch.readNamespacedJob({ namespace: 'workloads', name: 'long' })).status?.active === 1,
    );
    await batch.patchNamespacedJob(
      { namespace: 'workloads', name: 'long', body: { spec: { suspend: true } } },
      mergePatch,
    );
    await until(async () => (await podsOf('workloads', 'long')).length === 0);
    const suspended = await until(async () => {
      const got = await batch.readNamespacedJob({ namespace: 'workloads', name: 'long' });
      return got.status?.conditions?.some((c) => c.type === 'Suspended' && c.status === 'True') &&
        got.status.active === undefined
        ? got
        : undefined;
    });
    expect(suspended.status?.failed).toBeUndefined();

    await batch.patchNamespacedJob(
      { namespace: 'workloads', name: 'paused', body: { spec: { suspend: false } } },
      mergePatch,
    );
    const resumed = await until(async () => {
      const got = await batch.readNamespacedJob({ namespace: 'workloads', name: 'paused' });
      return got.status?.conditions?.some((c) => c.type === 'Complete' && c.status === 'True')
        ? got
        : undefined;
    });
    expect(resumed.status?.succeeded).toBe(1);
    expect(resumed.status?.conditions?.find((c) => c.type === 'Suspended')).toMatchObject({
      status: 'False',
      reason: 'JobResumed',
    });
  });
});

describe('scheduling gates and admission', () => {
  it('binds a gated Pod only once its gate is removed, then it becomes Ready', async () => {
    const pod = (name: string, gated: boolean): V1Pod => ({
      metadata: { name, labels: { app: name } },
      spec: {
        containers: [{ name: 'app', image: 'nginx:1.27' }],
        ...(gated ? { schedulingGates: [{ name: 'example.com/wait' }] } : {}),
      },
    });
    await core.createNamespacedPod({ namespace: 'workloads', body: pod('waiting', true) });
    await core.createNamespacedPod({ namespace: 'workloads', body: pod('witness', false) });
    // The ungated witness created after it got bound and Ready: the scheduler has passed the gated Pod by.
    await readyPods('workloads', 'witness', 1);
    const waiting = await core.readNamespacedPod({ namespace: 'workloads', name: 'waiting' });
    expect(waiting.spec?.nodeName).toBeUndefined();
    expect(waiting.status?.phase).toBe('Pending');
    expect(waiting.status?.conditions?.find((c) => c.type === 'PodScheduled')).toMatchObject({
      status: 'False',
      reason: 'SchedulingGated',
    });
    await core.patchNamespacedPod(
      { namespace: 'workloads', name: 'waiting', body: [{ op: 'remove', path: '/spec/schedulingGates' }] },
      jsonPatch,
    );
    const [ready] = await readyPods('workloads', 'waiting', 1);
    expect(ready?.spec?.nodeName).toBe('sandbox-node-1');
  });

  it('sends the ReplicaSet controller’s Pod creations and the scheduler’s bindings through the webhooks', async () => {
    await apps.createNamespacedDeployment({ namespace: 'gated', body: deployment('held', 2) });
    const gated = await until(async () => {
      const pods = await podsOf('gated', 'held');
      return pods.length === 2 ? pods : undefined;
    });
    for (const p of gated) {
      expect(p.spec?.schedulingGates).toEqual([{ name: GATE }]);
      expect(p.spec?.nodeName).toBeUndefined();
    }
    const creations = hook.requests.filter(
      (r: ReviewRequest) =>
        r.resource.resource === 'pods' &&
        r.operation === 'CREATE' &&
        !r.subResource &&
        r.namespace === 'gated',
    );
    expect(creations.length).toBeGreaterThanOrEqual(2);
    expect(new Set(creations.map((r) => r.userInfo.username))).toEqual(
      new Set(['system:serviceaccount:kube-system:replicaset-controller']),
    );
    // A Pod created afterwards elsewhere gets bound and Ready: the scheduler has passed the gated ones by.
    await core.createNamespacedPod({
      namespace: 'workloads',
      body: {
        metadata: { name: 'witness-2', labels: { app: 'witness-2' } },
        spec: template('witness-2').spec!,
      },
    });
    await readyPods('workloads', 'witness-2', 1);
    expect(
      (await podsOf('gated', 'held')).every((p) => !p.spec?.nodeName && p.status?.phase === 'Pending'),
    ).toBe(true);
    for (const p of gated) {
      await core.patchNamespacedPod(
        {
          namespace: 'gated',
          name: p.metadata!.name!,
          body: [{ op: 'remove', path: '/spec/schedulingGates' }],
        },
        jsonPatch,
      );
    }
    await readyPods('gated', 'held', 2);
    const bindings = hook.requests.filter((r) => r.subResource === 'binding' && r.namespace === 'gated');
    expect(bindings.map((b) => b.name).sort()).toEqual(gated.map((p) => p.metadata?.name).sort());
    expect(new Set(bindings.map((b) => b.userInfo.username))).toEqual(new Set(['system:kube-scheduler']));
    await until(async () => {
      const s = (await apps.readNamespacedDeployment({ namespace: 'gated', name: 'held' })).status;
      return s?.availableReplicas === 2;
    });
  });

  it('retries a denied Pod creation with backoff, reports FailedCreate, and recovers once allowed', async () => {
    denyPods = true;
    const denials = () =>
      hook.requests.filter(
        (r) => r.namespace === 'denied' && r.resource.resource === 'pods' && !r.subResource,
      ).length;
    await apps.createNamespacedDeployment({ namespace: 'denied', body: deployment('refused', 1) });
    const rs = await until(async () => {
      const list = (await apps.listNamespacedReplicaSet({ namespace: 'denied' })).items;
      const failure = list[0]?.status?.conditions?.find((c) => c.type === 'ReplicaFailure');
      return failure ? { rs: list[0]!, failure } : undefined;
    });
    expect(rs.failure).toMatchObject({ status: 'True', reason: 'FailedCreate' });
    expect(rs.failure.message).toContain('pods are not welcome here yet');
    expect(rs.failure.message).toContain('deny.pods.example.com');
    const d = await until(async () => {
      const got = await apps.readNamespacedDeployment({ namespace: 'denied', name: 'refused' });
      return got.status?.conditions?.some((c) => c.type === 'ReplicaFailure') ? got : undefined;
    });
    expect(d.status?.conditions?.find((c) => c.type === 'ReplicaFailure')).toMatchObject({
      reason: 'FailedCreate',
    });
    // The controller keeps retrying.
    const seen = denials();
    await until(() => denials() >= seen + 2);
    expect(await podsOf('denied', 'refused')).toHaveLength(0);
    denyPods = false;
    await readyPods('denied', 'refused', 1);
    await until(async () => {
      const list = (await apps.listNamespacedReplicaSet({ namespace: 'denied' })).items;
      return list[0]?.status?.conditions === undefined && list[0]?.status?.readyReplicas === 1;
    });
    await until(async () => {
      const got = await apps.readNamespacedDeployment({ namespace: 'denied', name: 'refused' });
      return (
        !got.status?.conditions?.some((c) => c.type === 'ReplicaFailure') &&
        got.status?.availableReplicas === 1
      );
    });
    expect(simulatorErrors.some((e) => e.includes('pods are not welcome here yet'))).toBe(true);
  });
});

describe('scheduler', () => {
  it('spreads Pods round-robin over the Nodes and keeps a Pod Unschedulable until a Node fits', async () => {
    await core.createNode({
      body: { metadata: { name: 'node-b', labels: { 'kubernetes.io/hostname': 'node-b' } } },
    });
    await apps.createNamespacedDeployment({ namespace: 'workloads', body: deployment('spread', 4) });
    const pods = await readyPods('workloads', 'spread', 4);
    expect(new Set(pods.map((p) => p.spec?.nodeName))).toEqual(new Set(['sandbox-node-1', 'node-b']));

    const cordon = (name: string, unschedulable: boolean) =>
      core.patchNode({ name, body: { spec: { unschedulable } } }, mergePatch);
    await cordon('sandbox-node-1', true);
    await cordon('node-b', true);
    await core.createNamespacedPod({
      namespace: 'workloads',
      body: { metadata: { name: 'stranded', labels: { app: 'stranded' } }, spec: template('stranded').spec! },
    });
    const stranded = await until(async () => {
      const p = await core.readNamespacedPod({ namespace: 'workloads', name: 'stranded' });
      return p.status?.conditions?.find((c) => c.type === 'PodScheduled' && c.reason === 'Unschedulable')
        ? p
        : undefined;
    });
    expect(stranded.spec?.nodeName).toBeUndefined();
    expect(stranded.status?.conditions?.find((c) => c.type === 'PodScheduled')?.message).toBe(
      '0/2 nodes are available: 2 node(s) were unschedulable.',
    );
    await cordon('node-b', false);
    const [placed] = await readyPods('workloads', 'stranded', 1);
    expect(placed?.spec?.nodeName).toBe('node-b');
    expect(placed?.status?.conditions?.find((c) => c.type === 'PodScheduled')?.status).toBe('True');
    await cordon('sandbox-node-1', false);
  });
});
