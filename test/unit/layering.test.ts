// The dependency direction of docs/architecture.md, enforced: every import between the product's packages
// must be an edge listed here. A new edge is a design decision: add it here and to the architecture page
// together, with its reason.
import { readdirSync, readFileSync } from 'node:fs';
import { dirname, join, normalize, relative } from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';

const ROOT = fileURLToPath(new URL('../../', import.meta.url));
const PRODUCT_DIRS = ['src', 'webhooks', 'certs'];

/**
 * The package a file belongs to: a folder under `src/`, a top-level folder, or (for `src/*.ts`, the
 * composition root and its flag parser) the file itself.
 */
function packageOf(file: string): string {
  const parts = file.split('/');
  if (parts[0] === 'src' && parts.length === 2) return file;
  if (parts[0] === 'src') return `src/${parts[1]}`;
  return parts[0] ?? file;
}

/** Relative module specifiers of one source file: static imports, re-exports and dynamic imports. */
function importsOf(source: string): string[] {
  const found: string[] = [];
  const pattern = /(?:\bfrom\s*|\bimport\s*\(\s*|^\s*import\s+)['"](\.{1,2}\/[^'"]+)['"]/gm;
  for (const match of source.matchAll(pattern)) if (match[1]) found.push(match[1]);
  return found;
}

/** What each package may import besides itself: packages, or single files where only one file is meant. */
const ALLOWED: Record<string, readonly string[]> = {
  // The composition root and its subcommands: everything below them.
  'src/main.ts': [
    'src/cli.ts',
    'src/commands.ts',
    'src/helper',
    'src/oidc-broker',
    'src/kube/client-node-slim.ts',
  ],
  'src/commands.ts': [
    'src/cli.ts',
    'src/run.ts',
    'src/central',
    'src/helper/spec.ts',
    'src/oidc-broker/spec.ts',
  ],
  'src/run.ts': [
    'src/cli.ts',
    'src/config.ts',
    'src/features.ts',
    'src/secure-metrics.ts',
    'src/berth',
    'src/nodetaint',
    'src/injection',
    'webhooks',
    'certs',
    'src/kube',
    'src/observability',
  ],
  'src/features.ts': ['src/cli.ts', 'src/berth', 'src/nodetaint', 'src/injection', 'webhooks', 'certs'],
  'src/config.ts': ['src/cli.ts', 'src/kube', 'src/observability'],
  'src/secure-metrics.ts': ['certs', 'src/kube', 'src/observability'],
  // The flag parser imports nothing.
  'src/cli.ts': [],
  // Domains: plumbing and the flag specs only.
  'src/berth': ['src/cli.ts', 'src/workloads', 'src/kube', 'src/observability'],
  'src/nodetaint': ['src/cli.ts', 'src/kube', 'src/observability'],
  // Helper injection answers reviews through webhooks/' review parsing and admission server, and builds its
  // configurations from WorkloadAdmission's shared constants.
  'src/injection': ['src/cli.ts', 'webhooks', 'src/kube', 'src/observability'],
  // The injected helper: the injection contract, its enforcement timing and restart rule, the central API
  // client, nothing that loads the Kubernetes client (docs/helper.md §1).
  'src/helper': [
    'src/cli.ts',
    'src/injection/contract.ts',
    'src/injection/enforcement.ts',
    'src/injection/restart-pod.ts',
    'src/berth/leaseclient.ts',
    'src/kube/clock.ts',
  ],
  // The token broker: the helper's small logger, the clock and the OIDC URL rule; like the helper, nothing
  // that loads the Kubernetes client, zod, pino or jose (docs/oidc-broker.md).
  'src/oidc-broker': ['src/cli.ts', 'src/helper/log.ts', 'src/kube/clock.ts', 'src/central/endpoint-url.ts'],
  // WorkloadAdmission reads the BerthLease contract (constants, spec validation) and registers its
  // configurations with the serving CA bundle.
  webhooks: ['src/cli.ts', 'src/berth/api.ts', 'src/workloads', 'certs', 'src/kube', 'src/observability'],
  // `FlagDef` is a type of src/config.ts.
  certs: ['src/cli.ts', 'src/config.ts', 'src/kube', 'src/observability'],
  // The central server uses the plumbing only, nothing of the domains.
  'src/central': ['src/cli.ts', 'src/kube', 'src/observability'],
  // The workload object model and the one owner-chain walk, shared by the reconciler and admission.
  'src/workloads': ['src/kube'],
  'src/kube': ['src/observability'],
  // The logger and the health server take the clock from kube (a package cycle, not a module cycle).
  'src/observability': ['src/kube/clock.ts'],
};

function productFiles(): string[] {
  const files: string[] = [];
  const walk = (dir: string): void => {
    for (const entry of readdirSync(join(ROOT, dir), { withFileTypes: true })) {
      const path = `${dir}/${entry.name}`;
      if (entry.isDirectory()) walk(path);
      else if (entry.name.endsWith('.ts')) files.push(path);
    }
  };
  for (const dir of PRODUCT_DIRS) walk(dir);
  return files;
}

function allowed(from: string, target: string): boolean {
  const pkg = packageOf(from);
  const targetPkg = packageOf(target);
  if (pkg === targetPkg) return true;
  return (ALLOWED[pkg] ?? []).some((edge) => edge === targetPkg || edge === target);
}

describe('dependency direction', () => {
  const files = productFiles();
  const edges = files.flatMap((from) =>
    importsOf(readFileSync(join(ROOT, from), 'utf8')).map((spec) => ({
      from,
      to: relative(ROOT, normalize(join(ROOT, dirname(from), spec))).replaceAll('\\', '/'),
    })),
  );

  it('finds the product sources and their imports', () => {
    expect(files.length).toBeGreaterThan(50);
    expect(edges.length).toBeGreaterThan(files.length);
  });

  it('every package is in the table', () => {
    const unknown = [...new Set(files.map(packageOf))].filter((pkg) => !(pkg in ALLOWED));
    expect(unknown, 'packages missing from ALLOWED (and from docs/architecture.md)').toEqual([]);
  });

  it('no product code imports scripts/, hack/ or test/', () => {
    const outside = edges.filter(({ to }) => !PRODUCT_DIRS.some((dir) => to.startsWith(`${dir}/`)));
    expect(outside).toEqual([]);
  });

  it('every import between packages is an allowed edge', () => {
    const forbidden = edges
      .filter(({ to }) => PRODUCT_DIRS.some((dir) => to.startsWith(`${dir}/`)))
      .filter(({ from, to }) => !allowed(from, to))
      .map(({ from, to }) => `${from} -> ${to}`);
    expect(forbidden).toEqual([]);
  });

  it('reads the import forms the sources use', () => {
    const source = [
      "import { a } from './a.ts';",
      "import type { B } from '../b/b.ts';",
      "export { c } from './c.ts';",
      "import './side-effect.ts';",
      "const d = await import('../d.ts');",
      "import { e } from 'node:fs';",
    ].join('\n');
    expect(importsOf(source)).toEqual(['./a.ts', '../b/b.ts', './c.ts', './side-effect.ts', '../d.ts']);
    expect(packageOf('src/run.ts')).toBe('src/run.ts');
    expect(packageOf('src/kube/client.ts')).toBe('src/kube');
    expect(packageOf('webhooks/server.ts')).toBe('webhooks');
  });
});
