// Column values as the three drivers return them, decoded into a LeaseRecord's numbers. Instants are
// read in UTC whatever form a driver gives: a Date (node-postgres, timestamptz), or text with an optional
// offset (MySQL datetime(6) has none and holds UTC; SQLite holds RFC 3339 text). Fractions finer than a
// millisecond (the Go server writes microseconds) are truncated, never rounded up, so a lease read back
// never looks renewed later than it was.

/** The latest instant the text columns can carry: 9999-12-31T23:59:59.999Z. */
export const MAX_INSTANT_MS = 253_402_300_799_999;

const INSTANT = /^(\d{4})-(\d{2})-(\d{2})[T ](\d{2}):(\d{2}):(\d{2})(?:\.(\d+))?(Z|[+-]\d{2}(?::?\d{2})?)?$/i;

/** Epoch milliseconds of an instant column value; throws naming the column on anything else. */
export function decodeInstant(value: unknown, column: string): number {
  if (value instanceof Date) {
    const ms = value.getTime();
    if (Number.isNaN(ms)) throw new Error(`${column}: invalid date`);
    return ms;
  }
  const m = typeof value === 'string' ? INSTANT.exec(value.trim()) : null;
  if (m === null) throw new Error(`${column}: not an instant: ${JSON.stringify(value)}`);
  const [year, month, day, hour, minute, second] = [1, 2, 3, 4, 5, 6].map((i) => Number(m[i]));
  const ms = Number((m[7] ?? '').padEnd(3, '0').slice(0, 3));
  // Not Date.UTC: it maps the years 0-99 to 1900-1999.
  const date = new Date(0);
  date.setUTCFullYear(year!, month! - 1, day);
  date.setUTCHours(hour!, minute, second, ms);
  const exact =
    date.getUTCFullYear() === year &&
    date.getUTCMonth() === month! - 1 &&
    date.getUTCDate() === day &&
    date.getUTCHours() === hour &&
    date.getUTCMinutes() === minute &&
    date.getUTCSeconds() === second;
  if (!exact) throw new Error(`${column}: not an instant: ${JSON.stringify(value)}`);
  return date.getTime() - offsetMs(m[8]);
}

function offsetMs(zone: string | undefined): number {
  if (zone === undefined || zone.toUpperCase() === 'Z') return 0;
  const digits = zone.slice(1).replace(':', '');
  const minutes = Number(digits.slice(0, 2)) * 60 + Number(digits.slice(2) || '0');
  return (zone.startsWith('-') ? -1 : 1) * minutes * 60_000;
}

/** A safe integer from a number, a bigint or decimal text (node-postgres returns bigint as text). */
export function decodeInteger(value: unknown, column: string): number {
  const n =
    typeof value === 'number'
      ? value
      : typeof value === 'bigint' || (typeof value === 'string' && /^-?\d+$/.test(value))
        ? Number(value)
        : Number.NaN;
  if (!Number.isSafeInteger(n)) throw new Error(`${column}: ${String(value)} is not a safe integer`);
  return n;
}

export function decodeText(value: unknown, column: string): string {
  if (typeof value !== 'string') throw new Error(`${column}: not text`);
  return value;
}
