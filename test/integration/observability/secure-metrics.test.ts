// `--metrics-secure` against the real kube-apiserver: the operator's secure metrics listener (built as
// run.ts builds it) reviews real ServiceAccount tokens through a recording ApiProxy, as a ServiceAccount
// granted the install's review rules; a scraper granted the install's reader role gets the metrics.
// Caching and shared reviews are counted on the proxy's records; time moves on a ManualClock.
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { KubeConfig } from '@kubernetes/client-node';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { generateCa, issueLeaf } from '../../../certs/issue.ts';
import { metricsAuthRules, metricsReaderRole } from '../../../scripts/deploy-rbac.ts';
import { ManualClock } from '../../../src/kube/clock.ts';
import type { RunnableContext } from '../../../src/kube/manager.ts';
import { ProbeServer } from '../../../src/observability/health.ts';
import { createLogger } from '../../../src/observability/logger.ts';
import { createRegistry, getOrCreateCounter } from '../../../src/observability/metrics.ts';
import { type SecureMetrics, secureMetrics } from '../../../src/secure-metrics.ts';
import { ApiProxy } from '../../helpers/api-proxy.ts';
import { type ServiceAccountUser, TestCluster } from '../../helpers/cluster.ts';
import { eventually } from '../../helpers/eventually.ts';
import { scrape } from '../../helpers/scrape.ts';

const logger = createLogger({ level: process.env.BERTH_TEST_LOGS ? 'debug' : 'silent' });
const ctx: RunnableContext = {
  logger,
  fail: (err) => {
    throw err;
  },
};

interface Listener {
  at: string;
  stop(): Promise<void>;
}

/** The secure metrics listener on a free port, its certificate provider started. */
async function listen(metrics: SecureMetrics): Promise<Listener> {
  const registry = createRegistry({ defaultMetrics: false });
  getOrCreateCounter(registry, { name: 'berth_secure_metrics_test_total', help: 'test' }).inc(7);
  const probes = new ProbeServer({
    healthProbeBindAddress: '0',
    metricsBindAddress: '127.0.0.1:0',
    metricsSecurity: metrics.security,
    registry,
  });
  const bound = await probes.start();
  const running = new AbortController();
  await metrics.runnable.start(running.signal, ctx);
  return {
    at: `127.0.0.1:${bound.metrics?.port}`,
    stop: async () => {
      running.abort();
      await metrics.runnable.stop?.();
      await probes.stop();
    },
  };
}

let t: TestCluster;
let proxy: ApiProxy;
let ns: string;
let operator: ServiceAccountUser;
let operatorKubeConfig: KubeConfig;
let reader: ServiceAccountUser;
let stranger: ServiceAccountUser;
const clock = new ManualClock(Date.now());
let server: Listener;

/**
 * A new ServiceAccount granted the install's reader role: its first scrape is reviewed afresh (a new token
 * of the same account could share the cached access of an earlier one).
 */
async function newReader(name: string): Promise<ServiceAccountUser> {
  const account = await t.serviceAccount(ns, name);
  await t.grant(account.username, metricsReaderRole().rules ?? []);
  return account;
}

/** Reviews the operator has sent so far (every answer, 403s and resets included). */
const reviews = () => {
  const mine = proxy.records.filter((r) => r.user === operator.username);
  return {
    tokenReviews: mine.filter((r) => r.resource === 'tokenreviews').length,
    accessReviews: mine.filter((r) => r.resource === 'subjectaccessreviews').length,
  };
};

beforeAll(async () => {
  t = await TestCluster.shared();
  ns = await t.namespace('secure-metrics');
  operator = await t.serviceAccount(ns, 'berth-operator');
  await t.grant(operator.username, metricsAuthRules());
  reader = await newReader('prometheus');
  stranger = await t.serviceAccount(ns, 'stranger');
  proxy = await ApiProxy.start(t);
  operatorKubeConfig = t.kubeConfigFor(proxy.kubeconfigFor(operator.kubeconfig));
  server = await listen(
    secureMetrics({ certDir: '', transport: t.transport(operatorKubeConfig), logger, clock }),
  );
});

afterAll(async () => {
  await server?.stop();
  await proxy?.stop();
  await t?.stop();
});

describe('secure metrics with TokenReview and SubjectAccessReview', () => {
  it('serves the metrics to a scraper bound to the reader role', async () => {
    const res = await scrape(server.at, reader.token);
    expect(res.status).toBe(200);
    expect(res.body).toContain('berth_secure_metrics_test_total 7');
  });

  it('forbids an authenticated ServiceAccount without the role (403)', async () => {
    const res = await scrape(server.at, stranger.token);
    expect(res.status).toBe(403);
    expect(res.body).toBe(`Forbidden: user "${stranger.username}" may not get /metrics\n`);
    expect(res.body).not.toContain('berth_secure_metrics_test_total');
  });

  it('refuses a scrape without a token (401), asking the API server nothing', async () => {
    const before = reviews();
    const res = await scrape(server.at);
    expect(res.status).toBe(401);
    expect(res.headers['www-authenticate']).toMatch(/^Bearer /);
    expect(res.body).not.toContain('berth_secure_metrics_test_total');
    expect(reviews()).toEqual(before);
  });

  it('refuses a token the API server does not authenticate (401)', async () => {
    const before = reviews();
    const garbage = await scrape(server.at, 'not-a-token');
    expect(garbage.status).toBe(401);
    expect(garbage.body).toBe('Unauthorized: the bearer token is not valid\n');
    // A well-formed ServiceAccount JWT whose signature is not the API server's.
    const [header, payload] = reader.token.split('.');
    const forged = await scrape(server.at, `${header}.${payload}.c2lnbmF0dXJl`);
    expect(forged.status).toBe(401);
    expect(reviews()).toEqual({ tokenReviews: before.tokenReviews + 2, accessReviews: before.accessReviews });
  });

  it('reviews a token once within its 10 s, and the access it was given for 5 min', async () => {
    const fresh = await newReader('cache-reader');
    const before = reviews();
    for (let i = 0; i < 3; i++) expect((await scrape(server.at, fresh.token)).status).toBe(200);
    expect(reviews()).toEqual({
      tokenReviews: before.tokenReviews + 1,
      accessReviews: before.accessReviews + 1,
    });
    clock.advance(10_000);
    expect((await scrape(server.at, fresh.token)).status).toBe(200);
    expect(reviews()).toEqual({
      tokenReviews: before.tokenReviews + 2,
      accessReviews: before.accessReviews + 1,
    });
    clock.advance(5 * 60_000);
    expect((await scrape(server.at, fresh.token)).status).toBe(200);
    expect(reviews()).toEqual({
      tokenReviews: before.tokenReviews + 3,
      accessReviews: before.accessReviews + 2,
    });
  });

  it('shares one review among concurrent scrapes with the same token', async () => {
    const fresh = await newReader('concurrent-reader');
    const before = reviews();
    const answers = await Promise.all(Array.from({ length: 6 }, () => scrape(server.at, fresh.token)));
    expect(answers.map((a) => a.status)).toEqual([200, 200, 200, 200, 200, 200]);
    expect(reviews()).toEqual({
      tokenReviews: before.tokenReviews + 1,
      accessReviews: before.accessReviews + 1,
    });
  });

  it('fails closed with 503 while the API server does not answer, and caches nothing then', async () => {
    const fresh = await newReader('unanswered-token-reader');
    const fault = proxy.inject({ user: operator.username, resource: 'tokenreviews', resetConnection: true });
    try {
      const res = await scrape(server.at, fresh.token);
      expect(res.status).toBe(503);
      expect(res.body).toContain("the scrape's credentials could not be checked");
      expect(res.body).not.toContain('berth_secure_metrics_test_total');
      expect(fault.hits()).toBe(1);
    } finally {
      fault.remove();
    }
    // The failure was not cached: the next scrape is reviewed, and served.
    expect((await scrape(server.at, fresh.token)).status).toBe(200);
    // An unanswered SubjectAccessReview also fails closed.
    const other = await newReader('unanswered-access-reader');
    const sar = proxy.inject({ user: operator.username, resource: 'subjectaccessreviews', status: 500 });
    try {
      const res = await scrape(server.at, other.token);
      expect(res.status).toBe(503);
      expect(res.body).toContain('SubjectAccessReview');
    } finally {
      sar.remove();
    }
    expect((await scrape(server.at, other.token)).status).toBe(200);
  });
});

describe('secure metrics with --metrics-cert-dir', () => {
  it('serves the pair in the directory and picks up a new one without a restart', async () => {
    const dir = await mkdtemp(join(tmpdir(), 'berth-metrics-certs-'));
    const issue = async () => {
      const now = Date.now();
      const ca = await generateCa({ now, validityMs: 3_600_000 });
      return issueLeaf(ca, {
        now,
        validityMs: 3_600_000,
        dnsNames: ['berth-operator-metrics.berth-system.svc'],
      });
    };
    const write = async (pair: { cert: string; key: string }) => {
      await writeFile(join(dir, 'tls.key'), pair.key);
      await writeFile(join(dir, 'tls.crt'), pair.cert);
    };
    const first = await issue();
    await write(first);
    const files = await listen(
      secureMetrics({ certDir: dir, transport: t.transport(operatorKubeConfig), logger }),
    );
    try {
      // The listener answers (401: no token) with the directory's certificate.
      const res = await scrape(files.at);
      expect(res.status).toBe(401);
      expect(res.fingerprint).toBe(first.info.fingerprint);
      expect((await scrape(files.at, reader.token)).status).toBe(200);
      const second = await issue();
      await write(second);
      await eventually(async () => (await scrape(files.at)).fingerprint === second.info.fingerprint, {
        timeoutMs: 20_000,
        intervalMs: 100,
      });
    } finally {
      await files.stop();
      await rm(dir, { recursive: true, force: true });
    }
  });
});
