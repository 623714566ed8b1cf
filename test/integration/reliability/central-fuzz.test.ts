// Bad input: random paths, methods, credentials and bodies against the central lease API over HTTP. Every
// answer is a 2xx/4xx (never a 5xx), a lease route always answers JSON (`{"error": "..."}` when it fails),
// other routes Go-ServeMux-style text, and the server keeps serving and stays consistent afterwards.
import { createHash } from 'node:crypto';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { Agent, request } from 'node:https';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import fc from 'fast-check';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { matchRoute } from '../../../src/central/http.ts';
import { type CentralServer, startCentralServer } from '../../../src/central/server.ts';
import { createLogger } from '../../../src/observability/logger.ts';
import { centralTls } from '../../helpers/central-tls.ts';

const RUNS = Number(process.env.PROPERTY_RUNS ?? 400);
const TENANT = 'east';
const KEY = 'fuzz-key-0123456789';

let dir: string;
let central: CentralServer;
// A fresh connection per request: a server closing a keep-alive connection after a refused body is
// legitimate, and must not read as a failure of the next request.
const agent = new Agent({ keepAlive: false });
const errors: string[] = [];
const memory = {
  write: (line: string) => {
    if (line.includes('"level":"error"')) errors.push(line);
  },
};

beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), 'berth-central-fuzz-'));
  const keys = join(dir, 'keys');
  await writeFile(keys, `${TENANT}:${createHash('sha256').update(KEY).digest('hex')}\n`);
  central = await startCentralServer({
    tls: await centralTls(),
    logger: createLogger({ level: 'info', destination: memory }),
    authMode: 'static-keys',
    apiKeysFile: keys,
    gc: false,
  });
});
afterAll(async () => {
  agent.destroy();
  await central?.stop();
  await rm(dir, { recursive: true, force: true });
});

interface Answer {
  status: number;
  type: string;
  body: string;
}

function send(
  method: string,
  path: string,
  headers: Record<string, string>,
  body: string | undefined,
): Promise<Answer> {
  const url = new URL(central.url);
  return new Promise((resolve, reject) => {
    const req = request({ host: url.hostname, port: url.port, method, path, headers, agent }, (res) => {
      const chunks: Buffer[] = [];
      res.on('data', (c: Buffer) => chunks.push(c));
      res.on('end', () =>
        resolve({
          status: res.statusCode ?? 0,
          type: String(res.headers['content-type'] ?? ''),
          body: Buffer.concat(chunks).toString('utf8'),
        }),
      );
      res.on('error', reject);
    });
    req.on('error', reject);
    req.end(body);
  });
}

// Path pieces that exercise the router: escapes, dots, empty segments, odd characters (all legal in a
// request line).
const segment = fc.oneof(
  fc.constantFrom('v1alpha1', 'namespaces', 'leases', 'acquire', 'renew', 'release', 'default', 'l1', TENANT),
  fc.constantFrom(
    '',
    '.',
    '..',
    '%2F',
    '%2e%2e',
    '%',
    '%zz',
    '%00',
    '%C3%A9',
    'a.b',
    '~',
    '@',
    ':',
    ';x=1',
    'a%20b',
  ),
  fc.stringMatching(/^[A-Za-z0-9._~-]{0,12}$/),
);
const leasePath = fc
  .tuple(
    fc.constantFrom('default', 'team-a', 'a.b', '', '%2e%2e', '%zz', 'x%2Fy', 'UPPER'),
    fc.constantFrom('l1', 'l2', '', '%2F', '..', 'x'.repeat(300)),
    fc.constantFrom('acquire', 'renew', 'release'),
  )
  .map(([ns, name, op]) => `/v1alpha1/namespaces/${ns}/leases/${name}/${op}`);
const path = fc.oneof(
  leasePath,
  fc.array(segment, { maxLength: 8 }).map((s) => `/${s.join('/')}`),
  fc.tuple(leasePath, fc.stringMatching(/^[a-z=&%0-9]{0,20}$/)).map(([p, q]) => `${p}?${q}`),
  fc.constantFrom('/healthz', '/readyz', '/', '/metrics', '//v1alpha1/namespaces/d/leases/l/acquire'),
);
const method = fc.constantFrom('POST', 'POST', 'POST', 'GET', 'PUT', 'DELETE', 'PATCH', 'HEAD', 'OPTIONS');
const auth = fc.constantFrom<string | undefined>(
  `Bearer ${KEY}`,
  `Bearer ${KEY}`,
  undefined,
  'Bearer ',
  'Bearer wrong',
  `bearer ${KEY}`,
  `Basic ${Buffer.from('a:b').toString('base64')}`,
  `Bearer ${KEY} extra`,
);
const anyJson = fc.jsonValue({ maxDepth: 3 }).map((v) => JSON.stringify(v));
const nearValid = fc
  .record(
    {
      holder: fc.oneof(
        fc.constantFrom(TENANT, `${TENANT}/a`, 'west', '', 'x'.repeat(300)),
        fc.jsonValue({ maxDepth: 1 }),
      ),
      ttlSeconds: fc.oneof(fc.integer({ min: -5, max: 100_000 }), fc.jsonValue({ maxDepth: 1 }), fc.double()),
      fencingToken: fc.oneof(
        fc.integer({ min: -2, max: 5 }),
        fc.jsonValue({ maxDepth: 1 }),
        fc.bigInt().map(String),
      ),
      extra: fc.jsonValue({ maxDepth: 1 }),
    },
    { requiredKeys: [] },
  )
  .map((o) => JSON.stringify(o));
const body = fc.oneof(
  nearValid,
  nearValid,
  anyJson,
  fc.string({ maxLength: 200 }),
  fc.constantFrom(
    '',
    '{',
    '{}{}',
    '{"holder":"east","ttlSeconds":30}  \n',
    '\u0000',
    '{"__proto__":{"x":1}}',
    'null',
  ),
  fc.nat({ max: 6000 }).map((n) => `{"holder":"${'a'.repeat(n)}"}`),
);
const contentType = fc.constantFrom<string | undefined>(
  'application/json',
  undefined,
  'text/plain',
  'application/json; charset=utf-8',
);

describe('central API under random input', () => {
  it('answers every request with a 2xx/4xx of the right shape, never a 5xx', async () => {
    const seen = new Set<number>();
    await fc.assert(
      fc.asyncProperty(method, path, auth, body, contentType, async (m, p, a, b, ct) => {
        const headers: Record<string, string> = {};
        if (a !== undefined) headers.authorization = a;
        if (ct !== undefined) headers['content-type'] = ct;
        const answer = await send(m, p, headers, m === 'GET' || m === 'HEAD' ? undefined : b);
        seen.add(answer.status);
        expect(answer.status, `${m} ${p}: ${answer.body}`).toBeGreaterThanOrEqual(200);
        expect(answer.status, `${m} ${p}: ${answer.body}`).toBeLessThan(500);
        if (answer.status === 204) {
          // A successful release: no body.
          expect(answer.body).toBe('');
        } else if (answer.type.startsWith('application/json')) {
          const parsed = JSON.parse(answer.body) as Record<string, unknown>;
          expect(typeof parsed).toBe('object');
          if (answer.status >= 400) {
            expect(Object.keys(parsed)).toEqual(['error']);
            expect(typeof parsed.error).toBe('string');
            expect(parsed.error).not.toBe('');
          }
        } else {
          expect(answer.type).toMatch(/^text\/plain/);
          // Only routing and probes answer text; a POST to a lease route always gets JSON.
          const route = matchRoute(p).route;
          expect(m === 'POST' && route !== 'healthz' && route !== 'readyz' && route !== 'unmatched').toBe(
            false,
          );
        }
      }),
      {
        numRuns: RUNS,
        // Rare answers, always tried: a holder outside the tenant (403) and an oversized body (413).
        examples: [
          [
            'POST',
            '/v1alpha1/namespaces/default/leases/l9/acquire',
            `Bearer ${KEY}`,
            '{"holder":"west","ttlSeconds":30}',
            'application/json',
          ],
          [
            'POST',
            '/v1alpha1/namespaces/default/leases/l9/acquire',
            `Bearer ${KEY}`,
            `{"holder":"${'a'.repeat(5000)}"}`,
            'application/json',
          ],
        ],
      },
    );
    // The inputs reach every kind of answer, successes included.
    expect([...seen].sort()).toEqual(expect.arrayContaining([200, 400, 401, 403, 404, 405, 413]));
    expect(errors).toEqual([]);
    // Still serving, and still consistent: a fresh lease can be taken, renewed and released.
    const lease = '/v1alpha1/namespaces/after/leases/fuzz';
    const creds = { authorization: `Bearer ${KEY}`, 'content-type': 'application/json' };
    const acquired = await send(
      'POST',
      `${lease}/acquire`,
      creds,
      JSON.stringify({ holder: TENANT, ttlSeconds: 30 }),
    );
    expect(acquired.status, acquired.body).toBe(200);
    const { fencingToken, acquired: ok } = JSON.parse(acquired.body) as {
      fencingToken: number;
      acquired: boolean;
    };
    expect(ok).toBe(true);
    expect(
      (
        await send(
          'POST',
          `${lease}/renew`,
          creds,
          JSON.stringify({ holder: TENANT, ttlSeconds: 30, fencingToken }),
        )
      ).status,
    ).toBe(200);
    expect(
      (await send('POST', `${lease}/release`, creds, JSON.stringify({ holder: TENANT, fencingToken })))
        .status,
    ).toBe(204);
  }, 60_000);
});
