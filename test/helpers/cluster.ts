// A real Kubernetes control plane for a test file: the run's shared one (started by test/setup/controlplane.ts,
// suites isolate by namespace and unique names) or one of the file's own (for suites that own cluster-wide
// things: the operator's controllers, fixed-name webhook configurations, the install). With typed admin
// clients, real kubectl, users and service accounts, and Services routed to local servers.
import { execFile } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import {
  AuthorizationV1Api,
  CoreV1Api,
  CustomObjectsApi,
  KubeConfig,
  RbacAuthorizationV1Api,
  type V1PolicyRule,
} from '@kubernetes/client-node';
import { inject } from 'vitest';
import {
  type ControlPlane,
  type ControlPlaneOptions,
  kubeconfigYaml,
  startControlPlane,
} from '../../hack/controlplane/controlplane.ts';
import { authority, type KeyPair } from '../../hack/controlplane/pki.ts';
import {
  type LocalEndpoint,
  routeServiceHere,
  type ServiceRoute,
} from '../../hack/controlplane/service-route.ts';
import { GROUP, PLURAL, SCOPE_ENABLED, SCOPE_LABEL, VERSION } from '../../src/berth/api.ts';
import { isAlreadyExists, isNotFound } from '../../src/kube/client.ts';
import { KubeTransport } from '../../src/kube/transport.ts';
import { installBerthLeaseCrd } from './crd.ts';
import { eventually } from './eventually.ts';

export type { LocalEndpoint, ServiceRoute };

/** What the global setup hands to every test file (serializable). */
export interface ClusterHandle {
  url: string;
  caCert: string;
  /** The cluster CA's certificate and key: test users are client certificates it signs. */
  ca: KeyPair;
  kubeconfig: string;
  adminToken: string;
  hostAddress: string | undefined;
  nodeNames: string[];
}

declare module 'vitest' {
  export interface ProvidedContext {
    cluster: ClusterHandle;
  }
}

export interface KubectlResult {
  code: number;
  stdout: string;
  stderr: string;
}

export interface TestUser {
  username: string;
  groups: string[];
  /** A kubeconfig (YAML) that authenticates as this user. */
  kubeconfig: string;
  kc: KubeConfig;
}

export interface ServiceAccountUser extends TestUser {
  /** The bearer token (TokenRequest API). */
  token: string;
}

export function kubeConfigFrom(yaml: string): KubeConfig {
  const kc = new KubeConfig();
  kc.loadFromString(yaml);
  return kc;
}

/** Lower-case, DNS-1123 label safe, unique in this run: `<prefix>-<random>`. */
/** The labels that put a namespace in the opt-in workload admission scope (createNamespace's `labels`). */
export const IN_SCOPE: Readonly<Record<string, string>> = { [SCOPE_LABEL]: SCOPE_ENABLED };

export function uniqueName(prefix: string): string {
  const base = prefix
    .toLowerCase()
    .replace(/[^a-z0-9-]/g, '-')
    .slice(0, 50)
    .replace(/-+$/, '');
  return `${base}-${randomBytes(3).toString('hex')}`;
}

export class TestCluster {
  readonly url: string;
  readonly caCert: string;
  readonly kubeconfig: string;
  readonly adminToken: string;
  /** See ControlPlane.hostAddress. */
  readonly hostAddress: string | undefined;
  readonly nodeNames: readonly string[];
  readonly kc: KubeConfig;
  readonly core: CoreV1Api;
  /** The cluster CA (throwaway): users are client certificates it signs; ApiProxy serves with it. */
  readonly ca: KeyPair;
  readonly #controlPlane: ControlPlane | undefined;
  readonly #dir: string;
  readonly kubeconfigPath: string;
  readonly #cleanups: Array<{ what: string; run: () => Promise<unknown> }> = [];
  readonly #transports: KubeTransport[] = [];
  readonly #routes = new Set<ServiceRoute>();

  private constructor(handle: ClusterHandle, dir: string, controlPlane?: ControlPlane) {
    this.url = handle.url;
    this.caCert = handle.caCert;
    this.kubeconfig = handle.kubeconfig;
    this.adminToken = handle.adminToken;
    this.hostAddress = handle.hostAddress;
    this.nodeNames = handle.nodeNames;
    this.kc = kubeConfigFrom(handle.kubeconfig);
    this.core = this.kc.makeApiClient(CoreV1Api);
    this.ca = handle.ca;
    this.#controlPlane = controlPlane;
    this.#dir = dir;
    this.kubeconfigPath = join(dir, 'kubeconfig');
  }

  static async #create(handle: ClusterHandle, controlPlane?: ControlPlane): Promise<TestCluster> {
    const dir = await mkdtemp(join(tmpdir(), 'berth-test-'));
    await writeFile(join(dir, 'kubeconfig'), handle.kubeconfig, { mode: 0o600 });
    return new TestCluster(handle, dir, controlPlane);
  }

  /** The run's shared control plane. Name everything after uniqueName() or namespace(). */
  static shared(): Promise<TestCluster> {
    return TestCluster.#create(inject('cluster'));
  }

  /** A control plane of this file's own (about 5 s to start), stopped by stop(). */
  static async own(options: ControlPlaneOptions = {}): Promise<TestCluster> {
    const cp = await startControlPlane(options);
    return TestCluster.#create(handleOf(cp), cp);
  }

  /** The control plane, for a file's own cluster (logs, failure()); undefined for the shared one. */
  get controlPlane(): ControlPlane | undefined {
    return this.#controlPlane;
  }

  kubeConfigFor(yaml: string): KubeConfig {
    return kubeConfigFrom(yaml);
  }

  /** An API transport as `kc`'s user, the one a product component shares in its process; closed at stop(). */
  transport(kc: KubeConfig): KubeTransport {
    const transport = new KubeTransport(kc);
    this.#transports.push(transport);
    return transport;
  }

  /** Registers `run` for stop(), before everything registered earlier. */
  onCleanup(what: string, run: () => Promise<unknown>): void {
    this.#cleanups.push({ what, run });
  }

  /**
   * A new namespace `<prefix>-<random>` (deleted at stop() on the shared cluster), ready for Pods: the
   * ServiceAccount admission plugin refuses them until the namespace's `default` account exists.
   */
  async namespace(prefix: string, labels: Record<string, string> = {}): Promise<string> {
    const name = uniqueName(prefix);
    await this.createNamespace(name, labels);
    return name;
  }

  /** Creates namespace `name` (a file's own cluster may use fixed names) and waits for its default account. */
  async createNamespace(name: string, labels: Record<string, string> = {}): Promise<void> {
    try {
      await this.core.createNamespace({ body: { metadata: { name, labels } } });
    } catch (err) {
      if (!isAlreadyExists(err)) throw err;
    }
    if (this.#controlPlane === undefined)
      this.onCleanup(`namespace ${name}`, () =>
        this.core.deleteNamespace({ name }).catch((err: unknown) => {
          if (!isNotFound(err)) throw err;
        }),
      );
    await eventually(() => this.core.readNamespacedServiceAccount({ namespace: name, name: 'default' }), {
      timeoutMs: 30_000,
      intervalMs: 50,
    });
  }

  /** The BerthLease CRD (left in place if present), once its resource is served. */
  async installBerthLeaseCrd(): Promise<void> {
    await installBerthLeaseCrd(this.kc, { ifAbsent: true });
    const custom = this.kc.makeApiClient(CustomObjectsApi);
    await eventually(
      () => custom.listClusterCustomObject({ group: GROUP, version: VERSION, plural: PLURAL }),
      {
        timeoutMs: 30_000,
        intervalMs: 100,
      },
    );
  }

  /** A user authenticated by a client certificate signed by the cluster CA (CN = user, O = groups). */
  async user(username: string, groups: readonly string[] = []): Promise<TestUser> {
    const pair = await authority(this.ca).client(username, groups);
    const kubeconfig = kubeconfigYaml(this.url, this.caCert, username, pair);
    return { username, groups: [...groups], kubeconfig, kc: kubeConfigFrom(kubeconfig) };
  }

  /**
   * A token of ServiceAccount `namespace/name` from the TokenRequest API (the account is created when
   * missing, the namespace too), valid for `expirationSeconds` (default 24 h).
   */
  async serviceAccount(
    namespace: string,
    name: string,
    expirationSeconds = 86_400,
  ): Promise<ServiceAccountUser> {
    try {
      await this.core.readNamespace({ name: namespace });
    } catch (err) {
      if (!isNotFound(err)) throw err;
      await this.createNamespace(namespace);
    }
    try {
      await this.core.createNamespacedServiceAccount({ namespace, body: { metadata: { name } } });
    } catch (err) {
      if (!isAlreadyExists(err)) throw err;
    }
    const tr = await this.core.createNamespacedServiceAccountToken({
      namespace,
      name,
      body: { spec: { audiences: [], expirationSeconds } },
    });
    const token = tr.status?.token;
    if (!token) throw new Error(`TokenRequest for ${namespace}/${name} returned no token`);
    const username = `system:serviceaccount:${namespace}:${name}`;
    const kubeconfig = kubeconfigYaml(this.url, this.caCert, username, { token });
    return {
      username,
      groups: ['system:serviceaccounts', `system:serviceaccounts:${namespace}`, 'system:authenticated'],
      kubeconfig,
      kc: kubeConfigFrom(kubeconfig),
      token,
    };
  }

  /**
   * Grants `rules` to user `username` (a certificate user, or `system:serviceaccount:<ns>:<name>`): a Role
   * and RoleBinding in `namespace`, or without one a ClusterRole and ClusterRoleBinding, uniquely named and
   * deleted at stop() on the shared cluster. Resolves once the authorizer allows the first rule's first
   * permission: RBAC sees a new binding through its informer, a moment after the write.
   */
  async grant(username: string, rules: readonly V1PolicyRule[], namespace?: string): Promise<void> {
    const rbac = this.kc.makeApiClient(RbacAuthorizationV1Api);
    const name = uniqueName('berth-test-grant');
    const api = 'rbac.authorization.k8s.io';
    const kind = namespace === undefined ? 'ClusterRole' : 'Role';
    const role = { metadata: { name }, rules: [...rules] };
    const binding = {
      metadata: { name },
      roleRef: { apiGroup: api, kind, name },
      subjects: [{ apiGroup: api, kind: 'User', name: username }],
    };
    const ignoreMissing = (err: unknown): void => {
      if (!isNotFound(err)) throw err;
    };
    if (namespace === undefined) {
      await rbac.createClusterRole({ body: role });
      await rbac.createClusterRoleBinding({ body: binding });
      if (this.#controlPlane === undefined)
        this.onCleanup(`cluster role ${name}`, async () => {
          await rbac.deleteClusterRoleBinding({ name }).catch(ignoreMissing);
          await rbac.deleteClusterRole({ name }).catch(ignoreMissing);
        });
    } else {
      await rbac.createNamespacedRole({ namespace, body: role });
      await rbac.createNamespacedRoleBinding({ namespace, body: binding });
      if (this.#controlPlane === undefined)
        this.onCleanup(`role ${namespace}/${name}`, async () => {
          await rbac.deleteNamespacedRoleBinding({ namespace, name }).catch(ignoreMissing);
          await rbac.deleteNamespacedRole({ namespace, name }).catch(ignoreMissing);
        });
    }
    const first = rules[0];
    if (first === undefined) return;
    const [resource = '', subresource] = (first.resources?.[0] ?? '').split('/');
    const spec =
      first.nonResourceURLs?.[0] !== undefined
        ? { nonResourceAttributes: { path: first.nonResourceURLs[0], verb: first.verbs[0] } }
        : {
            resourceAttributes: {
              namespace,
              verb: first.verbs[0],
              group: first.apiGroups?.[0],
              resource,
              subresource,
              name: first.resourceNames?.[0],
            },
          };
    const authorization = this.kc.makeApiClient(AuthorizationV1Api);
    const review = { body: { spec: { user: username, ...spec } } };
    await eventually(
      async () => (await authorization.createSubjectAccessReview(review)).status?.allowed === true,
      { timeoutMs: 10_000, intervalMs: 50 },
    );
  }

  /**
   * Routes Service `namespace/name` (port 443, created if missing, without a selector) to servers on this
   * machine through EndpointSlices at hostAddress, as the endpoints controller would for Pods: the real
   * kube-apiserver then calls webhooks that name the Service. Endpoints with a readiness URL are Ready only
   * while it answers 200.
   */
  async routeService(
    namespace: string,
    name: string,
    endpoints: readonly LocalEndpoint[],
  ): Promise<ServiceRoute> {
    const route = await routeServiceHere(this.kc, namespace, name, endpoints);
    this.onCleanup(`service route ${namespace}/${name}`, () => route.remove());
    this.#routes.add(route);
    return route;
  }

  /** The real kubectl, as the admin (or as the user of `kubeconfig`, a path). */
  kubectl(args: string[], opts: { input?: string; kubeconfig?: string } = {}): Promise<KubectlResult> {
    return new Promise((resolve) => {
      const child = execFile(
        'kubectl',
        args,
        {
          env: { ...process.env, KUBECONFIG: opts.kubeconfig ?? this.kubeconfigPath, HOME: this.#dir },
          timeout: 30_000,
          maxBuffer: 64 * 1024 * 1024,
        },
        (err, stdout, stderr) => {
          const code = err ? (typeof err.code === 'number' ? err.code : 1) : 0;
          resolve({ code, stdout, stderr });
        },
      );
      if (opts.input !== undefined) child.stdin?.end(opts.input);
    });
  }

  /** Writes `kubeconfig` (YAML) to a file of this cluster's temp dir, for kubectl and child processes. */
  async writeKubeconfig(kubeconfig: string): Promise<string> {
    const path = join(this.#dir, `kubeconfig-${randomBytes(4).toString('hex')}`);
    await writeFile(path, kubeconfig, { mode: 0o600 });
    return path;
  }

  /** Runs the cleanups (newest first), then stops a file's own control plane. Throws what failed. */
  async stop(): Promise<void> {
    for (const route of this.#routes) route.stopProbing();
    const failed: string[] = [];
    // A file's own control plane goes away whole: its objects need no cleaning.
    const cleanups = this.#cleanups.splice(0).reverse();
    if (this.#controlPlane === undefined)
      for (const { what, run } of cleanups) {
        try {
          await run();
        } catch (err) {
          failed.push(`${what}: ${err instanceof Error ? err.message : String(err)}`);
        }
      }
    await Promise.all(this.#transports.splice(0).map((transport) => transport.close()));
    await this.#controlPlane?.stop();
    await rm(this.#dir, { recursive: true, force: true });
    if (failed.length > 0) throw new Error(`cleanup failed: ${failed.join('; ')}`);
  }
}

/** What a test file needs of a control plane (serializable, for the global setup to provide). */
export function handleOf(cp: ControlPlane): ClusterHandle {
  return {
    url: cp.url,
    caCert: cp.caCert,
    ca: cp.ca,
    kubeconfig: cp.kubeconfig,
    adminToken: cp.adminToken,
    hostAddress: cp.hostAddress,
    nodeNames: [...cp.nodeNames],
  };
}
