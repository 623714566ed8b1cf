// Vitest global setup: builds prometheus and promtool (hack/prometheus) on first use (progress on stderr),
// before any test competes with the build for the cores; the tests then find them cached.
import { ensurePrometheus } from '../../hack/prometheus/build.ts';

export default async function setup(): Promise<void> {
  await ensurePrometheus({ log: (line) => process.stderr.write(`${line}\n`) });
}
