// Checks that a certificate and a private key form a usable serving pair before anything serves them:
// both parse, the key belongs to the certificate, and the certificate has not expired. Pure given `now`.
import { createPrivateKey, type KeyObject, X509Certificate } from 'node:crypto';
import { splitPemCertificates } from './pem.ts';

export interface CertificateInfo {
  subject: string;
  issuer: string;
  serialNumber: string;
  /** SHA-256 fingerprint, colon-separated hex: identifies a certificate in logs and comparisons. */
  fingerprint: string;
  notBefore: Date;
  notAfter: Date;
  dnsNames: string[];
  isCa: boolean;
}

export type Checked<T> = { ok: true; value: T } | { ok: false; reason: string };

export function certificateInfo(cert: X509Certificate): CertificateInfo {
  return {
    subject: cert.subject,
    issuer: cert.issuer,
    serialNumber: cert.serialNumber,
    fingerprint: cert.fingerprint256,
    notBefore: cert.validFromDate,
    notAfter: cert.validToDate,
    dnsNames: dnsNamesOf(cert),
    isCa: cert.ca,
  };
}

function dnsNamesOf(cert: X509Certificate): string[] {
  const san = cert.subjectAltName;
  if (san === undefined) return [];
  return san
    .split(', ')
    .filter((entry) => entry.startsWith('DNS:'))
    .map((entry) => entry.slice(4));
}

// Node's crypto errors carry an OpenSSL code; that is all we report (never the input).
function cryptoReason(err: unknown): string {
  const code = (err as { code?: unknown } | null)?.code;
  return typeof code === 'string' ? code : err instanceof Error ? err.name : 'error';
}

/** Parses the first certificate of a PEM text (later ones, e.g. a chain, must parse too). */
export function parseCertificate(pem: string, what = 'certificate'): Checked<X509Certificate> {
  const blocks = splitPemCertificates(pem);
  const first = blocks[0];
  if (first === undefined) return { ok: false, reason: `${what} holds no PEM certificate` };
  let leaf: X509Certificate | undefined;
  for (const [i, block] of blocks.entries()) {
    try {
      const parsed = new X509Certificate(block);
      leaf ??= parsed;
    } catch (err) {
      return { ok: false, reason: `cannot parse ${what} (block ${i + 1}): ${cryptoReason(err)}` };
    }
  }
  return leaf === undefined
    ? { ok: false, reason: `${what} holds no PEM certificate` }
    : { ok: true, value: leaf };
}

export function parsePrivateKey(pem: string, what = 'private key'): Checked<KeyObject> {
  if (!/-----BEGIN [A-Z ]*PRIVATE KEY-----/.test(pem))
    return { ok: false, reason: `${what} holds no PEM private key` };
  try {
    return { ok: true, value: createPrivateKey(pem) };
  } catch (err) {
    return { ok: false, reason: `cannot parse ${what}: ${cryptoReason(err)}` };
  }
}

export interface CheckPairOptions {
  /** Names used in reasons, e.g. the file names. */
  certName?: string;
  keyName?: string;
}

/** A usable pair: parses, key matches, not expired at `now`. Reasons never contain key material. */
export function checkServingPair(
  certPem: string,
  keyPem: string,
  now: number,
  options: CheckPairOptions = {},
): Checked<CertificateInfo> {
  const cert = parseCertificate(certPem, options.certName ?? 'certificate');
  if (!cert.ok) return cert;
  const key = parsePrivateKey(keyPem, options.keyName ?? 'private key');
  if (!key.ok) return key;
  let matches = false;
  try {
    matches = cert.value.checkPrivateKey(key.value);
  } catch {
    matches = false;
  }
  if (!matches) return { ok: false, reason: 'private key does not match the certificate' };
  const info = certificateInfo(cert.value);
  if (now >= info.notAfter.getTime()) {
    return { ok: false, reason: `certificate expired at ${info.notAfter.toISOString()}` };
  }
  return { ok: true, value: info };
}
