// The helper's configuration, as the Go helper builds it (docs/helper.md §2): the BERTH_*/POD_* environment
// the webhook sets, then the flags given on the command line, then defaults and validation with the Go
// helper's rules and messages. Pure: no I/O, so every rule is tested without a process.

import { centralUrlProblem } from '../berth/leaseclient.ts';
import { type FlagValues, formatDuration } from '../cli.ts';
import {
  DEFAULT_INJECTION_PROBE_PORT,
  DEFAULT_STATE_DIR,
  ENV,
  type Enforcement,
  type InjectionMode,
  type LeaseSettings,
} from '../injection/contract.ts';
import { describeLead, enforcementLeadMs, heartbeatMsOf, renewCycleFits } from '../injection/enforcement.ts';

/** What the environment and the flags say, before defaults; durations in whole seconds as given. */
export interface RawHelperConfig extends HelperConnection {
  leaseName: string;
  leaseNamespace: string;
  mode: string;
  enforce: string;
  signalTarget: string;
  ttlSeconds: number;
  heartbeatSeconds: number;
  enforceGraceSeconds: number;
  /** Undefined: the mode's default. */
  releaseOnShutdown: boolean | undefined;
  holderIdentity: string;
  clusterId: string;
  podNamespace: string;
  podName: string;
  podUid: string;
  workloadKind: string;
  workloadName: string;
  /** Undefined: the default port. */
  probePort: number | undefined;
  /** Exit on a loss so that the kubelet restarts the Pod's containers (injection/restart-pod.ts). */
  restartPodOnLoss: boolean;
}

/** How the helper reaches the central lease server, and where it keeps its state. */
export interface HelperConnection {
  stateDir: string;
  apiServer: string;
  apiKey: string;
  apiKeyFile: string;
  caBundleFile: string;
  serverName: string;
  insecureSkipTlsVerify: boolean;
}

/** The validated configuration every command runs with. */
export interface HelperConfig extends LeaseSettings, HelperConnection {
  /** ttl/3 when not given, as Go's (not rounded to seconds). */
  heartbeatMs: number;
  enforceGraceMs: number;
  releaseOnShutdown: boolean;
  /** The holder identity of every call (holderOf). */
  holder: string;
  probePort: number;
  restartPodOnLoss: boolean;
}

/** A configuration the helper refuses: one line, exit code 2. */
export class HelperConfigError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'HelperConfigError';
  }
}

/** The API's holder limit (`holder must be at most 253 bytes`). */
export const MAX_HOLDER_BYTES = 253;
const MAX_TTL_SECONDS = 2_147_483_647;

// Go's strconv.ParseBool.
const TRUE = new Set(['1', 't', 'T', 'TRUE', 'true', 'True']);
const FALSE = new Set(['0', 'f', 'F', 'FALSE', 'false', 'False']);

function boolEnv(env: NodeJS.ProcessEnv, key: string): boolean | undefined {
  const v = env[key] ?? '';
  if (v === '') return undefined;
  if (TRUE.has(v)) return true;
  if (FALSE.has(v)) return false;
  throw new HelperConfigError(`${key}=${JSON.stringify(v)}: invalid boolean (want true or false)`);
}

// Go's strconv.Atoi: an optional sign and decimal digits, nothing else.
function secondsEnv(env: NodeJS.ProcessEnv, key: string): number {
  const v = env[key] ?? '';
  if (v === '') return 0;
  if (!/^[+-]?\d+$/.test(v) || !Number.isSafeInteger(Number(v)))
    throw new HelperConfigError(`${key}=${JSON.stringify(v)}: must be an integer number of seconds`);
  return Number(v);
}

/** Go's ConfigFromEnv: values as given, errors only for malformed numbers and booleans. */
export function configFromEnv(env: NodeJS.ProcessEnv): RawHelperConfig {
  const get = (key: string): string => env[key] ?? '';
  const probe = get(ENV.probePort);
  return {
    leaseName: get(ENV.leaseName),
    leaseNamespace: get(ENV.leaseNamespace),
    mode: get(ENV.mode),
    enforce: get(ENV.enforce),
    signalTarget: get(ENV.signalTarget),
    ttlSeconds: secondsEnv(env, ENV.ttlSeconds),
    heartbeatSeconds: secondsEnv(env, ENV.heartbeatSeconds),
    enforceGraceSeconds: secondsEnv(env, ENV.enforceGraceSeconds),
    releaseOnShutdown: boolEnv(env, ENV.releaseOnShutdown),
    holderIdentity: get(ENV.holderIdentity),
    clusterId: get(ENV.clusterId),
    podNamespace: get(ENV.podNamespace),
    podName: get(ENV.podName),
    podUid: get(ENV.podUid),
    workloadKind: get(ENV.workloadKind),
    workloadName: get(ENV.workloadName),
    stateDir: get(ENV.stateDir),
    apiServer: get(ENV.apiServer),
    apiKey: get(ENV.apiKey),
    apiKeyFile: get(ENV.apiKeyFile),
    caBundleFile: get(ENV.caBundleFile),
    serverName: get(ENV.serverName),
    insecureSkipTlsVerify: boolEnv(env, ENV.insecureSkipTlsVerify) ?? false,
    probePort: probe === '' ? undefined : secondsEnv(env, ENV.probePort),
    restartPodOnLoss: boolEnv(env, ENV.restartPodOnLoss) ?? false,
  };
}

const STRING_FLAGS = {
  'lease-name': 'leaseName',
  'lease-namespace': 'leaseNamespace',
  mode: 'mode',
  enforce: 'enforce',
  'holder-identity': 'holderIdentity',
  'cluster-id': 'clusterId',
  'pod-namespace': 'podNamespace',
  'pod-name': 'podName',
  'pod-uid': 'podUid',
  'workload-kind': 'workloadKind',
  'workload-name': 'workloadName',
  'state-dir': 'stateDir',
  'api-server': 'apiServer',
  'api-key': 'apiKey',
  'api-key-file': 'apiKeyFile',
  'ca-bundle-file': 'caBundleFile',
  'server-name': 'serverName',
} as const satisfies Record<string, keyof RawHelperConfig>;

const SECONDS_FLAGS = {
  'ttl-seconds': 'ttlSeconds',
  'heartbeat-seconds': 'heartbeatSeconds',
  'enforce-grace-seconds': 'enforceGraceSeconds',
  'probe-port': 'probePort',
} as const satisfies Record<string, keyof RawHelperConfig>;

/** Layers the flags that were given over the environment's values (Go applies only "changed" flags). */
export function withFlags(base: RawHelperConfig, flags: FlagValues): RawHelperConfig {
  const out: RawHelperConfig = { ...base };
  for (const [flag, key] of Object.entries(STRING_FLAGS)) {
    const v = flags[flag];
    if (typeof v === 'string') out[key] = v;
  }
  for (const [flag, key] of Object.entries(SECONDS_FLAGS)) {
    const v = flags[flag];
    if (typeof v !== 'number') continue;
    if (!Number.isSafeInteger(v)) throw new HelperConfigError(`--${flag}: want a whole number, got ${v}`);
    out[key] = v;
  }
  if (typeof flags['release-on-shutdown'] === 'boolean') out.releaseOnShutdown = flags['release-on-shutdown'];
  if (typeof flags['insecure-skip-tls-verify'] === 'boolean')
    out.insecureSkipTlsVerify = flags['insecure-skip-tls-verify'];
  if (typeof flags['restart-pod-on-loss'] === 'boolean') out.restartPodOnLoss = flags['restart-pod-on-loss'];
  return out;
}

/**
 * Go's Config.Holder. An explicit identity wins. Otherwise both modes root the holder at the tenant: the
 * cluster id when set, else the Pod namespace, followed by "/" (the central server lets a tenant use the
 * holders equal to it or under "<tenant>/"); the rest is ":"-joined. runtime-singleton adds the Pod name
 * and UID (a new Pod never inherits an old one's lease); startup-gate stays workload-level and names the
 * Pod only when the workload is unknown.
 */
export function holderOf(
  c: Pick<
    RawHelperConfig,
    | 'mode'
    | 'holderIdentity'
    | 'clusterId'
    | 'podNamespace'
    | 'podName'
    | 'podUid'
    | 'workloadKind'
    | 'workloadName'
  >,
): string {
  if (c.holderIdentity !== '') return c.holderIdentity;
  const parts = [c.clusterId, c.podNamespace, c.workloadKind, c.workloadName].filter((s) => s !== '');
  if (c.mode === 'startup-gate') {
    if (c.workloadKind === '' && c.workloadName === '' && c.podName !== '') parts.push(c.podName);
  } else {
    if (c.podName !== '') parts.push('pod', c.podName);
    parts.push('uid', c.podUid);
  }
  if (parts.length <= 1) return parts.join(':');
  return `${parts[0]}/${parts.slice(1).join(':')}`;
}

/** The enforcement lead of this configuration (see enforcement.ts). */
export function configLeadMs(
  c: Pick<HelperConfig, 'enforce' | 'enforceGraceMs' | 'restartPodOnLoss'>,
): number {
  return enforcementLeadMs(c.enforce, c.enforceGraceMs / 1_000, c.restartPodOnLoss);
}

/** Go's ApplyDefaults then Validate, with the same messages; plus the enforcement-lead rule (§2.3). */
export function resolveConfig(raw: RawHelperConfig): HelperConfig {
  const mode = raw.mode === '' ? 'runtime-singleton' : raw.mode;
  const enforce = raw.enforce === '' ? 'probe' : raw.enforce;
  const leaseNamespace = raw.leaseNamespace === '' ? raw.podNamespace : raw.leaseNamespace;
  const ttlMs = raw.ttlSeconds * 1_000;
  const heartbeatMs = heartbeatMsOf(raw.ttlSeconds, raw.heartbeatSeconds);
  const fail = (message: string): never => {
    throw new HelperConfigError(message);
  };

  if (raw.leaseName === '') fail('lease name is required');
  if (leaseNamespace === '') fail('lease namespace is required (set --lease-namespace or POD_NAMESPACE)');
  if (mode !== 'startup-gate' && mode !== 'runtime-singleton')
    fail(`invalid mode ${JSON.stringify(mode)} (want "startup-gate" or "runtime-singleton")`);
  if (enforce !== 'probe' && enforce !== 'signal')
    fail(`invalid enforce ${JSON.stringify(enforce)} (want "probe" or "signal")`);
  if (mode === 'runtime-singleton' && enforce === 'signal' && raw.signalTarget === '')
    fail(
      `signal target is required when enforce=signal in mode=runtime-singleton: set ${ENV.signalTarget} to a process comm or executable basename (e.g. "nginx"); an empty target signals every process in the shared PID namespace, which can terminate co-located sidecars`,
    );
  const holder = holderOf({ ...raw, mode });
  if (mode === 'runtime-singleton' && raw.holderIdentity === '') {
    if (raw.podUid === '')
      fail(
        'pod UID is required for the runtime-singleton holder (set --pod-uid or POD_UID from metadata.uid)',
      );
    if (/[:/ \t\r\n]/.test(raw.podUid) || raw.podUid.trim() !== raw.podUid)
      fail("pod UID must be a non-whitespace identity component without ':' or '/'");
    if (Buffer.byteLength(holder) > MAX_HOLDER_BYTES)
      fail('runtime holder exceeds the API limit of 253 bytes; shorten cluster, workload or pod names');
  }
  if (raw.ttlSeconds <= 0 || raw.ttlSeconds > MAX_TTL_SECONDS)
    fail('ttl must be positive and at most 2147483647 seconds (the API limit)');
  if (heartbeatMs <= 0) fail('heartbeat interval must be positive');
  if (heartbeatMs >= ttlMs)
    fail(
      `heartbeat interval (${formatDuration(heartbeatMs)}) must be less than ttl (${formatDuration(ttlMs)})`,
    );
  if (raw.enforceGraceSeconds < 0) fail('enforce grace must not be negative');
  if (raw.apiServer === '') fail('api server URL is required');
  const urlProblem = centralUrlProblem(raw.apiServer);
  if (urlProblem !== undefined)
    fail(`api server URL ${JSON.stringify(raw.apiServer)} (--api-server or ${ENV.apiServer}) ${urlProblem}`);
  if (raw.apiKey !== '' && raw.apiKeyFile !== '') fail('api key and api key file are mutually exclusive');
  const probePort = raw.probePort ?? DEFAULT_INJECTION_PROBE_PORT;
  if (probePort < 0 || probePort > 65_535) fail(`probe port ${probePort} is not a TCP port (0-65535)`);

  const config: HelperConfig = {
    leaseName: raw.leaseName,
    leaseNamespace,
    mode: mode as InjectionMode,
    enforce: enforce as Enforcement,
    signalTarget: raw.signalTarget,
    ttlSeconds: raw.ttlSeconds,
    heartbeatMs,
    enforceGraceMs: raw.enforceGraceSeconds * 1_000,
    releaseOnShutdown: raw.releaseOnShutdown ?? mode === 'runtime-singleton',
    holder,
    stateDir: raw.stateDir === '' ? DEFAULT_STATE_DIR : raw.stateDir,
    apiServer: raw.apiServer,
    apiKey: raw.apiKey,
    apiKeyFile: raw.apiKeyFile,
    caBundleFile: raw.caBundleFile,
    serverName: raw.serverName,
    insecureSkipTlsVerify: raw.insecureSkipTlsVerify,
    probePort,
    restartPodOnLoss: raw.restartPodOnLoss,
  };
  // Not in Go: the sidecar stops the main containers `lead` before the lease can expire, so a renew
  // cycle must fit in what is left, or a healthy sidecar would stop them every cycle.
  if (mode === 'runtime-singleton') {
    const lead = configLeadMs(config);
    if (!renewCycleFits(ttlMs, heartbeatMs, lead))
      fail(
        `heartbeat interval (${formatDuration(heartbeatMs)}) plus the enforcement lead (${formatDuration(lead)}: ${describeLead(enforce as Enforcement, raw.restartPodOnLoss)}) must be less than ttl (${formatDuration(ttlMs)}): the sidecar stops the app that long before the lease can expire`,
      );
  }
  return config;
}
