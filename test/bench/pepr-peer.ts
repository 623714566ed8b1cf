// The admission benchmark's Pepr peer: what pepr-server.ts and admission.ts share, and Pepr's on-demand
// install. Pepr (with its ~300 dependencies) is not a devDependency: it is installed once into a cache
// directory outside the project, and the peer is skipped, visibly, when that fails (no registry access).
import { spawnSync } from 'node:child_process';
import { existsSync, mkdirSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

/** The Pepr version docs/performance.md reports on. */
export const PEPR_VERSION = '1.1.4';
/** The path secret Pepr's routes sit under (pepr generates 32 random bytes in hex). */
export const PEPR_API_PATH = '7f3c0a9e5b1d4c8f2e6a0b4d8c2f6e0a4b8d2c6f0e4a8b2d6c0f4e8a2b6d0c4f';
export const PEPR_GATE = 'berth.skaphos.io/lease-held';
export const PEPR_LABEL = 'berth.skaphos.io/bench';

/**
 * Where pepr is installed (installing it when missing), or why it could not be. BERTH_BENCH_PEPR_DIR
 * overrides the cache directory.
 */
export function installPepr(log: (msg: string) => void): { dir: string } | { skipped: string } {
  const dir = process.env.BERTH_BENCH_PEPR_DIR ?? join(tmpdir(), `berth-bench-pepr-${PEPR_VERSION}`);
  if (existsSync(join(dir, 'node_modules/pepr/package.json'))) return { dir };
  log(`admission: installing pepr@${PEPR_VERSION} into ${dir} (once)`);
  mkdirSync(dir, { recursive: true });
  const r = spawnSync(
    'npm',
    ['install', `pepr@${PEPR_VERSION}`, '--prefix', dir, '--no-audit', '--no-fund', '--ignore-scripts'],
    { encoding: 'utf8', timeout: 180_000 },
  );
  if (r.status !== 0 || !existsSync(join(dir, 'node_modules/pepr/package.json'))) {
    const why = (r.stderr || r.error?.message || `exit ${r.status}`).trim().split('\n').slice(-1)[0];
    return { skipped: `npm install pepr@${PEPR_VERSION} failed: ${why}` };
  }
  return { dir };
}
