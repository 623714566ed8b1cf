// PEM helpers: Node's X509Certificate parses one certificate, so bundles and chains are split first.

const CERTIFICATE_BLOCK = /-----BEGIN CERTIFICATE-----[A-Za-z0-9+/=\s]*?-----END CERTIFICATE-----/g;

/** The CERTIFICATE blocks of a PEM text, in order, each ending with a newline. */
export function splitPemCertificates(text: string): string[] {
  return [...text.matchAll(CERTIFICATE_BLOCK)].map((m) => `${m[0].trim()}\n`);
}

/** Concatenates PEM blocks, one newline-terminated block after another. */
export function joinPem(blocks: readonly string[]): string {
  return blocks.map((b) => (b.endsWith('\n') ? b : `${b}\n`)).join('');
}

/** A webhook clientConfig.caBundle: base64 of the PEM bundle. */
export function toCaBundleField(pem: string): string {
  return Buffer.from(pem, 'utf8').toString('base64');
}
