// The broker's timing decisions, pure (docs/oidc-broker.md §2): when the next refresh is due, how the retry
// delay grows. Times are epoch milliseconds of the broker's own clock; the token's expiry is the moment of
// the answer plus its `expires_in`, so the issuer's clock (the JWT's exp) never enters.

/** When a token answered at `receivedAt` with `expiresInS` expires; undefined without an `expires_in` (or 0). */
export function tokenExpiry(receivedAt: number, expiresInS: number | undefined): number | undefined {
  return expiresInS === undefined || expiresInS === 0 ? undefined : receivedAt + expiresInS * 1000;
}

/**
 * How long to wait before the next refresh: until `skew` before the expiry, but at least `minRefresh`, so a
 * token without expiry, already expired or shorter-lived than the skew never makes the broker spin.
 */
export function refreshDelay(
  expiresAt: number | undefined,
  now: number,
  skewMs: number,
  minRefreshMs: number,
): number {
  if (expiresAt === undefined) return minRefreshMs;
  return Math.max(expiresAt - now - skewMs, minRefreshMs);
}

/** The retry delay after `current`: doubled, capped at `limit` (also when doubling overflows to Infinity). */
export function nextRetry(current: number, limit: number): number {
  const next = current * 2;
  return next > 0 && next <= limit ? next : limit;
}
