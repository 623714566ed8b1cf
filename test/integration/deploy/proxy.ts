// A recording reverse proxy between the operator and the sandbox API server: the operator's kubeconfig
// points here (HTTPS on loopback, its own CA), every request is forwarded over TLS to the sandbox, and each answer's
// status is recorded with the request's authorization attributes — derived as kube-apiserver derives them
// (requestinfo.go), including the name of a list/watch scoped by a `metadata.name` field selector, which
// RBAC checks against resourceNames. So a test can fail on any 403 and tell which permission a request used.
import type { IncomingMessage, ServerResponse } from 'node:http';
import { createServer, request as httpsRequest, type Server } from 'node:https';
import type { AddressInfo, Socket } from 'node:net';
import { stringify } from 'yaml';
import { createServingPki, type ServingPki } from '../../../src/sandbox/tls.ts';

export interface RequestAttributes {
  verb: string;
  apiGroup: string;
  resource: string;
  subresource: string;
  namespace: string;
  name: string;
}

export interface RecordedRequest extends RequestAttributes {
  seq: number;
  method: string;
  path: string;
  status: number;
  /** The Status message of an error answer (403s carry kube's text). */
  message?: string;
  /** Set by the test: which scenario was running. */
  scenario: string;
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

export const describeRequest = (r: RecordedRequest): string =>
  `${r.status} ${r.verb} ${r.apiGroup === '' ? '' : `${r.apiGroup}/`}${r.resource}${r.subresource ? `/${r.subresource}` : ''}` +
  `${r.name ? ` ${JSON.stringify(r.name)}` : ''}${r.namespace ? ` in ${r.namespace}` : ''} (${r.method} ${r.path})` +
  `${r.message ? `: ${r.message}` : ''}`;

export interface ProxyOptions {
  /** The sandbox's https URL and CA certificate. */
  target: string;
  ca: string;
}

export class RecordingProxy {
  readonly records: RecordedRequest[] = [];
  scenario = '';
  #seq = 0;
  #server: Server | undefined;
  #pki: ServingPki | undefined;
  readonly #sockets = new Set<Socket>();
  readonly #listeners = new Set<(r: RecordedRequest) => void>();
  readonly #target: URL;
  readonly #ca: string;
  url = '';

  constructor(options: ProxyOptions) {
    this.#target = new URL(options.target);
    this.#ca = options.ca;
  }

  async start(): Promise<void> {
    this.#pki = await createServingPki(['127.0.0.1']);
    const server = createServer({ key: this.#pki.key, cert: this.#pki.cert }, (req, res) =>
      this.#forward(req, res),
    );
    server.on('secureConnection', (socket) => {
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
    const closed = new Promise<void>((resolve) => server.close(() => resolve()));
    for (const s of this.#sockets) s.destroy();
    await closed;
  }

  /** A kubeconfig that authenticates with `token` through this proxy. */
  kubeconfig(token: string, user = 'operator'): string {
    return stringify({
      apiVersion: 'v1',
      kind: 'Config',
      clusters: [
        {
          name: 'proxy',
          cluster: {
            server: this.url,
            'certificate-authority-data': Buffer.from(this.#pki?.caCert ?? '').toString('base64'),
          },
        },
      ],
      users: [{ name: user, user: { token } }],
      contexts: [{ name: 'proxy', context: { cluster: 'proxy', user } }],
      'current-context': 'proxy',
    });
  }

  /** Calls `listener` for every request recorded from now on; returns the unsubscribe function. */
  subscribe(listener: (r: RecordedRequest) => void): () => void {
    this.#listeners.add(listener);
    return () => this.#listeners.delete(listener);
  }

  forbidden(): RecordedRequest[] {
    return this.records.filter((r) => r.status === 403);
  }

  #record(req: IncomingMessage, status: number, message?: string): void {
    const url = new URL(req.url ?? '/', 'http://proxy');
    const attrs = requestAttributes(req.method ?? 'GET', url);
    if (attrs === undefined) return;
    const record: RecordedRequest = {
      seq: ++this.#seq,
      method: req.method ?? 'GET',
      path: `${url.pathname}${url.search}`,
      status,
      scenario: this.scenario,
      ...attrs,
      ...(message === undefined ? {} : { message }),
    };
    this.records.push(record);
    for (const listener of this.#listeners) listener(record);
  }

  #forward(req: IncomingMessage, res: ServerResponse): void {
    const upstream = httpsRequest(
      {
        host: this.#target.hostname.replace(/^\[|\]$/g, ''),
        port: this.#target.port,
        method: req.method,
        path: req.url,
        headers: { ...req.headers, host: this.#target.host },
        ca: this.#ca,
      },
      (answer) => {
        const status = answer.statusCode ?? 502;
        res.writeHead(status, answer.headers);
        if (status < 400) {
          this.#record(req, status);
          answer.pipe(res);
          return;
        }
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
          this.#record(req, status, message);
          res.end(body);
        });
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
