// Running Spin (docs/verification.md, "Running it"): exhaustive verification (spin -a, cc, ./pan) and
// random simulation, each in a temporary directory of its own (never in the repository), with the
// models and the generated constants copied in. The I/O edge of the verification; parsing is pure.
import { execFile, spawnSync } from 'node:child_process';
import { copyFileSync, mkdtempSync, readdirSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';

/** The directory of the models (verify/). */
export const MODEL_DIR = fileURLToPath(new URL('.', import.meta.url));

/** One check: a model, its -D switches, and what it must show. */
export interface RunSpec {
  name: string;
  model: string;
  defines: readonly string[];
  /** safety: assertions and end states; liveness: the model's LTL claim with weak fairness. */
  mode: 'safety' | 'liveness';
  /** pass: 0 errors; counterexample: Spin must find one (a hole, a finding, a switch). */
  expect: 'pass' | 'counterexample';
  /** What the run shows, for people (docs/verification.md lists the same). */
  why: string;
  /** A PROFILE of verify/constants.pml this run always uses, whatever the bound. */
  profile?: 1 | 2 | 3;
}

export interface PanResult {
  errors: number;
  states: number;
  transitions: number;
  depth: number;
  memoryMb: number;
  seconds: number;
  /** Whether the search finished (no "Search not completed"). */
  complete: boolean;
  /** The EV lines of the counterexample (spin -t), when there is one. */
  trail: string[] | undefined;
  output: string;
}

export class SpinUnavailable extends Error {
  constructor(what: string) {
    super(`${what} is not installed: apt-get install spin (Spin 6.5) and a C compiler (cc)`);
    this.name = 'SpinUnavailable';
  }
}

/** Throws SpinUnavailable (one line) when spin or cc cannot be run. */
export function requireSpin(): void {
  for (const [cmd, args] of [
    ['spin', ['-V']],
    ['cc', ['--version']],
  ] as const) {
    const r = spawnSync(cmd, args, { encoding: 'utf8' });
    if (r.error !== undefined || r.status !== 0) throw new SpinUnavailable(cmd);
  }
}

function run(cmd: string, args: readonly string[], cwd: string, timeoutMs = 600_000): Promise<string> {
  return new Promise((resolve, reject) => {
    execFile(cmd, args, { cwd, maxBuffer: 256 * 1024 * 1024, timeout: timeoutMs }, (err, stdout, stderr) => {
      if (err !== null && (err as NodeJS.ErrnoException).code === 'ENOENT') {
        reject(new SpinUnavailable(cmd));
        return;
      }
      // pan exits non-zero after an error trail; the output says what happened.
      if (err !== null && stdout === '' && stderr !== '') {
        reject(new Error(`${cmd} ${args.join(' ')}: ${stderr.trim().split('\n')[0]}`));
        return;
      }
      resolve(`${stdout}${stderr}`);
    });
  });
}

/** A fresh directory with the models and constants. */
function workdir(): string {
  const dir = mkdtempSync(join(tmpdir(), 'berth-verify-'));
  for (const f of readdirSync(MODEL_DIR))
    if (f.endsWith('.pml')) copyFileSync(join(MODEL_DIR, f), join(dir, f));
  return dir;
}

const num = (text: string, re: RegExp): number => {
  const m = re.exec(text);
  return m?.[1] === undefined ? Number.NaN : Number(m[1]);
};

/** The figures of a pan run's output. Pure. */
export function parsePan(output: string): Omit<PanResult, 'trail' | 'output'> {
  return {
    errors: num(output, /errors: (\d+)/),
    states: num(output, /(\d+) states, stored/),
    transitions: num(output, /(\d+) transitions \(= (?:stored|visited)\+matched\)/),
    depth: num(output, /depth reached (\d+)/),
    memoryMb: num(output, /([\d.]+)\s+total actual memory usage/),
    seconds: num(output, /pan: elapsed time ([\d.e+]+) seconds/),
    complete: !output.includes('Search not completed'),
  };
}

/** The `EV ...` lines of a spin simulation or trail replay, without indentation. Pure. */
export function eventLines(output: string): string[] {
  return output
    .split('\n')
    .map((l) => l.trim())
    .filter((l) => l.startsWith('EV '));
}

export interface VerifyOptions {
  /** The PROFILE of verify/constants.pml (1: CI bounds, 2: deeper), unless the run names its own. */
  profile?: 1 | 2 | 3;
  /** Extra -D flags (the bound), before the run's own. */
  bound?: readonly string[];
  /** pan's -m (search depth). */
  depth?: number;
}

/** Exhaustive verification of one run: spin -a, cc, ./pan; the trail's events on an error. */
export async function verify(spec: RunSpec, options: VerifyOptions = {}): Promise<PanResult> {
  const dir = workdir();
  try {
    const profile = spec.profile ?? options.profile ?? 1;
    const defines = [`-DPROFILE=${profile}`, ...(options.bound ?? []), ...spec.defines];
    await run('spin', ['-a', ...defines, spec.model], dir);
    // A check expected to find a counterexample stops at its first one, within a second: compiling pan
    // unoptimised takes a sixth of the time (-O2 about 6 s, -O0 under 1 s), which is most of such a run.
    const optimise = spec.expect === 'counterexample' ? '-O0' : '-O2';
    const cc = [optimise, '-w', '-o', 'pan', 'pan.c', '-DVECTORSZ=2048'];
    if (spec.mode === 'safety') cc.push('-DSAFETY', '-DNOCLAIM');
    await run('cc', cc, dir);
    const pan = [`-m${options.depth ?? 100_000}`];
    if (spec.mode === 'liveness') pan.push('-a', '-f');
    const output = await run('./pan', pan, dir);
    const figures = parsePan(output);
    let trail: string[] | undefined;
    if (figures.errors > 0) trail = eventLines(await run('spin', ['-t', ...defines, spec.model], dir));
    return { ...figures, trail, output };
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

/** One random simulation: `spin -n<seed> -u<steps>`; its EV lines. */
export async function simulate(
  model: string,
  defines: readonly string[],
  seed: number,
  steps: number,
): Promise<string[]> {
  const dir = workdir();
  try {
    return eventLines(await run('spin', [`-n${seed}`, `-u${steps}`, ...defines, model], dir, 120_000));
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

/** Runs `work` over `items` with at most `limit` at a time, keeping the order of the results. */
export async function pooled<T, R>(
  items: readonly T[],
  limit: number,
  work: (t: T) => Promise<R>,
): Promise<R[]> {
  const results: R[] = new Array(items.length);
  let next = 0;
  const worker = async (): Promise<void> => {
    while (next < items.length) {
      const i = next++;
      results[i] = await work(items[i]!);
    }
  };
  await Promise.all(Array.from({ length: Math.min(limit, items.length) }, worker));
  return results;
}
