// The benchmarks' own requests to kube-apiserver as the admin (bulk set-up, polls, the measured Pod
// CREATEs): plain node:https over keep-alive connections, so the load generator's cost is small and its
// own, not the product client's.
import { Agent, request } from 'node:https';

export interface AdminApi {
  /** The answer as it came: status and body text. */
  raw(
    method: string,
    path: string,
    body?: unknown,
    contentType?: string,
  ): Promise<{ status: number; body: string }>;
  /** The parsed JSON body; an HTTP status of 300 or more rejects, naming the request. */
  json(method: string, path: string, body?: unknown, contentType?: string): Promise<unknown>;
  close(): void;
}

export function adminApi(options: { url: string; ca: string; token: string; maxSockets: number }): AdminApi {
  const url = new URL(options.url);
  const agent = new Agent({ keepAlive: true, maxSockets: options.maxSockets, ca: options.ca });
  const raw: AdminApi['raw'] = (method, path, body, contentType = 'application/json') =>
    new Promise((resolve, reject) => {
      const data = body === undefined ? undefined : JSON.stringify(body);
      const req = request(
        {
          agent,
          host: url.hostname,
          port: url.port,
          path,
          method,
          headers: {
            Authorization: `Bearer ${options.token}`,
            ...(data ? { 'Content-Type': contentType, 'Content-Length': Buffer.byteLength(data) } : {}),
          },
        },
        (res) => {
          const chunks: Buffer[] = [];
          res.on('data', (c: Buffer) => chunks.push(c));
          res.on('error', reject);
          res.on('end', () =>
            resolve({ status: res.statusCode ?? 0, body: Buffer.concat(chunks).toString('utf8') }),
          );
        },
      );
      req.on('error', reject);
      req.end(data);
    });
  return {
    raw,
    json: async (method, path, body, contentType) => {
      const res = await raw(method, path, body, contentType);
      if (res.status >= 300)
        throw new Error(`${method} ${path}: HTTP ${res.status} ${res.body.slice(0, 300)}`);
      return JSON.parse(res.body) as unknown;
    },
    close: () => agent.destroy(),
  };
}
