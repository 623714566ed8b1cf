// The pure schedule: renewal at 2/3, backdating, CA rotation with an old+new overlap, which CA signs, and
// when a leaf must be reissued. Certificates are real (selfsigned), dated from a fixed epoch.
import { X509Certificate } from 'node:crypto';
import { beforeAll, describe, expect, it } from 'vitest';
import {
  type CaKeyPair,
  type CaState,
  caBundlePem,
  caData,
  decideCa,
  decideLeaf,
  nextChangeAt,
  parseCaData,
  rotatedState,
  signingCa,
  trustedCas,
} from '../../../certs/authority.ts';
import { generateCa, issueLeaf } from '../../../certs/issue.ts';
import { splitPemCertificates } from '../../../certs/pem.ts';
import { backdateFor, renewalDue, renewalTime, validityWindow } from '../../../certs/timing.ts';
import { MANUAL_CLOCK_DEFAULT_START } from '../../../src/kube/clock.ts';

const T0 = MANUAL_CLOCK_DEFAULT_START;
const MIN = 60_000;
const HOUR = 60 * MIN;
const DAY = 24 * HOUR;
const NAMES = ['hook.ns.svc', 'hook'];

describe('timing', () => {
  it('renews at 2/3 of the validity', () => {
    const v = { notBefore: new Date(0), notAfter: new Date(3 * DAY) };
    expect(renewalTime(v)).toBe(2 * DAY);
    expect(renewalDue(v, 2 * DAY - 1)).toBe(false);
    expect(renewalDue(v, 2 * DAY)).toBe(true);
    expect(renewalTime(v, 0.5)).toBe(1.5 * DAY);
  });

  it('backdates by a minute, or a tenth of a short validity', () => {
    expect(backdateFor(7 * DAY)).toBe(MIN);
    expect(backdateFor(3_000)).toBe(300);
    expect(validityWindow(T0, 7 * DAY)).toEqual({
      notBefore: new Date(T0 - MIN),
      notAfter: new Date(T0 + 7 * DAY),
    });
  });

  it('never lets a certificate outlive its issuer', () => {
    const cap = new Date(T0 + DAY);
    expect(validityWindow(T0, 7 * DAY, cap).notAfter).toEqual(cap);
    expect(validityWindow(T0, HOUR, cap).notAfter).toEqual(new Date(T0 + HOUR));
  });
});

describe('the self-signed authority', () => {
  // CA1 valid 9 days from T0; CA2 created when CA1 is due for rotation.
  let ca1: CaKeyPair;
  let ca2: CaKeyPair;
  let rotationAt: number;

  beforeAll(async () => {
    ca1 = await generateCa({ now: T0, validityMs: 9 * DAY });
    rotationAt = renewalTime(ca1.info);
    ca2 = await generateCa({ now: rotationAt, validityMs: 9 * DAY });
  });

  it('makes CAs with unique subjects, marked as CAs, with the requested validity', () => {
    expect(ca1.info.isCa).toBe(true);
    expect(ca1.info.subject).toMatch(/^CN=berth-operator-webhook-ca@\d+-[0-9a-f]{6}$/);
    expect(ca2.info.subject).not.toBe(ca1.info.subject);
    expect(ca1.info.notAfter.getTime()).toBe(T0 + 9 * DAY);
    const x = new X509Certificate(ca1.cert);
    expect(x.verify(x.publicKey)).toBe(true);
  });

  it('issues leaves signed by the CA, for the names, with a SHA-256 ECDSA P-256 signature', async () => {
    const leaf = await issueLeaf(ca1, { now: T0, validityMs: 3 * DAY, dnsNames: NAMES });
    const x = new X509Certificate(leaf.cert);
    expect(x.verify(new X509Certificate(ca1.cert).publicKey)).toBe(true);
    expect(x.checkIssued(new X509Certificate(ca1.cert))).toBe(true);
    expect(x.subject).toBe('CN=hook.ns.svc');
    expect(leaf.info.dnsNames).toEqual(NAMES);
    expect(leaf.issuerFingerprint).toBe(ca1.info.fingerprint);
    expect(x.publicKey.asymmetricKeyDetails).toEqual({ namedCurve: 'prime256v1' });
    expect(x.toLegacyObject().asn1Curve).toBe('prime256v1');
    expect(x.ca).toBe(false);
  });

  it('decides keep, rotate at 2/3, and replace for a missing, junk or expired CA', async () => {
    const state: CaState = { current: ca1 };
    expect(decideCa({ state }, T0)).toEqual({ action: 'keep' });
    expect(decideCa({ state }, rotationAt - 1)).toEqual({ action: 'keep' });
    expect(decideCa({ state }, rotationAt)).toEqual({ action: 'rotate' });

    expect(decideCa(parseCaData({}, T0), T0)).toEqual({
      action: 'replace',
      reason: 'ca.crt or ca.key is missing',
    });
    expect(decideCa(parseCaData({ 'ca.crt': 'junk', 'ca.key': ca1.key }, T0), T0)).toEqual({
      action: 'replace',
      reason: 'CA certificate holds no PEM certificate',
    });
    expect(decideCa(parseCaData({ 'ca.crt': ca1.cert, 'ca.key': ca2.key }, T0), T0)).toEqual({
      action: 'replace',
      reason: 'private key does not match the certificate',
    });
    expect(decideCa(parseCaData(caData(state), T0 + 9 * DAY), T0 + 9 * DAY)).toMatchObject({
      action: 'replace',
      reason: expect.stringMatching(/^certificate expired at/),
    });
    const leaf = await issueLeaf(ca1, { now: T0, validityMs: DAY, dnsNames: NAMES });
    expect(decideCa(parseCaData({ 'ca.crt': leaf.cert, 'ca.key': leaf.key }, T0), T0)).toEqual({
      action: 'replace',
      reason: 'CA certificate is not a CA (basicConstraints)',
    });
  });

  it('round-trips through the Secret data and drops an unusable previous CA', () => {
    const state = rotatedState({ current: ca1 }, ca2);
    const data = caData(state);
    expect(Object.keys(data).sort()).toEqual(['ca.crt', 'ca.key', 'previous-ca.crt', 'previous-ca.key']);
    const parsed = parseCaData(data, rotationAt);
    expect(parsed.state?.current.info.fingerprint).toBe(ca2.info.fingerprint);
    expect(parsed.state?.previous?.info.fingerprint).toBe(ca1.info.fingerprint);

    const junk = parseCaData({ ...data, 'previous-ca.crt': 'junk' }, rotationAt);
    expect(junk.state?.previous).toBeUndefined();
    expect(junk.droppedPrevious).toBe('CA certificate holds no PEM certificate');
    // Once expired, the previous CA is dropped when read.
    const later = parseCaData(data, T0 + 9 * DAY);
    expect(later.state?.previous).toBeUndefined();
  });

  it('overlaps old and new CA in the bundle until the old one expires', () => {
    const state = rotatedState({ current: ca1 }, ca2);
    const fingerprints = (pem: string): string[] =>
      splitPemCertificates(pem).map((b) => new X509Certificate(b).fingerprint256);
    // Before the rotation: only CA1.
    expect(fingerprints(caBundlePem({ current: ca1 }, T0))).toEqual([ca1.info.fingerprint]);
    // After: new first, then old, for as long as the old one is valid.
    expect(fingerprints(caBundlePem(state, rotationAt))).toEqual([
      ca2.info.fingerprint,
      ca1.info.fingerprint,
    ]);
    expect(fingerprints(caBundlePem(state, T0 + 9 * DAY - 1))).toEqual([
      ca2.info.fingerprint,
      ca1.info.fingerprint,
    ]);
    expect(fingerprints(caBundlePem(state, T0 + 9 * DAY))).toEqual([ca2.info.fingerprint]);
    expect(trustedCas(state, T0 + 9 * DAY)).toEqual([ca2]);
  });

  it('signs with the previous CA until the new one has had time to reach the caBundle', () => {
    const state = rotatedState({ current: ca1 }, ca2);
    const propagation = 10 * MIN;
    const newFrom = ca2.info.notBefore.getTime() + propagation;
    expect(signingCa(state, rotationAt, propagation)).toBe(ca1);
    expect(signingCa(state, newFrom - 1, propagation)).toBe(ca1);
    expect(signingCa(state, newFrom, propagation)).toBe(ca2);
    // Without a previous CA (first start, or a replaced junk Secret) the current one signs at once.
    expect(signingCa({ current: ca2 }, rotationAt, propagation)).toBe(ca2);
  });

  it('reissues a leaf when missing, at 2/3 of its life, when its issuer is untrusted, or for new names', async () => {
    const state: CaState = { current: ca1 };
    expect(decideLeaf(undefined, state, T0, NAMES)).toEqual({ action: 'issue', reason: 'missing' });
    const leaf = await issueLeaf(ca1, { now: T0, validityMs: 3 * DAY, dnsNames: NAMES });
    const renewAt = renewalTime(leaf.info);
    expect(renewAt).toBe(T0 - MIN + (2 / 3) * (3 * DAY + MIN));
    expect(decideLeaf(leaf, state, T0, NAMES)).toEqual({ action: 'keep', renewAt });
    expect(decideLeaf(leaf, state, renewAt - 1, [...NAMES].reverse())).toEqual({ action: 'keep', renewAt });
    expect(decideLeaf(leaf, state, renewAt, NAMES)).toEqual({ action: 'issue', reason: 'due' });
    expect(decideLeaf(leaf, state, T0, ['other.ns.svc'])).toEqual({
      action: 'issue',
      reason: 'names-changed',
    });
    // The Secret now holds only CA2 (replaced by someone): the leaf's issuer is gone from the bundle.
    expect(decideLeaf(leaf, { current: ca2 }, rotationAt, NAMES)).toEqual({
      action: 'issue',
      reason: 'issuer-not-trusted',
    });
    // After a regular rotation the leaf stays: its issuer is still trusted.
    expect(decideLeaf(leaf, rotatedState(state, ca2), T0 + HOUR, NAMES).action).toBe('keep');
  });

  it('caps a leaf signed by the previous CA at that CA’s expiry', async () => {
    const lateIssue = T0 + 9 * DAY - HOUR;
    const leaf = await issueLeaf(ca1, { now: lateIssue, validityMs: 3 * DAY, dnsNames: NAMES });
    expect(leaf.info.notAfter).toEqual(ca1.info.notAfter);
  });

  it('wakes up at the next leaf renewal, CA rotation or previous-CA expiry, whichever is first', async () => {
    const leaf = await issueLeaf(ca1, { now: T0, validityMs: 3 * DAY, dnsNames: NAMES });
    expect(nextChangeAt({ current: ca1 }, leaf, T0)).toBe(renewalTime(leaf.info));
    const state = rotatedState({ current: ca1 }, ca2);
    const lateLeaf = await issueLeaf(ca2, { now: T0 + 8 * DAY, validityMs: 3 * DAY, dnsNames: NAMES });
    expect(nextChangeAt(state, lateLeaf, T0 + 8 * DAY)).toBe(ca1.info.notAfter.getTime());
    // Instants already past are ignored.
    expect(nextChangeAt(state, lateLeaf, T0 + 9 * DAY)).toBe(renewalTime(lateLeaf.info));
  });
});
