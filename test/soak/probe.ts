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

export class ProcessProbe {
  readonly name: string;
  readonly pid: number;
  readonly #ws: WebSocket;
  #seq = 0;
  readonly #waiting = new Map<number, { resolve(v: unknown): void; reject(e: Error): void }>();
  #onEvent: ((m: Message) => void) | undefined;

  private constructor(name: string, pid: number, ws: WebSocket) {
    this.name = name;
    this.pid = pid;
    this.#ws = ws;
    ws.addEventListener('message', (e) => {
      const m = JSON.parse(String(e.data)) as Message;
      if (m.id !== undefined) {
        const w = this.#waiting.get(m.id);
        this.#waiting.delete(m.id);
        w?.resolve(m.result);
      } else this.#onEvent?.(m);
    });
    ws.addEventListener('close', () => {
      for (const w of this.#waiting.values()) w.reject(new Error(`${name}: inspector closed`));
      this.#waiting.clear();
    });
  }

  /** Attaches to a process started with INSPECT_OPTION. */
  static async attach(name: string, pid: number, stderr: () => string): Promise<ProcessProbe> {
    const url = await inspectorUrl(stderr);
    const ws = new WebSocket(url);
    await new Promise<void>((resolve, reject) => {
      ws.addEventListener('open', () => resolve(), { once: true });
      ws.addEventListener('error', () => reject(new Error(`${name}: cannot reach the inspector at ${url}`)), {
        once: true,
      });
    });
    return new ProcessProbe(name, pid, ws);
  }

  #call(method: string, params: Record<string, unknown> = {}, timeoutMs = 60_000): Promise<unknown> {
    const id = ++this.#seq;
    return new Promise((resolve, reject) => {
      const timer = setTimeout(() => {
        this.#waiting.delete(id);
        reject(new Error(`${this.name}: ${method} timed out`));
      }, timeoutMs);
      this.#waiting.set(id, {
        resolve: (v) => {
          clearTimeout(timer);
          resolve(v);
        },
        reject: (e) => {
          clearTimeout(timer);
          reject(e);
        },
      });
      this.#ws.send(JSON.stringify({ id, method, params }));
    });
  }

  /** One sample: a full GC in the process, then its heap, resources, RSS and descriptors. */
  async sample(t: number): Promise<ProcessSample> {
    await this.#call('HeapProfiler.collectGarbage');
    const usage = (await this.#call('Runtime.getHeapUsage')) as { usedSize: number };
    const handles = (await this.#call('Runtime.evaluate', {
      expression: 'process.getActiveResourcesInfo().length',
      returnByValue: true,
    })) as { result: { value: number } };
    const status = await readFile(`/proc/${this.pid}/status`, 'utf8');
    const rssKB = Number(/VmRSS:\s+(\d+)/.exec(status)?.[1] ?? 0);
    const fdDir = `/proc/${this.pid}/fd`;
    const fds = await readdir(fdDir);
    let sockets = 0;
    for (const fd of fds) {
      const target = await readlink(`${fdDir}/${fd}`).catch(() => '');
      if (target.startsWith('socket:')) sockets++;
    }
    return {
      t,
      rssMB: Math.round(rssKB / 102.4) / 10,
      heapMB: Math.round(usage.usedSize / 1e5) / 10,
      handles: handles.result.value,
      sockets,
      fds: fds.length,
    };
  }

  /** The process's scheduler state and kernel wait channel, for a report on a process that stopped answering. */
  async state(): Promise<string> {
    const stat = await readFile(`/proc/${this.pid}/stat`, 'utf8').catch(() => '');
    const wchan = await readFile(`/proc/${this.pid}/wchan`, 'utf8').catch(() => '?');
    const state = stat.slice(stat.lastIndexOf(')') + 2).split(' ')[0] ?? '?';
    return stat === '' ? `pid ${this.pid} gone` : `pid ${this.pid} state ${state}, wchan ${wchan || '-'}`;
  }

  /** Active resources by type (what a handle trend is made of). */
  async handleTypes(): Promise<Record<string, number>> {
    const r = (await this.#call('Runtime.evaluate', {
      expression:
        'JSON.stringify(process.getActiveResourcesInfo().reduce((a, t) => (a[t] = (a[t] ?? 0) + 1, a), {}))',
      returnByValue: true,
    })) as { result: { value: string } };
    return JSON.parse(r.result.value) as Record<string, number>;
  }

  /** A heap snapshot of the process (after a full GC), written to `path`. */
  async snapshot(path: string): Promise<void> {
    const out = createWriteStream(path);
    this.#onEvent = (m) => {
      if (m.method === 'HeapProfiler.addHeapSnapshotChunk') out.write(String(m.params?.chunk ?? ''));
    };
    try {
      await this.#call('HeapProfiler.collectGarbage');
      await this.#call('HeapProfiler.takeHeapSnapshot', { reportProgress: false }, 300_000);
    } finally {
      this.#onEvent = undefined;
      await new Promise<void>((resolve) => out.end(resolve));
    }
  }

  close(): void {
    this.#ws.close();
  }
}
