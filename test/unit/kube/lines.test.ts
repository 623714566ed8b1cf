import { describe, expect, it } from 'vitest';
import { LineSplitter } from '../../../src/kube/lines.ts';

describe('LineSplitter', () => {
  it('joins lines split across chunks and skips blank lines', () => {
    const s = new LineSplitter();
    expect(s.push('{"a":')).toEqual([]);
    expect(s.push('1}\n\n{"b"')).toEqual(['{"a":1}']);
    expect(s.push(':2}\n{"c":3}')).toEqual(['{"b":2}']);
    expect(s.end()).toEqual(['{"c":3}']);
    expect(s.end()).toEqual([]);
  });
});
