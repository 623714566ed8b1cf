// The `sandbox` subcommand as a user runs it: a real process, a kubeconfig on disk, kubectl against it,
// a clean exit on SIGTERM; and the CLI's usage errors.
import { type ChildProcess, spawn } from 'node:child_process';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { eventually } from '../helpers/eventually.ts';
import { kubectlAvailable } from '../helpers/sandbox.ts';

const NODE = join(process.cwd(), 'node_modules/.bin/node');
const MAIN = join(process.cwd(), 'src/main.ts');
const children: ChildProcess[] = [];
const hasKubectl = await kubectlAvailable();

function run(args: string[]): {
  child: ChildProcess;
  out: () => string;
  err: () => string;
  exit: Promise<number | null>;
} {
  const child = spawn(NODE, [MAIN, ...args], { stdio: ['ignore', 'pipe', 'pipe'] });
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
  return { child, out: () => out, err: () => err, exit };
}

afterAll(() => {
  for (const c of children) c.kill('SIGKILL');
});

describe('berth-operator CLI', () => {
  it('rejects an unknown command and an unknown flag with one line and exit code 2', async () => {
    const cmd = run(['frobnicate']);
    expect(await cmd.exit).toBe(2);
    expect(cmd.err().trim().split('\n')).toHaveLength(1);
    expect(cmd.err()).toContain('unknown command "frobnicate"');
    const flag = run(['sandbox', '--no-such-flag']);
    expect(await flag.exit).toBe(2);
    expect(flag.err().trim()).toBe('berth-operator: sandbox: unknown flag --no-such-flag');
    const value = run(['sandbox', '--rbac=maybe']);
    expect(await value.exit).toBe(2);
    expect(value.err().trim()).toBe(
      'berth-operator: invalid value "maybe" for --rbac: expected true or false',
    );
  });

  it('lists every flag with its default in --help', async () => {
    const help = run(['sandbox', '--help']);
    expect(await help.exit).toBe(0);
    for (const flag of ['--listen <string>', '--kubeconfig <string>', '--rbac', '--watch-history <number>']) {
      expect(help.out()).toContain(flag);
    }
    expect(help.out()).toContain('(default: 127.0.0.1:0)');
    expect(help.out()).toContain('(default: .sandbox/kubeconfig)');
  });

  it.skipIf(!hasKubectl)('serves kubectl from a kubeconfig file and stops on SIGTERM', async () => {
    const dir = await mkdtemp(join(tmpdir(), 'berth-cli-'));
    const kubeconfig = join(dir, 'kubeconfig');
    try {
      const sandbox = run(['sandbox', '--listen', '127.0.0.1:0', '--kubeconfig', kubeconfig]);
      await eventually(() => sandbox.out().includes(`kubeconfig: ${kubeconfig}`), { timeoutMs: 15_000 });
      expect(sandbox.out()).toMatch(/sandbox API server: https:\/\/127\.0\.0\.1:\d+/);
      const kubectl = spawn('kubectl', ['get', 'namespace', 'default', '-o', 'name'], {
        env: { ...process.env, KUBECONFIG: kubeconfig },
      });
      let got = '';
      kubectl.stdout.on('data', (d: Buffer) => {
        got += d.toString();
      });
      await new Promise((resolve) => kubectl.on('exit', resolve));
      expect(got.trim()).toBe('namespace/default');
      sandbox.child.kill('SIGTERM');
      expect(await sandbox.exit).toBe(0);
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  });
});
