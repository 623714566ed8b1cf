// What `npm start` runs when no cluster is configured: a real local control plane (hack/controlplane) with
// the shipped install applied (deploy/install.yaml without its Deployment and PodDisruptionBudget: there
// is no container runtime to run the image), the embedded central lease server, and the operator in this
// process, as the install's ServiceAccount, serving its webhooks to the real kube-apiserver through the
// install's webhook Service. Dev tooling: nothing of it is in the image.
import { createWriteStream } from 'node:fs';
import { copyFile, mkdir, rm, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import {
  CoreV1Api,
  CustomObjectsApi,
  KubeConfig,
  KubernetesObjectApi,
  PatchStrategy,
  setHeaderOptions,
} from '@kubernetes/client-node';
import { type ControlPlane, kubeconfigYaml, startControlPlane } from '../hack/controlplane/controlplane.ts';
import { authority } from '../hack/controlplane/pki.ts';
import { routeServiceHere, type ServiceRoute } from '../hack/controlplane/service-route.ts';
import {
  GROUP,
  optInCommand,
  PLURAL,
  SCOPE_ENABLED,
  SCOPE_LABEL,
  SCOPE_SETTLE_MS,
  VERSION,
} from '../src/berth/api.ts';
import { type CentralServer, startCentralServer } from '../src/central/server.ts';
import { parseFlags } from '../src/cli.ts';
import { parseRunConfig } from '../src/config.ts';
import { parseFeatureConfigs } from '../src/features.ts';
import { isAlreadyExists } from '../src/kube/client.ts';
import type { Manager } from '../src/kube/manager.ts';
import { createLogger, type LogLevel } from '../src/observability/logger.ts';
import { buildOperator, runCommand } from '../src/run.ts';
import {
  containerEnvironment,
  type ManifestObject,
  operatorContainer,
  readInstall,
} from './install-manifest.ts';

export const OPERATOR_NAMESPACE = 'berth-system';
export const OPERATOR_SERVICE_ACCOUNT = 'berth-operator';
const WEBHOOK_SERVICE = 'berth-operator-webhook';
/** Waits out the scope's settle period after the replica became ready (docs/admission.md). */
async function settled(log: (line: string) => void): Promise<void> {
  log(`local system: waiting ${SCOPE_SETTLE_MS / 1000} s for the admission scope to settle`);
  await new Promise((resolve) => setTimeout(resolve, SCOPE_SETTLE_MS));
}

/** Objects of the install that would run the operator image. */
const NOT_APPLIED = new Set(['Deployment', 'PodDisruptionBudget']);

export interface LocalSystemOptions {
  /** Where the kubeconfig and the operator's log are written (e.g. `.berth-local`). */
  dir: string;
  /** The operator's --cluster-id. */
  clusterId: string;
  /** KWOK Nodes of the control plane. */
  nodes?: number;
  logLevel?: LogLevel;
  /** An already running control plane (tests); by default one is started and stopped with the system. */
  controlPlane?: ControlPlane;
  /** Progress lines. */
  log?: (line: string) => void;
}

export interface LocalSystem {
  controlPlane: ControlPlane;
  central: CentralServer;
  manager: Manager;
  /** The admin kubeconfig, copied into `dir`. */
  kubeconfigPath: string;
  logPath: string;
  /** Resolves when the operator is ready and leading (its controllers run). */
  ready: Promise<void>;
  /** Resolves with the operator's exit code once it stops (on stop() or a fatal error). */
  done: Promise<number>;
  stop(): Promise<void>;
}

async function readInstallObjects(): Promise<ManifestObject[]> {
  return (await readInstall('install.yaml')).objects;
}

/** Where the quickstart's samples go (kubectl's default namespace), opted in to the admission scope. */
const DEMO_NAMESPACE = 'default';

async function applyInstall(kc: KubeConfig): Promise<void> {
  const api = KubernetesObjectApi.makeApiClient(kc);
  for (const object of await readInstallObjects()) {
    if (NOT_APPLIED.has(object.kind)) continue;
    try {
      await api.create(object);
    } catch (err) {
      if (!isAlreadyExists(err)) throw err;
    }
  }
  // BerthLeases are served once the CRD is Established.
  const custom = kc.makeApiClient(CustomObjectsApi);
  const deadline = Date.now() + 30_000;
  for (;;) {
    try {
      await custom.listClusterCustomObject({ group: GROUP, version: VERSION, plural: PLURAL });
      return;
    } catch (err) {
      if (Date.now() > deadline) throw err;
      await new Promise((r) => setTimeout(r, 100));
    }
  }
}

/** A TokenRequest token of the operator's ServiceAccount: the operator acts as it would in the cluster. */
async function operatorKubeConfig(cp: ControlPlane, admin: KubeConfig): Promise<KubeConfig> {
  const tr = await admin.makeApiClient(CoreV1Api).createNamespacedServiceAccountToken({
    namespace: OPERATOR_NAMESPACE,
    name: OPERATOR_SERVICE_ACCOUNT,
    body: { spec: { audiences: [], expirationSeconds: 86_400 } },
  });
  const token = tr.status?.token;
  if (!token) throw new Error('the TokenRequest for the operator ServiceAccount returned no token');
  const kc = new KubeConfig();
  kc.loadFromString(
    kubeconfigYaml(
      cp.url,
      cp.caCert,
      `system:serviceaccount:${OPERATOR_NAMESPACE}:${OPERATOR_SERVICE_ACCOUNT}`,
      {
        token,
      },
    ),
  );
  return kc;
}

export async function startLocalSystem(options: LocalSystemOptions): Promise<LocalSystem> {
  const log = options.log ?? (() => {});
  await mkdir(options.dir, { recursive: true });
  const logPath = join(options.dir, 'operator.log');
  const logStream = createWriteStream(logPath, { flags: 'a' });
  const logger = createLogger({
    level: options.logLevel ?? 'info',
    name: 'berth-operator',
    destination: logStream,
  });
  const ownControlPlane = options.controlPlane === undefined;
  const cp = options.controlPlane ?? (await startControlPlane({ nodes: options.nodes ?? 2, log }));
  const kubeconfigPath = join(options.dir, 'kubeconfig');
  const centralCaPath = join(options.dir, 'central-ca.crt');
  let central: CentralServer | undefined;
  let route: ServiceRoute | undefined;
  const teardown = async (): Promise<void> => {
    route?.stopProbing();
    await central?.stop();
    if (ownControlPlane) await cp.stop();
    await rm(kubeconfigPath, { force: true });
    await rm(centralCaPath, { force: true });
    await new Promise<void>((resolve) => logStream.end(resolve));
  };
  try {
    await copyFile(cp.kubeconfigPath, kubeconfigPath);
    const admin = new KubeConfig();
    admin.loadFromString(cp.kubeconfig);
    log('local system: applying deploy/install.yaml (without its Deployment and PodDisruptionBudget)');
    await applyInstall(admin);
    // As a cluster admin opts a namespace in: the samples go to `default`.
    await admin
      .makeApiClient(CoreV1Api)
      .patchNamespace(
        { name: DEMO_NAMESPACE, body: { metadata: { labels: { [SCOPE_LABEL]: SCOPE_ENABLED } } } },
        setHeaderOptions('Content-Type', PatchStrategy.MergePatch),
      );
    // HTTPS only, as everywhere: the control plane's throwaway CA signs the central server's certificate,
    // and the operator trusts it through --berth-ca-bundle-file, as an install would.
    await writeFile(centralCaPath, cp.ca.cert);
    central = await startCentralServer({
      tls: await authority(cp.ca).serving(['localhost', '127.0.0.1', '::1']),
      logger: logger.child({ component: 'central' }),
    });
    // The install's own configuration (the Deployment's arguments and environment, as the kubelet would
    // build it), with what differs for a process on this machine instead of a Pod.
    const objects = await readInstallObjects();
    const container = operatorContainer(objects);
    const installed = (container.args ?? []).filter((a) => a !== 'run');
    const flags = parseFlags(
      runCommand,
      [
        ...installed,
        `--namespace=${OPERATOR_NAMESPACE}`,
        `--berth-api-server=${central.url}`,
        `--berth-ca-bundle-file=${centralCaPath}`,
        `--cluster-id=${options.clusterId}`,
        '--webhook-port=0',
        '--health-probe-bind-address=127.0.0.1:0',
        '--metrics-bind-address=127.0.0.1:0',
        // Everything is thrown away on Ctrl-C: stop at once rather than drain and hand over.
        '--drain-window=0s',
        '--hand-over-wait=0s',
        '--graceful-shutdown-timeout=2s',
      ],
      containerEnvironment(objects),
    );
    const config = parseRunConfig(flags);
    const features = parseFeatureConfigs(flags, OPERATOR_NAMESPACE);
    let markReady: () => void = () => {};
    const ready = new Promise<void>((resolve) => {
      markReady = resolve;
    });
    let routed: Promise<void> = Promise.resolve();
    const { manager } = buildOperator(config, {
      kubeConfig: await operatorKubeConfig(cp, admin),
      namespace: OPERATOR_NAMESPACE,
      logger,
      features,
      // The install's webhook Service reaches the admission server here, as it would reach its Pods.
      onWebhookListening: (port) => {
        routed = routeServiceHere(admin, OPERATOR_NAMESPACE, WEBHOOK_SERVICE, [{ port }]).then((r) => {
          route = r;
        });
      },
      onLifecycle: (event) => {
        if (event.step === 'ready') markReady();
      },
    });
    const done = manager.run().then((result) => result.exitCode);
    let stopped: Promise<void> | undefined;
    return {
      controlPlane: cp,
      central,
      manager,
      kubeconfigPath,
      logPath,
      // The webhook server listens before the manager is ready, so `routed` is set by then. The demo
      // namespace was labelled before the replica listed the scope: it counts as settled SCOPE_SETTLE_MS
      // after that list, and the quickstart's BerthLease would be asked to retry until then.
      ready: ready.then(() => routed).then(() => settled(log)),
      done,
      stop() {
        stopped ??= (async () => {
          manager.stop('local system stopping');
          await done;
          await teardown();
        })();
        return stopped;
      },
    };
  } catch (err) {
    await teardown();
    throw err;
  }
}

/** What `npm start` prints once the system is up: the kubeconfig and commands that show it at work. */
export function quickstart(system: Pick<LocalSystem, 'kubeconfigPath' | 'logPath' | 'controlPlane'>): string {
  return [
    `berth-operator is running on a local Kubernetes ${system.controlPlane.versions.kubernetes} control plane (etcd, kube-apiserver, kube-controller-manager, kube-scheduler, KWOK Nodes), with the central lease server and the operator (webhooks + controllers).`,
    `operator log: ${system.logPath}`,
    '',
    `Namespace ${DEMO_NAMESPACE} is in the workload admission scope (\`${optInCommand(DEMO_NAMESPACE)}\`, done for you); other namespaces are not reviewed.`,
    '',
    'Try it:',
    `  export KUBECONFIG=${system.kubeconfigPath}`,
    '  kubectl apply -f deploy/samples/deployment/        # a BerthLease, then the Deployment it guards',
    '  kubectl get berthleases -w                          # held by this cluster, with a fencing token',
    '  kubectl get pods -l app.kubernetes.io/name=web -w   # born SchedulingGated, then ungated and Running',
    '  kubectl describe berthlease web                     # conditions and Events',
    '',
    'Ctrl-C stops everything.',
    '',
  ].join('\n');
}
