// `npm start` with no cluster configured, as a newcomer runs it: a local control plane with the install
// applied, the central lease server and the operator; real kubectl against it (generators, describe with
// Events, debug, rollout, scale, wait, -w); everything gone within 5 s of Ctrl-C.
import { type ChildProcess, spawn } from 'node:child_process';
import { existsSync } from 'node:fs';
import { mkdtemp, readFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { cacheRoot } from '../../hack/controlplane/build.ts';
import { eventually } from '../helpers/eventually.ts';

const ROOT = resolve(import.meta.dirname, '../..');

let dir: string;
let child: ChildProcess;
let stdout = '';
let stderr = '';
let kubeconfig: string;

interface Kubectl {
  code: number;
  stdout: string;
  stderr: string;
}

function kubectl(args: string[], input?: string): Promise<Kubectl> {
  return new Promise((done) => {
    const p = spawn('kubectl', args, { env: { ...process.env, KUBECONFIG: kubeconfig, HOME: dir } });
    let out = '';
    let err = '';
    p.stdout.on('data', (c: Buffer) => {
      out += c.toString();
    });
    p.stderr.on('data', (c: Buffer) => {
      err += c.toString();
    });
    p.on('close', (code) => done({ code: code ?? 1, stdout: out, stderr: err }));
    p.stdin.end(input ?? '');
  });
}

async function ok(args: string[], input?: string): Promise<string> {
  const res = await kubectl(args, input);
  if (res.code !== 0) throw new Error(`kubectl ${args.join(' ')}: ${res.stderr}`);
  return res.stdout;
}

beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), 'berth-start-'));
  // No KUBECONFIG and a HOME without ~/.kube/config: "no cluster configured". The binaries stay where
  // they are cached.
  const env: NodeJS.ProcessEnv = { ...process.env, HOME: dir, BERTH_CONTROLPLANE_CACHE: cacheRoot() };
  delete env.KUBECONFIG;
  delete env.KUBERNETES_SERVICE_HOST;
  child = spawn(process.execPath, ['scripts/start.ts', `--dir=${join(dir, 'local')}`], { cwd: ROOT, env });
  child.stdout?.on('data', (c: Buffer) => {
    stdout += c.toString();
  });
  child.stderr?.on('data', (c: Buffer) => {
    stderr += c.toString();
  });
  await eventually(
    () => {
      if (child.exitCode !== null) throw new Error(`npm start exited (${child.exitCode}): ${stderr}`);
      return stdout.includes('Ctrl-C stops everything.');
    },
    { timeoutMs: 120_000, intervalMs: 100 },
  );
  kubeconfig = join(dir, 'local', 'kubeconfig');
}, 150_000);

afterAll(async () => {
  if (child && child.exitCode === null) child.kill('SIGKILL');
  await rm(dir, { recursive: true, force: true });
});

describe('npm start without a cluster', () => {
  it('prints the kubeconfig and what to try', () => {
    expect(stdout).toContain(`export KUBECONFIG=${kubeconfig}`);
    expect(stdout).toContain('kubectl apply -f deploy/samples/deployment/');
    expect(stdout).toContain('Namespace default is in the workload admission scope');
  });

  it('serves kubectl generators and the install', async () => {
    await ok(['create', 'namespace', 'try-it']);
    await ok(['label', 'namespace', 'try-it', 'berth.skaphos.io/workload-admission=enabled']);
    await ok(['-n', 'try-it', 'create', 'configmap', 'x', '--from-literal=a=b']);
    expect(await ok(['-n', 'berth-system', 'get', 'serviceaccount', 'berth-operator', '-o', 'name'])).toBe(
      'serviceaccount/berth-operator\n',
    );
  });

  it('admits an ordinary Deployment through the fail-closed webhooks (caBundle filled, Service routed)', async () => {
    await ok([
      '-n',
      'try-it',
      'create',
      'deployment',
      'plain',
      '--image=registry.k8s.io/pause:3.10',
      '--replicas=2',
    ]);
    await ok(['-n', 'try-it', 'wait', '--for=condition=Available', 'deployment/plain', '--timeout=30s']);
  });

  it('runs the managed sample: the lease is held, its Pod ungated and Running, Events in describe', async () => {
    await ok(['apply', '-f', join(ROOT, 'deploy/samples/deployment/')]);
    await eventually(
      async () => (await ok(['get', 'berthlease', 'web', '-o', 'jsonpath={.status.leaseState}'])) === 'held',
      { timeoutMs: 30_000, intervalMs: 200 },
    );
    await ok(['wait', '--for=condition=Available', 'deployment/web', '--timeout=30s']);
    const pods = JSON.parse(await ok(['get', 'pods', '-l', 'app.kubernetes.io/name=web', '-o', 'json'])) as {
      items: Array<{
        metadata: { name: string };
        spec: { schedulingGates?: unknown[] };
        status: { phase: string };
      }>;
    };
    expect(pods.items).toHaveLength(1);
    expect(pods.items[0]?.spec.schedulingGates ?? []).toEqual([]);
    expect(pods.items[0]?.status.phase).toBe('Running');
    // Ungated by the operator: it registered the Pod in the lease's status first.
    const registered = await ok([
      'get',
      'berthlease',
      'web',
      '-o',
      'jsonpath={.status.workload.pods[*].name}',
    ]);
    expect(registered).toBe(pods.items[0]?.metadata.name);
    await eventually(async () => {
      const described = await ok(['describe', 'berthlease', 'web']);
      return described.includes('Acquired') && described.includes('Activated');
    });
  });

  it('rolls out, scales, debugs and watches', async () => {
    await ok(['rollout', 'restart', 'deployment/web']);
    await ok(['rollout', 'status', 'deployment/web', '--timeout=60s']);
    await ok(['scale', 'deployment/web', '--replicas=1']);
    const pod = (await ok(['get', 'pods', '-l', 'app.kubernetes.io/name=web', '-o', 'name']))
      .trim()
      .split('\n')[0]!;
    await ok(['debug', pod, '--image=busybox:1.36', '--profile=general', '--', 'true']);
    expect(await ok(['get', pod, '-o', 'jsonpath={.spec.ephemeralContainers[*].name}'])).toMatch(
      /^debugger-/,
    );
    const watch = spawn('kubectl', ['get', 'berthleases', '-w', '--output-watch-events'], {
      env: { ...process.env, KUBECONFIG: kubeconfig, HOME: dir },
    });
    let seen = '';
    watch.stdout.on('data', (c: Buffer) => {
      seen += c.toString();
    });
    try {
      await eventually(() => /ADDED\s+web\s+held/.test(seen), { timeoutMs: 15_000 });
    } finally {
      watch.kill();
    }
  });

  it('writes the operator log to its file, not to the terminal', async () => {
    const log = await readFile(join(dir, 'local', 'operator.log'), 'utf8');
    expect(log).toContain('"msg":"lifecycle: ready"');
    expect(stdout).not.toContain('"level"');
  });

  it('stops everything within 5 s of Ctrl-C', async () => {
    child.kill('SIGINT');
    await eventually(() => child.exitCode !== null, { timeoutMs: 5_000, intervalMs: 50 });
    expect(child.exitCode).toBe(0);
    expect(existsSync(kubeconfig)).toBe(false);
    const cpDir = /ready at \S+ in [\d.]+s \((\S+)\)/.exec(stderr)?.[1];
    expect(cpDir).toBeDefined();
    expect(existsSync(cpDir!)).toBe(false);
  });
});
