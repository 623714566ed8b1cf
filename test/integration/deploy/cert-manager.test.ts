// deploy/install-cert-manager.yaml applied to a cluster of its own (fixed names, cluster-wide webhooks) with
// its real RBAC: the operator, configured by
// that install's Deployment (--cert-mode files, the cert dir), serves admission with the serving
// certificate cert-manager would write and the caBundle its cainjector would inject — with the base RBAC
// only: no Secret access, no writes to the webhook configurations, no 403. cert-manager is not installed:
// schemaless CRDs let its Issuer and Certificate apply, and the test does what it would (issue the
// certificate into the mounted directory, inject the CA into the caBundles).
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { AdmissionregistrationV1Api, CoreV1Api } from '@kubernetes/client-node';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createAuthority } from '../../../hack/controlplane/pki.ts';
import { CERT_MANAGER_CERTIFICATE, CERT_MANAGER_INJECT_ANNOTATION } from '../../../scripts/deploy.ts';
import {
  OPERATOR_NAMESPACE,
  SERVICE_ACCOUNT,
  WEBHOOK_CONFIGURATION_NAME,
} from '../../../scripts/deploy-rbac.ts';
import { find, type ManifestObject, readInstall } from '../../../scripts/install-manifest.ts';
import { jsonPatch } from '../../helpers/api.ts';
import { ApiProxy, describeRequest } from '../../helpers/api-proxy.ts';
import { TestCluster } from '../../helpers/cluster.ts';
import { applyInstall, kubectlOk, withoutOperatorPods } from './install.ts';
import {
  admissionAnswers,
  admitWorkloads,
  GUARD_NODE,
  type ScenarioContext,
  waitFor,
  withOperator,
} from './scenarios.ts';

/** Schemaless stand-ins for cert-manager's CRDs, so that the install applies unchanged. */
const certManagerShim = ['Issuer', 'Certificate']
  .map(
    (kind) => `apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: ${kind.toLowerCase()}s.cert-manager.io
spec:
  group: cert-manager.io
  names: {kind: ${kind}, listKind: ${kind}List, plural: ${kind.toLowerCase()}s, singular: ${kind.toLowerCase()}}
  scope: Namespaced
  versions:
  - name: v1
    served: true
    storage: true
    schema:
      openAPIV3Schema:
        type: object
        properties:
          spec: {type: object, x-kubernetes-preserve-unknown-fields: true}
`,
  )
  .join('---\n');

interface Certificate {
  spec: { secretName: string; dnsNames: string[] };
}

let t: TestCluster;
let proxy: ApiProxy;
let install: ManifestObject[];
let certDir: string;
let caCert: string;

beforeAll(async () => {
  t = await TestCluster.own();
  await t.kc.makeApiClient(CoreV1Api).createNode({ body: { metadata: { name: GUARD_NODE } } });
  await kubectlOk(t, ['apply', '-f', '-'], certManagerShim);
  await kubectlOk(t, [
    'wait',
    '--for=condition=Established',
    'crd/issuers.cert-manager.io',
    'crd/certificates.cert-manager.io',
  ]);
  const read = await readInstall('install-cert-manager.yaml');
  install = read.objects;
  await applyInstall(t, read.text);
  await withoutOperatorPods(t);
  proxy = await ApiProxy.start(t);
  // What cert-manager would issue into the Certificate's Secret (mounted at --cert-dir).
  const certificate = find<Certificate>(install, 'Certificate', CERT_MANAGER_CERTIFICATE);
  const ca = await createAuthority('cert-manager-issuer');
  const pair = await ca.serving(certificate.spec.dnsNames);
  caCert = ca.cert;
  certDir = await mkdtemp(join(tmpdir(), 'berth-serving-certs-'));
  await writeFile(join(certDir, 'tls.crt'), pair.cert);
  await writeFile(join(certDir, 'tls.key'), pair.key, { mode: 0o600 });
  await writeFile(join(certDir, 'ca.crt'), ca.cert);
}, 60_000);

afterAll(async () => {
  await proxy?.stop();
  await t?.stop();
  if (certDir) await rm(certDir, { recursive: true, force: true });
});

describe('deploy/install-cert-manager.yaml with RBAC enforced', () => {
  it('serves admission with the mounted certificate and the injected CA, with no 403', async () => {
    const api = t.kc.makeApiClient(AdmissionregistrationV1Api);
    // cert-manager's cainjector: the CA of the annotated Certificate into every webhook's caBundle.
    const caBundle = Buffer.from(caCert).toString('base64');
    for (const kind of ['mutating', 'validating'] as const) {
      const read =
        kind === 'mutating'
          ? await api.readMutatingWebhookConfiguration({ name: WEBHOOK_CONFIGURATION_NAME })
          : await api.readValidatingWebhookConfiguration({ name: WEBHOOK_CONFIGURATION_NAME });
      expect(read.metadata?.annotations?.[CERT_MANAGER_INJECT_ANNOTATION]).toBe(
        `${OPERATOR_NAMESPACE}/${CERT_MANAGER_CERTIFICATE}`,
      );
      const body = (read.webhooks ?? []).map((_, i) => ({
        op: 'add',
        path: `/webhooks/${i}/clientConfig/caBundle`,
        value: caBundle,
      }));
      if (kind === 'mutating')
        await api.patchMutatingWebhookConfiguration({ name: WEBHOOK_CONFIGURATION_NAME, body }, jsonPatch);
      else
        await api.patchValidatingWebhookConfiguration({ name: WEBHOOK_CONFIGURATION_NAME, body }, jsonPatch);
    }
    const operator = await t.serviceAccount(OPERATOR_NAMESPACE, SERVICE_ACCOUNT);
    const ctx: ScenarioContext = {
      t,
      install,
      operatorKubeConfig: t.kubeConfigFor(proxy.kubeconfigFor(operator.kubeconfig)),
      centralUrl: '',
      signal: new AbortController().signal,
      run: 1,
    };
    await t.createNamespace('apps-1');
    // Only the cert dir differs from the Deployment: the Secret's mount point is not writable here.
    await withOperator(ctx, { BERTH_CERT_DIR: certDir }, async (op) => {
      await waitFor(ctx, 'the replica ready', () => op.ready());
      await admissionAnswers(ctx);
      await admitWorkloads(ctx, 'apps-1');
    });
    expect(proxy.forbidden().map(describeRequest)).toEqual([]);
    expect(proxy.records.filter((r) => r.resource === 'secrets').map(describeRequest)).toEqual([]);
    const writes = proxy.records.filter(
      (r) => r.resource.endsWith('webhookconfigurations') && r.verb !== 'get',
    );
    expect(writes.map(describeRequest)).toEqual([]);
    // The start-up check read both configurations.
    for (const resource of ['mutatingwebhookconfigurations', 'validatingwebhookconfigurations'])
      expect(proxy.records.some((r) => r.resource === resource && r.verb === 'get' && r.status === 200)).toBe(
        true,
      );
  }, 60_000);
});
