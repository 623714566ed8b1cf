// Runs the operator in-process exactly as the install's Deployment configures it — the container's args and
// environment (downward API, ConfigMap, `$(VAR)` expansion) through the real flag parser and buildOperator —
// authenticated as its service account through the recording proxy, with a few test overrides (no probe
// or metrics port, a free webhook port, the central URL, short grace periods, which features run). The
// install's webhook Service is routed to its admission server, as the endpoints of its Pod would be.
import type { KubeConfig } from '@kubernetes/client-node';
import {
  containerEnvironment,
  type ManifestObject,
  operatorContainer,
} from '../../../scripts/install-manifest.ts';
import { parseFlags } from '../../../src/cli.ts';
import { parseRunConfig } from '../../../src/config.ts';
import { parseFeatureConfigs } from '../../../src/features.ts';
import type { LifecycleEvent, Manager } from '../../../src/kube/manager.ts';
import { createLogger } from '../../../src/observability/logger.ts';
import { buildOperator, runCommand } from '../../../src/run.ts';
import type { ServiceRoute, TestCluster } from '../../helpers/cluster.ts';

export interface RunningOperator {
  manager: Manager;
  namespace: string;
  /** Lifecycle steps seen so far. */
  readonly events: LifecycleEvent[];
  /** As the kubelet would see /readyz: every readiness check passes (and the Service is routed here). */
  ready(): Promise<boolean>;
  isLeader(): boolean;
  /** Graceful stop; resolves with the manager's exit code. */
  stop(): Promise<number>;
}

export interface StartOptions {
  t: TestCluster;
  install: ManifestObject[];
  kubeConfig: KubeConfig;
  /** Environment overrides (an empty string unsets a variable's effect: the flag default applies). */
  env?: Record<string, string>;
}

/** The test's fixed overrides: nothing binds a real port, shutdown is quick. */
const TEST_ENV = {
  BERTH_HEALTH_PROBE_BIND_ADDRESS: '0',
  BERTH_METRICS_BIND_ADDRESS: '0',
  BERTH_WEBHOOK_PORT: '0',
  BERTH_DRAIN_WINDOW: '1ms',
  BERTH_LOG_LEVEL: process.env.BERTH_TEST_LOGS ? 'debug' : 'silent',
};

export function startOperator(o: StartOptions): RunningOperator {
  const container = operatorContainer(o.install);
  const [command, ...argv] = container.args ?? [];
  if (command !== 'run') throw new Error(`the container runs ${JSON.stringify(command)}, not run`);
  const env = { ...containerEnvironment(o.install), ...TEST_ENV, ...o.env };
  const flags = parseFlags(runCommand, argv, env);
  const config = parseRunConfig(flags);
  const namespace = config.namespace;
  const features = parseFeatureConfigs(flags, namespace);
  const events: LifecycleEvent[] = [];
  let route: Promise<ServiceRoute> | undefined;
  let routed = false;
  let routeFailure: unknown;
  const { manager } = buildOperator(config, {
    kubeConfig: o.kubeConfig,
    namespace,
    logger: createLogger({ level: config.logLevel, name: 'berth-operator' }),
    features,
    onLifecycle: (e) => events.push(e),
    onWebhookListening: (port) => {
      route = o.t.routeService(namespace, features.certs.webhookServiceName, [{ port }]);
      route.then(
        () => {
          routed = true;
        },
        (err: unknown) => {
          routeFailure = err;
        },
      );
    },
  });
  const done = manager.run();
  let stopping: Promise<number> | undefined;
  return {
    manager,
    namespace,
    events,
    ready: async () => {
      if (routeFailure !== undefined) throw routeFailure;
      return (
        events.some((e) => e.step === 'ready') &&
        (route === undefined || routed) &&
        (await manager.probes.runChecks('readyz')).every((c) => c.healthy)
      );
    },
    isLeader: () => manager.isLeader(),
    stop() {
      stopping ??= (async () => {
        manager.stop('test');
        const result = await done;
        // A route still being written is removed once it is (a failed one has nothing to remove).
        await route?.then(
          (r) => r.remove(),
          () => undefined,
        );
        return result.exitCode;
      })();
      return stopping;
    },
  };
}
