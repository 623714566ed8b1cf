// A scrape of a secure /metrics endpoint, as Prometheus makes it: HTTPS without verifying the
// certificate (the operator's own is self-signed per replica) and, when given, a bearer token. Reports
// which certificate the server presented, for tests of its reload.
import { request } from 'node:https';
import type { TLSSocket } from 'node:tls';

export interface ScrapeResult {
  status: number;
  headers: Record<string, string | string[] | undefined>;
  body: string;
  /** SHA-256 fingerprint of the server's certificate. */
  fingerprint: string;
}

/** GET `https://<hostPort><path>` with `Authorization: Bearer <token>` when a token is given. */
export function scrape(hostPort: string, token?: string, path = '/metrics'): Promise<ScrapeResult> {
  return new Promise((resolve, reject) => {
    const req = request(
      `https://${hostPort}${path}`,
      {
        rejectUnauthorized: false,
        agent: false,
        headers: token === undefined ? {} : { authorization: `Bearer ${token}` },
        timeout: 15_000,
      },
      (res) => {
        const fingerprint = (res.socket as TLSSocket).getPeerCertificate().fingerprint256 ?? '';
        let body = '';
        res.setEncoding('utf8');
        res.on('data', (chunk: string) => {
          body += chunk;
        });
        res.on('end', () =>
          resolve({ status: res.statusCode ?? 0, headers: res.headers, body, fingerprint }),
        );
        res.on('error', reject);
      },
    );
    req.on('timeout', () => req.destroy(new Error(`scrape of ${hostPort}${path} timed out`)));
    req.on('error', reject);
    req.end();
  });
}
