// The injection contract end to end (Go's roundtrip test, widened): the operator's flags and a Pod's
// annotations go through the mutating webhook; the environment and arguments it writes into each injected
// container, resolved as the kubelet would (the downward API), go through the helper's own configFromEnv,
// withFlags and resolveConfig; what comes out must be the configuration the operator's settings meant,
// written out here by hand. The variable names are pinned to the Go helper's literal names, so a name
// changed on either side, or in contract.ts, fails.
import type { V1Container, V1OwnerReference, V1Pod } from '@kubernetes/client-node';
import jsonpatch from 'fast-json-patch';
import { describe, expect, it } from 'vitest';
import { parseBerthConfig } from '../../../src/berth/config.ts';
import { parseFlags } from '../../../src/cli.ts';
import { configFromEnv, type HelperConfig, resolveConfig, withFlags } from '../../../src/helper/config.ts';
import { HELPER_SUBCOMMANDS, type HelperSubcommand, subcommandSpec } from '../../../src/helper/spec.ts';
import { INJECT_LABEL } from '../../../src/injection/contract.ts';
import { parseInjectionConfig } from '../../../src/injection/flags.ts';
import { decideInjection } from '../../../src/injection/mutate.ts';
import { injectorSettings } from '../../../src/injection/settings.ts';
import { runCommand } from '../../../src/run.ts';

/** What the kubelet resolves the downward API from: the running Pod's identity. */
interface RunningPod {
  namespace: string;
  name: string;
  uid: string;
}

/** The Pod as stored after the mutating webhook's patch, under the operator started with `argv`. */
function injectedUnder(argv: string[], pod: V1Pod, namespace: string): V1Pod {
  const values = parseFlags(runCommand, ['--enable-injection-webhook', ...argv], {});
  const settings = injectorSettings(parseInjectionConfig(values), parseBerthConfig(values), 'berth-system');
  const decision = decideInjection(
    {
      uid: 'review-1',
      kind: { group: '', version: 'v1', kind: 'Pod' },
      resource: { group: '', version: 'v1', resource: 'pods' },
      namespace,
      operation: 'CREATE',
      userInfo: { username: 'replicaset-controller' },
      object: pod as Record<string, unknown>,
    },
    settings,
  );
  if (!decision.allowed) throw new Error(`denied: ${decision.message}`);
  return jsonpatch.applyPatch(
    structuredClone(pod),
    (decision.patch ?? []) as jsonpatch.Operation[],
    true,
    false,
  ).newDocument;
}

/** The container's environment as its process sees it. */
function processEnv(c: V1Container, running: RunningPod): Record<string, string> {
  const downward: Record<string, string> = {
    'metadata.namespace': running.namespace,
    'metadata.name': running.name,
    'metadata.uid': running.uid,
  };
  const env: Record<string, string> = {};
  for (const e of c.env ?? []) {
    const path = e.valueFrom?.fieldRef?.fieldPath;
    if (path !== undefined) {
      const value = downward[path];
      if (value === undefined) throw new Error(`${e.name}: unexpected fieldRef ${path}`);
      env[e.name] = value;
    } else env[e.name] = e.value ?? '';
  }
  return env;
}

/** What the helper in `c` runs with: its environment, then its arguments (`helper <sub> [flags]`). */
function helperConfigOf(c: V1Container, running: RunningPod): HelperConfig {
  const [command, sub, ...flags] = c.args ?? [];
  expect(command).toBe('helper');
  expect(HELPER_SUBCOMMANDS).toContain(sub);
  const values = parseFlags(subcommandSpec(sub as HelperSubcommand), flags);
  return resolveConfig(withFlags(configFromEnv(processEnv(c, running)), values));
}

function pod(name: string, annotations: Record<string, string>, owner?: V1OwnerReference): V1Pod {
  return {
    apiVersion: 'v1',
    kind: 'Pod',
    metadata: {
      name,
      labels: { [INJECT_LABEL]: 'acquire' },
      annotations,
      ...(owner === undefined ? {} : { ownerReferences: [owner] }),
    },
    spec: { containers: [{ name: 'app', image: 'app:1' }] },
  };
}

const owner = (kind: string, name: string): V1OwnerReference => ({
  apiVersion: kind === 'Job' ? 'batch/v1' : 'apps/v1',
  kind,
  name,
  uid: 'owner-uid',
  controller: true,
});

const UID = '3f9d2c1e-7a41-4b8e-9e0d-5c6a2b8f1d47';

/** The variables the Go helper reads (internal/acquire/env.go), plus POD_UID and this project's two. */
const BASE_NAMES = [
  'BERTH_LEASE_NAME',
  'BERTH_LEASE_NAMESPACE',
  'BERTH_MODE',
  'BERTH_ENFORCE',
  'BERTH_TTL_SECONDS',
  'BERTH_STATE_DIR',
  'POD_NAMESPACE',
  'POD_NAME',
  'POD_UID',
];

interface Case {
  what: string;
  operator: string[];
  pod: V1Pod;
  /** The injected helpers, in order. */
  containers: string[];
  names: string[];
  meant: HelperConfig;
}

const cases: Case[] = [
  {
    what: 'runtime-singleton with every default',
    operator: [
      '--injection-helper-image=img',
      '--berth-api-server=https://berth.example:8443',
      '--cluster-id=east-1',
    ],
    pod: pod('database-0', { 'berth.skaphos.io/lease-name': 'orders' }, owner('StatefulSet', 'database')),
    containers: ['berth-acquire', 'berth-sidecar'],
    names: [
      ...BASE_NAMES,
      'BERTH_WORKLOAD_KIND',
      'BERTH_WORKLOAD_NAME',
      'BERTH_CLUSTER_ID',
      'BERTH_API_SERVER',
      'BERTH_PROBE_PORT',
    ],
    meant: {
      leaseName: 'orders',
      leaseNamespace: 'prod',
      mode: 'runtime-singleton',
      enforce: 'probe',
      signalTarget: '',
      ttlSeconds: 30,
      heartbeatMs: 10_000,
      enforceGraceMs: 0,
      releaseOnShutdown: true,
      holder: `east-1/prod:StatefulSet:database:pod:database-0:uid:${UID}`,
      stateDir: '/berth',
      apiServer: 'https://berth.example:8443',
      apiKey: '',
      apiKeyFile: '',
      caBundleFile: '',
      serverName: '',
      insecureSkipTlsVerify: false,
      probePort: 9394,
      restartPodOnLoss: false,
    },
  },
  {
    what: 'signal enforcement with every setting the operator and the annotations have',
    operator: [
      '--injection-helper-image=img',
      '--injection-state-dir=/var/lib/berth',
      '--injection-probe-port=9400',
      '--injection-restart-pod-on-loss',
      '--injection-helper-api-key-file=/var/run/berth/token',
      '--injection-helper-api-key-secret=berth-token',
      '--injection-helper-ca-bundle-file=/var/run/berth-ca/ca.crt',
      '--injection-helper-ca-bundle-configmap=berth-ca',
      '--berth-api-server=https://10.0.0.5:8443',
      '--cluster-id=west-2',
      '--berth-server-name=berth.internal',
      '--berth-insecure-skip-tls-verify',
    ],
    pod: pod(
      'orders-7f6c-x2k9q',
      {
        'berth.skaphos.io/lease-name': 'orders',
        'berth.skaphos.io/lease-namespace': 'shared',
        'berth.skaphos.io/enforce': 'signal',
        'berth.skaphos.io/signal-target': 'orders-api',
        'berth.skaphos.io/ttl-seconds': '45',
        'berth.skaphos.io/heartbeat-interval-seconds': '10',
        'berth.skaphos.io/enforce-grace-seconds': '5',
        'berth.skaphos.io/release-on-shutdown': 'false',
      },
      owner('ReplicaSet', 'orders-7f6c'),
    ),
    containers: ['berth-acquire', 'berth-sidecar'],
    names: [
      ...BASE_NAMES,
      'BERTH_SIGNAL_TARGET',
      'BERTH_HEARTBEAT_SECONDS',
      'BERTH_ENFORCE_GRACE_SECONDS',
      'BERTH_RELEASE_ON_SHUTDOWN',
      'BERTH_WORKLOAD_KIND',
      'BERTH_WORKLOAD_NAME',
      'BERTH_CLUSTER_ID',
      'BERTH_API_SERVER',
      'BERTH_API_KEY_FILE',
      'BERTH_CA_BUNDLE_FILE',
      'BERTH_SERVER_NAME',
      'BERTH_INSECURE_SKIP_TLS_VERIFY',
      'BERTH_PROBE_PORT',
      'BERTH_RESTART_POD_ON_LOSS',
    ],
    meant: {
      leaseName: 'orders',
      leaseNamespace: 'shared',
      mode: 'runtime-singleton',
      enforce: 'signal',
      signalTarget: 'orders-api',
      ttlSeconds: 45,
      heartbeatMs: 10_000,
      enforceGraceMs: 5_000,
      releaseOnShutdown: false,
      // The tenant root is the cluster, then the Pod's own namespace (not the lease's).
      holder: `west-2/prod:ReplicaSet:orders-7f6c:pod:orders-7f6c-x2k9q:uid:${UID}`,
      stateDir: '/var/lib/berth',
      apiServer: 'https://10.0.0.5:8443',
      apiKey: '',
      apiKeyFile: '/var/run/berth/token',
      caBundleFile: '/var/run/berth-ca/ca.crt',
      serverName: 'berth.internal',
      insecureSkipTlsVerify: true,
      probePort: 9400,
      restartPodOnLoss: true,
    },
  },
  {
    what: 'startup-gate from the operator defaults, with an explicit holder',
    operator: [
      '--injection-helper-image=img',
      '--injection-default-mode=startup-gate',
      '--injection-default-ttl-seconds=20',
      '--injection-probe-port=9400',
      '--injection-restart-pod-on-loss',
      '--berth-api-server=https://berth.example:8443',
      '--cluster-id=east-1',
    ],
    pod: pod(
      'nightly-report-8xk2p',
      {
        'berth.skaphos.io/lease-name': 'nightly',
        'berth.skaphos.io/holder-identity': 'east-1/batch-runner',
        'berth.skaphos.io/release-on-shutdown': 'true',
      },
      owner('Job', 'nightly-report'),
    ),
    containers: ['berth-acquire'],
    names: [
      ...BASE_NAMES,
      'BERTH_RELEASE_ON_SHUTDOWN',
      'BERTH_HOLDER_IDENTITY',
      'BERTH_WORKLOAD_KIND',
      'BERTH_WORKLOAD_NAME',
      'BERTH_CLUSTER_ID',
      'BERTH_API_SERVER',
    ],
    meant: {
      leaseName: 'nightly',
      leaseNamespace: 'prod',
      mode: 'startup-gate',
      enforce: 'probe',
      signalTarget: '',
      ttlSeconds: 20,
      heartbeatMs: 20_000 / 3,
      enforceGraceMs: 0,
      releaseOnShutdown: true,
      holder: 'east-1/batch-runner',
      stateDir: '/berth',
      apiServer: 'https://berth.example:8443',
      apiKey: '',
      apiKeyFile: '',
      caBundleFile: '',
      serverName: '',
      insecureSkipTlsVerify: false,
      // No sidecar and no probe in startup-gate: the port and the restart rule are not handed over.
      probePort: 9394,
      restartPodOnLoss: false,
    },
  },
  {
    what: 'runtime-singleton for a bare Pod, with an enforce grace',
    operator: [
      '--injection-helper-image=img',
      '--berth-api-server=https://berth.example:8443',
      '--cluster-id=east-1',
    ],
    pod: pod('web-0', {
      'berth.skaphos.io/lease-name': 'web',
      'berth.skaphos.io/enforce-grace-seconds': '3',
    }),
    containers: ['berth-acquire', 'berth-sidecar'],
    names: [
      ...BASE_NAMES,
      'BERTH_ENFORCE_GRACE_SECONDS',
      'BERTH_CLUSTER_ID',
      'BERTH_API_SERVER',
      'BERTH_PROBE_PORT',
    ],
    meant: {
      leaseName: 'web',
      leaseNamespace: 'prod',
      mode: 'runtime-singleton',
      enforce: 'probe',
      signalTarget: '',
      ttlSeconds: 30,
      heartbeatMs: 10_000,
      enforceGraceMs: 3_000,
      releaseOnShutdown: true,
      holder: `east-1/prod:pod:web-0:uid:${UID}`,
      stateDir: '/berth',
      apiServer: 'https://berth.example:8443',
      apiKey: '',
      apiKeyFile: '',
      caBundleFile: '',
      serverName: '',
      insecureSkipTlsVerify: false,
      probePort: 9394,
      restartPodOnLoss: false,
    },
  },
];

describe('webhook env -> helper configuration', () => {
  it.each(cases)('$what', (c) => {
    const injected = injectedUnder(c.operator, c.pod, 'prod');
    const helpers = (injected.spec?.initContainers ?? []).filter((i) => i.name.startsWith('berth-'));
    expect(helpers.map((h) => h.name)).toEqual(c.containers);
    const running = { namespace: 'prod', name: c.pod.metadata?.name ?? '', uid: UID };
    for (const helper of helpers) {
      expect((helper.env ?? []).map((e) => e.name).sort(), helper.name).toEqual([...c.names].sort());
      expect(helperConfigOf(helper, running), helper.name).toEqual(c.meant);
    }
  });
});
