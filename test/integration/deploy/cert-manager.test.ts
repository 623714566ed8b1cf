// deploy/install-cert-manager.yaml applied to a cluster of its own (fixed names, cluster-wide webhooks) with
// its real RBAC: the operator, configured by that install's Deployment (--cert-mode files, the cert dir),
// serves admission with the serving certificate cert-manager would write, and registers both webhook
// configurations with the mounted ca.crt as their caBundle — with the base RBAC only: no Secret access, no
// 403. cert-manager is not installed: schemaless CRDs let its Issuer and Certificate apply, and the test
// does what it would (issue the certificate into the mounted directory).
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { AdmissionregistrationV1Api, CoreV1Api } from '@kubernetes/client-node';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createAuthority } from '../../../hack/controlplane/pki.ts';
import { CERT_MANAGER_CERTIFICATE } from '../../../scripts/deploy.ts';
import { WEBHOOK_CONFIGURATION_NAME } from '../../../scripts/deploy-rbac.ts';
import { find, type ManifestObject, readInstall } from '../../../scripts/install-manifest.ts';
import { ApiProxy, describeRequest } from '../../helpers/api-proxy.ts';
import { IN_SCOPE, TestCluster } from '../../helpers/cluster.ts';
import { type Central, startCentral } from '../berth/harness.ts';
import { applyInstall, kubectlOk, withoutOperatorPods } from './install.ts';
import {
  admissionAnswers,
  admitWorkloads,
  GUARD_NODE,
  operatorContext,
  waitFor,
  withCentral,
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
let central: Central;

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
  central = await startCentral();
}, 60_000);

afterAll(async () => {
  await central?.stop();
  await proxy?.stop();
  await t?.stop();
  if (certDir) await rm(certDir, { recursive: true, force: true });
});

describe('deploy/install-cert-manager.yaml with RBAC enforced', () => {
  it('registers the webhooks with the mounted CA and serves admission with the mounted certificate, with no 403', async () => {
    const api = t.kc.makeApiClient(AdmissionregistrationV1Api);
    // The install ships none: nothing is blocked before the operator serves.
    await expect(
      api.readMutatingWebhookConfiguration({ name: WEBHOOK_CONFIGURATION_NAME }),
    ).rejects.toThrow();
    const ctx = await operatorContext(t, install, proxy, central.url);
    await t.createNamespace('apps-1', IN_SCOPE);
    // Only the cert dir differs from the Deployment: the Secret's mount point is not writable here.
    await withOperator(ctx, { ...withCentral(ctx), BERTH_CERT_DIR: certDir }, async (op) => {
      await waitFor(ctx, 'the replica ready', () => op.ready());
      // Registered by the leader once the Service had a ready endpoint, trusting the mounted ca.crt.
      const caBundle = Buffer.from(caCert).toString('base64');
      await waitFor(ctx, 'both configurations registered with the ca.crt', async () => {
        const m = await api
          .readMutatingWebhookConfiguration({ name: WEBHOOK_CONFIGURATION_NAME })
          .catch(() => undefined);
        const v = await api
          .readValidatingWebhookConfiguration({ name: WEBHOOK_CONFIGURATION_NAME })
          .catch(() => undefined);
        // Two workload webhooks and the opt-in scope's two guards.
        const hooks = [...(m?.webhooks ?? []), ...(v?.webhooks ?? [])];
        return hooks.length === 4 && hooks.every((w) => w.clientConfig.caBundle === caBundle);
      });
      await admissionAnswers(ctx);
      await admitWorkloads(ctx, 'apps-1');
    });
    expect(proxy.forbidden().map(describeRequest)).toEqual([]);
    expect(proxy.records.filter((r) => r.resource === 'secrets').map(describeRequest)).toEqual([]);
    const writes = proxy.records.filter(
      (r) => r.resource.endsWith('webhookconfigurations') && !['get', 'list', 'watch'].includes(r.verb),
    );
    expect(writes.map((r) => `${r.verb} ${r.resource} ${r.status}`).sort()).toEqual([
      'create mutatingwebhookconfigurations 201',
      'create validatingwebhookconfigurations 201',
    ]);
  }, 60_000);
});
