// Hot-swapping a TLS server's certificate: every change of the provider's pair becomes
// `server.setSecureContext(...)`, which applies to new connections; open ones keep their context.
import type { SecureContextOptions, Server } from 'node:tls';
import type { Logger } from '../src/observability/logger.ts';
import type { CertificateProvider } from './provider.ts';

/**
 * Keeps `server` (an https.Server, or Fastify's `app.server`) serving the provider's current pair.
 * setSecureContext rebuilds the whole context, so `options` (e.g. `{ minVersion: 'TLSv1.2' }`) must hold
 * every TLS option the server was created with besides key and cert. Returns the function that detaches.
 */
export function attachToTlsServer(
  provider: Pick<CertificateProvider, 'onChange'>,
  server: Pick<Server, 'setSecureContext'>,
  options: SecureContextOptions = {},
  logger?: Logger,
): () => void {
  return provider.onChange((pair) => {
    try {
      server.setSecureContext({ ...options, key: pair.key, cert: pair.cert });
    } catch (err) {
      // A validated pair should always load; if not, the old context keeps serving.
      const code = (err as { code?: unknown } | null)?.code;
      logger?.error(
        { code: typeof code === 'string' ? code : undefined },
        'cannot load the new serving certificate',
      );
    }
  });
}
