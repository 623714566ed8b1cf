// `?timeout=` is parsed once per distinct value (the API server repeats one value): remembering must not
// change any answer, for the values remembered and for those seen after the memory is full.
import { describe, expect, it } from 'vitest';
import { parseTimeoutQuery, reviewBudgetMs } from '../../../webhooks/admission-http.ts';

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

describe('the review budget', () => {
  it('parses the ?timeout= query and derives the handler budget', () => {
    expect(parseTimeoutQuery('10s')).toBe(10_000);
    expect(parseTimeoutQuery('1m0s')).toBe(60_000);
    expect(parseTimeoutQuery('1.5s')).toBe(1500);
    expect(parseTimeoutQuery('250ms')).toBe(250);
    expect(parseTimeoutQuery('abc')).toBeUndefined();
    expect(parseTimeoutQuery('0s')).toBeUndefined();
    expect(parseTimeoutQuery(['10s'])).toBeUndefined();
    expect(reviewBudgetMs(10_000, 5000)).toBe(5000);
    expect(reviewBudgetMs(3000, 5000)).toBe(2400);
    expect(reviewBudgetMs(1000, 5000)).toBe(800);
    expect(reviewBudgetMs(undefined, 5000)).toBe(5000);
  });
});
