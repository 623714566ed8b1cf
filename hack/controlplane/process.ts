// One supervised control-plane process: its output goes to a log file and the last lines stay in memory,
// so that a component that dies can say why; it dies with its parent (PR_SET_PDEATHSIG through util-linux
// setpriv where available, and a synchronous kill on the parent's exit), so nothing outlives a test run.
import { type ChildProcess, spawn } from 'node:child_process';
import { createWriteStream, existsSync, type WriteStream } from 'node:fs';

const TAIL_LINES = 40;
const SETPRIV = '/usr/bin/setpriv';

/** Every live child of this process: killed synchronously when the process exits. */
const live = new Set<ChildProcess>();
let exitHookInstalled = false;

function installExitHook(): void {
  if (exitHookInstalled) return;
  exitHookInstalled = true;
  process.on('exit', () => {
    for (const child of live) child.kill('SIGKILL');
  });
}

export interface Exit {
  code: number | null;
  signal: NodeJS.Signals | null;
}

export class Component {
  readonly name: string;
  readonly logPath: string;
  readonly #child: ChildProcess;
  readonly #log: WriteStream;
  readonly #tail: string[] = [];
  #partial = '';
  #exit: Exit | undefined;
  #stopping = false;
  readonly exited: Promise<Exit>;

  /**
   * Starts `bin args`. `onUnexpectedExit` is called when it exits before stop() was asked, with the last
   * lines of its output.
   */
  constructor(
    name: string,
    bin: string,
    args: readonly string[],
    logPath: string,
    onUnexpectedExit: (component: Component, exit: Exit) => void,
  ) {
    this.name = name;
    this.logPath = logPath;
    installExitHook();
    this.#log = createWriteStream(logPath, { flags: 'a' });
    const [cmd, argv] = existsSync(SETPRIV)
      ? [SETPRIV, ['--pdeathsig', 'KILL', '--', bin, ...args]]
      : [bin, [...args]];
    this.#child = spawn(cmd, argv, { stdio: ['ignore', 'pipe', 'pipe'] });
    live.add(this.#child);
    const take = (chunk: Buffer): void => {
      this.#log.write(chunk);
      const lines = (this.#partial + chunk.toString('utf8')).split('\n');
      this.#partial = lines.pop() ?? '';
      this.#tail.push(...lines);
      if (this.#tail.length > TAIL_LINES) this.#tail.splice(0, this.#tail.length - TAIL_LINES);
    };
    this.#child.stdout?.on('data', take);
    this.#child.stderr?.on('data', take);
    this.exited = new Promise<Exit>((resolve) => {
      const done = (exit: Exit): void => {
        if (this.#exit) return;
        this.#exit = exit;
        live.delete(this.#child);
        this.#log.end();
        if (!this.#stopping) onUnexpectedExit(this, exit);
        resolve(exit);
      };
      this.#child.on('error', (err) => {
        this.#tail.push(`failed to start ${bin}: ${err.message}`);
        done({ code: 127, signal: null });
      });
      this.#child.on('exit', (code, signal) => done({ code, signal }));
    });
  }

  get pid(): number | undefined {
    return this.#child.pid;
  }

  get exit(): Exit | undefined {
    return this.#exit;
  }

  /** The last lines of its output (stdout and stderr interleaved). */
  tail(lines = TAIL_LINES): string[] {
    const all = this.#partial ? [...this.#tail, this.#partial] : [...this.#tail];
    return all.slice(-lines);
  }

  /** Describes an exit with the last lines of output, for an error message. */
  describeExit(exit: Exit, lines = 15): string {
    const how = exit.signal ? `was killed by ${exit.signal}` : `exited with code ${exit.code}`;
    return `${this.name} ${how}; last lines of ${this.logPath}:\n${this.tail(lines)
      .map((l) => `  ${l}`)
      .join('\n')}`;
  }

  /** SIGTERM, then SIGKILL after `graceMs`. Resolves once the process is gone. */
  async stop(graceMs: number): Promise<void> {
    this.#stopping = true;
    if (this.#exit) return;
    this.#child.kill('SIGTERM');
    const timer = setTimeout(() => this.#child.kill('SIGKILL'), graceMs);
    await this.exited;
    clearTimeout(timer);
  }
}
