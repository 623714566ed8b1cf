import { execFile } from 'node:child_process';
import { mkdtemp, readFile, rm } from 'node:fs/promises';
import { createRequire } from 'node:module';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { describe, expect, it } from 'vitest';
import { slimIndexSource } from '../../../src/kube/client-node-slim.ts';

const ROOT = process.cwd();
const names = (list: string): string[] =>
  list
    .split(',')
    .map((n) => n.trim())
    .filter((n) => n !== '')
    .sort();

describe('client-node without its generated API', () => {
  it('gives config.js every name it imports from the generated index, and nothing more', async () => {
    const configJs = createRequire(import.meta.url).resolve('@kubernetes/client-node/dist/config.js');
    const source = await readFile(configJs, 'utf8');
    // The hook matches this exact specifier; should an upgrade change it, the saving would silently go.
    const imported = [...source.matchAll(/import\s*\{([^}]*)\}\s*from\s*'\.\/gen\/index\.js'/g)];
    expect(imported).toHaveLength(1);
    const exported = [...slimIndexSource().matchAll(/export \{ (\w+) \}/g)].map((m) => m[1] ?? '');
    expect(exported.sort()).toEqual(names(imported[0]?.[1] ?? ''));
  });

  it('the operator command loads KubeConfig but none of the generated API classes and models', async () => {
    const dir = await mkdtemp(join(tmpdir(), 'berth-slim-'));
    try {
      const out = join(dir, 'resolved.txt');
      await promisify(execFile)(
        join(ROOT, 'node_modules/.bin/node'),
        [
          '--import',
          join(ROOT, 'test/fixtures/helper/record-resolutions.mjs'),
          join(ROOT, 'src/main.ts'),
          'run',
          '--help',
        ],
        { env: { ...process.env, BERTH_RECORD_RESOLUTIONS: out } },
      );
      const resolved = (await readFile(out, 'utf8'))
        .split('\n')
        .filter((u) => u.includes('/@kubernetes/client-node/'));
      expect(resolved.some((u) => u.endsWith('/dist/config.js'))).toBe(true);
      expect(resolved.filter((u) => /\/dist\/gen\/(index\.js|apis\/|models\/|types\/)/.test(u))).toEqual([]);
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  });
});
