import { describe, expect, it } from 'vitest';
import { type CommandSpec, helpText, parseFlags, UsageError } from '../../src/cli.ts';
import {
  envVarFor,
  parseRunConfig,
  RUN_FLAG_SPECS,
  RUN_FLAGS,
  type RunConfig,
  resolveOperatorNamespace,
  SERVICE_ACCOUNT_NAMESPACE_FILE,
} from '../../src/config.ts';

const spec: CommandSpec = { name: 'run', summary: 'test', flags: RUN_FLAG_SPECS };
const load = (argv: string[], env: NodeJS.ProcessEnv = {}): RunConfig =>
  parseRunConfig(parseFlags(spec, argv, env));

function usageError(fn: () => unknown): UsageError {
  try {
    fn();
  } catch (err) {
    if (err instanceof UsageError) return err;
    throw err;
  }
  throw new Error('expected a UsageError');
}

describe('run configuration', () => {
  it('has the Go operator and controller-runtime defaults', () => {
    expect(load([])).toEqual({
      kubeconfig: '',
      namespace: '',
      leaderElect: false,
      leaderElectionId: 'berth-operator-leader',
      leaderElectionNamespace: '',
      leaderElectionLeaseDuration: 15_000,
      leaderElectionRenewDeadline: 10_000,
      leaderElectionRetryPeriod: 2_000,
      leaderElectionReleaseOnCancel: true,
      healthProbeBindAddress: ':8081',
      metricsBindAddress: ':8080',
      metricsSecure: false,
      metricsCertDir: '',
      gracefulShutdownTimeout: 30_000,
      drainWindow: 5_000,
      handOverWait: 6_000,
      logLevel: 'info',
    } satisfies RunConfig);
  });

  it('reads every flag from its environment variable, flags winning over env', () => {
    const env = {
      KUBECONFIG: '/tmp/kc',
      POD_NAMESPACE: 'berth-system',
      BERTH_LEADER_ELECT: 'true',
      BERTH_LEADER_ELECTION_LEASE_DURATION: '1m',
      BERTH_LEADER_ELECTION_RELEASE_ON_CANCEL: 'false',
      BERTH_METRICS_BIND_ADDRESS: '0',
      BERTH_LOG_LEVEL: 'debug',
    };
    const config = load(['--log-level', 'warn', '--leader-election-renew-deadline=20s'], env);
    expect(config).toMatchObject({
      kubeconfig: '/tmp/kc',
      namespace: 'berth-system',
      leaderElect: true,
      leaderElectionLeaseDuration: 60_000,
      leaderElectionRenewDeadline: 20_000,
      leaderElectionReleaseOnCancel: false,
      metricsBindAddress: '0',
      logLevel: 'warn',
    });
  });

  it('gives every flag a distinct env var and a default that passes its own schema', () => {
    const envs = RUN_FLAG_SPECS.map((f) => f.env);
    expect(new Set(envs).size).toBe(envs.length);
    expect(envVarFor('leader-election-id')).toBe('BERTH_LEADER_ELECTION_ID');
    expect(envVarFor('namespace')).toBe('POD_NAMESPACE');
    expect(Object.keys(RUN_FLAGS)).toEqual(RUN_FLAG_SPECS.map((f) => f.name));
    expect(() => load([])).not.toThrow();
  });

  it('lists every flag with its default and env var in --help', () => {
    const help = helpText('berth-operator', spec);
    for (const f of RUN_FLAG_SPECS) {
      const line = help
        .split('\n')
        .find((l) => l.trimStart().startsWith(`--${f.name} `) || l.trim() === `--${f.name}`);
      expect(line, f.name).toBeDefined();
      expect(line).toContain(`(default: ${f.default === '' ? '(none)' : String(f.default)})`);
      expect(line).toContain(`[env ${f.env}]`);
    }
  });

  it('rejects bad values with one line naming the flag', () => {
    const cases: Array<[string[], RegExp]> = [
      [
        ['--leader-election-id', 'Not_A_Name'],
        /^invalid value "Not_A_Name" for --leader-election-id: must be a DNS subdomain/,
      ],
      [['--namespace', 'UPPER'], /for --namespace: must be a DNS label/],
      [['--health-probe-bind-address', 'localhost'], /for --health-probe-bind-address: want \[host\]:port/],
      [['--log-level', 'loud'], /for --log-level/],
      [
        ['--leader-election-lease-duration', '10s'],
        /^invalid value "10s" for --leader-election-lease-duration: must be greater than --leader-election-renew-deadline$/,
      ],
      [
        ['--leader-election-retry-period', '9s'],
        /for --leader-election-renew-deadline: must be greater than 1.2 x/,
      ],
      [['--drain-window', '30s'], /for --drain-window: must be shorter than --graceful-shutdown-timeout/],
      [['--graceful-shutdown-timeout', '0s'], /for --graceful-shutdown-timeout: must be greater than zero/],
      [
        ['--metrics-cert-dir', '/certs'],
        /^invalid value "\/certs" for --metrics-cert-dir: needs --metrics-secure/,
      ],
      [
        ['--metrics-secure', '--metrics-bind-address', ':8081'],
        /for --metrics-bind-address: must differ from --health-probe-bind-address with --metrics-secure/,
      ],
      [
        [
          '--metrics-secure',
          '--metrics-bind-address',
          '0.0.0.0:9000',
          '--health-probe-bind-address',
          ':9000',
        ],
        /for --metrics-bind-address: must differ/,
      ],
      [
        ['--metrics-secure', '--metrics-bind-address', 'nowhere'],
        /for --metrics-bind-address: want \[host\]:port/,
      ],
    ];
    for (const [argv, pattern] of cases) {
      const err = usageError(() => load(argv));
      expect(err.message, argv.join(' ')).toMatch(pattern);
      expect(err.message).not.toContain('\n');
    }
  });
});

describe('secure metrics flags', () => {
  it('take a certificate directory only with --metrics-secure, and free ports on a shared address', () => {
    expect(load(['--metrics-secure', '--metrics-cert-dir', '/certs'])).toMatchObject({
      metricsSecure: true,
      metricsCertDir: '/certs',
    });
    expect(load([], { BERTH_METRICS_SECURE: 'true' }).metricsSecure).toBe(true);
    // Port 0 twice is two free ports: the secure metrics listener is never the probes' one.
    const free = [
      '--metrics-secure',
      '--metrics-bind-address=127.0.0.1:0',
      '--health-probe-bind-address=127.0.0.1:0',
    ];
    expect(load(free).metricsSecure).toBe(true);
    // Plain-HTTP metrics may share the probes' listener, as before.
    expect(load(['--metrics-bind-address', ':8081']).metricsBindAddress).toBe(':8081');
  });
});

describe('resolveOperatorNamespace', () => {
  const noFile = async (): Promise<string> => {
    throw Object.assign(new Error('ENOENT'), { code: 'ENOENT' });
  };

  it('prefers the flag/env value', async () => {
    expect(await resolveOperatorNamespace('ops', noFile)).toBe('ops');
  });

  it('falls back to the service account namespace file', async () => {
    const reads: string[] = [];
    const ns = await resolveOperatorNamespace('', async (path) => {
      reads.push(path);
      return 'berth-system\n';
    });
    expect(ns).toBe('berth-system');
    expect(reads).toEqual([SERVICE_ACCOUNT_NAMESPACE_FILE]);
  });

  it('fails with a one-line usage error instead of guessing', async () => {
    await expect(resolveOperatorNamespace('', noFile)).rejects.toThrow(UsageError);
    await expect(resolveOperatorNamespace('', noFile)).rejects.toThrow(
      /pass --namespace or set POD_NAMESPACE/,
    );
    await expect(resolveOperatorNamespace('', async () => 'Not Valid')).rejects.toThrow(/is invalid/);
  });
});
