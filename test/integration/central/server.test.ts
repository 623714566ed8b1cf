// The embedded central lease API over real TLS: routes, exact bodies and status codes, the validation
// order of docs/behaviour.md §3.5, auth, readiness, metrics and the lease scenarios 37-39.
import { X509Certificate } from 'node:crypto';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { type Authority, createAuthority, type KeyPair } from '../../../hack/controlplane/pki.ts';
import { sha256Hex } from '../../../src/central/auth.ts';
import { MemoryStore } from '../../../src/central/memstore.ts';
import type { LeaseKey, LeaseRecord } from '../../../src/central/record.ts';
import {
  type CentralServer,
  type CentralServerOptions,
  startCentralServer,
} from '../../../src/central/server.ts';
import type { Store } from '../../../src/central/store.ts';
import { ManualClock } from '../../../src/kube/clock.ts';
import { createLogger } from '../../../src/observability/logger.ts';
import { createRegistry } from '../../../src/observability/metrics.ts';
import { centralTls } from '../../helpers/central-tls.ts';
import { logSink, type RawRequest, rawClient } from './http-client.ts';

let ca: Authority;
let serving: KeyPair;
let dir: string;
const servers: CentralServer[] = [];
const T0 = Date.UTC(2026, 8, 7, 9, 0, 0);
const EAST_TOKEN = 'east-secret-token-value';
const WEST_TOKEN = 'west-secret-token-value';

beforeAll(async () => {
  ca = await createAuthority('berth-central-test-ca');
  serving = await ca.serving(['127.0.0.1', 'localhost']);
  dir = await mkdtemp(join(tmpdir(), 'berth-central-'));
});
afterAll(async () => {
  await rm(dir, { recursive: true, force: true });
});
afterEach(async () => {
  await Promise.all(servers.splice(0).map((s) => s.stop()));
});

async function start(options: Omit<CentralServerOptions, 'tls'> = {}) {
  const sink = logSink();
  const server = await startCentralServer({
    tls: { cert: serving.cert, key: serving.key },
    logger: createLogger({ level: 'debug', destination: sink }),
    registry: createRegistry({ defaultMetrics: false }),
    ...options,
  });
  servers.push(server);
  const call = rawClient(server.url, ca.cert);
  return { server, call, sink };
}

async function keysFile(): Promise<string> {
  const path = join(dir, `keys-${Math.random().toString(36).slice(2)}`);
  await writeFile(path, `cluster-east:${sha256Hex(EAST_TOKEN)}\ncluster-west:${sha256Hex(WEST_TOKEN)}\n`);
  return path;
}

const LEASE = '/v1alpha1/namespaces/pipeline/leases/ingest';
const bearer = (token: string) => ({ authorization: `Bearer ${token}` });
const post = (body: RawRequest['body'], headers: Record<string, string> = {}): RawRequest => ({
  method: 'POST',
  body,
  headers: { 'content-type': 'application/json', ...headers },
});
const json = (body: string) => JSON.parse(body) as Record<string, unknown>;

describe('central lease API: routes and wire format', () => {
  it('serves /healthz and /readyz as text, with a request id on every response', async () => {
    const { call } = await start();
    const health = await call('/healthz');
    expect(health.status).toBe(200);
    expect(health.body).toBe('ok\n');
    expect(health.headers['content-type']).toBe('text/plain; charset=utf-8');
    expect(health.headers['x-request-id']).toMatch(/^[0-9a-f]{32}$/);
    const ready = await call('/readyz');
    expect([ready.status, ready.body]).toEqual([200, 'ok\n']);
    expect((await call('/healthz', { method: 'POST', body: '' })).status).toBe(405);
  });

  it('answers unknown paths with 404 and wrong methods with 405, before authentication', async () => {
    const { call } = await start({ authMode: 'static-keys', apiKeysFile: await keysFile() });
    const missing = await call('/v1alpha1/namespaces/pipeline/leases/ingest/steal', post({}));
    expect([missing.status, missing.body]).toEqual([404, '404 page not found\n']);
    const get = await call(`${LEASE}/acquire`);
    expect([get.status, get.body, get.headers.allow]).toEqual([405, 'Method Not Allowed\n', 'POST']);
  });

  it('acquires, renews, refuses another holder, and releases with the exact bodies', async () => {
    const clock = new ManualClock(T0);
    const { call } = await start({ clock });
    const acquired = await call(`${LEASE}/acquire`, post({ holder: 'cluster-east', ttlSeconds: 30 }));
    expect(acquired.status).toBe(200);
    expect(acquired.headers['content-type']).toBe('application/json');
    expect(acquired.body).toBe(
      '{"acquired":true,"holder":"cluster-east","fencingToken":1,"expiresAt":"2026-09-07T09:00:30Z","acquiredAt":"2026-09-07T09:00:00Z"}\n',
    );
    clock.advance(10_500);
    const renewed = await call(
      `${LEASE}/renew`,
      post({ holder: 'cluster-east', fencingToken: 1, ttlSeconds: 30 }),
    );
    expect(json(renewed.body)).toEqual({
      acquired: true,
      holder: 'cluster-east',
      fencingToken: 1,
      expiresAt: '2026-09-07T09:00:40.5Z',
      acquiredAt: '2026-09-07T09:00:00Z',
    });
    const other = await call(`${LEASE}/acquire`, post({ holder: 'cluster-west', ttlSeconds: 30 }));
    expect(json(other.body)).toEqual({
      acquired: false,
      holder: 'cluster-east',
      fencingToken: 1,
      expiresAt: '2026-09-07T09:00:40.5Z',
      acquiredAt: '2026-09-07T09:00:00Z',
    });
    const absent = await call(
      '/v1alpha1/namespaces/pipeline/leases/nothing/renew',
      post({ holder: 'cluster-east', fencingToken: 1, ttlSeconds: 30 }),
    );
    expect(absent.body).toBe(
      '{"acquired":false,"expiresAt":"0001-01-01T00:00:00Z","acquiredAt":"0001-01-01T00:00:00Z"}\n',
    );
    const conflict = await call(`${LEASE}/release`, post({ holder: 'cluster-west', fencingToken: 1 }));
    expect([conflict.status, conflict.body]).toEqual([
      409,
      '{"error":"lease held by another identity or token"}\n',
    ]);
    const released = await call(`${LEASE}/release`, post({ holder: 'cluster-east', fencingToken: 1 }));
    expect([released.status, released.body]).toEqual([204, '']);
    const again = await call(`${LEASE}/release`, post({ holder: 'cluster-east', fencingToken: 1 }));
    expect(again.status).toBe(204);
  });

  it('unescapes path segments after matching them', async () => {
    const { call } = await start();
    const res = await call(
      '/v1alpha1/namespaces/pipe%2Fline/leases/ingest/acquire',
      post({ holder: 'east', ttlSeconds: 30 }),
    );
    expect(res.status).toBe(400);
    expect(json(res.body).error).toMatch(/^invalid namespace "pipe\/line": must be an RFC 1123 DNS label/);
  });
});

describe('central lease API: validation order and status codes', () => {
  it('401 for a missing or malformed Authorization header, generic 401 for a bad token', async () => {
    const { call, sink } = await start({ authMode: 'static-keys', apiKeysFile: await keysFile() });
    const body = { holder: 'cluster-east', ttlSeconds: 30 };
    const malformed: Array<Record<string, string>> = [
      {},
      { authorization: 'Basic abc' },
      { authorization: 'Bearer ' },
      { authorization: 'bearer x' },
    ];
    for (const headers of malformed) {
      const res = await call(`${LEASE}/acquire`, post(body, headers));
      expect([res.status, res.body], JSON.stringify(headers)).toEqual([
        401,
        '{"error":"missing or malformed Authorization header"}\n',
      ]);
    }
    const wrong = await call(`${LEASE}/acquire`, post(body, bearer('not-a-known-token')));
    expect([wrong.status, wrong.body]).toEqual([401, '{"error":"unauthorized"}\n']);
    const ok = await call(`${LEASE}/acquire`, post(body, bearer(EAST_TOKEN)));
    expect(ok.status).toBe(200);
    expect(sink.text()).not.toContain(EAST_TOKEN);
    expect(sink.text()).not.toContain('not-a-known-token');
  });

  it('authenticates before reading the body: an oversized body without credentials is 401', async () => {
    const { call } = await start({ authMode: 'static-keys', apiKeysFile: await keysFile() });
    const res = await call(`${LEASE}/acquire`, post('x'.repeat(10_000)));
    expect(res.status).toBe(401);
  });

  it('413 above 4096 bytes (declared or streamed), 4096 exactly is fine', async () => {
    const { call } = await start();
    const base = JSON.stringify({ holder: 'east', ttlSeconds: 30 });
    const exact = base + ' '.repeat(4096 - base.length);
    expect((await call(`${LEASE}/acquire`, post(exact))).status).toBe(200);
    const over = await call(`${LEASE}/acquire`, post(`${exact} `));
    expect([over.status, over.body]).toEqual([413, '{"error":"request body must be at most 4096 bytes"}\n']);
    const chunked = await call(`${LEASE}/acquire`, { ...post(`${exact}    `), chunked: true });
    expect([chunked.status, chunked.body]).toEqual([
      413,
      '{"error":"request body must be at most 4096 bytes"}\n',
    ]);
    // The server still serves afterwards.
    expect((await call('/healthz')).status).toBe(200);
  });

  it('400 for bad JSON, unknown fields and trailing data', async () => {
    const { call } = await start();
    const cases: Array<[string, string]> = [
      ['', 'invalid json body: EOF'],
      ['{"holder":"east","ttlSeconds":30,"x":1}', 'invalid json body: json: unknown field "x"'],
      ['{"holder":"east","ttlSeconds":30}{}', 'request body must contain one JSON object'],
      [
        '{"holder":"east","ttlSeconds":"30"}',
        'invalid json body: json: cannot unmarshal string into Go struct field acquireRequest.ttlSeconds of type int32',
      ],
    ];
    for (const [body, message] of cases) {
      const res = await call(`${LEASE}/acquire`, post(body));
      expect([res.status, res.body], body).toEqual([400, `${JSON.stringify({ error: message })}\n`]);
    }
  });

  it('400 for holder, ttl and token rules, per operation', async () => {
    const { call } = await start();
    const expect400 = async (op: string, body: object, message: string) => {
      const res = await call(`${LEASE}/${op}`, post(body));
      expect([res.status, json(res.body)], `${op} ${JSON.stringify(body)}`).toEqual([
        400,
        { error: message },
      ]);
    };
    await expect400('acquire', { ttlSeconds: 30 }, 'holder is required');
    await expect400(
      'acquire',
      { holder: 'h'.repeat(254), ttlSeconds: 30 },
      'holder must be at most 253 bytes',
    );
    await expect400(
      'renew',
      { holder: 'h'.repeat(254), ttlSeconds: 30, fencingToken: 1 },
      'holder must be at most 253 bytes',
    );
    await expect400('acquire', { holder: 'east', ttlSeconds: 0 }, 'ttlSeconds must be positive');
    await expect400(
      'renew',
      { holder: 'east', ttlSeconds: -5, fencingToken: 1 },
      'ttlSeconds must be positive',
    );
    await expect400('renew', { holder: 'east', ttlSeconds: 30 }, 'fencingToken must be non-zero');
    await expect400('release', { fencingToken: 1 }, 'holder is required');
    // Release accepts an oversized legacy holder (and a missing lease is fine).
    expect((await call(`${LEASE}/release`, post({ holder: 'h'.repeat(300), fencingToken: 1 }))).status).toBe(
      204,
    );
  });

  it('403 when the holder is not the tenant or under it; validation errors come first', async () => {
    const { call } = await start({ authMode: 'static-keys', apiKeysFile: await keysFile() });
    const east = bearer(EAST_TOKEN);
    const denied = await call(`${LEASE}/acquire`, post({ holder: 'cluster-west', ttlSeconds: 30 }, east));
    expect([denied.status, denied.body]).toEqual([
      403,
      '{"error":"holder not authorized for this identity"}\n',
    ]);
    const spoof = await call(`${LEASE}/acquire`, post({ holder: 'cluster-eastern', ttlSeconds: 30 }, east));
    expect(spoof.status).toBe(403);
    const sub = await call(`${LEASE}/acquire`, post({ holder: 'cluster-east/pod-1', ttlSeconds: 30 }, east));
    expect(json(sub.body)).toMatchObject({ acquired: true, holder: 'cluster-east/pod-1' });
    // holder/ttl validation runs before authorization.
    const noHolder = await call(`${LEASE}/acquire`, post({ ttlSeconds: 30 }, east));
    expect(json(noHolder.body)).toEqual({ error: 'holder is required' });
    const badTtl = await call(`${LEASE}/acquire`, post({ holder: 'cluster-west', ttlSeconds: 0 }, east));
    expect(json(badTtl.body)).toEqual({ error: 'ttlSeconds must be positive' });
    // west cannot release east's lease under east's name.
    const release = await call(
      `${LEASE}/release`,
      post({ holder: 'cluster-east/pod-1', fencingToken: 1 }, bearer(WEST_TOKEN)),
    );
    expect(release.status).toBe(403);
  });

  it('validates the key only after authorization, so it is no pre-auth oracle (dotted namespace #94)', async () => {
    const { call } = await start({ authMode: 'static-keys', apiKeysFile: await keysFile() });
    const dotted = '/v1alpha1/namespaces/pipe.line/leases/ingest/acquire';
    const unauth = await call(dotted, post({ holder: 'cluster-east', ttlSeconds: 30 }));
    expect(unauth.status).toBe(401);
    const forbidden = await call(
      dotted,
      post({ holder: 'cluster-west', ttlSeconds: 30 }, bearer(EAST_TOKEN)),
    );
    expect(forbidden.status).toBe(403);
    const invalid = await call(dotted, post({ holder: 'cluster-east', ttlSeconds: 30 }, bearer(EAST_TOKEN)));
    expect(invalid.status).toBe(400);
    expect(json(invalid.body).error).toBe(
      `invalid namespace "pipe.line": must be an RFC 1123 DNS label (at most 63 lower-case alphanumeric characters or '-', starting and ending with an alphanumeric character)`,
    );
    const long = await call(
      `/v1alpha1/namespaces/${'n'.repeat(63)}/leases/${'x'.repeat(190)}/acquire`,
      post({ holder: 'cluster-east', ttlSeconds: 30 }, bearer(EAST_TOKEN)),
    );
    expect(json(long.body).error).toMatch(
      /namespace and name joined with '\.' must be at most 253 characters, got 254$/,
    );
  });

  it('500 is generic with a requestId that matches the header and the server log', async () => {
    const failing: Store = {
      backend: 'failing',
      ping: async () => {},
      get: async () => {
        throw new Error('postgres: password authentication failed for user "berth"');
      },
      list: async () => [],
      put: async () => {
        throw new Error('unreachable');
      },
    };
    const { call, sink } = await start({ store: failing });
    const res = await call(`${LEASE}/acquire`, post({ holder: 'east', ttlSeconds: 30 }));
    expect(res.status).toBe(500);
    const body = json(res.body);
    expect(body).toEqual({ error: 'internal error', requestId: res.headers['x-request-id'] });
    expect(res.body).not.toContain('postgres');
    const logged = sink.lines().find((l) => l.msg === 'lease operation failed');
    expect(logged?.requestId).toBe(body.requestId);
    expect(JSON.stringify(logged)).toContain('password authentication failed');
  });

  it('honours an inbound traceparent as the request id', async () => {
    const { call } = await start();
    const res = await call('/healthz', {
      headers: { traceparent: '00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01' },
    });
    expect(res.headers['x-request-id']).toBe('4bf92f3577b34da6a3ce929d0e0e4736');
  });
});

describe('central lease API: scenarios', () => {
  it('tokens strictly increase across release, expiry and GC (#92), and GC keeps live leases (#93)', async () => {
    const clock = new ManualClock(T0);
    const { server, call } = await start({ clock, gc: { graceMs: 60_000, intervalMs: 30_000 } });
    const acquire = async (holder: string) =>
      json((await call(`${LEASE}/acquire`, post({ holder, ttlSeconds: 10 }))).body);
    const tokens: unknown[] = [];
    tokens.push((await acquire('east')).fencingToken);
    await call(`${LEASE}/release`, post({ holder: 'east', fencingToken: 1 }));
    tokens.push((await acquire('east')).fencingToken);
    clock.advance(10_001);
    tokens.push((await acquire('west')).fencingToken);
    await clock.advanceAsync(80_000); // the collector ticks at 30/60/90 s: at 90 s west is past expiry + grace
    const record = await server.store.get({ namespace: 'pipeline', name: 'ingest' });
    expect(record).toMatchObject({ holder: '', fencingToken: 3 });
    tokens.push((await acquire('west')).fencingToken);
    expect(tokens).toEqual([1, 2, 3, 4]);
    await clock.advanceAsync(30_000);
    expect(await server.store.get({ namespace: 'pipeline', name: 'ingest' })).toMatchObject({
      holder: 'west',
    });
  });

  it('a stalled renew racing a reclaim over HTTP: exactly one winner', async () => {
    const clock = new ManualClock(T0);
    const inner = new MemoryStore();
    let stall: PromiseWithResolvers<void> | undefined;
    const atPut = Promise.withResolvers<void>();
    const store: Store = {
      backend: 'mem',
      ping: () => inner.ping(),
      get: (k: LeaseKey) => inner.get(k),
      list: () => inner.list(),
      put: async (v: number, r: LeaseRecord) => {
        if (stall) {
          const s = stall;
          stall = undefined;
          atPut.resolve();
          await s.promise;
        }
        return inner.put(v, r);
      },
    };
    const { call } = await start({ clock, store });
    await call(`${LEASE}/acquire`, post({ holder: 'east', ttlSeconds: 10 }));
    clock.advance(9_900);
    stall = Promise.withResolvers<void>();
    const gate = stall;
    const renew = call(`${LEASE}/renew`, post({ holder: 'east', fencingToken: 1, ttlSeconds: 10 }));
    await atPut.promise; // east's renew has read the lease and is about to write
    clock.advance(200);
    const west = json((await call(`${LEASE}/acquire`, post({ holder: 'west', ttlSeconds: 10 }))).body);
    gate.resolve();
    const east = json((await renew).body);
    expect(west).toMatchObject({ acquired: true, holder: 'west', fencingToken: 2 });
    expect(east).toMatchObject({ acquired: false, holder: 'west', fencingToken: 2 });
  });

  it('readyz: one store probe for a storm of 50, 503 "not ready" when it fails, re-probed after 1 s', async () => {
    const clock = new ManualClock(T0);
    const inner = new MemoryStore();
    let pings = 0;
    let healthy = true;
    const store: Store = {
      backend: 'mem',
      ping: async () => {
        pings++;
        if (!healthy) throw new Error('down');
      },
      get: (k) => inner.get(k),
      list: () => inner.list(),
      put: (v, r) => inner.put(v, r),
    };
    const { call } = await start({ clock, store });
    const storm = await Promise.all(Array.from({ length: 50 }, () => call('/readyz')));
    expect(storm.every((r) => r.status === 200 && r.body === 'ok\n')).toBe(true);
    expect(pings).toBe(1);
    healthy = false;
    expect((await call('/readyz')).status).toBe(200);
    clock.advance(1_000);
    const down = await call('/readyz');
    expect([down.status, down.body]).toEqual([503, 'not ready\n']);
    expect(pings).toBe(2);
    healthy = true;
    clock.advance(1_000);
    expect((await call('/readyz')).status).toBe(200);
    expect(pings).toBe(3);
  });
});

describe('central lease API: keys, metrics', () => {
  it('reloads the key file (SIGHUP), keeping the old keys when the new file is bad', async () => {
    const path = await keysFile();
    const { server, call } = await start({ authMode: 'static-keys', apiKeysFile: path });
    const body = { holder: 'cluster-east', ttlSeconds: 30 };
    expect((await call(`${LEASE}/acquire`, post(body, bearer(EAST_TOKEN)))).status).toBe(200);
    await writeFile(path, `cluster-east:${sha256Hex('rotated')}\n`);
    expect(await server.reloadKeys()).toBe(true);
    expect((await call(`${LEASE}/acquire`, post(body, bearer(EAST_TOKEN)))).status).toBe(401);
    expect((await call(`${LEASE}/acquire`, post(body, bearer('rotated')))).status).toBe(200);
    await writeFile(path, 'broken');
    expect(await server.reloadKeys()).toBe(false);
    expect((await call(`${LEASE}/acquire`, post(body, bearer('rotated')))).status).toBe(200);
  });

  it('refuses to start static-keys without a usable key file', async () => {
    await expect(start({ authMode: 'static-keys' })).rejects.toThrow('requires an API keys file');
    await expect(start({ authMode: 'static-keys', apiKeysFile: join(dir, 'missing') })).rejects.toThrow(
      'ENOENT',
    );
  });

  it('records berth_apiserver_* and store metrics, served on the metrics listener', async () => {
    const { server, call } = await start({ metricsAddr: '127.0.0.1:0' });
    await call(`${LEASE}/acquire`, post({ holder: 'east', ttlSeconds: 30 }));
    await call(`${LEASE}/acquire`, post({ holder: 'west', ttlSeconds: 30 }));
    await call(`${LEASE}/release`, post({ holder: 'west', fencingToken: 1 }));
    await call('/v1alpha1/namespaces/a.b/leases/x/acquire', post({ holder: 'east', ttlSeconds: 30 }));
    expect(server.metricsUrl).toMatch(/^http:\/\/127\.0\.0\.1:\d+$/);
    const scrape = await rawClient(server.metricsUrl!)('/metrics');
    expect(scrape.status).toBe(200);
    const text = scrape.body;
    expect(text).toContain('berth_apiserver_requests_total{route="acquire",method="POST",status="200"} 2');
    expect(text).toContain('berth_apiserver_requests_total{route="release",method="POST",status="409"} 1');
    expect(text).toContain(
      'berth_apiserver_request_duration_seconds_count{route="acquire",method="POST",status="200"} 2',
    );
    expect(text).toMatch(/berth_apiserver_requests_inflight \d/);
    for (const outcome of ['acquired', 'held-by-other', 'conflict', 'invalid-key'])
      expect(text).toContain(`berth_apiserver_lease_outcomes_total{outcome="${outcome}"} 1`);
    expect(text).toContain(
      'berth_lease_store_call_duration_seconds_bucket{le="0.0001",op="get",backend="mem",outcome="not_found"}',
    );
    expect(text).toMatch(
      /berth_lease_store_call_duration_seconds_count\{op="put",backend="mem",outcome="ok"\} 1/,
    );
    expect((await rawClient(server.metricsUrl!)('/healthz')).status).toBe(200);
  });

  it("exports the serving certificate's remaining life, computed at scrape time", async () => {
    const clock = new ManualClock(Date.now());
    const { server } = await start({ clock });
    const notAfter = Date.parse(new X509Certificate(serving.cert).validTo);
    const expiry = async (): Promise<number | undefined> =>
      (await server.registry.getSingleMetric('berth_apiserver_certificate_expiry_seconds')?.get())?.values[0]
        ?.value;
    expect(await expiry()).toBe((notAfter - clock.now()) / 1000);
    expect(await expiry()).toBeGreaterThan(0);
    clock.advance(3_600_000);
    expect(await expiry()).toBe((notAfter - clock.now()) / 1000);
  });

  it('serves HTTPS only: a plain-HTTP request gets no HTTP answer', async () => {
    const server = await startCentralServer({
      tls: await centralTls(),
      logger: createLogger({ level: 'silent' }),
      registry: createRegistry({ defaultMetrics: false }),
    });
    servers.push(server);
    expect(server.url).toMatch(/^https:\/\/127\.0\.0\.1:\d+$/);
    expect((await rawClient(server.url)('/healthz')).body).toBe('ok\n');
    const clearText = server.url.replace(/^https:/, 'http:');
    await expect(rawClient(clearText)('/healthz')).rejects.toThrow(/socket hang up|ECONNRESET|Parse Error/);
  });
});
