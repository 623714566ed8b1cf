// The contract every central lease Store must pass (the Go `storetest.RunStoreConformance`): CAS on the
// version as the only write predicate, exactly-one-winner under concurrency, faithful round trips, no
// aliasing, and the lease guarantees (tokens never repeat) when the manager runs on top of it.
//
//   runStoreConformance('sql mysql', async () => ({ store: await SqlStore.open(o), cleanup, reopen }))
//
// `makeStore` must return an empty store; `cleanup` (optional) runs after each test, after every store
// of the fixture is closed. Durable backends also give `reopen`: another store instance over the same
// data (a second replica, or the same one after a restart); the races then run between two instances,
// except on a single-replica backend (SQLite), where they run within one and a restart closes first.
import fc from 'fast-check';
import { afterEach, describe, expect, it } from 'vitest';
import { TtlCollector } from '../../../src/central/gc.ts';
import { LeaseManager, type LeaseResult, ReleaseConflictError } from '../../../src/central/manager.ts';
import { INT32_MAX, type LeaseKey, type LeaseRecord } from '../../../src/central/record.ts';
import { isStoreConflict, type Store, type StoreConflictError } from '../../../src/central/store.ts';
import { validateKey } from '../../../src/central/validate.ts';
import { ManualClock } from '../../../src/kube/clock.ts';
import { HoldableStore } from './holdable-store.ts';

export interface StoreFixture {
  store: Store;
  cleanup?: () => Promise<void>;
  /** Another store over the same data; durable backends only. */
  reopen?: () => Promise<Store>;
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

export interface ConformanceOptions {
  /** The backend keeps data across instances: makeStore must give `reopen`. */
  durable?: boolean;
  /** Only one instance may have the data open at a time (SQLite's exclusive lock). */
  singleReplica?: boolean;
  /**
   * The backend stores only keys the API accepts (validateKey; the k8s store, whose object names are
   * built from them) and must refuse any other, as an error that is not a conflict, writing nothing.
   */
  apiKeysOnly?: boolean;
}

export function runStoreConformance(
  name: string,
  makeStore: MakeStore,
  options: ConformanceOptions = {},
): void {
  const durable = options.durable ?? false;
  const singleReplica = options.singleReplica ?? false;
  const apiKeysOnly = options.apiKeysOnly ?? false;
  describe(`store conformance: ${name}`, () => {
    let fixtures: Array<StoreFixture & { extra: Store[] }> = [];
    const openFixture = async (): Promise<StoreFixture & { extra: Store[] }> => {
      const fixture = { ...(await makeStore()), extra: [] as Store[] };
      fixtures.push(fixture);
      return fixture;
    };
    const open = async (): Promise<Store> => (await openFixture()).store;
    /** A store and a second replica over the same data (the same instance for the memory store). */
    const openPair = async (): Promise<[Store, Store]> => {
      const fixture = await openFixture();
      if (fixture.reopen === undefined || singleReplica) return [fixture.store, fixture.store];
      const second = await fixture.reopen();
      fixture.extra.push(second);
      return [fixture.store, second];
    };
    afterEach(async () => {
      for (const f of fixtures) {
        for (const s of f.extra) await s.close?.();
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

    describe('races between replicas, in both landing orders', () => {
      /** Starts two operations whose puts are held, then lets them land in the given order. */
      async function race(
        stores: [HoldableStore, HoldableStore],
        ops: [() => Promise<LeaseResult>, () => Promise<LeaseResult>],
        firstToLand: 0 | 1,
      ): Promise<[LeaseResult, LeaseResult]> {
        const held = [stores[0].holdNextPut(), stores[1].holdNextPut()] as const;
        const results = [ops[0](), ops[1]()] as const;
        await Promise.all([held[0].arrived, held[1].arrived]);
        await held[firstToLand].release();
        await held[firstToLand === 0 ? 1 : 0].release();
        return [await results[0], await results[1]];
      }

      for (const firstToLand of [0, 1] as const) {
        it(`renew on a replica vs reclaim on a replica whose clock says expired: ${firstToLand === 0 ? 'renew' : 'reclaim'} lands first`, async () => {
          const [a, b] = await openPair();
          const storeA = new HoldableStore(a);
          const storeB = new HoldableStore(b);
          const clockA = new ManualClock(T0);
          const clockB = new ManualClock(T0);
          const replicaA = new LeaseManager({ store: storeA, clock: clockA });
          const replicaB = new LeaseManager({ store: storeB, clock: clockB });
          const granted = await replicaA.acquire(key, 'east', 10_000);
          expect(granted.fencingToken).toBe(1);
          clockA.advance(9_000); // still valid for A
          clockB.advance(10_001); // B's clock runs ahead: expired for B
          const [renewed, reclaimed] = await race(
            [storeA, storeB],
            [() => replicaA.renew(key, 'east', 1, 10_000), () => replicaB.acquire(key, 'west', 10_000)],
            firstToLand,
          );
          expect([renewed.acquired, reclaimed.acquired].filter(Boolean)).toHaveLength(1);
          const stored = (await a.get(key))!;
          if (firstToLand === 0) {
            expect(renewed).toMatchObject({ acquired: true, holder: 'east', fencingToken: 1 });
            expect(reclaimed).toMatchObject({ acquired: false, holder: 'east', fencingToken: 1 });
            expect(stored).toMatchObject({ holder: 'east', fencingToken: 1, renewedAt: T0 + 9_000 });
          } else {
            expect(reclaimed).toMatchObject({ acquired: true, holder: 'west', fencingToken: 2 });
            // The loser re-reads and reports the actual winner (#120).
            expect(renewed).toMatchObject({ acquired: false, holder: 'west', fencingToken: 2 });
            expect(stored).toMatchObject({ holder: 'west', fencingToken: 2, acquiredAt: T0 + 10_001 });
          }
          expect(stored.version).toBe(2);
          expect(await b.get(key)).toEqual(stored);
        });

        it(`duplicate renews of one holder on two replicas: replica ${firstToLand === 0 ? 'A' : 'B'} lands first`, async () => {
          const [a, b] = await openPair();
          const storeA = new HoldableStore(a);
          const storeB = new HoldableStore(b);
          const clock = new ManualClock(T0);
          const replicaA = new LeaseManager({ store: storeA, clock });
          const replicaB = new LeaseManager({ store: storeB, clock });
          await replicaA.acquire(key, 'east', 10_000);
          clock.advance(5_000);
          const [ra, rb] = await race(
            [storeA, storeB],
            [() => replicaA.renew(key, 'east', 1, 10_000), () => replicaB.renew(key, 'east', 1, 20_000)],
            firstToLand,
          );
          const winner = firstToLand === 0 ? ra : rb;
          const loser = firstToLand === 0 ? rb : ra;
          expect(winner.acquired).toBe(true);
          expect(loser).toMatchObject({ acquired: false, holder: 'east', fencingToken: 1 });
          expect(loser.expiresAt).toBe(winner.expiresAt);
          expect(await a.get(key)).toMatchObject({ version: 2, ttlMs: firstToLand === 0 ? 10_000 : 20_000 });
        });

        it(`first acquires of an absent key from two replicas: replica ${firstToLand === 0 ? 'A' : 'B'} lands first`, async () => {
          const [a, b] = await openPair();
          const storeA = new HoldableStore(a);
          const storeB = new HoldableStore(b);
          const clock = new ManualClock(T0);
          const [ra, rb] = await race(
            [storeA, storeB],
            [
              () => new LeaseManager({ store: storeA, clock }).acquire(key, 'east', 10_000),
              () => new LeaseManager({ store: storeB, clock }).acquire(key, 'west', 10_000),
            ],
            firstToLand,
          );
          const winner = firstToLand === 0 ? ra : rb;
          const loser = firstToLand === 0 ? rb : ra;
          expect(winner).toMatchObject({ acquired: true, fencingToken: 1 });
          expect(loser).toMatchObject({ acquired: false, holder: winner.holder, fencingToken: 1 });
          expect(await b.get(key)).toMatchObject({ holder: winner.holder, version: 1 });
        });
      }
    });

    describe('garbage collection', () => {
      it('never touches a lease re-acquired between its scan and its write', async () => {
        const [a, b] = await openPair();
        const clock = new ManualClock(T0);
        const gcStore = new HoldableStore(a);
        const gc = new TtlCollector({ store: gcStore, clock, graceMs: 60_000 });
        const replica = new LeaseManager({ store: b, clock });
        await replica.acquire(key, 'east', 10_000);
        clock.advance(10_000 + 60_001);
        const held = gcStore.holdNextPut();
        const sweeping = gc.sweep();
        await held.arrived; // the collector has listed the expired lease and decided to tombstone it
        const reacquired = await replica.acquire(key, 'west', 10_000);
        expect(reacquired).toMatchObject({ acquired: true, holder: 'west', fencingToken: 2 });
        await held.release();
        expect(await sweeping).toEqual({ collected: 0, skipped: 1 });
        expect(await a.get(key)).toMatchObject({
          holder: 'west',
          fencingToken: 2,
          ttlMs: 10_000,
          renewedAt: T0 + 70_001,
          version: 2,
        });
        expect((await replica.renew(key, 'west', 2, 10_000)).acquired).toBe(true);
      });

      it('collects only leases expired past the grace period and leaves tombstones alone', async () => {
        const store = await open();
        const clock = new ManualClock(T0);
        const manager = new LeaseManager({ store, clock });
        const gc = new TtlCollector({ store, clock, graceMs: 60_000 });
        const fresh = { namespace: 'pipeline', name: 'fresh' };
        const released = { namespace: 'pipeline', name: 'released' };
        await manager.acquire(key, 'east', 10_000);
        const r = await manager.acquire(released, 'east', 10_000);
        await manager.release(released, 'east', r.fencingToken);
        clock.advance(70_000); // key: expired 60 s ago, exactly at the grace boundary
        await manager.acquire(fresh, 'east', 10_000);
        expect(await gc.sweep()).toEqual({ collected: 0, skipped: 0 });
        clock.advance(1);
        expect(await gc.sweep()).toEqual({ collected: 1, skipped: 0 });
        expect(await store.get(key)).toMatchObject({ holder: '', ttlMs: 0, fencingToken: 1, version: 2 });
        expect(await store.get(released)).toMatchObject({ holder: '', version: 2 });
        expect(await store.get(fresh)).toMatchObject({ holder: 'east', version: 1 });
      });
    });

    it('keeps tokens strictly increasing across release, expiry, collection and restarts', async () => {
      const fixture = await openFixture();
      const clock = new ManualClock(T0);
      let store = fixture.store;
      let manager = new LeaseManager({ store, clock });
      let gc = new TtlCollector({ store, clock, graceMs: 60_000 });
      const tokens: number[] = [];
      for (let round = 0; round < 9; round++) {
        const holder = `holder-${round % 3}`;
        const grant = await manager.acquire(key, holder, 10_000);
        expect(grant, `round ${round}`).toMatchObject({ acquired: true, holder });
        tokens.push(grant.fencingToken);
        clock.advance(4_000);
        expect((await manager.renew(key, holder, grant.fencingToken, 10_000)).fencingToken).toBe(
          grant.fencingToken,
        );
        switch (round % 3) {
          case 0:
            await manager.release(key, holder, grant.fencingToken);
            expect(await store.get(key)).toMatchObject({ holder: '', fencingToken: grant.fencingToken });
            break;
          case 1:
            clock.advance(10_001); // expired, reclaimed lazily by the next acquire
            expect((await manager.renew(key, holder, grant.fencingToken, 10_000)).acquired).toBe(false);
            break;
          case 2:
            clock.advance(10_000 + 60_001);
            expect((await gc.sweep()).collected).toBe(1);
            expect(await store.get(key)).toMatchObject({ holder: '', fencingToken: grant.fencingToken });
            break;
        }
        if (fixture.reopen !== undefined && round % 4 === 3) {
          // A restart: a new instance must continue from the persisted high-water mark.
          if (singleReplica) await store.close?.();
          store = await fixture.reopen();
          fixture.extra.push(store);
          manager = new LeaseManager({ store, clock });
          gc = new TtlCollector({ store, clock, graceMs: 60_000 });
        }
      }
      expect(tokens).toEqual([1, 2, 3, 4, 5, 6, 7, 8, 9]);
    });

    it('maps keys injectively: lookalikes, boundary lengths and generated keys stay distinct', async () => {
      const store = await open();
      const label = fc.stringMatching(/^[a-z0-9]([-a-z0-9]{0,6}[a-z0-9])?$/);
      const subdomain = fc.array(label, { minLength: 1, maxLength: 3 }).map((parts) => parts.join('.'));
      const generated = fc.sample(
        fc.uniqueArray(fc.record({ namespace: label, name: subdomain }), {
          minLength: 24,
          maxLength: 24,
          selector: (k) => JSON.stringify([k.namespace, k.name]),
        }),
        { numRuns: 1, seed: 7 },
      )[0]!;
      const fixed: LeaseKey[] = [
        { namespace: 'a', name: 'b.c' },
        { namespace: 'a.b', name: 'c' },
        { namespace: 'a', name: 'b-c' },
        { namespace: 'a-b', name: 'c' },
        { namespace: 'ab', name: 'c' },
        { namespace: 'a', name: 'bc' },
        { namespace: 'a', name: 'b/c' },
        { namespace: 'a/b', name: 'c' },
        { namespace: 'x'.repeat(63), name: 'y'.repeat(189) },
        { namespace: 'x'.repeat(63), name: `${'y'.repeat(188)}z` },
        { namespace: `${'x'.repeat(62)}z`, name: 'y'.repeat(189) },
      ];
      const seen = new Set(fixed.map((k) => JSON.stringify([k.namespace, k.name])));
      const all = [...fixed, ...generated.filter((k) => !seen.has(JSON.stringify([k.namespace, k.name])))];
      const refused = apiKeysOnly ? all.filter((k) => validateKey(k.namespace, k.name) !== undefined) : [];
      const keys = all.filter((k) => !refused.includes(k));
      if (apiKeysOnly) expect(refused.length).toBeGreaterThan(0);
      for (const k of refused) {
        const err = await store.put(0, record(k)).catch((e: unknown) => e);
        expect(err, JSON.stringify(k)).toBeInstanceOf(Error);
        expect(isStoreConflict(err), String(err)).toBe(false);
      }
      await Promise.all(keys.map((k, i) => store.put(0, record(k, { fencingToken: i + 1 }))));
      for (const [i, k] of keys.entries())
        expect((await store.get(k))?.fencingToken, JSON.stringify(k)).toBe(i + 1);
      const listed = await store.list();
      expect(listed).toHaveLength(keys.length);
      const byKey = new Map(
        listed.map((r) => [JSON.stringify([r.key.namespace, r.key.name]), r.fencingToken]),
      );
      for (const [i, k] of keys.entries())
        expect(byKey.get(JSON.stringify([k.namespace, k.name]))).toBe(i + 1);
    });

    if (durable) {
      it('shares every record, tombstones included, with a second instance and keeps them across close', async () => {
        const fixture = await openFixture();
        const manager = new LeaseManager({ store: fixture.store, clock: new ManualClock(T0) });
        const other = { namespace: 'pipeline', name: 'other' };
        const a = await manager.acquire(key, 'east', 10_000);
        await manager.release(key, 'east', a.fencingToken);
        await manager.acquire(other, 'west', 20_000);
        const before = await fixture.store.list();
        await fixture.store.close?.();
        const reopened = await fixture.reopen!();
        fixture.extra.push(reopened);
        const sort = (rs: LeaseRecord[]) => rs.sort((x, y) => x.key.name.localeCompare(y.key.name));
        expect(sort(await reopened.list())).toEqual(sort(before));
        expect(await reopened.get(key)).toMatchObject({ holder: '', fencingToken: 1, version: 2 });
        const again = await new LeaseManager({ store: reopened, clock: new ManualClock(T0 + 1) }).acquire(
          key,
          'east',
          10_000,
        );
        expect(again.fencingToken).toBe(2);
      });
    }
  });
}
