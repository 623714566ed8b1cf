// Test access to a sandbox: a client-node KubeConfig per user and a real kubectl bound to it.
import { execFile } from 'node:child_process';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { KubeConfig } from '@kubernetes/client-node';
import { type Sandbox, type SandboxOptions, startSandbox } from '../../src/sandbox/index.ts';

export interface TestSandbox {
  sandbox: Sandbox;
  kc: KubeConfig;
  kubeconfigPath: string;
  kubectl(args: string[], opts?: { input?: string; kubeconfig?: string }): Promise<KubectlResult>;
  kubeConfigFor(kubeconfigYaml: string): KubeConfig;
  stop(): Promise<void>;
}

export interface KubectlResult {
  code: number;
  stdout: string;
  stderr: string;
}

export function kubeConfigFrom(yaml: string): KubeConfig {
  const kc = new KubeConfig();
  kc.loadFromString(yaml);
  return kc;
}

export async function kubectlAvailable(): Promise<boolean> {
  return new Promise((resolve) => {
    execFile('kubectl', ['version', '--client'], (err) => resolve(!err));
  });
}

export async function startTestSandbox(options: SandboxOptions = {}): Promise<TestSandbox> {
  const dir = await mkdtemp(join(tmpdir(), 'berth-sandbox-'));
  const kubeconfigPath = join(dir, 'kubeconfig');
  const sandbox = await startSandbox({ ...options, kubeconfigPath });
  const kubectl = (
    args: string[],
    opts: { input?: string; kubeconfig?: string } = {},
  ): Promise<KubectlResult> =>
    new Promise((resolve) => {
      const child = execFile(
        'kubectl',
        args,
        {
          env: { ...process.env, KUBECONFIG: opts.kubeconfig ?? kubeconfigPath, HOME: dir },
          timeout: 30_000,
          maxBuffer: 64 * 1024 * 1024,
        },
        (err, stdout, stderr) => {
          const code = err
            ? typeof (err as { code?: unknown }).code === 'number'
              ? (err as { code: number }).code
              : 1
            : 0;
          resolve({ code, stdout, stderr });
        },
      );
      if (opts.input !== undefined) child.stdin?.end(opts.input);
    });
  return {
    sandbox,
    kc: kubeConfigFrom(sandbox.kubeconfig),
    kubeconfigPath,
    kubectl,
    kubeConfigFor: kubeConfigFrom,
    async stop() {
      await sandbox.stop();
      await rm(dir, { recursive: true, force: true });
    },
  };
}

export async function writeTempKubeconfig(yaml: string): Promise<string> {
  const dir = await mkdtemp(join(tmpdir(), 'berth-kc-'));
  const path = join(dir, 'kubeconfig');
  await writeFile(path, yaml, { mode: 0o600 });
  return path;
}
