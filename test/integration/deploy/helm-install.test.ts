// The Helm chart installed, upgraded and uninstalled by real Helm on a control plane of its own (the
// webhooks are cluster-wide), under a release name and namespace of its own so that every templated name
// is exercised. The release's Deployment runs 0 replicas (KWOK would fake its Pods); the operator runs in
// this process as the release's ServiceAccount, configured by the release's Deployment, with the webhook
// Service routed here (./operator.ts). It becomes ready with no 403, its leader registers the webhooks
// (WorkloadAdmission's and, with injection.enabled, helper injection's), and a managed Deployment runs; an upgrade to the webhook certificate of an existing Secret keeps the
// webhooks' owner and swaps their caBundle; the uninstall leaves no cluster-scoped object behind but the
// CRD, as the README says.
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { AdmissionregistrationV1Api, RbacAuthorizationV1Api } from '@kubernetes/client-node';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createAuthority } from '../../../hack/controlplane/pki.ts';
import type { ManifestObject } from '../../../scripts/install-manifest.ts';
import { apiOutcome } from '../../helpers/api.ts';
import { ApiProxy, describeRequest } from '../../helpers/api-proxy.ts';
import { IN_SCOPE, TestCluster } from '../../helpers/cluster.ts';
import { eventually } from '../../helpers/eventually.ts';
import { CHART, Helm } from '../../helpers/helm.ts';
import { type Central, startCentral } from '../berth/harness.ts';
import { applySample, kubectlOk } from './install.ts';
import { type RunningOperator, startOperator } from './operator.ts';
import { admissionAnswers, managedDeploymentRuns, type ScenarioContext, waitFor } from './scenarios.ts';

const RELEASE = 'edge';
const NAMESPACE = 'berth-helm';
const FULLNAME = `${RELEASE}-berth-operator`;
const CONFIGURATIONS = `${FULLNAME}-injection-workloads`;
/** The helper-injection configurations (injection.enabled), owned by the ClusterRole of their name. */
const INJECTION = `${FULLNAME}-injection`;
const APPS = 'apps';

let t: TestCluster;
let helm: Helm;
let proxy: ApiProxy;
let central: Central;
let ctx: ScenarioContext;
let certDir: string;
let before: Set<string>;
const kubeconfig = (): { kubeconfig: string } => ({ kubeconfig: t.kubeconfigPath });

/** Every cluster-scoped object that can be listed, as `kind.group/name`. */
async function clusterScoped(): Promise<Set<string>> {
  const kinds = (await kubectlOk(t, ['api-resources', '--namespaced=false', '--verbs=list', '-o', 'name']))
    .split('\n')
    .filter((k) => k !== '');
  const names = await kubectlOk(t, ['get', kinds.join(','), '-o', 'name']);
  return new Set(names.split('\n').filter((n) => n !== ''));
}

const manifest = (): Promise<ManifestObject[]> => helm.manifest(RELEASE, NAMESPACE, kubeconfig());

/** The release's operator, as its ServiceAccount through the recording proxy. */
async function operator(env: Record<string, string> = {}): Promise<RunningOperator> {
  const account = await t.serviceAccount(NAMESPACE, FULLNAME);
  return startOperator({
    t,
    install: await manifest(),
    kubeConfig: t.kubeConfigFor(proxy.kubeconfigFor(account.kubeconfig)),
    // A stopping leader with no successor drains its workloads at once.
    env: { BERTH_HAND_OVER_WAIT: '0s', ...env },
  });
}

const configurations = async (name = CONFIGURATIONS) => {
  const api = t.kc.makeApiClient(AdmissionregistrationV1Api);
  const found = await Promise.all([
    api.readMutatingWebhookConfiguration({ name }).catch(() => undefined),
    api.readValidatingWebhookConfiguration({ name }).catch(() => undefined),
  ]);
  return found.filter((c) => c !== undefined);
};

const ownerUid = async (name = CONFIGURATIONS): Promise<string | undefined> =>
  (await t.kc.makeApiClient(RbacAuthorizationV1Api).readClusterRole({ name })).metadata?.uid;

beforeAll(async () => {
  helm = await Helm.start();
  t = await TestCluster.own();
  proxy = await ApiProxy.start(t);
  central = await startCentral();
  certDir = await mkdtemp(join(tmpdir(), 'berth-helm-certs-'));
  ctx = {
    t,
    install: [],
    operatorKubeConfig: t.kc,
    centralUrl: central.url,
    signal: new AbortController().signal,
    run: 1,
  };
  before = await clusterScoped();
});

afterAll(async () => {
  await central?.stop();
  await proxy?.stop();
  await t?.stop();
  await helm?.stop();
  if (certDir) await rm(certDir, { recursive: true, force: true });
});

describe('helm install, upgrade and uninstall', () => {
  it('installs an operator that serves, registers its webhooks (helper injection too) and runs a managed Deployment, with no 403', async () => {
    // The README's namespace: the operator's Pods run the restricted profile.
    await t.createNamespace(NAMESPACE, { 'pod-security.kubernetes.io/enforce': 'restricted' });
    const values = await helm.valuesArgs([
      {
        clusterID: 'cluster-a',
        berth: { apiServer: central.url },
        workloadManagement: { enabled: true },
        injection: { enabled: true },
        replicaCount: 0,
      },
    ]);
    await helm.ok(['install', RELEASE, CHART, '-n', NAMESPACE, ...values], kubeconfig());
    await t.createNamespace(APPS, IN_SCOPE);
    const op = await operator();
    try {
      await waitFor(ctx, 'the replica ready', () => op.ready(), 30_000);
      await waitFor(
        ctx,
        'both webhook configurations registered',
        async () => (await configurations()).length === 2,
      );
      await waitFor(
        ctx,
        'both injection configurations registered',
        async () => (await configurations(INJECTION)).length === 2,
      );
      for (const name of [CONFIGURATIONS, INJECTION]) {
        const uid = await ownerUid(name);
        for (const c of await configurations(name))
          expect(c.metadata?.ownerReferences).toEqual([
            expect.objectContaining({ kind: 'ClusterRole', name, uid }),
          ]);
      }
      await admissionAnswers(ctx);
      await applySample(t, APPS, 'samples/deployment/');
      await managedDeploymentRuns(ctx, APPS);
    } finally {
      await op.stop();
    }
    expect(proxy.forbidden().map(describeRequest)).toEqual([]);
  }, 120_000);

  it("upgrades to an existing Secret's certificate: the webhooks keep their owner and trust the new CA", async () => {
    const uid = await ownerUid();
    const ca = await createAuthority('corporate-pki');
    const service = `${FULLNAME}-webhook`;
    const pair = await ca.serving([
      service,
      `${service}.${NAMESPACE}.svc`,
      `${service}.${NAMESPACE}.svc.cluster.local`,
    ]);
    await t.core.createNamespacedSecret({
      namespace: NAMESPACE,
      body: {
        metadata: { name: 'edge-webhook-tls' },
        type: 'kubernetes.io/tls',
        stringData: { 'tls.crt': pair.cert, 'tls.key': pair.key },
      },
    });
    const caBundle = Buffer.from(ca.cert).toString('base64');
    const values = await helm.valuesArgs([
      { injection: { webhook: { tls: { existingSecret: 'edge-webhook-tls', caBundle } } } },
    ]);
    await helm.ok(['upgrade', RELEASE, CHART, '-n', NAMESPACE, '--reuse-values', ...values], kubeconfig());
    expect(await ownerUid()).toBe(uid);
    // The operator's own CA is no longer used: its Secret's Role went with the upgrade.
    const rbac = t.kc.makeApiClient(RbacAuthorizationV1Api);
    expect(
      (await apiOutcome(rbac.readNamespacedRole({ name: `${FULLNAME}-webhook-ca`, namespace: NAMESPACE })))
        .code,
    ).toBe(404);
    // What the projected volume holds in a Pod: the Secret's pair and the caBundle as ca.crt.
    const bundle = await t.core.readNamespacedConfigMap({
      name: `${FULLNAME}-webhook-ca-bundle`,
      namespace: NAMESPACE,
    });
    await writeFile(join(certDir, 'tls.crt'), pair.cert);
    await writeFile(join(certDir, 'tls.key'), pair.key, { mode: 0o600 });
    await writeFile(join(certDir, 'ca.crt'), bundle.data?.['ca.crt'] ?? '');
    const op = await operator({ BERTH_CERT_DIR: certDir });
    try {
      await waitFor(ctx, 'the upgraded replica ready', () => op.ready(), 30_000);
      await waitFor(ctx, "the webhooks trusting the Secret's CA", async () => {
        const hooks = (await configurations()).flatMap((c) => c.webhooks ?? []);
        const trusted = (w: (typeof hooks)[number]) =>
          Buffer.from(w.clientConfig.caBundle ?? '', 'base64')
            .toString('utf8')
            .trim() === ca.cert.trim();
        // Two workload webhooks and the opt-in scope's two guards.
        return hooks.length === 4 && hooks.every(trusted);
      });
      await admissionAnswers(ctx);
      await managedDeploymentRuns(ctx, APPS);
    } finally {
      await op.stop();
    }
    expect(proxy.forbidden().map(describeRequest)).toEqual([]);
  }, 120_000);

  it('uninstalls without a trace outside the namespace but the kept CRD, and admits workloads again', async () => {
    const out = await helm.ok(['uninstall', RELEASE, '-n', NAMESPACE, '--wait'], kubeconfig());
    expect(out).toContain('berthleases.berth.skaphos.io');
    // The garbage collector follows the deleted ClusterRoles.
    await eventually(
      async () => (await configurations()).length + (await configurations(INJECTION)).length === 0,
      { timeoutMs: 60_000 },
    );
    const after = await clusterScoped();
    expect([...before].filter((o) => !after.has(o))).toEqual([]);
    expect([...after].filter((o) => !before.has(o)).sort()).toEqual([
      // The API server's own registration of the kept CRD's group.
      'apiservice.apiregistration.k8s.io/v1alpha1.berth.skaphos.io',
      'customresourcedefinition.apiextensions.k8s.io/berthleases.berth.skaphos.io',
      `namespace/${APPS}`,
      `namespace/${NAMESPACE}`,
    ]);
    await kubectlOk(t, [
      'create',
      'deployment',
      'unguarded',
      '-n',
      APPS,
      '--image=registry.example.com/app:1',
    ]);
  }, 120_000);
});
