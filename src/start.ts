// `npm start`: run the operator against the configured cluster, or, when none is configured (and never
// inside a cluster), start the embedded sandbox so a newcomer sees something working at once.
import { existsSync } from 'node:fs';
import { homedir } from 'node:os';
import { join } from 'node:path';

function clusterConfigured(env: NodeJS.ProcessEnv): boolean {
  if (env.KUBERNETES_SERVICE_HOST) return true;
  const paths = (env.KUBECONFIG ?? '').split(':').filter(Boolean);
  if (paths.length > 0) return paths.some((p) => existsSync(p));
  return existsSync(join(homedir(), '.kube', 'config'));
}

const args = clusterConfigured(process.env)
  ? ['run', ...process.argv.slice(2)]
  : ['sandbox', '--with-operator', '--simulate-workloads', ...process.argv.slice(2)];
process.argv = [process.argv[0]!, process.argv[1]!, ...args];
await import('./main.ts');
