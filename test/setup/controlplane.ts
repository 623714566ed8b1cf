// Vitest global setup of the integration and e2e projects: builds the control-plane binaries on first use
// (progress on stderr), starts the run's shared control plane and hands it to every test file through
// `inject('cluster')` (test/helpers/cluster.ts). Files that need a cluster of their own start one from the
// same binaries.
import type { TestProject } from 'vitest/node';
import { ensureBinaries } from '../../hack/controlplane/build.ts';
import { startControlPlane } from '../../hack/controlplane/controlplane.ts';
import { handleOf } from '../helpers/cluster.ts';

const log = (line: string): void => {
  process.stderr.write(`${line}\n`);
};

export default async function setup(project: TestProject): Promise<() => Promise<void>> {
  const binaries = await ensureBinaries({ log });
  const cp = await startControlPlane({ binaries, nodes: 3, log });
  project.provide('cluster', handleOf(cp));
  return async () => {
    const failure = cp.failure();
    await cp.stop();
    if (failure) throw new Error(`the shared control plane failed during the run: ${failure}`);
  };
}
