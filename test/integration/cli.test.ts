// The `run` subcommand as a real process: usage errors, --help, and a full life against the shared
// cluster (a namespace of its own) — leader, ready, SIGTERM -> readiness drops -> Lease released -> exit 0;
// and exit 1 on lost leadership (renewals failed by the fault proxy).
import { type ChildProcess, spawn } from 'node:child_process';
import { join } from 'node:path';
import { CoordinationV1Api, RbacAuthorizationV1Api, type V1Lease } from '@kubernetes/client-node';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { RUN_FLAG_SPECS } from '../../src/config.ts';
import { ApiProxy } from '../helpers/api-proxy.ts';
import { TestCluster, uniqueName } from '../helpers/cluster.ts';
import { eventually } from '../helpers/eventually.ts';

const NODE = join(process.cwd(), 'node_modules/.bin/node');
const MAIN = join(process.cwd(), 'src/main.ts');

interface Proc {
  child: ChildProcess;
  out: () => string;
  err: () => string;
  exit: Promise<number | null>;
  /** Parsed JSON log lines so far. */
  logs: () => Array<Record<string, unknown>>;
}

const children: ChildProcess[] = [];
afterEach(() => {
  for (const c of children.splice(0)) if (c.exitCode === null && c.signalCode === null) c.kill('SIGKILL');
});

// A clean environment: no namespace or kubeconfig leaking in from the developer's shell.
function baseEnv(extra: Record<string, string> = {}): NodeJS.ProcessEnv {
  const env: NodeJS.ProcessEnv = { PATH: process.env.PATH, HOME: process.env.HOME, ...extra };
  return env;
}

function run(args: string[], env: NodeJS.ProcessEnv = baseEnv()): Proc {
  const child = spawn(NODE, [MAIN, ...args], { stdio: ['ignore', 'pipe', 'pipe'], env });
  children.push(child);
  let out = '';
  let err = '';
  child.stdout?.on('data', (d: Buffer) => {
    out += d.toString();
  });
  child.stderr?.on('data', (d: Buffer) => {
    err += d.toString();
  });
  const exit = new Promise<number | null>((resolve) => child.on('exit', (code) => resolve(code)));
  const logs = (): Array<Record<string, unknown>> =>
    out
      .split('\n')
      .filter((l) => l.startsWith('{'))
      .map((l) => JSON.parse(l) as Record<string, unknown>);
  return { child, out: () => out, err: () => err, exit, logs };
}

describe('berth-operator run: usage', () => {
  it('rejects an unknown command, an unknown flag and a bad value with one line and exit 2', async () => {
    const cmd = run(['frobnicate']);
    expect(await cmd.exit).toBe(2);
    expect(cmd.err().trim().split('\n')).toHaveLength(1);
    const flag = run(['run', '--no-such-flag']);
    expect(await flag.exit).toBe(2);
    expect(flag.err().trim()).toBe('berth-operator: run: unknown flag --no-such-flag');
    const bad = run(['run', '--namespace', 'default', '--leader-election-lease-duration', '5s']);
    expect(await bad.exit).toBe(2);
    expect(bad.err().trim()).toBe(
      'berth-operator: invalid value "5s" for --leader-election-lease-duration: must be greater than --leader-election-renew-deadline',
    );
    const env = run(['run'], baseEnv({ POD_NAMESPACE: 'default', BERTH_LEADER_ELECT: 'perhaps' }));
    expect(await env.exit).toBe(2);
    expect(env.err().trim()).toBe(
      'berth-operator: invalid value "perhaps" for BERTH_LEADER_ELECT: expected true or false',
    );
  });

  it('refuses a NoExecute startup taint with the reason', async () => {
    const proc = run(['run', '--namespace', 'default', '--taint-effect', 'NoExecute']);
    expect(await proc.exit).toBe(2);
    expect(proc.err().trim().split('\n')).toHaveLength(1);
    expect(proc.err()).toContain('--taint-effect: ');
    expect(proc.err()).toContain('NoExecute');
  });

  it('refuses to guess the namespace', async () => {
    const proc = run(['run', '--kubeconfig', '/nonexistent']);
    expect(await proc.exit).toBe(2);
    expect(proc.err().trim().split('\n')).toHaveLength(1);
    expect(proc.err()).toContain(
      'cannot determine the operator namespace: pass --namespace or set POD_NAMESPACE',
    );
  });

  it('lists every flag with its default and env var in --help', async () => {
    const help = run(['run', '--help']);
    expect(await help.exit).toBe(0);
    const lines = help.out().split('\n');
    for (const f of RUN_FLAG_SPECS) {
      const line = lines.find((l) => l.trimStart().startsWith(`--${f.name}`));
      expect(line, f.name).toBeDefined();
      expect(line).toContain(`(default: ${f.default === '' ? '(none)' : String(f.default)}) [env ${f.env}]`);
    }
    expect(help.out()).toContain('--leader-elect ');
    expect(help.out()).toContain('(default: berth-operator-leader)');
    const top = run(['--help']);
    expect(await top.exit).toBe(0);
    expect(top.out()).toMatch(/^\s+run\s+Run the operator/m);
  });
});

describe('berth-operator run: a real process against a cluster', () => {
  let t: TestCluster;
  let namespace: string;
  beforeAll(async () => {
    t = await TestCluster.shared();
    namespace = await t.namespace('cli');
  });
  afterAll(async () => {
    await t?.stop();
  });

  const readLease = (name: string): Promise<V1Lease> =>
    t.kc.makeApiClient(CoordinationV1Api).readNamespacedLease({ name, namespace });

  async function readyz(health: string): Promise<number> {
    try {
      const res = await fetch(`http://${health}/readyz`);
      await res.text();
      return res.status;
    } catch {
      return 0; // closed
    }
  }

  function start(kubeconfig: string, lease: string, env: Record<string, string> = {}): Proc {
    return run(
      [
        'run',
        '--kubeconfig',
        kubeconfig,
        '--namespace',
        namespace,
        '--leader-elect',
        '--health-probe-bind-address',
        '127.0.0.1:0',
        '--drain-window',
        '500ms',
      ],
      // The rest from the environment, as `npm start` and the Deployment pass them.
      baseEnv({
        BERTH_METRICS_BIND_ADDRESS: '127.0.0.1:0',
        BERTH_LEADER_ELECTION_ID: lease,
        BERTH_LEADER_ELECTION_LEASE_DURATION: '2s',
        BERTH_LEADER_ELECTION_RENEW_DEADLINE: '1s',
        BERTH_LEADER_ELECTION_RETRY_PERIOD: '250ms',
        ...env,
      }),
    );
  }

  async function listening(proc: Proc): Promise<{ health: string; metrics: string }> {
    const line = await eventually(
      () => {
        const found = proc.logs().find((l) => l.msg === 'probe server listening');
        if (found === undefined) throw new Error(`not listening yet; stderr: ${proc.err()}`);
        return found;
      },
      { timeoutMs: 15_000 },
    );
    return { health: String(line.health), metrics: String(line.metrics) };
  }

  it('becomes leader, is ready, and on SIGTERM drops readiness, releases the Lease and exits 0', async () => {
    const proc = start(t.kubeconfigPath, 'cli-operator');
    const { health, metrics } = await listening(proc);
    expect(health).toMatch(/^127\.0\.0\.1:\d+$/);
    const lease = await eventually(
      async () => (await readLease('cli-operator')).spec?.holderIdentity || undefined,
      {
        timeoutMs: 10_000,
      },
    );
    expect(lease).toMatch(/_[0-9a-f-]{36}$/); // hostname_uuid
    expect(await readyz(health)).toBe(200);
    const metricsText = await (await fetch(`http://${metrics}/metrics`)).text();
    expect(metricsText).toContain('leader_election_master_status{name="cli-operator"} 1');
    expect(metricsText).toContain('process_cpu_seconds_total');

    const sentAt = Date.now();
    proc.child.kill('SIGTERM');
    // Readiness fails first, while the process is still draining.
    await eventually(async () => (await readyz(health)) === 500, { timeoutMs: 400, intervalMs: 5 });
    expect((await readLease('cli-operator')).spec?.holderIdentity).toBe(lease);
    const code = await proc.exit;
    const elapsed = Date.now() - sentAt;
    expect(code).toBe(0);
    expect(elapsed).toBeGreaterThanOrEqual(500); // the drain window
    expect(elapsed).toBeLessThan(30_000); // the graceful period
    expect((await readLease('cli-operator')).spec).toMatchObject({
      holderIdentity: '',
      leaseDurationSeconds: 1,
    });
    expect(proc.err()).toBe('');
    const messages = proc.logs().map((l) => l.msg);
    expect(messages).toContain('released leader election lease');
    expect(messages.at(-1)).toBe('berth-operator stopped');
    // Nothing secret in the logs: the admin token never appears.
    expect(proc.out()).not.toContain(t.adminToken);
  });

  it('exits 1 at once when it loses leadership', async () => {
    // A user allowed leader election in the namespace and nothing else; its requests go through the proxy.
    const user = await t.user(uniqueName('cli-operator'));
    await t.kc.makeApiClient(RbacAuthorizationV1Api).createNamespacedRole({
      namespace,
      body: {
        metadata: { name: 'leader-election' },
        // As the install's leader-election Role grants it (scripts/deploy-rbac.ts).
        rules: [
          { apiGroups: ['coordination.k8s.io'], resources: ['leases'], verbs: ['create'] },
          {
            apiGroups: ['coordination.k8s.io'],
            resources: ['leases'],
            resourceNames: ['cli-lost'],
            verbs: ['get', 'list', 'update', 'watch'],
          },
        ],
      },
    });
    await t.kc.makeApiClient(RbacAuthorizationV1Api).createNamespacedRoleBinding({
      namespace,
      body: {
        metadata: { name: 'leader-election' },
        roleRef: { apiGroup: 'rbac.authorization.k8s.io', kind: 'Role', name: 'leader-election' },
        subjects: [{ apiGroup: 'rbac.authorization.k8s.io', kind: 'User', name: user.username }],
      },
    });
    const proxy = await ApiProxy.start(t);
    const kubeconfig = await t.writeKubeconfig(proxy.kubeconfigFor(user.kubeconfig));
    // The node taint guard (on by default) would need node and Pod access this user does not hold.
    const proc = start(kubeconfig, 'cli-lost', { BERTH_NODE_TAINT_GUARD: 'false' });
    const { health } = await listening(proc);
    await eventually(async () => (await readLease('cli-lost')).spec?.holderIdentity || undefined, {
      timeoutMs: 10_000,
    });
    const fault = proxy.inject({ user: user.username, resource: 'leases', status: 500 });
    try {
      const cutAt = Date.now();
      expect(await proc.exit).toBe(1);
      expect(Date.now() - cutAt).toBeLessThan(3_000); // renew deadline 1 s, no drain, no release
      expect(await readyz(health)).toBe(0);
      expect(proc.logs().some((l) => l.msg === 'leader election lost')).toBe(true);
      expect(proxy.forbidden()).toEqual([]);
    } finally {
      fault.remove();
      await proxy.stop();
    }
  });
});
