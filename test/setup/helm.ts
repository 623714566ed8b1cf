// Vitest global setup of the integration project: builds Helm for the chart's tests on first use (progress
// on stderr), before any test competes with the build for the cores; the tests then find it cached.
import { ensureHelm } from '../../hack/helm/build.ts';

export default async function setup(): Promise<void> {
  await ensureHelm({ log: (line) => process.stderr.write(`${line}\n`) });
}
