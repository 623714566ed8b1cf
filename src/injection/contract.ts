// The injection contract: the names the mutating webhook writes into an opted-in Pod and the helper
// (`berth-operator helper …`, src/helper/) reads back. Both sides import this module so they cannot
// drift. Wire-compatible with the Go operator except for the liveness probe, which is an HTTP probe
// served by the sidecar (docs/decisions/0008-helper-probe-over-http.md). Constants and types only.

/** The opt-in label, on the Pod template (workload controllers copy it onto the Pods they create). */
export const INJECT_LABEL = 'berth.skaphos.io/inject';
export const INJECT_VALUE = 'acquire';

/** Per-Pod configuration. Only the lease name is required; docs/injection.md lists the defaults. */
export const ANNOTATIONS = {
  leaseName: 'berth.skaphos.io/lease-name',
  leaseNamespace: 'berth.skaphos.io/lease-namespace',
  mode: 'berth.skaphos.io/mode',
  holderIdentity: 'berth.skaphos.io/holder-identity',
  ttlSeconds: 'berth.skaphos.io/ttl-seconds',
  heartbeatSeconds: 'berth.skaphos.io/heartbeat-interval-seconds',
  releaseOnShutdown: 'berth.skaphos.io/release-on-shutdown',
  enforce: 'berth.skaphos.io/enforce',
  enforceGraceSeconds: 'berth.skaphos.io/enforce-grace-seconds',
  signalTarget: 'berth.skaphos.io/signal-target',
  /**
   * Set on every mutated Pod as a marker for people and tools. Never read for control flow: the
   * submitter controls it, and trusting it let a Pod skip injection while keeping the opt-in label.
   */
  injected: 'berth.skaphos.io/injected',
} as const;

export const MODES = ['runtime-singleton', 'startup-gate'] as const;
export type InjectionMode = (typeof MODES)[number];
export const ENFORCEMENTS = ['probe', 'signal'] as const;
export type Enforcement = (typeof ENFORCEMENTS)[number];

/** The lease an injected Pod runs under: what the webhook resolves from its annotations, and the helper runs with. */
export interface LeaseSettings {
  leaseName: string;
  leaseNamespace: string;
  mode: InjectionMode;
  enforce: Enforcement;
  signalTarget: string;
  ttlSeconds: number;
}

/** Reserved names: the shared emptyDir and the two injected init containers. */
export const STATE_VOLUME = 'berth-state';
export const ACQUIRE_CONTAINER = 'berth-acquire';
export const SIDECAR_CONTAINER = 'berth-sidecar';
/** Volumes that carry the helper's bearer token and CA bundle, when the operator is given their sources. */
export const AUTH_TOKEN_VOLUME = 'berth-auth-token';
export const AUTH_CA_VOLUME = 'berth-auth-ca';

/** Where the state volume is mounted in the helpers (`--injection-state-dir`), and the marker in it. */
export const DEFAULT_STATE_DIR = '/berth';
export const MARKER_FILE = 'healthy';

/** The image's entrypoint is `berth-operator`; these are the arguments of each injected container. */
export const HELPER_ACQUIRE_ARGS = ['helper', 'acquire'] as const;
export const HELPER_RENEW_ARGS = ['helper', 'renew'] as const;
export const HELPER_CHECK_ARGS = ['helper', 'check'] as const;

/**
 * The liveness probe injected into every main container (probe enforcement; in signal mode only where
 * the container has none). The sidecar serves it on `--injection-probe-port` in the Pod's network
 * namespace: 200 only while the marker is at most one TTL old and the lease is held, so a dead
 * sidecar (connection refused) fails the probe as Go's stale marker file does.
 */
export const INJECTION_PROBE_PATH = '/healthy';
export const DEFAULT_INJECTION_PROBE_PORT = 9394;
export const PROBE_PERIOD_SECONDS = 2;
export const PROBE_FAILURE_THRESHOLD = 1;

/**
 * The helper's environment, named as the Go helper's (`internal/acquire/env.go`), plus
 * `BERTH_PROBE_PORT`, which only this project's HTTP probe needs.
 */
export const ENV = {
  leaseName: 'BERTH_LEASE_NAME',
  leaseNamespace: 'BERTH_LEASE_NAMESPACE',
  mode: 'BERTH_MODE',
  enforce: 'BERTH_ENFORCE',
  signalTarget: 'BERTH_SIGNAL_TARGET',
  ttlSeconds: 'BERTH_TTL_SECONDS',
  heartbeatSeconds: 'BERTH_HEARTBEAT_SECONDS',
  enforceGraceSeconds: 'BERTH_ENFORCE_GRACE_SECONDS',
  releaseOnShutdown: 'BERTH_RELEASE_ON_SHUTDOWN',
  holderIdentity: 'BERTH_HOLDER_IDENTITY',
  clusterId: 'BERTH_CLUSTER_ID',
  workloadKind: 'BERTH_WORKLOAD_KIND',
  workloadName: 'BERTH_WORKLOAD_NAME',
  stateDir: 'BERTH_STATE_DIR',
  apiServer: 'BERTH_API_SERVER',
  apiKey: 'BERTH_API_KEY',
  apiKeyFile: 'BERTH_API_KEY_FILE',
  caBundleFile: 'BERTH_CA_BUNDLE_FILE',
  serverName: 'BERTH_SERVER_NAME',
  insecureSkipTlsVerify: 'BERTH_INSECURE_SKIP_TLS_VERIFY',
  probePort: 'BERTH_PROBE_PORT',
  /** Set to `true` with `--injection-restart-pod-on-loss` (restart-pod.ts); not in Go. */
  restartPodOnLoss: 'BERTH_RESTART_POD_ON_LOSS',
  /** Downward API (metadata.namespace, metadata.name, metadata.uid): the default holder identity. */
  podNamespace: 'POD_NAMESPACE',
  podName: 'POD_NAME',
  podUid: 'POD_UID',
} as const;
export type HelperEnvName = (typeof ENV)[keyof typeof ENV];
