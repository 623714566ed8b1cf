// What the operator does in a cluster, one scenario per component, each a fresh operator process-equivalent
// (buildOperator + manager.run) configured by the install's Deployment and authenticated as its service
// account: leader election, the BerthLease controller on a sample against the embedded central server, the
// node taint guard, WorkloadAdmission with self-signed certificates (CA Secret creation, caBundle
// reconciliation, the start-up check of the webhook configurations, the owner-chain reads on the samples),
// and the replacement of an unusable CA Secret (the managed-workload scenario is in ./managed.ts). The
// cluster's own controllers, scheduler and KWOK act on what the scenarios create. Each scenario can be
// aborted (the RBAC minimality test stops it at the first 403); it always stops its operator. The secure
// metrics scenario scrapes the operator as a ServiceAccount bound to the install's metrics-reader role.
import {
  AdmissionregistrationV1Api,
  AppsV1Api,
  AuthorizationV1Api,
  BatchV1Api,
  CoordinationV1Api,
  CoreV1Api,
  CustomObjectsApi,
  EventsV1Api,
  type KubeConfig,
  RbacAuthorizationV1Api,
  type V1ObjectMeta,
  type V1Pod,
} from '@kubernetes/client-node';
import { WEBHOOK_SERVICE_NAME } from '../../../scripts/deploy.ts';
import {
  AGENT_NAMESPACE,
  CA_SECRET_NAME,
  LEADER_ELECTION_ID,
  METRICS_READER_ROLE,
  OPERATOR_NAMESPACE,
  SERVICE_ACCOUNT,
  WEBHOOK_CONFIGURATION_NAME,
} from '../../../scripts/deploy-rbac.ts';
import { deployPath, type ManifestObject } from '../../../scripts/install-manifest.ts';
import {
  AdmissionScope,
  GROUP,
  inAdmissionScope,
  LeaseState,
  MANAGED_LEASE,
  MANAGED_UID,
  PLURAL,
  SCHEDULING_GATE,
  SCOPE_LABEL,
  VERSION,
} from '../../../src/berth/api.ts';
import { DEFAULT_TAINT_KEY } from '../../../src/nodetaint/config.ts';
import { REARM_EVENT_REASON } from '../../../src/nodetaint/index.ts';
import {
  mutatingWebhookConfiguration,
  validatingWebhookConfiguration,
} from '../../../webhooks/configurations.ts';
import { DeploymentBuilder } from '../../builders/deployment.ts';
import { JobBuilder } from '../../builders/job.ts';
import { NodeBuilder } from '../../builders/node.ts';
import { PodBuilder } from '../../builders/pod.ts';
import { apiFailure, apiOutcome, mergePatch } from '../../helpers/api.ts';
import type { ApiProxy } from '../../helpers/api-proxy.ts';
import { IN_SCOPE, type TestCluster } from '../../helpers/cluster.ts';
import { eventually } from '../../helpers/eventually.ts';
import { scrape } from '../../helpers/scrape.ts';
import { applySample, kubectlOk } from './install.ts';
import { type RunningOperator, startOperator } from './operator.ts';

export interface ScenarioContext {
  t: TestCluster;
  /** The applied objects (the Deployment's configuration is read from here). */
  install: ManifestObject[];
  operatorKubeConfig: KubeConfig;
  centralUrl: string;
  /** Aborted to stop the scenario early. */
  signal: AbortSignal;
  /** Unique per scenario run (namespaces are named after it). */
  run: number;
}

export interface Scenario {
  name: string;
  run(ctx: ScenarioContext): Promise<void>;
}

export const OPERATOR_NS = OPERATOR_NAMESPACE;
export const GUARD_NODE = 'guard-node';
const LEADER_LEASE = LEADER_ELECTION_ID;
const TAINT_KEY = DEFAULT_TAINT_KEY;

/** Features off unless a scenario turns them on (the ConfigMap's empty BERTH_API_SERVER already is). */
const ONLY_LEADER = {
  BERTH_API_SERVER: '',
  BERTH_ENABLE_WORKLOAD_ADMISSION: 'false',
  BERTH_NODE_TAINT_GUARD: 'false',
};

export class Aborted extends Error {
  constructor() {
    super('scenario aborted');
  }
}

/** Polls `probe` until it holds (or the scenario is aborted). */
export async function waitFor<T>(
  ctx: ScenarioContext,
  what: string,
  probe: () => T | Promise<T>,
  timeoutMs = 15_000,
): Promise<NonNullable<T>> {
  const value = await eventually(async () => (ctx.signal.aborted ? Aborted : await probe()), {
    timeoutMs,
    intervalMs: 25,
  }).catch((err: unknown) => {
    throw new Error(`${what}: ${err instanceof Error ? err.message : String(err)}`);
  });
  if (value === Aborted || ctx.signal.aborted) throw new Aborted();
  return value as NonNullable<T>;
}

const ignoreNotFound = async (p: Promise<unknown>): Promise<void> => {
  const outcome = await apiOutcome(p);
  if (outcome.code !== 200 && outcome.code !== 404)
    throw new Error(`unexpected ${outcome.code}: ${outcome.message}`);
};

/** Runs `body` with an operator (the leader Lease deleted first, so that it is created again). */
export async function withOperator(
  ctx: ScenarioContext,
  env: Record<string, string>,
  body: (op: RunningOperator) => Promise<void>,
): Promise<void> {
  const coordination = ctx.t.kc.makeApiClient(CoordinationV1Api);
  await ignoreNotFound(coordination.deleteNamespacedLease({ name: LEADER_LEASE, namespace: OPERATOR_NS }));
  const op = startOperator({ t: ctx.t, install: ctx.install, kubeConfig: ctx.operatorKubeConfig, env });
  try {
    await body(op);
  } finally {
    await op.stop();
  }
}

/** A context for one scenario run by the install's operator, as its service account through `proxy`. */
export async function operatorContext(
  t: TestCluster,
  install: ManifestObject[],
  proxy: ApiProxy,
  centralUrl: string,
): Promise<ScenarioContext> {
  const operator = await t.serviceAccount(OPERATOR_NS, SERVICE_ACCOUNT);
  return {
    t,
    install,
    operatorKubeConfig: t.kubeConfigFor(proxy.kubeconfigFor(operator.kubeconfig)),
    centralUrl,
    signal: new AbortController().signal,
    run: 1,
  };
}

/** A namespace of this run, in the opt-in admission scope unless told otherwise. */
export async function createNamespace(
  ctx: ScenarioContext,
  prefix: string,
  labels: Record<string, string> = IN_SCOPE,
): Promise<string> {
  const name = `${prefix}-${ctx.run}`;
  await ctx.t.createNamespace(name, labels);
  return name;
}

export const leaderElection: Scenario = {
  name: 'leader-election',
  async run(ctx) {
    const coordination = ctx.t.kc.makeApiClient(CoordinationV1Api);
    await withOperator(ctx, ONLY_LEADER, async (op) => {
      await waitFor(ctx, 'elected', () => op.isLeader());
      const lease = await coordination.readNamespacedLease({ name: LEADER_LEASE, namespace: OPERATOR_NS });
      if (!lease.spec?.holderIdentity) throw new Error('the leader Lease names no holder');
    });
    // --leader-election-release-on-cancel: the stopped leader cleared the Lease.
    const lease = await coordination.readNamespacedLease({ name: LEADER_LEASE, namespace: OPERATOR_NS });
    if (lease.spec?.holderIdentity)
      throw new Error(`the Lease is still held by ${lease.spec.holderIdentity}`);
  },
};

export const berthLease: Scenario = {
  name: 'berthlease-controller',
  async run(ctx) {
    const custom = ctx.t.kc.makeApiClient(CustomObjectsApi);
    const events = ctx.t.kc.makeApiClient(EventsV1Api);
    const namespace = await createNamespace(ctx, 'leases');
    const ref = { group: GROUP, version: VERSION, plural: PLURAL, namespace, name: 'reports-singleton' };
    const env = { ...ONLY_LEADER, BERTH_API_SERVER: ctx.centralUrl, BERTH_CLUSTER_ID: 'cluster-a' };
    await withOperator(ctx, env, async () => {
      await kubectlOk(ctx.t, [
        'apply',
        '-n',
        namespace,
        '-f',
        deployPath('samples/lease-only.yaml').pathname,
      ]);
      await waitFor(ctx, 'the sample BerthLease held', async () => {
        const lease = (await custom.getNamespacedCustomObject(ref)) as {
          metadata: V1ObjectMeta;
          status?: { leaseState?: string; fencingToken?: number };
        };
        return (
          lease.status?.leaseState === LeaseState.Held &&
          (lease.status.fencingToken ?? 0) > 0 &&
          (lease.metadata.finalizers ?? []).length > 0
        );
      });
      await waitFor(ctx, 'an Event about the lease', async () => {
        const list = await events.listNamespacedEvent({ namespace });
        return list.items.some((e) => e.regarding?.kind === 'BerthLease');
      });
      await custom.deleteNamespacedCustomObject(ref);
      await waitFor(
        ctx,
        'the BerthLease released and gone',
        async () => (await apiOutcome(custom.getNamespacedCustomObject(ref))).code === 404,
      );
    });
  },
};

export const nodeTaintGuard: Scenario = {
  name: 'node-taint-guard',
  async run(ctx) {
    const core = ctx.t.kc.makeApiClient(CoreV1Api);
    const events = ctx.t.kc.makeApiClient(EventsV1Api);
    const hasTaint = async () =>
      ((await core.readNode({ name: GUARD_NODE })).spec?.taints ?? []).some((t) => t.key === TAINT_KEY);
    const removeTaint = async () => {
      const node = await core.readNode({ name: GUARD_NODE });
      const taints = (node.spec?.taints ?? []).filter((t) => t.key !== TAINT_KEY);
      await core.patchNode({ name: GUARD_NODE, body: { spec: { taints } } }, mergePatch);
    };
    const seriesCount = async (): Promise<Map<string, number>> => {
      const list = await events.listNamespacedEvent({ namespace: 'default' });
      return new Map(
        list.items
          .filter((e) => e.regarding?.name === GUARD_NODE && e.reason === REARM_EVENT_REASON)
          .map((e) => [e.metadata?.name ?? '', e.series?.count ?? 1]),
      );
    };
    await removeTaint();
    const before = await seriesCount();
    const env = { ...ONLY_LEADER, BERTH_NODE_TAINT_GUARD: 'true', BERTH_TAINT_GRACE: '1ms' };
    await withOperator(ctx, env, async () => {
      await waitFor(ctx, 'the guard taints the node', hasTaint);
      await removeTaint();
      await waitFor(ctx, 'the guard re-arms the taint', hasTaint);
      // The second re-arm of the same node is a series: the Event is patched.
      await waitFor(ctx, 'the re-arm Event patched into a series', async () =>
        [...(await seriesCount())].some(([name, count]) => !before.has(name) && count >= 2),
      );
    });
  },
};

/** A scraper's identity bound (as the admin) to the install's reader role, once the authorizer sees it. */
async function metricsScraper(ctx: ScenarioContext): Promise<{ username: string; token: string }> {
  const scraper = await ctx.t.serviceAccount('monitoring', 'prometheus');
  const rbac = ctx.t.kc.makeApiClient(RbacAuthorizationV1Api);
  const name = 'berth-operator-metrics-reader-prometheus';
  const outcome = await apiOutcome(
    rbac.createClusterRoleBinding({
      body: {
        metadata: { name },
        roleRef: { apiGroup: 'rbac.authorization.k8s.io', kind: 'ClusterRole', name: METRICS_READER_ROLE },
        subjects: [{ kind: 'ServiceAccount', name: 'prometheus', namespace: 'monitoring' }],
      },
    }),
  );
  if (outcome.code !== 200 && outcome.code !== 409) throw new Error(`binding: ${outcome.message}`);
  // Before the first scrape: a denial would be cached for 30 s.
  const authorization = ctx.t.kc.makeApiClient(AuthorizationV1Api);
  await waitFor(ctx, 'the reader binding in effect', async () => {
    const review = await authorization.createSubjectAccessReview({
      body: {
        spec: {
          user: scraper.username,
          groups: scraper.groups,
          nonResourceAttributes: { path: '/metrics', verb: 'get' },
        },
      },
    });
    return review.status?.allowed === true;
  });
  return scraper;
}

/**
 * The install's secure metrics: the operator serves /metrics over HTTPS with a certificate of its own and
 * reviews the scraper's token (TokenReview) and access (SubjectAccessReview).
 */
export const secureMetrics: Scenario = {
  name: 'secure-metrics',
  async run(ctx) {
    const scraper = await metricsScraper(ctx);
    const env = { ...ONLY_LEADER, BERTH_METRICS_BIND_ADDRESS: '127.0.0.1:0' };
    await withOperator(ctx, env, async (op) => {
      const at = await waitFor(ctx, 'the metrics listener', () => op.manager.addresses?.metrics);
      let last = '';
      // Until the certificate is generated, handshakes fail.
      const served = await waitFor(ctx, 'a scrape served', async () => {
        const res = await scrape(at, scraper.token);
        last = `${res.status} ${res.body.slice(0, 200)}`;
        return res.status === 200 ? res : undefined;
      }).catch((err: unknown) => {
        throw err instanceof Aborted ? err : new Error(`${String(err)}; last answer: ${last}`);
      });
      if (!served.body.includes('leader_election_master_status'))
        throw new Error('the scrape did not return the metrics');
      const anonymous = await scrape(at);
      if (anonymous.status !== 401) throw new Error(`a scrape without a token got ${anonymous.status}`);
    });
  },
};

/**
 * Admin-side fixtures (before the webhooks are installed): a Node of no kubelet's (KWOK leaves Nodes
 * without its label alone, so the test writes the agent's status) and a never-Ready agent Pod on it. The
 * Pod tolerates the Node's not-ready and unreachable NoExecute taints, as a DaemonSet Pod does, so the
 * node lifecycle controller does not evict it.
 */
export async function createGuardFixtures(t: TestCluster): Promise<void> {
  const core = t.kc.makeApiClient(CoreV1Api);
  await t.createNamespace(AGENT_NAMESPACE);
  await core.createNode({ body: new NodeBuilder(GUARD_NODE).obj() });
  const tolerations = ['node.kubernetes.io/not-ready', 'node.kubernetes.io/unreachable'].map((key) => ({
    key,
    operator: 'Exists',
    effect: 'NoExecute',
  }));
  await core.createNamespacedPod({
    namespace: AGENT_NAMESPACE,
    body: new PodBuilder('agent-guard-node')
      .labels({ 'app.kubernetes.io/name': 'aether-agent' })
      .nodeName(GUARD_NODE)
      .containers({ name: 'agent', image: 'aether/agent:1' })
      .tolerations(...tolerations)
      .obj(),
  });
  const since = new Date(Date.now() - 3_600_000).toISOString().replace(/\.\d+Z$/, 'Z');
  await core.patchNamespacedPodStatus(
    {
      name: 'agent-guard-node',
      namespace: AGENT_NAMESPACE,
      body: {
        status: {
          phase: 'Running',
          conditions: [{ type: 'Ready', status: 'False', lastTransitionTime: since }],
        },
      },
    },
    mergePatch,
  );
}

/** The container of the workloads the scenarios create. */
export const MAIN_CONTAINER = { name: 'main', image: 'busybox:1.37' };

export async function caBundles(ctx: ScenarioContext): Promise<string[]> {
  const api = ctx.t.kc.makeApiClient(AdmissionregistrationV1Api);
  const m = await api.readMutatingWebhookConfiguration({ name: WEBHOOK_CONFIGURATION_NAME });
  const v = await api.readValidatingWebhookConfiguration({ name: WEBHOOK_CONFIGURATION_NAME });
  return [...(m.webhooks ?? []), ...(v.webhooks ?? [])].map((w) => w.clientConfig.caBundle ?? '');
}

export const trusting =
  (ca: string) =>
  (bundle: string): boolean =>
    Buffer.from(bundle, 'base64').toString('utf8').includes(ca.trim());

export async function caCertificate(ctx: ScenarioContext): Promise<string | undefined> {
  const core = ctx.t.kc.makeApiClient(CoreV1Api);
  const outcome = await apiOutcome(
    core.readNamespacedSecret({ name: CA_SECRET_NAME, namespace: OPERATOR_NS }),
  );
  if (outcome.code === 404) return undefined;
  const secret = await core.readNamespacedSecret({ name: CA_SECRET_NAME, namespace: OPERATOR_NS });
  const pem = Buffer.from(secret.data?.['ca.crt'] ?? '', 'base64').toString('utf8');
  return pem.startsWith('-----BEGIN CERTIFICATE-----') ? pem : undefined;
}

/**
 * Until kube-apiserver calls the install's webhooks and trusts their certificate (it learns the Service's
 * endpoints and the caBundle asynchronously): a dry-run Pod, which the fail-closed webhooks admit only when
 * they answer.
 */
export async function admissionAnswers(ctx: ScenarioContext): Promise<void> {
  const core = ctx.t.kc.makeApiClient(CoreV1Api);
  await waitFor(ctx, 'the API server calls the webhooks', async () => {
    await core.createNamespacedPod({
      namespace: 'default',
      dryRun: 'All',
      body: new PodBuilder({ generateName: 'admission-probe-' })
        .containers({ name: 'c', image: 'busybox:1.37' })
        .obj(),
    });
    return true;
  });
}

const isGated = (pod: V1Pod | undefined): boolean =>
  (pod?.spec?.schedulingGates ?? []).some((g) => g.name === SCHEDULING_GATE);

/**
 * The sample of deploy/samples/deployment/ (applySample) in `namespace` runs: its lease held, its Deployment
 * scaled up, and its Pod ungated and running.
 */
export async function managedDeploymentRuns(ctx: ScenarioContext, namespace: string): Promise<void> {
  const { t } = ctx;
  const custom = t.kc.makeApiClient(CustomObjectsApi);
  const apps = t.kc.makeApiClient(AppsV1Api);
  await waitFor(
    ctx,
    'the sample lease held',
    async () =>
      (
        (await custom.getNamespacedCustomObject({
          group: GROUP,
          version: VERSION,
          plural: PLURAL,
          namespace,
          name: 'web',
        })) as { status?: { leaseState?: string } }
      ).status?.leaseState === LeaseState.Held,
    30_000,
  );
  await waitFor(
    ctx,
    'the sample Deployment activated',
    async () => (await apps.readNamespacedDeployment({ name: 'web', namespace })).spec?.replicas === 1,
  );
  await waitFor(
    ctx,
    'its Pod ungated and running',
    async () =>
      (await t.core.listNamespacedPod({ namespace, labelSelector: 'app.kubernetes.io/name=web' })).items.some(
        (p) =>
          !(p.spec?.schedulingGates ?? []).some((g) => g.name === SCHEDULING_GATE) &&
          p.status?.phase === 'Running',
      ),
    30_000,
  );
}

/**
 * Admission of the samples and of what their controllers create (the owner-chain reads): the Deployment
 * controller's ReplicaSet, a Pod of it (dry run: at 0 replicas its controller would delete a real one at
 * once), a Job of the CronJob and the Job controller's Pod, gated, whose binding is refused.
 */
export async function admitWorkloads(ctx: ScenarioContext, namespace: string): Promise<void> {
  const apps = ctx.t.kc.makeApiClient(AppsV1Api);
  const batch = ctx.t.kc.makeApiClient(BatchV1Api);
  const core = ctx.t.kc.makeApiClient(CoreV1Api);
  for (const sample of ['samples/deployment/', 'samples/cronjob/'])
    await applySample(ctx.t, namespace, sample);
  const deployment = await apps.readNamespacedDeployment({ name: 'web', namespace });
  if (deployment.metadata?.annotations?.[MANAGED_LEASE] !== 'web')
    throw new Error('the sample Deployment was not stamped by the mutating webhook');
  const web = { 'app.kubernetes.io/name': 'web' };
  const rs = await waitFor(ctx, "the Deployment's ReplicaSet", async () =>
    (
      await apps.listNamespacedReplicaSet({ namespace, labelSelector: 'app.kubernetes.io/name=web' })
    ).items.find((r) => r.metadata?.ownerReferences?.some((o) => o.uid === deployment.metadata?.uid)),
  );
  if (rs.metadata?.annotations?.[MANAGED_LEASE] !== 'web')
    throw new Error("the Deployment's ReplicaSet was not stamped by the mutating webhook");
  const pod = await core.createNamespacedPod({
    namespace,
    dryRun: 'All',
    body: new PodBuilder({ generateName: `${rs.metadata.name}-` })
      .labels(web)
      .ownedBy({ ...rs, kind: 'ReplicaSet' })
      .containers(MAIN_CONTAINER)
      .restartPolicy('Always')
      .obj(),
  });
  if (!isGated(pod)) throw new Error('the managed Pod was not born gated');
  const cron = await batch.readNamespacedCronJob({ name: 'nightly-report', namespace });
  const report = { 'app.kubernetes.io/name': 'nightly-report' };
  await batch.createNamespacedJob({
    namespace,
    body: new JobBuilder('nightly-report-1')
      .ownedBy(cron)
      .templateLabels(report)
      .containers(MAIN_CONTAINER)
      .obj(),
  });
  // The Job controller's Pod stays gated: without the lease nothing lifts the gate.
  const jobPod = await waitFor(ctx, "the Job's Pod", async () =>
    (
      await core.listNamespacedPod({
        namespace,
        labelSelector: 'batch.kubernetes.io/job-name=nightly-report-1',
      })
    ).items.at(0),
  );
  if (!isGated(jobPod)) throw new Error("the Job's Pod was not born gated");
  const binding = await apiFailure(
    core.createNamespacedPodBinding({
      name: jobPod.metadata?.name ?? '',
      namespace,
      body: {
        metadata: { name: jobPod.metadata?.name, uid: jobPod.metadata?.uid },
        target: { kind: 'Node', name: GUARD_NODE },
      },
    }),
  );
  if (!binding.message.includes('still scheduling gated')) throw new Error(`binding: ${binding.message}`);
  // A Pod claiming a StatefulSet controller that does not exist: the owner is read, and refused.
  const orphan = await apiFailure(
    core.createNamespacedPod({
      namespace,
      body: new PodBuilder('db-0')
        .ownedBy({ kind: 'StatefulSet', name: 'db', uid: '3b7c4d8e-0000-4000-8000-000000000001' })
        .containers(MAIN_CONTAINER)
        .restartPolicy('Always')
        .obj(),
    }),
  );
  if (!orphan.message.includes('resolve controller owner')) throw new Error(`orphan Pod: ${orphan.message}`);
}

/**
 * As deployed, with the ConfigMap's central API and cluster id set (the install refuses to start
 * without them): admission, certificates and the BerthLease controller.
 */
export const withCentral = (ctx: ScenarioContext) => ({
  BERTH_NODE_TAINT_GUARD: 'false',
  BERTH_API_SERVER: ctx.centralUrl,
  BERTH_CLUSTER_ID: 'cluster-a',
});

export const admission: Scenario = {
  name: 'workload-admission',
  async run(ctx) {
    const core = ctx.t.kc.makeApiClient(CoreV1Api);
    await ignoreNotFound(core.deleteNamespacedSecret({ name: CA_SECRET_NAME, namespace: OPERATOR_NS }));
    // As on a first install: the leader registers both configurations.
    const configs = ctx.t.kc.makeApiClient(AdmissionregistrationV1Api);
    await ignoreNotFound(configs.deleteMutatingWebhookConfiguration({ name: WEBHOOK_CONFIGURATION_NAME }));
    await ignoreNotFound(configs.deleteValidatingWebhookConfiguration({ name: WEBHOOK_CONFIGURATION_NAME }));
    const namespace = await createNamespace(ctx, 'apps');
    await withOperator(ctx, withCentral(ctx), async (op) => {
      const ca = await waitFor(ctx, 'the CA Secret created', () => caCertificate(ctx));
      await waitFor(ctx, 'both configurations registered with the CA', async () =>
        (await caBundles(ctx)).every(trusting(ca)),
      );
      // Readiness includes the start-up check of the live webhook configurations.
      await waitFor(ctx, 'the replica ready', () => op.ready());
      const readyz = await op.manager.probes.runChecks('readyz');
      if (!readyz.some((c) => c.name === 'webhook-configurations'))
        throw new Error('readiness does not check the webhook configurations');
      await admissionAnswers(ctx);
      await admitWorkloads(ctx, namespace);
    });
  },
};

/**
 * The switch from a cluster-wide registration (an older install, or the Go operator's) to the opt-in scope:
 * a namespace holding a stamped object but not the label is labelled by the leader before it narrows the
 * selectors (the namespace patch the install's admission policy allows), and may then not leave the scope
 * (the guard's live LISTs, as the operator).
 */
export const admissionScope: Scenario = {
  name: 'admission-scope',
  async run(ctx) {
    const apps = ctx.t.kc.makeApiClient(AppsV1Api);
    const core = ctx.t.kc.makeApiClient(CoreV1Api);
    const configs = ctx.t.kc.makeApiClient(AdmissionregistrationV1Api);
    const namespace = await createNamespace(ctx, 'legacy', {});
    // What a cluster-wide admission left behind in a namespace that never opted in.
    await apps.createNamespacedDeployment({
      namespace,
      body: new DeploymentBuilder('old')
        .replicas(0)
        .labels({ [MANAGED_UID]: 'uid-of-a-lease' })
        .annotations({ [MANAGED_LEASE]: 'old', [MANAGED_UID]: 'uid-of-a-lease' })
        .containers(MAIN_CONTAINER)
        .obj(),
    });
    // The configurations as the cluster-wide mode registered them.
    const params = {
      namespace: OPERATOR_NS,
      serviceName: WEBHOOK_SERVICE_NAME,
      name: WEBHOOK_CONFIGURATION_NAME,
      scope: AdmissionScope.All,
    };
    await ignoreNotFound(configs.deleteMutatingWebhookConfiguration({ name: WEBHOOK_CONFIGURATION_NAME }));
    await ignoreNotFound(configs.deleteValidatingWebhookConfiguration({ name: WEBHOOK_CONFIGURATION_NAME }));
    await configs.createMutatingWebhookConfiguration({ body: mutatingWebhookConfiguration(params) });
    await configs.createValidatingWebhookConfiguration({ body: validatingWebhookConfiguration(params) });
    await withOperator(ctx, withCentral(ctx), async () => {
      await waitFor(ctx, 'the namespace labelled into the scope', async () =>
        inAdmissionScope((await core.readNamespace({ name: namespace })).metadata?.labels),
      );
      await waitFor(
        ctx,
        'the selectors narrowed to the scope',
        async () =>
          (await configs.readMutatingWebhookConfiguration({ name: WEBHOOK_CONFIGURATION_NAME })).webhooks?.[0]
            ?.namespaceSelector?.matchExpressions?.length === 2,
        30_000,
      );
      // Leaving: the leader's exit controller finds the stamped Deployment (live LISTs) and keeps the label.
      await kubectlOk(ctx.t, ['label', 'namespace', namespace, `${SCOPE_LABEL}=leaving`, '--overwrite']);
      await waitFor(
        ctx,
        'the exit controller naming what holds the namespace',
        async () =>
          (await core.listNamespacedEvent({ namespace: 'default' })).items.some(
            (e) =>
              e.involvedObject.name === namespace &&
              e.reason === 'ScopeExitWaiting' &&
              e.message?.includes('holds Deployment "old", managed for BerthLease "old"'),
          ),
        30_000,
      );
    });
  },
};

export const caReplacement: Scenario = {
  name: 'ca-replacement',
  async run(ctx) {
    const core = ctx.t.kc.makeApiClient(CoreV1Api);
    const junk = { 'ca.crt': Buffer.from('not a certificate').toString('base64') };
    const current = await apiOutcome(
      core.readNamespacedSecret({ name: CA_SECRET_NAME, namespace: OPERATOR_NS }),
    );
    const body = { metadata: { name: CA_SECRET_NAME, namespace: OPERATOR_NS }, data: junk };
    if (current.code === 404) await core.createNamespacedSecret({ namespace: OPERATOR_NS, body });
    else await core.replaceNamespacedSecret({ name: CA_SECRET_NAME, namespace: OPERATOR_NS, body });
    await withOperator(ctx, withCentral(ctx), async (op) => {
      const ca = await waitFor(ctx, 'the unusable CA Secret replaced', () => caCertificate(ctx));
      await waitFor(ctx, 'the caBundles trust the new CA', async () =>
        (await caBundles(ctx)).every(trusting(ca)),
      );
      await waitFor(ctx, 'the replica ready', () => op.ready());
    });
  },
};
