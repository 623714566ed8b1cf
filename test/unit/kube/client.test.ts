import { mkdir, mkdtemp, rm, writeFile } from 'node:fs/promises';
import { createServer, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { delimiter, join } from 'node:path';
import { ApiException, KubeConfig } from '@kubernetes/client-node';
import { afterEach, describe, expect, it } from 'vitest';
import {
  chooseKubeConfig,
  describeError,
  isAlreadyExists,
  isConflict,
  isGone,
  isNotFound,
  isTooManyRequests,
  KubeApiError,
  loadKubeConfig,
  readJson,
  resourcePath,
  retryAfterSeconds,
  statusCodeOf,
  statusOf,
} from '../../../src/kube/client.ts';
import { ManualClock } from '../../../src/kube/clock.ts';
import { KubeTransport } from '../../../src/kube/transport.ts';
import { createRegistry } from '../../../src/observability/metrics.ts';
import { eventually } from '../../helpers/eventually.ts';

const status = (code: number, reason: string, extra: Record<string, unknown> = {}): string =>
  JSON.stringify({
    kind: 'Status',
    apiVersion: 'v1',
    status: 'Failure',
    code,
    reason,
    message: `m${code}`,
    ...extra,
  });

describe('chooseKubeConfig', () => {
  it('prefers --kubeconfig, then KUBECONFIG, then in-cluster, then ~/.kube/config', () => {
    const all = { flag: '/f', env: `/e1${delimiter}/e2`, inCluster: true, homeConfig: '/h' };
    expect(chooseKubeConfig(all)).toEqual({ source: 'flag', paths: ['/f'] });
    expect(chooseKubeConfig({ ...all, flag: '' })).toEqual({ source: 'env', paths: ['/e1', '/e2'] });
    expect(chooseKubeConfig({ ...all, flag: undefined, env: '' })).toEqual({ source: 'in-cluster' });
    expect(chooseKubeConfig({ inCluster: false, homeConfig: '/h' })).toEqual({
      source: 'home',
      paths: ['/h'],
    });
    expect(chooseKubeConfig({ inCluster: false })).toBeUndefined();
  });
});

describe('loadKubeConfig', () => {
  let dir: string;
  afterEach(async () => {
    if (dir) await rm(dir, { recursive: true, force: true });
  });

  const kubeconfig = (name: string, server: string, namespace?: string): string =>
    JSON.stringify({
      apiVersion: 'v1',
      kind: 'Config',
      clusters: [{ name, cluster: { server } }],
      users: [{ name, user: { token: `secret-token-${name}` } }],
      contexts: [{ name, context: { cluster: name, user: name, ...(namespace ? { namespace } : {}) } }],
      'current-context': name,
    });

  it('loads the --kubeconfig file and reports the context namespace', async () => {
    dir = await mkdtemp(join(tmpdir(), 'kc-'));
    await writeFile(join(dir, 'a'), kubeconfig('a', 'https://a.example:6443', 'team-a'));
    const loaded = loadKubeConfig({ kubeconfig: join(dir, 'a'), env: {}, home: dir });
    expect(loaded.source).toBe('flag');
    expect(loaded.kc.getCurrentCluster()?.server).toBe('https://a.example:6443');
    expect(loaded.namespace).toBe('team-a');
  });

  it('merges several KUBECONFIG files, the first one setting the current context', async () => {
    dir = await mkdtemp(join(tmpdir(), 'kc-'));
    await writeFile(join(dir, 'a'), kubeconfig('a', 'https://a.example'));
    await writeFile(join(dir, 'b'), kubeconfig('b', 'https://b.example'));
    const loaded = loadKubeConfig({
      env: { KUBECONFIG: `${join(dir, 'a')}${delimiter}${join(dir, 'b')}` },
      home: dir,
    });
    expect(loaded.source).toBe('env');
    expect(loaded.kc.getCurrentCluster()?.server).toBe('https://a.example');
    const other = loadKubeConfig({
      env: { KUBECONFIG: `${join(dir, 'a')}${delimiter}${join(dir, 'b')}` },
      home: dir,
      context: 'b',
    });
    expect(other.kc.getCurrentCluster()?.server).toBe('https://b.example');
    expect(() => loadKubeConfig({ kubeconfig: join(dir, 'a'), env: {}, home: dir, context: 'nope' })).toThrow(
      /context "nope" not found/,
    );
  });

  it('uses the in-cluster service account when KUBERNETES_SERVICE_HOST is set, before ~/.kube/config', async () => {
    dir = await mkdtemp(join(tmpdir(), 'kc-'));
    const sa = join(dir, 'sa');
    await mkdir(sa);
    await writeFile(join(sa, 'token'), 'tok');
    await mkdir(join(dir, '.kube'));
    await writeFile(join(dir, '.kube', 'config'), kubeconfig('home', 'https://home.example'));
    const env = { KUBERNETES_SERVICE_HOST: 'fd00::1', KUBERNETES_SERVICE_PORT: '443' };
    const loaded = loadKubeConfig({ env, home: dir, serviceAccountDir: sa });
    expect(loaded.source).toBe('in-cluster');
    expect(loaded.kc.getCurrentCluster()?.server).toBe('https://[fd00::1]:443');
    expect(loaded.kc.getCurrentCluster()?.caFile).toBe(join(sa, 'ca.crt'));
    expect(loadKubeConfig({ env: {}, home: dir, serviceAccountDir: sa }).source).toBe('home');
  });

  it('fails clearly when nothing is configured, and never echoes file content', async () => {
    dir = await mkdtemp(join(tmpdir(), 'kc-'));
    expect(() => loadKubeConfig({ env: {}, home: dir, serviceAccountDir: join(dir, 'none') })).toThrow(
      /no Kubernetes configuration/,
    );
    await writeFile(join(dir, 'bad'), 'users: [ {token: "super-secret-value" ');
    let message = '';
    try {
      loadKubeConfig({ kubeconfig: join(dir, 'bad'), env: {}, home: dir });
    } catch (err) {
      message = (err as Error).message;
    }
    expect(message).toMatch(/cannot load kubeconfig/);
    expect(message).not.toContain('super-secret-value');
  });
});

describe('error helpers', () => {
  it('parse the raw-text body of client-node ApiException into a Status', () => {
    const err = new ApiException(409, 'Conflict', status(409, 'Conflict'), {
      'x-kubernetes-pf-flowschema-uid': 'x',
    });
    expect(statusOf(err)).toMatchObject({ code: 409, reason: 'Conflict', message: 'm409' });
    expect(isConflict(err)).toBe(true);
    expect(isAlreadyExists(err)).toBe(false);
    const exists = new ApiException(409, 'Conflict', status(409, 'AlreadyExists'), {});
    expect(isAlreadyExists(exists)).toBe(true);
    expect(isConflict(exists)).toBe(false);
  });

  it('classify by code when the body is not a Status', () => {
    const err = new ApiException(404, 'Not Found', '<html>404 page not found</html>', {});
    expect(isNotFound(err)).toBe(true);
    expect(statusOf(err)).toMatchObject({ code: 404, reason: 'NotFound' });
    expect(isGone(new ApiException(410, 'Gone', '', {}))).toBe(true);
    expect(isTooManyRequests(new ApiException(429, '', status(429, 'TooManyRequests'), {}))).toBe(true);
  });

  it('handle KubeApiError, watch ERROR Status objects and non-API errors', () => {
    expect(isGone(new KubeApiError(410, { code: 410, reason: 'Expired' }))).toBe(true);
    expect(statusCodeOf(new TypeError('fetch failed'))).toBeUndefined();
    expect(isNotFound(new Error('x'))).toBe(false);
    expect(statusOf(undefined)).toBeUndefined();
    const nodeErr = Object.assign(new Error('connect'), { code: 'ECONNREFUSED' });
    expect(statusOf(nodeErr)).toBeUndefined();
  });

  it('read Retry-After from Status details or the header', () => {
    expect(
      retryAfterSeconds(
        new ApiException(429, '', status(429, 'TooManyRequests', { details: { retryAfterSeconds: 3 } }), {}),
      ),
    ).toBe(3);
    expect(retryAfterSeconds(new ApiException(503, '', '', { 'Retry-After': '7' }))).toBe(7);
    expect(retryAfterSeconds(new ApiException(500, '', '', {}))).toBeUndefined();
  });

  it('describe errors in one line without headers or bodies beyond the Status message', () => {
    const err = new ApiException(403, 'Forbidden', status(403, 'Forbidden'), {
      authorization: 'Bearer abc.def.ghi',
    });
    expect(describeError(err)).toBe('403 Forbidden: m403');
    expect(describeError(new TypeError('fetch failed', { cause: new Error('ECONNRESET') }))).toBe(
      'TypeError: fetch failed (ECONNRESET)',
    );
  });

  it('readJson throws KubeApiError for non-2xx answers', async () => {
    const res = (code: number, text: string) => ({
      status: code,
      headers: { 'retry-after': '2' },
      text: async () => text,
      stream: () => null,
    });
    await expect(readJson(res(200, '{"a":1}'))).resolves.toEqual({ a: 1 });
    const err = await readJson(res(429, status(429, 'TooManyRequests'))).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(KubeApiError);
    expect(isTooManyRequests(err)).toBe(true);
    expect(retryAfterSeconds(err)).toBe(2);
  });
});

describe('resourcePath', () => {
  it('builds core, group, namespaced and cluster-wide paths', () => {
    expect(resourcePath({ version: 'v1', plural: 'pods', namespace: 'ns' })).toBe(
      '/api/v1/namespaces/ns/pods',
    );
    expect(resourcePath({ version: 'v1', plural: 'nodes' })).toBe('/api/v1/nodes');
    expect(resourcePath({ group: 'apps', version: 'v1', plural: 'deployments' })).toBe(
      '/apis/apps/v1/deployments',
    );
    expect(
      resourcePath({ group: 'berth.skaphos.io', version: 'v1alpha1', plural: 'berthleases', namespace: 'x' }),
    ).toBe('/apis/berth.skaphos.io/v1alpha1/namespaces/x/berthleases');
  });

  it('names one object of the collection, escaped as a path segment', () => {
    expect(resourcePath({ version: 'v1', plural: 'nodes' }, 'node-1')).toBe('/api/v1/nodes/node-1');
    expect(resourcePath({ version: 'v1', plural: 'secrets', namespace: 'ns' }, 'a/b?c')).toBe(
      '/api/v1/namespaces/ns/secrets/a%2Fb%3Fc',
    );
  });
});

/** A kubeconfig for a plain-HTTP test server on loopback, with a bearer token. */
function plainKubeConfig(port: number): KubeConfig {
  const kc = new KubeConfig();
  kc.loadFromOptions({
    clusters: [{ name: 'c', server: `http://127.0.0.1:${port}`, skipTLSVerify: true }],
    users: [{ name: 'u', token: 't' }],
    contexts: [{ name: 'x', cluster: 'c', user: 'u' }],
    currentContext: 'x',
  });
  return kc;
}

describe('KubeTransport request timeout', () => {
  // A server that answers nothing (`hang`), or only the headers and half a body (`stall`), or a watch
  // that stays open; the test clock decides when the transport gives up.
  async function server() {
    const held: ServerResponse[] = [];
    const seen: string[] = [];
    const srv = createServer((req, res) => {
      seen.push(req.url ?? '');
      held.push(res);
      if (req.url?.includes('stall') || req.url?.includes('watch=true')) {
        res.writeHead(200, { 'Content-Type': 'application/json' });
        res.write('{"kind":');
      }
    });
    await new Promise<void>((resolve) => srv.listen(0, '127.0.0.1', resolve));
    const { port } = srv.address() as AddressInfo;
    const kc = plainKubeConfig(port);
    const clock = new ManualClock();
    const transport = new KubeTransport(kc, { requestTimeoutMs: 5_000, clock });
    cleanups.push(async () => {
      await transport.close();
      for (const res of held) res.destroy();
      srv.closeAllConnections();
      await new Promise<void>((resolve) => srv.close(() => resolve()));
    });
    return { transport, clock, seen };
  }

  const cleanups: Array<() => Promise<void>> = [];
  afterEach(async () => {
    for (const c of cleanups.splice(0)) await c();
  });

  /** Whether `p` has settled after a few event-loop turns (and how). */
  async function outcome(p: Promise<unknown>): Promise<string> {
    let state = 'pending';
    p.then(
      () => {
        state = 'resolved';
      },
      (err: unknown) => {
        state = `rejected: ${err instanceof Error ? `${err.name}: ${err.message}` : String(err)}`;
      },
    );
    for (let i = 0; i < 5; i++) await new Promise((resolve) => setImmediate(resolve));
    return state;
  }

  it('fails a request that gets no answer once the timeout passes, and not before', async () => {
    const { transport, clock, seen } = await server();
    const req = transport.request({ path: '/api/v1/namespaces/hang' });
    req.catch(() => {});
    await eventually(() => seen.length === 1);
    clock.advance(4_999);
    expect(await outcome(req)).toBe('pending');
    clock.advance(1);
    expect(await outcome(req)).toBe(
      'rejected: RequestTimeoutError: GET /api/v1/namespaces/hang timed out after 5000ms',
    );
  });

  it('bounds reading the body too', async () => {
    const { transport, clock } = await server();
    const res = await transport.request({ path: '/api/v1/namespaces/stall' });
    expect(res.status).toBe(200);
    const body = res.text();
    body.catch(() => {});
    expect(await outcome(body)).toBe('pending');
    clock.advance(5_000);
    expect(await outcome(body)).toMatch(/^rejected: RequestTimeoutError/);
  });

  it('leaves watches and answered requests alone, and keeps a caller abort as is', async () => {
    const { transport, clock } = await server();
    const watch = await transport.request({ path: '/api/v1/pods', query: { watch: true } });
    expect(watch.status).toBe(200);
    expect(clock.pending()).toBe(0);
    const reader = watch.stream()?.getReader();
    const chunk = await reader?.read();
    expect(chunk?.done).toBe(false);
    clock.advance(60_000);
    const next = reader?.read() ?? Promise.resolve();
    next.catch(() => {});
    expect(await outcome(next)).toBe('pending');
    await reader?.cancel();

    const caller = new AbortController();
    const req = transport.request({ path: '/api/v1/namespaces/hang', signal: caller.signal });
    req.catch(() => {});
    caller.abort(new Error('caller gave up'));
    expect(await outcome(req)).toBe('rejected: Error: caller gave up');
    expect(clock.pending()).toBe(0);
  });
});

describe('KubeTransport metrics', () => {
  it("count every request as client-go's rest_client metrics do, once, at the end of its answer", async () => {
    const srv = createServer((req, res) => {
      if (req.url?.includes('watch=true')) {
        res.writeHead(200, { 'Content-Type': 'application/json' });
        res.write('{"type":"BOOKMARK"}\n');
        return;
      }
      const found = req.url === '/api/v1/namespaces/default';
      res.writeHead(found ? 200 : 404, { 'Content-Type': 'application/json' });
      res.end(found ? '{"kind":"Namespace"}' : status(404, 'NotFound'));
    });
    await new Promise<void>((resolve) => srv.listen(0, '127.0.0.1', resolve));
    const { port } = srv.address() as AddressInfo;
    const kc = plainKubeConfig(port);
    const registry = createRegistry({ defaultMetrics: false });
    const transport = new KubeTransport(kc, { registry });
    try {
      for (const path of [
        '/api/v1/namespaces/default',
        '/api/v1/namespaces/default',
        '/api/v1/namespaces/gone',
      ]) {
        const res = await transport.request({ path });
        await res.text();
        await res.text().catch(() => '');
      }
      const watch = await transport.request({ path: '/api/v1/pods', query: { watch: true } });
      await watch.stream()?.cancel();
      const text = await registry.metrics();
      const host = `127.0.0.1:${port}`;
      expect(text).toContain(`rest_client_requests_total{code="200",method="GET",host="${host}"} 3`);
      expect(text).toContain(`rest_client_requests_total{code="404",method="GET",host="${host}"} 1`);
      expect(text).toContain(`rest_client_request_duration_seconds_count{verb="GET",host="${host}"} 4`);
      expect(text).toContain(
        `rest_client_request_duration_seconds_bucket{le="60",verb="GET",host="${host}"} 4`,
      );
    } finally {
      await transport.close();
      srv.closeAllConnections();
      await new Promise<void>((resolve) => srv.close(() => resolve()));
    }
    // No answer at all: counted as client-go does, with code <error>.
    const afterClose = createRegistry({ defaultMetrics: false });
    const refused = new KubeTransport(kc, { registry: afterClose });
    await expect(refused.request({ path: '/api/v1/namespaces/default' })).rejects.toThrow();
    expect(await afterClose.metrics()).toContain(
      `rest_client_requests_total{code="<error>",method="GET",host="127.0.0.1:${port}"} 1`,
    );
    await refused.close();
  });
});
