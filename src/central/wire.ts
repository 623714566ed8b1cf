// The central API's JSON on the wire (docs/behaviour.md §3.4), Go-compatible: times as RFC 3339
// with the fraction's trailing zeros trimmed, and Go's zero time for "absent" (encoding/json never omits
// a time.Time); `holder` and `fencingToken` are omitempty.
import type { LeaseResult } from './manager.ts';

export const GO_ZERO_TIME = '0001-01-01T00:00:00Z';

/** Go's time.Time JSON (RFC3339Nano, UTC) for epoch ms; undefined is the zero time. */
export function formatGoTime(ms: number | undefined): string {
  if (ms === undefined) return GO_ZERO_TIME;
  const iso = new Date(ms).toISOString();
  return iso.replace(/\.(\d*?)0*Z$/, (_, digits: string) => (digits === '' ? 'Z' : `.${digits}Z`));
}

export interface LeaseResponseBody {
  acquired: boolean;
  holder?: string;
  fencingToken?: number;
  expiresAt: string;
  acquiredAt: string;
}

export function leaseResponseBody(result: LeaseResult): LeaseResponseBody {
  // Built in the Go struct's field order: acquired, holder, fencingToken, expiresAt, acquiredAt.
  return {
    acquired: result.acquired,
    ...(result.holder === '' ? {} : { holder: result.holder }),
    ...(result.fencingToken === 0 ? {} : { fencingToken: result.fencingToken }),
    expiresAt: formatGoTime(result.expiresAt),
    acquiredAt: formatGoTime(result.acquiredAt),
  };
}

export interface ErrorBody {
  error: string;
  requestId?: string;
}
