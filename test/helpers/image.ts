// What the container image (Dockerfile) and the install's Deployment set for the Node.js process, so that
// tests and benchmarks can run the operator the way it runs in a cluster.
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import {
  containerEnvironment,
  operatorContainer,
  parseManifests,
  quantityBytes,
} from '../../scripts/install-manifest.ts';

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

/**
 * NODE_OPTIONS as Node applies them in a container with a memory limit of `limitBytes`:
 * `--max-old-space-size-percentage` is of the cgroup's limit, which a process on this machine does not
 * have, so it becomes the `--max-old-space-size` (MiB) Node computes from the limit.
 */
export function nodeOptionsInContainer(nodeOptions: string, limitBytes: number): string {
  return nodeOptions.replace(
    /--max-old-space-size-percentage=(\d+(?:\.\d+)?)/,
    (_, percentage: string) =>
      `--max-old-space-size=${Math.floor((Math.floor(limitBytes / 2 ** 20) * Number(percentage)) / 100)}`,
  );
}

/**
 * The Node.js environment of the operator as installed: the image's ENV, with the NODE_OPTIONS the install's
 * Deployment sets (as Node applies them within the container's memory limit). Only that: the
 * Deployment's BERTH_* settings are flags, which each test or benchmark chooses itself.
 */
export function shippedEnv(install = join(process.cwd(), 'deploy/install.yaml')): Record<string, string> {
  const objects = parseManifests(readFileSync(install, 'utf8'));
  const deployed = containerEnvironment(objects);
  const env = imageEnv();
  const limit = operatorContainer(objects).resources?.limits?.memory;
  if (deployed.NODE_OPTIONS !== undefined)
    env.NODE_OPTIONS =
      limit === undefined
        ? deployed.NODE_OPTIONS
        : nodeOptionsInContainer(deployed.NODE_OPTIONS, quantityBytes(String(limit)));
  return env;
}
