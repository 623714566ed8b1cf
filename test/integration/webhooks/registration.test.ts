// The leader's webhook registration against the real API server, as its own user with the install's
// least-privilege rules (scripts/deploy-rbac.ts, for this test's names) and through the fault proxy. The
// configurations are harmless stand-ins (they match no namespace) so that the shared control plane is
// not affected. Registration waits for its owner ClusterRole and for a ready endpoint of the Service,
// then creates both with the CA bundle and the owner reference; it undoes a wiped caBundle, a relaxed
// failurePolicy and a deletion from the watches alone (the resync is set far away), follows a CA change,
// keeps what others write beside its fields, never overwrites a concurrent change, leaves everything in
// place when it stops, and the garbage collector removes the configurations with their ClusterRole.
import { X509Certificate } from 'node:crypto';
import {
  AdmissionregistrationV1Api,
  CoreV1Api,
  DiscoveryV1Api,
  RbacAuthorizationV1Api,
  type V1MutatingWebhookConfiguration,
  type V1ValidatingWebhook,
  type V1ValidatingWebhookConfiguration,
} from '@kubernetes/client-node';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { caData } from '../../../certs/authority.ts';
import { SecretCaStore } from '../../../certs/ca-store.ts';
import { serviceDnsNames } from '../../../certs/create.ts';
import { generateCa } from '../../../certs/issue.ts';
import { splitPemCertificates, toCaBundleField } from '../../../certs/pem.ts';
import { SelfSignedCertificateProvider } from '../../../certs/selfsigned.ts';
import {
  caSecretRules,
  webhookEndpointsRule,
  webhookRegistrationRules,
} from '../../../scripts/deploy-rbac.ts';
import { isNotFound } from '../../../src/kube/client.ts';
import { createRegistry } from '../../../src/observability/metrics.ts';
import { WebhookRegistration } from '../../../webhooks/registration.ts';
import { ApiProxy } from '../../helpers/api-proxy.ts';
import { TestCluster, uniqueName } from '../../helpers/cluster.ts';
import { eventually } from '../../helpers/eventually.ts';

const SECRET = 'berth-operator-webhook-ca';
/** Both configurations' name and their owner ClusterRole's, unique on the shared cluster. */
const CONFIG = uniqueName('berth-operator-workloads');
const SERVICE = 'berth-operator-webhook';
const SLICE = `${SERVICE}-test`;

let t: TestCluster;
let proxy: ApiProxy;
/** Stands for the operator namespace. */
let ns: string;
let admission: AdmissionregistrationV1Api;
let discovery: DiscoveryV1Api;
let rbac: RbacAuthorizationV1Api;
let operatorUser: string;
let provider: SelfSignedCertificateProvider;
let registration: WebhookRegistration;
const registry = createRegistry({ defaultMetrics: false });

const webhook = (name: string, path: string): V1ValidatingWebhook => ({
  name,
  admissionReviewVersions: ['v1'],
  sideEffects: 'None',
  failurePolicy: 'Fail',
  clientConfig: { service: { namespace: ns, name: SERVICE, path } },
  rules: [{ apiGroups: [''], apiVersions: ['v1'], operations: ['CREATE'], resources: ['configmaps'] }],
  // Never called in this test: no namespace carries this label.
  namespaceSelector: { matchLabels: { 'berth-test': 'never' } },
});
const mutatingConfig = (): V1MutatingWebhookConfiguration => ({
  metadata: { name: CONFIG, labels: { 'app.kubernetes.io/name': 'berth-operator' } },
  webhooks: [
    webhook('mutate-a.berth.skaphos.io', '/mutate-a'),
    webhook('mutate-b.berth.skaphos.io', '/mutate-b'),
  ],
});
const validatingConfig = (): V1ValidatingWebhookConfiguration => ({
  metadata: { name: CONFIG, labels: { 'app.kubernetes.io/name': 'berth-operator' } },
  webhooks: [webhook('validate.berth.skaphos.io', '/validate')],
});

const readBoth = async () => {
  const m = await admission.readMutatingWebhookConfiguration({ name: CONFIG }).catch(absent);
  const v = await admission.readValidatingWebhookConfiguration({ name: CONFIG }).catch(absent);
  return { m, v };
};
function absent(err: unknown): undefined {
  if (isNotFound(err)) return undefined;
  throw err;
}
const want = (): string => toCaBundleField(provider.current()!.ca!);
/** Both registered as built, with the current CA and owned by the ClusterRole `ownerUid`. */
const registered = async (ownerUid?: string): Promise<boolean> => {
  const { m, v } = await readBoth();
  if (m === undefined || v === undefined) return false;
  const hooks = [...(m.webhooks ?? []), ...(v.webhooks ?? [])];
  const owners = [m, v].map((c) => c.metadata?.ownerReferences?.map((r) => `${r.kind}/${r.name}/${r.uid}`));
  return (
    hooks.length === 3 &&
    hooks.every((w) => w.clientConfig.caBundle === want() && w.failurePolicy === 'Fail') &&
    (ownerUid === undefined || owners.every((o) => o?.includes(`ClusterRole/${CONFIG}/${ownerUid}`)))
  );
};
const writes = async (action: string): Promise<number> =>
  (await registry.getSingleMetric('berth_webhook_registration_writes_total')!.get()).values
    .filter((v) => v.labels.action === action)
    .reduce((s, v) => s + v.value, 0);

const setSlice = async (ready: boolean): Promise<void> => {
  const body = {
    metadata: {
      name: SLICE,
      namespace: ns,
      labels: {
        'kubernetes.io/service-name': SERVICE,
        'endpointslice.kubernetes.io/managed-by': 'berth-test',
      },
    },
    addressType: 'IPv4',
    endpoints: [{ addresses: ['10.0.0.1'], conditions: { ready } }],
    ports: [{ name: 'https', port: 9443, protocol: 'TCP' }],
  };
  const current = await discovery.readNamespacedEndpointSlice({ name: SLICE, namespace: ns }).catch(absent);
  if (current === undefined) await discovery.createNamespacedEndpointSlice({ namespace: ns, body });
  else
    await discovery.replaceNamespacedEndpointSlice({
      name: SLICE,
      namespace: ns,
      body: { ...body, metadata: { ...body.metadata, resourceVersion: current.metadata?.resourceVersion } },
    });
};
/** A JSON patch of one of the configurations with kubectl, as an administrator would make it. */
async function kubectlPatch(kind: string, patch: string): Promise<void> {
  const r = await t.kubectl(['patch', kind, CONFIG, '--type=json', '-p', patch]);
  expect(r.code, r.stderr).toBe(0);
}
const createOwner = async (): Promise<string> => {
  const role = await rbac.createClusterRole({ body: { metadata: { name: CONFIG }, rules: [] } });
  return role.metadata!.uid!;
};

let ownerUid = '';
let operatorKc: ReturnType<TestCluster['kubeConfigFor']>;

async function startRegistration(kc = operatorKc): Promise<void> {
  operatorKc = kc;
  registration = new WebhookRegistration({
    transport: t.transport(kc),
    mutating: mutatingConfig(),
    validating: validatingConfig(),
    service: { namespace: ns, name: SERVICE },
    source: provider,
    // Far away: everything below must come from the watches or the provider's change events.
    resyncIntervalMs: 10 * 60_000,
    registry,
  });
  await registration.start();
}

beforeAll(async () => {
  t = await TestCluster.shared();
  ns = await t.namespace('registration');
  proxy = await ApiProxy.start(t);
  admission = t.kc.makeApiClient(AdmissionregistrationV1Api);
  discovery = t.kc.makeApiClient(DiscoveryV1Api);
  rbac = t.kc.makeApiClient(RbacAuthorizationV1Api);
  t.onCleanup(`webhook configurations ${CONFIG}`, async () => {
    await admission.deleteMutatingWebhookConfiguration({ name: CONFIG }).catch(absent);
    await admission.deleteValidatingWebhookConfiguration({ name: CONFIG }).catch(absent);
    await rbac.deleteClusterRole({ name: CONFIG }).catch(absent);
  });
  // The operator runs as its own user, so faults can target its requests only.
  const user = await t.user(uniqueName('operator'));
  operatorUser = user.username;
  await t.grant(operatorUser, [...caSecretRules(SECRET), webhookEndpointsRule()], ns);
  await t.grant(operatorUser, webhookRegistrationRules(CONFIG));
  const operator = t.kubeConfigFor(proxy.kubeconfigFor(user.kubeconfig));
  provider = new SelfSignedCertificateProvider({
    store: new SecretCaStore({ transport: t.transport(operator), namespace: ns, name: SECRET }),
    dnsNames: serviceDnsNames(SERVICE, ns),
    checkIntervalMs: 200,
    registry,
  });
  await provider.start();
  await provider.waitForCertificate();
  await startRegistration(operator);
});
afterAll(async () => {
  await registration?.stop();
  await provider?.stop();
  await proxy?.stop();
  await t?.stop();
});

describe('webhook registration', () => {
  it('registers nothing without its owner ClusterRole, nor while the Service has no ready endpoint', async () => {
    const ownerRead = (status: number) => () =>
      proxy.records.some((r) => r.resource === 'clusterroles' && r.status === status);
    // A ready endpoint, but no owner: a configuration would outlive the install.
    await setSlice(true);
    await eventually(ownerRead(404));
    expect(await readBoth()).toEqual({ m: undefined, v: undefined });
    // The owner, but the endpoint turns unready (the slice's change triggers the next reconcile).
    ownerUid = await createOwner();
    await setSlice(false);
    await eventually(ownerRead(200));
    expect(await readBoth()).toEqual({ m: undefined, v: undefined });
    expect(await writes('create')).toBe(0);
  });

  it('registers both once an endpoint is ready, with the CA bundle and the owner reference', async () => {
    await setSlice(true);
    await eventually(() => registered(ownerUid));
    expect(await writes('create')).toBe(2);
    const { m } = await readBoth();
    expect(m?.webhooks?.map((w) => w.clientConfig.service?.path)).toEqual(['/mutate-a', '/mutate-b']);
  });

  it('keeps them, unchanged, when the endpoint becomes unready (fail closed)', async () => {
    await setSlice(false);
    const before = await readBoth();
    await eventually(async () => proxy.records.filter((r) => r.resource === 'endpointslices').length > 0);
    expect(await registered(ownerUid)).toBe(true);
    expect((await readBoth()).m?.metadata?.resourceVersion).toBe(before.m?.metadata?.resourceVersion);
    await setSlice(true);
  });

  it('undoes a caBundle wiped with kubectl and a failurePolicy relaxed to Ignore', async () => {
    await eventually(() => registered(ownerUid));
    const before = await writes('update');
    await kubectlPatch(
      'validatingwebhookconfiguration',
      '[{"op":"remove","path":"/webhooks/0/clientConfig/caBundle"}]',
    );
    await kubectlPatch(
      'mutatingwebhookconfiguration',
      '[{"op":"replace","path":"/webhooks/1/failurePolicy","value":"Ignore"}]',
    );
    await eventually(() => registered(ownerUid));
    expect(await writes('update')).toBe(before + 2);
  });

  it('registers a deleted configuration again', async () => {
    await admission.deleteValidatingWebhookConfiguration({ name: CONFIG });
    await eventually(() => registered(ownerUid));
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
    await eventually(() => registered(ownerUid));
  });

  it("never overwrites a concurrent change: the guarded update gets a 409, re-reads and keeps the other writer's label", async () => {
    await eventually(() => registered(ownerUid));
    // Hold the operator's next update of the validating configuration until someone else has changed it.
    const labelled = Promise.withResolvers<void>();
    const held = proxy.inject({
      verbs: ['update'],
      resource: 'validatingwebhookconfigurations',
      user: operatorUser,
      until: labelled.promise,
      times: 1,
    });
    try {
      await kubectlPatch(
        'validatingwebhookconfiguration',
        '[{"op":"remove","path":"/webhooks/0/clientConfig/caBundle"}]',
      );
      await eventually(() => held.hits() === 1);
      // While the update waits, someone labels the object (an unguarded write would drop the label).
      const label = await t.kubectl(['label', 'validatingwebhookconfiguration', CONFIG, 'team=platform']);
      labelled.resolve();
      expect(label.code, label.stderr).toBe(0);
      await eventually(() => registered(ownerUid));
      const { v } = await readBoth();
      expect(v?.metadata?.labels?.team).toBe('platform');
      expect(
        proxy.records.some((r) => r.resource === 'validatingwebhookconfigurations' && r.status === 409),
      ).toBe(true);
    } finally {
      labelled.resolve();
      held.remove();
    }
  });

  it('leaves both in place when it stops (a leader handing over, a crash)', async () => {
    await eventually(() => registered(ownerUid));
    await registration.stop();
    expect(await registered(ownerUid)).toBe(true);
    await startRegistration();
  });

  it('is removed with its owner ClusterRole by the garbage collector, and not registered again', async () => {
    await eventually(() => registered(ownerUid));
    const creates = await writes('create');
    const seen = proxy.records.length;
    await rbac.deleteClusterRole({ name: CONFIG });
    await eventually(
      async () => {
        const { m, v } = await readBoth();
        return m === undefined && v === undefined;
      },
      { timeoutMs: 30_000 },
    );
    // The registration saw the deletions and found its owner gone.
    await eventually(() =>
      proxy.records.slice(seen).some((r) => r.resource === 'clusterroles' && r.status === 404),
    );
    const posts = proxy.records.slice(seen).filter((r) => r.verb === 'create');
    expect(posts.map((r) => `${r.resource} ${r.status}`)).toEqual([]);
    expect(await writes('create')).toBe(creates);
    expect(await readBoth()).toEqual({ m: undefined, v: undefined });
  });
});
