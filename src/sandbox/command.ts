// `berth-operator sandbox`: runs the sandbox API server until SIGINT/SIGTERM.
import type { CommandSpec, FlagValues } from '../cli.ts';
import { startSandbox } from './index.ts';

export const sandboxCommand: CommandSpec = {
  name: 'sandbox',
  summary:
    'Run the in-process Kubernetes API server (for trying the operator and for tests) until interrupted.',
  flags: [
    {
      name: 'listen',
      kind: 'string',
      default: '127.0.0.1:0',
      help: 'Address (host:port) to serve HTTPS on; port 0 picks a free port',
    },
    {
      name: 'kubeconfig',
      kind: 'string',
      default: '.sandbox/kubeconfig',
      help: 'Where to write the admin kubeconfig',
    },
    {
      name: 'rbac',
      kind: 'boolean',
      default: false,
      help: 'Authorize requests with the stored RBAC objects',
    },
    {
      name: 'watch-history',
      kind: 'number',
      default: 10_000,
      help: 'Changes kept for watch replay before 410 Gone',
    },
    {
      name: 'simulate-workloads',
      kind: 'boolean',
      default: false,
      help: 'Run workload controllers, a scheduler and a kubelet, so that workloads get running Pods',
    },
  ],
};

export async function runSandbox(flags: FlagValues, out: NodeJS.WritableStream): Promise<void> {
  const sandbox = await startSandbox({
    listen: String(flags.listen),
    kubeconfigPath: String(flags.kubeconfig),
    rbac: flags.rbac === true,
    historyLimit: Number(flags['watch-history']),
    simulateWorkloads: flags['simulate-workloads'] === true,
  });
  out.write(`sandbox API server: ${sandbox.url}\nkubeconfig: ${sandbox.kubeconfigPath}\n`);
  if (flags['simulate-workloads'] === true) out.write('workload simulation: on (node sandbox-node-1)\n');
  out.write(`try: KUBECONFIG=${sandbox.kubeconfigPath} kubectl get namespaces\n`);
  await new Promise<void>((resolve) => {
    const stop = (): void => {
      process.off('SIGINT', stop);
      process.off('SIGTERM', stop);
      resolve();
    };
    process.on('SIGINT', stop);
    process.on('SIGTERM', stop);
  });
  await sandbox.stop();
}
