// What the container image (Dockerfile) sets for the Node.js process, so that tests and benchmarks can run
// the operator the way the image does.
import { readFileSync } from 'node:fs';
import { join } from 'node:path';

/** The final stage's `ENV KEY=value` settings (one per line, value optionally double-quoted). */
export function imageEnv(dockerfile = join(process.cwd(), 'Dockerfile')): Record<string, string> {
  const stages = readFileSync(dockerfile, 'utf8').split(/^FROM\s/m);
  const env: Record<string, string> = {};
  for (const line of (stages.at(-1) ?? '').split('\n')) {
    const m = /^ENV\s+([A-Za-z_][A-Za-z0-9_]*)=(?:"([^"]*)"|(\S*))\s*$/.exec(line);
    if (m?.[1] !== undefined) env[m[1]] = m[2] ?? m[3] ?? '';
  }
  return env;
}
