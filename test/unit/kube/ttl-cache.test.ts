import { describe, expect, it } from 'vitest';
import { ManualClock } from '../../../src/kube/clock.ts';
import { TtlCache } from '../../../src/kube/ttl-cache.ts';

const deferred = <T>() => {
  let resolve!: (value: T) => void;
  let reject!: (err: unknown) => void;
  const promise = new Promise<T>((res, rej) => {
    resolve = res;
    reject = rej;
  });
  return { promise, resolve, reject };
};

describe('TtlCache', () => {
  it('keeps each value for the TTL chosen from it, on the injected clock', async () => {
    const clock = new ManualClock();
    const cache = new TtlCache<string>({ maxEntries: 10, clock });
    const ttlOf = (v: string) => (v === 'long' ? 1_000 : 100);
    let loads = 0;
    const load = (v: string) => async () => {
      loads++;
      return v;
    };
    expect(await cache.getOrLoad('a', load('long'), ttlOf)).toBe('long');
    expect(await cache.getOrLoad('b', load('short'), ttlOf)).toBe('short');
    expect(loads).toBe(2);
    clock.advance(99);
    expect(await cache.getOrLoad('b', load('short'), ttlOf)).toBe('short');
    expect(loads).toBe(2);
    clock.advance(1);
    expect(cache.get('b')).toBeUndefined();
    expect(cache.get('a')).toBe('long');
    clock.advance(900);
    expect(cache.get('a')).toBeUndefined();
    // A TTL of 0 keeps nothing.
    await cache.getOrLoad('c', load('x'), () => 0);
    expect(cache.get('c')).toBeUndefined();
  });

  it('holds at most maxEntries, dropping expired entries first, then the least recently used', () => {
    const clock = new ManualClock();
    const cache = new TtlCache<number>({ maxEntries: 3, clock });
    cache.set('a', 1, 1_000);
    cache.set('b', 2, 1_000);
    cache.set('c', 3, 10);
    expect(cache.get('a')).toBe(1); // a is now the most recently used
    cache.set('d', 4, 1_000);
    expect([cache.get('a'), cache.get('b'), cache.get('c'), cache.get('d')]).toEqual([1, undefined, 3, 4]);
    clock.advance(10); // c expires: it goes before any live entry
    cache.set('e', 5, 1_000);
    expect(cache.size).toBe(3);
    expect([cache.get('a'), cache.get('d'), cache.get('e')]).toEqual([1, 4, 5]);
  });

  it('shares one load among concurrent callers of a key, and caches no failure', async () => {
    const cache = new TtlCache<string>({ maxEntries: 10, clock: new ManualClock() });
    const first = deferred<string>();
    let loads = 0;
    const load = () => {
      loads++;
      return first.promise;
    };
    const callers = [1, 2, 3].map(() => cache.getOrLoad('k', load, () => 1_000));
    await Promise.resolve();
    first.reject(new Error('unreachable'));
    for (const c of callers) await expect(c).rejects.toThrow('unreachable');
    expect(loads).toBe(1);
    expect(cache.size).toBe(0);
    // The next caller loads again, and concurrent callers of it share the new load.
    const again = [1, 2].map(() =>
      cache.getOrLoad(
        'k',
        async () => {
          loads++;
          return 'ok';
        },
        () => 1_000,
      ),
    );
    expect(await Promise.all(again)).toEqual(['ok', 'ok']);
    expect(loads).toBe(2);
    expect(cache.get('k')).toBe('ok');
  });

  it('survives a load that throws synchronously', async () => {
    const cache = new TtlCache<string>({ maxEntries: 10, clock: new ManualClock() });
    const boom = (): Promise<string> => {
      throw new Error('sync');
    };
    await expect(cache.getOrLoad('k', boom, () => 1_000)).rejects.toThrow('sync');
    expect(
      await cache.getOrLoad(
        'k',
        async () => 'later',
        () => 1_000,
      ),
    ).toBe('later');
  });
});
