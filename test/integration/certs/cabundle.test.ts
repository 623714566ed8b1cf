// The leader's caBundle reconciler against the real API server, as its own user with the install's
// least-privilege rules (scripts/deploy-rbac.ts, for this test's names) and through the fault proxy: it
// fills both configurations (which share a name, as the chart's do), restores a wiped or altered caBundle
// from the watch alone (the resync is set far away), follows a CA change, fills a configuration created
// later, and never overwrites a concurrent edit.
import { X509Certificate } from 'node:crypto';
import {
  AdmissionregistrationV1Api,
  CoreV1Api,
  type V1MutatingWebhookConfiguration,
  type V1PolicyRule,
  type V1ValidatingWebhookConfiguration,
} from '@kubernetes/client-node';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { caData } from '../../../certs/authority.ts';
import { SecretCaStore } from '../../../certs/ca-store.ts';
import { CaBundleReconciler } from '../../../certs/cabundle.ts';
import { serviceDnsNames } from '../../../certs/create.ts';
import { generateCa } from '../../../certs/issue.ts';
import { splitPemCertificates, toCaBundleField } from '../../../certs/pem.ts';
import { SelfSignedCertificateProvider } from '../../../certs/selfsigned.ts';
import { caBundleRule, caSecretRules, webhookConfigurationRule } from '../../../scripts/deploy-rbac.ts';
import { isNotFound } from '../../../src/kube/client.ts';
import { createRegistry } from '../../../src/observability/metrics.ts';
import { ApiProxy } from '../../helpers/api-proxy.ts';
import { TestCluster, uniqueName } from '../../helpers/cluster.ts';
import { eventually } from '../../helpers/eventually.ts';

const SECRET = 'berth-operator-webhook-ca';
/** Both configurations' name, unique on the shared cluster. */
const CONFIG = uniqueName('berth-operator-workloads');
const SERVICE = 'berth-operator-webhook';

let t: TestCluster;
let proxy: ApiProxy;
/** Stands for the operator namespace. */
let ns: string;
let admission: AdmissionregistrationV1Api;
let operatorUser: string;
let provider: SelfSignedCertificateProvider;
let reconciler: CaBundleReconciler;
const registry = createRegistry({ defaultMetrics: false });

/** The install's rules for the CA Secret and the caBundle (GET from the base layer, the rest selfsigned). */
const SECRET_RULES: V1PolicyRule[] = caSecretRules(SECRET);
const CABUNDLE_RULES: V1PolicyRule[] = [caBundleRule([CONFIG]), webhookConfigurationRule([CONFIG], ['get'])];

const webhook = (name: string, path: string, caBundle?: string) => ({
  name,
  admissionReviewVersions: ['v1'],
  sideEffects: 'None',
  clientConfig: { service: { namespace: ns, name: SERVICE, path }, ...(caBundle ? { caBundle } : {}) },
  rules: [{ apiGroups: [''], apiVersions: ['v1'], operations: ['CREATE'], resources: ['configmaps'] }],
  // Never called in this test: no namespace carries this label.
  namespaceSelector: { matchLabels: { 'berth-test': 'never' } },
});

const mutatingConfig = (): V1MutatingWebhookConfiguration => ({
  metadata: { name: CONFIG },
  webhooks: [
    webhook('mutate-a.berth.skaphos.io', '/mutate-a', toCaBundleField('stale')),
    webhook('mutate-b.berth.skaphos.io', '/mutate-b'),
  ],
});
const validatingConfig = (): V1ValidatingWebhookConfiguration => ({
  metadata: { name: CONFIG },
  webhooks: [webhook('validate.berth.skaphos.io', '/validate')],
});

const bundles = async (): Promise<{ mutating: string[]; validating: string[] }> => {
  const m = await admission.readMutatingWebhookConfiguration({ name: CONFIG });
  const v = await admission.readValidatingWebhookConfiguration({ name: CONFIG });
  return {
    mutating: (m.webhooks ?? []).map((w) => w.clientConfig.caBundle ?? ''),
    validating: (v.webhooks ?? []).map((w) => w.clientConfig.caBundle ?? ''),
  };
};
const want = (): string => toCaBundleField(provider.current()!.ca!);
const allWanted = async (): Promise<boolean> => {
  const b = await bundles();
  return [...b.mutating, ...b.validating].every((x) => x === want()) && b.mutating.length === 2;
};
const writes = async (): Promise<number> =>
  (await registry.getSingleMetric('berth_webhook_cabundle_writes_total')!.get()).values.reduce(
    (s, v) => s + v.value,
    0,
  );

beforeAll(async () => {
  t = await TestCluster.shared();
  ns = await t.namespace('cabundle');
  proxy = await ApiProxy.start(t);
  admission = t.kc.makeApiClient(AdmissionregistrationV1Api);
  const ignoreMissing = (err: unknown): void => {
    if (!isNotFound(err)) throw err;
  };
  await admission.createMutatingWebhookConfiguration({ body: mutatingConfig() });
  t.onCleanup(`mutatingwebhookconfiguration ${CONFIG}`, () =>
    admission.deleteMutatingWebhookConfiguration({ name: CONFIG }).catch(ignoreMissing),
  );
  await admission.createValidatingWebhookConfiguration({ body: validatingConfig() });
  t.onCleanup(`validatingwebhookconfiguration ${CONFIG}`, () =>
    admission.deleteValidatingWebhookConfiguration({ name: CONFIG }).catch(ignoreMissing),
  );
  // The operator runs as its own user, so faults can target its requests only.
  const user = await t.user(uniqueName('operator'));
  operatorUser = user.username;
  await t.grant(operatorUser, SECRET_RULES, ns);
  await t.grant(operatorUser, CABUNDLE_RULES);
  const operator = t.kubeConfigFor(proxy.kubeconfigFor(user.kubeconfig));
  provider = new SelfSignedCertificateProvider({
    store: new SecretCaStore({ kc: operator, namespace: ns, name: SECRET }),
    dnsNames: serviceDnsNames(SERVICE, ns),
    checkIntervalMs: 200,
    registry,
  });
  await provider.start();
  await provider.waitForCertificate();
  reconciler = new CaBundleReconciler({
    kc: operator,
    mutatingWebhookConfiguration: CONFIG,
    validatingWebhookConfiguration: CONFIG,
    source: provider,
    // Far away: everything below must come from the watch or the provider's change events.
    resyncIntervalMs: 10 * 60_000,
    registry,
  });
  await reconciler.start();
});
afterAll(async () => {
  await reconciler?.stop();
  await provider?.stop();
  await proxy?.stop();
  await t?.stop();
});

describe('caBundle reconciler', () => {
  it('fills every webhook of both configurations, leaving the rest untouched', async () => {
    await eventually(allWanted);
    const m = await admission.readMutatingWebhookConfiguration({ name: CONFIG });
    expect(m.webhooks?.map((w) => w.clientConfig.service?.path)).toEqual(['/mutate-a', '/mutate-b']);
    expect(m.webhooks?.[0]?.namespaceSelector).toEqual({ matchLabels: { 'berth-test': 'never' } });
    expect(await writes()).toBe(2);
  });

  it('restores a caBundle wiped with kubectl, on both configurations', async () => {
    await eventually(allWanted);
    const before = await writes();
    const wipe = await t.kubectl([
      'patch',
      'validatingwebhookconfiguration',
      CONFIG,
      '--type=json',
      '-p',
      '[{"op":"remove","path":"/webhooks/0/clientConfig/caBundle"}]',
    ]);
    expect(wipe.stderr).toBe('');
    const wipe2 = await t.kubectl([
      'patch',
      'mutatingwebhookconfiguration',
      CONFIG,
      '--type=json',
      '-p',
      '[{"op":"remove","path":"/webhooks/1/clientConfig/caBundle"}]',
    ]);
    expect(wipe2.code).toBe(0);
    await eventually(allWanted);
    expect(await writes()).toBe(before + 2);
  });

  it('restores a caBundle replaced by other content (a re-applied manifest)', async () => {
    const m = await admission.readMutatingWebhookConfiguration({ name: CONFIG });
    const replaced = await admission.replaceMutatingWebhookConfiguration({
      name: CONFIG,
      body: { ...mutatingConfig(), metadata: { name: CONFIG, resourceVersion: m.metadata?.resourceVersion } },
    });
    // The written object, not a later read: the reconciler may already have restored it by then.
    expect(replaced.webhooks?.[0]?.clientConfig.caBundle).toBe(toCaBundleField('stale'));
    await eventually(allWanted);
  });

  it('fills a configuration deleted and created again', async () => {
    await admission.deleteValidatingWebhookConfiguration({ name: CONFIG });
    await admission.createValidatingWebhookConfiguration({ body: validatingConfig() });
    await eventually(allWanted);
  });

  it('follows a CA change in the Secret', async () => {
    const old = want();
    const core = t.kc.makeApiClient(CoreV1Api);
    const secret = await core.readNamespacedSecret({ name: SECRET, namespace: ns });
    const foreign = await generateCa({ now: Date.now(), validityMs: 86_400_000 });
    const data = Object.fromEntries(
      Object.entries(caData({ current: foreign })).map(([k, v]) => [k, Buffer.from(v).toString('base64')]),
    );
    await core.replaceNamespacedSecret({
      name: SECRET,
      namespace: ns,
      body: { metadata: { name: SECRET, resourceVersion: secret.metadata?.resourceVersion }, data },
    });
    await eventually(() => want() !== old);
    const served = splitPemCertificates(provider.current()!.ca!).map(
      (c) => new X509Certificate(c).fingerprint256,
    );
    expect(served).toEqual([foreign.info.fingerprint]);
    await eventually(allWanted);
  });

  it('never undoes a concurrent change: the guarded patch gets a 409, re-reads and retries', async () => {
    await eventually(allWanted);
    // Hold the operator's next patch of the validating configuration while someone else changes it.
    const held = proxy.inject({
      verbs: ['patch'],
      resource: 'validatingwebhookconfigurations',
      user: operatorUser,
      delayMs: 500,
      times: 1,
    });
    try {
      const v = await admission.readValidatingWebhookConfiguration({ name: CONFIG });
      await admission.replaceValidatingWebhookConfiguration({
        name: CONFIG,
        body: {
          ...validatingConfig(),
          metadata: { name: CONFIG, resourceVersion: v.metadata?.resourceVersion },
        },
      });
      await eventually(() => held.hits() === 1);
      // While the patch waits, someone changes a webhook (a stale, unguarded write of the list would undo it).
      const current = await admission.readValidatingWebhookConfiguration({ name: CONFIG });
      const edited = validatingConfig();
      edited.webhooks![0]!.clientConfig.service!.path = '/validate-v2';
      await admission.replaceValidatingWebhookConfiguration({
        name: CONFIG,
        body: { ...edited, metadata: { name: CONFIG, resourceVersion: current.metadata?.resourceVersion } },
      });
      await eventually(allWanted);
      const after = await admission.readValidatingWebhookConfiguration({ name: CONFIG });
      expect(after.webhooks?.[0]?.clientConfig.service?.path).toBe('/validate-v2');
    } finally {
      held.remove();
    }
  });
});
