// `npm run controlplane:build`: builds the real Kubernetes control plane the tests and `npm start` run on
// (kube-apiserver, kube-controller-manager, kube-scheduler, etcd, kwok) from the Go modules pinned in
// hack/controlplane/{kubernetes,etcd,kwok}/go.mod into a cache outside the checkout, keyed by those pins.
// A second run finds the cache and returns at once; two runs at the same time share one build (a lock).
// See docs/controlplane.md for the layout, the versions and what a cold and a warm build cost.
import { type ChildProcess, execFileSync, spawn } from 'node:child_process';
import { createHash } from 'node:crypto';
import { existsSync, mkdirSync, readFileSync, renameSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { homedir } from 'node:os';
import { join } from 'node:path';
import { parseArgs } from 'node:util';

const HERE = import.meta.dirname;

/** Bumped when the build itself changes (flags, outputs), so that an older cache is not reused. */
const BUILD_FORMAT = 1;
const MIN_GO = [1, 26] as const;

export const COMPONENTS = [
  'etcd',
  'kube-apiserver',
  'kube-controller-manager',
  'kube-scheduler',
  'kwok',
] as const;
export type Component = (typeof COMPONENTS)[number];

/** Absolute paths of the built binaries and of the KWOK stage configuration. */
export interface ControlPlaneBinaries {
  dir: string;
  versions: Versions;
  bin: Record<Component, string>;
  /** KWOK's own "fast" node and pod stages, copied from the pinned module. */
  kwokStages: string;
}

export interface Versions {
  kubernetes: string;
  etcd: string;
  kwok: string;
}

/** A build that could not be done; `message` is one line saying what to do. */
export class BuildError extends Error {
  override name = 'BuildError';
}

interface GoModule {
  /** Directory under hack/controlplane holding go.mod and go.sum. */
  dir: 'kubernetes' | 'etcd' | 'kwok';
  /** The pinned module whose version names the build. */
  module: string;
  packages: Array<{ pkg: string; binary: string }>;
  ldflags: (version: string) => string[];
}

const kubeVersionFlags = (v: string): string[] => {
  const m = /^v(\d+)\.(\d+)\./.exec(v);
  if (!m) throw new BuildError(`unexpected k8s.io/kubernetes version ${v}`);
  // What Kubernetes' hack/lib/version.sh stamps, so `--version` and /version report the real release.
  const pairs: Array<[string, string]> = [
    ['gitVersion', v],
    ['gitMajor', m[1]!],
    ['gitMinor', m[2]!],
    ['gitTreeState', 'clean'],
    ['buildDate', '1970-01-01T00:00:00Z'],
  ];
  return pairs.flatMap(([k, val]) => [
    `-X 'k8s.io/component-base/version.${k}=${val}'`,
    `-X 'k8s.io/client-go/pkg/version.${k}=${val}'`,
  ]);
};

const MODULES: readonly GoModule[] = [
  {
    dir: 'kubernetes',
    module: 'k8s.io/kubernetes',
    packages: ['kube-apiserver', 'kube-controller-manager', 'kube-scheduler'].map((binary) => ({
      pkg: `k8s.io/kubernetes/cmd/${binary}`,
      binary,
    })),
    ldflags: kubeVersionFlags,
  },
  {
    dir: 'etcd',
    module: 'go.etcd.io/etcd/server/v3',
    packages: [{ pkg: 'go.etcd.io/etcd/server/v3', binary: 'etcd' }],
    // etcd's version is a constant of its api module; only the git SHA comes from its own build script.
    ldflags: () => [],
  },
  {
    dir: 'kwok',
    module: 'sigs.k8s.io/kwok',
    packages: [{ pkg: 'sigs.k8s.io/kwok/cmd/kwok', binary: 'kwok' }],
    ldflags: (v) => [`-X 'sigs.k8s.io/kwok/pkg/consts.Version=${v.replace(/^v/, '')}'`],
  },
];

/** The kwok stages copied into the cache: node initialisation and KWOK's "pod-fast" lifecycle. */
const KWOK_STAGES = [
  'kustomize/stage/node/fast/node-initialize.yaml',
  'kustomize/stage/node/heartbeat-with-lease/node-heartbeat-with-lease.yaml',
  'kustomize/stage/pod/fast/pod-ready.yaml',
  'kustomize/stage/pod/fast/pod-complete.yaml',
  'kustomize/stage/pod/fast/pod-delete.yaml',
];

function pinnedVersion(mod: GoModule): string {
  const gomod = readFileSync(join(HERE, mod.dir, 'go.mod'), 'utf8');
  const escaped = mod.module.replace(/[.*+?^${}()|[\]\\/]/g, '\\$&');
  const m = new RegExp(`^\\s*(?:require\\s+)?${escaped}\\s+(v\\S+)`, 'm').exec(gomod);
  if (!m) throw new BuildError(`hack/controlplane/${mod.dir}/go.mod does not require ${mod.module}`);
  return m[1]!;
}

export function pinnedVersions(): Versions {
  const [kubernetes, etcd, kwok] = MODULES.map(pinnedVersion) as [string, string, string];
  return { kubernetes, etcd, kwok };
}

/** The cache root: $BERTH_CONTROLPLANE_CACHE, else $XDG_CACHE_HOME/berth-operator/controlplane. */
export function cacheRoot(env: NodeJS.ProcessEnv = process.env): string {
  if (env.BERTH_CONTROLPLANE_CACHE) return env.BERTH_CONTROLPLANE_CACHE;
  return join(env.XDG_CACHE_HOME || join(homedir(), '.cache'), 'berth-operator', 'controlplane');
}

/** The cache entry of these pins: readable versions and a digest of every go.mod and go.sum. */
export function cacheKey(versions: Versions = pinnedVersions()): string {
  const h = createHash('sha256').update(`format ${BUILD_FORMAT}\n`);
  for (const mod of MODULES)
    for (const f of ['go.mod', 'go.sum']) h.update(readFileSync(join(HERE, mod.dir, f)));
  return `k8s-${versions.kubernetes}_etcd-${versions.etcd}_kwok-${versions.kwok}_${h.digest('hex').slice(0, 12)}`;
}

function binariesIn(dir: string, versions: Versions): ControlPlaneBinaries {
  const bin = Object.fromEntries(COMPONENTS.map((c) => [c, join(dir, 'bin', c)])) as Record<
    Component,
    string
  >;
  return { dir, versions, bin, kwokStages: join(dir, 'kwok-stages.yaml') };
}

/** The cached build of the current pins, or undefined when it has not been built. */
export function cachedBinaries(env: NodeJS.ProcessEnv = process.env): ControlPlaneBinaries | undefined {
  const versions = pinnedVersions();
  const dir = join(cacheRoot(env), cacheKey(versions));
  return existsSync(join(dir, 'manifest.json')) ? binariesIn(dir, versions) : undefined;
}

export interface BuildOptions {
  /** Progress lines (default: stderr). */
  log?: (line: string) => void;
  env?: NodeJS.ProcessEnv;
}

/** The binaries of the current pins, building them first when the cache does not have them. */
export async function ensureBinaries(options: BuildOptions = {}): Promise<ControlPlaneBinaries> {
  const env = options.env ?? process.env;
  const log = options.log ?? ((line: string) => process.stderr.write(`${line}\n`));
  const found = cachedBinaries(env);
  if (found) return found;
  const versions = pinnedVersions();
  const root = cacheRoot(env);
  const key = cacheKey(versions);
  const dir = join(root, key);
  mkdirSync(root, { recursive: true });
  const release = await acquireLock(join(root, `${key}.lock`), log);
  try {
    // Another process may have finished the build while this one waited for the lock.
    const built = cachedBinaries(env);
    if (built) return built;
    await build(dir, versions, env, log);
    return binariesIn(dir, versions);
  } finally {
    release();
  }
}

const LOCK_POLL_MS = 500;

function pidAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (err) {
    return (err as NodeJS.ErrnoException).code === 'EPERM';
  }
}

/** A lock directory holding the owner's pid; a lock whose owner has died is taken over. */
export async function acquireLock(path: string, log: (line: string) => void): Promise<() => void> {
  let waiting = false;
  for (;;) {
    try {
      mkdirSync(path);
      writeFileSync(join(path, 'pid'), String(process.pid));
      return () => rmSync(path, { recursive: true, force: true });
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code !== 'EEXIST') throw err;
    }
    let owner = Number.NaN;
    try {
      owner = Number(readFileSync(join(path, 'pid'), 'utf8'));
    } catch {
      // Created but its pid not yet written: give the owner a moment.
    }
    const age = Date.now() - (statSync(path, { throwIfNoEntry: false })?.mtimeMs ?? Date.now());
    if ((Number.isInteger(owner) && !pidAlive(owner)) || (Number.isNaN(owner) && age > 10_000)) {
      log(`controlplane: removing the stale build lock of process ${Number.isNaN(owner) ? '?' : owner}`);
      rmSync(path, { recursive: true, force: true });
      continue;
    }
    if (!waiting) {
      log(`controlplane: waiting for the build running in process ${owner} (lock ${path})`);
      waiting = true;
    }
    await new Promise((r) => setTimeout(r, LOCK_POLL_MS));
  }
}

function goVersion(env: NodeJS.ProcessEnv): string {
  const out = spawnText('go', ['env', 'GOVERSION'], HERE, env);
  if (out === undefined)
    throw new BuildError(
      `the control plane is built from source with Go ≥ ${MIN_GO.join('.')}, and no 'go' is on PATH`,
    );
  const m = /^go(\d+)\.(\d+)/.exec(out.trim());
  if (!m || Number(m[1]) < MIN_GO[0] || (Number(m[1]) === MIN_GO[0] && Number(m[2]) < MIN_GO[1]))
    throw new BuildError(`the control plane needs Go ≥ ${MIN_GO.join('.')}; 'go' is ${out.trim()}`);
  return out.trim();
}

function spawnText(cmd: string, args: string[], cwd: string, env: NodeJS.ProcessEnv): string | undefined {
  try {
    return execFileSync(cmd, args, { cwd, env, encoding: 'utf8', stdio: ['ignore', 'pipe', 'pipe'] });
  } catch {
    return undefined;
  }
}

/**
 * The first module `go` could not fetch, from its output, as "<module>@<version> (<reason>)". Go writes
 * "go: k8s.io/x@v1.2.3: reading https://proxy/...: 404 Not Found", "verifying k8s.io/x@v1.2.3: checksum
 * mismatch" or "...: dial tcp: lookup proxy.golang.org: no such host".
 */
export function refusedModule(output: string): string | undefined {
  for (const line of output.split('\n')) {
    const m = /(\S+@v[^\s:]+):\s(.+)$/.exec(line);
    if (m) return `${m[1]} (${m[2]!.split(': ').pop()!.trim()})`;
  }
  return undefined;
}

interface RunResult {
  code: number;
  output: string;
}

function run(
  cmd: string,
  args: string[],
  cwd: string,
  env: NodeJS.ProcessEnv,
  onLine?: (line: string) => void,
): Promise<RunResult> {
  return new Promise((resolve, reject) => {
    const child: ChildProcess = spawn(cmd, args, { cwd, env, stdio: ['ignore', 'pipe', 'pipe'] });
    let output = '';
    let partial = '';
    const take = (chunk: Buffer): void => {
      const text = chunk.toString('utf8');
      output += text;
      if (output.length > 1_000_000) output = output.slice(-500_000);
      if (!onLine) return;
      partial += text;
      const lines = partial.split('\n');
      partial = lines.pop() ?? '';
      for (const l of lines) onLine(l);
    };
    child.stdout?.on('data', take);
    child.stderr?.on('data', take);
    child.on('error', reject);
    child.on('close', (code, signal) => resolve({ code: code ?? (signal ? 128 : 1), output }));
  });
}

const elapsed = (start: number): string => {
  const s = Math.round((Date.now() - start) / 1000);
  return s < 60 ? `${s}s` : `${Math.floor(s / 60)}m${String(s % 60).padStart(2, '0')}s`;
};

async function buildModule(
  mod: GoModule,
  version: string,
  out: string,
  env: NodeJS.ProcessEnv,
  log: (line: string) => void,
): Promise<void> {
  const cwd = join(HERE, mod.dir);
  const names = mod.packages.map((p) => p.binary).join(', ');
  const start = Date.now();
  log(`controlplane: downloading the modules of ${mod.module} ${version}`);
  const dl = await run('go', ['mod', 'download'], cwd, env);
  if (dl.code !== 0) {
    const refused = refusedModule(dl.output);
    throw new BuildError(
      refused
        ? `the Go module proxy refused ${refused}, needed by ${mod.module} ${version} (hack/controlplane/${mod.dir})`
        : `go mod download failed in hack/controlplane/${mod.dir}: ${lastLine(dl.output)}`,
    );
  }
  log(`controlplane: building ${names} (${mod.module} ${version})`);
  let compiled = 0;
  let lastReport = Date.now();
  const args = [
    'build',
    '-v',
    '-trimpath',
    '-ldflags',
    ['-s', '-w', ...mod.ldflags(version)].join(' '),
    '-o',
    // One package is named by its binary; several go into the directory, named by their paths.
    mod.packages.length === 1 ? join(out, mod.packages[0]!.binary) : `${out}/`,
    ...mod.packages.map((p) => p.pkg),
  ];
  const res = await run('go', args, cwd, { ...env, CGO_ENABLED: '0' }, (line) => {
    // `-v` names each package as it is compiled: a heartbeat for a build that takes minutes.
    if (!/^\S+$/.test(line)) return;
    compiled++;
    if (Date.now() - lastReport >= 15_000) {
      lastReport = Date.now();
      log(`controlplane:   ${names}: ${compiled} packages compiled (${elapsed(start)})`);
    }
  });
  if (res.code !== 0) {
    const refused = refusedModule(res.output);
    throw new BuildError(
      refused
        ? `the Go module proxy refused ${refused}, needed by ${mod.module} ${version} (hack/controlplane/${mod.dir})`
        : `go build of ${names} failed (hack/controlplane/${mod.dir}): ${lastLine(res.output)}`,
    );
  }
  log(`controlplane: built ${names} in ${elapsed(start)}`);
}

const lastLine = (output: string): string =>
  output
    .trim()
    .split('\n')
    .filter((l) => l.trim() !== '')
    .slice(-3)
    .join(' | ');

async function build(
  dir: string,
  versions: Versions,
  env: NodeJS.ProcessEnv,
  log: (line: string) => void,
): Promise<void> {
  const go = goVersion(env);
  const start = Date.now();
  const staging = `${dir}.partial-${process.pid}`;
  rmSync(staging, { recursive: true, force: true });
  mkdirSync(join(staging, 'bin'), { recursive: true });
  log(
    `controlplane: building Kubernetes ${versions.kubernetes}, etcd ${versions.etcd} and KWOK ${versions.kwok} with ${go} into ${dir} (cold: about 10 minutes on 2 cores, once)`,
  );
  // GOFLAGS from the environment (e.g. -mod=vendor) must not change what is built.
  const goEnv = { ...env, GOFLAGS: '-buildvcs=false', GOTOOLCHAIN: env.GOTOOLCHAIN ?? 'local' };
  try {
    for (const mod of MODULES) await buildModule(mod, pinnedVersion(mod), join(staging, 'bin'), goEnv, log);
    const kwok = MODULES.find((m) => m.dir === 'kwok')!;
    const kwokDir = spawnText(
      'go',
      ['list', '-m', '-f', '{{.Dir}}', kwok.module],
      join(HERE, kwok.dir),
      goEnv,
    );
    if (!kwokDir?.trim()) throw new BuildError(`cannot locate ${kwok.module} in the module cache`);
    const stages = KWOK_STAGES.map((f) => readFileSync(join(kwokDir.trim(), f), 'utf8').trim()).join(
      '\n---\n',
    );
    writeFileSync(join(staging, 'kwok-stages.yaml'), `${stages}\n`);
    writeFileSync(
      join(staging, 'manifest.json'),
      `${JSON.stringify({ versions, go, builtAt: new Date().toISOString(), seconds: Math.round((Date.now() - start) / 1000) }, null, 2)}\n`,
    );
    rmSync(dir, { recursive: true, force: true });
    renameSync(staging, dir);
  } catch (err) {
    rmSync(staging, { recursive: true, force: true });
    throw err;
  }
  log(`controlplane: done in ${elapsed(start)}`);
}

if (import.meta.main) {
  try {
    const { values } = parseArgs({ options: { print: { type: 'boolean', default: false } } });
    const bins = await ensureBinaries();
    process.stdout.write(values.print ? `${bins.dir}\n` : `control plane binaries: ${bins.dir}\n`);
  } catch (err) {
    const usage = (err as { code?: string }).code?.startsWith('ERR_PARSE_ARGS');
    process.stderr.write(`controlplane: ${err instanceof Error ? err.message : String(err)}\n`);
    process.exitCode = usage ? 2 : 1;
  }
}
