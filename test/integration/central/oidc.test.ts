// `berth-operator central --auth-mode oidc` against a local OpenID Connect issuer (test/helpers/oidc-issuer.ts:
// discovery document and a JWKS of real keys, served over HTTP on loopback): valid tokens take leases for
// their tenant, every kind of bad token gets the Go server's status, keys rotate, and no token reaches the log.
import { type ChildProcess, spawn } from 'node:child_process';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { CompactSign, type CryptoKey, exportJWK, generateKeyPair, type JWK, SignJWT } from 'jose';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type Authority, createAuthority } from '../../../hack/controlplane/pki.ts';
import { centralCommand, runCentral } from '../../../src/central/command.ts';
import { discoverJwksUri } from '../../../src/central/oidc.ts';
import type { CentralServer } from '../../../src/central/server.ts';
import { parseFlags } from '../../../src/cli.ts';
import { createLogger } from '../../../src/observability/logger.ts';
import { eventually } from '../../helpers/eventually.ts';
import { LocalIssuer } from '../../helpers/oidc-issuer.ts';
import { logSink, rawClient } from './http-client.ts';

const NODE = join(process.cwd(), 'node_modules/.bin/node');
const MAIN = join(process.cwd(), 'src/main.ts');
const AUDIENCE = 'berth-central';
const LEASE = '/v1alpha1/namespaces/pipeline/leases/ingest';

interface SigningKey {
  kid: string;
  privateKey: CryptoKey;
  jwk: JWK;
}

async function signingKey(kid: string): Promise<SigningKey> {
  const { privateKey, publicKey } = await generateKeyPair('RS256');
  return { kid, privateKey, jwk: { ...(await exportJWK(publicKey)), kid, alg: 'RS256', use: 'sig' } };
}

let dir: string;
let ca: Authority;
let certFile: string;
let keyFile: string;
let issuer: LocalIssuer;
let k1: SigningKey;
let k2: SigningKey;
let forger: SigningKey;
const children: ChildProcess[] = [];

beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), 'berth-central-oidc-'));
  ca = await createAuthority('berth-central-oidc-test-ca');
  const serving = await ca.serving(['127.0.0.1']);
  certFile = join(dir, 'tls.crt');
  keyFile = join(dir, 'tls.key');
  await writeFile(certFile, serving.cert);
  await writeFile(keyFile, serving.key, { mode: 0o600 });
  [k1, k2, forger] = await Promise.all([signingKey('k1'), signingKey('k2'), signingKey('k1')]);
  issuer = await new LocalIssuer().start({ tls: false });
  issuer.keys = [k1.jwk];
});
afterAll(async () => {
  for (const c of children) c.kill('SIGKILL');
  await issuer.stop();
  await rm(dir, { recursive: true, force: true });
});

const now = () => Math.floor(Date.now() / 1000);
const claims = { sub: 'ops@east', tenant: 'cluster-east', env: 'prod' };

function token(
  body: Record<string, unknown> = claims,
  over: { key?: SigningKey; iss?: string; aud?: string; exp?: number; nbf?: number } = {},
): Promise<string> {
  const key = over.key ?? k1;
  const jwt = new SignJWT(body)
    .setProtectedHeader({ alg: 'RS256', kid: key.kid })
    .setIssuer(over.iss ?? issuer.url)
    .setAudience(over.aud ?? AUDIENCE)
    .setIssuedAt()
    .setExpirationTime(over.exp ?? now() + 300);
  if (over.nbf !== undefined) jwt.setNotBefore(over.nbf);
  return jwt.sign(key.privateKey);
}

const oidcFlags = (issuerUrl: string) => [
  '--listen-addr=127.0.0.1:0',
  '--metrics-addr=',
  `--tls-cert-file=${certFile}`,
  `--tls-key-file=${keyFile}`,
  '--auth-mode=oidc',
  `--oidc-issuer-url=${issuerUrl}`,
  `--oidc-audience=${AUDIENCE}`,
  '--oidc-tenant-claim=tenant',
  '--oidc-required-claim=env=prod',
];

describe('central --auth-mode oidc', () => {
  it('admits valid tokens for their tenant, refuses bad ones with the Go statuses, follows key rotation', async () => {
    const sink = logSink();
    const stop = Promise.withResolvers<void>();
    const started = Promise.withResolvers<CentralServer>();
    const running = runCentral(parseFlags(centralCommand, oidcFlags(issuer.url)), {
      logger: createLogger({ level: 'debug', destination: sink }),
      until: stop.promise,
      onStarted: started.resolve,
    });
    // A start-up failure must fail the test, not hang it.
    const exited = running.then((code) => {
      throw new Error(`central exited with ${code} before serving`);
    });
    exited.catch(() => {});
    const server = await Promise.race([started.promise, exited]);
    const call = rawClient(server.url, ca.cert);
    const acquire = (jwt: string | undefined, holder = 'cluster-east/pod-1') =>
      call(`${LEASE}/acquire`, {
        body: { holder, ttlSeconds: 30 },
        headers: { 'content-type': 'application/json', ...(jwt ? { authorization: `Bearer ${jwt}` } : {}) },
      });
    const tokens: string[] = [];
    const mint = async (...args: Parameters<typeof token>) => {
      const jwt = await token(...args);
      tokens.push(jwt);
      return jwt;
    };
    try {
      // The JWKS was fetched once at start-up.
      expect(issuer.jwksFetches).toBe(1);
      const valid = await mint();
      const ok = await acquire(valid);
      expect(ok.status).toBe(200);
      expect(JSON.parse(ok.body)).toMatchObject({
        acquired: true,
        holder: 'cluster-east/pod-1',
        fencingToken: 1,
      });
      expect((await acquire(valid, 'cluster-east')).status).toBe(200);

      // Authorization: another tenant's holder is 403 (the default authorizer).
      const other = await acquire(valid, 'cluster-west');
      expect([other.status, JSON.parse(other.body)]).toEqual([
        403,
        { error: 'holder not authorized for this identity' },
      ]);

      // No or malformed credentials.
      const none = await acquire(undefined);
      expect([none.status, JSON.parse(none.body)]).toEqual([
        401,
        { error: 'missing or malformed Authorization header' },
      ]);
      expect(none.headers['www-authenticate']).toBe('Bearer');

      // Authentication failures: all the same generic 401.
      const escapedSlash = await new CompactSign(
        new TextEncoder().encode(
          `{"sub":"ops","tenant":"cluster-east\\/evil","env":"prod","iss":"${issuer.url}","aud":"${AUDIENCE}","exp":${now() + 300}}`,
        ),
      )
        .setProtectedHeader({ alg: 'RS256', kid: 'k1' })
        .sign(k1.privateKey);
      tokens.push(escapedSlash);
      const refused: Array<[string, string]> = [
        ['expired', await mint(claims, { exp: now() - 120 })],
        ['not yet valid', await mint(claims, { nbf: now() + 120 })],
        ['forged (another key, same kid)', await mint(claims, { key: forger })],
        ['wrong audience', await mint(claims, { aud: 'someone-else' })],
        ['wrong issuer', await mint(claims, { iss: 'http://127.0.0.1:1' })],
        ['required claim missing', await mint({ sub: 'ops@east', tenant: 'cluster-east' })],
        ['required claim differs', await mint({ ...claims, env: 'dev' })],
        ['tenant holds "/"', await mint({ ...claims, tenant: 'cluster-east/evil' })],
        ['tenant holds a JSON-escaped "/"', escapedSlash],
        ['not a JWT', 'opaque-token-value'],
      ];
      tokens.push('opaque-token-value');
      for (const [what, jwt] of refused) {
        const res = await acquire(jwt, 'cluster-east/evil/x');
        expect([what, res.status, JSON.parse(res.body)]).toEqual([what, 401, { error: 'unauthorized' }]);
      }

      // Rotation: the issuer replaces k1 by k2. A k2 token names an unknown key id, which refetches the
      // JWKS once the fetch cooldown has passed; then k1 tokens are refused.
      issuer.keys = [k2.jwk];
      const rotated = await mint(claims, { key: k2 });
      await eventually(async () => (await acquire(rotated)).status === 200, {
        timeoutMs: 20_000,
        intervalMs: 250,
      });
      expect(issuer.jwksFetches).toBe(2);
      expect((await acquire(await mint())).status).toBe(401);

      // The log says why, but never carries a token (not even masked: nothing logs one).
      const log = sink.text();
      expect(log).toContain('"exp\\" claim timestamp check failed');
      expect(log).toContain('required claim \\"env\\" is missing or differs');
      expect(log).not.toContain('[REDACTED]');
      for (const jwt of tokens) expect(log).not.toContain(jwt);
    } finally {
      stop.resolve();
    }
    expect(await running).toBe(0);
  });

  it('refuses to start when discovery fails or names another issuer, in one line', async () => {
    const closed = createServer();
    await new Promise<void>((resolve) => closed.listen(0, '127.0.0.1', resolve));
    const unreachable = `http://127.0.0.1:${(closed.address() as AddressInfo).port}`;
    await new Promise((resolve) => closed.close(resolve));
    await expect(
      runCentral(parseFlags(centralCommand, oidcFlags(unreachable)), {
        logger: createLogger({ level: 'silent' }),
      }),
    ).rejects.toThrow(
      new RegExp(
        `^OIDC discovery ${unreachable}/\\.well-known/openid-configuration: fetch failed: .*ECONNREFUSED`,
      ),
    );
    issuer.documentIssuer = 'https://elsewhere.example.com';
    try {
      const err = await runCentral(parseFlags(centralCommand, oidcFlags(issuer.url)), {
        logger: createLogger({ level: 'silent' }),
      }).catch((e: unknown) => e as Error);
      expect((err as Error).message).toBe(
        `OIDC discovery ${issuer.url}/.well-known/openid-configuration: document names issuer "https://elsewhere.example.com", want "${issuer.url}"`,
      );
    } finally {
      issuer.documentIssuer = undefined;
    }
  });

  it('bounds discovery by its timeout', async () => {
    const silent = createServer(() => {}); // accepts, never answers
    await new Promise<void>((resolve) => silent.listen(0, '127.0.0.1', resolve));
    const url = `http://127.0.0.1:${(silent.address() as AddressInfo).port}`;
    try {
      await expect(discoverJwksUri(url, 200)).rejects.toThrow(
        `OIDC discovery ${url}/.well-known/openid-configuration: timed out`,
      );
    } finally {
      silent.closeAllConnections();
      silent.close();
    }
  });

  it('runs as a process with --log-format text, and skips discovery when given the JWKS URL', async () => {
    // A discovery document naming another issuer would stop the start-up, were it fetched.
    issuer.documentIssuer = 'https://elsewhere.example.com';
    issuer.keys = [k1.jwk];
    const child = spawn(
      NODE,
      [MAIN, 'central', ...oidcFlags(issuer.url), `--oidc-jwks-url=${issuer.url}/keys`, '--log-format=text'],
      { stdio: ['ignore', 'pipe', 'pipe'] },
    );
    children.push(child);
    let out = '';
    let err = '';
    child.stdout?.on('data', (d: Buffer) => (out += d.toString()));
    child.stderr?.on('data', (d: Buffer) => (err += d.toString()));
    const exit = new Promise<number | null>((resolve) => child.on('exit', (code) => resolve(code)));
    try {
      const url = await eventually(
        () => {
          if (child.exitCode !== null) throw new Error(`exited ${child.exitCode}: ${err}`);
          return / msg="central lease API serving" .*url=(https:\/\/\S+)/.exec(out)?.[1];
        },
        { timeoutMs: 15_000 },
      );
      expect(out).toMatch(/^time=\S+ level=INFO msg="OIDC authentication ready" logger=central issuer=http/m);
      const res = await rawClient(url!, ca.cert)(`${LEASE}/acquire`, {
        body: { holder: 'cluster-east', ttlSeconds: 30 },
        headers: { 'content-type': 'application/json', authorization: `Bearer ${await token()}` },
      });
      expect(res.status).toBe(200);
    } finally {
      issuer.documentIssuer = undefined;
      child.kill('SIGTERM');
    }
    expect(await exit).toBe(0);
    expect(out).toContain('msg="central lease API stopped"');
    expect(out.split('\n').every((line) => line === '' || line.startsWith('time='))).toBe(true);
  });
});
