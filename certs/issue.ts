// Minting certificates with selfsigned 5: always ECDSA P-256 with SHA-256 (the API server's Go verifier
// rejects SHA-1, which is selfsigned's default), CA and leaf of the same key type (selfsigned imports the
// CA key with the leaf's key type). Dates come from the caller's clock.
import { randomBytes } from 'node:crypto';
import { generate } from 'selfsigned';
import type { CaKeyPair, IssuedLeaf } from './authority.ts';
import { certificateInfo, parseCertificate } from './pair.ts';
import { validityWindow } from './timing.ts';

const KEY_OPTIONS = { algorithm: 'sha256', keyType: 'ec', curve: 'P-256' } as const;

export const DEFAULT_CA_NAME = 'berth-operator-webhook-ca';

export interface CaOptions {
  now: number;
  validityMs: number;
  /** Subject CN prefix; a timestamp and a random suffix make every CA's subject unique. */
  name?: string;
}

function parsed(cert: string): ReturnType<typeof certificateInfo> {
  const x = parseCertificate(cert);
  if (!x.ok) throw new Error(`selfsigned produced an unparsable certificate: ${x.reason}`);
  return certificateInfo(x.value);
}

/**
 * A new self-signed CA. Its subject is unique (`<name>@<unix seconds>-<random>`): during a rotation two CAs
 * sit in the bundle, and verifiers pick issuer candidates by subject.
 */
export async function generateCa(options: CaOptions): Promise<CaKeyPair> {
  const window = validityWindow(options.now, options.validityMs);
  const cn = `${options.name ?? DEFAULT_CA_NAME}@${Math.floor(options.now / 1000)}-${randomBytes(3).toString('hex')}`;
  const pems = await generate([{ name: 'commonName', value: cn }], {
    ...KEY_OPTIONS,
    notBeforeDate: window.notBefore,
    notAfterDate: window.notAfter,
    extensions: [
      { name: 'basicConstraints', cA: true, pathLenConstraint: 0, critical: true },
      { name: 'keyUsage', keyCertSign: true, cRLSign: true, digitalSignature: true, critical: true },
    ],
  });
  return { cert: pems.cert, key: pems.private, info: parsed(pems.cert) };
}

export interface LeafOptions {
  now: number;
  validityMs: number;
  /** Subject alternative names; the first is also the subject CN. */
  dnsNames: readonly string[];
}

/** A serving leaf signed by `ca`, never outliving it. */
export async function issueLeaf(ca: CaKeyPair, options: LeafOptions): Promise<IssuedLeaf> {
  const [commonName] = options.dnsNames;
  if (commonName === undefined) throw new Error('a serving certificate needs at least one DNS name');
  const window = validityWindow(options.now, options.validityMs, ca.info.notAfter);
  const pems = await generate([{ name: 'commonName', value: commonName }], {
    ...KEY_OPTIONS,
    ca: { key: ca.key, cert: ca.cert },
    notBeforeDate: window.notBefore,
    notAfterDate: window.notAfter,
    extensions: [
      { name: 'basicConstraints', cA: false, critical: true },
      { name: 'keyUsage', digitalSignature: true, critical: true },
      { name: 'extKeyUsage', serverAuth: true },
      { name: 'subjectAltName', altNames: options.dnsNames.map((value) => ({ type: 2, value })) },
    ],
  });
  return {
    cert: pems.cert,
    key: pems.private,
    info: parsed(pems.cert),
    issuerFingerprint: ca.info.fingerprint,
  };
}
