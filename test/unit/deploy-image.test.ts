// The Dockerfile, checked statically (no Docker engine here): multi-stage on the Node.js version the project
// pins, base images pinned, production dependencies only in the image, a non-root user, the entrypoint,
// every copied path present and not excluded by .dockerignore, and everything `src/main.ts` loads —
// relative imports, files it reads next to its sources, packages — compiled into the image. That the
// compiled tree runs is test/integration/deploy/build.test.ts's.
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
/** The stage that runs scripts/build.ts. */
const build = stages.find((s) =>
  s.instructions.some((i) => i.op === 'RUN' && i.args.includes('scripts/build.ts')),
)!;
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

/** A stage's COPY instructions from the build context: [source, destination relative to WORKDIR]. */
function contextCopies(stage: Stage): [string, string][] {
  return of(stage, 'COPY')
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

  it('installs from the lockfile, and only production dependencies reach the image', () => {
    // Every npm command of every RUN (commands split at && ; |).
    const commands = stages.flatMap((s) =>
      of(s, 'RUN').flatMap((r) => r.args.split(/&&|;|\|/).map((c) => c.trim())),
    );
    const npm = commands.filter((c) => /^npm\s/.test(c));
    expect(npm.length).toBeGreaterThan(0);
    for (const r of npm) {
      expect(r).toMatch(/\bnpm ci\b/);
      expect(r).not.toMatch(/\bnpm (install|i|add)\b/);
    }
    // The final stage takes node_modules from one stage, which installs with --omit=dev, and from the
    // build stage (whose npm ci has the compiler) only the compiled output.
    const fromStages = of(final, 'COPY').filter((c) => c.args.startsWith('--from='));
    const modules = fromStages.filter((c) => c.args.endsWith(' ./node_modules'));
    expect(modules).toHaveLength(1);
    const deps = stages.find((s) => modules[0]!.args.startsWith(`--from=${s.name} `))!;
    expect(of(deps, 'RUN').map((r) => r.args)).toEqual([expect.stringMatching(/^npm ci --omit=dev\b/)]);
    expect(of(deps, 'COPY').map((c) => c.args)).toEqual(['package.json package-lock.json ./']);
    expect(modules[0]!.args).toBe(`--from=${deps.name} /app/node_modules ./node_modules`);
    expect(fromStages.map((c) => c.args).filter((a) => !a.endsWith(' ./node_modules'))).toEqual([
      `--from=${build.name} /app/build ./`,
    ]);
    for (const s of [deps, build, final]) expect(of(s, 'WORKDIR').at(-1)?.args).toBe('/app');
  });

  it('runs node src/main.js run, built by scripts/build.ts, as the non-root uid 65532', () => {
    const user = of(final, 'USER').at(-1)?.args ?? '';
    expect(user).toMatch(/^65532(:65532)?$/);
    // USER comes after every RUN of the final stage, so nothing runs as root after it.
    const order = final.instructions.map((i) => i.op);
    expect(order.lastIndexOf('RUN')).toBeLessThan(order.lastIndexOf('USER'));
    expect(JSON.parse(of(final, 'ENTRYPOINT').at(-1)?.args ?? 'null')).toEqual(['node', 'src/main.js']);
    expect(JSON.parse(of(final, 'CMD').at(-1)?.args ?? 'null')).toEqual(['run']);
    expect(of(build, 'RUN').at(-1)?.args).toBe('node scripts/build.ts --out-dir /app/build');
  });

  it('copies only paths that exist and that .dockerignore lets into the build context', () => {
    const copies = [...contextCopies(build), ...contextCopies(final)];
    expect(copies.length).toBeGreaterThan(0);
    for (const [src] of [...copies, ['package-lock.json', '']]) {
      expect(existsSync(join(ROOT, src!)), `${src} exists`).toBe(true);
      expect(includedInContext(src!), `${src} is in the build context`).toBe(true);
    }
    for (const excluded of ['node_modules', '.git', 'test', 'scripts/deploy.ts', '.berth-local', 'build'])
      expect(includedInContext(excluded), `${excluded} stays out`).toBe(false);
  });

  it('compiles every file that src/main.ts loads, and it needs no dev dependency', () => {
    // The build stage has the sources; tsconfig.build.json compiles its `include`.
    const config = JSON.parse(text('tsconfig.build.json')) as { include: string[] };
    const copied = contextCopies(build).map(([src]) => src);
    for (const dir of config.include) expect(copied, `the build stage copies ${dir}`).toContain(dir);
    const compiled = (file: string): boolean => config.include.some((dir) => file.startsWith(`${dir}/`));
    const pkg = JSON.parse(text('package.json')) as { type?: string; dependencies: Record<string, string> };
    expect(pkg.type).toBe('module');
    const seen = new Set<string>();
    const packages = new Set<string>();
    const visit = (file: string): void => {
      if (seen.has(file)) return;
      seen.add(file);
      expect(compiled(relative(ROOT, file)), `${relative(ROOT, file)} is in the image`).toBe(true);
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
