// The real operator as a child process (`node src/main.ts run ...`), for tests of process-level behaviour:
// SIGKILL, SIGTERM and graceful shutdown, several replicas. It picks free ports (probe and metrics on
// loopback; the webhook on every address, as deployed, so that a Service routed to this machine reaches
// it), reads the bound addresses from its JSON log, and answers /readyz.
//
//   const op = startOperatorProcess({ kubeconfig: path, namespace: 'berth-system', args: ['--leader-elect'] });
//   await op.ready();                       // /readyz answers 200
//   op.webhookPort();                       // after ready, when workload admission is on
//   op.kill('SIGKILL'); await op.exited;    // { code, signal }
//   await stopOperatorProcesses();          // in afterEach/afterAll: SIGKILL whatever still runs
//
// The environment is clean (PATH and HOME only) so nothing leaks in from the developer's shell; set
// BERTH_TEST_LOGS=1 to copy each process's output to stderr, prefixed with its name.
import { type ChildProcess, spawn } from 'node:child_process';
import { join } from 'node:path';
import { eventually } from './eventually.ts';

const NODE = join(process.cwd(), 'node_modules/.bin/node');
const MAIN = join(process.cwd(), 'src/main.ts');

export type LogLine = Record<string, unknown> & { msg?: string };

export interface OperatorProcessOptions {
  /** Kubeconfig file the operator uses (e.g. a service account's, see TestCluster.writeKubeconfig). */
  kubeconfig: string;
  namespace: string;
  /** Further `run` flags; they come after the defaults, so they override them. */
  args?: string[];
  /** The entry point: `src/main.ts` by default; the built image's `main.js` (scripts/build.ts) to run it as shipped. */
  main?: string;
  env?: Record<string, string>;
  /** Shown in failures and BERTH_TEST_LOGS output. */
  name?: string;
  /**
   * At most this many log lines kept (default all): the first 200 (start-up: the listening addresses)
   * and the newest. A process that runs for hours (the soak) would otherwise keep its whole log here.
   */
  logLimit?: number;
}

/** Log lines always kept under a logLimit (start-up, which the address helpers look for). */
const LOG_HEAD = 200;

export interface ProcessExit {
  code: number | null;
  signal: NodeJS.Signals | null;
}

export interface OperatorProcess {
  readonly name: string;
  readonly child: ChildProcess;
  /** Settles when the process has exited. */
  readonly exited: Promise<ProcessExit>;
  /** True once the process exited. */
  hasExited(): boolean;
  /** JSON log lines so far (stdout; under a logLimit, the first and the newest). */
  logs(): LogLine[];
  stderr(): string;
  /** The first log line matching, polled until `timeoutMs`. */
  waitForLog(match: (line: LogLine) => boolean, timeoutMs?: number): Promise<LogLine>;
  /** `host:port` of /healthz and /readyz (waits for the probe server). */
  health(): Promise<string>;
  /** `host:port` of /metrics (waits for the probe server). */
  metrics(): Promise<string>;
  /** Port of the admission server (waits for its "listening" line). */
  webhookPort(): Promise<number>;
  /** The leader-election identity (with --leader-elect; waits for the first election log line). */
  identity(): Promise<string>;
  /** HTTP status of /readyz; 0 when the probe server does not answer (closed or not yet up). */
  readyz(): Promise<number>;
  /** Waits until /readyz answers 200. */
  ready(timeoutMs?: number): Promise<void>;
  kill(signal: NodeJS.Signals): void;
}

const running = new Set<OperatorProcess>();

/**
 * SIGKILLs operator processes still running — these, or every one this test file started — and waits
 * for them to exit (test cleanup; pass the list when tests of one file run concurrently).
 */
export async function stopOperatorProcesses(processes: Iterable<OperatorProcess> = running): Promise<void> {
  const list = [...processes];
  for (const p of list) if (!p.hasExited()) p.kill('SIGKILL');
  await Promise.all(list.map((p) => p.exited));
}

/** Flags every test process gets: free ports, JSON logs at info (the lifecycle is logged). */
const DEFAULT_ARGS = [
  '--health-probe-bind-address=127.0.0.1:0',
  '--metrics-bind-address=127.0.0.1:0',
  '--webhook-port=0',
  '--log-level=info',
];

let counter = 0;

export function startOperatorProcess(o: OperatorProcessOptions): OperatorProcess {
  const name = o.name ?? `operator-${++counter}`;
  const args = [
    o.main ?? MAIN,
    'run',
    `--kubeconfig=${o.kubeconfig}`,
    `--namespace=${o.namespace}`,
    ...DEFAULT_ARGS,
  ];
  const child = spawn(NODE, [...args, ...(o.args ?? [])], {
    stdio: ['ignore', 'pipe', 'pipe'],
    env: { PATH: process.env.PATH, HOME: process.env.HOME, ...o.env },
  });
  const echo = process.env.BERTH_TEST_LOGS !== undefined;
  let out = '';
  let err = '';
  const parsed: LogLine[] = [];
  let partial = '';
  child.stdout?.on('data', (d: Buffer) => {
    const text = d.toString();
    // Only the tail is shown in failures.
    out = (out + text).slice(-8_192);
    if (echo) process.stderr.write(text.replace(/^(?=.)/gm, `[${name}] `));
    partial += text;
    const lines = partial.split('\n');
    partial = lines.pop() ?? '';
    for (const line of lines) {
      if (!line.startsWith('{')) continue;
      try {
        parsed.push(JSON.parse(line) as LogLine);
        if (o.logLimit !== undefined && parsed.length > Math.max(o.logLimit, LOG_HEAD + 1))
          parsed.splice(LOG_HEAD, 1);
      } catch {
        // A line that is not JSON is not a log record (nothing else writes to stdout in `run`).
      }
    }
  });
  child.stderr?.on('data', (d: Buffer) => {
    err += d.toString();
    if (echo) process.stderr.write(d.toString().replace(/^(?=.)/gm, `[${name} stderr] `));
  });
  let done = false;
  const exited = new Promise<ProcessExit>((resolve) =>
    child.on('exit', (code, signal) => {
      done = true;
      resolve({ code, signal });
    }),
  );

  const waitForLog = (match: (line: LogLine) => boolean, timeoutMs = 20_000): Promise<LogLine> =>
    eventually(
      () => {
        const found = parsed.find(match);
        if (found !== undefined) return found;
        if (done)
          throw new Error(`${name} exited (stderr: ${err.trim() || 'empty'}; last log: ${out.slice(-500)})`);
        throw new Error(`${name}: no matching log line yet`);
      },
      { timeoutMs, intervalMs: 25 },
    );
  const probeLine = (): Promise<LogLine> => waitForLog((l) => l.msg === 'probe server listening');

  const proc: OperatorProcess = {
    name,
    child,
    exited,
    hasExited: () => done,
    logs: () => parsed,
    stderr: () => err,
    waitForLog,
    health: async () => String((await probeLine()).health),
    metrics: async () => String((await probeLine()).metrics),
    webhookPort: async () => Number((await waitForLog((l) => l.msg === 'admission server listening')).port),
    identity: async () =>
      String((await waitForLog((l) => l.msg === 'attempting to acquire leader lease')).identity),
    readyz: async () => {
      const health = await proc.health();
      try {
        const res = await fetch(`http://${health}/readyz`, { signal: AbortSignal.timeout(2_000) });
        await res.text();
        return res.status;
      } catch {
        return 0;
      }
    },
    ready: async (timeoutMs = 30_000) => {
      await eventually(
        async () => {
          if (done) throw new Error(`${name} exited (stderr: ${err.trim() || 'empty'})`);
          return (await proc.readyz()) === 200;
        },
        { timeoutMs, intervalMs: 50 },
      );
    },
    kill: (signal) => {
      if (!done) child.kill(signal);
    },
  };
  running.add(proc);
  void exited.then(() => running.delete(proc));
  return proc;
}
