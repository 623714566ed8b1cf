// The berth-apiserver chart (`berth-operator central`) rendered by real Helm: `helm lint --strict`;
// `helm template` against golden files; the chart with the values equivalent to the kustomize installs
// renders exactly their objects (modulo Helm's own labels), so the two cannot drift; the Go chart's CI
// values files (restated in test/fixtures/helm-apiserver) render, and the server reads the rendered
// Deployment's flags as meant (the real flag parser), each file it reads mounted from the right Secret key;
// and what the chart refuses, it refuses naming the value. (The install lifecycle:
// ./helm-apiserver-install.test.ts.)
import type { V1Container, V1Deployment, V1PodSpec, V1Volume } from '@kubernetes/client-node';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { find, type ManifestObject, readInstall } from '../../../scripts/install-manifest.ts';
import {
  centralCommand,
  effectiveAuthMode,
  parseCentralFlags,
  storeConfigOf,
} from '../../../src/central/command.ts';
import { K8S_STORE_RULES } from '../../../src/central/rbac.ts';
import { parseFlags } from '../../../src/cli.ts';
import { APISERVER_CHART, Helm, type RenderOptions } from '../../helpers/helm.ts';
import { byId } from './install.ts';

const fixture = (name: string): string =>
  new URL(`../../fixtures/helm-apiserver/${name}`, import.meta.url).pathname;
const REQUIRED = fixture('required-values.yaml');
/** The Go chart's CI values, restated without their image block. */
const GO_CI = ['dev', 'incluster', 'external-kubeconfig', 'oidc', 'sqlite'] as const;
/** The image block of those files: the Go server's image, built by its CI. */
const GO_CI_IMAGE = { image: { repository: 'berth-apiserver', tag: 'ci', pullPolicy: 'IfNotPresent' } };

let helm: Helm;

beforeAll(async () => {
  helm = await Helm.start();
});
afterAll(async () => {
  await helm?.stop();
});

const render = (o: Omit<RenderOptions, 'chart'>): Promise<ManifestObject[]> =>
  helm.render({ chart: APISERVER_CHART, ...o });
const template = (o: Omit<RenderOptions, 'chart'>) => helm.template({ chart: APISERVER_CHART, ...o });

const podSpec = (objects: ManifestObject[]): V1PodSpec => {
  const spec = find<V1Deployment>(objects, 'Deployment').spec?.template.spec;
  if (spec === undefined) throw new Error('the Deployment has no pod spec');
  return spec;
};

function serverContainer(objects: ManifestObject[]): V1Container {
  const container = podSpec(objects).containers.find((c) => c.name === 'apiserver');
  if (container === undefined) throw new Error('the Deployment has no apiserver container');
  return container;
}

/** The server's configuration, as the real flag parser reads the container's args. */
function serverConfig(objects: ManifestObject[]) {
  const [command, ...argv] = serverContainer(objects).args ?? [];
  expect(command).toBe('central');
  return parseCentralFlags(parseFlags(centralCommand, argv, {}));
}

/** What the kubelet puts at `path` in the container: the volume mounted above it and the key it names. */
function mountedFile(objects: ManifestObject[], path: string): { volume: V1Volume; key: string } {
  const mount = serverContainer(objects).volumeMounts?.find((m) => path.startsWith(`${m.mountPath}/`));
  if (mount === undefined) throw new Error(`nothing is mounted above ${path}`);
  const volume = podSpec(objects).volumes?.find((v) => v.name === mount.name);
  if (volume === undefined) throw new Error(`the mount ${mount.name} has no volume`);
  return { volume, key: path.slice(mount.mountPath.length + 1) };
}

const secretFile = (objects: ManifestObject[], path: string) => {
  const { volume, key } = mountedFile(objects, path);
  return { secret: volume.secret?.secretName, key };
};

describe('helm lint', () => {
  it.each([
    ['the required values', REQUIRED],
    ['postgres, cert-manager, oidc, Ingress and ServiceMonitor', fixture('postgres-values.yaml')],
    ...GO_CI.map((name) => [`the Go chart's ci/${name} values`, fixture(`go-ci-${name}-values.yaml`)]),
  ])('passes --strict with %s', async (_what, values) => {
    const r = await helm.run(['lint', '--strict', APISERVER_CHART, ...(await helm.valuesArgs([values]))]);
    expect(r.stderr + r.stdout).toContain('1 chart(s) linted, 0 chart(s) failed');
    expect(r.code).toBe(0);
  });
});

describe('helm template', () => {
  it.each<[string, string[]]>([
    ['default', [REQUIRED]],
    ['postgres', [fixture('postgres-values.yaml')]],
    ...GO_CI.map((name): [string, string[]] => [`go-ci-${name}`, [fixture(`go-ci-${name}-values.yaml`)]]),
    ['monitoring', [REQUIRED, fixture('monitoring-values.yaml')]],
  ])('renders %s as its golden file', async (name, values) => {
    const r = await template({ values });
    expect(r.stderr).toBe('');
    await expect(r.stdout).toMatchFileSnapshot(`../../fixtures/helm-apiserver/golden/${name}.yaml`);
  });
});

describe('the chart and the kustomize installs', () => {
  const release = { release: 'berth-apiserver', namespace: 'berth-apiserver' };

  it('renders deploy/install-apiserver.yaml with the equivalent values', async () => {
    const install = (await readInstall('install-apiserver.yaml')).objects.filter(
      (o) => o.kind !== 'Namespace',
    );
    const chart = await render({ ...release, values: [REQUIRED] });
    expect(byId(chart)).toEqual(byId(install));
  });

  it("renders deploy/install-apiserver-cert-manager.yaml's serving Certificate with that CA Issuer", async () => {
    const install = (await readInstall('install-apiserver-cert-manager.yaml')).objects.filter(
      (o) =>
        o.kind !== 'Namespace' &&
        !o.metadata.name.endsWith('-ca') &&
        !o.metadata.name.endsWith('-selfsigned'),
    );
    const chart = await render({
      ...release,
      values: [
        REQUIRED,
        {
          tls: {
            existingSecret: '',
            certManager: { enabled: true, issuerRef: { kind: 'Issuer', name: 'berth-apiserver-ca' } },
          },
        },
      ],
    });
    expect(byId(chart)).toEqual(byId(install));
  });

  it("grants the Kubernetes store exactly its rights, in the coordination namespace, to the release's account", async () => {
    const chart = await render({
      release: 'edge',
      namespace: 'central',
      values: [fixture('go-ci-incluster-values.yaml')],
    });
    const role = find<{ rules: unknown }>(chart, 'Role', 'edge-berth-apiserver-leases');
    expect(role.metadata.namespace).toBe('berth-coordination');
    expect(role.rules).toEqual(K8S_STORE_RULES);
    expect(find(chart, 'RoleBinding', 'edge-berth-apiserver-leases')).toMatchObject({
      metadata: { namespace: 'berth-coordination' },
      roleRef: { kind: 'Role', name: 'edge-berth-apiserver-leases' },
      subjects: [{ kind: 'ServiceAccount', name: 'edge-berth-apiserver', namespace: 'central' }],
    });
    const install = (await readInstall('install-apiserver.yaml')).objects;
    expect(find<{ rules: unknown }>(install, 'Role').rules).toEqual(K8S_STORE_RULES);
    // Only this store's Pods carry a token.
    expect(podSpec(chart).automountServiceAccountToken).toBe(true);
    const other = await render({ values: [fixture('go-ci-external-kubeconfig-values.yaml')] });
    expect(podSpec(other).automountServiceAccountToken).toBe(false);
    expect(other.filter((o) => o.kind === 'Role' || o.kind === 'RoleBinding')).toEqual([]);
  });
});

describe("the Go chart's values, as the server reads them", () => {
  it('ci/dev: one replica of the memory store, no authentication because the values say none', async () => {
    const objects = await render({ values: [fixture('go-ci-dev-values.yaml')] });
    const config = serverConfig(objects);
    expect(storeConfigOf(config)).toEqual({ backend: 'mem' });
    expect(effectiveAuthMode(config)).toBe('none');
    expect(config.storeBackendWarning).toBeUndefined();
    expect(find<V1Deployment>(objects, 'Deployment').spec).toMatchObject({
      replicas: 1,
      strategy: { type: 'Recreate' },
    });
    expect(secretFile(objects, config['tls-cert-file'])).toEqual({
      secret: 'berth-apiserver-test-tls',
      key: 'tls.crt',
    });
    expect(secretFile(objects, config['tls-key-file'])).toEqual({
      secret: 'berth-apiserver-test-tls',
      key: 'tls.key',
    });
    expect(objects.map((o) => o.kind)).not.toContain('PodDisruptionBudget');
  });

  it('ci/incluster: Leases of this cluster (the store inferred from coordination.namespace, passed explicitly), static keys', async () => {
    const objects = await render({ values: [fixture('go-ci-incluster-values.yaml')] });
    const config = serverConfig(objects);
    expect(storeConfigOf(config)).toMatchObject({
      backend: 'k8s',
      namespace: 'berth-coordination',
      kubeconfig: '',
    });
    expect(config.storeBackendWarning).toBeUndefined();
    expect(effectiveAuthMode(config)).toBe('static-keys');
    expect(secretFile(objects, config['api-keys-file'])).toEqual({
      secret: 'berth-api-keys',
      key: 'api-keys',
    });
    expect(find<V1Deployment>(objects, 'Deployment').spec?.strategy).toEqual({
      type: 'RollingUpdate',
      rollingUpdate: { maxUnavailable: 0, maxSurge: 1 },
    });
    expect(find(objects, 'PodDisruptionBudget')).toMatchObject({ spec: { minAvailable: 1 } });
  });

  it("ci/external-kubeconfig: another cluster's Leases through the Secret's kubeconfig", async () => {
    const objects = await render({ values: [fixture('go-ci-external-kubeconfig-values.yaml')] });
    const config = serverConfig(objects);
    expect(storeConfigOf(config)).toMatchObject({ backend: 'k8s', namespace: 'berth-coordination' });
    expect(secretFile(objects, config['coordination-kubeconfig'])).toEqual({
      secret: 'berth-coordination-kubeconfig',
      key: 'kubeconfig',
    });
  });

  it('oidc: the issuer, audience and required claim', async () => {
    const config = serverConfig(await render({ values: [fixture('go-ci-oidc-values.yaml')] }));
    expect(effectiveAuthMode(config)).toBe('oidc');
    expect(config).toMatchObject({
      'oidc-issuer-url': 'https://issuer.example.com',
      'oidc-audience': 'berth-api',
      'oidc-username-claim': 'sub',
      'oidc-required-claim': ['groups=berth-clients'],
    });
  });

  it('ci/sqlite: the path from the Secret, a writable volume for the file, one replica recreated', async () => {
    const objects = await render({ values: [fixture('go-ci-sqlite-values.yaml')] });
    const config = serverConfig(objects);
    expect(storeConfigOf(config)).toMatchObject({
      backend: 'sql',
      driver: 'sqlite',
      dsn: '',
      migrate: 'auto',
    });
    expect(secretFile(objects, config['sql-dsn-file'])).toEqual({ secret: 'berth-sqlite-dsn', key: 'dsn' });
    expect(mountedFile(objects, '/var/lib/berth/leases.db').volume).toEqual({ name: 'sqlite', emptyDir: {} });
    expect(find<V1Deployment>(objects, 'Deployment').spec?.strategy).toEqual({ type: 'Recreate' });
    const claimed = await render({
      values: [
        fixture('go-ci-sqlite-values.yaml'),
        { store: { sql: { sqlite: { existingClaim: 'leases' } } } },
      ],
    });
    expect(mountedFile(claimed, '/var/lib/berth/leases.db').volume).toEqual({
      name: 'sqlite',
      persistentVolumeClaim: { claimName: 'leases' },
    });
  });

  it("refuses the CI files' image block, naming it: the Go server's image has no central subcommand", async () => {
    for (const name of GO_CI) {
      const r = await template({ values: [fixture(`go-ci-${name}-values.yaml`), GO_CI_IMAGE] });
      expect(r.code).not.toBe(0);
      expect(r.stderr).toMatch(/image\.repository=berth-apiserver is the Go server's image/);
    }
  });
});

describe('secure defaults', () => {
  it('postgres: the DSN only as a mounted Secret, never in the Deployment; metrics apart from the lease API', async () => {
    const objects = await render({ values: [fixture('postgres-values.yaml')] });
    const config = serverConfig(objects);
    expect(storeConfigOf(config)).toMatchObject({
      backend: 'sql',
      driver: 'postgres',
      dsn: '',
      migrate: 'off',
    });
    expect(secretFile(objects, config['sql-dsn-file'])).toEqual({ secret: 'berth-postgres', key: 'url' });
    expect(secretFile(objects, config['tls-cert-file']).secret).toBe('berth-apiserver-tls');
    expect(find(objects, 'Certificate', 'berth-apiserver')).toMatchObject({
      spec: {
        secretName: 'berth-apiserver-tls',
        dnsNames: expect.arrayContaining(['berth-apiserver.berth-system.svc', 'leases.example.com']),
        issuerRef: { name: 'corporate-ca', kind: 'ClusterIssuer' },
      },
    });
    expect(find(objects, 'PodDisruptionBudget')).toMatchObject({ spec: { maxUnavailable: 1 } });
    // The lease API's Service has only its HTTPS port; the ServiceMonitor scrapes the metrics Service.
    expect(
      find<{ spec: { ports: { name: string }[] } }>(objects, 'Service', 'berth-apiserver').spec.ports,
    ).toEqual([expect.objectContaining({ name: 'https', targetPort: 'https' })]);
    expect(config['metrics-addr']).toBe(':8080');
    expect(find(objects, 'ServiceMonitor')).toMatchObject({
      metadata: { labels: { release: 'prometheus' } },
      spec: { selector: { matchLabels: { 'app.kubernetes.io/component': 'metrics' } } },
    });
    expect(find(objects, 'Ingress')).toMatchObject({
      spec: { rules: [{ host: 'leases.example.com' }] },
    });
  });

  it('runs non-root, read-only, without capabilities, under RuntimeDefault, with requests and limits', async () => {
    const objects = await render({ values: [REQUIRED] });
    const pod = podSpec(objects);
    const container = serverContainer(objects);
    expect(pod.securityContext).toMatchObject({
      runAsNonRoot: true,
      seccompProfile: { type: 'RuntimeDefault' },
    });
    expect(container.securityContext).toMatchObject({
      allowPrivilegeEscalation: false,
      readOnlyRootFilesystem: true,
      runAsNonRoot: true,
      capabilities: { drop: ['ALL'] },
      seccompProfile: { type: 'RuntimeDefault' },
    });
    expect(container.resources?.requests).toEqual({ cpu: '100m', memory: '128Mi' });
    expect(container.resources?.limits).toEqual({ cpu: '500m', memory: '256Mi' });
    expect(container.image).toBe('berth-operator:0.1.0');
    expect(find(objects, 'PodDisruptionBudget')).toMatchObject({ spec: { minAvailable: 1 } });
    // Metrics off: no listener, port or Service.
    const off = await render({ values: [REQUIRED, { metrics: { enabled: false } }] });
    expect(serverConfig(off)['metrics-addr']).toBe('');
    expect(off.map((o) => o.metadata.name)).not.toContain('berth-apiserver-metrics');
  });
});

describe('what the chart refuses, naming the value', () => {
  const TLS = { tls: { existingSecret: 'tls' } };
  const NO_AUTH = { auth: { mode: 'none' } };
  it.each<[string, (string | object)[], RegExp]>([
    [
      'no TLS',
      [{ auth: { mode: 'none' }, replicaCount: 1 }],
      /TLS is required .*tls\.existingSecret.*tls\.certManager\.enabled/,
    ],
    [
      'two certificate sources',
      [REQUIRED, { tls: { certManager: { enabled: true, issuerRef: { name: 'ca' } } } }],
      /tls\.certManager\.enabled and tls\.existingSecret are exclusive/,
    ],
    [
      'cert-manager without an issuer',
      [REQUIRED, { tls: { existingSecret: '', certManager: { enabled: true } } }],
      /tls\.certManager\.issuerRef\.name/,
    ],
    ['no auth mode', [TLS, { replicaCount: 1 }], /auth\.mode is required: .*set auth\.mode=none explicitly/],
    [
      'static keys without their Secret',
      [TLS, { replicaCount: 1, auth: { mode: 'static-keys' } }],
      /auth\.mode=static-keys requires auth\.staticKeys\.secretName/,
    ],
    [
      'oidc without an audience',
      [TLS, { replicaCount: 1, auth: { mode: 'oidc', oidc: { issuerURL: 'https://i' } } }],
      /auth\.mode=oidc requires auth\.oidc\.issuerURL and auth\.oidc\.audience/,
    ],
    [
      'two replicas of the default (memory) store',
      [TLS, NO_AUTH],
      /replicaCount=2 needs a durable store .*store is mem \(store\.backend is empty and coordination\.namespace is empty\)/,
    ],
    [
      'three replicas of store.backend=mem',
      [TLS, NO_AUTH, { replicaCount: 3, store: { backend: 'mem' } }],
      /replicaCount=3 needs a durable store .*store is mem \(/,
    ],
    [
      'two replicas of sqlite',
      [fixture('go-ci-sqlite-values.yaml'), { replicaCount: 2 }],
      /replicaCount=2 with store\.sql\.driver=sqlite/,
    ],
    [
      'an inline postgres DSN',
      [
        TLS,
        NO_AUTH,
        { store: { backend: 'sql', sql: { driver: 'postgres', dsn: 'postgres://u:pw@db/berth' } } },
      ],
      /store\.sql\.dsn is not supported with store\.sql\.driver=postgres/,
    ],
    [
      'sql without a driver',
      [TLS, NO_AUTH, { store: { backend: 'sql', sql: { dsnSecret: { name: 'dsn' } } } }],
      /store\.backend=sql requires store\.sql\.driver/,
    ],
    [
      'k8s without a namespace',
      [TLS, NO_AUTH, { store: { backend: 'k8s' } }],
      /store\.backend=k8s requires coordination\.namespace/,
    ],
    [
      'k8s without a client',
      [TLS, NO_AUTH, { coordination: { namespace: 'leases' } }],
      /coordination\.inCluster=true .* or coordination\.kubeconfig\.secretName/,
    ],
    [
      'coordination values with the sql store',
      [fixture('postgres-values.yaml'), { coordination: { namespace: 'leases' } }],
      /store\.backend=sql does not use coordination\.namespace/,
    ],
    [
      "the Go server's published image",
      [REQUIRED, { image: { repository: 'ghcr.io/skaphos/berth-apiserver' } }],
      /image\.repository=ghcr\.io\/skaphos\/berth-apiserver is the Go server's image/,
    ],
    [
      'a ServiceMonitor without metrics',
      [REQUIRED, { metrics: { enabled: false, serviceMonitor: { enabled: true } } }],
      /metrics\.serviceMonitor\.enabled=true requires metrics\.enabled=true/,
    ],
    [
      'an unknown value',
      [REQUIRED, { auth: { oidc: { clientID: 'x' } } }],
      /additional properties 'clientID' not allowed/,
    ],
    [
      'an unknown store',
      [REQUIRED, { store: { backend: 'etcd' } }],
      /at '\/store\/backend': value must be one of/,
    ],
  ])('%s', async (_what, values, message) => {
    const r = await template({ values });
    expect(r.code).not.toBe(0);
    expect(r.stderr).toMatch(message);
  });
});
