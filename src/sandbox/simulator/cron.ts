// Cron schedules as the CronJob controller reads them (robfig/cron v3 ParseStandard): five fields
// `minute hour day-of-month month day-of-week` with `*`, `?`, lists, ranges, steps (`*/n`, `a-b/n`, `a/n`
// meaning a-max/n), month and weekday names, and the descriptors @yearly/@annually, @monthly, @weekly,
// @daily/@midnight, @hourly and `@every <duration>`. When both day fields are restricted a day matches
// either of them; when one starts with `*` or `?` both must match (robfig's star bit). Day-of-week is 0-6
// (Sunday is 0; 7 is rejected as by robfig). No cron library is installed in this project, hence this
// implementation.
//
// Times are searched field by field in the wall clock of `timeZone` (UTC when absent); a wall time that a
// DST change skips maps to the instant after the gap.

export class CronError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'CronError';
  }
}

export interface CronSchedule {
  /** First activation strictly after `after` (epoch ms), or undefined when none comes within 8 years. */
  next(after: number): number | undefined;
  /** Latest activation in (earliest, now], or undefined when there is none. */
  mostRecent(earliest: number, now: number): number | undefined;
}

interface FieldRange {
  name: string;
  min: number;
  max: number;
  names?: Record<string, number>;
}

const MONTH_NAMES: Record<string, number> = {
  jan: 1,
  feb: 2,
  mar: 3,
  apr: 4,
  may: 5,
  jun: 6,
  jul: 7,
  aug: 8,
  sep: 9,
  oct: 10,
  nov: 11,
  dec: 12,
};
const DOW_NAMES: Record<string, number> = { sun: 0, mon: 1, tue: 2, wed: 3, thu: 4, fri: 5, sat: 6 };

const FIELDS: FieldRange[] = [
  { name: 'minute', min: 0, max: 59 },
  { name: 'hour', min: 0, max: 23 },
  { name: 'day-of-month', min: 1, max: 31 },
  { name: 'month', min: 1, max: 12, names: MONTH_NAMES },
  { name: 'day-of-week', min: 0, max: 6, names: DOW_NAMES },
];

const DESCRIPTORS: Record<string, string> = {
  '@yearly': '0 0 1 1 *',
  '@annually': '0 0 1 1 *',
  '@monthly': '0 0 1 * *',
  '@weekly': '0 0 * * 0',
  '@daily': '0 0 * * *',
  '@midnight': '0 0 * * *',
  '@hourly': '0 * * * *',
};

interface ParsedField {
  values: Set<number>;
  /** The field started with `*` or `?` without a step > 1. */
  star: boolean;
}

function parseValue(text: string, range: FieldRange): number {
  const named = range.names?.[text.toLowerCase()];
  if (named !== undefined) return named;
  if (!/^\d+$/.test(text)) throw new CronError(`failed to parse int from ${text}: invalid syntax`);
  return Number(text);
}

function parseTerm(term: string, range: FieldRange, out: ParsedField): void {
  const [rangePart = '', stepPart, extra] = term.split('/');
  if (extra !== undefined) throw new CronError(`too many slashes: ${term}`);
  const bounds = rangePart.split('-');
  let start: number;
  let end: number;
  let star = false;
  if (bounds[0] === '*' || bounds[0] === '?') {
    if (bounds.length > 1) throw new CronError(`too many hyphens: ${term}`);
    start = range.min;
    end = range.max;
    star = true;
  } else {
    if (bounds.length > 2) throw new CronError(`too many hyphens: ${term}`);
    start = parseValue(bounds[0] ?? '', range);
    end = bounds.length === 2 ? parseValue(bounds[1] ?? '', range) : start;
  }
  let step = 1;
  if (stepPart !== undefined) {
    if (!/^\d+$/.test(stepPart)) throw new CronError(`failed to parse int from ${stepPart}: invalid syntax`);
    step = Number(stepPart);
    if (step === 0) throw new CronError(`step of range should be a positive number: ${term}`);
    // "N/step" means "N-max/step".
    if (!star && bounds.length === 1) end = range.max;
    if (step > 1) star = false;
  }
  if (start < range.min)
    throw new CronError(`beginning of range (${start}) below minimum (${range.min}): ${term}`);
  if (end > range.max) throw new CronError(`end of range (${end}) above maximum (${range.max}): ${term}`);
  if (start > end) throw new CronError(`beginning of range (${start}) beyond end of range (${end}): ${term}`);
  for (let v = start; v <= end; v += step) out.values.add(v);
  if (star) out.star = true;
}

function parseField(text: string, range: FieldRange): ParsedField {
  const out: ParsedField = { values: new Set(), star: false };
  if (text === '') throw new CronError(`empty ${range.name} field`);
  for (const term of text.split(',')) parseTerm(term, range, out);
  return out;
}

/** Go time.ParseDuration for the units @every accepts. */
function parseGoDuration(text: string): number {
  const unit: Record<string, number> = {
    h: 3_600_000,
    m: 60_000,
    s: 1000,
    ms: 1,
    us: 0.001,
    µs: 0.001,
    ns: 1e-6,
  };
  if (!/^(\d+(\.\d+)?(h|m|s|ms|us|µs|ns))+$/.test(text))
    throw new CronError(`failed to parse duration ${text}`);
  let total = 0;
  for (const m of text.matchAll(/(\d+(?:\.\d+)?)(ms|us|µs|ns|h|m|s)/g))
    total += Number(m[1]) * (unit[m[2]!] ?? 0);
  return total;
}

// ---------------------------------------------------------------------------------------------------------
// Wall-clock conversion for time zones.

const formatters = new Map<string, Intl.DateTimeFormat>();

function formatter(timeZone: string): Intl.DateTimeFormat {
  let f = formatters.get(timeZone);
  if (!f) {
    try {
      f = new Intl.DateTimeFormat('en-US', {
        timeZone,
        hourCycle: 'h23',
        year: 'numeric',
        month: 'numeric',
        day: 'numeric',
        hour: 'numeric',
        minute: 'numeric',
        second: 'numeric',
      });
    } catch {
      throw new CronError(`unknown time zone ${timeZone}`);
    }
    formatters.set(timeZone, f);
  }
  return f;
}

/** Offset (ms) of the zone's wall clock from UTC at `instant`. */
function zoneOffset(timeZone: string, instant: number): number {
  const parts: Record<string, number> = {};
  for (const p of formatter(timeZone).formatToParts(new Date(instant))) {
    if (p.type !== 'literal') parts[p.type] = Number(p.value);
  }
  const wall = Date.UTC(
    parts.year ?? 1970,
    (parts.month ?? 1) - 1,
    parts.day ?? 1,
    parts.hour ?? 0,
    parts.minute ?? 0,
    parts.second ?? 0,
  );
  return wall - Math.floor(instant / 1000) * 1000;
}

interface Zone {
  toWall(instant: number): number;
  toInstant(wall: number): number;
}

const UTC: Zone = { toWall: (t) => t, toInstant: (w) => w };

function zone(timeZone: string | undefined): Zone {
  if (!timeZone || timeZone === 'UTC' || timeZone === 'Etc/UTC') return UTC;
  formatter(timeZone); // validates the name
  return {
    toWall: (t) => t + zoneOffset(timeZone, t),
    toInstant(wall) {
      const first = wall - zoneOffset(timeZone, wall);
      const second = wall - zoneOffset(timeZone, first);
      if (second + zoneOffset(timeZone, second) === wall) return second;
      // A wall time skipped by a DST change: take the instant after the gap.
      return Math.max(first, second);
    },
  };
}

// ---------------------------------------------------------------------------------------------------------
// Field-wise search (robfig's SpecSchedule.Next, and its mirror image for the previous activation).

const MINUTE = 60_000;
const HOUR = 3_600_000;
const DAY = 86_400_000;
const SEARCH_YEARS = 8;

class SpecSchedule implements CronSchedule {
  private readonly minute: Set<number>;
  private readonly hour: Set<number>;
  private readonly dom: ParsedField;
  private readonly month: Set<number>;
  private readonly dow: ParsedField;
  private readonly zone: Zone;

  constructor(fields: ParsedField[], z: Zone) {
    this.minute = fields[0]!.values;
    this.hour = fields[1]!.values;
    this.dom = fields[2]!;
    this.month = fields[3]!.values;
    this.dow = fields[4]!;
    this.zone = z;
  }

  private dayMatches(d: Date): boolean {
    const domMatch = this.dom.values.has(d.getUTCDate());
    const dowMatch = this.dow.values.has(d.getUTCDay());
    return this.dom.star || this.dow.star ? domMatch && dowMatch : domMatch || dowMatch;
  }

  next(after: number): number | undefined {
    // Search in wall time, starting at the next whole minute after `after`.
    let t = Math.floor(this.zone.toWall(after) / MINUTE) * MINUTE + MINUTE;
    const limit = new Date(t).getUTCFullYear() + SEARCH_YEARS;
    for (;;) {
      const d = new Date(t);
      if (d.getUTCFullYear() > limit) return undefined;
      if (!this.month.has(d.getUTCMonth() + 1)) {
        t = Date.UTC(d.getUTCFullYear(), d.getUTCMonth() + 1, 1);
        continue;
      }
      if (!this.dayMatches(d)) {
        t = Date.UTC(d.getUTCFullYear(), d.getUTCMonth(), d.getUTCDate() + 1);
        continue;
      }
      if (!this.hour.has(d.getUTCHours())) {
        t = Math.floor(t / HOUR) * HOUR + HOUR;
        continue;
      }
      if (!this.minute.has(d.getUTCMinutes())) {
        t += MINUTE;
        continue;
      }
      const instant = this.zone.toInstant(t);
      // A wall time repeated or skipped around a DST change can map back to or before `after`.
      if (instant <= after) {
        t += MINUTE;
        continue;
      }
      return instant;
    }
  }

  /** Latest activation at or before `atOrBefore`, searching backwards field by field. */
  private previous(atOrBefore: number, notBefore: number): number | undefined {
    let t = Math.floor(this.zone.toWall(atOrBefore) / MINUTE) * MINUTE;
    const floor = this.zone.toWall(notBefore) - DAY;
    for (;;) {
      if (t <= floor) return undefined;
      const d = new Date(t);
      if (!this.month.has(d.getUTCMonth() + 1)) {
        t = Date.UTC(d.getUTCFullYear(), d.getUTCMonth(), 1) - MINUTE;
        continue;
      }
      if (!this.dayMatches(d)) {
        t = Date.UTC(d.getUTCFullYear(), d.getUTCMonth(), d.getUTCDate()) - MINUTE;
        continue;
      }
      if (!this.hour.has(d.getUTCHours())) {
        t = Math.floor(t / HOUR) * HOUR - MINUTE;
        continue;
      }
      if (!this.minute.has(d.getUTCMinutes())) {
        t -= MINUTE;
        continue;
      }
      const instant = this.zone.toInstant(t);
      if (instant > atOrBefore) {
        t -= MINUTE;
        continue;
      }
      return instant;
    }
  }

  mostRecent(earliest: number, now: number): number | undefined {
    if (now <= earliest) return undefined;
    const t = this.previous(now, earliest);
    return t !== undefined && t > earliest ? t : undefined;
  }
}

class EverySchedule implements CronSchedule {
  private readonly delay: number;
  constructor(delayMs: number) {
    // robfig rounds an interval below one second up to one second, and drops sub-second parts.
    this.delay = Math.max(1000, Math.floor(delayMs / 1000) * 1000);
  }
  next(after: number): number {
    return Math.floor((after + this.delay) / 1000) * 1000;
  }
  mostRecent(earliest: number, now: number): number | undefined {
    if (now < earliest + this.delay) return undefined;
    return earliest + Math.floor((now - earliest) / this.delay) * this.delay;
  }
}

/** Parses a CronJob schedule; throws CronError with robfig's wording for invalid ones. */
export function parseCron(expression: string, timeZone?: string): CronSchedule {
  const text = expression.trim();
  if (text === '') throw new CronError('empty spec string');
  if (/^(CRON_)?TZ=/.test(text))
    throw new CronError('time zones in the schedule are not supported: use spec.timeZone');
  const z = zone(timeZone);
  if (text.startsWith('@every ')) {
    const ms = parseGoDuration(text.slice('@every '.length).trim());
    return new EverySchedule(ms);
  }
  const spec = text.startsWith('@') ? DESCRIPTORS[text.toLowerCase()] : text;
  if (spec === undefined) throw new CronError(`unrecognized descriptor: ${text}`);
  const parts = spec.split(/\s+/);
  if (parts.length !== 5)
    throw new CronError(`expected exactly 5 fields, found ${parts.length}: [${parts.join(' ')}]`);
  return new SpecSchedule(
    parts.map((p, i) => parseField(p, FIELDS[i]!)),
    z,
  );
}
