import { generateKeyPairSync } from 'node:crypto';
import { beforeAll, describe, expect, it } from 'vitest';
import type { CaKeyPair, IssuedLeaf } from '../../../certs/authority.ts';
import { generateCa, issueLeaf } from '../../../certs/issue.ts';
import { checkServingPair, parseCertificate, parsePrivateKey } from '../../../certs/pair.ts';
import { joinPem, splitPemCertificates } from '../../../certs/pem.ts';
import { MANUAL_CLOCK_DEFAULT_START } from '../../../src/kube/clock.ts';

const T0 = MANUAL_CLOCK_DEFAULT_START;
const HOUR = 3_600_000;
const NAMES = ['hook.ns.svc', 'hook', 'hook.ns', 'hook.ns.svc.cluster.local'];

let ca: CaKeyPair;
let leaf: IssuedLeaf;
let other: IssuedLeaf;

beforeAll(async () => {
  ca = await generateCa({ now: T0, validityMs: 100 * HOUR });
  leaf = await issueLeaf(ca, { now: T0, validityMs: 10 * HOUR, dnsNames: NAMES });
  other = await issueLeaf(ca, { now: T0, validityMs: 10 * HOUR, dnsNames: NAMES });
});

describe('checkServingPair', () => {
  it('accepts a matching, unexpired pair and describes the certificate', () => {
    const checked = checkServingPair(leaf.cert, leaf.key, T0 + HOUR);
    expect(checked.ok).toBe(true);
    if (!checked.ok) return;
    expect(checked.value.dnsNames).toEqual(NAMES);
    expect(checked.value.isCa).toBe(false);
    expect(checked.value.issuer).toBe(ca.info.subject);
    expect(checked.value.notAfter.getTime()).toBe(T0 + 10 * HOUR);
    // notBefore is backdated by a minute (and X.509 has whole seconds).
    expect(checked.value.notBefore.getTime()).toBe(T0 - 60_000);
  });

  it('accepts a chain (leaf first, then the CA) and describes the leaf', () => {
    const checked = checkServingPair(joinPem([leaf.cert, ca.cert]), leaf.key, T0);
    expect(checked.ok && checked.value.fingerprint).toBe(leaf.info.fingerprint);
  });

  it('rejects a key that belongs to another certificate', () => {
    expect(checkServingPair(leaf.cert, other.key, T0)).toEqual({
      ok: false,
      reason: 'private key does not match the certificate',
    });
    // The CA's key is a valid EC P-256 key too, just not this certificate's.
    expect(checkServingPair(leaf.cert, ca.key, T0).ok).toBe(false);
    // A different key type altogether.
    const rsa = generateKeyPairSync('rsa', { modulusLength: 2048 }).privateKey.export({
      type: 'pkcs8',
      format: 'pem',
    });
    expect(checkServingPair(leaf.cert, rsa.toString(), T0)).toEqual({
      ok: false,
      reason: 'private key does not match the certificate',
    });
  });

  it('rejects an expired certificate, from the instant of notAfter', () => {
    expect(checkServingPair(leaf.cert, leaf.key, T0 + 10 * HOUR - 1).ok).toBe(true);
    expect(checkServingPair(leaf.cert, leaf.key, T0 + 10 * HOUR)).toEqual({
      ok: false,
      reason: `certificate expired at ${new Date(T0 + 10 * HOUR).toISOString()}`,
    });
  });

  it('rejects garbage without echoing it', () => {
    expect(checkServingPair('not a certificate', leaf.key, T0)).toEqual({
      ok: false,
      reason: 'certificate holds no PEM certificate',
    });
    expect(checkServingPair(leaf.cert, 'not a key', T0)).toEqual({
      ok: false,
      reason: 'private key holds no PEM private key',
    });
  });

  it('names the files in its reasons and never includes key material', () => {
    const garbageCert = '-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n';
    const cert = checkServingPair(garbageCert, leaf.key, T0, { certName: 'tls.crt' });
    expect(cert.ok).toBe(false);
    expect(!cert.ok && cert.reason).toMatch(/^cannot parse tls\.crt \(block 1\): ERR_/);

    const empty = checkServingPair('', leaf.key, T0, { certName: 'tls.crt' });
    expect(!empty.ok && empty.reason).toBe('tls.crt holds no PEM certificate');

    const badKey = leaf.key.replace(/\n[A-Za-z0-9+/]{10}/, '\nAAAAAAAAAA');
    const key = checkServingPair(leaf.cert, badKey, T0, { keyName: 'tls.key' });
    expect(key.ok).toBe(false);
    expect(!key.ok && key.reason).toMatch(/^(cannot parse tls\.key: |private key does not match)/);
    expect(!key.ok && key.reason).not.toContain(badKey.split('\n')[1]);

    const noKey = checkServingPair(leaf.cert, 'garbage', T0, { keyName: 'tls.key' });
    expect(!noKey.ok && noKey.reason).toBe('tls.key holds no PEM private key');

    // A certificate where the key should be.
    const swapped = checkServingPair(leaf.cert, leaf.cert, T0, { keyName: 'tls.key' });
    expect(!swapped.ok && swapped.reason).toBe('tls.key holds no PEM private key');
  });

  it('rejects a chain with an unparsable later block', () => {
    const checked = checkServingPair(
      `${leaf.cert}-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n`,
      leaf.key,
      T0,
    );
    expect(!checked.ok && checked.reason).toMatch(/\(block 2\)/);
  });
});

describe('PEM helpers', () => {
  it('splits bundles into blocks and joins them back', () => {
    const bundle = joinPem([ca.cert, leaf.cert]);
    const blocks = splitPemCertificates(`junk before\n${bundle}junk after`);
    expect(blocks).toHaveLength(2);
    expect(joinPem(blocks)).toBe(bundle);
    expect(parseCertificate(bundle).ok && parseCertificate(bundle)).toMatchObject({ ok: true });
    expect(parsePrivateKey(leaf.key).ok).toBe(true);
  });
});
