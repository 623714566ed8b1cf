// The operator's lease client (src/berth/leaseclient.ts) against the real embedded central server over
// TLS: CA bundle, SNI override, insecure mode, bearer tokens (static and rotated files), timeouts,
// abort signals, typed 409s and errors that carry status and server message.

import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import type { IncomingHttpHeaders, Server } from 'node:http';
import { createServer } from 'node:https';
import type { AddressInfo, Socket } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createServer as createTlsServer } from 'node:tls';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { type Authority, createAuthority, type KeyPair } from '../../../hack/controlplane/pki.ts';
import { berthFlags, leaseClientFor, parseBerthConfig } from '../../../src/berth/config.ts';
import {
  HttpLeaseClient,
  type HttpLeaseClientOptions,
  isLeaseConflict,
  LeaseClientError,
  LeaseConflictError,
} from '../../../src/berth/leaseclient.ts';
import { sha256Hex } from '../../../src/central/auth.ts';
import { MemoryStore } from '../../../src/central/memstore.ts';
import {
  type CentralServer,
  type CentralServerOptions,
  startCentralServer,
} from '../../../src/central/server.ts';
import type { Store } from '../../../src/central/store.ts';
import { parseFlags } from '../../../src/cli.ts';
import { ManualClock } from '../../../src/kube/clock.ts';
import { createLogger } from '../../../src/observability/logger.ts';
import { createRegistry } from '../../../src/observability/metrics.ts';
import { logSink } from './http-client.ts';

/** The client as `run` builds it from its flags. */
const fromFlags = (argv: string[]): HttpLeaseClient =>
  leaseClientFor(parseBerthConfig(parseFlags({ name: 'run', summary: '', flags: berthFlags }, argv, {})));

let ca: Authority;
let serving: KeyPair;
let dir: string;
let caFile: string;
const servers: CentralServer[] = [];
const clients: HttpLeaseClient[] = [];
const fakes: Server[] = [];
const TOKEN_A = 'token-a-for-cluster-east';
const TOKEN_B = 'token-b-for-cluster-east';

beforeAll(async () => {
  ca = await createAuthority('berth-central-test-ca');
  serving = await ca.serving(['127.0.0.1', 'localhost']);
  dir = await mkdtemp(join(tmpdir(), 'berth-leaseclient-'));
  caFile = join(dir, 'ca.pem');
  await writeFile(caFile, ca.cert);
});
afterAll(async () => {
  await rm(dir, { recursive: true, force: true });
});
afterEach(async () => {
  for (const c of clients.splice(0)) c.close();
  await Promise.all(servers.splice(0).map((s) => s.stop()));
  await Promise.all(
    fakes.splice(0).map(
      (s) =>
        new Promise<void>((resolve) => {
          s.close(() => resolve());
          s.closeAllConnections();
        }),
    ),
  );
});

async function central(
  options: Omit<CentralServerOptions, 'tls'> = {},
  tls: KeyPair = serving,
): Promise<CentralServer> {
  const server = await startCentralServer({
    tls: { cert: tls.cert, key: tls.key },
    logger: createLogger({ level: 'silent' }),
    registry: createRegistry({ defaultMetrics: false }),
    ...options,
  });
  servers.push(server);
  return server;
}

function client(options: HttpLeaseClientOptions): HttpLeaseClient {
  const c = new HttpLeaseClient(options);
  clients.push(c);
  return c;
}

/** A client of a `fakeServer` (or any server of the test CA). */
const fakeClient = (options: HttpLeaseClientOptions): HttpLeaseClient =>
  client({ caBundle: ca.cert, ...options });

async function failure(p: Promise<unknown>): Promise<LeaseClientError> {
  try {
    await p;
  } catch (err) {
    if (err instanceof LeaseClientError) return err;
    throw err;
  }
  throw new Error('expected a LeaseClientError');
}

async function keysFile(): Promise<string> {
  const path = join(dir, `keys-${Math.random().toString(36).slice(2)}`);
  await writeFile(path, `cluster-east:${sha256Hex(TOKEN_A)}\ncluster-east:${sha256Hex(TOKEN_B)}\n`);
  return path;
}

/** A store whose reads block until released (a hung backend). */
function stalledStore(): { store: Store; release: () => void; reads: () => number } {
  const inner = new MemoryStore();
  const gate = Promise.withResolvers<void>();
  let reads = 0;
  return {
    store: {
      backend: 'mem',
      ping: () => inner.ping(),
      get: async (k) => {
        reads++;
        await gate.promise;
        return inner.get(k);
      },
      list: () => inner.list(),
      put: (v, r) => inner.put(v, r),
    },
    release: () => gate.resolve(),
    reads: () => reads,
  };
}

/** An HTTPS server of the test CA answering with `handler` (the client is given the CA: `fakeClient`). */
async function fakeServer(
  handler: (req: { method?: string; url?: string; headers: IncomingHttpHeaders; body: string }) => {
    status: number;
    body?: string;
  },
): Promise<string> {
  const server = createServer({ cert: serving.cert, key: serving.key }, (req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      const out = handler({
        method: req.method,
        url: req.url,
        headers: req.headers,
        body: Buffer.concat(chunks).toString(),
      });
      res.writeHead(out.status, { 'content-type': 'application/json' });
      res.end(out.body ?? '');
    });
  });
  fakes.push(server);
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return `https://127.0.0.1:${(server.address() as AddressInfo).port}`;
}

describe('HttpLeaseClient against the embedded server', () => {
  it('acquires, renews and releases over TLS with an extra CA bundle file', async () => {
    const server = await central();
    const c = fromFlags(['--berth-api-server', server.url, '--berth-ca-bundle-file', caFile]);
    clients.push(c);
    const before = Date.now();
    const acquired = await c.acquire('pipeline', 'ingest', 'cluster-east', 30);
    expect(acquired).toMatchObject({ acquired: true, holder: 'cluster-east', fencingToken: 1 });
    expect(acquired.acquiredAt).toBeGreaterThanOrEqual(before - 1);
    expect(acquired.expiresAt! - acquired.acquiredAt!).toBe(30_000);
    const renewed = await c.renew('pipeline', 'ingest', 'cluster-east', 1, 60.9);
    expect(renewed).toMatchObject({ acquired: true, fencingToken: 1 });
    // The TTL is truncated to whole seconds.
    expect(
      renewed.expiresAt! - (await server.store.get({ namespace: 'pipeline', name: 'ingest' }))!.renewedAt,
    ).toBe(60_000);
    const other = await c.acquire('pipeline', 'ingest', 'cluster-west', 30);
    expect(other).toMatchObject({ acquired: false, holder: 'cluster-east', fencingToken: 1 });
    await c.release('pipeline', 'ingest', 'cluster-east', 1);
    expect(await c.acquire('pipeline', 'ingest', 'cluster-west', 30)).toMatchObject({
      acquired: true,
      fencingToken: 2,
    });
  });

  it('reads the zero time of an absent lease as absent', async () => {
    const server = await central();
    const c = client({ baseUrl: server.url, caBundle: ca.cert });
    expect(await c.renew('pipeline', 'nothing', 'cluster-east', 1, 30)).toEqual({
      acquired: false,
      holder: '',
      fencingToken: 0,
      expiresAt: undefined,
      acquiredAt: undefined,
    });
  });

  it('turns a 409 on release into a typed conflict', async () => {
    const server = await central();
    const c = client({ baseUrl: server.url, caBundle: ca.cert });
    await c.acquire('pipeline', 'ingest', 'cluster-east', 30);
    const err = await failure(c.release('pipeline', 'ingest', 'cluster-west', 1));
    expect(err).toBeInstanceOf(LeaseConflictError);
    expect(isLeaseConflict(err)).toBe(true);
    expect(err).toMatchObject({
      kind: 'conflict',
      status: 409,
      serverMessage: 'lease held by another identity or token',
      message: 'release pipeline/ingest: server status 409: lease held by another identity or token',
    });
  });

  it('carries status and server message (and the requestId of a 5xx) in other errors', async () => {
    const server = await central();
    const c = client({ baseUrl: server.url, caBundle: ca.cert });
    const bad = await failure(c.acquire('pipeline', 'ingest', 'cluster-east', 0));
    expect(bad).toMatchObject({
      kind: 'status',
      status: 400,
      serverMessage: 'ttlSeconds must be positive',
      message: 'acquire pipeline/ingest: server status 400: ttlSeconds must be positive',
    });
    expect(isLeaseConflict(bad)).toBe(false);
    const dotted = await failure(c.acquire('pipe.line', 'ingest', 'cluster-east', 30));
    expect(dotted.serverMessage).toMatch(/^invalid namespace "pipe\.line"/);

    const failing = await central({
      store: {
        backend: 'failing',
        ping: async () => {},
        get: async () => {
          throw new Error('boom');
        },
        list: async () => [],
        put: async () => {
          throw new Error('boom');
        },
      },
    });
    const c2 = client({ baseUrl: failing.url, caBundle: ca.cert });
    const internal = await failure(c2.acquire('pipeline', 'ingest', 'cluster-east', 30));
    expect(internal.status).toBe(500);
    expect(internal.serverMessage).toBe('internal error');
    expect(internal.requestId).toMatch(/^[0-9a-f]{32}$/);
    expect(internal.message).toBe(
      `acquire pipeline/ingest: server status 500: internal error (requestId ${internal.requestId})`,
    );
  });

  it('path-escapes namespace and name', async () => {
    const server = await central();
    const c = client({ baseUrl: server.url, caBundle: ca.cert });
    const err = await failure(c.acquire('a/b', 'x?y', 'cluster-east', 30));
    expect(err.status).toBe(400);
    expect(err.serverMessage).toMatch(/^invalid namespace "a\/b"/);
  });
});

describe('TLS options', () => {
  it('fails verification against an unknown CA', async () => {
    const server = await central();
    const err = await failure(
      client({ baseUrl: server.url }).acquire('pipeline', 'ingest', 'cluster-east', 30),
    );
    expect(err.kind).toBe('network');
    expect(err.message).toMatch(
      /^acquire pipeline\/ingest: .*(UNABLE_TO_VERIFY|self-signed|unable to get local issuer)/i,
    );
  });

  it('verifies against --berth-server-name instead of the URL host', async () => {
    const namedCa = await createAuthority('berth-internal-ca');
    const named = await namedCa.serving(['berth.internal']);
    const server = await central({}, named);
    const err = await failure(
      client({ baseUrl: server.url, caBundle: namedCa.cert }).acquire(
        'pipeline',
        'ingest',
        'cluster-east',
        30,
      ),
    );
    expect(err.kind).toBe('network');
    expect(err.message).toMatch(/altnames|Hostname\/IP does not match/i);
    const sni = client({ baseUrl: server.url, caBundle: namedCa.cert, serverName: 'berth.internal' });
    expect(await sni.acquire('pipeline', 'ingest', 'cluster-east', 30)).toMatchObject({ acquired: true });
  });

  it('skips verification only when asked, with a warning', async () => {
    const server = await central();
    const sink = logSink();
    const c = client({
      baseUrl: server.url,
      insecureSkipTlsVerify: true,
      logger: createLogger({ destination: sink }),
    });
    expect(await c.acquire('pipeline', 'ingest', 'cluster-east', 30)).toMatchObject({ acquired: true });
    const warning = sink.lines().find((l) => l.level === 'warn');
    expect(warning?.msg).toContain('TLS verification of the berth API server is disabled');
  });

  it('rejects an unreadable or certificate-less CA bundle file', async () => {
    expect(() =>
      fromFlags(['--berth-api-server', 'https://x', '--berth-ca-bundle-file', join(dir, 'none')]),
    ).toThrow(/--berth-ca-bundle-file: cannot read .*: ENOENT/);
    const junk = join(dir, 'junk.pem');
    await writeFile(junk, 'not a certificate');
    expect(() => fromFlags(['--berth-api-server', 'https://x', '--berth-ca-bundle-file', junk])).toThrow(
      'contains no PEM certificate',
    );
  });
});

describe('bearer tokens', () => {
  it('sends a static key', async () => {
    const server = await central({ authMode: 'static-keys', apiKeysFile: await keysFile() });
    const ok = client({ baseUrl: server.url, caBundle: ca.cert, apiKey: TOKEN_A });
    expect(await ok.acquire('pipeline', 'ingest', 'cluster-east', 30)).toMatchObject({ acquired: true });
    const forbidden = await failure(ok.acquire('pipeline', 'ingest', 'cluster-west', 30));
    expect(forbidden).toMatchObject({
      status: 403,
      serverMessage: 'holder not authorized for this identity',
    });
    const none = await failure(
      client({ baseUrl: server.url, caBundle: ca.cert }).acquire('pipeline', 'x', 'cluster-east', 30),
    );
    expect(none).toMatchObject({ status: 401, serverMessage: 'missing or malformed Authorization header' });
    const wrong = await failure(
      client({ baseUrl: server.url, caBundle: ca.cert, apiKey: 'wrong' }).acquire(
        'pipeline',
        'x',
        'cluster-east',
        30,
      ),
    );
    expect(wrong).toMatchObject({ status: 401, serverMessage: 'unauthorized' });
    expect(wrong.message).not.toContain('wrong');
  });

  it('re-reads a rotated key file at most once a second', async () => {
    const server = await central({ authMode: 'static-keys', apiKeysFile: await keysFile() });
    const tokenFile = join(dir, 'token');
    await writeFile(tokenFile, `${TOKEN_A}\n`);
    const clock = new ManualClock();
    const c = client({ baseUrl: server.url, caBundle: ca.cert, apiKeyFile: tokenFile, clock });
    expect(await c.acquire('pipeline', 'ingest', 'cluster-east', 30)).toMatchObject({ acquired: true });
    await writeFile(tokenFile, 'revoked-token');
    clock.advance(999);
    expect(await c.acquire('pipeline', 'ingest', 'cluster-east', 30)).toMatchObject({ acquired: true });
    clock.advance(1);
    expect(await failure(c.acquire('pipeline', 'ingest', 'cluster-east', 30))).toMatchObject({ status: 401 });
    await writeFile(tokenFile, TOKEN_B);
    clock.advance(1_000);
    expect(await c.acquire('pipeline', 'ingest', 'cluster-east', 30)).toMatchObject({ acquired: true });
    await rm(tokenFile);
    clock.advance(1_000);
    const missing = await failure(c.acquire('pipeline', 'ingest', 'cluster-east', 30));
    expect(missing.kind).toBe('config');
    expect(missing.message).toBe(`acquire pipeline/ingest: read berth API key file ${tokenFile}: ENOENT`);
  });
});

describe('wire format', () => {
  it('posts JSON with the bearer header only when there is a token', async () => {
    const seen: Array<{ method?: string; url?: string; headers: IncomingHttpHeaders; body: string }> = [];
    const url = await fakeServer((req) => {
      seen.push(req);
      return req.url?.endsWith('/release')
        ? { status: 204 }
        : {
            status: 200,
            body: '{"acquired":true,"holder":"h","fencingToken":3,"expiresAt":"2026-09-07T10:00:30.123456789Z","acquiredAt":"2026-09-07T10:00:00Z"}',
          };
    });
    const withKey = fakeClient({ baseUrl: `${url}/prefix/`, apiKey: 'k1' });
    expect(await withKey.acquire('ns', 'a b', 'h', 30)).toEqual({
      acquired: true,
      holder: 'h',
      fencingToken: 3,
      expiresAt: Date.UTC(2026, 8, 7, 10, 0, 30, 123),
      acquiredAt: Date.UTC(2026, 8, 7, 10),
    });
    await withKey.renew('ns', 'n', 'h', 3, 15);
    await fakeClient({ baseUrl: url }).release('ns', 'n', 'h', 3);
    expect(seen.map((r) => [r.method, r.url, r.body])).toEqual([
      ['POST', '/prefix/v1alpha1/namespaces/ns/leases/a%20b/acquire', '{"holder":"h","ttlSeconds":30}'],
      [
        'POST',
        '/prefix/v1alpha1/namespaces/ns/leases/n/renew',
        '{"holder":"h","fencingToken":3,"ttlSeconds":15}',
      ],
      ['POST', '/v1alpha1/namespaces/ns/leases/n/release', '{"holder":"h","fencingToken":3}'],
    ]);
    expect(seen[0]!.headers['content-type']).toBe('application/json');
    expect(seen[0]!.headers.authorization).toBe('Bearer k1');
    expect(seen[2]!.headers.authorization).toBeUndefined();
  });

  it('reports an unreadable success response as a protocol error', async () => {
    const url = await fakeServer(() => ({ status: 200, body: '<html>oops</html>' }));
    const err = await failure(fakeClient({ baseUrl: url }).acquire('ns', 'n', 'h', 30));
    expect(err).toMatchObject({
      kind: 'protocol',
      status: 200,
      message: 'acquire ns/n: response is not JSON',
    });
  });
});

describe('bounds', () => {
  it('times out a hung server after the per-request timeout', async () => {
    const stalled = stalledStore();
    const server = await central({ store: stalled.store });
    const c = client({ baseUrl: server.url, caBundle: ca.cert, timeoutMs: 200 });
    const started = Date.now();
    const err = await failure(c.acquire('pipeline', 'ingest', 'cluster-east', 30));
    expect(err).toMatchObject({ kind: 'timeout', message: 'acquire pipeline/ingest: timed out after 200ms' });
    expect(Date.now() - started).toBeLessThan(5_000);
    expect(stalled.reads()).toBe(1);
    // A per-call timeout overrides the client's.
    const perCall = await failure(c.release('pipeline', 'ingest', 'cluster-east', 1, { timeoutMs: 50 }));
    expect(perCall.message).toBe('release pipeline/ingest: timed out after 50ms');
    stalled.release();
  });

  it('defaults to a 10 s per-request timeout', () => {
    // Not waited for: the value is what matters (docs/behaviour.md §2.9), the mechanism is tested above.
    expect(client({ baseUrl: 'https://x' }).timeoutMs).toBe(10_000);
    expect(client({ baseUrl: 'https://x', timeoutMs: 2_500 }).timeoutMs).toBe(2_500);
  });

  it("gives up as soon as the caller's signal aborts, and never starts with an aborted one", async () => {
    const stalled = stalledStore();
    const server = await central({ store: stalled.store });
    const c = client({ baseUrl: server.url, caBundle: ca.cert });
    const controller = new AbortController();
    const pending = failure(
      c.acquire('pipeline', 'ingest', 'cluster-east', 30, { signal: controller.signal }),
    );
    // Abort once the server is working on it.
    const { eventually } = await import('../../helpers/eventually.ts');
    await eventually(() => stalled.reads() === 1);
    controller.abort(new Error('reconcile deadline'));
    const err = await pending;
    expect(err).toMatchObject({
      kind: 'aborted',
      message: 'acquire pipeline/ingest: aborted: reconcile deadline',
    });
    const pre = await failure(
      c.acquire('pipeline', 'ingest', 'cluster-east', 30, { signal: AbortSignal.abort() }),
    );
    expect(pre.kind).toBe('aborted');
    expect(stalled.reads()).toBe(1);
    stalled.release();
  });
});

describe('kept-alive connections', () => {
  it('retries once on a new connection when the server dropped an idle kept-alive one', async () => {
    const connections: Socket[] = [];
    const server = createTlsServer({ cert: serving.cert, key: serving.key }, (socket) => {
      const index = connections.push(socket) - 1;
      let requests = 0;
      socket.on('data', (data: Buffer) => {
        for (const _ of data.toString().matchAll(/GET \/healthz/g)) {
          requests++;
          // The first connection serves one request, then dies when reused (an idle-timeout race).
          if (index === 0 && requests > 1) {
            socket.destroy();
            return;
          }
          socket.write('HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Length: 3\r\n\r\nok\n');
        }
      });
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    try {
      const c = fakeClient({ baseUrl: `https://127.0.0.1:${(server.address() as AddressInfo).port}` });
      await c.ping();
      await c.ping();
      expect(connections).toHaveLength(2);
      await c.ping();
      expect(connections).toHaveLength(2);
    } finally {
      for (const s of connections) s.destroy();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    }
  });
});

describe('ping', () => {
  it('hits /healthz and succeeds on 2xx', async () => {
    const server = await central();
    await expect(client({ baseUrl: server.url, caBundle: ca.cert }).ping()).resolves.toBeUndefined();
  });

  it('fails on a non-2xx answer', async () => {
    const paths: string[] = [];
    const url = await fakeServer((req) => {
      paths.push(`${req.method} ${req.url}`);
      return { status: 503, body: 'not ready\n' };
    });
    const err = await failure(fakeClient({ baseUrl: url }).ping());
    expect(err).toMatchObject({ status: 503, message: 'ping: server status 503: not ready' });
    expect(paths).toEqual(['GET /healthz']);
  });

  it('fails when the server is unreachable', async () => {
    const server = await central();
    const url = server.url;
    await server.stop();
    const err = await failure(client({ baseUrl: url, caBundle: ca.cert }).ping());
    expect(err.kind).toBe('network');
    expect(err.message).toMatch(/ECONNREFUSED/);
  });
});
