// The injected helper as real processes, with this file playing the kubelet of one Pod: it runs
// `berth-operator helper acquire` (the init container) to completion, starts `helper renew` (the native
// sidecar) and waits for its liveness endpoint to answer 200 (as a startupProbe on the sidecar would),
// starts the app, and then probes every PROBE_PERIOD_SECONDS like the injected liveness probe
// (failureThreshold 1, timeout 1 s), SIGKILLing the app at the first failure. The app is not restarted
// (restartPolicy Never), so each Pod's app runs at most once and its interval is exact.
//
//   const central = await startCentralProcess(dir);            // `berth-operator central`, HTTPS, mem store
//   const pod = startHelperPod({ name: 'a', dir, env: helperEnv(central, { ... }) });
//   await pod.waitFor('running');  pod.app?.startedAt;  await pod.waitFor('stopped');
//   pod.killAll();                 // the node dies: every process SIGKILLed at once
//   await pod.terminate();         // Pod deletion: app SIGTERM, then the sidecar (native sidecar order)
//   await stopHelperPods();        // afterEach/afterAll
//
// BERTH_TEST_LOGS=1 copies every process's output to stderr.
import { type ChildProcess, spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { chmod, copyFile, mkdir } from 'node:fs/promises';
import { connect, createServer, type Server, type Socket } from 'node:net';
import { basename, join } from 'node:path';
import { PROBE_PERIOD_SECONDS } from '../../src/injection/contract.ts';
import { eventually } from './eventually.ts';

const NODE = join(process.cwd(), 'node_modules/.bin/node');
const MAIN = join(process.cwd(), 'src/main.ts');
const echo = process.env.BERTH_TEST_LOGS !== undefined;

export type LogLine = Record<string, unknown> & { msg?: string };

export interface Proc {
  readonly name: string;
  readonly child: ChildProcess;
  readonly exited: Promise<{ code: number | null; signal: NodeJS.Signals | null }>;
  hasExited(): boolean;
  logs(): LogLine[];
  stderr(): string;
  waitForLog(match: (l: LogLine) => boolean, timeoutMs?: number): Promise<LogLine>;
}

const procs = new Set<Proc>();

/**
 * Spawns a process with a clean environment (PATH and HOME) and collects its JSON log lines. Untracked
 * processes (the central server) are left alone by stopHelperProcesses.
 */
export function spawnProc(
  name: string,
  command: string,
  args: string[],
  env: Record<string, string> = {},
  tracked = true,
): Proc {
  const child = spawn(command, args, {
    stdio: ['ignore', 'pipe', 'pipe'],
    env: { PATH: process.env.PATH ?? '', HOME: process.env.HOME ?? '', ...env },
  });
  const lines: LogLine[] = [];
  let partial = '';
  let err = '';
  let done = false;
  child.stdout?.on('data', (d: Buffer) => {
    if (echo) process.stderr.write(d.toString().replace(/^(?=.)/gm, `[${name}] `));
    partial += d.toString();
    const parts = partial.split('\n');
    partial = parts.pop() ?? '';
    for (const line of parts)
      if (line.startsWith('{'))
        try {
          lines.push(JSON.parse(line) as LogLine);
        } catch {
          // not a log record
        }
  });
  child.stderr?.on('data', (d: Buffer) => {
    err += d.toString();
    if (echo) process.stderr.write(d.toString().replace(/^(?=.)/gm, `[${name} stderr] `));
  });
  const exited = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((resolve) =>
    child.on('exit', (code, signal) => {
      done = true;
      resolve({ code, signal });
    }),
  );
  const proc: Proc = {
    name,
    child,
    exited,
    hasExited: () => done,
    logs: () => lines,
    stderr: () => err,
    waitForLog: (match, timeoutMs = 20_000) =>
      eventually(
        () => {
          const found = lines.find(match);
          if (found !== undefined) return found;
          throw new Error(
            `${name}: no matching log line yet${done ? ` (exited; stderr: ${err.trim()})` : ''}`,
          );
        },
        { timeoutMs, intervalMs: 20 },
      ),
  };
  if (tracked) {
    procs.add(proc);
    void exited.then(() => procs.delete(proc));
  }
  return proc;
}

/** `berth-operator helper <args>` from the sources (or `main`, e.g. the compiled build). */
export function spawnHelper(name: string, args: string[], env: Record<string, string>, main = MAIN): Proc {
  return spawnProc(name, NODE, [main, 'helper', ...args], env);
}

export interface CentralProcess {
  url: string;
  metricsUrl: string;
  proc: Proc;
  /** SIGHUP: re-read the key file. */
  reloadKeys(): Promise<void>;
  stop(): Promise<void>;
}

/** `berth-operator central` over HTTPS with the given certificate, on a free loopback port. */
export async function startCentralProcess(o: {
  certFile: string;
  keyFile: string;
  args?: string[];
  /** The entry point (default the sources; the built `main.js` to run it as shipped). */
  main?: string;
  /** Environment beyond PATH and HOME (e.g. the image's NODE_OPTIONS). */
  env?: Record<string, string>;
}): Promise<CentralProcess> {
  const proc = spawnProc(
    'central',
    NODE,
    [
      o.main ?? MAIN,
      'central',
      '--listen-addr=127.0.0.1:0',
      '--metrics-addr=127.0.0.1:0',
      `--tls-cert-file=${o.certFile}`,
      `--tls-key-file=${o.keyFile}`,
      ...(o.args ?? []),
    ],
    o.env ?? {},
    false,
  );
  const line = await proc.waitForLog((l) => l.msg === 'central lease API serving');
  return {
    url: String(line.url),
    metricsUrl: String(line.metricsUrl),
    proc,
    reloadKeys: async () => {
      const before = proc.logs().filter((l) => l.msg === 'reloaded API keys').length;
      proc.child.kill('SIGHUP');
      await eventually(() => proc.logs().filter((l) => l.msg === 'reloaded API keys').length > before);
    },
    stop: async () => {
      if (!proc.hasExited()) proc.child.kill('SIGKILL');
      await proc.exited;
    },
  };
}

/** A counter of the central server's /metrics (0 when absent). */
export async function centralCounter(central: CentralProcess, name: string, labels: string): Promise<number> {
  const text = await (await fetch(`${central.metricsUrl}/metrics`)).text();
  const line = text.split('\n').find((l) => l.startsWith(`${name}{${labels}}`));
  return line === undefined ? 0 : Number(line.split(' ').pop());
}

/**
 * A TCP relay in front of the central server: `pass` relays, `blackhole` cuts every open connection and
 * then accepts new ones without ever answering (an unreachable server that still accepts, the harder case
 * for the client: only its own timeouts help).
 */
export class TcpRelay {
  readonly port: number;
  readonly #server: Server;
  readonly #sockets = new Set<Socket>();
  #mode: 'pass' | 'blackhole' = 'pass';

  private constructor(server: Server, port: number) {
    this.#server = server;
    this.port = port;
  }

  static async start(upstreamPort: number): Promise<TcpRelay> {
    let relay: TcpRelay | undefined;
    const server = createServer((socket) => relay!.#accept(socket, upstreamPort));
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    relay = new TcpRelay(server, (server.address() as { port: number }).port);
    return relay;
  }

  #accept(socket: Socket, upstreamPort: number): void {
    this.#sockets.add(socket);
    socket.on('close', () => this.#sockets.delete(socket));
    socket.on('error', () => socket.destroy());
    if (this.#mode === 'blackhole') return;
    const upstream = connect(upstreamPort, '127.0.0.1');
    this.#sockets.add(upstream);
    upstream.on('close', () => {
      this.#sockets.delete(upstream);
      socket.destroy();
    });
    upstream.on('error', () => upstream.destroy());
    socket.on('close', () => upstream.destroy());
    socket.pipe(upstream).pipe(socket);
  }

  blackhole(): void {
    this.#mode = 'blackhole';
    for (const s of this.#sockets) s.destroy();
  }

  async stop(): Promise<void> {
    for (const s of this.#sockets) s.destroy();
    await new Promise<void>((resolve) => this.#server.close(() => resolve()));
  }
}

export type PodPhase = 'acquiring' | 'starting' | 'running' | 'stopped' | 'failed';

export interface AppRun {
  proc: Proc;
  startedAt: number;
  /** When the harness killed it (probe) or saw it exit. */
  stoppedAt?: number;
  /** When the process had exited. */
  exitedAt?: number;
  /** Why it stopped: the probe failed (the harness killed it), or it exited (e.g. signal enforcement). */
  stoppedBy?: 'probe' | 'exit';
}

export interface HelperPodOptions {
  name: string;
  /** A directory of the test's: the Pod's state volume and its app binary go below it. */
  dir: string;
  env: Record<string, string>;
  /** Poll the liveness endpoint while the app runs (default true; off to see signal enforcement alone). */
  probe?: boolean;
  /** The entry point (default the sources). */
  main?: string;
  /** Signal enforcement with this grace, targeting the app's command name. */
  signalGraceSeconds?: number;
}

/** The command name (comm) of every app: a copy of sleep under a unique 15-byte name. */
export const appName = (pod: string): string => `bapp-${pod}-${randomBytes(3).toString('hex')}`.slice(0, 15);

export class HelperPod {
  readonly name: string;
  readonly uid = `${randomBytes(4).toString('hex')}-${randomBytes(2).toString('hex')}`;
  readonly stateDir: string;
  readonly appBinary: string;
  readonly env: Record<string, string>;
  phase: PodPhase = 'acquiring';
  acquire: Proc | undefined;
  sidecar: Proc | undefined;
  app: AppRun | undefined;
  probePort = 0;
  failure: string | undefined;
  readonly #o: HelperPodOptions;
  #stopping = false;
  #probeTimer: NodeJS.Timeout | undefined;

  constructor(o: HelperPodOptions, appBinary: string) {
    this.#o = o;
    this.name = o.name;
    this.stateDir = join(o.dir, o.name, 'berth');
    this.appBinary = appBinary;
    const signal: Record<string, string> =
      o.signalGraceSeconds === undefined
        ? {}
        : {
            BERTH_ENFORCE: 'signal',
            BERTH_SIGNAL_TARGET: basename(appBinary),
            BERTH_ENFORCE_GRACE_SECONDS: String(o.signalGraceSeconds),
          };
    this.env = {
      POD_NAME: o.name,
      POD_NAMESPACE: 'team-a',
      POD_UID: this.uid,
      BERTH_STATE_DIR: this.stateDir,
      BERTH_PROBE_PORT: '0',
      ...signal,
      ...o.env,
    };
  }

  async run(): Promise<void> {
    try {
      this.acquire = spawnHelper(`${this.name}/acquire`, ['acquire'], this.env, this.#o.main);
      const acquired = await this.acquire.exited;
      if (this.#stopping) return;
      if (acquired.code !== 0)
        throw new Error(`acquire exited ${acquired.code ?? acquired.signal}: ${this.acquire.stderr()}`);
      this.phase = 'starting';
      this.sidecar = spawnHelper(`${this.name}/sidecar`, ['renew'], this.env, this.#o.main);
      this.probePort = Number(
        (await this.sidecar.waitForLog((l) => l.msg === 'probe server listening')).port,
      );
      await eventually(async () => (await this.probeOnce()) === 200, { timeoutMs: 20_000, intervalMs: 50 });
      if (this.#stopping) return;
      const proc = spawnProc(`${this.name}/app`, this.appBinary, ['infinity']);
      const run: AppRun = { proc, startedAt: Date.now() };
      this.app = run;
      this.phase = 'running';
      void proc.exited.then(() => {
        run.exitedAt = Date.now();
        run.stoppedAt ??= run.exitedAt;
        run.stoppedBy ??= 'exit';
        this.phase = 'stopped';
        clearTimeout(this.#probeTimer);
      });
      if (this.#o.probe !== false) this.#scheduleProbe();
    } catch (err) {
      this.failure = (err as Error).message;
      this.phase = 'failed';
    }
  }

  /** One liveness probe: the status, 0 when nothing answers within 1 s. */
  async probeOnce(): Promise<number> {
    try {
      const res = await fetch(`http://127.0.0.1:${this.probePort}/healthy`, {
        signal: AbortSignal.timeout(1_000),
      });
      await res.text();
      return res.status;
    } catch {
      return 0;
    }
  }

  #scheduleProbe(): void {
    this.#probeTimer = setTimeout(async () => {
      const run = this.app;
      if (run === undefined || run.stoppedAt !== undefined) return;
      if ((await this.probeOnce()) === 200) {
        this.#scheduleProbe();
        return;
      }
      if (run.stoppedAt !== undefined) return;
      run.stoppedAt = Date.now();
      run.stoppedBy = 'probe';
      run.proc.child.kill('SIGKILL');
    }, PROBE_PERIOD_SECONDS * 1_000);
  }

  async waitFor(phase: PodPhase, timeoutMs = 30_000): Promise<void> {
    await eventually(
      () => {
        if (this.phase === 'failed' && phase !== 'failed')
          throw new Error(`${this.name} failed: ${this.failure}`);
        return this.phase === phase;
      },
      { timeoutMs, intervalMs: 20 },
    );
  }

  /** The node dies: every process of the Pod SIGKILLed at once. */
  killAll(): void {
    this.#stopping = true;
    clearTimeout(this.#probeTimer);
    for (const p of [this.app?.proc, this.sidecar, this.acquire])
      if (p && !p.hasExited()) p.child.kill('SIGKILL');
  }

  /** Pod deletion: the app gets SIGTERM and exits, then the sidecar gets SIGTERM (native sidecar order). */
  async terminate(): Promise<void> {
    this.#stopping = true;
    clearTimeout(this.#probeTimer);
    if (this.acquire && !this.acquire.hasExited()) this.acquire.child.kill('SIGTERM');
    const app = this.app;
    if (app && !app.proc.hasExited()) {
      app.proc.child.kill('SIGTERM');
      await app.proc.exited;
    }
    if (this.sidecar && !this.sidecar.hasExited()) {
      this.sidecar.child.kill('SIGTERM');
      await this.sidecar.exited;
    }
  }
}

/** Starts a Pod's lifecycle (it runs in the background); its app is a uniquely named copy of sleep. */
export async function startHelperPod(o: HelperPodOptions): Promise<HelperPod> {
  const dir = join(o.dir, o.name);
  await mkdir(dir, { recursive: true });
  const appBinary = join(dir, appName(o.name));
  await copyFile('/bin/sleep', appBinary);
  await chmod(appBinary, 0o755);
  const pod = new HelperPod(o, appBinary);
  void pod.run();
  return pod;
}

/** SIGKILLs every process these helpers started that still runs (test cleanup). */
export async function stopHelperProcesses(): Promise<void> {
  const list = [...procs];
  for (const p of list) if (!p.hasExited()) p.child.kill('SIGKILL');
  await Promise.all(list.map((p) => p.exited));
}

/** Pairs of app runs (of different Pods) that overlapped in time: must be empty for one lease. */
export function overlaps(pods: readonly HelperPod[]): string[] {
  const runs = pods.flatMap((p) =>
    p.app ? [{ pod: p.name, from: p.app.startedAt, to: p.app.exitedAt ?? Number.POSITIVE_INFINITY }] : [],
  );
  const out: string[] = [];
  for (let i = 0; i < runs.length; i++)
    for (let j = i + 1; j < runs.length; j++) {
      const a = runs[i]!;
      const b = runs[j]!;
      if (a.from < b.to && b.from < a.to)
        out.push(`${a.pod} [${a.from}, ${a.to}) overlaps ${b.pod} [${b.from}, ${b.to})`);
    }
  return out;
}
