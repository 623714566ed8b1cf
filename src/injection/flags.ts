// The helper-injection flags of `run` (docs/injection.md), in cli.ts's FlagSpec form, and their validation:
// a bad value or combination is one UsageError line naming the flag. Names and defaults are the Go
// operator's; `--injection-probe-port` is ours (the HTTP liveness probe, docs/decisions/0008).
import path from 'node:path/posix';
import { z } from 'zod';
import { type FlagSpec, type FlagValues, UsageError } from '../cli.ts';
import {
  DEFAULT_INJECTION_PROBE_PORT,
  DEFAULT_STATE_DIR,
  ENFORCEMENTS,
  type Enforcement,
  type InjectionMode,
  MODES,
} from './contract.ts';

export const PULL_POLICIES = ['Always', 'IfNotPresent', 'Never'] as const;
export type PullPolicy = (typeof PULL_POLICIES)[number];

export const injectionFlags: FlagSpec[] = [
  {
    name: 'enable-injection-webhook',
    kind: 'boolean',
    default: false,
    help: 'Serve the helper-injection webhooks (/mutate--v1-pod, /validate--v1-pod) for Pods labelled berth.skaphos.io/inject=acquire',
    env: 'BERTH_ENABLE_INJECTION_WEBHOOK',
  },
  {
    name: 'injection-helper-image',
    kind: 'string',
    default: '',
    help: 'Image of the injected helper containers (this operator image: they run `berth-operator helper ...`); required with --enable-injection-webhook',
    env: 'BERTH_INJECTION_HELPER_IMAGE',
  },
  {
    name: 'injection-helper-image-pull-policy',
    kind: 'string',
    default: 'IfNotPresent',
    help: 'Pull policy of both injected helper containers: Always, IfNotPresent or Never',
    env: 'BERTH_INJECTION_HELPER_IMAGE_PULL_POLICY',
  },
  {
    name: 'injection-control-plane-namespaces',
    kind: 'string',
    default: 'berth-system',
    help: 'Comma-separated namespaces never injected (the Berth control plane); the operator namespace is always one',
    env: 'BERTH_INJECTION_CONTROL_PLANE_NAMESPACES',
  },
  {
    name: 'injection-helper-api-key-file',
    kind: 'string',
    default: '',
    help: 'Path inside the workload Pod where the helpers read their bearer token; set together with --injection-helper-api-key-secret',
    env: 'BERTH_INJECTION_HELPER_API_KEY_FILE',
  },
  {
    name: 'injection-helper-api-key-secret',
    kind: 'string',
    default: '',
    help: "Secret in each opted-in Pod's namespace holding the helpers' token, mounted at --injection-helper-api-key-file",
    env: 'BERTH_INJECTION_HELPER_API_KEY_SECRET',
  },
  {
    name: 'injection-helper-api-key-secret-key',
    kind: 'string',
    default: 'token',
    help: 'Data key of the token in --injection-helper-api-key-secret',
    env: 'BERTH_INJECTION_HELPER_API_KEY_SECRET_KEY',
  },
  {
    name: 'injection-helper-ca-bundle-file',
    kind: 'string',
    default: '',
    help: 'Path inside the workload Pod where the helpers read the central API CA bundle; set together with --injection-helper-ca-bundle-configmap',
    env: 'BERTH_INJECTION_HELPER_CA_BUNDLE_FILE',
  },
  {
    name: 'injection-helper-ca-bundle-configmap',
    kind: 'string',
    default: '',
    help: "ConfigMap in each opted-in Pod's namespace holding the CA bundle, mounted at --injection-helper-ca-bundle-file",
    env: 'BERTH_INJECTION_HELPER_CA_BUNDLE_CONFIGMAP',
  },
  {
    name: 'injection-helper-ca-bundle-key',
    kind: 'string',
    default: 'ca.crt',
    help: 'Data key of the CA bundle in --injection-helper-ca-bundle-configmap',
    env: 'BERTH_INJECTION_HELPER_CA_BUNDLE_KEY',
  },
  {
    name: 'injection-state-dir',
    kind: 'string',
    default: DEFAULT_STATE_DIR,
    help: 'Absolute mount path of the berth-state volume in the helper containers',
    env: 'BERTH_INJECTION_STATE_DIR',
  },
  {
    name: 'injection-default-mode',
    kind: 'string',
    default: 'runtime-singleton',
    help: 'berth.skaphos.io/mode of Pods without the annotation: runtime-singleton or startup-gate',
    env: 'BERTH_INJECTION_DEFAULT_MODE',
  },
  {
    name: 'injection-default-enforce',
    kind: 'string',
    default: 'probe',
    help: 'berth.skaphos.io/enforce of Pods without the annotation: probe or signal',
    env: 'BERTH_INJECTION_DEFAULT_ENFORCE',
  },
  {
    name: 'injection-default-ttl-seconds',
    kind: 'number',
    default: 30,
    help: 'berth.skaphos.io/ttl-seconds of Pods without the annotation',
    env: 'BERTH_INJECTION_DEFAULT_TTL_SECONDS',
  },
  {
    name: 'injection-webhook-configuration-name',
    kind: 'string',
    default: 'berth-operator-injection',
    help: 'Name of the injection Mutating and Validating webhook configurations (and of the ClusterRole that owns them)',
    env: 'BERTH_INJECTION_WEBHOOK_CONFIGURATION_NAME',
  },
  {
    name: 'injection-webhook-failure-policy',
    kind: 'string',
    default: 'Fail',
    help: 'failurePolicy of the injection webhooks: Fail (an opted-in Pod is not created while no replica answers) or Ignore (it starts without its helpers)',
    env: 'BERTH_INJECTION_WEBHOOK_FAILURE_POLICY',
  },
  {
    name: 'injection-probe-port',
    kind: 'number',
    default: DEFAULT_INJECTION_PROBE_PORT,
    help: 'Port in each runtime-singleton Pod where the berth-sidecar serves the injected liveness probe (Pods may not declare it)',
    env: 'BERTH_INJECTION_PROBE_PORT',
  },
  {
    name: 'injection-restart-pod-on-loss',
    kind: 'boolean',
    default: false,
    help: 'Give berth-sidecar a RestartAllContainers restart rule and make it exit when its lease is lost, so that no main container the kubelet restarts runs before berth-acquire wins the lease again (Kubernetes 1.36+, docs/injection.md)',
    env: 'BERTH_INJECTION_RESTART_POD_ON_LOSS',
  },
];

/** The operator-level settings of injection; the central API settings come from the BerthLease flags. */
export interface InjectionConfig {
  enabled: boolean;
  helperImage: string;
  imagePullPolicy: PullPolicy;
  controlPlaneNamespaces: string[];
  apiKeyFile: string;
  apiKeySecret: string;
  apiKeySecretKey: string;
  caBundleFile: string;
  caBundleConfigMap: string;
  caBundleKey: string;
  stateDir: string;
  defaultMode: InjectionMode;
  defaultEnforce: Enforcement;
  defaultTtlSeconds: number;
  probePort: number;
  /** berth-sidecar restarts the whole Pod on a loss (restart-pod.ts). */
  restartPodOnLoss: boolean;
  configurationName: string;
  failurePolicy: 'Fail' | 'Ignore';
}

const MAX_TTL_SECONDS = 2_147_483_647;

/**
 * A file the webhook mounts from a Secret or ConfigMap: its directory is the mount path and its base name
 * the key's path, so it must be absolute, clean and not directly under `/`.
 */
function mountableFileProblem(file: string): string | undefined {
  if (!path.isAbsolute(file)) return 'must be an absolute path';
  if (path.normalize(file) !== file || file.endsWith('/'))
    return 'must be a clean path (no trailing "/", "." or ".." segments)';
  if (path.dirname(file) === '/') return 'must have a parent directory other than "/"';
  return undefined;
}

const schema = z.object({
  'enable-injection-webhook': z.boolean(),
  'injection-helper-image': z.string(),
  'injection-helper-image-pull-policy': z.enum(PULL_POLICIES),
  'injection-control-plane-namespaces': z.string(),
  'injection-helper-api-key-file': z.string(),
  'injection-helper-api-key-secret': z.string(),
  'injection-helper-api-key-secret-key': z.string().min(1, 'must not be empty'),
  'injection-helper-ca-bundle-file': z.string(),
  'injection-helper-ca-bundle-configmap': z.string(),
  'injection-helper-ca-bundle-key': z.string().min(1, 'must not be empty'),
  'injection-state-dir': z
    .string()
    .refine((dir) => path.isAbsolute(dir) && path.normalize(dir) === dir && dir !== '/', {
      message: 'must be a clean absolute path other than "/"',
    }),
  'injection-default-mode': z.enum(MODES),
  'injection-default-enforce': z.enum(ENFORCEMENTS),
  'injection-default-ttl-seconds': z
    .number()
    .int('must be a whole number')
    .min(1, 'must be positive')
    .max(MAX_TTL_SECONDS, `must be at most ${MAX_TTL_SECONDS}`),
  'injection-webhook-configuration-name': z
    .string()
    .max(253)
    .regex(/^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$/, 'must be a DNS subdomain'),
  'injection-webhook-failure-policy': z.enum(['Fail', 'Ignore']),
  'injection-probe-port': z
    .number()
    .int('must be a whole number')
    .min(1)
    .max(65535, 'must be a port (1-65535)'),
  'injection-restart-pod-on-loss': z.boolean(),
});

type Parsed = z.output<typeof schema>;

/** The combination rules, each naming the flag to fix; undefined when the flags fit together. */
function combinationProblem(f: Parsed): { flag: keyof Parsed; message: string } | undefined {
  if (f['enable-injection-webhook'] && f['injection-helper-image'] === '')
    return {
      flag: 'injection-helper-image',
      message:
        '--injection-helper-image (BERTH_INJECTION_HELPER_IMAGE) is required with --enable-injection-webhook: set it to this operator image',
    };
  const pairs = [
    ['injection-helper-api-key-file', 'injection-helper-api-key-secret'],
    ['injection-helper-ca-bundle-file', 'injection-helper-ca-bundle-configmap'],
  ] as const;
  for (const [file, source] of pairs) {
    if ((f[file] === '') !== (f[source] === ''))
      return {
        flag: f[file] === '' ? file : source,
        message: `--${file} and --${source} must be set together: the webhook mounts the ${source.endsWith('secret') ? 'Secret' : 'ConfigMap'} at the file's directory`,
      };
    const problem = f[file] === '' ? undefined : mountableFileProblem(f[file]);
    if (problem !== undefined)
      return { flag: file, message: `invalid value "${f[file]}" for --${file}: ${problem}` };
    if (f[file] !== '' && path.dirname(f[file]) === f['injection-state-dir'])
      return {
        flag: file,
        message: `invalid value "${f[file]}" for --${file}: its directory must differ from --injection-state-dir`,
      };
  }
  const keyFile = f['injection-helper-api-key-file'];
  const caFile = f['injection-helper-ca-bundle-file'];
  if (keyFile !== '' && caFile !== '' && path.dirname(keyFile) === path.dirname(caFile))
    return {
      flag: 'injection-helper-ca-bundle-file',
      message:
        '--injection-helper-api-key-file and --injection-helper-ca-bundle-file must be in different directories (each is a volume mount)',
    };
  return undefined;
}

/** Parsed flag values -> InjectionConfig, or a one-line UsageError naming the flag. */
export function parseInjectionConfig(values: FlagValues): InjectionConfig {
  const result = schema.safeParse(values);
  if (!result.success) {
    const first = result.error.issues[0];
    const flag = first?.path[0];
    const where = typeof flag === 'string' ? `--${flag}` : 'injection flags';
    const value = typeof flag === 'string' ? values[flag] : undefined;
    const shown = value === undefined ? '' : ` "${String(value)}"`;
    throw new UsageError(`invalid value${shown} for ${where}: ${first?.message ?? 'invalid'}`);
  }
  const f = result.data;
  const problem = combinationProblem(f);
  if (problem !== undefined) throw new UsageError(problem.message);
  return {
    enabled: f['enable-injection-webhook'],
    helperImage: f['injection-helper-image'],
    imagePullPolicy: f['injection-helper-image-pull-policy'],
    controlPlaneNamespaces: f['injection-control-plane-namespaces']
      .split(',')
      .map((ns) => ns.trim())
      .filter((ns) => ns !== ''),
    apiKeyFile: f['injection-helper-api-key-file'],
    apiKeySecret: f['injection-helper-api-key-secret'],
    apiKeySecretKey: f['injection-helper-api-key-secret-key'],
    caBundleFile: f['injection-helper-ca-bundle-file'],
    caBundleConfigMap: f['injection-helper-ca-bundle-configmap'],
    caBundleKey: f['injection-helper-ca-bundle-key'],
    stateDir: f['injection-state-dir'],
    defaultMode: f['injection-default-mode'],
    defaultEnforce: f['injection-default-enforce'],
    defaultTtlSeconds: f['injection-default-ttl-seconds'],
    probePort: f['injection-probe-port'],
    restartPodOnLoss: f['injection-restart-pod-on-loss'],
    configurationName: f['injection-webhook-configuration-name'],
    failurePolicy: f['injection-webhook-failure-policy'],
  };
}
