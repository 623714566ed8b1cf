// `berth-operator sandbox --with-operator` (what `npm start` runs without a cluster): the whole system in
// one process — the sandbox API server with the BerthLease CRD and the webhook configurations installed,
// the embedded central lease server, and the operator (webhooks and controllers) talking to both through
// ordinary clients, exactly as it would to a real cluster.
import { createWriteStream } from 'node:fs';
import { mkdir } from 'node:fs/promises';
import { dirname, join } from 'node:path';
import { AdmissionregistrationV1Api, CoreV1Api, KubeConfig } from '@kubernetes/client-node';
import { mutatingWebhookConfiguration, validatingWebhookConfiguration } from '../webhooks/configurations.ts';
import { installBerthLeaseCrd } from './berth/crd.ts';
import { type CentralServer, startCentralServer } from './central/server.ts';
import { type CommandSpec, type FlagValues, parseFlags } from './cli.ts';
import { parseRunConfig } from './config.ts';
import type { Manager } from './kube/manager.ts';
import { createLogger, type LogLevel } from './observability/logger.ts';
import { buildOperator, parseFeatureConfigs, runCommand } from './run.ts';
import { runSandbox, sandboxCommand } from './sandbox/command.ts';
import { type Sandbox, startSandbox } from './sandbox/index.ts';

export const OPERATOR_NAMESPACE = 'berth-system';
export const OPERATOR_SERVICE_ACCOUNT = 'berth-operator';
const WEBHOOK_SERVICE = 'berth-operator-webhook';

export const sandboxWithOperatorCommand: CommandSpec = {
  ...sandboxCommand,
  flags: [
    ...sandboxCommand.flags,
    {
      name: 'with-operator',
      kind: 'boolean',
      default: false,
      help: 'Also run the central lease server and the operator (webhooks and controllers) in this process, with the CRD and webhook configurations installed',
    },
    {
      name: 'cluster-id',
      kind: 'string',
      default: 'sandbox',
      help: 'With --with-operator: the operator --cluster-id (the holder it acquires leases as)',
    },
    {
      name: 'operator-log',
      kind: 'string',
      default: '.sandbox/operator.log',
      help: 'With --with-operator: where the operator and central server write their JSON logs',
    },
  ],
};

export interface EmbeddedOptions {
  listen: string;
  kubeconfigPath: string;
  simulateWorkloads: boolean;
  clusterId: string;
  /** JSON log file of the operator and the central server. */
  logPath: string;
  logLevel?: LogLevel;
}

export interface EmbeddedSystem {
  sandbox: Sandbox;
  central: CentralServer;
  manager: Manager;
  /** Resolves when the operator is ready and leading (its controllers run). */
  ready: Promise<void>;
  /** Resolves with the manager's exit code once the operator stops (on stop() or a fatal error). */
  done: Promise<number>;
  stop(): Promise<void>;
}

function kubeConfigFromYaml(yaml: string): KubeConfig {
  const kc = new KubeConfig();
  kc.loadFromString(yaml);
  return kc;
}

async function installOperatorNamespace(sandbox: Sandbox): Promise<void> {
  const core = kubeConfigFromYaml(sandbox.kubeconfig).makeApiClient(CoreV1Api);
  await core.createNamespace({ body: { metadata: { name: OPERATOR_NAMESPACE } } });
  await core.createNamespacedServiceAccount({
    namespace: OPERATOR_NAMESPACE,
    body: { metadata: { name: OPERATOR_SERVICE_ACCOUNT } },
  });
  await core.createNamespacedService({
    namespace: OPERATOR_NAMESPACE,
    body: {
      metadata: { name: WEBHOOK_SERVICE },
      spec: { ports: [{ name: 'webhook', port: 443, targetPort: 9443 }] },
    },
  });
}

/** The webhook configurations from the same builders as deploy/; the leader fills in the caBundle. */
async function installWebhookConfigurations(sandbox: Sandbox): Promise<void> {
  const api = kubeConfigFromYaml(sandbox.kubeconfig).makeApiClient(AdmissionregistrationV1Api);
  const params = { namespace: OPERATOR_NAMESPACE, serviceName: WEBHOOK_SERVICE };
  await api.createMutatingWebhookConfiguration({ body: mutatingWebhookConfiguration(params) });
  await api.createValidatingWebhookConfiguration({ body: validatingWebhookConfiguration(params) });
}

export async function startEmbeddedSystem(options: EmbeddedOptions): Promise<EmbeddedSystem> {
  await mkdir(dirname(options.logPath), { recursive: true });
  const logStream = createWriteStream(options.logPath, { flags: 'a' });
  const logger = createLogger({
    level: options.logLevel ?? 'info',
    name: 'berth-operator',
    destination: logStream,
  });
  const sandbox = await startSandbox({
    listen: options.listen,
    kubeconfigPath: options.kubeconfigPath,
    simulateWorkloads: options.simulateWorkloads,
  });
  let central: CentralServer | undefined;
  try {
    await installBerthLeaseCrd(kubeConfigFromYaml(sandbox.kubeconfig));
    await installOperatorNamespace(sandbox);
    await installWebhookConfigurations(sandbox);
    central = await startCentralServer({ logger: logger.child({ component: 'central' }) });

    const operatorUser = `system:serviceaccount:${OPERATOR_NAMESPACE}:${OPERATOR_SERVICE_ACCOUNT}`;
    const flags: FlagValues = parseFlags(runCommand, [
      `--namespace=${OPERATOR_NAMESPACE}`,
      `--berth-api-server=${central.url}`,
      `--cluster-id=${options.clusterId}`,
      '--enable-workload-admission',
      `--workload-operator-user=${operatorUser}`,
      `--workload-operator-namespace=${OPERATOR_NAMESPACE}`,
      `--webhook-service-name=${WEBHOOK_SERVICE}`,
      '--webhook-port=0',
      '--health-probe-bind-address=127.0.0.1:0',
      '--metrics-bind-address=127.0.0.1:0',
      '--drain-window=0s',
      `--agent-namespace=${OPERATOR_NAMESPACE}`,
    ]);
    const config = parseRunConfig(flags);
    const features = parseFeatureConfigs(flags, OPERATOR_NAMESPACE);
    // The operator authenticates as its own service account, as it would in a cluster.
    const kubeConfig = kubeConfigFromYaml(
      sandbox.users.serviceAccount(OPERATOR_NAMESPACE, OPERATOR_SERVICE_ACCOUNT).kubeconfig,
    );
    let markReady: () => void = () => {};
    const ready = new Promise<void>((resolve) => {
      markReady = resolve;
    });
    const { manager } = buildOperator(config, {
      kubeConfig,
      namespace: OPERATOR_NAMESPACE,
      logger,
      features,
      // The sandbox routes the webhook Service to wherever the admission server listens.
      onWebhookListening: (port) =>
        sandbox.services.map(OPERATOR_NAMESPACE, WEBHOOK_SERVICE, { host: '127.0.0.1', port }),
      onLifecycle: (event) => {
        if (event.step === 'ready') markReady();
      },
    });
    const done = manager.run().then((result) => result.exitCode);
    const startedCentral = central;
    return {
      sandbox,
      central: startedCentral,
      manager,
      ready,
      done,
      async stop() {
        manager.stop('embedded system stopping');
        await done;
        await startedCentral.stop();
        await sandbox.stop();
        await new Promise<void>((resolve) => logStream.end(resolve));
      },
    };
  } catch (err) {
    await central?.stop();
    await sandbox.stop();
    logStream.end();
    throw err;
  }
}

/** What `npm start` prints: where the kubeconfig is and three commands that show the system at work. */
export function quickstart(kubeconfigPath: string, logPath: string): string {
  const k = `KUBECONFIG=${kubeconfigPath} kubectl`;
  return [
    'berth-operator is running in the sandbox: API server, central lease server, operator (webhooks + controllers).',
    `kubeconfig: ${kubeconfigPath}`,
    `operator log: ${logPath}`,
    '',
    'Try it:',
    `  ${k} apply -f deploy/samples/deployment/   # a BerthLease, then the Deployment it guards`,
    `  ${k} get berthleases -w                     # held by this cluster, with a fencing token`,
    `  ${k} get pods -l app.kubernetes.io/name=web -w   # born SchedulingGated, then ungated and Running`,
    '',
    'Ctrl-C stops everything.',
    '',
  ].join('\n');
}

/** The `sandbox` subcommand: the API server alone, or with --with-operator the whole system. */
export async function runSandboxCommand(flags: FlagValues, out: NodeJS.WritableStream): Promise<number> {
  if (flags['with-operator'] !== true) {
    await runSandbox(flags, out);
    return 0;
  }
  const kubeconfigPath = String(flags.kubeconfig);
  const logPath = String(flags['operator-log'] || join(dirname(kubeconfigPath), 'operator.log'));
  const system = await startEmbeddedSystem({
    listen: String(flags.listen),
    kubeconfigPath,
    simulateWorkloads: flags['simulate-workloads'] === true,
    clusterId: String(flags['cluster-id']),
    logPath,
  });
  await system.ready;
  out.write(quickstart(kubeconfigPath, logPath));
  const signalled = new Promise<void>((resolve) => {
    const stop = (): void => {
      process.off('SIGINT', stop);
      process.off('SIGTERM', stop);
      resolve();
    };
    process.on('SIGINT', stop);
    process.on('SIGTERM', stop);
  });
  const code = await Promise.race([system.done, signalled.then(() => undefined)]);
  await system.stop();
  return code ?? 0;
}
