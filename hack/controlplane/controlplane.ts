// startControlPlane(): a real, local Kubernetes control plane from the binaries build.ts makes — etcd,
// kube-apiserver (RBAC + Node authorization, the default admission plugins with the webhook ones,
// service-account tokens), kube-controller-manager, kube-scheduler, and KWOK standing in for kubelets on
// a few fake Nodes whose Pods become Running and Ready. Each instance has its own free ports and
// temporary directory, and everything is stopped and removed by stop() or when this process exits.
// See docs/controlplane.md.
import { randomBytes } from 'node:crypto';
import { existsSync, mkdirSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import { request as httpRequest } from 'node:http';
import { request as httpsRequest } from 'node:https';
import { type AddressInfo, createServer } from 'node:net';
import { networkInterfaces, tmpdir } from 'node:os';
import { join } from 'node:path';
import { stringify as toYaml } from 'yaml';
import { type ControlPlaneBinaries, ensureBinaries, type Versions } from './build.ts';
import { type Authority, createAuthority, type KeyPair, serviceAccountKeys } from './pki.ts';
import { Component, type Exit } from './process.ts';

export const ADMIN_USER = 'berth-admin';
/** Label of the Nodes KWOK manages (others, e.g. a test's own Nodes, are left alone). */
export const KWOK_NODE_LABEL = 'type';
export const KWOK_NODE_LABEL_VALUE = 'kwok';
const SERVICE_CIDR = '10.96.0.0/16';
const KUBERNETES_SERVICE_IP = '10.96.0.1';
const POD_CIDR = '10.244.0.0/16';
const INSTANCE_PREFIX = 'berth-controlplane-';

export interface ControlPlaneOptions {
  /** Fake Nodes managed by KWOK (`kwok-node-<i>`). Default 2. */
  nodes?: number;
  /** Progress lines (default: none). */
  log?: (line: string) => void;
  /** Called when a component dies after start-up, with its last log lines (default: stderr). */
  onComponentExit?: (message: string) => void;
  /** Already-built binaries (default: ensureBinaries(), building them on first use). */
  binaries?: ControlPlaneBinaries;
  /** Keep the instance directory (logs, etcd data) after stop(). Default: $BERTH_CONTROLPLANE_KEEP set. */
  keepDir?: boolean;
  /** Extra kube-apiserver flags (`--name=value`), after the defaults. */
  apiServerFlags?: readonly string[];
  /** Extra kube-controller-manager flags (`--name=value`), after the defaults. */
  controllerManagerFlags?: readonly string[];
}

export interface ControlPlane {
  /** https://127.0.0.1:<port> */
  readonly url: string;
  /** PEM of the CA that signed the API server's certificate and every client certificate. */
  readonly caCert: string;
  /**
   * The CA itself: kube-apiserver trusts client certificates it signs (CN = user, O = groups), so
   * `authority(ca).client(user, groups)` makes a user. Throwaway, like everything of the instance.
   */
  readonly ca: KeyPair;
  /** Admin kubeconfig (YAML; client certificate in system:masters) and where it is written. */
  readonly kubeconfig: string;
  readonly kubeconfigPath: string;
  /** A static bearer token of the admin (for clients that cannot present a certificate, e.g. a proxy). */
  readonly adminToken: string;
  /**
   * This machine's non-loopback IPv4 address, or undefined when it has none. EndpointSlices cannot hold
   * loopback addresses, so a webhook Service reaches a local server only through this address.
   */
  readonly hostAddress: string | undefined;
  readonly dir: string;
  readonly versions: Versions;
  readonly nodeNames: readonly string[];
  /** The first component that died after start-up, described with its last log lines. */
  failure(): string | undefined;
  /** Each component's process and log file. */
  readonly components: ReadonlyArray<{ name: string; pid: number | undefined; logPath: string }>;
  stop(): Promise<void>;
}

export class ControlPlaneError extends Error {
  override name = 'ControlPlaneError';
}

/** A free TCP port on 127.0.0.1 (closed again; the component binds it a moment later). */
async function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = createServer();
    server.unref();
    server.on('error', reject);
    server.listen(0, '127.0.0.1', () => {
      const { port } = server.address() as AddressInfo;
      server.close(() => resolve(port));
    });
  });
}

/** The first non-internal IPv4 address of this machine. */
export function findHostAddress(): string | undefined {
  for (const addrs of Object.values(networkInterfaces()))
    for (const a of addrs ?? []) if (a.family === 'IPv4' && !a.internal) return a.address;
  return undefined;
}

/** A kubeconfig (YAML) for `user` of the cluster at `url`, with a client certificate or a bearer token. */
export function kubeconfigYaml(
  url: string,
  caCert: string,
  user: string,
  auth: { cert: string; key: string } | { token: string },
): string {
  return toYaml({
    apiVersion: 'v1',
    kind: 'Config',
    clusters: [{ name: 'berth-local', cluster: { server: url, 'certificate-authority-data': b64(caCert) } }],
    users: [
      {
        name: user,
        user:
          'token' in auth
            ? { token: auth.token }
            : { 'client-certificate-data': b64(auth.cert), 'client-key-data': b64(auth.key) },
      },
    ],
    contexts: [{ name: 'berth-local', context: { cluster: 'berth-local', user, namespace: 'default' } }],
    'current-context': 'berth-local',
    preferences: {},
  });
}

const b64 = (s: string): string => Buffer.from(s).toString('base64');

interface Probe {
  url: string;
  ca?: string;
  token?: string;
  /** Accept the component's self-signed serving certificate (loopback health checks only). */
  insecure?: boolean;
}

/** GET `url`; resolves with the status and body, or undefined when nothing answered. */
function get(probe: Probe, timeoutMs = 2_000): Promise<{ status: number; body: string } | undefined> {
  return new Promise((resolve) => {
    const u = new URL(probe.url);
    const options = {
      method: 'GET',
      timeout: timeoutMs,
      headers: probe.token ? { Authorization: `Bearer ${probe.token}` } : {},
      ...(u.protocol === 'https:' ? { ca: probe.ca, rejectUnauthorized: !probe.insecure } : {}),
    };
    const req = (u.protocol === 'https:' ? httpsRequest : httpRequest)(u, options, (res) => {
      let body = '';
      res.setEncoding('utf8');
      res.on('data', (c: string) => {
        body += c;
      });
      res.on('end', () => resolve({ status: res.statusCode ?? 0, body }));
      res.on('error', () => resolve(undefined));
    });
    req.on('timeout', () => req.destroy());
    req.on('error', () => resolve(undefined));
    req.end();
  });
}

const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));

/** Polls until `check` is true; fails with `what` once `timeoutMs` passed or `died()` names a dead process. */
async function waitFor(
  what: string,
  check: () => Promise<boolean>,
  timeoutMs: number,
  died: () => string | undefined,
): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const dead = died();
    if (dead) throw new ControlPlaneError(dead);
    if (await check()) return;
    if (Date.now() > deadline)
      throw new ControlPlaneError(`timed out after ${timeoutMs / 1000}s waiting for ${what}`);
    await sleep(100);
  }
}

/** Marks a directory kept on purpose (BERTH_CONTROLPLANE_KEEP): the sweep leaves it for its reader. */
const KEPT_MARKER = 'KEPT';

/** Removes instance directories left by processes that no longer exist (a killed test run). */
function sweepStaleInstances(): void {
  let entries: string[];
  try {
    entries = readdirSync(tmpdir());
  } catch {
    return;
  }
  for (const name of entries) {
    if (!name.startsWith(INSTANCE_PREFIX)) continue;
    const pid = Number(name.slice(INSTANCE_PREFIX.length).split('-')[0]);
    if (!Number.isInteger(pid) || pid === process.pid) continue;
    if (existsSync(join(tmpdir(), name, KEPT_MARKER))) continue;
    try {
      process.kill(pid, 0);
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code === 'ESRCH')
        rmSync(join(tmpdir(), name), { recursive: true, force: true });
    }
  }
}

interface Ports {
  etcdClient: number;
  etcdPeer: number;
  apiserver: number;
  controllerManager: number;
  scheduler: number;
  kwok: number;
}

/** Starts a control plane; on failure everything started so far is stopped and the error names why. */
export async function startControlPlane(options: ControlPlaneOptions = {}): Promise<ControlPlane> {
  const log = options.log ?? (() => {});
  const binaries = options.binaries ?? (await ensureBinaries({ log }));
  sweepStaleInstances();
  // A port taken between choosing and binding it fails the start: choose again, twice at most.
  for (let attempt = 1; ; attempt++) {
    try {
      return await startOnce(options, binaries, log);
    } catch (err) {
      if (attempt >= 3 || !(err instanceof ControlPlaneError) || !/address already in use/.test(err.message))
        throw err;
      log(`controlplane: a port was taken meanwhile; starting again (attempt ${attempt + 1})`);
    }
  }
}

async function startOnce(
  options: ControlPlaneOptions,
  binaries: ControlPlaneBinaries,
  log: (line: string) => void,
): Promise<ControlPlane> {
  const started = Date.now();
  const dir = join(tmpdir(), `${INSTANCE_PREFIX}${process.pid}-${randomBytes(4).toString('hex')}`);
  const keepDir = options.keepDir ?? Boolean(process.env.BERTH_CONTROLPLANE_KEEP);
  for (const sub of ['pki', 'etcd', 'logs', 'kubeconfigs']) mkdirSync(join(dir, sub), { recursive: true });
  if (keepDir)
    writeFileSync(join(dir, KEPT_MARKER), 'kept after stop (BERTH_CONTROLPLANE_KEEP); remove by hand\n');
  const file = (name: string, content: string): string => {
    const path = join(dir, name);
    writeFileSync(path, content, { mode: 0o600 });
    return path;
  };

  const hostAddress = findHostAddress();
  const ports: Ports = {
    etcdClient: await freePort(),
    etcdPeer: await freePort(),
    apiserver: await freePort(),
    controllerManager: await freePort(),
    scheduler: await freePort(),
    kwok: await freePort(),
  };
  const url = `https://127.0.0.1:${ports.apiserver}`;

  const ca: Authority = await createAuthority(`berth-controlplane-ca-${randomBytes(3).toString('hex')}`);
  const serving = await ca.serving([
    'localhost',
    'kubernetes',
    'kubernetes.default',
    'kubernetes.default.svc',
    'kubernetes.default.svc.cluster.local',
    '127.0.0.1',
    KUBERNETES_SERVICE_IP,
    ...(hostAddress ? [hostAddress] : []),
  ]);
  const sa = serviceAccountKeys();
  const adminToken = randomBytes(24).toString('hex');
  const pki = {
    ca: file('pki/ca.crt', ca.cert),
    caKey: file('pki/ca.key', ca.key),
    cert: file('pki/apiserver.crt', serving.cert),
    key: file('pki/apiserver.key', serving.key),
    saKey: file('pki/sa.key', sa.privateKey),
    saPub: file('pki/sa.pub', sa.publicKey),
    tokens: file('pki/tokens.csv', `${adminToken},${ADMIN_USER},${ADMIN_USER}-uid,"system:masters"\n`),
  };
  const clientKubeconfig = async (name: string, user: string, groups: string[] = []): Promise<string> =>
    file(`kubeconfigs/${name}.kubeconfig`, kubeconfigYaml(url, ca.cert, user, await ca.client(user, groups)));
  const admin: KeyPair = await ca.client(ADMIN_USER, ['system:masters']);
  const kubeconfig = kubeconfigYaml(url, ca.cert, ADMIN_USER, admin);
  const kubeconfigPath = file('kubeconfig', kubeconfig);
  const kcmKubeconfig = await clientKubeconfig('kube-controller-manager', 'system:kube-controller-manager');
  const schedulerKubeconfig = await clientKubeconfig('kube-scheduler', 'system:kube-scheduler');
  const kwokKubeconfig = await clientKubeconfig('kwok', 'kwok-controller', ['system:masters']);

  const components: Component[] = [];
  let firstFailure: string | undefined;
  const onComponentExit =
    options.onComponentExit ?? ((message: string) => process.stderr.write(`controlplane: ${message}\n`));
  let ready = false;
  const start = (name: string, bin: string, args: string[]): Component => {
    const c = new Component(name, bin, args, join(dir, 'logs', `${name}.log`), (component, exit: Exit) => {
      const message = component.describeExit(exit);
      firstFailure ??= message;
      if (ready) onComponentExit(message);
    });
    components.push(c);
    return c;
  };
  const died = (): string | undefined => firstFailure;

  const stopAll = async (): Promise<void> => {
    // Throwaway state: a short grace, then SIGKILL. etcd last, so the others do not log its absence.
    const others = components.filter((c) => c.name !== 'etcd');
    await Promise.all(others.map((c) => c.stop(1_500)));
    await Promise.all(components.filter((c) => c.name === 'etcd').map((c) => c.stop(1_000)));
    if (!keepDir) rmSync(dir, { recursive: true, force: true });
  };
  const removeOnExit = (): void => {
    if (!keepDir) rmSync(dir, { recursive: true, force: true });
  };
  process.on('exit', removeOnExit);

  try {
    log('controlplane: starting etcd');
    const etcdUrl = `http://127.0.0.1:${ports.etcdClient}`;
    const peerUrl = `http://127.0.0.1:${ports.etcdPeer}`;
    start('etcd', binaries.bin.etcd, [
      `--data-dir=${join(dir, 'etcd')}`,
      `--listen-client-urls=${etcdUrl}`,
      `--advertise-client-urls=${etcdUrl}`,
      `--listen-peer-urls=${peerUrl}`,
      `--initial-advertise-peer-urls=${peerUrl}`,
      `--initial-cluster=default=${peerUrl}`,
      // Throwaway data: no fsync (as envtest and kwokctl do for tests).
      '--unsafe-no-fsync',
      '--log-level=warn',
      `--quota-backend-bytes=${4 * 1024 ** 3}`,
    ]);
    await waitFor(
      'etcd /health',
      async () => (await get({ url: `${etcdUrl}/health` }))?.body.includes('"health":"true"') === true,
      30_000,
      died,
    );

    log('controlplane: starting kube-apiserver');
    start('kube-apiserver', binaries.bin['kube-apiserver'], [
      `--etcd-servers=${etcdUrl}`,
      '--bind-address=127.0.0.1',
      `--secure-port=${ports.apiserver}`,
      `--advertise-address=${hostAddress ?? '127.0.0.1'}`,
      // The `kubernetes` Service's endpoint cannot be a loopback address.
      ...(hostAddress ? [] : ['--endpoint-reconciler-type=none']),
      `--cert-dir=${join(dir, 'pki')}`,
      `--tls-cert-file=${pki.cert}`,
      `--tls-private-key-file=${pki.key}`,
      `--client-ca-file=${pki.ca}`,
      `--token-auth-file=${pki.tokens}`,
      '--authorization-mode=Node,RBAC',
      '--enable-admission-plugins=NodeRestriction',
      '--service-account-issuer=https://kubernetes.default.svc.cluster.local',
      `--service-account-key-file=${pki.saPub}`,
      `--service-account-signing-key-file=${pki.saKey}`,
      `--service-cluster-ip-range=${SERVICE_CIDR}`,
      // Webhook Services resolve through their EndpointSlices (no kube-proxy to route a ClusterIP).
      '--enable-aggregator-routing=true',
      '--allow-privileged=true',
      '--profiling=false',
      ...(options.apiServerFlags ?? []),
    ]);
    const apiProbe = { ca: ca.cert, token: adminToken };
    await waitFor(
      'kube-apiserver /readyz',
      async () => (await get({ ...apiProbe, url: `${url}/readyz` }))?.status === 200,
      90_000,
      died,
    );

    log('controlplane: starting kube-controller-manager, kube-scheduler and kwok');
    start('kube-controller-manager', binaries.bin['kube-controller-manager'], [
      `--kubeconfig=${kcmKubeconfig}`,
      `--authentication-kubeconfig=${kcmKubeconfig}`,
      `--authorization-kubeconfig=${kcmKubeconfig}`,
      '--bind-address=127.0.0.1',
      `--secure-port=${ports.controllerManager}`,
      `--cert-dir=${join(dir, 'pki', 'kube-controller-manager')}`,
      '--leader-elect=false',
      // Each controller acts as its own service account, as in kubeadm clusters.
      '--use-service-account-credentials=true',
      `--service-account-private-key-file=${pki.saKey}`,
      `--root-ca-file=${pki.ca}`,
      `--cluster-signing-cert-file=${pki.ca}`,
      `--cluster-signing-key-file=${pki.caKey}`,
      `--service-cluster-ip-range=${SERVICE_CIDR}`,
      '--kube-api-qps=100',
      '--kube-api-burst=200',
      ...(options.controllerManagerFlags ?? []),
    ]);
    start('kube-scheduler', binaries.bin['kube-scheduler'], [
      `--kubeconfig=${schedulerKubeconfig}`,
      `--authentication-kubeconfig=${schedulerKubeconfig}`,
      `--authorization-kubeconfig=${schedulerKubeconfig}`,
      '--bind-address=127.0.0.1',
      `--secure-port=${ports.scheduler}`,
      `--cert-dir=${join(dir, 'pki', 'kube-scheduler')}`,
      '--leader-elect=false',
    ]);
    start('kwok', binaries.bin.kwok, [
      `--kubeconfig=${kwokKubeconfig}`,
      `--config=${binaries.kwokStages}`,
      '--manage-all-nodes=false',
      `--manage-nodes-with-label-selector=${KWOK_NODE_LABEL}=${KWOK_NODE_LABEL_VALUE}`,
      '--node-lease-duration-seconds=40',
      `--server-address=127.0.0.1:${ports.kwok}`,
      `--cidr=${POD_CIDR}`,
      `--node-ip=${hostAddress ?? '10.0.0.2'}`,
    ]);
    const health = (port: number, scheme = 'https'): Probe => ({
      url: `${scheme}://127.0.0.1:${port}/healthz`,
      insecure: true,
    });
    await Promise.all(
      (
        [
          ['kube-controller-manager /healthz', health(ports.controllerManager)],
          ['kube-scheduler /healthz', health(ports.scheduler)],
          ['kwok /healthz', health(ports.kwok, 'http')],
        ] as const
      ).map(([what, probe]) => waitFor(what, async () => (await get(probe))?.status === 200, 60_000, died)),
    );

    const api = new AdminClient(url, ca.cert, adminToken);
    const nodeNames = Array.from({ length: options.nodes ?? 2 }, (_, i) => `kwok-node-${i}`);
    for (const name of nodeNames) await api.post('/api/v1/nodes', kwokNode(name));
    await waitFor(
      `${nodeNames.length} KWOK Nodes Ready`,
      async () => {
        const list = (await api.get('/api/v1/nodes?labelSelector=type%3Dkwok')) as NodeList | undefined;
        const readyNodes = (list?.items ?? []).filter((n) =>
          n.status?.conditions?.some((c) => c.type === 'Ready' && c.status === 'True'),
        );
        return readyNodes.length >= nodeNames.length;
      },
      60_000,
      died,
    );
    // The ServiceAccount admission plugin refuses Pods until their namespace's `default` account exists.
    await waitFor(
      'the default ServiceAccount (kube-controller-manager running)',
      async () => (await api.get('/api/v1/namespaces/default/serviceaccounts/default')) !== undefined,
      60_000,
      died,
    );
    ready = true;
    log(`controlplane: ready at ${url} in ${((Date.now() - started) / 1000).toFixed(1)}s (${dir})`);

    let stopped: Promise<void> | undefined;
    return {
      url,
      caCert: ca.cert,
      ca: { cert: ca.cert, key: ca.key },
      kubeconfig,
      kubeconfigPath,
      adminToken,
      hostAddress,
      dir,
      versions: binaries.versions,
      nodeNames,
      components: components.map((c) => ({ name: c.name, pid: c.pid, logPath: c.logPath })),
      failure: () => firstFailure,
      stop() {
        stopped ??= stopAll().finally(() => process.off('exit', removeOnExit));
        return stopped;
      },
    };
  } catch (err) {
    await stopAll().catch(() => {});
    process.off('exit', removeOnExit);
    throw err instanceof ControlPlaneError ? err : new ControlPlaneError(String(err));
  }
}

interface NodeList {
  items: Array<{ status?: { conditions?: Array<{ type: string; status: string }> } }>;
}

function kwokNode(name: string): object {
  const capacity = { cpu: '32', memory: '256Gi', pods: '250', 'ephemeral-storage': '100Gi' };
  return {
    apiVersion: 'v1',
    kind: 'Node',
    metadata: {
      name,
      labels: {
        [KWOK_NODE_LABEL]: KWOK_NODE_LABEL_VALUE,
        'kubernetes.io/hostname': name,
        'kubernetes.io/os': 'linux',
        'kubernetes.io/arch': 'amd64',
      },
      annotations: { 'kwok.x-k8s.io/node': 'fake', 'node.alpha.kubernetes.io/ttl': '0' },
    },
    status: { capacity, allocatable: capacity },
  };
}

/** The few admin calls start-up makes, without pulling a client library into the launcher. */
class AdminClient {
  readonly #url: string;
  readonly #ca: string;
  readonly #token: string;

  constructor(url: string, ca: string, token: string) {
    this.#url = url;
    this.#ca = ca;
    this.#token = token;
  }

  /** The object at `path`, or undefined when it does not exist (or nothing answered). */
  async get(path: string): Promise<unknown> {
    const res = await get({ url: `${this.#url}${path}`, ca: this.#ca, token: this.#token });
    return res?.status === 200 ? JSON.parse(res.body) : undefined;
  }

  post(path: string, body: object): Promise<void> {
    return new Promise((resolve, reject) => {
      const payload = JSON.stringify(body);
      const req = httpsRequest(
        `${this.#url}${path}`,
        {
          method: 'POST',
          ca: this.#ca,
          headers: {
            Authorization: `Bearer ${this.#token}`,
            'Content-Type': 'application/json',
            'Content-Length': Buffer.byteLength(payload),
          },
        },
        (res) => {
          let text = '';
          res.setEncoding('utf8');
          res.on('data', (c: string) => {
            text += c;
          });
          res.on('end', () =>
            (res.statusCode ?? 0) < 300 || res.statusCode === 409
              ? resolve()
              : reject(new ControlPlaneError(`POST ${path}: ${res.statusCode} ${text.slice(0, 300)}`)),
          );
        },
      );
      req.on('error', (err) => reject(new ControlPlaneError(`POST ${path}: ${err.message}`)));
      req.end(payload);
    });
  }
}

// `npm run controlplane [-- --nodes N]`: a control plane to point kubectl at, until Ctrl-C.
if (import.meta.main) {
  const { parseArgs } = await import('node:util');
  let nodes = 2;
  try {
    const { values } = parseArgs({ options: { nodes: { type: 'string', default: '2' } } });
    nodes = Number(values.nodes);
    if (!Number.isInteger(nodes) || nodes < 0)
      throw new Error(`--nodes ${values.nodes}: expected a whole number`);
  } catch (err) {
    process.stderr.write(`controlplane: ${err instanceof Error ? err.message : String(err)}\n`);
    process.exit(2);
  }
  const log = (line: string): void => {
    process.stderr.write(`${line}\n`);
  };
  try {
    const cp = await startControlPlane({ nodes, log });
    process.stdout.write(`export KUBECONFIG=${cp.kubeconfigPath}\n`);
    const stop = (): void => {
      void cp.stop().then(() => process.exit(0));
    };
    process.once('SIGINT', stop);
    process.once('SIGTERM', stop);
  } catch (err) {
    log(`controlplane: ${err instanceof Error ? err.message : String(err)}`);
    process.exitCode = 1;
  }
}
