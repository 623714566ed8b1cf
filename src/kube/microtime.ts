// Kubernetes MicroTime (Lease `acquireTime`/`renewTime`, Event `eventTime`/`series.lastObservedTime`):
// RFC 3339 with exactly six fractional digits, the only form the API server accepts for these fields; a
// plain Date gives three and is rejected with 400.

/** Epoch milliseconds as MicroTime in UTC (the milliseconds padded with 000). */
export function formatMicroTime(ms: number): string {
  return new Date(ms).toISOString().replace(/Z$/, '000Z');
}

const MICROTIME = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{6}Z$/;

/** True for the exact form formatMicroTime writes. */
export function isMicroTime(value: unknown): boolean {
  return typeof value === 'string' && MICROTIME.test(value);
}

const TIME = /^(\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2})(?:\.(\d{1,9}))?(Z|[+-]\d{2}:\d{2})$/;

/** Epoch ms of a MicroTime (or any RFC 3339 time); sub-millisecond digits are truncated. */
export function parseMicroTime(text: string): number {
  const m = TIME.exec(text);
  const seconds = m ? Date.parse(`${m[1]}${m[3]}`) : Number.NaN;
  if (!Number.isFinite(seconds)) throw new Error(`invalid MicroTime ${JSON.stringify(text)}`);
  return seconds + Number((m![2] ?? '').padEnd(3, '0').slice(0, 3));
}
