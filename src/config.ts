// The `run` flags: one table, from which come the `--help` text (cli.ts), the env-var equivalents and
// the zod schema that validates them once. Names and defaults mirror the Go operator
// (docs/behaviour.md §5.1) and controller-runtime where those exist.
//
// To add a flag, add one row: `kind` and `default` drive parsing and `--help` (durations are written
// Go-style, e.g. '15s', and arrive in milliseconds), `schema` validates the parsed value, and the
// camel-cased name appears on RunConfig (`leader-elect` -> `leaderElect`) with the schema's type.
// Every flag can also be set from the environment: `env`, else BERTH_<NAME_IN_UPPER_SNAKE_CASE>.
import { readFile } from 'node:fs/promises';
import { z } from 'zod';
import type { FlagKind, FlagSpec, FlagValues } from './cli.ts';
import { formatDuration, UsageError } from './cli.ts';
import { JITTER_FACTOR } from './kube/leader-decision.ts';
import { dnsSubdomainSchema, isDnsLabel, optionalNamespaceSchema } from './kube/names.ts';
import { parseBindAddress, sameFixedListener } from './observability/health.ts';
import { LOG_LEVELS } from './observability/logger.ts';

export interface FlagDef {
  kind: FlagKind;
  /** As shown by `--help`; a duration is a Go-style string. */
  default: string | number | boolean;
  help: string;
  /** Environment variable; BERTH_<FLAG_NAME> when absent. */
  env?: string;
  schema: z.ZodType;
}

const duration = z.number().positive('must be greater than zero');
const bindAddress = z.string().refine(
  (value) => {
    try {
      parseBindAddress(value);
      return true;
    } catch {
      return false;
    }
  },
  { message: 'want [host]:port (e.g. ":8080", "127.0.0.1:0") or "0" to disable' },
);

export const RUN_FLAGS = {
  kubeconfig: {
    kind: 'string',
    default: '',
    env: 'KUBECONFIG',
    help: 'Kubeconfig file(s) to use; when empty, the in-cluster config, then ~/.kube/config',
    schema: z.string(),
  },
  namespace: {
    kind: 'string',
    default: '',
    env: 'POD_NAMESPACE',
    help: 'Namespace the operator runs in; when empty, read from the service account namespace file',
    schema: optionalNamespaceSchema,
  },
  'leader-elect': {
    kind: 'boolean',
    default: false,
    help: 'Elect a leader through a Lease so that only one replica runs the controllers',
    schema: z.boolean(),
  },
  'leader-election-id': {
    kind: 'string',
    default: 'berth-operator-leader',
    help: 'Name of the coordination.k8s.io Lease used for leader election',
    schema: dnsSubdomainSchema,
  },
  'leader-election-namespace': {
    kind: 'string',
    default: '',
    help: 'Namespace of the leader election Lease; when empty, the operator namespace',
    schema: optionalNamespaceSchema,
  },
  'leader-election-lease-duration': {
    kind: 'duration',
    default: '15s',
    help: 'How long candidates wait after the last observed renewal before taking over (whole seconds in the Lease, rounded up)',
    schema: duration,
  },
  'leader-election-renew-deadline': {
    kind: 'duration',
    default: '10s',
    help: 'How long the leader keeps trying to renew before it steps down',
    schema: duration,
  },
  'leader-election-retry-period': {
    kind: 'duration',
    default: '2s',
    help: 'Interval between leader election attempts',
    schema: duration,
  },
  'leader-election-release-on-cancel': {
    kind: 'boolean',
    default: true,
    help: 'Clear the Lease on clean shutdown so a successor need not wait for it to expire',
    schema: z.boolean(),
  },
  'health-probe-bind-address': {
    kind: 'string',
    default: ':8081',
    help: 'Address of /healthz and /readyz ("0" disables)',
    schema: bindAddress,
  },
  'metrics-bind-address': {
    kind: 'string',
    default: ':8080',
    help: 'Address of /metrics ("0" disables)',
    schema: bindAddress,
  },
  // controller-runtime's name and default; the installs turn it on (docs/metrics.md).
  'metrics-secure': {
    kind: 'boolean',
    default: false,
    help: 'Serve /metrics over HTTPS, each scrape authenticated by a TokenReview of its bearer token and authorized by a SubjectAccessReview (get on /metrics)',
    schema: z.boolean(),
  },
  'metrics-cert-dir': {
    kind: 'string',
    default: '',
    help: 'With --metrics-secure: directory holding tls.crt and tls.key for /metrics, hot-reloaded; when empty, a self-signed certificate generated in memory',
    schema: z.string(),
  },
  'graceful-shutdown-timeout': {
    kind: 'duration',
    default: '30s',
    help: 'Upper bound of the whole shutdown sequence after SIGTERM/SIGINT',
    schema: duration,
  },
  // 5 s: after readiness drops (and the Pod is marked terminating), the EndpointSlice controller,
  // kube-proxy on every node and the API server's webhook routing need a few seconds to stop sending
  // us requests; 5 s covers that on a healthy cluster while leaving 25 s of the default 30 s grace
  // period (which is also the kubelet's default terminationGracePeriodSeconds) for controllers to
  // finish and the Lease to be released. A preStop sleep in the Deployment should match it.
  'drain-window': {
    kind: 'duration',
    default: '5s',
    help: 'After readiness drops on shutdown, how long the webhooks keep serving while endpoints update',
    schema: z.number().nonnegative('must not be negative'),
  },
  // 6 s: a candidate looks at the Lease every retry period plus up to 1.2x jitter (4.4 s with the 2 s
  // default), so one that is up when the leader releases takes the Lease within that; a rolling update
  // then hands the managed workloads to the new leader without stopping them.
  'hand-over-wait': {
    kind: 'duration',
    default: '6s',
    help: 'A stopping leader releases its Lease and waits this long for another replica to take over its managed workloads before it stops, drains and releases them itself ("0": at once)',
    schema: z.number().nonnegative('must not be negative'),
  },
  'log-level': {
    kind: 'string',
    default: 'info',
    help: `Log level (${LOG_LEVELS.join(', ')})`,
    schema: z.enum(LOG_LEVELS),
  },
} as const satisfies Record<string, FlagDef>;

type RunFlags = typeof RUN_FLAGS;
export type RunFlagName = keyof RunFlags;

type CamelCase<S extends string> = S extends `${infer Head}-${infer Tail}`
  ? `${Head}${Capitalize<CamelCase<Tail>>}`
  : S;

/** The validated `run` configuration: every flag, camel-cased, with its schema's type. */
export type RunConfig = { [K in RunFlagName as CamelCase<K>]: z.output<RunFlags[K]['schema']> };

export function envVarFor(name: string): string {
  const def: FlagDef | undefined = (RUN_FLAGS as Record<string, FlagDef>)[name];
  return def?.env ?? `BERTH_${name.toUpperCase().replace(/-/g, '_')}`;
}

/** The `run` flag table in cli.ts's form: parsing, env fallbacks and `--help`. */
export const RUN_FLAG_SPECS: FlagSpec[] = Object.entries(RUN_FLAGS as Record<string, FlagDef>).map(
  ([name, def]) => ({
    name,
    kind: def.kind,
    default: def.default,
    help: def.help,
    env: envVarFor(name),
  }),
);

const camel = (name: string): string => name.replace(/-([a-z])/g, (_, c: string) => c.toUpperCase());

const shape = Object.fromEntries(Object.entries(RUN_FLAGS).map(([name, def]) => [name, def.schema])) as {
  [K in RunFlagName]: RunFlags[K]['schema'];
};

/** Validates the parsed flag values (cross-field rules included) and camel-cases them. */
export const runConfigSchema = z
  .object(shape)
  .superRefine((f, ctx) => {
    const issue = (path: RunFlagName, message: string): void => {
      ctx.addIssue({ code: 'custom', path: [path], message });
    };
    if (f['leader-election-lease-duration'] <= f['leader-election-renew-deadline']) {
      issue('leader-election-lease-duration', 'must be greater than --leader-election-renew-deadline');
    }
    if (f['leader-election-renew-deadline'] <= JITTER_FACTOR * f['leader-election-retry-period']) {
      issue(
        'leader-election-renew-deadline',
        `must be greater than ${JITTER_FACTOR} x --leader-election-retry-period (client-go's jitter)`,
      );
    }
    if (f['metrics-cert-dir'] !== '' && !f['metrics-secure']) {
      issue('metrics-cert-dir', 'needs --metrics-secure (plain-HTTP metrics use no certificate)');
    }
    if (f['metrics-secure'] && sameFixedListener(f['metrics-bind-address'], f['health-probe-bind-address'])) {
      issue(
        'metrics-bind-address',
        'must differ from --health-probe-bind-address with --metrics-secure: the probes stay plain HTTP',
      );
    }
    if (f['drain-window'] >= f['graceful-shutdown-timeout']) {
      issue('drain-window', 'must be shorter than --graceful-shutdown-timeout');
    }
    if (f['drain-window'] + f['hand-over-wait'] >= f['graceful-shutdown-timeout']) {
      issue(
        'hand-over-wait',
        'together with --drain-window must be shorter than --graceful-shutdown-timeout',
      );
    }
    if (
      f['hand-over-wait'] > 0 &&
      f['leader-elect'] &&
      f['hand-over-wait'] < f['leader-election-retry-period']
    ) {
      issue(
        'hand-over-wait',
        'must be 0 or at least --leader-election-retry-period (candidates look that often)',
      );
    }
  })
  .transform((f) => Object.fromEntries(Object.entries(f).map(([k, v]) => [camel(k), v])) as RunConfig);

/** Parsed flag values -> RunConfig, or a one-line UsageError naming the flag. */
export function parseRunConfig(values: FlagValues): RunConfig {
  const result = runConfigSchema.safeParse(values);
  if (result.success) return result.data;
  const first = result.error.issues[0];
  const flag = first?.path[0];
  const where = typeof flag === 'string' ? `--${flag}` : 'run';
  const value = typeof flag === 'string' ? values[flag] : undefined;
  const def: FlagDef | undefined =
    typeof flag === 'string' ? (RUN_FLAGS as Record<string, FlagDef>)[flag] : undefined;
  const text = def?.kind === 'duration' && typeof value === 'number' ? formatDuration(value) : String(value);
  const shown = value === undefined ? '' : ` "${text}"`;
  throw new UsageError(`invalid value${shown} for ${where}: ${first?.message ?? 'invalid'}`);
}

export const SERVICE_ACCOUNT_NAMESPACE_FILE = '/var/run/secrets/kubernetes.io/serviceaccount/namespace';

/**
 * The namespace the operator runs in: `--namespace`/POD_NAMESPACE, else the service account's
 * namespace file. Never a hard-coded default.
 */
export async function resolveOperatorNamespace(
  configured: string,
  read: (path: string) => Promise<string> = (path) => readFile(path, 'utf8'),
): Promise<string> {
  if (configured !== '') return configured;
  let fromFile = '';
  try {
    fromFile = (await read(SERVICE_ACCOUNT_NAMESPACE_FILE)).trim();
  } catch {
    // not running in a cluster
  }
  if (fromFile !== '' && isDnsLabel(fromFile)) return fromFile;
  throw new UsageError(
    `cannot determine the operator namespace: pass --namespace or set POD_NAMESPACE (${SERVICE_ACCOUNT_NAMESPACE_FILE} is ${fromFile === '' ? 'not available' : 'invalid'})`,
  );
}
