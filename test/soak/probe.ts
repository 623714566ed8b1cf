// Memory of a product process (an operator, the central server, the helper sidecar), read from outside so
// that the process measured runs unchanged: RSS, open file descriptors and sockets from /proc/<pid>, and
// through the V8 inspector (the soak starts each product process with `--inspect=127.0.0.1:0` in its
// NODE_OPTIONS, a Node flag the image and the install never set) a full GC
// (HeapProfiler.collectGarbage) followed by the heap in use (Runtime.getHeapUsage), the process's active
// resources (process.getActiveResourcesInfo()), and heap snapshots on demand. No product code is involved:
// nothing in the operator can switch any of this on.
import { createWriteStream } from 'node:fs';
import { readdir, readFile, readlink } from 'node:fs/promises';
import { eventually } from '../helpers/eventually.ts';

/** What the soak adds to a product process's NODE_OPTIONS: the inspector, on a free loopback port. */
export const INSPECT_OPTION = '--inspect=127.0.0.1:0';

export interface ProcessSample {
  /** Seconds since the soak's sampling started. */
  t: number;
  rssMB: number;
  /** V8 heap in use right after a full GC. */
  heapMB: number;
  /** Active resources (handles and requests) as the process sees them. */
  handles: number;
  /** Open file descriptors that are sockets. */
  sockets: number;
  fds: number;
}

type Message = { id?: number; method?: string; params?: Record<string, unknown>; result?: unknown };

/** The inspector's WebSocket address from the process's stderr ("Debugger listening on ws://..."). */
export async function inspectorUrl(stderr: () => string, timeoutMs = 30_000): Promise<string> {
  return eventually(
    () => {
      const m = /Debugger listening on (ws:\/\/\S+)/.exec(stderr());
      if (m?.[1] === undefined) throw new Error('no inspector address on stderr yet');
      return m[1];
    },
    { timeoutMs, intervalMs: 50 },
  );
}

/** The process a probe measures now (a restarted operator is a new process under the same name). */
export interface ProbeTarget {
  pid: number;
  stderr: () => string;
}

/**
 * Connects to the inspector for each measurement and disconnects after it: a process that exits while
 * an inspector session is attached waits for it to go ("Waiting for the debugger to disconnect..."),
 * so no session may stay open between samples.
 */
export class ProcessProbe {
  readonly name: string;
  readonly #target: () => ProbeTarget;

  constructor(name: string, target: () => ProbeTarget) {
    this.name = name;
    this.#target = target;
  }

  get pid(): number {
    return this.#target().pid;
  }

  /** Waits until the process's inspector answers. */
  async ready(): Promise<void> {
    await this.#session(async () => undefined);
  }

  async #session<T>(
    use: (
      call: (method: string, params?: Record<string, unknown>, timeoutMs?: number) => Promise<unknown>,
      on: (f: (m: Message) => void) => void,
    ) => Promise<T>,
  ): Promise<T> {
    const target = this.#target();
    const url = await inspectorUrl(target.stderr);
    const ws = new WebSocket(url);
    const waiting = new Map<number, { resolve(v: unknown): void; reject(e: Error): void }>();
    let onEvent: ((m: Message) => void) | undefined;
    let seq = 0;
    ws.addEventListener('message', (e) => {
      const m = JSON.parse(String(e.data)) as Message;
      if (m.id !== undefined) {
        const w = waiting.get(m.id);
        waiting.delete(m.id);
        w?.resolve(m.result);
      } else onEvent?.(m);
    });
    ws.addEventListener('close', () => {
      for (const w of waiting.values()) w.reject(new Error(`${this.name}: inspector closed`));
      waiting.clear();
    });
    await new Promise<void>((resolve, reject) => {
      const timer = setTimeout(
        () => reject(new Error(`${this.name}: inspector at ${url} does not answer`)),
        10_000,
      );
      ws.addEventListener(
        'open',
        () => {
          clearTimeout(timer);
          resolve();
        },
        { once: true },
      );
      ws.addEventListener(
        'error',
        () => {
          clearTimeout(timer);
          reject(new Error(`${this.name}: cannot reach the inspector at ${url}`));
        },
        { once: true },
      );
    });
    const call = (
      method: string,
      params: Record<string, unknown> = {},
      timeoutMs = 30_000,
    ): Promise<unknown> => {
      const id = ++seq;
      return new Promise((resolve, reject) => {
        const timer = setTimeout(() => {
          waiting.delete(id);
          reject(new Error(`${this.name}: ${method} timed out`));
        }, timeoutMs);
        waiting.set(id, {
          resolve: (v) => {
            clearTimeout(timer);
            resolve(v);
          },
          reject: (e) => {
            clearTimeout(timer);
            reject(e);
          },
        });
        ws.send(JSON.stringify({ id, method, params }));
      });
    };
    try {
      return await use(call, (f) => {
        onEvent = f;
      });
    } finally {
      ws.close();
    }
  }

  /** One sample: a full GC in the process, then its heap, resources, RSS and descriptors. */
  async sample(t: number): Promise<ProcessSample> {
    const pid = this.pid;
    const { heap, handles } = await this.#session(async (call) => {
      await call('HeapProfiler.collectGarbage');
      const usage = (await call('Runtime.getHeapUsage')) as { usedSize: number };
      const resources = (await call('Runtime.evaluate', {
        expression: 'process.getActiveResourcesInfo().length',
        returnByValue: true,
      })) as { result: { value: number } };
      return { heap: usage.usedSize, handles: resources.result.value };
    });
    const status = await readFile(`/proc/${pid}/status`, 'utf8');
    const rssKB = Number(/VmRSS:\s+(\d+)/.exec(status)?.[1] ?? 0);
    const fdDir = `/proc/${pid}/fd`;
    const fds = await readdir(fdDir);
    let sockets = 0;
    for (const fd of fds) {
      const target = await readlink(`${fdDir}/${fd}`).catch(() => '');
      if (target.startsWith('socket:')) sockets++;
    }
    return {
      t,
      rssMB: Math.round(rssKB / 102.4) / 10,
      heapMB: Math.round(heap / 1e5) / 10,
      handles,
      // The inspector session itself is one of them while the process is measured.
      sockets,
      fds: fds.length,
    };
  }

  /** The process's scheduler state and kernel wait channel, for a report on a process that stopped answering. */
  async state(): Promise<string> {
    const pid = this.pid;
    const stat = await readFile(`/proc/${pid}/stat`, 'utf8').catch(() => '');
    const wchan = await readFile(`/proc/${pid}/wchan`, 'utf8').catch(() => '?');
    const state = stat.slice(stat.lastIndexOf(')') + 2).split(' ')[0] ?? '?';
    return stat === '' ? `pid ${pid} gone` : `pid ${pid} state ${state}, wchan ${wchan || '-'}`;
  }

  /** Active resources by type (what a handle trend is made of). */
  async handleTypes(): Promise<Record<string, number>> {
    const r = (await this.#session((call) =>
      call('Runtime.evaluate', {
        expression:
          'JSON.stringify(process.getActiveResourcesInfo().reduce((a, t) => (a[t] = (a[t] ?? 0) + 1, a), {}))',
        returnByValue: true,
      }),
    )) as { result: { value: string } };
    return JSON.parse(r.result.value) as Record<string, number>;
  }

  /** A heap snapshot of the process (after a full GC), written to `path`. */
  async snapshot(path: string): Promise<void> {
    const out = createWriteStream(path);
    try {
      await this.#session(async (call, on) => {
        on((m) => {
          if (m.method === 'HeapProfiler.addHeapSnapshotChunk') out.write(String(m.params?.chunk ?? ''));
        });
        await call('HeapProfiler.collectGarbage');
        await call('HeapProfiler.takeHeapSnapshot', { reportProgress: false }, 300_000);
      });
    } finally {
      await new Promise<void>((resolve) => out.end(resolve));
    }
  }
}
