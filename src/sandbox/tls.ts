// The sandbox's own PKI: a CA that signs the API server's serving certificate; kubeconfigs carry the CA.
import { generate } from 'selfsigned';

export interface ServingPki {
  caCert: string;
  cert: string;
  key: string;
}

const DAY = 24 * 60 * 60 * 1000;

export async function createServingPki(hosts: string[]): Promise<ServingPki> {
  const notBeforeDate = new Date(Date.now() - 60_000);
  const notAfterDate = new Date(Date.now() + 365 * DAY);
  const ca = await generate([{ name: 'commonName', value: 'berth-sandbox-ca' }], {
    algorithm: 'sha256',
    keyType: 'ec',
    curve: 'P-256',
    notBeforeDate,
    notAfterDate,
    extensions: [
      { name: 'basicConstraints', cA: true, critical: true },
      { name: 'keyUsage', keyCertSign: true, cRLSign: true, digitalSignature: true, critical: true },
    ],
  });
  const altNames = hosts.map((h) =>
    /^[\d.]+$|:/.test(h) ? { type: 7 as const, ip: h } : { type: 2 as const, value: h },
  );
  const leaf = await generate([{ name: 'commonName', value: 'kube-apiserver' }], {
    algorithm: 'sha256',
    keyType: 'ec',
    curve: 'P-256',
    notBeforeDate,
    notAfterDate,
    ca: { key: ca.private, cert: ca.cert },
    extensions: [
      { name: 'basicConstraints', cA: false },
      { name: 'keyUsage', digitalSignature: true, keyEncipherment: true, critical: true },
      { name: 'extKeyUsage', serverAuth: true },
      { name: 'subjectAltName', altNames },
    ],
  });
  return { caCert: ca.cert, cert: leaf.cert, key: leaf.private };
}
