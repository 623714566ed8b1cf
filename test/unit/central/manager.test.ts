import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { TtlCollector } from '../../../src/central/gc.ts';
import {
  decideAcquire,
  decideRelease,
  decideRenew,
  LeaseManager,
  LeaseManagerError,
  MAX_ACQUIRE_ATTEMPTS,
  ReleaseConflictError,
} from '../../../src/central/manager.ts';
import { MemoryStore } from '../../../src/central/memstore.ts';
import { INT32_MAX, type LeaseRecord } from '../../../src/central/record.ts';
import { type Store, StoreConflictError } from '../../../src/central/store.ts';
import { ManualClock } from '../../../src/kube/clock.ts';
import { HookedStore } from './hooked-store.ts';

const T0 = Date.UTC(2026, 8, 7, 9, 0, 0);
const key = { namespace: 'pipeline', name: 'ingest' };
const TTL = 10_000;

const held = (overrides: Partial<LeaseRecord> = {}): LeaseRecord => ({
  key,
  holder: 'east',
  ttlMs: TTL,
  acquiredAt: T0,
  renewedAt: T0,
  fencingToken: 7,
  version: 3,
  ...overrides,
});

function setup(store: Store = new MemoryStore()) {
  const clock = new ManualClock(T0);
  return { clock, store, manager: new LeaseManager({ store, clock }) };
}

describe('decisions (pure)', () => {
  it('acquire: creates token 1 when absent', () => {
    expect(decideAcquire(undefined, key, 'east', TTL, T0)).toEqual({
      kind: 'write',
      record: { key, holder: 'east', ttlMs: TTL, acquiredAt: T0, renewedAt: T0, fencingToken: 1, version: 0 },
    });
  });

  it('acquire: the unexpired holder renews in place, keeping token and acquiredAt', () => {
    expect(decideAcquire(held(), key, 'east', 20_000, T0 + TTL)).toEqual({
      kind: 'write',
      record: held({ renewedAt: T0 + TTL, ttlMs: 20_000 }),
    });
  });

  it('acquire: expiry is strictly after renewedAt+ttl', () => {
    expect(decideAcquire(held(), key, 'west', TTL, T0 + TTL)).toEqual({
      kind: 'held-by-other',
      result: { acquired: false, holder: 'east', fencingToken: 7, expiresAt: T0 + TTL, acquiredAt: T0 },
    });
    expect(decideAcquire(held(), key, 'west', TTL, T0 + TTL + 1)).toEqual({
      kind: 'write',
      record: held({ holder: 'west', fencingToken: 8, acquiredAt: T0 + TTL + 1, renewedAt: T0 + TTL + 1 }),
    });
  });

  it('acquire: the same holder reclaims an expired lease with a new token', () => {
    const d = decideAcquire(held(), key, 'east', TTL, T0 + TTL + 1);
    expect(d).toMatchObject({ kind: 'write', record: { fencingToken: 8, acquiredAt: T0 + TTL + 1 } });
  });

  it('acquire: a tombstone is reclaimable at once, and the int32 ceiling is refused', () => {
    const tomb = held({ holder: '', ttlMs: 0 });
    expect(decideAcquire(tomb, key, 'west', TTL, T0)).toMatchObject({
      kind: 'write',
      record: { fencingToken: 8 },
    });
    expect(decideAcquire(held({ holder: '', fencingToken: INT32_MAX }), key, 'west', TTL, T0)).toEqual({
      kind: 'token-exhausted',
    });
    // An unexpired holder at the ceiling still renews in place.
    expect(decideAcquire(held({ fencingToken: INT32_MAX }), key, 'east', TTL, T0).kind).toBe('write');
  });

  it('renew: only the unexpired holder with its token', () => {
    expect(decideRenew(undefined, 'east', 7, TTL, T0)).toEqual({
      kind: 'refuse',
      result: { acquired: false, holder: '', fencingToken: 0, expiresAt: undefined, acquiredAt: undefined },
    });
    const refuse = { kind: 'refuse', result: { acquired: false, holder: 'east', fencingToken: 7 } };
    expect(decideRenew(held(), 'west', 7, TTL, T0)).toMatchObject(refuse);
    expect(decideRenew(held(), 'east', 6, TTL, T0)).toMatchObject(refuse);
    expect(decideRenew(held(), 'east', 7, TTL, T0 + TTL + 1)).toMatchObject(refuse);
    expect(decideRenew(held({ holder: '' }), '', 7, TTL, T0)).toMatchObject({ kind: 'refuse' });
    expect(decideRenew(held(), 'east', 7, 5_000, T0 + TTL)).toEqual({
      kind: 'write',
      record: held({ renewedAt: T0 + TTL, ttlMs: 5_000 }),
    });
  });

  it('release: idempotent, conflicts on mismatch, tombstones keeping token and acquiredAt', () => {
    expect(decideRelease(undefined, 'east', 7, T0)).toEqual({ kind: 'done' });
    expect(decideRelease(held({ holder: '' }), 'east', 7, T0)).toEqual({ kind: 'done' });
    expect(decideRelease(held(), 'west', 7, T0)).toEqual({ kind: 'conflict' });
    expect(decideRelease(held(), 'east', 8, T0)).toEqual({ kind: 'conflict' });
    expect(decideRelease(held(), 'east', 7, T0 + 99_999)).toEqual({
      kind: 'write',
      record: held({ holder: '', ttlMs: 0, renewedAt: T0 + 99_999 }),
    });
  });
});

describe('LeaseManager', () => {
  it('acquires, renews in place through acquire, and refuses another holder', async () => {
    const { clock, store, manager } = setup();
    expect(await manager.acquire(key, 'east', TTL)).toEqual({
      acquired: true,
      holder: 'east',
      fencingToken: 1,
      expiresAt: T0 + TTL,
      acquiredAt: T0,
    });
    clock.advance(4_000);
    expect(await manager.acquire(key, 'east', TTL)).toEqual({
      acquired: true,
      holder: 'east',
      fencingToken: 1,
      expiresAt: T0 + 4_000 + TTL,
      acquiredAt: T0,
    });
    expect(await manager.acquire(key, 'west', TTL)).toEqual({
      acquired: false,
      holder: 'east',
      fencingToken: 1,
      expiresAt: T0 + 4_000 + TTL,
      acquiredAt: T0,
    });
    expect((await store.get(key))?.version).toBe(2);
  });

  it('reclaims an expired lease for another holder with token+1', async () => {
    const { clock, manager } = setup();
    await manager.acquire(key, 'east', TTL);
    clock.advance(TTL + 1);
    expect(await manager.acquire(key, 'west', TTL)).toMatchObject({
      acquired: true,
      holder: 'west',
      fencingToken: 2,
    });
  });

  it('fails after 8 lost compare-and-swaps', async () => {
    const store = new MemoryStore();
    let puts = 0;
    const racing: Store = {
      backend: 'racing',
      ping: () => store.ping(),
      get: (k) => store.get(k),
      list: () => store.list(),
      put: async () => {
        puts++;
        throw new StoreConflictError();
      },
    };
    const { manager } = setup(racing);
    await expect(manager.acquire(key, 'east', TTL)).rejects.toThrow(
      new LeaseManagerError('acquire: exhausted retries'),
    );
    expect(puts).toBe(MAX_ACQUIRE_ATTEMPTS);
  });

  it('refuses to reclaim at the int32 ceiling and leaves the record alone', async () => {
    const { store, manager } = setup();
    await store.put(0, held({ holder: '', ttlMs: 0, fencingToken: INT32_MAX }));
    await expect(manager.acquire(key, 'west', TTL)).rejects.toThrow(
      'fencing token for pipeline/ingest exhausted at int32 ceiling',
    );
    expect(await store.get(key)).toMatchObject({ holder: '', fencingToken: INT32_MAX, version: 1 });
  });

  it('propagates store errors', async () => {
    const failing: Store = {
      backend: 'failing',
      ping: async () => {},
      get: async () => {
        throw new Error('connection refused');
      },
      list: async () => [],
      put: async () => {
        throw new Error('unreachable');
      },
    };
    const { manager } = setup(failing);
    await expect(manager.acquire(key, 'east', TTL)).rejects.toThrow('connection refused');
    await expect(manager.renew(key, 'east', 1, TTL)).rejects.toThrow('connection refused');
    await expect(manager.release(key, 'east', 1)).rejects.toThrow('connection refused');
  });

  describe('renew', () => {
    it('renews the holder in place and refuses everyone else with the current state', async () => {
      const { clock, manager } = setup();
      await manager.acquire(key, 'east', TTL);
      clock.advance(5_000);
      expect(await manager.renew(key, 'east', 1, 20_000)).toEqual({
        acquired: true,
        holder: 'east',
        fencingToken: 1,
        expiresAt: T0 + 25_000,
        acquiredAt: T0,
      });
      const current = {
        acquired: false,
        holder: 'east',
        fencingToken: 1,
        expiresAt: T0 + 25_000,
        acquiredAt: T0,
      };
      expect(await manager.renew(key, 'west', 1, TTL)).toEqual(current);
      expect(await manager.renew(key, 'east', 2, TTL)).toEqual(current);
      clock.advance(20_001);
      expect(await manager.renew(key, 'east', 1, TTL)).toEqual(current);
    });

    it('answers an absent lease with empty fields', async () => {
      const { manager } = setup();
      expect(await manager.renew(key, 'east', 1, TTL)).toEqual({
        acquired: false,
        holder: '',
        fencingToken: 0,
        expiresAt: undefined,
        acquiredAt: undefined,
      });
    });

    it('refuses a tombstone, reporting an empty holder', async () => {
      const { manager } = setup();
      await manager.acquire(key, 'east', TTL);
      await manager.release(key, 'east', 1);
      expect(await manager.renew(key, 'east', 1, TTL)).toMatchObject({
        acquired: false,
        holder: '',
        fencingToken: 1,
      });
    });

    it('rejects a non-positive token or ttl', async () => {
      const { manager } = setup();
      await expect(manager.renew(key, 'east', 0, TTL)).rejects.toBeInstanceOf(LeaseManagerError);
      await expect(manager.renew(key, 'east', -1, TTL)).rejects.toBeInstanceOf(LeaseManagerError);
      await expect(manager.renew(key, 'east', 1, 0)).rejects.toBeInstanceOf(LeaseManagerError);
    });

    it('reports the actual winner when it loses the compare-and-swap (#120)', async () => {
      const store = new HookedStore();
      const { clock, manager } = setup(store);
      await manager.acquire(key, 'east', TTL);
      clock.advance(TTL - 1);
      store.once('put', async () => {
        // Between the renew's read and its write, the lease expires and west reclaims it.
        clock.advance(2);
        expect(await manager.acquire(key, 'west', TTL)).toMatchObject({ acquired: true, fencingToken: 2 });
      });
      expect(await manager.renew(key, 'east', 1, TTL)).toEqual({
        acquired: false,
        holder: 'west',
        fencingToken: 2,
        expiresAt: T0 + TTL + 1 + TTL,
        acquiredAt: T0 + TTL + 1,
      });
    });

    it('falls back to the identity it saw, with non-zero times, when the re-read fails', async () => {
      const store = new HookedStore();
      const { clock, manager } = setup(store);
      await manager.acquire(key, 'east', TTL);
      store.once('put', async () => {
        clock.advance(TTL + 1);
        await manager.acquire(key, 'west', TTL);
        store.once('get', () => {
          throw new Error('store unavailable');
        });
      });
      expect(await manager.renew(key, 'east', 1, TTL)).toEqual({
        acquired: false,
        holder: 'east',
        fencingToken: 1,
        expiresAt: T0 + TTL,
        acquiredAt: T0,
      });
    });
  });

  describe('renew racing a reclaim (#90): exactly one winner in both landing orders', () => {
    it('reclaim lands first: the stalled renew loses', async () => {
      const store = new HookedStore();
      const { clock, manager } = setup(store);
      await manager.acquire(key, 'east', TTL);
      clock.advance(TTL - 100); // east renews while still valid...
      store.once('put', async () => {
        clock.advance(200); // ...but stalls past expiry, and west reclaims
        const west = await manager.acquire(key, 'west', TTL);
        expect(west).toMatchObject({ acquired: true, fencingToken: 2 });
      });
      const east = await manager.renew(key, 'east', 1, TTL);
      expect(east.acquired).toBe(false);
      expect(east.holder).toBe('west');
      expect(await store.get(key)).toMatchObject({ holder: 'west', fencingToken: 2 });
    });

    it('renew lands first: the stalled reclaim retries and loses', async () => {
      const store = new HookedStore();
      const { clock, manager } = setup(store);
      await manager.acquire(key, 'east', TTL);
      clock.advance(TTL - 100); // east reads the lease while it is still valid
      const westAtPut = Promise.withResolvers<void>();
      const releaseWest = Promise.withResolvers<void>();
      let west: Promise<unknown> | undefined;
      store.once('put', async () => {
        // Before east's write lands, the lease expires and west reads it and prepares a reclaim...
        clock.advance(200);
        store.once('put', async () => {
          westAtPut.resolve();
          await releaseWest.promise; // ...which lands only after east's renew
        });
        west = manager.acquire(key, 'west', TTL);
        await westAtPut.promise;
      });
      const east = await manager.renew(key, 'east', 1, TTL);
      releaseWest.resolve();
      expect(east).toMatchObject({ acquired: true, holder: 'east', fencingToken: 1 });
      expect(await west).toMatchObject({ acquired: false, holder: 'east', fencingToken: 1 });
      expect(await store.get(key)).toMatchObject({ holder: 'east', fencingToken: 1, version: 2 });
      expect(store.calls.filter((c) => c === 'put')).toHaveLength(3);
    });
  });

  describe('release', () => {
    it('tombstones the lease, keeping token and acquiredAt; idempotent afterwards', async () => {
      const { clock, store, manager } = setup();
      await manager.acquire(key, 'east', TTL);
      clock.advance(1_000);
      await manager.release(key, 'east', 1);
      expect(await store.get(key)).toEqual({
        key,
        holder: '',
        ttlMs: 0,
        acquiredAt: T0,
        renewedAt: T0 + 1_000,
        fencingToken: 1,
        version: 2,
      });
      await manager.release(key, 'east', 1);
      await manager.release(key, 'anyone', 99);
      expect((await store.get(key))?.version).toBe(2);
    });

    it('is a no-op for an absent lease', async () => {
      const { store, manager } = setup();
      await manager.release(key, 'east', 1);
      expect(await store.get(key)).toBeUndefined();
    });

    it('conflicts on a holder or token mismatch', async () => {
      const { manager } = setup();
      await manager.acquire(key, 'east', TTL);
      await expect(manager.release(key, 'west', 1)).rejects.toBeInstanceOf(ReleaseConflictError);
      await expect(manager.release(key, 'east', 2)).rejects.toThrow(
        'lease held by another identity or token',
      );
    });

    it('lets the holder release an expired, unreclaimed lease', async () => {
      const { clock, store, manager } = setup();
      await manager.acquire(key, 'east', TTL);
      clock.advance(TTL * 3);
      await manager.release(key, 'east', 1);
      expect((await store.get(key))?.holder).toBe('');
    });

    it('treats a lost compare-and-swap as released', async () => {
      const store = new HookedStore();
      const { manager } = setup(store);
      await manager.acquire(key, 'east', TTL);
      store.once('put', async () => {
        await manager.acquire(key, 'east', TTL); // a concurrent renew bumps the version
      });
      await expect(manager.release(key, 'east', 1)).resolves.toBeUndefined();
    });
  });

  it('keeps tokens strictly increasing and holders exclusive under random operations', async () => {
    const op = fc.oneof(
      fc.record({
        kind: fc.constant('acquire' as const),
        holder: fc.constantFrom('a', 'b', 'c'),
        ttl: fc.integer({ min: 1, max: 5 }),
      }),
      fc.record({
        kind: fc.constant('renew' as const),
        holder: fc.constantFrom('a', 'b', 'c'),
        ttl: fc.integer({ min: 1, max: 5 }),
      }),
      fc.record({ kind: fc.constant('release' as const), holder: fc.constantFrom('a', 'b', 'c') }),
      fc.record({ kind: fc.constant('advance' as const), ms: fc.integer({ min: 0, max: 6_000 }) }),
      fc.record({ kind: fc.constant('gc' as const) }),
    );
    await fc.assert(
      fc.asyncProperty(fc.array(op, { maxLength: 60 }), async (ops) => {
        const { clock, store, manager } = setup();
        const gc = new TtlCollector({ store, clock, graceMs: 2_000 });
        const tokens = new Map<string, number>(); // last token each holder was granted
        let owner: { holder: string; token: number; expiresAt: number } | undefined;
        let highest = 0;
        for (const o of ops) {
          if (o.kind === 'advance') clock.advance(o.ms);
          else if (o.kind === 'gc') await gc.sweep();
          else if (o.kind === 'release') {
            try {
              await manager.release(key, o.holder, tokens.get(o.holder) ?? 1);
              if (owner?.holder === o.holder && owner.token === tokens.get(o.holder)) owner = undefined;
            } catch (err) {
              expect(err).toBeInstanceOf(ReleaseConflictError);
            }
          } else {
            const r =
              o.kind === 'acquire'
                ? await manager.acquire(key, o.holder, o.ttl * 1000)
                : await manager.renew(key, o.holder, tokens.get(o.holder) ?? 1, o.ttl * 1000);
            if (!r.acquired) continue;
            const now = clock.now();
            if (owner !== undefined && owner.holder !== o.holder)
              expect(now).toBeGreaterThan(owner.expiresAt);
            if (owner?.holder === o.holder && owner.token === r.fencingToken) {
              // renewal in place: same epoch
            } else {
              expect(r.fencingToken).toBe(highest + 1);
            }
            highest = Math.max(highest, r.fencingToken);
            tokens.set(o.holder, r.fencingToken);
            owner = { holder: o.holder, token: r.fencingToken, expiresAt: r.expiresAt! };
          }
          const stored = await store.get(key);
          if (stored !== undefined) expect(stored.fencingToken).toBe(highest);
        }
      }),
      { numRuns: 200 },
    );
  });
});

describe('TtlCollector', () => {
  it('tombstones only leases expired for longer than the grace period, never tombstones', async () => {
    const { clock, store, manager } = setup();
    const other = { namespace: 'pipeline', name: 'other' };
    await manager.acquire(key, 'east', TTL);
    await manager.acquire(other, 'east', TTL * 10);
    const gc = new TtlCollector({ store, clock, graceMs: 60_000 });
    clock.advance(TTL + 60_000);
    expect(await gc.sweep()).toEqual({ collected: 0, skipped: 0 });
    clock.advance(1);
    expect(await gc.sweep()).toEqual({ collected: 1, skipped: 0 });
    expect(await store.get(key)).toMatchObject({
      holder: '',
      ttlMs: 0,
      fencingToken: 1,
      renewedAt: clock.now(),
    });
    expect((await store.get(other))?.holder).toBe('east');
    expect(await gc.sweep()).toEqual({ collected: 0, skipped: 0 });
    expect(await manager.acquire(key, 'west', TTL)).toMatchObject({ acquired: true, fencingToken: 2 });
  });

  it('never touches a lease re-acquired between its scan and its write (#93)', async () => {
    const store = new HookedStore();
    const { clock, manager } = setup(store);
    await manager.acquire(key, 'east', TTL);
    clock.advance(TTL + 300_001);
    const gc = new TtlCollector({ store, clock });
    store.once('put', async () => {
      expect(await manager.acquire(key, 'west', TTL)).toMatchObject({ acquired: true, fencingToken: 2 });
    });
    expect(await gc.sweep()).toEqual({ collected: 0, skipped: 1 });
    expect(await store.get(key)).toMatchObject({ holder: 'west', fencingToken: 2 });
  });

  it('sweeps on its interval until stopped (default 30 s, grace 5 min)', async () => {
    const { clock, store, manager } = setup();
    await manager.acquire(key, 'east', TTL);
    const gc = new TtlCollector({ store, clock });
    gc.start();
    await clock.advanceAsync(TTL + 300_000 - 1);
    expect((await store.get(key))?.holder).toBe('east');
    await clock.advanceAsync(30_000);
    expect((await store.get(key))?.holder).toBe('');
    await gc.stop();
    expect(clock.pending()).toBe(0);
  });
});
