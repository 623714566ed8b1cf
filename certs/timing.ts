// When certificates are issued, renewed and rotated. Pure functions of the certificate's validity and the
// time, so the schedule is unit-tested with plain numbers.

/** Renew (leaf) or rotate (CA) once this fraction of the validity has passed, like cert-manager. */
export const RENEW_FRACTION = 2 / 3;

/** notBefore is moved back by this much at most, so a peer whose clock lags still accepts a new cert. */
export const MAX_BACKDATE_MS = 60_000;

export interface Validity {
  notBefore: Date;
  notAfter: Date;
}

/** The instant at which `fraction` of the validity has passed. */
export function renewalTime(validity: Validity, fraction: number = RENEW_FRACTION): number {
  const from = validity.notBefore.getTime();
  const to = validity.notAfter.getTime();
  return from + (to - from) * fraction;
}

export function renewalDue(validity: Validity, now: number, fraction: number = RENEW_FRACTION): boolean {
  return now >= renewalTime(validity, fraction);
}

export function isExpired(validity: Validity, now: number): boolean {
  return now >= validity.notAfter.getTime();
}

/**
 * How far to backdate notBefore: a minute, but never more than a tenth of the validity, so a short-lived
 * certificate is not renewed as soon as it is issued.
 */
export function backdateFor(validityMs: number): number {
  return Math.max(0, Math.min(MAX_BACKDATE_MS, validityMs / 10));
}

/**
 * notBefore/notAfter of a certificate issued at `now` for `validityMs`, not outliving `cap` (the issuer's
 * notAfter: a certificate must not outlive the CA that signed it).
 */
export function validityWindow(now: number, validityMs: number, cap?: Date): Validity {
  const notBefore = new Date(now - backdateFor(validityMs));
  const end = now + validityMs;
  const notAfter = new Date(cap === undefined ? end : Math.min(end, cap.getTime()));
  return { notBefore, notAfter };
}
