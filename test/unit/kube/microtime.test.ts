import { V1MicroTime } from '@kubernetes/client-node';
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { formatMicroTime, isMicroTime, parseMicroTime } from '../../../src/kube/microtime.ts';

const T0 = Date.UTC(2026, 8, 7, 9, 0, 0, 123);

describe('MicroTime', () => {
  it('always has exactly six fractional digits, in UTC', () => {
    expect(formatMicroTime(T0)).toBe('2026-09-07T09:00:00.123000Z');
    expect(formatMicroTime(Date.UTC(2026, 0, 1))).toBe('2026-01-01T00:00:00.000000Z');
    fc.assert(
      fc.property(fc.integer({ min: 0, max: 253_402_300_799_999 }), (ms) => {
        const text = formatMicroTime(ms);
        expect(text).toMatch(/^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{6}Z$/);
        expect(parseMicroTime(text)).toBe(ms);
      }),
    );
  });

  it('parses what the API server returns, truncating below the millisecond, honouring offsets', () => {
    expect(parseMicroTime('2026-09-07T09:00:00.123456Z')).toBe(T0);
    expect(parseMicroTime('2026-09-07T11:00:00.123000+02:00')).toBe(T0);
    expect(parseMicroTime('2026-09-07T09:00:00Z')).toBe(T0 - 123);
    expect(() => parseMicroTime('yesterday')).toThrow('invalid MicroTime');
  });

  it('formats with exactly six fractional digits', () => {
    expect(formatMicroTime(Date.UTC(2026, 0, 1))).toBe('2026-01-01T00:00:00.000000Z');
    expect(formatMicroTime(Date.UTC(2026, 0, 1, 12, 30, 5, 123))).toBe('2026-01-01T12:30:05.123000Z');
    expect(isMicroTime('2026-01-01T00:00:00.000000Z')).toBe(true);
    expect(isMicroTime('2026-01-01T00:00:00.000Z')).toBe(false);
    // What JSON.stringify makes of the eventTime we hand to client-node, versus a plain Date.
    const body = JSON.parse(JSON.stringify({ micro: new V1MicroTime(0), plain: new Date(0) }));
    expect(body.micro).toBe('1970-01-01T00:00:00.000000Z');
    expect(isMicroTime(body.plain)).toBe(false);
  });
});
