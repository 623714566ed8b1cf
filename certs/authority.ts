// The self-signed authority as data, and every decision about it, as pure functions of (state, now):
//
//   - the CA lives in a Secret as `ca.crt`/`ca.key` (current) and `previous-ca.crt`/`previous-ca.key`
//     (the CA it replaced, kept until it expires);
//   - the CA is rotated at 2/3 of its life; the previous CA stays trusted (in the caBundle) until it
//     expires, so leaves it signed keep working through the overlap;
//   - a new CA signs leaves only once it is `propagationMs` past its notBefore: by then the leader has put
//     it in the caBundle (the safe order: bundle first, leaves later); until then the previous CA signs;
//   - a leaf is reissued at 2/3 of its life, when its issuer is no longer trusted, or when its DNS names
//     are not the wanted ones.
import { type CertificateInfo, type Checked, checkServingPair } from './pair.ts';
import { joinPem } from './pem.ts';
import { isExpired, RENEW_FRACTION, renewalDue, renewalTime } from './timing.ts';

export interface KeyPairPem {
  cert: string;
  key: string;
  info: CertificateInfo;
}

export type CaKeyPair = KeyPairPem;

export interface IssuedLeaf extends KeyPairPem {
  /** Fingerprint of the CA that signed it. */
  issuerFingerprint: string;
}

export interface CaState {
  current: CaKeyPair;
  /** The CA `current` replaced; trusted until it expires. */
  previous?: CaKeyPair;
}

export const CA_DATA_KEYS = {
  cert: 'ca.crt',
  key: 'ca.key',
  previousCert: 'previous-ca.crt',
  previousKey: 'previous-ca.key',
} as const;

/** A CA pair: parses, key matches, not expired, and the certificate is a CA. */
export function checkCaPair(cert: string, key: string, now: number): Checked<CaKeyPair> {
  const checked = checkServingPair(cert, key, now, { certName: 'CA certificate', keyName: 'CA key' });
  if (!checked.ok) return checked;
  if (!checked.value.isCa) return { ok: false, reason: 'CA certificate is not a CA (basicConstraints)' };
  return { ok: true, value: { cert, key, info: checked.value } };
}

export interface ParsedCaData {
  /** Undefined when the current CA is missing or unusable (`problem` says why). */
  state?: CaState;
  problem?: string;
  /** Why a previous CA present in the data was left out (expired, unparsable). */
  droppedPrevious?: string;
}

/** Reads the CA state out of the Secret's (decoded) data. */
export function parseCaData(data: Readonly<Record<string, string | undefined>>, now: number): ParsedCaData {
  const cert = data[CA_DATA_KEYS.cert];
  const key = data[CA_DATA_KEYS.key];
  if (!cert || !key) return { problem: `${CA_DATA_KEYS.cert} or ${CA_DATA_KEYS.key} is missing` };
  const current = checkCaPair(cert, key, now);
  if (!current.ok) return { problem: current.reason };
  const prevCert = data[CA_DATA_KEYS.previousCert];
  const prevKey = data[CA_DATA_KEYS.previousKey];
  if (!prevCert || !prevKey) return { state: { current: current.value } };
  const previous = checkCaPair(prevCert, prevKey, now);
  if (!previous.ok) return { state: { current: current.value }, droppedPrevious: previous.reason };
  return { state: { current: current.value, previous: previous.value } };
}

/** The Secret data (decoded) holding `state`. */
export function caData(state: CaState): Record<string, string> {
  const data: Record<string, string> = {
    [CA_DATA_KEYS.cert]: state.current.cert,
    [CA_DATA_KEYS.key]: state.current.key,
  };
  if (state.previous !== undefined) {
    data[CA_DATA_KEYS.previousCert] = state.previous.cert;
    data[CA_DATA_KEYS.previousKey] = state.previous.key;
  }
  return data;
}

export type CaAction = { action: 'keep' } | { action: 'rotate' } | { action: 'replace'; reason: string };

/** What to do with the stored CA: keep it, rotate it (2/3 of its life), or replace an unusable one. */
export function decideCa(parsed: ParsedCaData, now: number, fraction: number = RENEW_FRACTION): CaAction {
  if (parsed.state === undefined) return { action: 'replace', reason: parsed.problem ?? 'no CA' };
  if (renewalDue(parsed.state.current.info, now, fraction)) return { action: 'rotate' };
  return { action: 'keep' };
}

/** The state after rotating to `fresh`: the current CA becomes the previous one. */
export function rotatedState(old: CaState, fresh: CaKeyPair): CaState {
  return { current: fresh, previous: old.current };
}

/** CAs that clients must trust at `now`: the current one, and the previous one until it expires. */
export function trustedCas(state: CaState, now: number): CaKeyPair[] {
  const cas = [state.current];
  if (state.previous !== undefined && !isExpired(state.previous.info, now)) cas.push(state.previous);
  return cas;
}

/** The PEM caBundle for `now`: current CA first, then the previous one while it is valid. */
export function caBundlePem(state: CaState, now: number): string {
  return joinPem(trustedCas(state, now).map((ca) => ca.cert));
}

/** The CA that signs a leaf issued at `now` (see the propagation rule at the top). */
export function signingCa(state: CaState, now: number, propagationMs: number): CaKeyPair {
  const previous = state.previous;
  const young = now < state.current.info.notBefore.getTime() + propagationMs;
  if (young && previous !== undefined && !isExpired(previous.info, now)) return previous;
  return state.current;
}

export type LeafIssueReason = 'missing' | 'due' | 'issuer-not-trusted' | 'names-changed';

export type LeafAction = { action: 'keep'; renewAt: number } | { action: 'issue'; reason: LeafIssueReason };

const sameNames = (a: readonly string[], b: readonly string[]): boolean =>
  a.length === b.length && [...a].sort().join('\n') === [...b].sort().join('\n');

export function decideLeaf(
  leaf: IssuedLeaf | undefined,
  state: CaState,
  now: number,
  dnsNames: readonly string[],
  fraction: number = RENEW_FRACTION,
): LeafAction {
  if (leaf === undefined) return { action: 'issue', reason: 'missing' };
  if (!trustedCas(state, now).some((ca) => ca.info.fingerprint === leaf.issuerFingerprint)) {
    return { action: 'issue', reason: 'issuer-not-trusted' };
  }
  if (!sameNames(leaf.info.dnsNames, dnsNames)) return { action: 'issue', reason: 'names-changed' };
  if (renewalDue(leaf.info, now, fraction)) return { action: 'issue', reason: 'due' };
  return { action: 'keep', renewAt: renewalTime(leaf.info, fraction) };
}

/**
 * The next instant at which something changes without any outside event: the leaf's renewal, the CA's
 * rotation, or the previous CA dropping out of the bundle. Only instants after `now` count; Infinity if
 * none is left.
 */
export function nextChangeAt(
  state: CaState,
  leaf: IssuedLeaf,
  now: number,
  fraction: number = RENEW_FRACTION,
): number {
  const times = [renewalTime(leaf.info, fraction), renewalTime(state.current.info, fraction)];
  if (state.previous !== undefined) times.push(state.previous.info.notAfter.getTime());
  return Math.min(Infinity, ...times.filter((t) => t > now));
}
