// The Dockerfile, checked statically (no Docker engine here): multi-stage on the Node.js version the project
// pins, base images pinned, production dependencies only, a non-root user, the entrypoint, every copied
// path present and not excluded by .dockerignore, and everything `node src/main.ts` loads — relative
// imports, files it reads next to its sources, packages — inside the image.
import { existsSync, readFileSync } from 'node:fs';
import { builtinModules } from 'node:module';
import { dirname, join, relative, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';

const ROOT = fileURLToPath(new URL('../../', import.meta.url));
const text = (path: string): string => readFileSync(join(ROOT, path), 'utf8');

interface Instruction {
  op: string;
  args: string;
}
interface Stage {
  from: string;
  name: string | undefined;
  instructions: Instruction[];
}

/** Instructions with continuation lines joined and comments dropped, grouped by stage. */
function parseDockerfile(source: string): Stage[] {
  const lines = source.replace(/\\\n/g, ' ').split('\n');
  const stages: Stage[] = [];
  for (const raw of lines) {
    const line = raw.trim();
    if (line === '' || line.startsWith('#')) continue;
    const [op = '', ...rest] = line.split(/\s+/);
    const args = rest.join(' ');
    if (op.toUpperCase() === 'FROM') {
      const m = /^(\S+)(?:\s+AS\s+(\S+))?$/i.exec(args);
      stages.push({ from: m?.[1] ?? args, name: m?.[2], instructions: [] });
    } else stages.at(-1)?.instructions.push({ op: op.toUpperCase(), args });
  }
  return stages;
}

const stages = parseDockerfile(text('Dockerfile'));
const final = stages.at(-1)!;
const of = (stage: Stage, op: string): Instruction[] => stage.instructions.filter((i) => i.op === op);

/** `.dockerignore` as Docker applies it (last matching pattern wins), for the simple patterns used here. */
function includedInContext(path: string): boolean {
  let included = true;
  for (const raw of text('.dockerignore').split('\n')) {
    const line = raw.trim();
    if (line === '' || line.startsWith('#')) continue;
    const negate = line.startsWith('!');
    const pattern = (negate ? line.slice(1) : line).replace(/\/$/, '');
    if (!/^[\w.*/-]+$/.test(pattern) || (pattern.includes('*') && pattern !== '*'))
      throw new Error(`.dockerignore pattern ${line} is beyond this test's matcher`);
    if (pattern === '*' || path === pattern || path.startsWith(`${pattern}/`)) included = negate;
  }
  return included;
}

/** Final-stage COPY instructions from the build context: [source, destination relative to WORKDIR]. */
function contextCopies(): [string, string][] {
  return of(final, 'COPY')
    .filter((c) => !c.args.startsWith('--from'))
    .flatMap((c) => {
      const parts = c.args.split(/\s+/).filter((p) => !p.startsWith('--'));
      const dest = parts.pop() ?? '';
      return parts.map((src): [string, string] => [src, dest === './' ? src : dest.replace(/^\.\//, '')]);
    });
}

const pinnedNode = (): string => {
  const lock = JSON.parse(text('package-lock.json')) as { packages: Record<string, { version?: string }> };
  const version = lock.packages['node_modules/node']?.version;
  if (version === undefined) throw new Error('package-lock.json pins no node');
  return version;
};

describe('Dockerfile', () => {
  it('is multi-stage on pinned images of the Node.js version the project pins', () => {
    expect(stages.length).toBeGreaterThanOrEqual(2);
    for (const stage of stages) {
      if (stages.some((s) => s.name === stage.from)) continue;
      const [image = '', digest] = stage.from.split('@');
      const tag = image.split(':')[1] ?? '';
      expect(
        digest?.startsWith('sha256:') || /^\d+\.\d+\.\d+(-[a-z0-9.-]+)?$/.test(tag),
        `${stage.from} is pinned`,
      ).toBe(true);
      expect(image.startsWith('node:'), stage.from).toBe(true);
      expect(tag.split('-')[0], `${stage.from} runs the pinned Node.js`).toBe(pinnedNode());
    }
  });

  it('installs production dependencies only, from the lockfile', () => {
    // Every npm command of every RUN (commands split at && ; |).
    const commands = stages.flatMap((s) =>
      of(s, 'RUN').flatMap((r) => r.args.split(/&&|;|\|/).map((c) => c.trim())),
    );
    const npm = commands.filter((c) => /^npm\s/.test(c));
    expect(npm.length).toBeGreaterThan(0);
    for (const r of npm) {
      expect(r).toMatch(/\bnpm ci\b/);
      expect(r).toMatch(/--omit=dev\b/);
      expect(r).not.toMatch(/\bnpm (install|i|add)\b/);
    }
    const deps = stages.find((s) => of(s, 'RUN').some((r) => /\bnpm ci\b/.test(r.args)));
    expect(of(deps!, 'COPY').map((c) => c.args)).toContain('package.json package-lock.json ./');
    const fromDeps = of(final, 'COPY').filter((c) => c.args.startsWith(`--from=${deps?.name}`));
    expect(fromDeps.map((c) => c.args)).toEqual([`--from=${deps?.name} /app/node_modules ./node_modules`]);
    expect(of(deps!, 'WORKDIR').at(-1)?.args).toBe('/app');
    expect(of(final, 'WORKDIR').at(-1)?.args).toBe('/app');
  });

  it('runs node src/main.ts run as the non-root uid 65532', () => {
    const user = of(final, 'USER').at(-1)?.args ?? '';
    expect(user).toMatch(/^65532(:65532)?$/);
    // USER comes after every RUN of the final stage, so nothing runs as root after it.
    const order = final.instructions.map((i) => i.op);
    expect(order.lastIndexOf('RUN')).toBeLessThan(order.lastIndexOf('USER'));
    expect(JSON.parse(of(final, 'ENTRYPOINT').at(-1)?.args ?? 'null')).toEqual(['node', 'src/main.ts']);
    expect(JSON.parse(of(final, 'CMD').at(-1)?.args ?? 'null')).toEqual(['run']);
    expect(existsSync(join(ROOT, 'src/main.ts'))).toBe(true);
  });

  it('copies only paths that exist and that .dockerignore lets into the build context', () => {
    const copies = contextCopies();
    expect(copies.length).toBeGreaterThan(0);
    for (const [src] of [...copies, ['package-lock.json', '']]) {
      expect(existsSync(join(ROOT, src!)), `${src} exists`).toBe(true);
      expect(includedInContext(src!), `${src} is in the build context`).toBe(true);
    }
    for (const excluded of ['node_modules', '.git', 'test', 'scripts', '.sandbox'])
      expect(includedInContext(excluded), `${excluded} stays out`).toBe(false);
  });

  it('holds every file and package that src/main.ts loads, and needs no dev dependency', () => {
    const inImage = (file: string): boolean =>
      contextCopies().some(([src]) => file === src || file.startsWith(`${src}/`));
    const pkg = JSON.parse(text('package.json')) as { type?: string; dependencies: Record<string, string> };
    expect(pkg.type).toBe('module');
    const seen = new Set<string>();
    const packages = new Set<string>();
    const visit = (file: string): void => {
      if (seen.has(file)) return;
      seen.add(file);
      expect(inImage(relative(ROOT, file)), `${relative(ROOT, file)} is copied into the image`).toBe(true);
      if (!file.endsWith('.ts')) return;
      const source = readFileSync(file, 'utf8');
      // Value imports and re-exports (type-only ones are erased), dynamic imports, and URLs of files read.
      const specifiers = [
        ...source.matchAll(/^(?:import|export)\s+(?!type\b)[^;]*?from\s+'([^']+)'/gms),
        ...source.matchAll(/^import\s+'([^']+)'/gm),
        ...source.matchAll(/\bimport\(\s*'([^']+)'\s*\)/g),
        ...source.matchAll(/new URL\(\s*'([^']+)',\s*import\.meta\.url\s*\)/g),
      ].map((m) => m[1] ?? '');
      for (const spec of specifiers) {
        if (spec.startsWith('.')) visit(resolve(dirname(file), spec));
        else if (!spec.startsWith('node:') && !builtinModules.includes(spec))
          packages.add(
            spec.startsWith('@') ? spec.split('/').slice(0, 2).join('/') : (spec.split('/')[0] ?? spec),
          );
      }
    };
    visit(join(ROOT, 'src/main.ts'));
    expect(seen.size).toBeGreaterThan(20);
    expect(
      [...packages].filter((p) => pkg.dependencies[p] === undefined),
      'packages not in dependencies',
    ).toEqual([]);
  });
});
