// The flags of `berth-operator helper <acquire|renew|check>`, named as the Go helper's (berth-acquire). A
// flag overrides its environment variable only when given, so no flag has a default of its own here: the
// defaults are applied once, to the merged configuration (config.ts). Imports nothing heavy: main.ts
// loads this module before deciding which command runs (docs/helper.md §1).
import type { CommandSpec, FlagSpec } from '../cli.ts';
import { DEFAULT_INJECTION_PROBE_PORT, DEFAULT_STATE_DIR, ENV, MARKER_FILE } from '../injection/contract.ts';
import { RESTART_POD_EXIT_CODE } from '../injection/restart-pod.ts';

export const HELPER_COMMAND = 'helper';
export const HELPER_SUBCOMMANDS = ['acquire', 'renew', 'check'] as const;
export type HelperSubcommand = (typeof HELPER_SUBCOMMANDS)[number];

const string = (name: string, help: string): FlagSpec => ({ name, kind: 'string', default: undefined, help });
const seconds = (name: string, help: string): FlagSpec => ({
  name,
  kind: 'number',
  default: undefined,
  help,
});
const boolean = (name: string, help: string): FlagSpec => ({
  name,
  kind: 'boolean',
  default: undefined,
  help,
});

/** Flags of every subcommand (Go's persistent flags), each overriding the variable it names. */
export const HELPER_CONFIG_FLAGS: FlagSpec[] = [
  string('lease-name', `Berth lease to acquire (overrides ${ENV.leaseName})`),
  string(
    'lease-namespace',
    `namespace of the lease (overrides ${ENV.leaseNamespace}; default: the Pod namespace)`,
  ),
  string('mode', `startup-gate | runtime-singleton (overrides ${ENV.mode}; default: runtime-singleton)`),
  string('enforce', `probe | signal, runtime-singleton only (overrides ${ENV.enforce}; default: probe)`),
  seconds('ttl-seconds', `lease TTL in whole seconds (overrides ${ENV.ttlSeconds})`),
  seconds(
    'heartbeat-seconds',
    `renew interval in whole seconds (overrides ${ENV.heartbeatSeconds}; default: ttl/3)`,
  ),
  seconds(
    'enforce-grace-seconds',
    `signal mode: seconds between SIGTERM and SIGKILL (overrides ${ENV.enforceGraceSeconds}; default: 0)`,
  ),
  boolean(
    'release-on-shutdown',
    `release the lease on SIGTERM (overrides ${ENV.releaseOnShutdown}; default: true in runtime-singleton, false in startup-gate)`,
  ),
  string(
    'holder-identity',
    `explicit holder identity (overrides ${ENV.holderIdentity} and the mode's default)`,
  ),
  string('cluster-id', `tenant root of the default holder in both modes (overrides ${ENV.clusterId})`),
  string('pod-namespace', `Pod namespace, from the downward API (overrides ${ENV.podNamespace})`),
  string('pod-name', `Pod name, from the downward API (overrides ${ENV.podName})`),
  string(
    'pod-uid',
    `Pod UID, from the downward API metadata.uid; required for the runtime-singleton holder (overrides ${ENV.podUid})`,
  ),
  string('workload-kind', `owning workload kind, part of the default holder (overrides ${ENV.workloadKind})`),
  string('workload-name', `owning workload name, part of the default holder (overrides ${ENV.workloadName})`),
  string(
    'state-dir',
    `shared volume for the lease state and the health marker (overrides ${ENV.stateDir}; default: ${DEFAULT_STATE_DIR})`,
  ),
  string('api-server', `central lease API base URL, https:// only (overrides ${ENV.apiServer})`),
  string(
    'api-key',
    `static bearer token, visible in ps: prefer --api-key-file (overrides ${ENV.apiKey}; exclusive with --api-key-file)`,
  ),
  string('api-key-file', `bearer token file, re-read within 1 s of a rotation (overrides ${ENV.apiKeyFile})`),
  string('ca-bundle-file', `PEM CA bundle trusted besides the system roots (overrides ${ENV.caBundleFile})`),
  string('server-name', `TLS server name instead of the URL's host (overrides ${ENV.serverName})`),
  boolean(
    'insecure-skip-tls-verify',
    `do not verify the API server's certificate, development only (overrides ${ENV.insecureSkipTlsVerify})`,
  ),
  seconds(
    'probe-port',
    `renew: port of the liveness endpoint GET /healthy (overrides ${ENV.probePort}; default: ${DEFAULT_INJECTION_PROBE_PORT})`,
  ),
  boolean(
    'restart-pod-on-loss',
    `renew: exit with code ${RESTART_POD_EXIT_CODE} on a lease loss, for the injected RestartAllContainers rule (overrides ${ENV.restartPodOnLoss}; default: false)`,
  ),
];

export const ACQUIRE_TIMEOUT_FLAG: FlagSpec = {
  name: 'acquire-timeout',
  kind: 'duration',
  default: '0',
  help: 'acquire: fail if the lease cannot be acquired within this duration (0: block until acquired)',
};

export const MAX_AGE_FLAG: FlagSpec = {
  name: 'max-age',
  kind: 'duration',
  default: '0',
  help: `check: fail when the marker (argument, or <state-dir>/${MARKER_FILE}) was not refreshed within this duration (0: presence only)`,
};

/** The flags each subcommand accepts. */
export function subcommandSpec(sub: HelperSubcommand): CommandSpec {
  const extra = sub === 'acquire' ? [ACQUIRE_TIMEOUT_FLAG] : sub === 'check' ? [MAX_AGE_FLAG] : [];
  return {
    name: `${HELPER_COMMAND} ${sub}`,
    summary: SUMMARIES[sub],
    flags: [...HELPER_CONFIG_FLAGS, ...extra],
  };
}

const SUMMARIES: Record<HelperSubcommand, string> = {
  acquire:
    'Block until the lease is acquired, write the lease state, exit 0 (the init container berth-acquire).',
  renew:
    'Renew the lease, serve the liveness endpoint, stop the main containers when the lease is lost (the sidecar berth-sidecar, runtime-singleton).',
  check: 'Exit 0 if the health marker exists (and, with --max-age, is fresh), 1 otherwise.',
};

/** Every helper flag, for `berth-operator --help` and README's table. */
export const helperCommand: CommandSpec = {
  name: HELPER_COMMAND,
  summary:
    'The injected lease helper: "helper acquire" (init container), "helper renew" (sidecar), "helper check [marker]".',
  flags: [...HELPER_CONFIG_FLAGS, ACQUIRE_TIMEOUT_FLAG, MAX_AGE_FLAG],
};
