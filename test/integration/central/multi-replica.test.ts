// Several central replicas (in-process servers, each with its own store instance) on one PostgreSQL,
// one MariaDB and one Kubernetes API server (SQLite: one replica, its only supported shape), under
// concurrent acquires, renews, releases and abandons from many holders, with every replica's TTL
// collector running: at most one holder per key at any instant, no token reuse, no lost grant.
import { afterAll, describe, expect, it } from 'vitest';
import { K8sLeaseStore } from '../../../src/central/k8sstore.ts';
import { type CentralServer, startCentralServer } from '../../../src/central/server.ts';
import { SQL_DRIVERS } from '../../../src/central/sql/dialect.ts';
import { SqlStore } from '../../../src/central/sql/store.ts';
import type { Store } from '../../../src/central/store.ts';
import { createLogger } from '../../../src/observability/logger.ts';
import { centralTls } from '../../helpers/central-tls.ts';
import { TestCluster } from '../../helpers/cluster.ts';
import { type Hold, historyViolations, runContention } from './contention.ts';
import { sqlTestDatabase } from './sql-databases.ts';

const REPLICAS = 3;
const OPTIONS = { holders: 12, keys: 3, minHoldsPerKey: 8, maxDurationMs: 40_000, ttlSeconds: 1 };
const quiet = createLogger({ level: 'silent' });

async function contend(stores: Store[]): Promise<Awaited<ReturnType<typeof runContention>>> {
  const servers: CentralServer[] = [];
  try {
    // Collect as soon as a lease expires, so the collectors race the holders too.
    for (const store of stores)
      servers.push(
        await startCentralServer({
          tls: await centralTls(),
          store,
          logger: quiet,
          gc: { intervalMs: 50, graceMs: 0 },
        }),
      );
    return await runContention(
      servers.map((s) => s.url),
      OPTIONS,
    );
  } finally {
    for (const s of servers) await s.stop();
  }
}

function expectSafe(result: Awaited<ReturnType<typeof runContention>>): void {
  expect(result.problems).toEqual([]);
  expect(historyViolations(result.holds)).toEqual([]);
  // Not vacuous: every key changed hands several times, through releases and through expiry.
  const perKey = new Map<string, Hold[]>();
  for (const h of result.holds) perKey.set(h.key, [...(perKey.get(h.key) ?? []), h]);
  expect(perKey.size).toBe(OPTIONS.keys);
  for (const list of perKey.values()) expect(list.length).toBeGreaterThanOrEqual(OPTIONS.minHoldsPerKey);
  expect(result.holds.some((h) => h.releasedAt === undefined)).toBe(true);
  expect(result.holds.some((h) => h.releasedAt !== undefined)).toBe(true);
}

describe('history check', () => {
  it('catches overlapping holders, reused and skipped tokens', () => {
    const base = { key: 'k', expiresAt: 2_000 };
    expect(
      historyViolations([
        { ...base, holder: 'a', token: 1, start: 1_000 },
        { ...base, holder: 'b', token: 2, start: 1_500, expiresAt: 3_000 },
      ]),
    ).toEqual(['k: token 2 (b) granted at 1500, while token 1 (a) held until its expiry at 2000']);
    expect(
      historyViolations([
        { ...base, holder: 'a', token: 1, start: 1_000, releasedAt: 1_600 },
        { ...base, holder: 'b', token: 2, start: 1_500 },
      ]),
    ).toEqual(['k: token 2 (b) granted at 1500, while token 1 (a) held until its release at 1600']);
    expect(historyViolations([{ ...base, holder: 'a', token: 2, start: 1_000 }])).toEqual([
      'k: token 1 was never granted (next seen: 2)',
    ]);
    expect(
      historyViolations([
        { ...base, holder: 'a', token: 1, start: 1_000, releasedAt: 1_200 },
        { ...base, holder: 'b', token: 2, start: 1_200, expiresAt: 2_500 },
        { ...base, holder: 'c', token: 3, start: 2_501, expiresAt: 3_500 },
      ]),
    ).toEqual([]);
  });
});

for (const driver of SQL_DRIVERS) {
  const result = await sqlTestDatabase(driver, `multi-replica central on ${driver}`);
  if (!result.ok) {
    describe.skip(`multi-replica central on ${driver}: ${result.reason}`, () => {
      it(`needs ${driver}`, () => {});
    });
    continue;
  }
  const db = result.db;
  afterAll(() => db.stop());
  const replicas = driver === 'sqlite' ? 1 : REPLICAS;
  describe(`multi-replica central on one ${driver} database`, () => {
    it(`keeps one holder per key across ${replicas} replica${replicas === 1 ? '' : 's'} and ${OPTIONS.holders} holders`, {
      timeout: 60_000,
    }, async () => {
      const d = await db.create();
      const stores: SqlStore[] = [];
      try {
        for (let i = 0; i < replicas; i++)
          stores.push(await SqlStore.open({ driver, dsn: d.dsn, logger: quiet }));
        expectSafe(await contend(stores));
      } finally {
        for (const s of stores) await s.close();
        await d.drop();
      }
    });
  });
}

describe('multi-replica central on one Kubernetes API server', () => {
  it(`keeps one holder per key across ${REPLICAS} replicas and ${OPTIONS.holders} holders`, {
    timeout: 60_000,
  }, async () => {
    const t = await TestCluster.shared();
    try {
      const namespace = await t.namespace('berth-leases');
      const stores = Array.from({ length: REPLICAS }, () => new K8sLeaseStore({ kc: t.kc, namespace }));
      expectSafe(await contend(stores));
    } finally {
      await t.stop();
    }
  });
});
