// A fault-injecting, recording HTTPS proxy in front of the real kube-apiserver: a client under test gets a
// kubeconfig pointing here (proxy.kubeconfigFor) and every request is forwarded with the client's own
// identity — a bearer token as it is, a client certificate by impersonation (the proxy cannot present
// the client's key) — while the test makes chosen requests fail (a status, a delay, a reset
// connection), drops or silences watch streams, or expires resource versions as an etcd compaction would
// (410 Gone). Each answer is recorded with the request's authorization attributes, derived as
// kube-apiserver derives them (requestinfo.go), so a test can fail on any 403 and say which permission
// it lacked.
import type { IncomingMessage, ServerResponse } from 'node:http';
import { createServer, request as httpsRequest, type Server } from 'node:https';
import type { AddressInfo, Socket } from 'node:net';
import type { TLSSocket } from 'node:tls';
import { parse as parseYaml, stringify as toYaml } from 'yaml';
import { ADMIN_USER } from '../../hack/controlplane/controlplane.ts';
import { authority, type KeyPair } from '../../hack/controlplane/pki.ts';

export interface RequestAttributes {
  verb: string;
  apiGroup: string;
  resource: string;
  subresource: string;
  namespace: string;
  name: string;
}

const NAME_SELECTOR = /^metadata\.name(==?)(.+)$/;

/** The authorization attributes of a resource request (undefined for discovery and non-resource paths). */
export function requestAttributes(method: string, url: URL): RequestAttributes | undefined {
  const parts = url.pathname.split('/').filter(Boolean).map(decodeURIComponent);
  let rest: string[];
  let apiGroup: string;
  if (parts[0] === 'api' && parts.length >= 3) {
    apiGroup = '';
    rest = parts.slice(2);
  } else if (parts[0] === 'apis' && parts.length >= 4) {
    apiGroup = parts[1] ?? '';
    rest = parts.slice(3);
  } else return undefined;
  let watchPath = false;
  if (rest[0] === 'watch') {
    watchPath = true;
    rest = rest.slice(1);
  }
  let namespace = '';
  // `namespaces/<ns>` is a namespace-scoped prefix unless it is the Namespace object itself.
  if (rest[0] === 'namespaces' && rest.length >= 3) {
    namespace = rest[1] ?? '';
    rest = rest.slice(2);
  }
  const [resource = '', name = '', subresource = ''] = rest;
  if (resource === 'namespaces' && name !== '' && namespace === '') namespace = name;
  const watch = watchPath || ['true', '1'].includes(url.searchParams.get('watch') ?? '');
  let verb: string;
  let attrName = name;
  switch (method) {
    case 'GET':
      verb = name !== '' ? (watch ? 'watch' : 'get') : watch ? 'watch' : 'list';
      if (name === '') {
        for (const term of (url.searchParams.get('fieldSelector') ?? '').split(',')) {
          const m = NAME_SELECTOR.exec(term.trim());
          if (m?.[2]) attrName = m[2];
        }
      }
      break;
    case 'POST':
      verb = 'create';
      break;
    case 'PUT':
      verb = 'update';
      break;
    case 'PATCH':
      verb = 'patch';
      break;
    case 'DELETE':
      verb = name !== '' ? 'delete' : 'deletecollection';
      break;
    default:
      verb = method.toLowerCase();
  }
  return { verb, apiGroup, resource, subresource, namespace, name: attrName };
}

export interface RecordedRequest extends RequestAttributes {
  seq: number;
  method: string;
  path: string;
  /** Who sent it (the token's or certificate's user). */
  user: string;
  status: number;
  /** The Status message of an error answer (403s carry kube's text). */
  message?: string;
  /** Set by the test: which scenario was running. */
  scenario: string;
}

export const describeRequest = (r: RecordedRequest): string =>
  `${r.status} ${r.verb} ${r.apiGroup === '' ? '' : `${r.apiGroup}/`}${r.resource}${r.subresource ? `/${r.subresource}` : ''}` +
  `${r.name ? ` ${JSON.stringify(r.name)}` : ''}${r.namespace ? ` in ${r.namespace}` : ''} (${r.method} ${r.path})` +
  `${r.message ? `: ${r.message}` : ''}`;

export interface FaultRule {
  /** Kubernetes verbs (get, list, watch, create, update, patch, delete, deletecollection); all when absent. */
  verbs?: string[];
  group?: string;
  resource?: string;
  subresource?: string;
  namespace?: string;
  name?: string;
  /** The requesting user (e.g. system:serviceaccount:ns:sa). */
  user?: string;
  /** Answer with this HTTP status and a Status body (reason derived from the code unless given). */
  status?: number;
  reason?: string;
  message?: string;
  retryAfterSeconds?: number;
  /** Delay before forwarding (or before answering with `status`). */
  delayMs?: number;
  /**
   * Hold the request (after `delayMs`) until this settles: a test orders its own steps against the held
   * request by events, not by guessing how long they take.
   */
  until?: Promise<unknown>;
  /** Destroy the connection without an answer. */
  resetConnection?: boolean;
  /** How many requests the rule applies to; unlimited when absent. */
  times?: number;
}

export interface FaultHandle {
  remove(): void;
  /** Requests the rule has applied to so far. */
  hits(): number;
}

export interface WatchFilter {
  group?: string;
  resource?: string;
  namespace?: string;
  user?: string;
}

const REASONS: Record<number, string> = {
  400: 'BadRequest',
  401: 'Unauthorized',
  403: 'Forbidden',
  404: 'NotFound',
  409: 'Conflict',
  410: 'Expired',
  422: 'Invalid',
  429: 'TooManyRequests',
  500: 'InternalError',
  503: 'ServiceUnavailable',
  504: 'Timeout',
};

export const reasonForCode = (code: number): string => REASONS[code] ?? 'Unknown';

interface Request extends RequestAttributes {
  user: string;
}

function matches(rule: FaultRule, req: Request): boolean {
  if (rule.verbs && !rule.verbs.includes(req.verb)) return false;
  if (rule.group !== undefined && rule.group !== req.apiGroup) return false;
  if (rule.resource !== undefined && rule.resource !== req.resource) return false;
  if (rule.subresource !== undefined && rule.subresource !== req.subresource) return false;
  if (rule.namespace !== undefined && rule.namespace !== req.namespace) return false;
  if (rule.name !== undefined && rule.name !== req.name) return false;
  if (rule.user !== undefined && rule.user !== req.user) return false;
  return true;
}

const watchMatches = (f: WatchFilter, w: Request): boolean =>
  (f.group === undefined || f.group === w.apiGroup) &&
  (f.resource === undefined || f.resource === w.resource) &&
  (f.namespace === undefined || f.namespace === w.namespace) &&
  (f.user === undefined || f.user === w.user);

interface ActiveRule {
  rule: FaultRule;
  hits: number;
}

interface WatchStream {
  request: Request;
  silent: boolean;
  drop(): void;
}

interface Expiry {
  filter: WatchFilter;
  /** Resource versions below this one are compacted away. */
  revision: bigint;
}

/** Who a request comes from: the user of its bearer token, or of its client certificate. */
function identify(
  req: IncomingMessage,
  adminToken: string,
): { user: string; groups: string[]; token?: string } {
  const auth = req.headers.authorization;
  if (auth?.startsWith('Bearer ')) {
    const token = auth.slice('Bearer '.length);
    if (token === adminToken) return { user: ADMIN_USER, groups: ['system:masters'], token };
    // A service-account JWT names its account in `sub`; the signature is the API server's to check.
    const [, payload] = token.split('.');
    try {
      const sub = (JSON.parse(Buffer.from(payload ?? '', 'base64url').toString('utf8')) as { sub?: string })
        .sub;
      return { user: sub ?? 'unknown', groups: [], token };
    } catch {
      return { user: 'unknown', groups: [], token };
    }
  }
  const socket = req.socket as TLSSocket;
  if (socket.authorized) {
    const subject = socket.getPeerCertificate().subject as unknown as Record<string, string | string[]>;
    const cn = subject.CN;
    const o = subject.O;
    return {
      user: Array.isArray(cn) ? (cn[0] ?? '') : (cn ?? ''),
      groups: o === undefined ? [] : Array.isArray(o) ? o : [o],
    };
  }
  return { user: 'system:anonymous', groups: [] };
}

export interface ApiProxyOptions {
  /** The API server and the cluster CA (which also signs the proxy's serving certificate). */
  url: string;
  ca: KeyPair;
  adminToken: string;
}

export class ApiProxy {
  readonly records: RecordedRequest[] = [];
  /**
   * Whether every answer is kept in `records` (the default, for a test's assertions). A long run turns it
   * off: it would keep every request of the run in memory (the soak's harness grew by ~1 MB a minute of
   * records). Answers of 403 are kept regardless (`forbidden()`), and listeners still see every answer.
   */
  keepRecords = true;
  scenario = '';
  url = '';
  #seq = 0;
  #server: Server | undefined;
  readonly #sockets = new Set<Socket>();
  readonly #listeners = new Set<(r: RecordedRequest) => void>();
  readonly #target: URL;
  readonly #ca: KeyPair;
  readonly #adminToken: string;
  readonly #rules: ActiveRule[] = [];
  readonly #watches = new Set<WatchStream>();
  readonly #expiries: Expiry[] = [];
  #connections = 0;

  private constructor(options: ApiProxyOptions) {
    this.#target = new URL(options.url);
    this.#ca = options.ca;
    this.#adminToken = options.adminToken;
  }

  /** A proxy in front of `cluster` (a TestCluster or anything with its url, CA and admin token). */
  static async start(cluster: ApiProxyOptions): Promise<ApiProxy> {
    const proxy = new ApiProxy(cluster);
    await proxy.#listen();
    return proxy;
  }

  async #listen(): Promise<void> {
    const serving = await authority(this.#ca).serving(['127.0.0.1', 'localhost']);
    const server = createServer(
      {
        key: serving.key,
        cert: serving.cert,
        // Client certificates are verified here, and their subject forwarded by impersonation.
        ca: this.#ca.cert,
        requestCert: true,
        rejectUnauthorized: false,
      },
      (req, res) => void this.#handle(req, res),
    );
    server.on('secureConnection', (socket) => {
      this.#connections++;
      this.#sockets.add(socket);
      socket.on('close', () => this.#sockets.delete(socket));
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    this.#server = server;
    this.url = `https://127.0.0.1:${(server.address() as AddressInfo).port}`;
  }

  async stop(): Promise<void> {
    const server = this.#server;
    if (server === undefined) return;
    this.#server = undefined;
    const closed = new Promise<void>((resolve) => server.close(() => resolve()));
    for (const s of this.#sockets) s.destroy();
    await closed;
  }

  /** `kubeconfig` (YAML) with its server pointed at this proxy; credentials and CA stay as they are. */
  kubeconfigFor(kubeconfig: string): string {
    const doc = parseYaml(kubeconfig) as { clusters?: Array<{ cluster: { server: string } }> };
    for (const c of doc.clusters ?? []) c.cluster.server = this.url;
    return toYaml(doc);
  }

  // --- faults ---

  inject(rule: FaultRule): FaultHandle {
    const active: ActiveRule = { rule, hits: 0 };
    this.#rules.push(active);
    return {
      remove: () => {
        const i = this.#rules.indexOf(active);
        if (i >= 0) this.#rules.splice(i, 1);
      },
      hits: () => active.hits,
    };
  }

  /** Removes every rule, expiry and silence. */
  clear(): void {
    this.#rules.length = 0;
    this.#expiries.length = 0;
    for (const w of this.#watches) w.silent = false;
  }

  #take(req: Request): FaultRule | undefined {
    for (let i = 0; i < this.#rules.length; i++) {
      const active = this.#rules[i]!;
      if (!matches(active.rule, req)) continue;
      active.hits++;
      if (active.rule.times !== undefined && active.hits >= active.rule.times) this.#rules.splice(i, 1);
      return active.rule;
    }
    return undefined;
  }

  /** Closes matching watch streams abruptly (a reset connection). Returns how many were dropped. */
  dropWatches(filter: WatchFilter = {}): number {
    let n = 0;
    for (const w of [...this.#watches]) {
      if (!watchMatches(filter, w.request)) continue;
      w.drop();
      n++;
    }
    return n;
  }

  /** Keeps matching watch streams open but delivers nothing on them (events are lost) until undone. */
  silenceWatches(filter: WatchFilter = {}): () => void {
    const affected = [...this.#watches].filter((w) => watchMatches(filter, w.request));
    for (const w of affected) w.silent = true;
    return () => {
      for (const w of affected) w.silent = false;
    };
  }

  activeWatches(filter: WatchFilter = {}): number {
    return [...this.#watches].filter((w) => watchMatches(filter, w.request)).length;
  }

  /**
   * As if etcd compacted its history at the current revision: from now on a matching watch from an older
   * resourceVersion gets the API server's `410 Expired` watch event, so its client must relist.
   */
  async expireHistory(filter: WatchFilter = {}): Promise<void> {
    const res = await fetchJson(this.#target, '/api/v1/namespaces?limit=1', this.#adminToken, this.#ca.cert);
    const rv = (res as { metadata?: { resourceVersion?: string } }).metadata?.resourceVersion;
    if (rv === undefined || !/^\d+$/.test(rv))
      throw new Error(`no current resourceVersion from the API server`);
    this.#expiries.push({ filter, revision: BigInt(rv) });
  }

  #expired(req: Request, url: URL): string | undefined {
    const rv = url.searchParams.get('resourceVersion');
    if (rv === null || !/^\d+$/.test(rv) || rv === '0') return undefined;
    for (const e of this.#expiries)
      if (watchMatches(e.filter, req) && BigInt(rv) < e.revision)
        return `too old resource version: ${rv} (${e.revision})`;
    return undefined;
  }

  // --- recording ---

  /** Calls `listener` for every request recorded from now on; returns the unsubscribe function. */
  subscribe(listener: (r: RecordedRequest) => void): () => void {
    this.#listeners.add(listener);
    return () => this.#listeners.delete(listener);
  }

  /** TLS connections accepted so far (tests check that clients reuse theirs). */
  connectionsAccepted(): number {
    return this.#connections;
  }

  forbidden(): RecordedRequest[] {
    return this.records.filter((r) => r.status === 403);
  }

  #record(req: IncomingMessage, attrs: Request | undefined, status: number, message?: string): void {
    if (attrs === undefined) return;
    const url = new URL(req.url ?? '/', 'http://proxy');
    const record: RecordedRequest = {
      seq: ++this.#seq,
      method: req.method ?? 'GET',
      path: `${url.pathname}${url.search}`,
      status,
      scenario: this.scenario,
      ...attrs,
      ...(message === undefined ? {} : { message }),
    };
    if (this.keepRecords || status === 403) this.records.push(record);
    for (const listener of this.#listeners) listener(record);
  }

  // --- forwarding ---

  async #handle(req: IncomingMessage, res: ServerResponse): Promise<void> {
    const url = new URL(req.url ?? '/', 'http://proxy');
    const who = identify(req, this.#adminToken);
    const base = requestAttributes(req.method ?? 'GET', url);
    const attrs: Request | undefined = base && { ...base, user: who.user };
    const rule = attrs && this.#take(attrs);
    if (rule?.delayMs) {
      await new Promise((r) => setTimeout(r, rule.delayMs));
      if (res.destroyed) return;
    }
    if (rule?.until) {
      await rule.until.catch(() => {});
      if (res.destroyed) return;
    }
    if (rule?.resetConnection) {
      req.socket.destroy();
      return;
    }
    if (rule?.status !== undefined) {
      const code = rule.status;
      const headers: Record<string, string> = { 'Content-Type': 'application/json' };
      if (rule.retryAfterSeconds !== undefined) headers['Retry-After'] = String(rule.retryAfterSeconds);
      const message = rule.message ?? `injected fault: ${code}`;
      res.writeHead(code, headers);
      res.end(
        JSON.stringify(status(code, rule.reason ?? reasonForCode(code), message, rule.retryAfterSeconds)),
      );
      this.#record(req, attrs, code, message);
      return;
    }
    if (attrs?.verb === 'watch') {
      const expired = this.#expired(attrs, url);
      if (expired) {
        res.writeHead(200, { 'Content-Type': 'application/json' });
        res.end(`${JSON.stringify({ type: 'ERROR', object: status(410, 'Expired', expired) })}\n`);
        this.#record(req, attrs, 200);
        return;
      }
    }
    this.#forward(req, res, attrs, who);
  }

  #forward(
    req: IncomingMessage,
    res: ServerResponse,
    attrs: Request | undefined,
    who: { user: string; groups: string[]; token?: string },
  ): void {
    const headers: Record<string, string | string[] | undefined> = {
      ...req.headers,
      host: this.#target.host,
    };
    for (const h of Object.keys(headers)) if (h.startsWith('impersonate-')) delete headers[h];
    if (who.token === undefined && who.user !== 'system:anonymous') {
      headers.authorization = `Bearer ${this.#adminToken}`;
      headers['impersonate-user'] = who.user;
      if (who.groups.length > 0) headers['impersonate-group'] = who.groups;
    }
    const upstream = httpsRequest(
      {
        host: this.#target.hostname,
        port: this.#target.port,
        method: req.method,
        path: req.url,
        headers,
        ca: this.#ca.cert,
      },
      (answer) => {
        const code = answer.statusCode ?? 502;
        res.writeHead(code, answer.headers);
        if (code >= 400) {
          const chunks: Buffer[] = [];
          answer.on('data', (c: Buffer) => chunks.push(c));
          answer.on('end', () => {
            const body = Buffer.concat(chunks);
            let message: string | undefined;
            try {
              message = (JSON.parse(body.toString('utf8')) as { message?: string }).message;
            } catch {
              message = body.toString('utf8').slice(0, 200);
            }
            this.#record(req, attrs, code, message);
            res.end(body);
          });
          return;
        }
        this.#record(req, attrs, code);
        if (attrs?.verb !== 'watch') {
          answer.pipe(res);
          return;
        }
        // A quiet watch sends no body for a while: its client waits for the headers alone.
        res.flushHeaders();
        const stream: WatchStream = {
          request: attrs,
          silent: false,
          drop: () => {
            answer.destroy();
            res.socket?.destroy();
          },
        };
        this.#watches.add(stream);
        answer.on('data', (chunk: Buffer) => {
          if (!stream.silent) res.write(chunk);
        });
        answer.on('end', () => res.end());
        const forget = (): void => {
          this.#watches.delete(stream);
        };
        answer.on('close', forget);
        res.on('close', forget);
      },
    );
    upstream.on('error', () => {
      if (!res.headersSent) res.writeHead(502);
      res.end();
    });
    res.on('close', () => upstream.destroy());
    req.pipe(upstream);
  }
}

function status(code: number, reason: string, message: string, retryAfterSeconds?: number): object {
  return {
    kind: 'Status',
    apiVersion: 'v1',
    metadata: {},
    status: 'Failure',
    message,
    reason,
    code,
    ...(retryAfterSeconds === undefined ? {} : { details: { retryAfterSeconds } }),
  };
}

function fetchJson(target: URL, path: string, token: string, ca: string): Promise<unknown> {
  return new Promise((resolve, reject) => {
    const req = httpsRequest(
      { host: target.hostname, port: target.port, path, ca, headers: { Authorization: `Bearer ${token}` } },
      (res) => {
        let text = '';
        res.setEncoding('utf8');
        res.on('data', (c: string) => {
          text += c;
        });
        res.on('end', () => {
          try {
            resolve(JSON.parse(text));
          } catch (err) {
            reject(err);
          }
        });
      },
    );
    req.on('error', reject);
    req.end();
  });
}
