// Vitest global setup of the e2e project: without E2E_KUBECONFIG each file starts control planes of its
// own, so the binaries are built here on first use (progress on stderr; about 10 minutes on 2 cores),
// outside any hook timeout. Against external clusters nothing is needed.
import { ensureBinaries } from '../../hack/controlplane/build.ts';
import { external } from './env.ts';

export default async function setup(): Promise<void> {
  if (!external) await ensureBinaries();
}
