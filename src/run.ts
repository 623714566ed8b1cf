// `berth-operator run`: the operator process. Validates the flags once, then builds the manager (health
// and metrics server, leader election) and the runnables of the features the flags enable (webhook
// certificates, admission server and registration, the BerthLease controller, managed workloads, the node
// taint guard; docs/architecture.md) and runs it until SIGTERM/SIGINT or lost leadership.
import type { KubeConfig } from '@kubernetes/client-node';
import type { Registry } from 'prom-client';
import { certFlags } from '../certs/config.ts';
import { createCertificateProvider } from '../certs/create.ts';
import type { CertificateProvider } from '../certs/provider.ts';
import { certificateReadinessCheck } from '../certs/readiness.ts';
import {
  configurationCheck,
  mutatingWebhookConfiguration,
  readWebhookConfigurations,
  validatingWebhookConfiguration,
} from '../webhooks/configurations.ts';
import { webhookFlags } from '../webhooks/flags.ts';
import { kubeAdmissionIO } from '../webhooks/kube-io.ts';
import type { LeaseCache } from '../webhooks/leases.ts';
import { WebhookRegistration, type WebhookRegistrationOptions } from '../webhooks/registration.ts';
import { ScopeExit } from '../webhooks/scope-exit.ts';
import { ScopeMigration } from '../webhooks/scope-migration.ts';
import type { AdmissionHandler } from '../webhooks/server.ts';
import { AdmissionServer } from '../webhooks/server.ts';
import { kubeWorkloadAdmission } from '../webhooks/workload-admission.ts';
import { AdmissionScope } from './berth/api.ts';
import { berthFlags, leaseClientFor } from './berth/config.ts';
import { BerthLeaseController } from './berth/controller.ts';
import { leaderFailoverBoundMs } from './berth/failover-margin.ts';
import { ManagedWorkloads } from './berth/managed-workloads.ts';
import { NamespaceScope } from './berth/namespace-scope.ts';
import { CENTRAL_READINESS_CHECK, centralReadinessCheck } from './berth/readiness.ts';
import type { CommandSpec, FlagValues } from './cli.ts';
import { UsageError } from './cli.ts';
import { parseRunConfig, RUN_FLAG_SPECS, type RunConfig, resolveOperatorNamespace } from './config.ts';
import { type FeatureConfigs, parseFeatureConfigs } from './features.ts';
import {
  injectionMutatingConfiguration,
  injectionValidatingConfiguration,
} from './injection/configurations.ts';
import { injectionFlags } from './injection/flags.ts';
import { injectionHandlers } from './injection/handlers.ts';
import { injectorSettings } from './injection/settings.ts';
import { loadKubeConfig } from './kube/client.ts';
import { realClock } from './kube/clock.ts';
import { EventRecorder, eventSinkFor } from './kube/events.ts';
import { defaultIdentity, kubeLeaseClient, LeaderElector } from './kube/leader.ts';
import { type LifecycleEvent, Manager } from './kube/manager.ts';
import { KubeTransport } from './kube/transport.ts';
import { NodeTaintGuard, nodeTaintFlags } from './nodetaint/index.ts';
import { parseBindAddress } from './observability/health.ts';
import { createLogger, type Logger } from './observability/logger.ts';
import { createRegistry } from './observability/metrics.ts';
import { secureMetrics } from './secure-metrics.ts';

export const runCommand: CommandSpec = {
  name: 'run',
  summary: 'Run the operator against the cluster of the kubeconfig (or in-cluster) until SIGTERM/SIGINT.',
  flags: [
    ...RUN_FLAG_SPECS,
    ...berthFlags,
    ...webhookFlags,
    ...certFlags,
    ...nodeTaintFlags,
    ...injectionFlags,
  ],
};

/** Identifies this controller in Events (events.k8s.io/v1 reportingController). */
export const REPORTING_CONTROLLER = 'berth.skaphos.io/berth-operator';

const PROGRAM = 'berth-operator';

export interface Operator {
  manager: Manager;
  logger: Logger;
}

export interface OperatorDeps {
  kubeConfig: KubeConfig;
  /** The resolved operator namespace. */
  namespace: string;
  logger: Logger;
  features: FeatureConfigs;
  /** Embedding (npm start's local system, tests): learn the manager's lifecycle steps. */
  onLifecycle?: (event: LifecycleEvent) => void;
  /** Embedding: learn the admission server's bound port (--webhook-port 0 picks a free one). */
  onWebhookListening?: (port: number) => void;
}

/** Builds the manager for a validated configuration and registers every enabled feature's runnables. */
export function buildOperator(config: RunConfig, deps: OperatorDeps): Operator {
  const { logger, features } = deps;
  const registry = createRegistry();
  const identity = defaultIdentity();
  // One API transport (one connection pool) for every feature of the process; closed last.
  const transport = new KubeTransport(deps.kubeConfig, { registry });
  const elector = config.leaderElect
    ? new LeaderElector({
        client: kubeLeaseClient(transport),
        namespace: config.leaderElectionNamespace || deps.namespace,
        name: config.leaderElectionId,
        identity,
        leaseDurationMs: config.leaderElectionLeaseDuration,
        renewDeadlineMs: config.leaderElectionRenewDeadline,
        retryPeriodMs: config.leaderElectionRetryPeriod,
        releaseOnCancel: config.leaderElectionReleaseOnCancel,
        logger,
        registry,
      })
    : undefined;
  const secure =
    config.metricsSecure && parseBindAddress(config.metricsBindAddress) !== undefined
      ? secureMetrics({ certDir: config.metricsCertDir, transport, logger, registry })
      : undefined;
  const manager = new Manager({
    logger,
    registry,
    healthProbeBindAddress: config.healthProbeBindAddress,
    metricsBindAddress: config.metricsBindAddress,
    ...(secure ? { metricsSecurity: secure.security } : {}),
    gracefulShutdownTimeoutMs: config.gracefulShutdownTimeout,
    drainWindowMs: config.drainWindow,
    handOverWaitMs: config.handOverWait,
    ...(elector ? { elector } : {}),
    ...(deps.onLifecycle ? { onEvent: deps.onLifecycle } : {}),
  });
  if (secure) manager.add(secure.runnable);
  const recorder = new EventRecorder({
    sink: eventSinkFor(transport),
    reportingController: REPORTING_CONTROLLER,
    reportingInstance: identity.slice(0, 128),
    logger,
  });
  // The opt-in admission scope's namespaces, as this replica sees them: the controller's and the guards'.
  const scope =
    features.berth.apiServer !== '' &&
    features.webhook.enableWorkloadAdmission &&
    features.webhook.workloadAdmissionScope === AdmissionScope.OptIn
      ? new NamespaceScope({ transport, logger, registry })
      : undefined;
  let leaseCache: LeaseCache | undefined;
  if (features.berth.apiServer !== '') {
    // With leader election a crashed leader is replaced within this; leases must outlast it.
    const failoverBoundMs = config.leaderElect
      ? leaderFailoverBoundMs(config.leaderElectionLeaseDuration, config.leaderElectionRetryPeriod)
      : undefined;
    const leases = addBerthLeases(manager, deps, { transport, recorder, registry, failoverBoundMs, scope });
    leaseCache = {
      synced: () => leases.informer.hasSynced(),
      inNamespace: (namespace) => leases.informer.list(namespace),
    };
  }
  if (features.webhook.enableWorkloadAdmission || features.injection.enabled)
    addAdmission(manager, deps, { transport, registry, recorder, leaseCache, scope });
  if (
    features.berth.apiServer === '' &&
    !features.webhook.enableWorkloadAdmission &&
    !features.injection.enabled &&
    !features.nodeTaint.enabled
  )
    logger.warn(
      'no feature is enabled (--berth-api-server, --enable-workload-admission, --node-taint-guard): only leader election runs',
    );
  if (features.nodeTaint.enabled) {
    const guard = new NodeTaintGuard({ config: features.nodeTaint, transport, recorder, registry, logger });
    for (const runnable of guard.runnables()) manager.add(runnable);
  }
  // In the first start group, so it stops last: nothing may use the connection pool after it closes.
  manager.add({
    name: 'kube-transport',
    needLeaderElection: false,
    group: 'certificates',
    start: async () => {},
    stop: () => transport.close(),
  });
  return { manager, logger };
}

/**
 * The BerthLease controller (its cache on every replica, the controller on the leader), when
 * `--berth-api-server` is set. The BerthLease CRD must be installed. In lease-only mode the replicas'
 * readiness includes the central API's /healthz (check `berth-api`), as in the Go operator.
 */
function addBerthLeases(
  manager: Manager,
  deps: OperatorDeps,
  shared: {
    transport: KubeTransport;
    recorder: EventRecorder;
    registry: Registry;
    failoverBoundMs: number | undefined;
    scope: NamespaceScope | undefined;
  },
): BerthLeaseController {
  const { features, logger, namespace } = deps;
  const config = features.berth;
  if (config.useSpecHolderIdentity)
    logger.warn(
      "--use-spec-holder-identity: each BerthLease's spec.holderIdentity is its holder, so the same BerthLease in several clusters shares one holder",
    );
  // Never the API key: only whether one is configured.
  logger.info(
    {
      berthApiServer: config.apiServer,
      clusterId: config.clusterId,
      credentialSource: config.apiKey !== '' ? 'api-key' : config.apiKeyFile !== '' ? 'api-key-file' : 'none',
    },
    'BerthLease controller enabled',
  );
  const leaseClient = leaseClientFor(config, logger);
  const operatorNamespace = features.webhook.workloadOperatorNamespace || namespace;
  // With workload admission, targets are managed: Pods registered before they are ungated, workloads
  // stopped and drained before a release, and handed over when the leader stops gracefully. With the
  // opt-in scope, only in namespaces in it.
  const { scope } = shared;
  const managed = features.webhook.enableWorkloadAdmission
    ? new ManagedWorkloads({
        transport: shared.transport,
        operatorNamespace,
        recorder: shared.recorder,
        registry: shared.registry,
        logger,
        stopLeadMs: config.stopLeadMs,
        ...(scope ? { scope } : {}),
      })
    : undefined;
  const leases = new BerthLeaseController({
    transport: shared.transport,
    leaseClient,
    clusterIdentity: config.clusterId,
    operatorNamespace,
    maxConcurrentReconciles: config.maxConcurrentReconciles,
    stopLeadMs: config.stopLeadMs,
    recorder: shared.recorder,
    registry: shared.registry,
    logger,
    ...(managed ? { workloads: managed, handOverOnStop: true } : {}),
    ...(scope ? { scope } : {}),
    ...(shared.failoverBoundMs !== undefined ? { failoverBoundMs: shared.failoverBoundMs } : {}),
  });
  for (const runnable of leases.runnables()) manager.add(runnable);
  if (managed) {
    managed.attach(leases);
    for (const runnable of managed.runnables()) manager.add(runnable);
  }
  if (!features.webhook.enableWorkloadAdmission)
    manager.probes.addReadyzCheck(CENTRAL_READINESS_CHECK, centralReadinessCheck(leaseClient));
  manager.add({
    name: 'berth-lease-client',
    needLeaderElection: false,
    group: 'certificates',
    start: async () => {},
    stop: async () => leaseClient.close(),
  });
  return leases;
}

/**
 * The admission webhooks on every replica — WorkloadAdmission and helper injection, each when enabled —
 * behind one serving certificate (ready once a valid pair is loaded) and one HTTPS admission server; the
 * check that WorkloadAdmission's live configurations exclude this namespace and keep their fail-closed
 * settings; and on the leader the registration of each feature's configurations.
 */
function addAdmission(
  manager: Manager,
  deps: OperatorDeps,
  shared: {
    transport: KubeTransport;
    registry: Registry;
    recorder: EventRecorder;
    leaseCache: LeaseCache | undefined;
    scope: NamespaceScope | undefined;
  },
): void {
  const { transport, registry, leaseCache, scope } = shared;
  const { features, logger, namespace } = deps;
  const { webhook, certs, injection } = features;
  const provider: CertificateProvider = createCertificateProvider(certs, {
    transport,
    namespace,
    logger,
    registry,
  });
  manager.probes.addReadyzCheck('webhook-certificate', certificateReadinessCheck(provider));
  manager.add({
    name: 'webhook-certificate',
    needLeaderElection: false,
    group: 'certificates',
    start: async (signal) => {
      await provider.start(signal);
      await provider.waitForCertificate(signal);
    },
    stop: () => provider.stop(),
  });

  const params = {
    namespace,
    serviceName: certs.webhookServiceName,
    name: webhook.webhookConfigurationName,
    scope: webhook.workloadAdmissionScope,
  };
  const liveCheck = webhook.enableWorkloadAdmission
    ? configurationCheck({
        read: () => readWebhookConfigurations(transport, webhook.webhookConfigurationName),
        params,
        logger,
      })
    : undefined;
  if (liveCheck) manager.probes.addReadyzCheck('webhook-configurations', liveCheck.check);
  const settings = injection.enabled ? injectorSettings(injection, features.berth, namespace) : undefined;
  if (settings)
    logger.info(
      { helperImage: settings.helperImage, controlPlaneNamespaces: settings.controlPlaneNamespaces },
      'helper injection enabled',
    );
  let server: AdmissionServer | undefined;
  manager.add({
    name: 'admission-server',
    needLeaderElection: false,
    group: 'webhooks',
    start: async () => {
      const handlers: AdmissionHandler[] = [];
      if (webhook.enableWorkloadAdmission) {
        handlers.push(
          ...kubeWorkloadAdmission({
            transport,
            operatorUser: webhook.workloadOperatorUser,
            scope: webhook.workloadAdmissionScope,
            registry,
            stopLeadMs: features.berth.stopLeadMs,
            ...(leaseCache ? { leaseCache } : {}),
            ...(scope ? { scopeEntries: scope } : {}),
          }),
        );
      }
      if (settings) handlers.push(...injectionHandlers(settings));
      server = new AdmissionServer({
        port: webhook.webhookPort,
        certificates: provider,
        handlers,
        registry,
        logger,
      });
      await server.start();
      deps.onWebhookListening?.(server.port);
      manager.probes.addReadyzCheck('webhook', server.startedCheck);
      if (liveCheck) void liveCheck.start();
    },
    drain: () => server?.drain(),
    stop: async () => {
      liveCheck?.stop();
      await server?.close();
    },
  });

  if (scope) {
    // The last step of a namespace's leaving the scope is the leader's (scope-exit.ts).
    const exit = new ScopeExit({
      namespaces: scope.informer,
      scope,
      io: () => kubeAdmissionIO(transport),
      transport,
      clock: realClock,
      recorder: shared.recorder,
      logger,
      registry,
    });
    manager.add({
      name: 'admission-scope-exit',
      needLeaderElection: true,
      start: (signal) => exit.start(signal),
      stop: () => exit.stop(),
    });
  }
  if (!webhook.webhookRegistration) return;
  const service = { namespace, name: certs.webhookServiceName };
  const pairs: Array<
    Pick<WebhookRegistrationOptions, 'mutating' | 'validating' | 'plan'> & { controllerName: string }
  > = [];
  if (webhook.enableWorkloadAdmission) {
    // Narrowing to the opt-in scope first brings the namespaces that use Berth into it.
    const migration = scope ? new ScopeMigration({ transport, scope, logger }) : undefined;
    pairs.push({
      controllerName: 'webhook-registration',
      mutating: mutatingWebhookConfiguration(params),
      validating: validatingWebhookConfiguration(params),
      ...(migration ? { plan: (live, want, signal) => migration.plan({ live, want }, signal) } : {}),
    });
  }
  if (settings) {
    const injectionParams = {
      namespace,
      serviceName: certs.webhookServiceName,
      name: injection.configurationName,
      controlPlaneNamespaces: settings.controlPlaneNamespaces,
      failurePolicy: injection.failurePolicy,
    };
    pairs.push({
      controllerName: 'injection-webhook-registration',
      mutating: injectionMutatingConfiguration(injectionParams),
      validating: injectionValidatingConfiguration(injectionParams),
    });
  }
  for (const pair of pairs) {
    const registration = new WebhookRegistration({
      transport,
      ...pair,
      service,
      source: provider,
      logger,
      registry,
    });
    manager.add({
      name: pair.controllerName,
      needLeaderElection: true,
      start: (signal) => registration.start(signal),
      stop: () => registration.stop(),
    });
  }
}

export interface RunIO {
  stderr: NodeJS.WritableStream;
  env: NodeJS.ProcessEnv;
  /** Where SIGTERM/SIGINT come from. */
  signals: Pick<NodeJS.Process, 'on' | 'off'>;
  /** Ends the process (second signal; a stray handle keeping it alive after the manager stopped). */
  exit: (code: number) => void;
}

const defaultIO = (): RunIO => ({
  stderr: process.stderr,
  env: process.env,
  signals: process,
  exit: (code) => process.exit(code),
});

/**
 * The `run` subcommand: process-level (signal handlers, exit). To embed the operator in another
 * process, use buildOperator and run the manager directly.
 */
export async function runOperator(flags: FlagValues, io: RunIO = defaultIO()): Promise<number> {
  let config: RunConfig;
  let namespace: string;
  let features: FeatureConfigs;
  try {
    config = parseRunConfig(flags);
    namespace = await resolveOperatorNamespace(config.namespace);
    features = parseFeatureConfigs(flags, namespace);
  } catch (err) {
    if (!(err instanceof UsageError)) throw err;
    io.stderr.write(`${PROGRAM}: ${err.message}\n`);
    return 2;
  }
  let kubeConfig: KubeConfig;
  try {
    // The flag already holds KUBECONFIG when not given (the flag table maps it), so hand it over as
    // KUBECONFIG: a path list is then merged like kubectl does; empty means in-cluster, then ~/.kube/config.
    kubeConfig = loadKubeConfig({ env: { ...io.env, KUBECONFIG: config.kubeconfig } }).kc;
  } catch (err) {
    io.stderr.write(
      `${PROGRAM}: run: ${(err instanceof Error ? err.message : String(err)).split('\n')[0]}\n`,
    );
    return 1;
  }
  const logger = createLogger({ level: config.logLevel, name: PROGRAM });
  const { manager } = buildOperator(config, { kubeConfig, namespace, logger, features });
  logger.info(
    {
      namespace,
      leaderElect: config.leaderElect,
      leaderElectionId: config.leaderElect ? config.leaderElectionId : undefined,
      metricsSecure: config.metricsSecure,
      cluster: kubeConfig.getCurrentCluster()?.server,
    },
    'starting berth-operator',
  );

  let signalled = 0;
  const onSignal = (signal: NodeJS.Signals): void => {
    signalled++;
    if (signalled > 1) {
      // As controller-runtime's signal handler: a second signal means "now".
      logger.warn({ signal }, 'second signal received, exiting immediately');
      io.exit(1);
      return;
    }
    logger.info({ signal }, 'signal received, shutting down');
    manager.stop(`received ${signal}`);
  };
  io.signals.on('SIGTERM', onSignal);
  io.signals.on('SIGINT', onSignal);
  try {
    const result = await manager.run();
    const log = result.exitCode === 0 ? logger.info.bind(logger) : logger.error.bind(logger);
    log({ exitCode: result.exitCode, reason: result.reason }, 'berth-operator stopped');
    // Everything is closed; should a stray handle (a keep-alive socket) linger, do not wait for it.
    setTimeout(() => io.exit(result.exitCode), 1_000).unref();
    return result.exitCode;
  } finally {
    io.signals.off('SIGTERM', onSignal);
    io.signals.off('SIGINT', onSignal);
  }
}
