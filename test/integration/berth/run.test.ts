// `berth-operator run --berth-api-server ...` as a real process, as the operator's service account
// against a control plane of its own with the CRD and the least-privilege RBAC: the BerthLease controller
// runs (leader election off, so right after ready), holds a lease, exports its metrics, includes the
// central API in readiness, and on SIGTERM stops without releasing (a restart in the same cluster renews
// in place).
import { type ChildProcess, spawn } from 'node:child_process';
import { join } from 'node:path';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { eventually } from '../../helpers/eventually.ts';
import { type Central, Cluster, LEASE_NS, OPERATOR_NS, spec, startCentral } from './harness.ts';

const NODE = join(process.cwd(), 'node_modules/.bin/node');
const MAIN = join(process.cwd(), 'src/main.ts');

interface Proc {
  child: ChildProcess;
  err: () => string;
  exit: Promise<number | null>;
  logs: () => Array<Record<string, unknown>>;
}

const children: ChildProcess[] = [];

function run(args: string[], env: Record<string, string> = {}): Proc {
  const child = spawn(NODE, [MAIN, ...args], {
    stdio: ['ignore', 'pipe', 'pipe'],
    env: { PATH: process.env.PATH, HOME: process.env.HOME, ...env },
  });
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
  return { child, err: () => err, exit, logs };
}

let cluster: Cluster;
let central: Central;

beforeAll(async () => {
  cluster = await Cluster.start('east');
  central = await startCentral();
});
afterEach(() => {
  for (const c of children.splice(0)) if (c.exitCode === null && c.signalCode === null) c.kill('SIGKILL');
});
afterAll(async () => {
  await central?.stop();
  await cluster?.stop();
});

async function status(health: string): Promise<{ code: number; body: string }> {
  try {
    const res = await fetch(`http://${health}/readyz?verbose`);
    return { code: res.status, body: await res.text() };
  } catch {
    return { code: 0, body: '' };
  }
}

describe('berth-operator run with --berth-api-server', () => {
  it('rejects a bad central URL with one line and exit 2', async () => {
    const proc = run(['run', '--namespace', OPERATOR_NS, '--berth-api-server', 'berth.example.com']);
    expect(await proc.exit, proc.err()).toBe(2);
    expect(proc.err().trim()).toBe(
      'berth-operator: --berth-api-server: must be an absolute URL, e.g. https://berth.example.com',
    );
  });

  it('runs the BerthLease controller: holds a lease, metrics, readiness on the central API, clean stop', async () => {
    const kubeconfig = await cluster.t.writeKubeconfig(cluster.operator.kubeconfig);
    await cluster.createLease('cli', spec({ leaseName: 'cli', ttlSeconds: 6, heartbeatIntervalSeconds: 1 }));
    const secret = 'not-a-real-token-but-never-logged';
    const proc = run(
      [
        'run',
        '--kubeconfig',
        kubeconfig,
        '--namespace',
        OPERATOR_NS,
        '--health-probe-bind-address',
        '127.0.0.1:0',
        '--metrics-bind-address',
        '127.0.0.1:0',
        '--drain-window',
        '0s',
        '--node-taint-guard=false',
        '--berth-api-server',
        central.url,
        '--berth-ca-bundle-file',
        central.caFile,
      ],
      { BERTH_CLUSTER_ID: 'cluster-east', BERTH_API_KEY: secret },
    );
    const listening = await eventually(
      () => {
        const found = proc.logs().find((l) => l.msg === 'probe server listening');
        if (found === undefined) throw new Error(`not listening yet; stderr: ${proc.err()}`);
        return found;
      },
      { timeoutMs: 15_000 },
    );
    const health = String(listening.health);
    const metrics = String(listening.metrics);
    const lease = await eventually(
      async () => {
        const l = await cluster.mustLease('cli');
        return l.status?.leaseState === 'held' ? l : undefined;
      },
      { timeoutMs: 10_000 },
    );
    expect(lease?.status).toMatchObject({ currentHolder: 'cluster-east', fencingToken: 1 });
    expect(lease?.metadata.finalizers).toEqual(['berth.skaphos.io/lease-release']);
    const text = await (await fetch(`http://${metrics}/metrics`)).text();
    expect(text).toContain(`berth_lease_held{namespace="${LEASE_NS}",name="cli"} 1`);
    expect(text).toContain(
      'controller_runtime_reconcile_total{controller="berthlease",result="requeue_after"}',
    );
    expect(text).toContain('berth_lease_acquire_duration_seconds_count{outcome="acquired"}');
    const ready = await eventually(async () => {
      const s = await status(health);
      return s.code === 200 ? s : undefined;
    });
    expect(ready?.body).toContain('berth-api');

    // The central API goes away: the replica is no longer ready (lease-only mode); the lease stays held.
    await central.stop();
    const unready = await eventually(
      async () => {
        const s = await status(health);
        return s.code !== 200 ? s : undefined;
      },
      { timeoutMs: 10_000 },
    );
    expect(unready?.body).toContain('berth-api');

    proc.child.kill('SIGTERM');
    expect(await proc.exit).toBe(0);
    const after = await cluster.mustLease('cli');
    expect(after.status?.leaseState).toBe('held');
    const output = JSON.stringify(proc.logs()) + proc.err();
    expect(output).not.toContain(secret);
    expect(proc.logs().find((l) => l.msg === 'BerthLease controller enabled')).toMatchObject({
      berthApiServer: central.url,
      clusterId: 'cluster-east',
      credentialSource: 'api-key',
    });
  });
});
