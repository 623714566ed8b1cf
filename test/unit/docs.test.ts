import { execFileSync } from 'node:child_process';
import { existsSync, readdirSync, readFileSync, statSync } from 'node:fs';
import { dirname, join, relative } from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { renderReadme } from '../../scripts/docs.ts';
import { COMMAND_SPECS } from '../../src/commands.ts';

describe('README flag tables', () => {
  it('document every flag of every command with its default (run `npm run docs` to refresh)', () => {
    const readme = readFileSync(new URL('../../README.md', import.meta.url), 'utf8');
    expect(renderReadme(readme)).toBe(readme);
    for (const spec of COMMAND_SPECS)
      for (const flag of spec.flags) expect(readme).toContain(`\`--${flag.name}\``);
  });
});

const ROOT = fileURLToPath(new URL('../../', import.meta.url));
/** Sources and docs: what a comment or a page can cite in. */
const TEXT_FILE = /\.(ts|mts|mjs|js|md|ya?ml)$/;
const SKIPPED_DIRS = new Set(['node_modules', 'build', 'coverage', '.git', '.berth-local']);

/** The checkout's files (tracked, and new ones not ignored), relative to its root. */
function repoFiles(): string[] {
  let listed: string[];
  try {
    listed = execFileSync('git', ['ls-files', '--cached', '--others', '--exclude-standard', '-z'], {
      cwd: ROOT,
      encoding: 'utf8',
      stdio: ['ignore', 'pipe', 'ignore'],
    }).split('\0');
  } catch {
    // No git (an exported tree): walk it instead.
    listed = [];
    const walk = (dir: string): void => {
      for (const name of readdirSync(dir)) {
        if (SKIPPED_DIRS.has(name)) continue;
        const path = join(dir, name);
        if (statSync(path).isDirectory()) walk(path);
        else listed.push(relative(ROOT, path));
      }
    };
    walk(ROOT);
  }
  return listed
    .filter((f) => TEXT_FILE.test(f) && !f.split('/').some((part) => SKIPPED_DIRS.has(part)))
    .filter((f) => existsSync(join(ROOT, f)))
    .sort();
}

/** `file:line: text` for every line of `files` matching `test`. */
function linesMatching(files: readonly string[], test: (line: string) => boolean): string[] {
  const hits: string[] = [];
  for (const file of files) {
    const lines = readFileSync(join(ROOT, file), 'utf8').split('\n');
    lines.forEach((line, i) => {
      if (test(line)) hits.push(`${file}:${i + 1}: ${line.trim()}`);
    });
  }
  return hits;
}

describe('the repository explains itself', () => {
  const files = repoFiles();

  it('finds the sources and docs to check', () => {
    expect(files).toContain('src/berth/api.ts');
    expect(files).toContain('docs/behaviour.md');
  });

  it('cites no file outside the repository (point to docs/behaviour.md or docs/nodetaint.md instead)', () => {
    // Spelled in pieces so that this file does not cite them itself.
    const outside = [
      ['reference', 'berth-spec'].join('/'),
      ['reference', 'nodetaint-spec'].join('/'),
      ['..', 'shared'].join('/'),
      ['webhook', 'anchors'].join('-'),
    ];
    const offenders = linesMatching(files, (line) => outside.some((s) => line.includes(s)));
    expect(offenders, `files citing ${outside.join(', ')}`).toEqual([]);
  });

  it('names only docs/ pages that exist', () => {
    const missing = linesMatching(files, (line) =>
      [...line.matchAll(/\bdocs\/[\w./-]*?\.md\b/g)].some(([path]) => !existsSync(join(ROOT, path))),
    );
    expect(missing, 'lines naming a page under docs/ that does not exist').toEqual([]);
  });

  it('has relative Markdown links that resolve', () => {
    const broken: string[] = [];
    for (const file of files.filter((f) => f.endsWith('.md'))) {
      const lines = readFileSync(join(ROOT, file), 'utf8').split('\n');
      lines.forEach((line, i) => {
        for (const [, target] of line.matchAll(/\]\(([^)\s]+)\)/g)) {
          if (target === undefined || /^[a-z]+:|^#/.test(target)) continue;
          const path = target.split('#')[0] ?? '';
          if (!existsSync(join(ROOT, dirname(file), path))) broken.push(`${file}:${i + 1}: ${target}`);
        }
      });
    }
    expect(broken, 'Markdown links to files that do not exist').toEqual([]);
  });
});
