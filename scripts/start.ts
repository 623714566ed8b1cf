// `npm start`: run the operator against the configured cluster (KUBECONFIG, ~/.kube/config, or in-cluster),
// or, when none is configured, the whole system on a local real control plane (scripts/local-system.ts),
// building the control-plane binaries on first use.
import { existsSync } from 'node:fs';
import { homedir } from 'node:os';
import { join, resolve } from 'node:path';
import { type CommandSpec, readCommandLine } from '../src/cli.ts';
import { quickstart, startLocalSystem } from './local-system.ts';

function clusterConfigured(env: NodeJS.ProcessEnv): boolean {
  if (env.KUBERNETES_SERVICE_HOST) return true;
  const paths = (env.KUBECONFIG ?? '').split(':').filter(Boolean);
  if (paths.length > 0) return paths.some((p) => existsSync(p));
  return existsSync(join(homedir(), '.kube', 'config'));
}

const LEVELS = ['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent'] as const;

const LOCAL_COMMAND: CommandSpec = {
  name: 'start',
  summary:
    'Runs a local control plane, the install, a central server and the operator (no cluster configured).',
  flags: [
    { name: 'cluster-id', kind: 'string', default: 'local', help: "The operator's --cluster-id" },
    { name: 'nodes', kind: 'number', default: 2, help: 'KWOK nodes of the local control plane' },
    {
      name: 'log-level',
      kind: 'string',
      default: 'info',
      help: `The operator's log level (${LEVELS.join(', ')})`,
    },
    {
      name: 'dir',
      kind: 'string',
      default: '.berth-local',
      help: 'Where the control plane keeps its data and kubeconfig',
    },
  ],
};

async function local(argv: string[]): Promise<number> {
  const values = readCommandLine('npm', LOCAL_COMMAND, argv);
  if (typeof values === 'number') return values;
  const nodes = values.nodes as number;
  if (!Number.isInteger(nodes) || nodes < 1) {
    process.stderr.write(`npm start: --nodes ${nodes}: expected a whole number of at least 1\n`);
    return 2;
  }
  const logLevel = LEVELS.find((l) => l === values['log-level']);
  if (logLevel === undefined) {
    process.stderr.write(
      `npm start: --log-level ${String(values['log-level'])}: expected one of ${LEVELS.join(', ')}\n`,
    );
    return 2;
  }
  const log = (line: string): void => {
    process.stderr.write(`${line}\n`);
  };
  log('No cluster configured (KUBECONFIG, ~/.kube/config): starting a local control plane.');
  const system = await startLocalSystem({
    dir: resolve(values.dir as string),
    clusterId: values['cluster-id'] as string,
    nodes,
    logLevel,
    log,
  });
  const signalled = new Promise<void>((resolveSignal) => {
    const stop = (): void => {
      process.off('SIGINT', stop);
      process.off('SIGTERM', stop);
      // A second Ctrl-C means now: the control plane dies with this process.
      process.once('SIGINT', () => process.exit(130));
      resolveSignal();
    };
    process.on('SIGINT', stop);
    process.on('SIGTERM', stop);
  });
  await Promise.race([system.ready, system.done]);
  process.stdout.write(quickstart(system));
  const code = await Promise.race([system.done, signalled.then(() => undefined)]);
  log('Stopping the operator, the central lease server and the control plane...');
  await system.stop();
  return code ?? 0;
}

if (clusterConfigured(process.env)) {
  process.argv = [process.argv[0]!, process.argv[1]!, 'run', ...process.argv.slice(2)];
  await import('../src/main.ts');
} else {
  local(process.argv.slice(2)).then(
    (code) => process.exit(code),
    (err: unknown) => {
      process.stderr.write(`npm start: ${err instanceof Error ? err.message : String(err)}\n`);
      process.exit(1);
    },
  );
}
