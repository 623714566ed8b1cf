// The pod-admission benchmark's Kueue peer: Kueue v0.17.0's controller-manager (built by hack/kueue/build.ts)
// with its Pod integration, run out of cluster against a control plane of the bench, installed from what
// the module ships: `kubectl kustomize` of its config/default (the release manifest's source) gives the
// CRDs, the kueue-system namespace, the ServiceAccount and RBAC, the (empty) webhook Secret, the Services
// and the two webhook configurations, applied as rendered. What differs from the shipped install, each
// because the manager runs as a process on this machine instead of a Pod of its Deployment:
//   - no Deployment: the binary runs here, as the kueue-controller-manager ServiceAccount (a TokenRequest
//     token in a kubeconfig), with the Deployment's `--zap-log-level=2`;
//   - the Configuration is the shipped controller_manager_config.yaml with, besides the user's choices
//     (only the `pod` framework; `managedJobsNamespaceSelector` selecting the managed namespaces by name),
//     free ports instead of :9443/:8081/:8443 (the probe and metrics servers on loopback), the webhook
//     certDir in a temporary directory, and leaderElection.resourceNamespace kueue-system (in a Pod,
//     controller-runtime takes the Pod's namespace, kueue-system; out of cluster it must be named);
//   - the Secret volume: the kubelet would mount kueue-webhook-server-cert at the certDir; here a poller
//     copies the Secret's keys into the directory (every 250 ms; a kubelet takes up to a minute), so that
//     Kueue's cert rotator finds the certificate it wrote;
//   - kueue-webhook-service keeps its selector (no Pod matches) and is routed to the process through an
//     EndpointSlice at this machine's address, Ready while the manager's /readyz answers 200, as the
//     EndpointSlice controller would route it to a ready Pod; the API server dials it by the Service's name,
//     and checks it against the CA Kueue's cert rotator injected into the configurations (no other change
//     to them: rules, failurePolicy, namespaceSelector and timeouts are as rendered);
//   - no APIService for the visibility API (v1beta1/v1beta2.visibility.kueue.x-k8s.io): while the peer is
//     stopped, between its windows, an unavailable aggregated API would fail the API server's discovery
//     for every other client. Its server still runs in the process (on a free port), as shipped;
//   - the webhook configurations exist only while the peer runs (the benchmark measures each side alone):
//     created as rendered before the manager starts (its rotator injects the CA into them), deleted before
//     it stops.
//   - no Pod around it: neither the Deployment's limits (cpu 2, memory 512Mi: this machine has two cores,
//     and the process stays far below 512 MiB) nor its securityContext.
// The manager's log goes to a file in the peer's temporary directory (kept when BERTH_BENCH_KUEUE_KEEP is
// set). The process dies with the benchmark (Component: PR_SET_PDEATHSIG and a kill at exit).
import { execFile } from 'node:child_process';
import { mkdir, mkdtemp, rm, writeFile } from 'node:fs/promises';
import { request } from 'node:https';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { KubernetesObject } from '@kubernetes/client-node';
import { parseAllDocuments, parse as parseYaml, stringify } from 'yaml';
import { Component } from '../../hack/controlplane/process.ts';
import { ensureKueue, type KueueBinary } from '../../hack/kueue/build.ts';
import type { ServiceRoute, TestCluster } from '../helpers/cluster.ts';
import { eventually } from '../helpers/eventually.ts';
import { type AdminApi, adminApi } from './admin-api.ts';
import { metricSum, usage } from './proc.ts';

export const KUEUE_NAMESPACE = 'kueue-system';
export const KUEUE_SERVICE_ACCOUNT = 'kueue-controller-manager';
export const KUEUE_WEBHOOK_SERVICE = 'kueue-webhook-service';
export const KUEUE_WEBHOOK_SECRET = 'kueue-webhook-server-cert';
export const KUEUE_MUTATING = 'kueue-mutating-webhook-configuration';
export const KUEUE_VALIDATING = 'kueue-validating-webhook-configuration';
/** The label naming a Pod's LocalQueue, and the scheduling gate Kueue's Pod webhook adds. */
export const QUEUE_LABEL = 'kueue.x-k8s.io/queue-name';
export const KUEUE_GATE = 'kueue.x-k8s.io/admission';
/** Kueue's Pod webhooks (paths of its webhook server, names in the configurations). */
export const KUEUE_POD_WEBHOOKS = {
  mutate: { path: '/mutate--v1-pod', name: 'mpod.kb.io' },
  validate: { path: '/validate--v1-pod', name: 'vpod.kb.io' },
} as const;
export const LOCAL_QUEUE = 'bench-lq';
const CLUSTER_QUEUE = 'bench-cq';
const FLAVOR = 'bench-flavor';
const API_GROUP = 'kueue.x-k8s.io';
const API_VERSION = 'v1beta2';
const SECRET_POLL_MS = 250;

/** Where each kind that config/default renders (and the queues) is served: [group/version path, plural, namespaced]. */
const RESOURCES: Record<string, [string, string, boolean]> = {
  Namespace: ['api/v1', 'namespaces', false],
  ServiceAccount: ['api/v1', 'serviceaccounts', true],
  ConfigMap: ['api/v1', 'configmaps', true],
  Secret: ['api/v1', 'secrets', true],
  Service: ['api/v1', 'services', true],
  Role: ['apis/rbac.authorization.k8s.io/v1', 'roles', true],
  RoleBinding: ['apis/rbac.authorization.k8s.io/v1', 'rolebindings', true],
  ClusterRole: ['apis/rbac.authorization.k8s.io/v1', 'clusterroles', false],
  ClusterRoleBinding: ['apis/rbac.authorization.k8s.io/v1', 'clusterrolebindings', false],
  CustomResourceDefinition: ['apis/apiextensions.k8s.io/v1', 'customresourcedefinitions', false],
  MutatingWebhookConfiguration: [
    'apis/admissionregistration.k8s.io/v1',
    'mutatingwebhookconfigurations',
    false,
  ],
  ValidatingWebhookConfiguration: [
    'apis/admissionregistration.k8s.io/v1',
    'validatingwebhookconfigurations',
    false,
  ],
  ResourceFlavor: [`apis/${API_GROUP}/${API_VERSION}`, 'resourceflavors', false],
  ClusterQueue: [`apis/${API_GROUP}/${API_VERSION}`, 'clusterqueues', false],
  LocalQueue: [`apis/${API_GROUP}/${API_VERSION}`, 'localqueues', true],
};

/** The collection path of `x`'s kind (in its namespace). */
function collection(x: KubernetesObject): string {
  const r = RESOURCES[x.kind ?? ''];
  if (r === undefined) throw new Error(`kueue: no REST path for kind ${x.kind}`);
  const [prefix, plural, namespaced] = r;
  return namespaced
    ? `/${prefix}/namespaces/${x.metadata?.namespace ?? 'default'}/${plural}`
    : `/${prefix}/${plural}`;
}

/**
 * Creates `x` as the admin, as JSON as it was rendered (a typed client would drop the CRDs' `x-kubernetes-*`
 * schema keys); one that exists already is left as it is.
 */
async function create(api: AdminApi, x: KubernetesObject): Promise<void> {
  const r = await api.raw('POST', collection(x), x);
  if (r.status !== 201 && r.status !== 409)
    throw new Error(`create ${x.kind} ${x.metadata?.name}: HTTP ${r.status} ${r.body.slice(0, 300)}`);
}

/** Deletes `x` (gone already is fine). */
async function remove(api: AdminApi, x: KubernetesObject): Promise<void> {
  const r = await api.raw('DELETE', `${collection(x)}/${x.metadata?.name}`);
  if (r.status !== 200 && r.status !== 202 && r.status !== 404)
    throw new Error(`delete ${x.kind} ${x.metadata?.name}: HTTP ${r.status} ${r.body.slice(0, 300)}`);
}

/** The Kueue binary and config of the pin, or why the peer cannot run (the build failed). */
export async function kueueOrSkip(log: (msg: string) => void): Promise<KueueBinary | { skipped: string }> {
  if (process.env.BERTH_BENCH_KUEUE === '0') return { skipped: 'BERTH_BENCH_KUEUE=0' };
  try {
    return await ensureKueue({ log });
  } catch (err) {
    return { skipped: `npm run kueue:build failed: ${err instanceof Error ? err.message : String(err)}` };
  }
}

/** `kubectl kustomize` of a directory: Kueue's config/default, as the release manifest is made. */
async function kustomize(dir: string): Promise<KubernetesObject[]> {
  const text = await new Promise<string>((resolve, reject) => {
    execFile(
      'kubectl',
      ['kustomize', dir],
      { maxBuffer: 64 * 1024 * 1024, timeout: 60_000 },
      (err, stdout, stderr) =>
        err ? reject(new Error(`kubectl kustomize ${dir}: ${stderr || err.message}`)) : resolve(stdout),
    );
  });
  return parseAllDocuments(text)
    .map((d) => d.toJS() as KubernetesObject | null)
    .filter((o): o is KubernetesObject => o !== null);
}

/** A free TCP port on all addresses (closed again; the manager binds it a moment later). */
function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const s = createServer();
    s.once('error', reject);
    s.listen(0, () => {
      const port = (s.address() as { port: number }).port;
      s.close(() => resolve(port));
    });
  });
}

export interface KueueCounters {
  /** Reviews served and their seconds, per Pod webhook (controller_runtime_webhook_*). */
  reviews: Record<PodWebhook, number>;
  reviewSeconds: Record<PodWebhook, number>;
  /** The manager's API requests by verb (client-go's rest_client_requests_total). */
  apiRequests: Record<string, number>;
  cpuSeconds: number;
  rssMib: number;
}

type PodWebhook = keyof typeof KUEUE_POD_WEBHOOKS;
const VERBS = ['GET', 'LIST', 'POST', 'PUT', 'PATCH', 'DELETE', 'WATCH'] as const;

export interface KueuePeerOptions {
  /** Namespaces Kueue manages (its managedJobsNamespaceSelector selects them by name); each gets the LocalQueue. */
  managedNamespaces: readonly string[];
  log: (msg: string) => void;
}

interface Fields {
  dir: string;
  certDir: string;
  configPath: string;
  kubeconfig: string;
  ports: { webhook: number; health: number; metrics: number; visibility: number };
  configurations: KubernetesObject[];
  route: ServiceRoute;
}

/** What this run does differently from the shipped install (see the header), for the JSON. */
export const KUEUE_DEVIATIONS = [
  'the manager runs as a process on this machine (no Deployment) as its ServiceAccount, with the Deployment args (--zap-log-level=2)',
  'Configuration: the shipped file with integrations.frameworks [pod] and managedJobsNamespaceSelector (the choices), free ports (probe and metrics on loopback), webhook.certDir in a temporary directory, leaderElection.resourceNamespace kueue-system',
  "the Secret volume emulated: the Secret's keys copied into certDir every 250 ms",
  'kueue-webhook-service routed by an EndpointSlice to this machine, Ready while /readyz answers 200',
  'no visibility APIServices (an unavailable aggregated API fails discovery while the peer is stopped)',
  'the webhook configurations as rendered, present only while the peer runs',
].join('; ');

/** Kueue installed on a control plane; start() and stop() run and stop its manager (and its registration). */
export class KueuePeer {
  readonly binary: KueueBinary;
  readonly #t: TestCluster;
  readonly #api: AdminApi;
  readonly #f: Fields;
  readonly #log: (msg: string) => void;
  #component: Component | undefined;
  #secretTimer: NodeJS.Timeout | undefined;
  #written = '';
  #starts = 0;

  private constructor(
    t: TestCluster,
    api: AdminApi,
    binary: KueueBinary,
    f: Fields,
    log: (msg: string) => void,
  ) {
    this.#t = t;
    this.#api = api;
    this.binary = binary;
    this.#f = f;
    this.#log = log;
  }

  /** The manager's process id while it runs (its CPU and RSS for proc.ts). */
  get pid(): number | undefined {
    return this.#component?.exit === undefined ? this.#component?.pid : undefined;
  }

  get logPath(): string | undefined {
    return this.#component?.logPath;
  }

  /**
   * Installs Kueue as config/default renders it (but the Deployment, the APIServices and, until start(),
   * the webhook configurations), one ResourceFlavor, a ClusterQueue that admits nothing (stopPolicy
   * Hold: its Pods stay gated) and a LocalQueue in each managed namespace (which must exist).
   */
  static async install(t: TestCluster, binary: KueueBinary, o: KueuePeerOptions): Promise<KueuePeer> {
    const api = adminApi({ url: t.url, ca: t.caCert, token: t.adminToken, maxSockets: 8 });
    try {
      return await KueuePeer.#install(t, api, binary, o);
    } catch (err) {
      api.close();
      throw err;
    }
  }

  static async #install(
    t: TestCluster,
    api: AdminApi,
    binary: KueueBinary,
    o: KueuePeerOptions,
  ): Promise<KueuePeer> {
    const objects = await kustomize(join(binary.config, 'default'));
    const ofKind = (k: string): KubernetesObject[] => objects.filter((x) => x.kind === k);
    const configurations = objects.filter(
      (x) => x.kind === 'MutatingWebhookConfiguration' || x.kind === 'ValidatingWebhookConfiguration',
    );
    const names = configurations.map((c) => c.metadata?.name).sort();
    if (names.join() !== [KUEUE_MUTATING, KUEUE_VALIDATING].join())
      throw new Error(`Kueue's config/default renders webhook configurations ${names.join(', ')}`);
    const left = new Set([
      'Deployment',
      'APIService',
      'MutatingWebhookConfiguration',
      'ValidatingWebhookConfiguration',
    ]);
    // The CRDs first, served before anything of theirs is made; then the rest in the rendered order.
    const crds = ofKind('CustomResourceDefinition');
    for (const crd of crds) await create(api, crd);
    for (const crd of crds)
      await eventually(
        async () => {
          const c = (await api.json('GET', `${collection(crd)}/${crd.metadata?.name}`)) as {
            status?: { conditions?: { type: string; status: string }[] };
          };
          if (!c.status?.conditions?.some((x) => x.type === 'Established' && x.status === 'True'))
            throw new Error(`CRD ${crd.metadata?.name} not established`);
          return true;
        },
        { timeoutMs: 30_000, intervalMs: 100 },
      );
    const rest = objects.filter((x) => x.kind !== 'CustomResourceDefinition' && !left.has(x.kind ?? ''));
    for (const x of rest) await create(api, x);
    o.log(
      `kueue: installed ${crds.length + rest.length} of the ${objects.length} objects config/default renders (not the Deployment, the APIServices, nor yet the webhook configurations)`,
    );

    // The Configuration: the shipped file, with the user's choices and what running out of cluster needs.
    const cm = ofKind('ConfigMap').find((c) => c.metadata?.name === 'kueue-manager-config') as
      | (KubernetesObject & { data?: Record<string, string> })
      | undefined;
    const shipped = cm?.data?.['controller_manager_config.yaml'];
    if (shipped === undefined) throw new Error("Kueue's config/default has no kueue-manager-config");
    const cfg = parseYaml(shipped) as Record<string, Record<string, unknown> | undefined>;
    const ports = {
      webhook: await freePort(),
      health: await freePort(),
      metrics: await freePort(),
      visibility: await freePort(),
    };
    const dir = await mkdtemp(join(tmpdir(), 'berth-bench-kueue-'));
    const certDir = join(dir, 'serving-certs');
    await mkdir(certDir);
    cfg.health = { ...cfg.health, healthProbeBindAddress: `127.0.0.1:${ports.health}` };
    cfg.metrics = { ...cfg.metrics, bindAddress: `127.0.0.1:${ports.metrics}` };
    cfg.webhook = { ...cfg.webhook, port: ports.webhook, certDir };
    cfg.leaderElection = { ...cfg.leaderElection, resourceNamespace: KUEUE_NAMESPACE };
    cfg.integrations = { ...cfg.integrations, frameworks: ['pod'] };
    cfg.managedJobsNamespaceSelector = {
      matchExpressions: [
        { key: 'kubernetes.io/metadata.name', operator: 'In', values: [...o.managedNamespaces] },
      ],
    };
    const configPath = join(dir, 'controller_manager_config.yaml');
    await writeFile(configPath, stringify(cfg));

    const sa = await t.serviceAccount(KUEUE_NAMESPACE, KUEUE_SERVICE_ACCOUNT);
    const kubeconfig = join(dir, 'kubeconfig');
    await writeFile(kubeconfig, sa.kubeconfig, { mode: 0o600 });
    const route = await t.routeService(KUEUE_NAMESPACE, KUEUE_WEBHOOK_SERVICE, [
      { port: ports.webhook, readinessUrl: `http://127.0.0.1:${ports.health}/readyz` },
    ]);

    const kueue = (kind: string, name: string, spec: unknown, namespace?: string): KubernetesObject =>
      ({
        apiVersion: `${API_GROUP}/${API_VERSION}`,
        kind,
        metadata: { name, ...(namespace ? { namespace } : {}) },
        spec,
      }) as KubernetesObject;
    await create(api, kueue('ResourceFlavor', FLAVOR, {}));
    await create(
      api,
      kueue('ClusterQueue', CLUSTER_QUEUE, {
        namespaceSelector: {},
        stopPolicy: 'Hold',
        resourceGroups: [
          {
            coveredResources: ['cpu', 'memory'],
            flavors: [
              {
                name: FLAVOR,
                resources: [
                  { name: 'cpu', nominalQuota: '8' },
                  { name: 'memory', nominalQuota: '32Gi' },
                ],
              },
            ],
          },
        ],
      }),
    );
    for (const ns of o.managedNamespaces)
      await create(api, kueue('LocalQueue', LOCAL_QUEUE, { clusterQueue: CLUSTER_QUEUE }, ns));
    return new KueuePeer(
      t,
      api,
      binary,
      { dir, certDir, configPath, kubeconfig, ports, configurations, route },
      o.log,
    );
  }

  /** Copies the webhook Secret's keys into certDir when they change (the kubelet's Secret volume). */
  async #syncSecret(): Promise<void> {
    const r = await this.#api.raw(
      'GET',
      `/api/v1/namespaces/${KUEUE_NAMESPACE}/secrets/${KUEUE_WEBHOOK_SECRET}`,
    );
    if (r.status !== 200) return;
    const data = (JSON.parse(r.body) as { data?: Record<string, string> }).data ?? {};
    const digest = JSON.stringify(data);
    if (digest === this.#written || Object.keys(data).length === 0) return;
    for (const [key, value] of Object.entries(data))
      await writeFile(join(this.#f.certDir, key), Buffer.from(value, 'base64'), { mode: 0o600 });
    this.#written = digest;
  }

  /**
   * Registers Kueue's webhook configurations (as rendered), starts the manager and resolves when its
   * /readyz answers and its cert rotator has injected the CA into both configurations.
   */
  async start(timeoutMs = 120_000): Promise<void> {
    if (this.pid !== undefined) throw new Error('kueue: already running');
    for (const c of this.#f.configurations) await create(this.#api, c);
    let failure: string | undefined;
    this.#component = new Component(
      'kueue',
      this.binary.bin,
      [
        `--config=${this.#f.configPath}`,
        `--kubeconfig=${this.#f.kubeconfig}`,
        '--zap-log-level=2',
        `--visibility-server-port=${this.#f.ports.visibility}`,
      ],
      join(this.#f.dir, `kueue-${++this.#starts}.log`),
      (c, exit) => {
        failure = c.describeExit(exit);
        this.#log(`kueue: ${failure}`);
      },
    );
    const poll = (): void => {
      void this.#syncSecret()
        .catch(() => undefined)
        .finally(() => {
          if (this.#secretTimer !== undefined) this.#secretTimer = setTimeout(poll, SECRET_POLL_MS);
        });
    };
    this.#secretTimer = setTimeout(poll, 0);
    await eventually(
      async () => {
        if (failure !== undefined) throw new Error(failure);
        const res = await fetch(`http://127.0.0.1:${this.#f.ports.health}/readyz`).catch(() => undefined);
        await res?.body?.cancel();
        if (res?.status !== 200) throw new Error(`kueue /readyz: ${res?.status ?? 'no answer'}`);
        for (const c of this.#f.configurations) {
          const live = (await this.#api.json('GET', `${collection(c)}/${c.metadata?.name}`)) as {
            webhooks?: { clientConfig: { caBundle?: string } }[];
          };
          if ((live.webhooks ?? []).some((w) => !w.clientConfig.caBundle))
            throw new Error(`kueue: no caBundle in ${c.metadata?.name} yet`);
        }
        return true;
      },
      { timeoutMs, intervalMs: 200 },
    ).catch((err: unknown) => {
      throw new Error(
        `${err instanceof Error ? err.message : String(err)} (log: ${this.#component?.logPath})`,
      );
    });
  }

  /** Deletes the webhook configurations, then stops the manager (SIGTERM; SIGKILL after 30 s). */
  async stop(): Promise<void> {
    for (const c of this.#f.configurations) await remove(this.#api, c);
    await this.#stopProcess(30_000);
  }

  async #stopProcess(graceMs: number): Promise<void> {
    clearTimeout(this.#secretTimer);
    this.#secretTimer = undefined;
    await this.#component?.stop(graceMs);
  }

  /**
   * Stops the manager if it runs and removes the temporary directory (unless BERTH_BENCH_KUEUE_KEEP is
   * set). The installed objects stay: the control plane goes away whole.
   */
  async close(): Promise<void> {
    await this.#stopProcess(5_000);
    this.#f.route.stopProbing();
    this.#api.close();
    if (!process.env.BERTH_BENCH_KUEUE_KEEP) await rm(this.#f.dir, { recursive: true, force: true });
  }

  /**
   * Kueue's two Pod webhooks as registered (from the rendered configurations): operations,
   * failurePolicy, namespaceSelector, timeout.
   */
  podWebhooks(): string {
    type Hook = {
      name: string;
      failurePolicy?: string;
      timeoutSeconds?: number;
      namespaceSelector?: unknown;
      rules?: { operations?: string[]; resources?: string[] }[];
    };
    const names = new Set<string>(Object.values(KUEUE_POD_WEBHOOKS).map((w) => w.name));
    return this.#f.configurations
      .flatMap((c) => ((c as KubernetesObject & { webhooks?: Hook[] }).webhooks ?? []).map((w) => ({ c, w })))
      .filter(({ w }) => names.has(w.name))
      .map(
        ({ c, w }) =>
          `${w.name} (${c.kind}, ${(w.rules ?? []).map((r) => `${(r.operations ?? []).join('/')} ${(r.resources ?? []).join(',')}`).join('; ')}, failurePolicy ${w.failurePolicy ?? 'Fail'}, timeout ${w.timeoutSeconds ?? 10} s, namespaceSelector ${JSON.stringify(w.namespaceSelector ?? {})})`,
      )
      .join('; ');
  }

  /** The manager's /metrics (HTTPS with its self-signed certificate, authorized by the admin's token). */
  metrics(): Promise<string> {
    return new Promise((resolve, reject) => {
      const req = request(
        {
          host: '127.0.0.1',
          port: this.#f.ports.metrics,
          path: '/metrics',
          rejectUnauthorized: false,
          headers: { Authorization: `Bearer ${this.#t.adminToken}` },
        },
        (res) => {
          const chunks: Buffer[] = [];
          res.on('data', (c: Buffer) => chunks.push(c));
          res.on('error', reject);
          res.on('end', () => {
            const body = Buffer.concat(chunks).toString('utf8');
            if (res.statusCode === 200) resolve(body);
            else reject(new Error(`kueue /metrics: HTTP ${res.statusCode} ${body.slice(0, 200)}`));
          });
        },
      );
      req.on('error', reject);
      req.end();
    });
  }

  /** What the manager has served and requested so far (its /metrics), and its CPU and RSS (/proc). */
  async counters(): Promise<KueueCounters> {
    const text = await this.metrics();
    const reviews = {} as Record<PodWebhook, number>;
    const reviewSeconds = {} as Record<PodWebhook, number>;
    for (const key of Object.keys(KUEUE_POD_WEBHOOKS) as PodWebhook[]) {
      const label = `webhook="${KUEUE_POD_WEBHOOKS[key].path}"`;
      reviews[key] = metricSum(text, 'controller_runtime_webhook_requests_total', label);
      reviewSeconds[key] = metricSum(text, 'controller_runtime_webhook_latency_seconds_sum', label);
    }
    const apiRequests: Record<string, number> = {};
    for (const verb of VERBS)
      apiRequests[verb] = metricSum(text, 'rest_client_requests_total', `method="${verb}"`);
    const u = this.pid === undefined ? { cpuSeconds: Number.NaN, rssMib: Number.NaN } : await usage(this.pid);
    return { reviews, reviewSeconds, apiRequests, cpuSeconds: u.cpuSeconds, rssMib: u.rssMib };
  }
}
