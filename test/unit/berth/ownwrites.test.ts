import { describe, expect, it } from 'vitest';
import { OwnWrites } from '../../../src/berth/ownwrites.ts';

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
