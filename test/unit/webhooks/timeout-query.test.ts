// `?timeout=` is parsed once per distinct value (the API server repeats one value): remembering must not
// change any answer, for the values remembered and for those seen after the memory is full.
import { describe, expect, it } from 'vitest';
import { parseTimeoutQuery } from '../../../webhooks/server.ts';

describe('parseTimeoutQuery', () => {
  it('answers the same for a repeated value, a bad one included', () => {
    for (let i = 0; i < 3; i++) {
      expect(parseTimeoutQuery('10s')).toBe(10_000);
      expect(parseTimeoutQuery('2m30s')).toBe(150_000);
      expect(parseTimeoutQuery('1h1ns')).toBe(3_600_000 + 1e-6);
      expect(parseTimeoutQuery('5x')).toBeUndefined();
      expect(parseTimeoutQuery('')).toBeUndefined();
    }
  });

  it('still parses every value once many distinct ones were seen', () => {
    for (let ms = 1; ms <= 200; ms++) {
      expect(parseTimeoutQuery(`${ms}ms`)).toBe(ms);
      expect(parseTimeoutQuery(`${ms}ms`)).toBe(ms);
      expect(parseTimeoutQuery(`${ms}q`)).toBeUndefined();
    }
    expect(parseTimeoutQuery('1.5s')).toBe(1500);
    expect(parseTimeoutQuery('0s')).toBeUndefined();
  });
});
