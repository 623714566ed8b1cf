// The berth-apiserver chart installed, upgraded and uninstalled by real Helm on a control plane of its own,
// under a release name and namespace of its own and with the Kubernetes Lease store in another namespace, so
// every templated name is exercised. The release's Deployment runs 0 replicas (KWOK would fake its Pods):
// `berth-operator central` runs in this process configured by the release's Deployment — its args, each
// file they name written from the Secret key its volume mounts (as the kubelet would), the in-cluster
// client standing for the release's ServiceAccount token through the recording proxy — and the release's
// Service is routed here (its EndpointSlices, as for a Pod). A lease client reaches it at the Service's
// endpoint with the Service's DNS name as TLS server name, and acquires, renews and releases with no 403;
// an upgrade to another key Secret keeps the lease (the store is the Leases) and refuses the old key; the
// uninstall leaves no object behind but the lease records, which must outlive the server (a fencing token
// never repeats).
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { CoordinationV1Api } from '@kubernetes/client-node';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type Authority, createAuthority } from '../../../hack/controlplane/pki.ts';
import { HttpLeaseClient, LeaseClientError } from '../../../src/berth/leaseclient.ts';
import { sha256Hex } from '../../../src/central/auth.ts';
import { ApiProxy, describeRequest } from '../../helpers/api-proxy.ts';
import { TestCluster } from '../../helpers/cluster.ts';
import { eventually } from '../../helpers/eventually.ts';
import { APISERVER_CHART, Helm } from '../../helpers/helm.ts';
import {
  apiserverFullname,
  apiserverPodSpec,
  type RunningCentral,
  serviceEndpoint,
  standInValues,
  startCentralRelease,
} from './central-release.ts';
import { listedObjects } from './install.ts';

const RELEASE = 'edge';
const NAMESPACE = 'berth-central';
/** The Leases' namespace, another than the release's: the Role must land there. */
const LEASES = 'berth-leases';
const FULLNAME = apiserverFullname(RELEASE);
/** The static key's id: the tenant, so the holder. */
const KEY_ID = 'cluster-a';
const HOLDER = `${KEY_ID}/operator`;
const FIRST_TOKEN = 'first-token-of-cluster-a';
const SECOND_TOKEN = 'second-token-of-cluster-a';

let t: TestCluster;
let helm: Helm;
let proxy: ApiProxy;
let ca: Authority;
let scratch: string;
let before: { cluster: Set<string>; namespaced: Set<string> };
/** The lease taken before the upgrade, renewed after it. */
let fencingToken = 0;
const kubeconfig = (): { kubeconfig: string } => ({ kubeconfig: t.kubeconfigPath });

/** Every listable object: cluster-scoped ones, and those of the two namespaces. */
const objects = () => listedObjects(t, [NAMESPACE, LEASES]);

const manifest = () => helm.manifest(RELEASE, NAMESPACE, kubeconfig());

/** The release's server (./central-release.ts), its Service routed here. */
async function startRelease(): Promise<RunningCentral> {
  return startCentralRelease({
    t,
    proxy,
    install: await manifest(),
    namespace: NAMESPACE,
    fullname: FULLNAME,
    scratch,
  });
}

/** A lease client of the release's Service: its ready endpoint, the Service's DNS name for TLS. */
async function serviceClient(apiKey: string): Promise<HttpLeaseClient> {
  return new HttpLeaseClient({
    baseUrl: `https://${await serviceEndpoint(t, NAMESPACE, FULLNAME)}`,
    serverName: `${FULLNAME}.${NAMESPACE}.svc`,
    caBundle: ca.cert,
    apiKey,
    timeoutMs: 5_000,
  });
}

async function statusOf(p: Promise<unknown>): Promise<number | undefined> {
  try {
    await p;
    return 200;
  } catch (err) {
    if (err instanceof LeaseClientError) return err.status;
    throw err;
  }
}

const keysSecret = (name: string, token: string) =>
  t.core.createNamespacedSecret({
    namespace: NAMESPACE,
    body: { metadata: { name }, stringData: { 'api-keys': `${KEY_ID}:${sha256Hex(token)}\n` } },
  });

beforeAll(async () => {
  helm = await Helm.start();
  t = await TestCluster.own();
  proxy = await ApiProxy.start(t);
  scratch = await mkdtemp(join(tmpdir(), 'berth-apiserver-install-'));
  ca = await createAuthority('berth-apiserver-test-ca');
  await t.createNamespace(NAMESPACE, { 'pod-security.kubernetes.io/enforce': 'restricted' });
  await t.createNamespace(LEASES);
  const pair = await ca.serving([
    FULLNAME,
    `${FULLNAME}.${NAMESPACE}.svc`,
    `${FULLNAME}.${NAMESPACE}.svc.cluster.local`,
  ]);
  await t.core.createNamespacedSecret({
    namespace: NAMESPACE,
    body: {
      metadata: { name: 'edge-tls' },
      type: 'kubernetes.io/tls',
      stringData: { 'tls.crt': pair.cert, 'tls.key': pair.key },
    },
  });
  await keysSecret('edge-keys', FIRST_TOKEN);
  await keysSecret('edge-keys-rotated', SECOND_TOKEN);
  before = await objects();
});

afterAll(async () => {
  await proxy?.stop();
  await t?.stop();
  await helm?.stop();
  if (scratch) await rm(scratch, { recursive: true, force: true });
});

describe('helm install, upgrade and uninstall of berth-apiserver', () => {
  it('installs a server on Leases of another namespace that a lease client uses through the Service, with no 403', async () => {
    const values = await helm.valuesArgs([
      standInValues({ leases: LEASES, tlsSecret: 'edge-tls', keysSecret: 'edge-keys', port: 443 }),
    ]);
    await helm.ok(['install', RELEASE, APISERVER_CHART, '-n', NAMESPACE, '--wait', ...values], kubeconfig());
    const central = await startRelease();
    try {
      const client = await serviceClient(FIRST_TOKEN);
      const acquired = await client.acquire('apps', 'web', HOLDER, 30);
      expect(acquired).toMatchObject({ acquired: true, holder: HOLDER });
      fencingToken = acquired.fencingToken;
      expect(await client.renew('apps', 'web', HOLDER, fencingToken, 30)).toMatchObject({
        acquired: true,
        fencingToken,
      });
      // Another key's holder is refused; a token the Secret does not list is not authenticated.
      expect(await statusOf(client.acquire('apps', 'web', 'cluster-b', 30))).toBe(403);
      expect(await statusOf((await serviceClient('unknown')).acquire('apps', 'web', HOLDER, 30))).toBe(401);
      await client
        .acquire('apps', 'batch', HOLDER, 30)
        .then((r) => client.release('apps', 'batch', HOLDER, r.fencingToken));
      // The records are Leases of the coordination namespace.
      const leases = await t.kc.makeApiClient(CoordinationV1Api).listNamespacedLease({ namespace: LEASES });
      expect(leases.items.map((l) => l.metadata?.name).sort()).toEqual(['apps.batch', 'apps.web']);
    } finally {
      await central.stop();
    }
    const mine = proxy.records.filter((r) => r.user === `system:serviceaccount:${NAMESPACE}:${FULLNAME}`);
    expect(new Set(mine.map((r) => `${r.verb} ${r.resource} in ${r.namespace}`))).toEqual(
      new Set([
        'get leases in berth-leases',
        'list leases in berth-leases',
        'create leases in berth-leases',
        'update leases in berth-leases',
      ]),
    );
    expect(proxy.forbidden().map(describeRequest)).toEqual([]);
  }, 120_000);

  it('upgrades to another key Secret: the lease is still held, the old key refused, the new one renews it', async () => {
    const values = await helm.valuesArgs([{ auth: { staticKeys: { secretName: 'edge-keys-rotated' } } }]);
    await helm.ok(
      ['upgrade', RELEASE, APISERVER_CHART, '-n', NAMESPACE, '--reuse-values', '--wait', ...values],
      kubeconfig(),
    );
    expect(
      apiserverPodSpec(await manifest(), FULLNAME).volumes?.find((v) => v.name === 'api-keys')?.secret
        ?.secretName,
    ).toBe('edge-keys-rotated');
    const central = await startRelease();
    try {
      const old = await serviceClient(FIRST_TOKEN);
      expect(await statusOf(old.renew('apps', 'web', HOLDER, fencingToken, 30))).toBe(401);
      const client = await serviceClient(SECOND_TOKEN);
      expect(await client.renew('apps', 'web', HOLDER, fencingToken, 30)).toMatchObject({
        acquired: true,
        fencingToken,
      });
      await client.release('apps', 'web', HOLDER, fencingToken);
      // The next grant's token is higher: the record outlived the first server.
      expect((await client.acquire('apps', 'web', HOLDER, 30)).fencingToken).toBeGreaterThan(fencingToken);
    } finally {
      await central.stop();
    }
    expect(proxy.forbidden().map(describeRequest)).toEqual([]);
  }, 120_000);

  it('uninstalls without a trace but the lease records', async () => {
    await helm.ok(['uninstall', RELEASE, '-n', NAMESPACE, '--wait'], kubeconfig());
    // The endpoints controllers' objects go with the Service.
    const after = await eventually(
      async () => {
        const now = await objects();
        return [...now.namespaced].some((o) => o.includes(`/${FULLNAME}`)) ? undefined : now;
      },
      { timeoutMs: 30_000 },
    );
    if (after === undefined) throw new Error('unreachable: eventually resolves with a value');
    expect([...before.cluster].filter((o) => !after.cluster.has(o))).toEqual([]);
    expect([...after.cluster].filter((o) => !before.cluster.has(o))).toEqual([]);
    expect([...before.namespaced].filter((o) => !after.namespaced.has(o))).toEqual([]);
    expect([...after.namespaced].filter((o) => !before.namespaced.has(o)).sort()).toEqual([
      `${LEASES}/lease.coordination.k8s.io/apps.batch`,
      `${LEASES}/lease.coordination.k8s.io/apps.web`,
    ]);
  }, 120_000);
});
