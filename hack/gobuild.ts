// Building Go programs from modules pinned in this repository (a small module per tool, whose `tool`
// directive names what is built, so that its go.sum covers exactly that) into a cache outside the
// checkout, keyed by the pins: the control plane (hack/controlplane/build.ts), Helm (hack/helm/build.ts) and
// Prometheus with promtool (hack/prometheus/build.ts).
// A build is staged and renamed into place when complete, two builds of one key share one (a lock), and a
// refused module is reported by name. See docs/controlplane.md.
import { type ChildProcess, execFileSync, spawn } from 'node:child_process';
import { createHash } from 'node:crypto';
import { existsSync, mkdirSync, readFileSync, renameSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { homedir } from 'node:os';
import { join } from 'node:path';
import { readCommandLine } from '../src/cli.ts';

const MIN_GO = [1, 26] as const;

/** A build that could not be done; `message` is one line saying what to do. */
export class BuildError extends Error {
  override name = 'BuildError';
}

export interface GoModule {
  /** Absolute directory holding go.mod and go.sum. */
  dir: string;
  /** How the directory is named in messages (e.g. hack/controlplane/etcd). */
  label: string;
  /** The pinned module whose version names the build. */
  module: string;
  packages: Array<{ pkg: string; binary: string }>;
  /** The version stamps the project's own build sets. */
  ldflags: (version: string) => string[];
  /** Build tags (`go build -tags`), when the project's own build sets some. */
  tags?: readonly string[];
}

/** Progress lines, already prefixed with what is being built. */
export type Log = (line: string) => void;

/** What every `ensure…()` of hack/ takes. */
export interface BuildOptions {
  /** Progress lines (default: stderr). */
  log?: (line: string) => void;
  env?: NodeJS.ProcessEnv;
}

/** The options' log (stderr by default), each line prefixed with `label: `. */
export function labelledLog(options: BuildOptions, label: string): Log {
  const out = options.log ?? ((line: string) => process.stderr.write(`${line}\n`));
  return (line) => out(`${label}: ${line}`);
}

/** The version of `mod.module` that its go.mod requires. */
export function pinnedVersion(mod: GoModule): string {
  const gomod = readFileSync(join(mod.dir, 'go.mod'), 'utf8');
  const escaped = mod.module.replace(/[.*+?^${}()|[\]\\/]/g, '\\$&');
  const m = new RegExp(`^\\s*(?:require\\s+)?${escaped}\\s+(v\\S+)`, 'm').exec(gomod);
  if (!m) throw new BuildError(`${mod.label}/go.mod does not require ${mod.module}`);
  return m[1]!;
}

/** The first 12 hex digits of a digest of the build format and every go.mod and go.sum. */
export function modulesDigest(modules: readonly GoModule[], format: number): string {
  const h = createHash('sha256').update(`format ${format}\n`);
  for (const mod of modules) for (const f of ['go.mod', 'go.sum']) h.update(readFileSync(join(mod.dir, f)));
  return h.digest('hex').slice(0, 12);
}

/** `$<override>` when set, else $XDG_CACHE_HOME/berth-operator/<name> (default ~/.cache). */
export function cacheDir(env: NodeJS.ProcessEnv, override: string, name: string): string {
  const set = env[override];
  if (set) return set;
  return join(env.XDG_CACHE_HOME || join(homedir(), '.cache'), 'berth-operator', name);
}

export interface EnsureOptions<T> {
  root: string;
  key: string;
  log: Log;
  /** The finished build in `dir`, or undefined when it is not there (yet). */
  found: (dir: string) => T | undefined;
  /** Fills `staging`; it is renamed to the cache entry only when this resolves. */
  build: (staging: string) => Promise<void>;
}

/** The cache entry `root/key`, built first (under a lock shared with concurrent builders) when absent. */
export async function ensureBuilt<T>(o: EnsureOptions<T>): Promise<T> {
  const dir = join(o.root, o.key);
  const cached = o.found(dir);
  if (cached !== undefined) return cached;
  mkdirSync(o.root, { recursive: true });
  const release = await acquireLock(join(o.root, `${o.key}.lock`), o.log);
  try {
    // Another process may have finished the build while this one waited for the lock.
    const built = o.found(dir);
    if (built !== undefined) return built;
    const staging = `${dir}.partial-${process.pid}`;
    rmSync(staging, { recursive: true, force: true });
    mkdirSync(staging, { recursive: true });
    try {
      await o.build(staging);
      rmSync(dir, { recursive: true, force: true });
      renameSync(staging, dir);
    } catch (err) {
      rmSync(staging, { recursive: true, force: true });
      throw err;
    }
    const done = o.found(dir);
    if (done === undefined) throw new BuildError(`the build left nothing usable in ${dir}`);
    return done;
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
export async function acquireLock(path: string, log: Log): Promise<() => void> {
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
      log(`removing the stale build lock of process ${Number.isNaN(owner) ? '?' : owner}`);
      rmSync(path, { recursive: true, force: true });
      continue;
    }
    if (!waiting) {
      log(`waiting for the build running in process ${owner} (lock ${path})`);
      waiting = true;
    }
    await new Promise((r) => setTimeout(r, LOCK_POLL_MS));
  }
}

/** `go env GOVERSION`, checked against the minimum; `what` names what needs it in the message. */
export function goVersion(env: NodeJS.ProcessEnv, cwd: string, what: string): string {
  const out = goText(['env', 'GOVERSION'], cwd, env);
  if (out === undefined)
    throw new BuildError(
      `${what} is built from source with Go ≥ ${MIN_GO.join('.')}, and no 'go' is on PATH`,
    );
  const m = /^go(\d+)\.(\d+)/.exec(out.trim());
  if (!m || Number(m[1]) < MIN_GO[0] || (Number(m[1]) === MIN_GO[0] && Number(m[2]) < MIN_GO[1]))
    throw new BuildError(`${what} needs Go ≥ ${MIN_GO.join('.')}; 'go' is ${out.trim()}`);
  return out.trim();
}

/** The output of a quick `go` command, or undefined when it fails. */
export function goText(args: string[], cwd: string, env: NodeJS.ProcessEnv): string | undefined {
  try {
    return execFileSync('go', args, { cwd, env, encoding: 'utf8', stdio: ['ignore', 'pipe', 'pipe'] });
  } catch {
    return undefined;
  }
}

/** The environment every build runs `go` with: GOFLAGS from outside (e.g. -mod=vendor) cannot change it. */
export const goBuildEnv = (env: NodeJS.ProcessEnv): NodeJS.ProcessEnv => ({
  ...env,
  GOFLAGS: '-buildvcs=false',
  GOTOOLCHAIN: env.GOTOOLCHAIN ?? 'local',
});

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
  args: string[],
  cwd: string,
  env: NodeJS.ProcessEnv,
  onLine?: (line: string) => void,
): Promise<RunResult> {
  return new Promise((resolve, reject) => {
    const child: ChildProcess = spawn('go', args, { cwd, env, stdio: ['ignore', 'pipe', 'pipe'] });
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

export const elapsed = (start: number): string => {
  const s = Math.round((Date.now() - start) / 1000);
  return s < 60 ? `${s}s` : `${Math.floor(s / 60)}m${String(s % 60).padStart(2, '0')}s`;
};

const lastLine = (output: string): string =>
  output
    .trim()
    .split('\n')
    .filter((l) => l.trim() !== '')
    .slice(-3)
    .join(' | ');

/** Downloads `mod`'s modules and builds its packages into `out` (CGO off, trimmed, stripped, stamped). */
export async function buildModule(
  mod: GoModule,
  out: string,
  env: NodeJS.ProcessEnv,
  log: Log,
): Promise<void> {
  const version = pinnedVersion(mod);
  const names = mod.packages.map((p) => p.binary).join(', ');
  const start = Date.now();
  const failure = (what: string, output: string): BuildError => {
    const refused = refusedModule(output);
    return new BuildError(
      refused
        ? `the Go module proxy refused ${refused}, needed by ${mod.module} ${version} (${mod.label})`
        : `${what} (${mod.label}): ${lastLine(output)}`,
    );
  };
  log(`downloading the modules of ${mod.module} ${version}`);
  const dl = await run(['mod', 'download'], mod.dir, env);
  if (dl.code !== 0) throw failure('go mod download failed', dl.output);
  log(`building ${names} (${mod.module} ${version})`);
  let compiled = 0;
  let lastReport = Date.now();
  const args = [
    'build',
    '-v',
    '-trimpath',
    '-ldflags',
    ['-s', '-w', ...mod.ldflags(version)].join(' '),
    ...(mod.tags?.length ? ['-tags', mod.tags.join(',')] : []),
    '-o',
    // One package is named by its binary; several go into the directory, named by their paths.
    mod.packages.length === 1 ? join(out, mod.packages[0]!.binary) : `${out}/`,
    ...mod.packages.map((p) => p.pkg),
  ];
  const res = await run(args, mod.dir, { ...env, CGO_ENABLED: '0' }, (line) => {
    // `-v` names each package as it is compiled: a heartbeat for a build that takes minutes.
    if (!/^\S+$/.test(line)) return;
    compiled++;
    if (Date.now() - lastReport >= 15_000) {
      lastReport = Date.now();
      log(`  ${names}: ${compiled} packages compiled (${elapsed(start)})`);
    }
  });
  if (res.code !== 0) throw failure(`go build of ${names} failed`, res.output);
  log(`built ${names} in ${elapsed(start)}`);
}

/** Writes `manifest.json` (what was built, with which Go, how long it took): its presence marks a build done. */
export function writeManifest(dir: string, fields: Record<string, unknown>, start: number): void {
  const manifest = {
    ...fields,
    builtAt: new Date().toISOString(),
    seconds: Math.round((Date.now() - start) / 1000),
  };
  writeFileSync(join(dir, 'manifest.json'), `${JSON.stringify(manifest, null, 2)}\n`);
}

export const hasManifest = (dir: string): boolean => existsSync(join(dir, 'manifest.json'));

/**
 * The command line of a build script (`npm run controlplane:build`, `npm run helm:build`): builds or reuses
 * the cache through `ensure`, then prints the path (`--print`) or a line naming it; a failure is one line
 * and exit code 1, a usage error exit code 2.
 */
export async function runBuildCommand(options: {
  name: string;
  summary: string;
  /** Prefix of the failure line. */
  label: string;
  ensure: () => Promise<{ path: string; line: string }>;
}): Promise<void> {
  const values = readCommandLine(
    'npm run',
    {
      name: options.name,
      summary: options.summary,
      flags: [{ name: 'print', kind: 'boolean', default: false, help: 'Print only the path' }],
    },
    process.argv.slice(2),
  );
  if (typeof values === 'number') {
    process.exitCode = values;
    return;
  }
  try {
    const built = await options.ensure();
    process.stdout.write(`${values.print ? built.path : built.line}\n`);
  } catch (err) {
    process.stderr.write(`${options.label}: ${err instanceof Error ? err.message : String(err)}\n`);
    process.exitCode = 1;
  }
}
