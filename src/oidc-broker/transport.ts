// The broker's HTTP edge: one request over node:https (node:http only for the loopback URLs that
// endpointUrlProblem admits), bounded by the caller's AbortSignal, the answer capped at 1 MiB as Go's
// oauth2 reads it. The system's trust is Node's: its CA store plus NODE_EXTRA_CA_CERTS (docs/oidc-broker.md).
import type { IncomingMessage, RequestOptions } from 'node:http';
import { request as httpsRequest } from 'node:https';
import { rootCertificates } from 'node:tls';
import type { HttpAnswer, HttpCall, Transport } from './token.ts';

// An ESM import of node:http also loads undici's WebSocket (about 8 MiB of RSS; docs/helper.md §6).
const { request: httpRequest } = process.getBuiltinModule('node:http');

export const MAX_ANSWER_BYTES = 1 << 20;

export interface HttpsTransportOptions {
  /** PEM CA certificates trusted besides Node's roots (tests; the command uses NODE_EXTRA_CA_CERTS). */
  ca?: string;
}

export function httpsTransport(options: HttpsTransportOptions = {}): Transport {
  const ca = options.ca === undefined ? undefined : [...rootCertificates, options.ca];
  return {
    request(url: string, call: HttpCall): Promise<HttpAnswer> {
      return new Promise<HttpAnswer>((resolve, reject) => {
        const target = new URL(url);
        const send = target.protocol === 'http:' ? httpRequest : httpsRequest;
        const body = call.body === undefined ? undefined : Buffer.from(call.body);
        const opts: RequestOptions & { ca?: string[] } = {
          method: call.method,
          headers: { ...call.headers, ...(body ? { 'content-length': String(body.length) } : {}) },
          signal: call.signal,
          ...(ca && target.protocol === 'https:' ? { ca } : {}),
        };
        const fail = (err: unknown): void => {
          // Node reports an abort as a generic AbortError: the signal's reason says which deadline.
          reject(call.signal.aborted && call.signal.reason instanceof Error ? call.signal.reason : err);
        };
        const req = send(target, opts, (res: IncomingMessage) => {
          const chunks: Buffer[] = [];
          let size = 0;
          res.on('data', (chunk: Buffer) => {
            size += chunk.length;
            if (size > MAX_ANSWER_BYTES) {
              res.destroy();
              fail(new Error(`answer larger than ${MAX_ANSWER_BYTES} bytes`));
              return;
            }
            chunks.push(chunk);
          });
          res.on('error', fail);
          res.on('end', () => {
            const contentType = res.headers['content-type'];
            resolve({
              status: res.statusCode ?? 0,
              contentType: typeof contentType === 'string' ? contentType : '',
              body: Buffer.concat(chunks).toString('utf8'),
            });
          });
        });
        req.on('error', fail);
        req.end(body);
      });
    },
  };
}
