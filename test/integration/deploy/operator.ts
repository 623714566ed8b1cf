// Runs the operator in-process exactly as the install's Deployment configures it — the container's args and
// environment (downward API, ConfigMap, `$(VAR)` expansion) through the real flag parser and buildOperator —
// authenticated as its service account through the recording proxy, with a few test overrides (no probe
// or metrics port, a free webhook port, the central URL, short grace periods, which features run). The
// install's webhook Service is routed to its admission server, as the endpoints of its Pod would be. What
// the kubelet adds from the cluster (the Secret keys of the environment, the files of the mounts) is used
// when given: releaseFiles reads and writes it.
import type { KubeConfig, V1Deployment } from '@kubernetes/client-node';
import {
  containerEnvironment,
  find,
  type ManifestObject,
  operatorContainer,
} from '../../../scripts/install-manifest.ts';
import { parseFlags } from '../../../src/cli.ts';
import { parseRunConfig } from '../../../src/config.ts';
import { parseFeatureConfigs } from '../../../src/features.ts';
import { isNotFound } from '../../../src/kube/client.ts';
import type { LifecycleEvent, Manager } from '../../../src/kube/manager.ts';
import { createLogger } from '../../../src/observability/logger.ts';
import { buildOperator, runCommand } from '../../../src/run.ts';
import type { ServiceRoute, TestCluster } from '../../helpers/cluster.ts';
import { localPath, type Mounts, writeVolumeMounts } from './kubelet.ts';

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
  /** The Secret keys the environment refers to (releaseFiles); without, optional ones are absent. */
  secretKey?: (name: string, key: string) => string | undefined;
  /** The container's mounts written out (releaseFiles): the paths in the environment are mapped to them. */
  mounts?: Mounts;
}

/**
 * What the kubelet would give the install's operator container, read from the cluster as the admin: the
 * keys of the Secrets its environment names (a missing Secret or key is absent), and the files of its
 * volume mounts written under `dir`.
 */
export async function releaseFiles(
  t: TestCluster,
  install: ManifestObject[],
  dir: string,
): Promise<Required<Pick<StartOptions, 'secretKey' | 'mounts'>>> {
  const deployment = find<V1Deployment>(install, 'Deployment');
  const namespace = deployment.metadata?.namespace ?? '';
  const pod = deployment.spec?.template.spec;
  if (pod === undefined) throw new Error('the install has no pod spec');
  const container = operatorContainer(install);
  const secrets = new Map<string, Record<string, string>>();
  for (const e of container.env ?? []) {
    const name = e.valueFrom?.secretKeyRef?.name;
    if (name === undefined || secrets.has(name)) continue;
    const secret = await t.core.readNamespacedSecret({ namespace, name }).catch((err: unknown) => {
      if (isNotFound(err)) return undefined;
      throw err;
    });
    secrets.set(
      name,
      Object.fromEntries(
        Object.entries(secret?.data ?? {}).map(([k, v]) => [k, Buffer.from(v, 'base64').toString('utf8')]),
      ),
    );
  }
  return {
    secretKey: (name, key) => secrets.get(name)?.[key],
    mounts: await writeVolumeMounts(t, namespace, pod, container, dir),
  };
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
  const deployed = containerEnvironment(o.install, o.secretKey);
  const mounts = o.mounts;
  if (mounts !== undefined)
    for (const [name, value] of Object.entries(deployed)) deployed[name] = localPath(value, mounts);
  const env = { ...deployed, ...TEST_ENV, ...o.env };
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
