// The Helm chart rendered by real Helm (built from its Go module): `helm lint`; `helm template` against
// golden files; the chart with the values equivalent to each kustomize install renders exactly the objects
// of that install (modulo Helm's own labels and annotations), so the two cannot drift; the Go chart's
// values map onto the operator's flags as the real flag parser reads the rendered Deployment; and what
// the chart refuses, it refuses naming the value. (The install lifecycle: ./helm-install.test.ts.)
import type { V1Container, V1Deployment } from '@kubernetes/client-node';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { DEFAULT_CERT_DIR } from '../../../certs/files.ts';
import {
  containerEnvironment,
  find,
  type ManifestObject,
  operatorContainer,
  readInstall,
} from '../../../scripts/install-manifest.ts';
import { parseFlags } from '../../../src/cli.ts';
import { parseRunConfig } from '../../../src/config.ts';
import { parseFeatureConfigs } from '../../../src/features.ts';
import { brokerConfig } from '../../../src/oidc-broker/config.ts';
import { oidcBrokerCommand } from '../../../src/oidc-broker/spec.ts';
import { runCommand } from '../../../src/run.ts';
import { CHART, Helm } from '../../helpers/helm.ts';
import { byId, renderOverlay } from './install.ts';

const fixture = (name: string): string => new URL(`../../fixtures/helm/${name}`, import.meta.url).pathname;
const REQUIRED = fixture('required-values.yaml');
const INSTALL = fixture('install-values.yaml');

let helm: Helm;

beforeAll(async () => {
  helm = await Helm.start();
});
afterAll(async () => {
  await helm?.stop();
});

/** The install as the README has it configured: its ConfigMap holding the central API and the cluster id. */
function configured(objects: ManifestObject[]): ManifestObject[] {
  return objects
    .filter((o) => o.kind !== 'Namespace')
    .map((o) =>
      o.kind === 'ConfigMap' && o.metadata.name === 'berth-operator-config'
        ? { ...o, data: { BERTH_API_SERVER: 'https://berth.example.com', BERTH_CLUSTER_ID: 'cluster-a' } }
        : o,
    );
}

/**
 * How the operator in a Pod of these objects is configured, through the real flag parser; `mounted` stands
 * for what the kubelet would provide (a Secret's key, a mounted file's path) by variable.
 */
function brokerContainer(objects: ManifestObject[]): V1Container {
  const container = find<V1Deployment>(objects, 'Deployment').spec?.template.spec?.containers.find(
    (c) => c.name === 'oidc-broker',
  );
  if (container === undefined) throw new Error('the Deployment has no oidc-broker container');
  return container;
}

function operatorConfig(objects: ManifestObject[], mounted: Record<string, string> = {}) {
  const [command, ...argv] = operatorContainer(objects).args ?? [];
  expect(command).toBe('run');
  const pod = JSON.parse(JSON.stringify(objects)) as ManifestObject[];
  const container = operatorContainer(pod);
  container.env = container.env?.map((e) =>
    mounted[e.name] === undefined ? e : { name: e.name, value: mounted[e.name] },
  );
  const env = containerEnvironment(pod);
  const flags = parseFlags(runCommand, argv, env);
  const config = parseRunConfig(flags);
  return { config, features: parseFeatureConfigs(flags, config.namespace) };
}

describe('helm lint', () => {
  it.each([
    ['the required values', [REQUIRED]],
    ['the PrometheusRule and the dashboard', [REQUIRED, fixture('monitoring-values.yaml')]],
    ["deploy/install.yaml's values", [INSTALL]],
    ['an existing Secret', [fixture('existing-secret-values.yaml')]],
    ["a Go chart's values", [fixture('go-chart-values.yaml')]],
    ["a Go chart's injection values", [fixture('go-chart-injection-values.yaml')]],
    ['the sidecar broker', [fixture('oidc-broker-values.yaml')]],
  ])('passes --strict with %s', async (_what, values) => {
    const r = await helm.run(['lint', '--strict', CHART, ...(await helm.valuesArgs(values))]);
    expect(r.stderr + r.stdout).toContain('1 chart(s) linted, 0 chart(s) failed');
    expect(r.code).toBe(0);
  });
});

describe('helm template', () => {
  it.each([
    ['default', [REQUIRED]],
    ['cert-manager', [INSTALL, { webhookCertificates: { mode: 'cert-manager' } }]],
    ['existing-secret', [fixture('existing-secret-values.yaml')]],
    ['go-chart', [fixture('go-chart-values.yaml')]],
    ['injection', [fixture('go-chart-injection-values.yaml')]],
    ['oidc-broker', [fixture('oidc-broker-values.yaml')]],
    ['monitoring', [REQUIRED, fixture('monitoring-values.yaml')]],
  ])('renders %s as its golden file', async (name, values) => {
    const r = await helm.template({ values });
    expect(r.stderr).toBe('');
    await expect(r.stdout).toMatchFileSnapshot(`../../fixtures/helm/golden/${name}.yaml`);
  });
});

describe('the chart and the kustomize installs', () => {
  it.each([
    ['install.yaml', [INSTALL]],
    ['install-cert-manager.yaml', [INSTALL, { webhookCertificates: { mode: 'cert-manager' } }]],
  ])('renders deploy/%s with the equivalent values', async (file, values) => {
    const install = configured((await readInstall(file)).objects);
    const chart = await helm.render({ values });
    expect(byId(chart)).toEqual(byId(install));
    expect(containerEnvironment(chart)).toEqual(containerEnvironment(install));
  });

  it('renders the injection overlay with injection.enabled', async () => {
    const overlay = configured((await renderOverlay('kustomize/overlays/injection')).objects);
    const chart = await helm.render({ values: [INSTALL, { injection: { enabled: true } }] });
    expect(byId(chart)).toEqual(byId(overlay));
    expect(containerEnvironment(chart)).toEqual(containerEnvironment(overlay));
  });

  it('renders the node-taint-guard overlay with nodeTaintGuard.enabled', async () => {
    const overlay = configured((await renderOverlay('kustomize/overlays/node-taint-guard')).objects);
    const chart = await helm.render({ values: [INSTALL, { nodeTaintGuard: { enabled: true } }] });
    expect(byId(chart)).toEqual(byId(overlay));
  });
});

describe('the values, as the operator reads them', () => {
  it('runs a lease-only operator by default: no webhook, certificate or admission RBAC', async () => {
    const objects = await helm.render({ values: [REQUIRED] });
    const { config, features } = operatorConfig(objects);
    expect(features.berth).toMatchObject({ apiServer: 'https://berth.example.com', clusterId: 'cluster-a' });
    expect(features.webhook.enableWorkloadAdmission).toBe(false);
    expect(features.nodeTaint.enabled).toBe(false);
    expect(config.leaderElect).toBe(true);
    expect(config.leaderElectionId).toBe('berth-operator-leader');
    expect(objects.map((o) => `${o.kind}/${o.metadata.name}`).sort()).toEqual([
      'ClusterRole/berth-operator',
      'ClusterRoleBinding/berth-operator',
      'ConfigMap/berth-operator-config',
      'CustomResourceDefinition/berthleases.berth.skaphos.io',
      'Deployment/berth-operator',
      'PodDisruptionBudget/berth-operator',
      'Role/berth-operator-leader-election',
      'RoleBinding/berth-operator-leader-election',
      'Service/berth-operator-metrics',
      'ServiceAccount/berth-operator',
    ]);
    const rules = find<{ rules: { resources?: string[] }[] }>(objects, 'ClusterRole', 'berth-operator').rules;
    expect(rules.flatMap((r) => r.resources ?? [])).not.toContain('pods');
  });

  it("takes the central API's CA from a Secret's key (cert-manager's ca.crt) as from a ConfigMap's", async () => {
    const objects = await helm.render({
      values: [REQUIRED, { berth: { tls: { caBundleSecret: 'central-tls', caBundleKey: 'ca.crt' } } }],
    });
    const container = operatorContainer(objects);
    expect(container.env?.find((e) => e.name === 'BERTH_CA_BUNDLE_FILE')?.value).toBe(
      '/etc/berth/tls/ca.crt',
    );
    expect(container.volumeMounts?.find((m) => m.mountPath === '/etc/berth/tls')?.name).toBe('berth-ca');
    const volumes = find<V1Deployment>(objects, 'Deployment').spec?.template.spec?.volumes ?? [];
    // Only the CA key is projected: the Secret's tls.key never reaches the operator's filesystem.
    expect(volumes.find((v) => v.name === 'berth-ca')).toEqual({
      name: 'berth-ca',
      secret: { secretName: 'central-tls', items: [{ key: 'ca.crt', path: 'ca.crt' }] },
    });
  });

  it("maps a Go chart's values file onto the flags", async () => {
    const objects = await helm.render({
      release: 'east',
      namespace: 'berth',
      values: [fixture('go-chart-values.yaml')],
    });
    const container = operatorContainer(objects);
    expect(container.env?.find((e) => e.name === 'BERTH_API_KEY')?.valueFrom).toEqual({
      secretKeyRef: { name: 'berth-api-key', key: 'api-key' },
    });
    expect(container.env?.find((e) => e.name === 'BERTH_CA_BUNDLE_FILE')?.value).toBe(
      '/etc/berth/tls/ca.crt',
    );
    expect(container.volumeMounts?.find((m) => m.mountPath === '/etc/berth/tls')?.name).toBe('berth-ca');
    const { config, features } = operatorConfig(objects, {
      BERTH_API_KEY: 'key-from-the-secret',
      BERTH_CA_BUNDLE_FILE: fixture('ca.crt'),
    });
    expect(config).toMatchObject({
      namespace: 'berth',
      leaderElect: true,
      leaderElectionId: 'east-berth-operator-leader',
      leaderElectionLeaseDuration: 20_000,
      metricsSecure: true,
    });
    expect(features.berth).toMatchObject({
      apiServer: 'https://berth.example.com:8443',
      clusterId: 'cluster-east',
      apiKey: 'key-from-the-secret',
      serverName: 'berth.internal',
    });
    expect(features.webhook).toMatchObject({
      enableWorkloadAdmission: true,
      workloadOperatorUser: 'system:serviceaccount:berth:east-berth-operator',
      workloadOperatorNamespace: 'berth',
      webhookConfigurationName: 'east-berth-operator-injection-workloads',
    });
    expect(features.certs).toMatchObject({
      certMode: 'files',
      certDir: DEFAULT_CERT_DIR,
      webhookServiceName: 'east-berth-operator-webhook',
    });
    // The Go chart's issuer signs the serving certificate; no CA of the chart's own.
    const certificates = objects.filter((o) => o.kind === 'Certificate');
    expect(certificates.map((c) => (c as { spec?: { issuerRef?: unknown } }).spec?.issuerRef)).toEqual([
      { name: 'berth-ca', kind: 'ClusterIssuer' },
    ]);
    expect(objects.filter((o) => o.kind === 'Issuer')).toEqual([]);
    // The owner of the webhook configurations the operator registers, named like them.
    expect(find(objects, 'ClusterRole', 'east-berth-operator-injection-workloads')).toBeDefined();
    expect(find(objects, 'ClusterRoleBinding', 'east-berth-operator-metrics-reader')).toMatchObject({
      subjects: [{ kind: 'ServiceAccount', name: 'prometheus', namespace: 'monitoring' }],
    });
  });

  it("runs the sidecar broker from the operator's image, its args read by the real flag parser", async () => {
    const objects = await helm.render({ values: [fixture('oidc-broker-values.yaml')] });
    const broker = brokerContainer(objects);
    expect(broker.image).toBe(`${operatorContainer(objects).image}`);
    const [command, ...argv] = broker.args ?? [];
    expect(command).toBe('oidc-broker');
    expect(brokerConfig(parseFlags(oidcBrokerCommand, argv))).toEqual({
      issuerUrl: 'https://login.example.com/realms/berth',
      tokenUrl: '',
      clientId: 'berth-operator-east',
      clientSecret: '',
      clientSecretFile: '/etc/berth/oidc/client-secret',
      audience: 'berth-api',
      scopes: ['leases', 'openid'],
      outputPath: '/var/run/berth/token',
      refreshSkewMs: 120_000,
      minRefreshMs: 30_000,
      fetchTimeoutMs: 30_000,
      maxRetryMs: 600_000,
    });
    expect(broker.volumeMounts?.map((m) => [m.name, m.mountPath, m.readOnly ?? false])).toEqual([
      ['berth-token', '/var/run/berth', false],
      ['oidc-client-secret', '/etc/berth/oidc', true],
    ]);
    const operator = operatorContainer(objects);
    expect(operator.env?.find((e) => e.name === 'BERTH_API_KEY_FILE')?.value).toBe('/var/run/berth/token');
    expect(operator.volumeMounts?.find((m) => m.name === 'berth-token')).toEqual({
      name: 'berth-token',
      mountPath: '/var/run/berth',
      readOnly: true,
    });
    const volumes = find<V1Deployment>(objects, 'Deployment').spec?.template.spec?.volumes ?? [];
    expect(volumes.find((v) => v.name === 'oidc-client-secret')?.secret?.secretName).toBe(
      'berth-oidc-client',
    );
    expect(volumes.find((v) => v.name === 'berth-token')?.emptyDir?.medium).toBe('Memory');
  });

  it("runs the Go project's broker image with implementation go: the same flags, without the subcommand", async () => {
    const objects = await helm.render({
      values: [
        fixture('oidc-broker-values.yaml'),
        {
          sidecarBroker: {
            implementation: 'go',
            image: { repository: 'ghcr.io/skaphos/berth-oidc-broker', tag: 'v0.4.1' },
            oidc: { issuerURL: '', tokenURL: 'https://login.example.com/oauth2/token' },
          },
        },
      ],
    });
    const broker = brokerContainer(objects);
    expect(broker.image).toBe('ghcr.io/skaphos/berth-oidc-broker:v0.4.1');
    expect(broker.args?.[0]).toBe('--oidc-token-url=https://login.example.com/oauth2/token');
    expect(brokerConfig(parseFlags(oidcBrokerCommand, broker.args ?? []))).toMatchObject({
      issuerUrl: '',
      tokenUrl: 'https://login.example.com/oauth2/token',
      maxRetryMs: 600_000,
    });
  });

  it('passes workloadManagement.stopLead as --stop-lead; unset, the operator keeps its default', async () => {
    const lead = operatorConfig(
      await helm.render({ values: [INSTALL, { workloadManagement: { stopLead: '3s' } }] }),
    );
    expect(lead.features.berth.stopLeadMs).toBe(3_000);
    const objects = await helm.render({ values: [INSTALL] });
    expect(operatorContainer(objects).env?.some((e) => e.name === 'BERTH_STOP_LEAD')).toBe(false);
    expect(operatorConfig(objects).features.berth.stopLeadMs).toBe(5_000);
  });

  it('serves the webhooks with an existing Secret and the caBundle as ca.crt, which --cert-mode files reads', async () => {
    const objects = await helm.render({ values: [fixture('existing-secret-values.yaml')] });
    const { features } = operatorConfig(objects);
    expect(features.certs).toMatchObject({ certMode: 'files', certDir: DEFAULT_CERT_DIR });
    const pod = find<V1Deployment>(objects, 'Deployment').spec?.template.spec;
    const volume = pod?.volumes?.find((v) => v.name === 'serving-certs');
    expect(volume?.projected?.sources).toEqual([
      {
        secret: {
          name: 'berth-webhook-tls',
          items: [
            { key: 'tls.crt', path: 'tls.crt' },
            { key: 'tls.key', path: 'tls.key' },
          ],
        },
      },
      { configMap: { name: 'berth-operator-webhook-ca-bundle', items: [{ key: 'ca.crt', path: 'ca.crt' }] } },
    ]);
    const mount = operatorContainer(objects).volumeMounts?.find((m) => m.name === 'serving-certs');
    expect(mount).toMatchObject({ mountPath: features.certs.certDir, readOnly: true });
    const bundle = find<{ data: Record<string, string> }>(
      objects,
      'ConfigMap',
      'berth-operator-webhook-ca-bundle',
    );
    expect(bundle.data['ca.crt']).toMatch(
      /^-----BEGIN CERTIFICATE-----\n[\s\S]+-----END CERTIFICATE-----\n?$/,
    );
    // Neither the CA Secret's Role (the operator's own CA) nor cert-manager objects.
    expect(
      objects.filter(
        (o) => ['Certificate', 'Issuer'].includes(o.kind) || o.metadata.name.endsWith('-webhook-ca'),
      ),
    ).toEqual([]);
  });

  it("maps a Go chart's injection values onto the injection flags, the helpers running the operator's image", async () => {
    const objects = await helm.render({
      release: 'east',
      namespace: 'berth',
      values: [fixture('go-chart-injection-values.yaml')],
    });
    const { features } = operatorConfig(objects);
    expect(features.webhook.enableWorkloadAdmission).toBe(false);
    expect(features.injection).toEqual({
      enabled: true,
      helperImage: 'registry.example.com/berth-operator:0.1.0',
      imagePullPolicy: 'Always',
      controlPlaneNamespaces: ['berth-system', 'platform'],
      apiKeyFile: '/var/run/berth/token',
      apiKeySecret: 'berth-helper-token',
      apiKeySecretKey: 'token',
      caBundleFile: '/etc/berth-ca/ca.crt',
      caBundleConfigMap: 'berth-ca-bundle',
      caBundleKey: 'ca.crt',
      stateDir: '/berth',
      defaultMode: 'startup-gate',
      defaultEnforce: 'signal',
      defaultTtlSeconds: 45,
      probePort: 9394,
      restartPodOnLoss: false,
      configurationName: 'east-berth-operator-injection',
      failurePolicy: 'Ignore',
    });
    // Injection alone serves webhooks: the Service, the port and the self-signed CA's Secret rights.
    expect(features.certs).toMatchObject({
      certMode: 'selfsigned',
      webhookServiceName: 'east-berth-operator-webhook',
    });
    expect(find(objects, 'Service', 'east-berth-operator-webhook')).toBeDefined();
    expect(find(objects, 'Role', 'east-berth-operator-webhook-ca')).toBeDefined();
    // The owner of the injection configurations, with the registration rights a lease-only base lacks.
    const owner = find<{ rules: { verbs?: string[]; resources?: string[] }[] }>(
      objects,
      'ClusterRole',
      'east-berth-operator-injection',
    );
    expect(owner.rules.flatMap((r) => r.verbs ?? [])).toContain('create');
    expect(find(objects, 'Role', 'east-berth-operator-injection-endpoints')).toBeDefined();
    expect(objects.map((o) => o.metadata.name)).not.toContain('east-berth-operator-injection-workloads');
  });

  it('runs the node taint guard with its RBAC, reading agent Pods in the agent namespace only', async () => {
    const objects = await helm.render({
      values: [REQUIRED, { nodeTaintGuard: { enabled: true, agentNamespace: 'mesh', grace: '45s' } }],
    });
    const { features } = operatorConfig(objects);
    expect(features.nodeTaint).toMatchObject({ enabled: true, agentNamespace: 'mesh', graceMs: 45_000 });
    expect(find(objects, 'Role', 'berth-operator-node-taint-guard').metadata.namespace).toBe('mesh');
  });
});

const BROKER = {
  enabled: true,
  oidc: { issuerURL: 'https://i', clientID: 'c', clientSecret: { secretName: 's' } },
};

describe('what the chart refuses, naming the value', () => {
  const B64_PEM_OF_NOTHING = Buffer.from('not a certificate').toString('base64');
  it.each<[string, (string | object)[], RegExp]>([
    ['no berth.apiServer', [{ clusterID: 'a' }], /berth\.apiServer is required/],
    ['no clusterID', [{ berth: { apiServer: 'https://b' } }], /clusterID is required/],
    [
      "the Go helper's image",
      [REQUIRED, { injection: { enabled: true, helper: { repository: 'ghcr.io/skaphos/berth-acquire' } } }],
      /injection\.helper\.repository=ghcr\.io\/skaphos\/berth-acquire is the Go helper's image/,
    ],
    [
      'another injection webhook timeout',
      [REQUIRED, { injection: { enabled: true, webhook: { timeoutSeconds: 5 } } }],
      /injection\.webhook\.timeoutSeconds=5 is not supported/,
    ],
    [
      'another injection object selector',
      [
        REQUIRED,
        { injection: { enabled: true, webhook: { objectSelector: { matchLabels: { team: 'a' } } } } },
      ],
      /injection\.webhook\.objectSelector is not supported/,
    ],
    [
      'an injection namespace selector',
      [
        REQUIRED,
        { injection: { enabled: true, webhook: { namespaceSelector: { matchLabels: { team: 'a' } } } } },
      ],
      /injection\.webhook\.namespaceSelector is not supported/,
    ],
    [
      "the helpers' token file without its Secret",
      [REQUIRED, { injection: { enabled: true, helper: { apiKeyFile: '/var/run/berth/token' } } }],
      /injection\.helper\.apiKeyFile and injection\.helper\.apiKeySecret\.name must be set together/,
    ],
    ['an unknown injection default', [REQUIRED, { injection: { defaults: { mode: 'always' } } }], /mode/],
    [
      'the Go image',
      [REQUIRED, { image: { repository: 'ghcr.io/skaphos/berth-operator' } }],
      /image\.repository=ghcr\.io\/skaphos\/berth-operator is the Go operator's image/,
    ],
    [
      'two CA bundle sources',
      [REQUIRED, { berth: { tls: { caBundleConfigMap: 'ca', caBundleSecret: 'ca' } } }],
      /at most one of berth\.tls\.caBundleConfigMap and berth\.tls\.caBundleSecret/,
    ],
    [
      'replicas without leader election',
      [REQUIRED, { leaderElection: { enabled: false } }],
      /replicaCount > 1 requires leaderElection\.enabled=true/,
    ],
    [
      'two token sources',
      [REQUIRED, { berth: { apiKey: { secretName: 'k' }, tokenFile: { path: '/t' } } }],
      /at most one of .*\(set: berth\.apiKey\.secretName, berth\.tokenFile\.path\)/,
    ],
    [
      'a sidecar broker without an issuer or token URL',
      [
        REQUIRED,
        { sidecarBroker: { enabled: true, oidc: { clientID: 'c', clientSecret: { secretName: 's' } } } },
      ],
      /sidecarBroker\.enabled=true requires sidecarBroker\.oidc\.issuerURL \(or tokenURL\)/,
    ],
    [
      'the Go broker without its image',
      [REQUIRED, { sidecarBroker: { ...BROKER, implementation: 'go', image: { tag: 'v0.4.1' } } }],
      /sidecarBroker\.implementation=go requires sidecarBroker\.image\.repository and sidecarBroker\.image\.tag/,
    ],
    [
      "the Go broker's image for this operator's broker",
      [
        REQUIRED,
        {
          sidecarBroker: {
            ...BROKER,
            image: { repository: 'ghcr.io/skaphos/berth-oidc-broker', tag: 'v0.4.1' },
          },
        },
      ],
      /sidecarBroker\.image\.repository=ghcr\.io\/skaphos\/berth-oidc-broker is the Go project's broker image.*sidecarBroker\.implementation=go/,
    ],
    [
      'an unknown broker implementation',
      [REQUIRED, { sidecarBroker: { ...BROKER, implementation: 'rust' } }],
      /implementation/,
    ],
    [
      'a broker duration that is none',
      [REQUIRED, { sidecarBroker: { ...BROKER, fetchTimeout: 'soon' } }],
      /fetchTimeout/,
    ],
    [
      'extra RBAC rules',
      [
        REQUIRED,
        { rbac: { targetVerbs: [{ apiGroups: ['apps'], resources: ['daemonsets'], verbs: ['get'] }] } },
      ],
      /rbac\.targetVerbs is not supported/,
    ],
    [
      'a ServiceMonitor without metrics',
      [REQUIRED, { metrics: { bindAddress: '0', serviceMonitor: { enabled: true } } }],
      /metrics\.serviceMonitor\.enabled=true but metrics\.bindAddress="0"/,
    ],
    [
      'another webhook Service port',
      [REQUIRED, { workloadManagement: { enabled: true }, injection: { webhook: { servicePort: 8443 } } }],
      /injection\.webhook\.servicePort=8443 is not supported/,
    ],
    [
      'two certificate sources',
      [
        REQUIRED,
        {
          workloadManagement: { enabled: true },
          injection: { webhook: { tls: { existingSecret: 's', certManager: { enabled: true } } } },
        },
      ],
      /certManager\.enabled and injection\.webhook\.tls\.existingSecret are exclusive/,
    ],
    [
      'existingSecret without a Secret',
      [REQUIRED, { workloadManagement: { enabled: true }, webhookCertificates: { mode: 'existingSecret' } }],
      /webhookCertificates\.mode=existingSecret requires injection\.webhook\.tls\.existingSecret/,
    ],
    [
      'a caBundle that is no PEM',
      [
        REQUIRED,
        {
          workloadManagement: { enabled: true },
          injection: { webhook: { tls: { existingSecret: 's', caBundle: B64_PEM_OF_NOTHING } } },
        },
      ],
      /injection\.webhook\.tls\.caBundle must be base64 of PEM certificates/,
    ],
    [
      'an unknown value',
      [REQUIRED, { berth: { apiKeyFile: '/t' } }],
      /at '\/berth': additional properties 'apiKeyFile' not allowed/,
    ],
    [
      'an unknown certificate mode',
      [REQUIRED, { webhookCertificates: { mode: 'vault' } }],
      /webhookCertificates\.mode|mode/,
    ],
  ])('%s', async (_what, values, message) => {
    const r = await helm.template({ values });
    expect(r.code).not.toBe(0);
    expect(r.stderr).toMatch(message);
  });
});
