// The contract every central lease Store must pass (the Go `storetest.RunStoreConformance`): CAS on the
// version as the only write predicate, exactly-one-winner under concurrency, faithful round trips, no
// aliasing, and the lease guarantees (tokens never repeat) when the manager runs on top of it.
//
//   runStoreConformance('postgres', async () => ({ store: await openPostgresStore(dsn), cleanup }))
//
// `makeStore` must return an empty store; `cleanup` (optional) runs after each test, after store.close().
import { afterEach, describe, expect, it } from 'vitest';
import { TtlCollector } from '../../../src/central/gc.ts';
import { LeaseManager, ReleaseConflictError } from '../../../src/central/manager.ts';
import { INT32_MAX, type LeaseKey, type LeaseRecord } from '../../../src/central/record.ts';
import { isStoreConflict, type Store, type StoreConflictError } from '../../../src/central/store.ts';
import { ManualClock } from '../../../src/kube/clock.ts';

export interface StoreFixture {
  store: Store;
  cleanup?: () => Promise<void>;
}

export type MakeStore = () => StoreFixture | Promise<StoreFixture>;

const T0 = Date.UTC(2026, 8, 7, 9, 0, 0, 123);

const record = (key: LeaseKey, overrides: Partial<LeaseRecord> = {}): LeaseRecord => ({
  key: { ...key },
  holder: 'cluster-east',
  ttlMs: 30_000,
  acquiredAt: T0,
  renewedAt: T0 + 1_000,
  fencingToken: 1,
  version: 0,
  ...overrides,
});

async function conflict(p: Promise<unknown>): Promise<StoreConflictError> {
  try {
    await p;
  } catch (err) {
    if (isStoreConflict(err)) return err;
    throw err;
  }
  throw new Error('expected a StoreConflictError');
}

export function runStoreConformance(name: string, makeStore: MakeStore): void {
  describe(`store conformance: ${name}`, () => {
    let fixtures: StoreFixture[] = [];
    const open = async (): Promise<Store> => {
      const fixture = await makeStore();
      fixtures.push(fixture);
      return fixture.store;
    };
    afterEach(async () => {
      for (const f of fixtures) {
        await f.store.close?.();
        await f.cleanup?.();
      }
      fixtures = [];
    });

    const key: LeaseKey = { namespace: 'pipeline', name: 'ingest' };

    it('pings', async () => {
      const store = await open();
      await expect(store.ping()).resolves.toBeUndefined();
      expect(store.backend).toMatch(/^[a-z0-9-]+$/);
    });

    it('gets undefined for an absent key and lists nothing when empty', async () => {
      const store = await open();
      expect(await store.get(key)).toBeUndefined();
      expect(await store.list()).toEqual([]);
    });

    it('creates with expected version 0, storing version 1, and round-trips every field', async () => {
      const store = await open();
      const written = record(key, { fencingToken: INT32_MAX - 1, holder: 'tenant/with-slash' });
      const stored = await store.put(0, { ...written, version: 42 });
      expect(stored).toEqual({ ...written, version: 1 });
      expect(await store.get(key)).toEqual({ ...written, version: 1 });
    });

    it('round-trips a tombstone (empty holder, zero ttl)', async () => {
      const store = await open();
      await store.put(0, record(key));
      const tomb = record(key, { holder: '', ttlMs: 0, renewedAt: T0 + 5_000, fencingToken: 3 });
      await store.put(1, tomb);
      expect(await store.get(key)).toEqual({ ...tomb, version: 2 });
    });

    it('refuses to create over an existing record', async () => {
      const store = await open();
      await store.put(0, record(key));
      await conflict(store.put(0, record(key, { holder: 'cluster-west' })));
      expect((await store.get(key))?.holder).toBe('cluster-east');
    });

    it('updates only at the current version, bumping it by one', async () => {
      const store = await open();
      await store.put(0, record(key));
      expect((await store.put(1, record(key, { renewedAt: T0 + 2_000 }))).version).toBe(2);
      await conflict(store.put(1, record(key, { holder: 'stale' })));
      await conflict(store.put(3, record(key, { holder: 'future' })));
      expect(await store.get(key)).toEqual(record(key, { renewedAt: T0 + 2_000, version: 2 }));
      expect((await store.put(2, record(key, { renewedAt: T0 + 3_000 }))).version).toBe(3);
    });

    it('refuses an update of an absent record', async () => {
      const store = await open();
      await conflict(store.put(1, record(key)));
      expect(await store.get(key)).toBeUndefined();
    });

    it('changes the version on every write, even an identical one', async () => {
      const store = await open();
      await store.put(0, record(key));
      await store.put(1, record(key));
      await conflict(store.put(1, record(key)));
      expect((await store.get(key))?.version).toBe(2);
    });

    it('lets exactly one of many concurrent writers at the same version win', async () => {
      const store = await open();
      await store.put(0, record(key));
      const results = await Promise.allSettled(
        Array.from({ length: 16 }, (_, i) => store.put(1, record(key, { holder: `writer-${i}` }))),
      );
      const won = results.filter((r) => r.status === 'fulfilled');
      expect(won).toHaveLength(1);
      for (const r of results)
        if (r.status === 'rejected') expect(isStoreConflict(r.reason), String(r.reason)).toBe(true);
      const winner = (won[0] as PromiseFulfilledResult<LeaseRecord>).value;
      expect(await store.get(key)).toEqual(winner);
    });

    it('lets exactly one of many concurrent creators win', async () => {
      const store = await open();
      const results = await Promise.allSettled(
        Array.from({ length: 16 }, (_, i) => store.put(0, record(key, { holder: `creator-${i}` }))),
      );
      expect(results.filter((r) => r.status === 'fulfilled')).toHaveLength(1);
      expect((await store.get(key))?.version).toBe(1);
    });

    it('keeps keys apart: namespaces, names and lookalike joins map to distinct records', async () => {
      const store = await open();
      const keys: LeaseKey[] = [
        { namespace: 'a', name: 'b-c' },
        { namespace: 'a-b', name: 'c' },
        { namespace: 'b', name: 'b-c' },
        { namespace: 'a', name: 'b.c' },
        { namespace: 'ab', name: 'c' },
      ];
      for (const [i, k] of keys.entries()) await store.put(0, record(k, { fencingToken: i + 1 }));
      for (const [i, k] of keys.entries()) expect((await store.get(k))?.fencingToken).toBe(i + 1);
      const listed = await store.list();
      expect(listed).toHaveLength(keys.length);
      for (const k of keys)
        expect(listed.some((r) => r.key.namespace === k.namespace && r.key.name === k.name)).toBe(true);
    });

    it('lists every record with its current version, tombstones included', async () => {
      const store = await open();
      const other = { namespace: 'pipeline', name: 'other' };
      await store.put(0, record(key));
      await store.put(1, record(key, { holder: '', ttlMs: 0 }));
      await store.put(0, record(other));
      const listed = (await store.list()).sort((x, y) => x.key.name.localeCompare(y.key.name));
      expect(listed).toEqual([
        record(key, { holder: '', ttlMs: 0, version: 2 }),
        record(other, { version: 1 }),
      ]);
    });

    it('never aliases: mutating inputs or results does not change stored state', async () => {
      const store = await open();
      const input = record(key);
      const stored = await store.put(0, input);
      input.holder = 'mutated-input';
      input.key.name = 'mutated';
      stored.holder = 'mutated-result';
      const got = (await store.get(key))!;
      got.fencingToken = 99;
      const listed = await store.list();
      listed[0]!.holder = 'mutated-list';
      expect(await store.get(key)).toEqual(record(key, { version: 1 }));
    });

    describe('with the lease manager', () => {
      it('grants exactly one of many concurrent acquires', async () => {
        const store = await open();
        const manager = new LeaseManager({ store, clock: new ManualClock(T0) });
        const results = await Promise.all(
          Array.from({ length: 8 }, (_, i) => manager.acquire(key, `cluster-${i}`, 30_000)),
        );
        const winners = results.filter((r) => r.acquired);
        expect(winners).toHaveLength(1);
        expect(winners[0]!.fencingToken).toBe(1);
        for (const r of results.filter((x) => !x.acquired)) expect(r.holder).toBe(winners[0]!.holder);
      });

      it('never repeats a token across release, expiry and collection', async () => {
        const store = await open();
        const clock = new ManualClock(T0);
        const manager = new LeaseManager({ store, clock });
        const gc = new TtlCollector({ store, clock, graceMs: 60_000 });
        const tokens: number[] = [];
        const a = await manager.acquire(key, 'east', 10_000);
        tokens.push(a.fencingToken);
        await manager.release(key, 'east', a.fencingToken);
        const b = await manager.acquire(key, 'east', 10_000);
        tokens.push(b.fencingToken);
        clock.advance(10_001);
        const c = await manager.acquire(key, 'west', 10_000);
        tokens.push(c.fencingToken);
        clock.advance(10_000 + 60_001);
        expect((await gc.sweep()).collected).toBe(1);
        const d = await manager.acquire(key, 'west', 10_000);
        tokens.push(d.fencingToken);
        expect(tokens).toEqual([1, 2, 3, 4]);
        await expect(manager.release(key, 'east', d.fencingToken)).rejects.toBeInstanceOf(
          ReleaseConflictError,
        );
      });
    });
  });
}
