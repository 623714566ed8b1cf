// Both charts installed by real Helm on a control plane of their own, as a cluster admin would install the
// pair: the berth-apiserver release (Kubernetes Lease store in a namespace of its own, static keys from a
// Secret, TLS from a Secret signed by a test CA, auth required) and the berth-operator release pointed at the
// central release's in-cluster Service URL, with the API key Secret and the CA ConfigMap its values name and
// workload management on. Both Deployments run 0 replicas (KWOK would fake their Pods): each runs in this
// process as its Deployment configures it (./central-release.ts, ./operator.ts with releaseFiles: args and
// environment, the Secret keys and mounted files the kubelet would give it, its ServiceAccount through the
// recording proxy). Nothing here resolves cluster DNS, so only the authority of the operator's central URL
// is replaced, by the Service's routed endpoint, and the TLS server name is the Service's DNS name: the
// certificate is still verified against the CA bundle the operator release mounts. The sample managed
// Deployment runs on a lease of the central release (its record a Lease of the store namespace, with the
// BerthLease's fencing token), with no 403 for either ServiceAccount; a wrong key in the operator's Secret
// is refused (401, HeartbeatHealthy=False/AcquireFailed) and the right one acquires again; the uninstall of
// both leaves only the documented leftovers.
import { randomBytes } from 'node:crypto';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { AppsV1Api, CoordinationV1Api, CustomObjectsApi } from '@kubernetes/client-node';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type Authority, createAuthority } from '../../../hack/controlplane/pki.ts';
import { containerEnvironment, type ManifestObject } from '../../../scripts/install-manifest.ts';
import {
  type BerthLeaseStatus,
  ConditionReason,
  ConditionType,
  GROUP,
  LeaseState,
  PLURAL,
  VERSION,
} from '../../../src/berth/api.ts';
import { sha256Hex } from '../../../src/central/auth.ts';
import { ApiProxy, describeRequest } from '../../helpers/api-proxy.ts';
import { IN_SCOPE, TestCluster } from '../../helpers/cluster.ts';
import { eventually } from '../../helpers/eventually.ts';
import { APISERVER_CHART, CHART, Helm } from '../../helpers/helm.ts';
import {
  apiserverFullname,
  type RunningCentral,
  serviceEndpoint,
  standInValues,
  startCentralRelease,
} from './central-release.ts';
import { applySample, listedObjects } from './install.ts';
import { type RunningOperator, releaseFiles, startOperator } from './operator.ts';
import { managedDeploymentRuns, type ScenarioContext, waitFor } from './scenarios.ts';

const CENTRAL_RELEASE = 'central';
const CENTRAL_NAMESPACE = 'berth-central';
/** The central store's Leases, in a namespace of their own. */
const LEASES = 'berth-leases';
const CENTRAL = apiserverFullname(CENTRAL_RELEASE);
/** The Service's DNS name, which its certificate names. */
const CENTRAL_DNS = `${CENTRAL}.${CENTRAL_NAMESPACE}.svc`;
/** routeService routes port 443 of a Service. */
const CENTRAL_PORT = 443;
const CENTRAL_URL = `https://${CENTRAL_DNS}:${CENTRAL_PORT}`;
const RELEASE = 'edge';
const NAMESPACE = 'berth-edge';
const FULLNAME = `${RELEASE}-berth-operator`;
/** The Secret the operator chart reads BERTH_API_KEY from when berth.apiKey.secretName is unset. */
const API_KEY_SECRET = `${FULLNAME}-api-key`;
const CA_CONFIGMAP = 'central-ca';
/** The cluster id, the static key's id (the tenant) and the sample BerthLease's holderIdentity. */
const CLUSTER_ID = 'cluster-a';
const TOKEN = randomBytes(24).toString('hex');
const APPS = 'apps';
/** The sample's central lease (namespace, name) as the k8s store names its Lease. */
const LEASE_RECORD = `${APPS}.web`;

let t: TestCluster;
let helm: Helm;
let proxy: ApiProxy;
let ca: Authority;
let scratch: string;
let ctx: ScenarioContext;
let before: { cluster: Set<string>; namespaced: Set<string> };
/** The sample's token at the first install: a later grant's must be higher. */
let firstToken = 0;
const kubeconfig = (): { kubeconfig: string } => ({ kubeconfig: t.kubeconfigPath });
const objects = () => listedObjects(t, [CENTRAL_NAMESPACE, LEASES, NAMESPACE]);

const startCentral = async (): Promise<RunningCentral> =>
  startCentralRelease({
    t,
    proxy,
    install: await helm.manifest(CENTRAL_RELEASE, CENTRAL_NAMESPACE, kubeconfig()),
    namespace: CENTRAL_NAMESPACE,
    fullname: CENTRAL,
    scratch,
  });

/**
 * The operator release's replica: its configuration as the Deployment gives it (ConfigMap, the API key
 * Secret, the mounted CA bundle), but for the central URL's authority, the routed endpoint of the central
 * Service, and the TLS server name, that Service's DNS name (what the URL's host would have given).
 */
async function startReleaseOperator(install: ManifestObject[]): Promise<RunningOperator> {
  const files = await releaseFiles(t, install, await mkdtemp(join(scratch, 'operator-')));
  const account = await t.serviceAccount(NAMESPACE, FULLNAME);
  const endpoint = await serviceEndpoint(t, CENTRAL_NAMESPACE, CENTRAL);
  return startOperator({
    t,
    install,
    kubeConfig: t.kubeConfigFor(proxy.kubeconfigFor(account.kubeconfig)),
    ...files,
    env: {
      BERTH_API_SERVER: CENTRAL_URL.replace(/^https:\/\/[^/]+/, `https://${endpoint}`),
      BERTH_SERVER_NAME: CENTRAL_DNS,
      // A stopping leader with no successor drains its workloads at once.
      BERTH_HAND_OVER_WAIT: '0s',
    },
  });
}

async function sampleStatus(): Promise<BerthLeaseStatus | undefined> {
  const lease = (await t.kc.makeApiClient(CustomObjectsApi).getNamespacedCustomObject({
    group: GROUP,
    version: VERSION,
    plural: PLURAL,
    namespace: APPS,
    name: 'web',
  })) as { status?: BerthLeaseStatus };
  return lease.status;
}

const leaseRecord = () =>
  t.kc.makeApiClient(CoordinationV1Api).readNamespacedLease({ namespace: LEASES, name: LEASE_RECORD });

const writeApiKey = (token: string) =>
  t.core.replaceNamespacedSecret({
    namespace: NAMESPACE,
    name: API_KEY_SECRET,
    body: { metadata: { name: API_KEY_SECRET }, stringData: { 'api-key': token } },
  });

/** The sample held with a token of the central release, which its Lease record carries. */
async function heldOnTheCentralRelease(): Promise<number> {
  await managedDeploymentRuns(ctx, APPS);
  const status = await sampleStatus();
  expect(status).toMatchObject({ leaseState: LeaseState.Held, currentHolder: CLUSTER_ID });
  const token = status?.fencingToken ?? 0;
  expect(token).toBeGreaterThan(0);
  const record = await leaseRecord();
  expect(record.metadata?.labels).toMatchObject({ 'berth.skaphos.io/managed-by': 'berth' });
  expect(record.spec).toMatchObject({ holderIdentity: CLUSTER_ID, leaseTransitions: token });
  return token;
}

/** Each release's ServiceAccount was refused nothing; the central's used only the store's Leases. */
function noForbiddenRequests(): void {
  expect(proxy.forbidden().map(describeRequest)).toEqual([]);
  const central = proxy.records.filter(
    (r) => r.user === `system:serviceaccount:${CENTRAL_NAMESPACE}:${CENTRAL}`,
  );
  expect(central.length).toBeGreaterThan(0);
  for (const r of central) expect(`${r.resource} in ${r.namespace}`).toBe(`leases in ${LEASES}`);
  expect(proxy.records.some((r) => r.user === `system:serviceaccount:${NAMESPACE}:${FULLNAME}`)).toBe(true);
}

beforeAll(async () => {
  helm = await Helm.start();
  t = await TestCluster.own();
  proxy = await ApiProxy.start(t);
  scratch = await mkdtemp(join(tmpdir(), 'berth-helm-pair-'));
  ca = await createAuthority('berth-pair-test-ca');
  ctx = {
    t,
    install: [],
    operatorKubeConfig: t.kc,
    centralUrl: CENTRAL_URL,
    signal: new AbortController().signal,
    run: 1,
  };
  const restricted = { 'pod-security.kubernetes.io/enforce': 'restricted' };
  await t.createNamespace(CENTRAL_NAMESPACE, restricted);
  await t.createNamespace(LEASES);
  await t.createNamespace(NAMESPACE, restricted);
  await t.createNamespace(APPS, IN_SCOPE);
  // The central release's Secrets: its serving pair and the clients' key digests.
  const pair = await ca.serving([CENTRAL, CENTRAL_DNS, `${CENTRAL_DNS}.cluster.local`]);
  await t.core.createNamespacedSecret({
    namespace: CENTRAL_NAMESPACE,
    body: {
      metadata: { name: 'central-tls' },
      type: 'kubernetes.io/tls',
      stringData: { 'tls.crt': pair.cert, 'tls.key': pair.key },
    },
  });
  await t.core.createNamespacedSecret({
    namespace: CENTRAL_NAMESPACE,
    body: {
      metadata: { name: 'central-keys' },
      stringData: { 'api-keys': `${CLUSTER_ID}:${sha256Hex(TOKEN)}\n` },
    },
  });
  // The operator release's: its token, and the CA that signed the central's certificate.
  await t.core.createNamespacedSecret({
    namespace: NAMESPACE,
    body: { metadata: { name: API_KEY_SECRET }, stringData: { 'api-key': TOKEN } },
  });
  await t.core.createNamespacedConfigMap({
    namespace: NAMESPACE,
    body: { metadata: { name: CA_CONFIGMAP }, data: { 'ca.crt': ca.cert } },
  });
  before = await objects();
});

afterAll(async () => {
  await proxy?.stop();
  await t?.stop();
  await helm?.stop();
  if (scratch) await rm(scratch, { recursive: true, force: true });
});

describe('helm install of both charts: a working pair', () => {
  it('runs the sample managed Deployment on a lease of the central release, with no 403', async () => {
    const centralValues = await helm.valuesArgs([
      standInValues({
        leases: LEASES,
        tlsSecret: 'central-tls',
        keysSecret: 'central-keys',
        port: CENTRAL_PORT,
      }),
    ]);
    await helm.ok(
      ['install', CENTRAL_RELEASE, APISERVER_CHART, '-n', CENTRAL_NAMESPACE, '--wait', ...centralValues],
      kubeconfig(),
    );
    const operatorValues = await helm.valuesArgs([
      {
        clusterID: CLUSTER_ID,
        berth: { apiServer: CENTRAL_URL, tls: { caBundleConfigMap: CA_CONFIGMAP } },
        workloadManagement: { enabled: true },
        replicaCount: 0,
      },
    ]);
    await helm.ok(['install', RELEASE, CHART, '-n', NAMESPACE, '--wait', ...operatorValues], kubeconfig());
    const install = await helm.manifest(RELEASE, NAMESPACE, kubeconfig());
    // What the release itself configures: the URL, the cluster id, the key from its Secret and the CA
    // bundle's path; no server name (the URL's host is the one).
    const files = await releaseFiles(t, install, await mkdtemp(join(scratch, 'check-')));
    const env = containerEnvironment(install, files.secretKey);
    expect(env).toMatchObject({
      BERTH_API_SERVER: CENTRAL_URL,
      BERTH_CLUSTER_ID: CLUSTER_ID,
      BERTH_API_KEY: TOKEN,
      BERTH_CA_BUNDLE_FILE: '/etc/berth/tls/ca.crt',
    });
    expect(env.BERTH_SERVER_NAME).toBeUndefined();

    const central = await startCentral();
    try {
      const op = await startReleaseOperator(install);
      try {
        await waitFor(ctx, 'the replica ready', () => op.ready(), 30_000);
        await applySample(t, APPS, 'samples/deployment/');
        firstToken = await heldOnTheCentralRelease();
      } finally {
        expect(await op.stop()).toBe(0);
      }
    } finally {
      await central.stop();
    }
    noForbiddenRequests();
  }, 180_000);

  it("authenticates the operator by its Secret's key: a wrong one is refused (401), the right one acquires", async () => {
    const install = await helm.manifest(RELEASE, NAMESPACE, kubeconfig());
    const central = await startCentral();
    try {
      // A changed key Secret takes a restart of the operator's Pods (env from a Secret).
      await writeApiKey(`not-${TOKEN}`);
      const wrong = await startReleaseOperator(install);
      try {
        const condition = await waitFor(
          ctx,
          'HeartbeatHealthy=False/AcquireFailed',
          async () =>
            (await sampleStatus())?.conditions?.find(
              (c) =>
                c.type === ConditionType.HeartbeatHealthy &&
                c.status === 'False' &&
                c.reason === ConditionReason.AcquireFailed,
            ),
          30_000,
        );
        expect(condition.message).toContain('server status 401');
        // The central refused every call: its record is the first grant's.
        expect((await leaseRecord()).spec?.leaseTransitions).toBe(firstToken);
        expect(
          (await t.kc.makeApiClient(AppsV1Api).readNamespacedDeployment({ namespace: APPS, name: 'web' }))
            .spec?.replicas,
        ).toBe(0);
      } finally {
        expect(await wrong.stop()).toBe(0);
      }
      await writeApiKey(TOKEN);
      const right = await startReleaseOperator(install);
      try {
        expect(await heldOnTheCentralRelease()).toBeGreaterThan(firstToken);
      } finally {
        expect(await right.stop()).toBe(0);
      }
    } finally {
      await central.stop();
    }
    noForbiddenRequests();
  }, 180_000);

  it('uninstalls both, leaving only the documented leftovers', async () => {
    await helm.ok(['uninstall', RELEASE, '-n', NAMESPACE, '--wait'], kubeconfig());
    await helm.ok(['uninstall', CENTRAL_RELEASE, '-n', CENTRAL_NAMESPACE, '--wait'], kubeconfig());
    // The EndpointSlices go with the Services; the webhook configurations with their ClusterRole.
    const after = await eventually(
      async () => {
        const now = await objects();
        const released = (o: string) => o.includes(`/${CENTRAL}`) || o.includes('webhookconfiguration');
        return [...now.namespaced, ...now.cluster].some(released) ? undefined : now;
      },
      { timeoutMs: 60_000 },
    );
    if (after === undefined) throw new Error('unreachable: eventually resolves with a value');
    expect([...before.cluster].filter((o) => !after.cluster.has(o))).toEqual([]);
    expect([...after.cluster].filter((o) => !before.cluster.has(o)).sort()).toEqual([
      // The kept CRD and the API server's own registration of its group.
      'apiservice.apiregistration.k8s.io/v1alpha1.berth.skaphos.io',
      'customresourcedefinition.apiextensions.k8s.io/berthleases.berth.skaphos.io',
    ]);
    expect([...before.namespaced].filter((o) => !after.namespaced.has(o))).toEqual([]);
    expect([...after.namespaced].filter((o) => !before.namespaced.has(o)).sort()).toEqual([
      // The operator's leader Lease and its self-signed webhook CA (docs/helm.md, "Upgrade and uninstall").
      `${NAMESPACE}/lease.coordination.k8s.io/${FULLNAME}-leader`,
      `${NAMESPACE}/secret/${FULLNAME}-webhook-ca`,
      // The central lease record, which must outlive the server (a fencing token never repeats).
      `${LEASES}/lease.coordination.k8s.io/${LEASE_RECORD}`,
    ]);
  }, 120_000);
});
