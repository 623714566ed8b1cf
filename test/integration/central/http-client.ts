// A raw HTTP(S) client for asserting the central API's exact wire behaviour (status, headers, bytes).
import { request as httpRequest, type IncomingHttpHeaders } from 'node:http';
import { request as httpsRequest } from 'node:https';

export interface RawResponse {
  status: number;
  headers: IncomingHttpHeaders;
  body: string;
}

export interface RawRequest {
  method?: string;
  body?: string | object;
  headers?: Record<string, string>;
  /** Send the body with chunked transfer encoding (no Content-Length). */
  chunked?: boolean;
}

export function rawClient(baseUrl: string, ca?: string) {
  return (path: string, req: RawRequest = {}): Promise<RawResponse> =>
    new Promise((resolve, reject) => {
      const url = new URL(path, baseUrl);
      const payload =
        req.body === undefined
          ? undefined
          : typeof req.body === 'string'
            ? req.body
            : JSON.stringify(req.body);
      const headers: Record<string, string> = { ...req.headers };
      if (payload !== undefined && !req.chunked)
        headers['content-length'] = String(Buffer.byteLength(payload));
      const send = url.protocol === 'https:' ? httpsRequest : httpRequest;
      const r = send(
        url,
        { method: req.method ?? (payload === undefined ? 'GET' : 'POST'), headers, ca, agent: false },
        (res) => {
          const chunks: Buffer[] = [];
          res.on('data', (c: Buffer) => chunks.push(c));
          res.on('end', () =>
            resolve({
              status: res.statusCode ?? 0,
              headers: res.headers,
              body: Buffer.concat(chunks).toString('utf8'),
            }),
          );
          res.on('error', reject);
        },
      );
      r.on('error', reject);
      if (payload !== undefined && req.chunked) {
        // Several writes so the body really arrives in chunks.
        for (let i = 0; i < payload.length; i += 1000) r.write(payload.slice(i, i + 1000));
        r.end();
      } else r.end(payload);
    });
}

/** A pino destination collecting JSON lines. */
export function logSink(): {
  write(line: string): void;
  lines: () => Array<Record<string, unknown>>;
  text: () => string;
} {
  let text = '';
  return {
    write(line: string) {
      text += line;
    },
    lines: () =>
      text
        .split('\n')
        .filter((l) => l !== '')
        .map((l) => JSON.parse(l) as Record<string, unknown>),
    text: () => text,
  };
}
