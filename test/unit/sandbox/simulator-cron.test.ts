// Cron schedules of the workload simulator: robfig/cron ParseStandard syntax and semantics.
import { describe, expect, it } from 'vitest';
import { CronError, parseCron } from '../../../src/sandbox/simulator/cron.ts';

const at = (iso: string): number => Date.parse(iso);
const iso = (t: number | undefined): string | undefined =>
  t === undefined ? undefined : new Date(t).toISOString();
const next = (spec: string, after: string, tz?: string): string | undefined =>
  iso(parseCron(spec, tz).next(at(after)));
const mostRecent = (spec: string, earliest: string, now: string, tz?: string): string | undefined =>
  iso(parseCron(spec, tz).mostRecent(at(earliest), at(now)));

describe('parseCron: next activation', () => {
  it('finds the next whole minute strictly after the given time', () => {
    expect(next('* * * * *', '2024-01-01T00:00:30Z')).toBe('2024-01-01T00:01:00.000Z');
    expect(next('* * * * *', '2024-01-01T00:01:00Z')).toBe('2024-01-01T00:02:00.000Z');
    expect(next('59 23 31 12 *', '2024-12-31T23:58:59Z')).toBe('2024-12-31T23:59:00.000Z');
  });

  it('supports steps, ranges with steps, `N/step` and lists', () => {
    expect(next('*/15 * * * *', '2024-01-01T00:16:00Z')).toBe('2024-01-01T00:30:00.000Z');
    expect(next('5/20 * * * *', '2024-01-01T00:26:00Z')).toBe('2024-01-01T00:45:00.000Z');
    expect(next('10-30/10 8 * * *', '2024-01-01T08:30:00Z')).toBe('2024-01-02T08:10:00.000Z');
    expect(next('0 9-17/4,22 * * *', '2024-01-01T13:00:00Z')).toBe('2024-01-01T17:00:00.000Z');
    expect(next('0 9-17/4,22 * * *', '2024-01-01T17:00:00Z')).toBe('2024-01-01T22:00:00.000Z');
  });

  it('accepts month and weekday names in any case', () => {
    expect(next('0 0 1 jan,JUL *', '2024-02-01T00:00:00Z')).toBe('2024-07-01T00:00:00.000Z');
    // 2024-03-08 is a Friday.
    expect(next('30 6 * * mon-fri', '2024-03-08T07:00:00Z')).toBe('2024-03-11T06:30:00.000Z');
    expect(next('0 12 * * Sun', '2024-03-08T07:00:00Z')).toBe('2024-03-10T12:00:00.000Z');
  });

  it('matches either day field when both are restricted, both when one is a star', () => {
    // The 13th (a Sunday) or any Friday.
    expect(next('0 0 13 * 5', '2024-10-11T00:00:01Z')).toBe('2024-10-13T00:00:00.000Z');
    // Sundays only.
    expect(next('0 0 * * 0', '2024-10-13T00:00:01Z')).toBe('2024-10-20T00:00:00.000Z');
    expect(next('0 0 ? * 1', '2024-10-01T00:00:01Z')).toBe('2024-10-07T00:00:00.000Z');
    // `*/2` is no star: odd days or Mondays (2024-10-01 is a Tuesday).
    expect(next('0 0 */2 * 1', '2024-10-01T00:00:01Z')).toBe('2024-10-03T00:00:00.000Z');
  });

  it('finds leap days and reports schedules that never fire', () => {
    expect(next('0 0 29 2 *', '2025-01-01T00:00:00Z')).toBe('2028-02-29T00:00:00.000Z');
    expect(next('0 0 30 2 *', '2025-01-01T00:00:00Z')).toBeUndefined();
  });

  it('expands the descriptors', () => {
    const after = '2024-05-15T10:20:00Z'; // a Wednesday
    expect(next('@hourly', after)).toBe('2024-05-15T11:00:00.000Z');
    expect(next('@daily', after)).toBe('2024-05-16T00:00:00.000Z');
    expect(next('@midnight', after)).toBe('2024-05-16T00:00:00.000Z');
    expect(next('@weekly', after)).toBe('2024-05-19T00:00:00.000Z');
    expect(next('@monthly', after)).toBe('2024-06-01T00:00:00.000Z');
    expect(next('@yearly', after)).toBe('2025-01-01T00:00:00.000Z');
    expect(next('@annually', after)).toBe('2025-01-01T00:00:00.000Z');
  });

  it('runs @every intervals from the given time, in whole seconds', () => {
    expect(next('@every 1m30s', '2024-01-01T00:00:00.700Z')).toBe('2024-01-01T00:01:30.000Z');
    expect(next('@every 100ms', '2024-01-01T00:00:00Z')).toBe('2024-01-01T00:00:01.000Z');
    expect(mostRecent('@every 1h', '2024-01-01T00:00:00Z', '2024-01-01T05:59:00Z')).toBe(
      '2024-01-01T05:00:00.000Z',
    );
    expect(mostRecent('@every 1h', '2024-01-01T00:00:00Z', '2024-01-01T00:59:00Z')).toBeUndefined();
  });
});

describe('parseCron: time zones', () => {
  it('fires at the wall-clock time of spec.timeZone, across DST', () => {
    expect(next('0 9 * * *', '2024-01-15T00:00:00Z', 'America/New_York')).toBe('2024-01-15T14:00:00.000Z');
    expect(next('0 9 * * *', '2024-07-15T00:00:00Z', 'America/New_York')).toBe('2024-07-15T13:00:00.000Z');
    expect(next('0 9 * * *', '2024-07-15T00:00:00Z', 'Etc/UTC')).toBe('2024-07-15T09:00:00.000Z');
  });

  it('runs a wall time skipped by the spring-forward change after the gap', () => {
    // 2024-03-10 02:30 does not exist in New York: it runs at 03:30 EDT, then 02:30 EDT the day after.
    expect(next('30 2 * * *', '2024-03-09T08:00:00Z', 'America/New_York')).toBe('2024-03-10T07:30:00.000Z');
    expect(next('30 2 * * *', '2024-03-10T07:30:00Z', 'America/New_York')).toBe('2024-03-11T06:30:00.000Z');
  });

  it('rejects an unknown zone', () => {
    expect(() => parseCron('* * * * *', 'Mars/Olympus_Mons')).toThrow(CronError);
  });
});

describe('parseCron: most recent activation', () => {
  it('returns the latest activation in (earliest, now]', () => {
    expect(mostRecent('0 * * * *', '2024-01-01T00:30:00Z', '2024-01-01T05:10:00Z')).toBe(
      '2024-01-01T05:00:00.000Z',
    );
    expect(mostRecent('0 * * * *', '2024-01-01T00:30:00Z', '2024-01-01T00:59:59Z')).toBeUndefined();
    expect(mostRecent('0 * * * *', '2024-01-01T00:30:00Z', '2024-01-01T01:00:00Z')).toBe(
      '2024-01-01T01:00:00.000Z',
    );
    expect(mostRecent('0 * * * *', '2024-01-01T01:00:00Z', '2024-01-01T01:30:00Z')).toBeUndefined();
  });

  it('is quick across a long gap and honours the time zone', () => {
    expect(mostRecent('* * * * *', '2020-01-01T00:00:00Z', '2024-06-01T12:34:56Z')).toBe(
      '2024-06-01T12:34:00.000Z',
    );
    expect(mostRecent('0 0 1 1 *', '2001-01-01T00:00:00Z', '2024-06-01T12:34:56Z')).toBe(
      '2024-01-01T00:00:00.000Z',
    );
    expect(mostRecent('0 9 * * *', '2024-01-01T00:00:00Z', '2024-01-20T15:00:00Z', 'America/New_York')).toBe(
      '2024-01-20T14:00:00.000Z',
    );
  });
});

describe('parseCron: invalid schedules', () => {
  it.each([
    ['', 'empty spec string'],
    ['* * * *', 'expected exactly 5 fields, found 4'],
    ['* * * * * *', 'expected exactly 5 fields, found 6'],
    ['60 * * * *', 'end of range (60) above maximum (59)'],
    ['* * * * 7', 'end of range (7) above maximum (6)'],
    ['* * 0 * *', 'beginning of range (0) below minimum (1)'],
    ['5-1 * * * *', 'beginning of range (5) beyond end of range (1)'],
    ['*/0 * * * *', 'step of range should be a positive number'],
    ['x * * * *', 'failed to parse int from x'],
    ['1-2-3 * * * *', 'too many hyphens'],
    ['*/2/3 * * * *', 'too many slashes'],
    ['@fortnightly', 'unrecognized descriptor'],
    ['@every soon', 'failed to parse duration'],
    ['TZ=UTC * * * * *', 'use spec.timeZone'],
  ])('rejects %j', (spec, message) => {
    expect(() => parseCron(spec)).toThrow(CronError);
    expect(() => parseCron(spec)).toThrow(message);
  });
});
