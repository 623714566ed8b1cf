import { createServer, type Server } from 'node:http';
import { createServer as createHttpsServer } from 'node:https';
import type { AddressInfo } from 'node:net';
import { afterEach, describe, expect, it } from 'vitest';
import { generateCa, issueLeaf } from '../../../certs/issue.ts';
import { ManualClock } from '../../../src/kube/clock.ts';
import {
  createToggleCheck,
  formatAggregate,
  type MetricsSecurity,
  ProbeServer,
  type ProbeServerOptions,
  parseBindAddress,
  sanitizeReason,
} from '../../../src/observability/health.ts';
import { createRegistry, getOrCreateCounter } from '../../../src/observability/metrics.ts';
import { scrape } from '../../helpers/scrape.ts';

const LOCAL = '127.0.0.1:0';
const started: ProbeServer[] = [];

afterEach(async () => {
  await Promise.all(started.splice(0).map((s) => s.stop()));
});

async function start(options: Partial<ProbeServerOptions> = {}) {
  const registry = options.registry ?? createRegistry({ defaultMetrics: false });
  const server = new ProbeServer({
    healthProbeBindAddress: LOCAL,
    metricsBindAddress: LOCAL,
    ...options,
    registry,
  });
  started.push(server);
  const bound = await server.start();
  return { server, registry, ...bound };
}

async function get(base: string | undefined, path: string): Promise<{ status: number; body: string }> {
  if (base === undefined) throw new Error('server not bound');
  const res = await fetch(`${base}${path}`);
  return { status: res.status, body: await res.text() };
}

describe('parseBindAddress', () => {
  it('parses Go-style addresses and treats 0/empty as disabled', () => {
    expect(parseBindAddress(':8081')).toEqual({ host: '', port: 8081 });
    expect(parseBindAddress('127.0.0.1:0')).toEqual({ host: '127.0.0.1', port: 0 });
    expect(parseBindAddress('[::1]:8080')).toEqual({ host: '::1', port: 8080 });
    expect(parseBindAddress('0')).toBeUndefined();
    expect(parseBindAddress('')).toBeUndefined();
    for (const bad of ['8080', 'host', ':99999', 'a:b', '::1:80']) {
      expect(() => parseBindAddress(bad), bad).toThrow(/invalid bind address/);
    }
  });
});

describe('formatAggregate', () => {
  it('answers a terse ok unless verbose or failing', () => {
    expect(formatAggregate('readyz', [{ name: 'a', healthy: true }], false)).toEqual({
      status: 200,
      body: 'ok',
    });
    expect(
      formatAggregate(
        'readyz',
        [
          { name: 'b', healthy: true },
          { name: 'a', healthy: true },
        ],
        true,
      ),
    ).toEqual({
      status: 200,
      body: '[+]a ok\n[+]b ok\nreadyz check passed\n',
    });
  });

  it('lists every check sorted, with reasons, when one fails', () => {
    const out = formatAggregate(
      'healthz',
      [
        { name: 'zeta', healthy: true },
        { name: 'alpha', healthy: false, reason: 'boom' },
        { name: 'mid', healthy: true, excluded: true },
      ],
      false,
      ['nope'],
    );
    expect(out.status).toBe(500);
    expect(out.body).toBe(
      '[-]alpha failed: boom\n[+]mid excluded: ok\n[+]zeta ok\n' +
        'warn: some health checks cannot be excluded: no matches for "nope"\nhealthz check failed\n',
    );
  });

  it('sanitizeReason keeps one short line without secrets', () => {
    expect(sanitizeReason('first\nsecond')).toBe('first');
    expect(sanitizeReason('auth Bearer abc123xyz failed')).toBe('auth Bearer [REDACTED] failed');
    expect(sanitizeReason('x'.repeat(500))).toHaveLength(203);
  });
});

describe('ProbeServer over HTTP', () => {
  it('serves /healthz, /livez and /readyz with named checks and verbose output', async () => {
    const { server, health, metrics } = await start();
    expect(metrics).toEqual(health); // same address: one server for both
    expect(health?.url).toMatch(/^http:\/\/127\.0\.0\.1:\d+$/);

    // No checks registered: a default ping.
    expect(await get(health?.url, '/readyz')).toEqual({ status: 200, body: 'ok' });
    expect(await get(health?.url, '/readyz?verbose')).toEqual({
      status: 200,
      body: '[+]ping ok\nreadyz check passed\n',
    });

    const draining = createToggleCheck();
    server.addHealthzCheck('ping', () => {});
    server.addReadyzCheck('shutdown', draining.check);
    server.addReadyzCheck('informers', async () => {});

    expect(await get(health?.url, '/healthz')).toEqual({ status: 200, body: 'ok' });
    expect(await get(health?.url, '/livez?verbose')).toEqual({
      status: 200,
      body: '[+]ping ok\nlivez check passed\n',
    });
    expect(await get(health?.url, '/readyz?verbose')).toEqual({
      status: 200,
      body: '[+]informers ok\n[+]shutdown ok\nreadyz check passed\n',
    });

    draining.fail('shutting down');
    expect(draining.failing).toBe(true);
    expect(await get(health?.url, '/readyz')).toEqual({
      status: 500,
      body: '[+]informers ok\n[-]shutdown failed: shutting down\nreadyz check failed\n',
    });
    expect(await get(health?.url, '/readyz/shutdown')).toEqual({
      status: 500,
      body: 'internal server error: shutting down\n',
    });
    expect(await get(health?.url, '/readyz/informers')).toEqual({ status: 200, body: 'ok' });
    // Liveness is unaffected by readiness.
    expect((await get(health?.url, '/healthz')).status).toBe(200);

    // An excluded check does not fail the aggregate.
    expect(await get(health?.url, '/readyz?exclude=shutdown')).toEqual({ status: 200, body: 'ok' });

    draining.pass();
    expect((await get(health?.url, '/readyz')).status).toBe(200);
  });

  it('reports thrown and rejected checks, and 404s unknown paths', async () => {
    const { server, health } = await start();
    server.addReadyzCheck('sync', () => {
      throw new Error('informer pods not synced');
    });
    server.addReadyzCheck('async', () => Promise.reject(new Error('lease API unreachable\nstack...')));
    const res = await get(health?.url, '/readyz');
    expect(res.status).toBe(500);
    expect(res.body).toContain('[-]async failed: lease API unreachable\n');
    expect(res.body).toContain('[-]sync failed: informer pods not synced\n');
    expect(res.body).toMatch(/readyz check failed\n$/);

    expect((await get(health?.url, '/readyz/missing')).status).toBe(404);
    expect((await get(health?.url, '/nothing')).status).toBe(404);
    expect((await get(health?.url, '/readyz/sync/extra')).status).toBe(404);
    const post = await fetch(`${health?.url}/healthz`, { method: 'POST' });
    expect(post.status).toBe(405);
    await post.text();
  });

  it('removes checks and rejects duplicate or malformed names', async () => {
    const { server, health } = await start();
    server.addReadyzCheck('gate', () => {
      throw new Error('closed');
    });
    expect(() => server.addReadyzCheck('gate', () => {})).toThrow(/already exists/);
    expect(() => server.addReadyzCheck('bad/name', () => {})).toThrow(/invalid/);
    expect((await get(health?.url, '/readyz')).status).toBe(500);
    expect(server.removeReadyzCheck('gate')).toBe(true);
    expect((await get(health?.url, '/readyz')).status).toBe(200);
  });

  it('fails a check that hangs past the timeout', async () => {
    const clock = new ManualClock();
    // An hour: only the injected clock can make this test finish in time.
    const { server, health } = await start({ clock, checkTimeoutMs: 3_600_000 });
    let entered!: () => void;
    const running = new Promise<void>((resolve) => {
      entered = resolve;
    });
    server.addReadyzCheck('stuck', () => {
      entered();
      return new Promise<void>(() => {});
    });
    const response = get(health?.url, '/readyz?verbose');
    await running;
    clock.advance(3_599_999);
    clock.advance(1);
    expect(await response).toEqual({
      status: 500,
      body: '[-]stuck failed: timed out after 3600000ms\nreadyz check failed\n',
    });
    expect(clock.pending()).toBe(0);
  });

  it('serves /metrics from the registry', async () => {
    const registry = createRegistry({ defaultMetrics: false });
    getOrCreateCounter(registry, { name: 'berth_probe_test_total', help: 'test' }).inc(3);
    const { metrics } = await start({ registry });
    const res = await fetch(`${metrics?.url}/metrics`);
    expect(res.status).toBe(200);
    expect(res.headers.get('content-type')).toContain('text/plain');
    expect(await res.text()).toContain('berth_probe_test_total 3');
  });

  it('runs probes and metrics on separate ports, each serving only its own paths', async () => {
    const { health, metrics } = await start({
      healthProbeBindAddress: LOCAL,
      metricsBindAddress: 'localhost:0',
    });
    expect(health?.port).not.toBe(metrics?.port);
    expect((await get(health?.url, '/healthz')).status).toBe(200);
    expect((await get(health?.url, '/metrics')).status).toBe(404);
    expect((await get(metrics?.url, '/metrics')).status).toBe(200);
    expect((await get(metrics?.url, '/healthz')).status).toBe(404);
  });

  it('does not serve metrics when the address is 0', async () => {
    const { health, metrics } = await start({ metricsBindAddress: '0' });
    expect(metrics).toBeUndefined();
    expect((await get(health?.url, '/metrics')).status).toBe(404);
    expect((await get(health?.url, '/healthz')).status).toBe(200);
  });

  it('rejects start() when the port is taken, and stop() closes the listener', async () => {
    const blocker: Server = createServer();
    await new Promise<void>((resolve) => blocker.listen(0, '127.0.0.1', resolve));
    const port = (blocker.address() as AddressInfo).port;
    try {
      const probe = new ProbeServer({
        healthProbeBindAddress: `127.0.0.1:${port}`,
        metricsBindAddress: '0',
        registry: createRegistry({ defaultMetrics: false }),
      });
      await expect(probe.start()).rejects.toThrow(/EADDRINUSE/);
    } finally {
      await new Promise<void>((resolve) => blocker.close(() => resolve()));
    }

    const { server, health } = await start();
    expect((await get(health?.url, '/healthz')).status).toBe(200);
    await server.stop();
    await expect(fetch(`${health?.url}/healthz`)).rejects.toThrow();
  });
});

describe('ProbeServer with secure metrics', () => {
  async function security(): Promise<{ security: MetricsSecurity; headers: (string | undefined)[] }> {
    const now = Date.now();
    const ca = await generateCa({ now, validityMs: 3_600_000 });
    const leaf = await issueLeaf(ca, { now, validityMs: 3_600_000, dnsNames: ['localhost'] });
    const headers: (string | undefined)[] = [];
    return {
      headers,
      security: {
        createServer: (listener) => createHttpsServer({ cert: leaf.cert, key: leaf.key }, listener),
        authorize: async (authorization) => {
          headers.push(authorization);
          return authorization === 'Bearer good'
            ? undefined
            : { status: 401, body: 'Unauthorized: no\n', headers: { 'www-authenticate': 'Bearer' } };
        },
      },
    };
  }

  it('serves metrics over HTTPS on a listener of their own, probes staying plain HTTP', async () => {
    const registry = createRegistry({ defaultMetrics: false });
    getOrCreateCounter(registry, { name: 'berth_probe_test_total', help: 'test' }).inc(2);
    const secure = await security();
    // The same address twice (free ports) shares one listener only when metrics are plain.
    const { health, metrics } = await start({ registry, metricsSecurity: secure.security });
    expect(health?.url).toMatch(/^http:\/\//);
    expect(metrics?.url).toMatch(/^https:\/\//);
    expect(metrics?.port).not.toBe(health?.port);
    expect((await get(health?.url, '/healthz')).status).toBe(200);
    expect((await get(health?.url, '/readyz')).status).toBe(200);
    expect((await get(health?.url, '/metrics')).status).toBe(404);
    const at = `127.0.0.1:${metrics?.port}`;
    const served = await scrape(at, 'good');
    expect(served.status).toBe(200);
    expect(served.body).toContain('berth_probe_test_total 2');
    expect((await scrape(at, 'good', '/healthz')).status).toBe(404);
    // The authorizer's refusal is the answer, headers included.
    const refused = await scrape(at);
    expect(refused.status).toBe(401);
    expect(refused.body).toBe('Unauthorized: no\n');
    expect(refused.headers['www-authenticate']).toBe('Bearer');
    expect(refused.body).not.toContain('berth_probe_test_total');
    expect(secure.headers).toEqual(['Bearer good', undefined]);
  });
});
