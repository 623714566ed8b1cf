// Throwaway PKI for local control planes and test servers: a CA, serving certificates (DNS names and IP
// addresses), client certificates whose subject Kubernetes reads as user (CN) and groups (O), and the
// service-account signing key. ECDSA P-256 with SHA-256 throughout (Go's verifier rejects SHA-1).
import { generateKeyPairSync } from 'node:crypto';
import { isIP } from 'node:net';
import { type CertificateExtension, generate } from 'selfsigned';

const KEY = { algorithm: 'sha256', keyType: 'ec', curve: 'P-256' } as const;
const DAY_MS = 86_400_000;

export interface KeyPair {
  cert: string;
  key: string;
}

export interface Authority extends KeyPair {
  /** A serving certificate for DNS names and IP addresses; the first is its CN. */
  serving(hosts: readonly string[]): Promise<KeyPair>;
  /** A client certificate for `user` in `groups` (Kubernetes maps CN to the user, each O to a group). */
  client(user: string, groups?: readonly string[]): Promise<KeyPair>;
}

/** Distinguished-name values are joined into one string by selfsigned: refuse what would split it. */
function dnValue(value: string, what: string): string {
  if (value === '' || /[,=+"\\<>;#\n]/.test(value))
    throw new Error(`${what} "${value}" cannot be written into a certificate subject`);
  return value;
}

function validity(): { notBeforeDate: Date; notAfterDate: Date } {
  // A minute of slack for clocks; long enough for any test run or `npm start` session.
  return { notBeforeDate: new Date(Date.now() - 60_000), notAfterDate: new Date(Date.now() + 30 * DAY_MS) };
}

/** A new CA (`name` is its CN) able to sign serving and client certificates. */
export async function createAuthority(name: string): Promise<Authority> {
  const ca = await generate([{ name: 'commonName', value: dnValue(name, 'CA name') }], {
    ...KEY,
    ...validity(),
    extensions: [
      { name: 'basicConstraints', cA: true, pathLenConstraint: 0, critical: true },
      { name: 'keyUsage', keyCertSign: true, cRLSign: true, digitalSignature: true, critical: true },
    ],
  });
  return authority({ cert: ca.cert, key: ca.private });
}

/** Signs with an existing CA (e.g. a control plane's, handed to test workers). */
export function authority(signer: KeyPair): Authority {
  const sign = async (
    subject: Array<{ name: string; value: string }>,
    extensions: CertificateExtension[],
  ): Promise<KeyPair> => {
    const leaf = await generate(subject, {
      ...KEY,
      ...validity(),
      ca: signer,
      extensions: [
        { name: 'basicConstraints', cA: false, critical: true },
        { name: 'keyUsage', digitalSignature: true, critical: true },
        ...extensions,
      ],
    });
    return { cert: leaf.cert, key: leaf.private };
  };
  return {
    ...signer,
    async serving(hosts) {
      const [cn] = hosts;
      if (cn === undefined) throw new Error('a serving certificate needs at least one host');
      const altNames = hosts.map((h) =>
        isIP(h) ? { type: 7 as const, ip: h } : { type: 2 as const, value: h },
      );
      return sign(
        [{ name: 'commonName', value: dnValue(cn, 'host') }],
        [
          { name: 'extKeyUsage', serverAuth: true },
          { name: 'subjectAltName', altNames },
        ],
      );
    },
    async client(user, groups = []) {
      return sign(
        [
          ...groups.map((g) => ({ name: 'organizationName', value: dnValue(g, 'group') })),
          { name: 'commonName', value: dnValue(user, 'user name') },
        ],
        [{ name: 'extKeyUsage', clientAuth: true }],
      );
    },
  };
}

/** The key pair kube-apiserver signs service-account tokens with (and kube-controller-manager too). */
export function serviceAccountKeys(): { privateKey: string; publicKey: string } {
  const { privateKey, publicKey } = generateKeyPairSync('ec', {
    namedCurve: 'P-256',
    privateKeyEncoding: { type: 'pkcs8', format: 'pem' },
    publicKeyEncoding: { type: 'spki', format: 'pem' },
  });
  return { privateKey, publicKey };
}
