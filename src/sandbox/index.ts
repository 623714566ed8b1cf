// startSandbox(): an in-process Kubernetes API server over HTTPS that client-node and kubectl use through
// an ordinary kubeconfig. See DESIGN.md "The sandbox API server".
import { randomBytes } from 'node:crypto';
import { mkdir, writeFile } from 'node:fs/promises';
import { createServer, type Server } from 'node:https';
import type { AddressInfo, Socket } from 'node:net';
import { dirname } from 'node:path';
import { stringify as toYaml } from 'yaml';
import { AdmissionChain } from './admission.ts';
import { CrdManager } from './crds.ts';
import { Faults } from './faults.ts';
import { Controllers } from './gc.ts';
import { ObjectService, type RequestContext, rfc3339 } from './objects.ts';
import { defaultRbacObjects } from './rbac.ts';
import { Registry, typeKey } from './registry.ts';
import { SandboxHttp } from './server.ts';
import { type ServiceEndpoint, ServiceRoutes } from './services.ts';
import { type SimulatorOptions, startSimulator } from './simulator/index.ts';
import { Store } from './store.ts';
import { createServingPki } from './tls.ts';
import type { KubeObject, UserInfo } from './types.ts';

export type { FaultHandle, FaultRule, Faults, WatchFilter } from './faults.ts';
export type { ServiceEndpoint } from './services.ts';
export type { SimulatorOptions } from './simulator/index.ts';

export interface SandboxOptions {
  /** host:port to listen on; port 0 picks a free one. Default 127.0.0.1:0. */
  listen?: string;
  /** Also write the admin kubeconfig to this path. */
  kubeconfigPath?: string;
  /** Changes kept for watch replay; older resourceVersions get 410 Gone. Default 10,000. */
  historyLimit?: number;
  /** Interval of watch bookmarks when clients ask for them. Default 60 s like kube-apiserver. */
  bookmarkIntervalMs?: number;
  /** Authorize requests with the stored RBAC objects (403 like Kubernetes). Default false. */
  rbac?: boolean;
  /** Clock for timestamps. */
  now?: () => number;
  /** The random suffix of a `generateName` (tests force collisions with it). Default: 5 random characters. */
  nameSuffix?: () => string;
  /**
   * Run the workload simulator: Deployment/ReplicaSet/StatefulSet/Job/CronJob controllers, a scheduler
   * and kubelets (see src/sandbox/simulator/index.ts). Default false.
   */
  simulateWorkloads?: boolean;
  /** Delays and retries of the workload simulator. */
  simulator?: SimulatorOptions;
}

export interface SandboxUser {
  username: string;
  groups: string[];
  token: string;
  /** A kubeconfig (YAML) that authenticates as this user. */
  kubeconfig: string;
}

export interface SandboxUsers {
  admin: SandboxUser;
  /** Adds a plain user with the given groups (system:authenticated is always added). */
  add(username: string, groups?: string[]): SandboxUser;
  /** A token for a service account, authenticated as system:serviceaccount:<ns>:<name>. */
  serviceAccount(namespace: string, name: string): SandboxUser;
}

export interface SandboxServices {
  /**
   * Routes a Service (as named in webhook clientConfig.service) to a local address, or to several
   * endpoints (replicas), each used only while its readiness URL answers 200 (see services.ts).
   */
  map(namespace: string, name: string, target: ServiceEndpoint | readonly ServiceEndpoint[]): void;
  unmap(namespace: string, name: string): void;
}

export interface Sandbox {
  url: string;
  /** Admin kubeconfig (YAML). */
  kubeconfig: string;
  kubeconfigPath: string | undefined;
  caCert: string;
  users: SandboxUsers;
  faults: Faults;
  services: SandboxServices;
  /** Number of objects stored for a resource (`group/resource`, '' group for core). */
  count(group: string, resource: string): number;
  /** TCP connections accepted so far (tests check that clients reuse theirs). */
  connectionsAccepted(): number;
  stop(): Promise<void>;
}

const DEFAULT_NAMESPACES = ['default', 'kube-system', 'kube-public', 'kube-node-lease'];

function kubeconfigYaml(url: string, caCert: string, user: string, token: string): string {
  return toYaml({
    apiVersion: 'v1',
    kind: 'Config',
    clusters: [
      {
        name: 'sandbox',
        cluster: { server: url, 'certificate-authority-data': Buffer.from(caCert).toString('base64') },
      },
    ],
    users: [{ name: user, user: { token } }],
    contexts: [{ name: 'sandbox', context: { cluster: 'sandbox', user, namespace: 'default' } }],
    'current-context': 'sandbox',
    preferences: {},
  });
}

function parseListen(listen: string): { host: string; port: number } {
  const m = /^(.*):(\d+)$/.exec(listen);
  if (!m) throw new Error(`invalid listen address "${listen}": expected host:port`);
  return { host: m[1]!.replace(/^\[|\]$/g, '') || '127.0.0.1', port: Number(m[2]) };
}

export async function startSandbox(options: SandboxOptions = {}): Promise<Sandbox> {
  const now = options.now ?? Date.now;
  const { host, port } = parseListen(options.listen ?? '127.0.0.1:0');
  const store = new Store(options.historyLimit ?? 10_000);
  const registry = new Registry();
  const crds = new CrdManager(registry);
  const faults = new Faults(() => store.compact());
  const serviceRoutes = new ServiceRoutes();
  let controllers: Controllers | undefined;

  const objects: ObjectService = new ObjectService({
    store,
    registry,
    now,
    ...(options.nameSuffix ? { nameSuffix: options.nameSuffix } : {}),
    hooks: {
      schemaFor: (type) => crds.schemaFor(type),
      afterWrite(type, object, deleted) {
        if (type.group === 'apiextensions.k8s.io' && type.resource === 'customresourcedefinitions') {
          if (deleted) crds.unregister(object);
          else crds.register(object);
        }
        if (!deleted && type.group === '' && type.resource === 'namespaces')
          ensureDefaultServiceAccount(object);
      },
      onDeleteRequested(type, object) {
        controllers?.onDeleteRequested(type, object);
      },
    },
  });
  objects.admission = new AdmissionChain({
    mutatingConfigs: () =>
      store.list(typeKey('admissionregistration.k8s.io', 'mutatingwebhookconfigurations')),
    validatingConfigs: () =>
      store.list(typeKey('admissionregistration.k8s.io', 'validatingwebhookconfigurations')),
    getNamespace: (name) => store.get(typeKey('', 'namespaces'), undefined, name),
    resolveService: (namespace, name) => serviceRoutes.resolve(namespace, name),
    now,
  });
  controllers = new Controllers(store, registry, objects);

  /** What the service-account controller does: every namespace gets a `default` ServiceAccount. */
  function ensureDefaultServiceAccount(ns: KubeObject): void {
    const name = ns.metadata.name ?? '';
    if (ns.metadata.deletionTimestamp || store.get(typeKey('', 'serviceaccounts'), name, 'default')) return;
    store.put(typeKey('', 'serviceaccounts'), {
      apiVersion: 'v1',
      kind: 'ServiceAccount',
      metadata: {
        name: 'default',
        namespace: name,
        uid: crypto.randomUUID(),
        creationTimestamp: rfc3339(now()),
      },
    });
  }

  const adminToken = randomBytes(24).toString('base64url');
  const tokens = new Map<string, UserInfo>();
  tokens.set(adminToken, { username: 'sandbox-admin', groups: ['system:masters', 'system:authenticated'] });

  const bootstrap: RequestContext = {
    user: tokens.get(adminToken)!,
    dryRun: false,
    fieldManager: 'sandbox-bootstrap',
    warnings: [],
  };
  const nsType = registry.get('', 'v1', 'namespaces')!;
  for (const name of DEFAULT_NAMESPACES) await objects.create(nsType, '', { metadata: { name } }, bootstrap);
  const seed = defaultRbacObjects();
  for (const role of seed.clusterRoles)
    await objects.create(
      registry.get('rbac.authorization.k8s.io', 'v1', 'clusterroles')!,
      '',
      role,
      bootstrap,
    );
  for (const binding of seed.clusterRoleBindings) {
    await objects.create(
      registry.get('rbac.authorization.k8s.io', 'v1', 'clusterrolebindings')!,
      '',
      binding,
      bootstrap,
    );
  }

  const pki = await createServingPki([
    'localhost',
    '127.0.0.1',
    '::1',
    host,
    'kubernetes',
    'kubernetes.default.svc',
  ]);
  let serverAddress = `${host}:${port}`;
  const rbacStore = {
    list: (resource: string, namespace?: string) =>
      store.list(typeKey('rbac.authorization.k8s.io', resource), namespace),
  };
  const http = new SandboxHttp({
    store,
    registry,
    objects,
    faults,
    authenticate: (token) => (token ? tokens.get(token) : undefined),
    issueToken: (user) => {
      const token = randomBytes(24).toString('base64url');
      tokens.set(token, user);
      return token;
    },
    rbac: options.rbac
      ? {
          roles: (ns) => rbacStore.list('roles', ns),
          clusterRoles: () => rbacStore.list('clusterroles'),
          roleBindings: (ns) => rbacStore.list('rolebindings', ns),
          clusterRoleBindings: () => rbacStore.list('clusterrolebindings'),
        }
      : undefined,
    now,
    serverAddress: () => serverAddress,
    bookmarkIntervalMs: options.bookmarkIntervalMs ?? 60_000,
  });

  const server: Server = createServer({ key: pki.key, cert: pki.cert, minVersion: 'TLSv1.2' }, (req, res) =>
    http.handle(req, res),
  );
  server.keepAliveTimeout = 65_000;
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(port, host, () => resolve());
  });
  const address = server.address() as AddressInfo;
  const urlHost = address.family === 'IPv6' ? `[${address.address}]` : address.address;
  serverAddress = `${urlHost}:${address.port}`;
  const url = `https://${serverAddress}`;

  const makeUser = (username: string, groups: string[]): SandboxUser => {
    const token = randomBytes(24).toString('base64url');
    const allGroups = [...new Set([...groups, 'system:authenticated'])];
    tokens.set(token, { username, groups: allGroups });
    return {
      username,
      groups: allGroups,
      token,
      kubeconfig: kubeconfigYaml(url, pki.caCert, username, token),
    };
  };
  const admin: SandboxUser = {
    username: 'sandbox-admin',
    groups: ['system:masters', 'system:authenticated'],
    token: adminToken,
    kubeconfig: kubeconfigYaml(url, pki.caCert, 'sandbox-admin', adminToken),
  };
  if (options.kubeconfigPath) {
    await mkdir(dirname(options.kubeconfigPath), { recursive: true });
    await writeFile(options.kubeconfigPath, admin.kubeconfig, { mode: 0o600 });
  }

  const simulator = options.simulateWorkloads
    ? await startSimulator({ store, registry, objects, now }, options.simulator)
    : undefined;

  // Every accepted connection, TLS handshake done or not: stop() destroys them all, so that a client
  // that connected but never finished (or never started) its handshake cannot hold server.close().
  const sockets = new Set<Socket>();
  let accepted = 0;
  server.on('connection', (socket: Socket) => {
    accepted++;
    sockets.add(socket);
    socket.on('close', () => sockets.delete(socket));
  });

  return {
    url,
    kubeconfig: admin.kubeconfig,
    kubeconfigPath: options.kubeconfigPath,
    caCert: pki.caCert,
    faults,
    users: {
      admin,
      add: (username, groups = []) => makeUser(username, groups),
      serviceAccount: (namespace, name) =>
        makeUser(`system:serviceaccount:${namespace}:${name}`, [
          'system:serviceaccounts',
          `system:serviceaccounts:${namespace}`,
        ]),
    },
    services: {
      map: (namespace, name, target) => serviceRoutes.map(namespace, name, target),
      unmap: (namespace, name) => serviceRoutes.unmap(namespace, name),
    },
    count: (group, resource) => store.count(typeKey(group, resource)),
    connectionsAccepted: () => accepted,
    async stop() {
      await simulator?.stop();
      controllers?.stop();
      serviceRoutes.stop();
      for (const w of faults.watches) w.drop();
      const closed = new Promise<void>((resolve) => server.close(() => resolve()));
      for (const s of sockets) s.destroy();
      await closed;
    },
  };
}
