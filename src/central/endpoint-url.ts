// The rule for OIDC endpoint URLs (issuer, JWKS, token endpoint): https, or http on a loopback host only.
// A leaf module (no imports) so that the token broker (src/oidc-broker/) uses it without loading jose or zod.

const LOOPBACK_HOSTS = new Set(['localhost', '127.0.0.1', '[::1]']);

/** Why `text` cannot be an issuer or JWKS URL, or undefined: https, or http on a loopback host only. */
export function endpointUrlProblem(text: string): string | undefined {
  let url: URL;
  try {
    url = new URL(text);
  } catch {
    return 'must be an absolute URL';
  }
  if (url.protocol === 'http:' && !LOOPBACK_HOSTS.has(url.hostname))
    return 'must be https (http only on localhost)';
  if (url.protocol !== 'https:' && url.protocol !== 'http:') return 'must be an https URL';
  return undefined;
}
