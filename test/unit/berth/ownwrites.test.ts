import { describe, expect, it } from 'vitest';
import { OwnWrites, observedWrite } from '../../../src/berth/ownwrites.ts';

function tracker(): { writes: OwnWrites; enqueued: string[] } {
  const enqueued: string[] = [];
  return { writes: new OwnWrites((key) => enqueued.push(key)), enqueued };
}

describe('OwnWrites', () => {
  it('drops the event of a write that already answered, and passes every other one', () => {
    const { writes } = tracker();
    writes.begin('ns/a');
    writes.end('ns/a', '10');
    expect(writes.isOwn('ns/a', '10')).toBe(true);
    expect(writes.isOwn('ns/a', '11')).toBe(false);
    expect(writes.isOwn('ns/b', '10')).toBe(false);
    expect(writes.isOwn('ns/a', undefined)).toBe(false);
  });

  it('holds back events arriving while the write is in flight: its own is dropped', () => {
    const { writes, enqueued } = tracker();
    writes.begin('ns/a');
    expect(writes.isOwn('ns/a', '10')).toBe(true);
    writes.end('ns/a', '10');
    expect(enqueued).toEqual([]);
  });

  it('a foreign event held back during a write is re-enqueued once the write ends', () => {
    const { writes, enqueued } = tracker();
    writes.begin('ns/a');
    expect(writes.isOwn('ns/a', '9')).toBe(true);
    expect(writes.isOwn('ns/a', '10')).toBe(true);
    writes.end('ns/a', '10');
    expect(enqueued).toEqual(['ns/a']);
  });

  it('a failed write re-enqueues whatever was held back', () => {
    const { writes, enqueued } = tracker();
    writes.begin('ns/a');
    expect(writes.isOwn('ns/a', '12')).toBe(true);
    writes.end('ns/a', undefined);
    expect(enqueued).toEqual(['ns/a']);
    expect(writes.isOwn('ns/a', '12')).toBe(false);
  });

  it("remembers the last few writes: the finalizer's event may come after the next status write", () => {
    const { writes, enqueued } = tracker();
    writes.begin('ns/a');
    writes.end('ns/a', '10');
    writes.begin('ns/a');
    expect(writes.isOwn('ns/a', '11')).toBe(true);
    writes.end('ns/a', '11');
    expect(writes.isOwn('ns/a', '10')).toBe(true);
    expect(enqueued).toEqual([]);
    for (const rv of ['12', '13', '14']) {
      writes.begin('ns/a');
      writes.end('ns/a', rv);
    }
    expect(writes.isOwn('ns/a', '10')).toBe(false);
    expect(writes.isOwn('ns/a', '11')).toBe(true);
  });

  it('observedWrite announces the write and records what it stored, or nothing when it failed', async () => {
    const { writes, enqueued } = tracker();
    const stored = { metadata: { resourceVersion: '20' } };
    const written = observedWrite(writes, 'ns/a', async () => {
      expect(writes.isOwn('ns/a', '20')).toBe(true);
      return stored;
    });
    expect(await written).toBe(stored);
    expect(writes.isOwn('ns/a', '20')).toBe(true);
    await expect(
      observedWrite(writes, 'ns/a', async () => {
        writes.isOwn('ns/a', '21');
        throw new Error('conflict');
      }),
    ).rejects.toThrow('conflict');
    expect(enqueued).toEqual(['ns/a']);
  });

  it('forgets deleted objects', () => {
    const { writes } = tracker();
    writes.begin('ns/a');
    writes.end('ns/a', '10');
    expect(writes.size).toBe(1);
    writes.forget('ns/a');
    expect(writes.size).toBe(0);
    expect(writes.isOwn('ns/a', '10')).toBe(false);
  });
});
