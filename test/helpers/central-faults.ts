// A fault-injecting front for the central lease API: an HTTPS proxy (with the tests' central certificate,
// ./central-tls.ts) in front of a real central server,
// whose behaviour a test switches at runtime. Point the operator's --berth-api-server at `front.url`.
//
//   const front = await CentralFaultFront.start(central.url);
//   front.set({ kind: 'status', status: 500 });          // every lease call from now on
//   front.set({ kind: 'wrong-holder', holder: 'x' }, { op: 'acquire', name: 'web' });
//   front.clear();                                       // healthy again
//   await front.stop();
//
// Faults (docs/behaviour.md §3.3-§3.5 describe the healthy answers):
//   down             nothing listens on the port: connection refused (keep-alive connections are cut)
//   reset            the connection is destroyed without an answer
//   slow             the request is held for `delayMs` (default: until the fault is cleared) and then
//                    forwarded: set it beyond the client's timeout
//   status           an error status with the server's JSON envelope (`internal error` + requestId on 5xx)
//   garbage          200 with a body that is not JSON
//   token-backwards  the real answer, its fencingToken `by` (default 1) below the highest token this front
//                    has passed on unchanged for the lease (the one its holder holds or last held)
//   wrong-holder     the real answer, naming `holder` as the holder (acquired stays true)
// `/healthz` and `/readyz` go through the same faults (a down or reset central fails its probes too).
import type { IncomingMessage, Server, ServerResponse } from 'node:http';
import { createServer } from 'node:https';
import type { AddressInfo, Socket } from 'node:net';
import { type CentralTls, centralTls } from './central-tls.ts';

export type CentralFault =
  | { kind: 'down' }
  | { kind: 'reset' }
  | { kind: 'slow'; delayMs?: number }
  | { kind: 'status'; status: number }
  | { kind: 'garbage' }
  | { kind: 'token-backwards'; by?: number }
  | { kind: 'wrong-holder'; holder: string };

/** Which requests a fault applies to; all when a field is absent. */
export interface FaultMatch {
  op?: 'acquire' | 'renew' | 'release';
  /** The lease name (path segment). */
  name?: string;
}

const LEASE_PATH = /^\/v1alpha1\/namespaces\/([^/]+)\/leases\/([^/]+)\/(acquire|renew|release)$/;

interface Route {
  key: string | undefined;
  name: string | undefined;
  op: FaultMatch['op'];
}

function routeOf(url: string | undefined): Route {
  const m = LEASE_PATH.exec((url ?? '').split('?')[0] ?? '');
  if (m === null) return { key: undefined, name: undefined, op: undefined };
  const name = decodeURIComponent(m[2] ?? '');
  return { key: `${decodeURIComponent(m[1] ?? '')}/${name}`, name, op: m[3] as FaultMatch['op'] };
}

function readBody(req: IncomingMessage): Promise<Buffer> {
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => resolve(Buffer.concat(chunks)));
    req.on('error', reject);
  });
}

export class CentralFaultFront {
  readonly url: string;
  readonly #upstream: string;
  readonly #port: number;
  readonly #tls: CentralTls;
  #server: Server;
  readonly #sockets = new Set<Socket>();
  #fault: { fault: CentralFault; match: FaultMatch } | undefined;
  /** Releases requests held by `slow` (on clear, on a new fault, on stop). */
  #holds = new Set<() => void>();
  /** Highest fencing token passed on unchanged per `namespace/name`. */
  readonly #tokens = new Map<string, number>();
  #hits = 0;
  #requests = 0;
  #stopped = false;

  private constructor(upstream: string, server: Server, port: number, tls: CentralTls) {
    this.#upstream = upstream.replace(/\/+$/, '');
    this.#server = server;
    this.#port = port;
    this.#tls = tls;
    this.url = `https://127.0.0.1:${port}`;
  }

  static async start(upstream: string): Promise<CentralFaultFront> {
    const tls = await centralTls();
    const server = createServer({ cert: tls.cert, key: tls.key });
    await new Promise<void>((resolve, reject) => {
      server.once('error', reject);
      server.listen(0, '127.0.0.1', () => resolve());
    });
    const front = new CentralFaultFront(upstream, server, (server.address() as AddressInfo).port, tls);
    front.#attach(server);
    return front;
  }

  /** The fault in force, if any. */
  get fault(): CentralFault | undefined {
    return this.#fault?.fault;
  }

  /** Requests a fault applied to since the last `set`. */
  hits(): number {
    return this.#hits;
  }

  /** Every request the front received. */
  requests(): number {
    return this.#requests;
  }

  /** Puts `fault` in force for matching requests (replacing the previous one). */
  async set(fault: CentralFault, match: FaultMatch = {}): Promise<void> {
    await this.clear();
    this.#fault = { fault, match };
    this.#hits = 0;
    if (fault.kind === 'down') await this.#close();
  }

  /** Healthy again: held requests proceed, a downed port listens again. */
  async clear(): Promise<void> {
    const was = this.#fault?.fault.kind;
    this.#fault = undefined;
    this.#release();
    if (was === 'down' && !this.#stopped) await this.#listen();
  }

  async stop(): Promise<void> {
    if (this.#stopped) return;
    this.#stopped = true;
    this.#fault = undefined;
    this.#release();
    await this.#close();
  }

  #release(): void {
    const holds = [...this.#holds];
    this.#holds.clear();
    for (const release of holds) release();
  }

  #attach(server: Server): void {
    server.on('connection', (socket: Socket) => {
      this.#sockets.add(socket);
      socket.once('close', () => this.#sockets.delete(socket));
    });
    server.on('request', (req: IncomingMessage, res: ServerResponse) => {
      this.#handle(req, res).catch(() => {
        if (!res.headersSent) res.writeHead(502).end();
        else res.destroy();
      });
    });
  }

  async #close(): Promise<void> {
    const server = this.#server;
    await new Promise<void>((resolve) => {
      server.close(() => resolve());
      for (const s of this.#sockets) s.destroy();
    });
  }

  async #listen(): Promise<void> {
    const server = createServer({ cert: this.#tls.cert, key: this.#tls.key });
    this.#attach(server);
    await new Promise<void>((resolve, reject) => {
      server.once('error', reject);
      server.listen(this.#port, '127.0.0.1', () => resolve());
    });
    this.#server = server;
  }

  #applies(route: Route): CentralFault | undefined {
    const current = this.#fault;
    if (current === undefined) return undefined;
    const { op, name } = current.match;
    if (op !== undefined && op !== route.op) return undefined;
    if (name !== undefined && name !== route.name) return undefined;
    return current.fault;
  }

  async #handle(req: IncomingMessage, res: ServerResponse): Promise<void> {
    this.#requests++;
    const body = await readBody(req);
    const route = routeOf(req.url);
    const fault = this.#applies(route);
    if (fault !== undefined) this.#hits++;
    switch (fault?.kind) {
      case 'down':
      case 'reset':
        req.socket.destroy();
        return;
      case 'status': {
        const envelope =
          fault.status >= 500
            ? { error: 'internal error', requestId: `fault-${this.#requests}` }
            : { error: `fault ${fault.status}` };
        res.writeHead(fault.status, { 'content-type': 'application/json' }).end(JSON.stringify(envelope));
        return;
      }
      case 'garbage':
        res.writeHead(200, { 'content-type': 'application/json' }).end('{"acquired": tru');
        return;
      case 'slow':
        await this.#hold(fault.delayMs);
        if (req.socket.destroyed) return;
        break;
      default:
    }
    const upstream = await fetch(`${this.#upstream}${req.url ?? '/'}`, {
      method: req.method ?? 'GET',
      headers: {
        ...(req.headers['content-type'] ? { 'content-type': req.headers['content-type'] } : {}),
        ...(req.headers.authorization ? { authorization: req.headers.authorization } : {}),
      },
      ...(body.length > 0 ? { body } : {}),
    });
    let text = await upstream.text();
    if (upstream.status === 200 && route.key !== undefined && route.op !== 'release')
      text = this.#rewrite(route.key, text, fault);
    res
      .writeHead(upstream.status, { 'content-type': upstream.headers.get('content-type') ?? 'text/plain' })
      .end(text);
  }

  /** Applies token-backwards / wrong-holder to a healthy answer; tracks the tokens passed on. */
  #rewrite(key: string, text: string, fault: CentralFault | undefined): string {
    const answer = JSON.parse(text) as { acquired?: boolean; holder?: string; fencingToken?: number };
    const passed = this.#tokens.get(key) ?? 0;
    if (answer.acquired === true && fault?.kind === 'token-backwards')
      answer.fencingToken = Math.max(0, passed - (fault.by ?? 1));
    else if (answer.acquired === true && fault?.kind === 'wrong-holder') answer.holder = fault.holder;
    else {
      this.#tokens.set(key, Math.max(passed, answer.fencingToken ?? 0));
      return text;
    }
    return JSON.stringify(answer);
  }

  #hold(delayMs: number | undefined): Promise<void> {
    return new Promise((resolve) => {
      const done = (): void => {
        clearTimeout(timer);
        this.#holds.delete(done);
        resolve();
      };
      const timer = delayMs === undefined ? undefined : setTimeout(done, delayMs);
      this.#holds.add(done);
    });
  }
}
