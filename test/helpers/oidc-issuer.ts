// A local OpenID Connect issuer for tests, over HTTPS (a throwaway CA) or plain HTTP on loopback: the
// discovery document, a JWKS the test can swap, and an OAuth2 token endpoint for the client-credentials
// grant that signs real JWTs with its own RSA key. The test steers it (outage, stall, expires_in, its
// clock's offset, which client authentication it accepts) and reads what it saw.
import type { IncomingMessage, ServerResponse } from 'node:http';
import { createServer as createHttpServer, type Server } from 'node:http';
import { createServer as createHttpsServer } from 'node:https';
import type { AddressInfo } from 'node:net';
import {
  type CryptoKey,
  createLocalJWKSet,
  exportJWK,
  generateKeyPair,
  type JWK,
  type JWTPayload,
  jwtVerify,
  SignJWT,
} from 'jose';
import { createAuthority } from '../../hack/controlplane/pki.ts';

export type ClientAuth = 'basic' | 'post';

export interface TokenRequestRecord {
  /** Date.now() when the request arrived. */
  at: number;
  auth: ClientAuth | 'none';
  clientId: string;
  form: Record<string, string>;
  /** The status answered; 0 for a stalled request (see `aborted`). */
  status: number;
  /** A stalled request the client gave up on (closed its connection). */
  aborted: boolean;
}

export interface IssuedToken {
  accessToken: string;
  /** Date.now() when answered. */
  at: number;
}

export interface LocalIssuerOptions {
  /** Serve HTTPS with a certificate of a new CA (`ca`); default true. */
  tls?: boolean;
}

/** Decodes one half of an `application/x-www-form-urlencoded` Basic credential (RFC 6749 §2.3.1). */
const formDecode = (text: string): string => decodeURIComponent(text.replace(/\+/g, ' '));

export class LocalIssuer {
  #server: Server | undefined;
  /** The CA of the serving certificate (PEM); empty over plain HTTP. */
  ca = '';
  url = '';
  /** The JWKS served at /keys (the token endpoint's key unless a test swaps it). */
  keys: JWK[] = [];
  /** The issuer the discovery document names (the real one unless a test lies). */
  documentIssuer: string | undefined;
  /** The token endpoint the discovery document names (this issuer's /token unless a test lies). */
  documentTokenEndpoint: string | undefined;
  jwksFetches = 0;
  discoveryFetches = 0;

  /** Registered clients: id → secret. */
  readonly clients = new Map<string, string>();
  /** Client authentication methods the token endpoint accepts. */
  clientAuth: ReadonlySet<ClientAuth> = new Set<ClientAuth>(['basic', 'post']);
  /** `expires_in` of the tokens; undefined omits it. */
  expiresIn: number | undefined = 3600;
  /** The issuer's clock runs this far from Date.now() (the tokens' iat and exp). */
  clockOffsetMs = 0;
  /** up: tokens; down: 503 temporarily_unavailable; stall: never answer. */
  mode: 'up' | 'down' | 'stall' = 'up';
  readonly requests: TokenRequestRecord[] = [];
  readonly issued: IssuedToken[] = [];

  #signingKey: CryptoKey | undefined;
  #publicJwk: JWK | undefined;
  readonly #stalled = new Set<ServerResponse>();

  async start(options: LocalIssuerOptions = {}): Promise<this> {
    const { privateKey, publicKey } = await generateKeyPair('RS256');
    this.#signingKey = privateKey;
    this.#publicJwk = { ...(await exportJWK(publicKey)), kid: 'token-key', alg: 'RS256', use: 'sig' };
    this.keys = [this.#publicJwk];
    const handler = (req: IncomingMessage, res: ServerResponse): void => {
      this.#handle(req, res).catch((err: unknown) => {
        res.writeHead(500);
        res.end(String(err));
      });
    };
    if (options.tls ?? true) {
      const authority = await createAuthority('berth-test-oidc-issuer');
      const serving = await authority.serving(['127.0.0.1']);
      this.ca = authority.cert;
      this.#server = createHttpsServer({ cert: serving.cert, key: serving.key }, handler);
    } else this.#server = createHttpServer(handler);
    const server = this.#server;
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    const scheme = (options.tls ?? true) ? 'https' : 'http';
    this.url = `${scheme}://127.0.0.1:${(server.address() as AddressInfo).port}`;
    return this;
  }

  get tokenEndpoint(): string {
    return `${this.url}/token`;
  }

  /**
   * Verifies a token this issuer signed (its key, issuer and, when given, audience) by the issuer's clock,
   * as of `at` (epoch ms; default now): a short-lived token checked after the fact is checked as issued.
   */
  async verify(token: string, audience?: string, at = Date.now()): Promise<JWTPayload> {
    const { payload } = await jwtVerify(token, createLocalJWKSet({ keys: [this.#publicJwk!] }), {
      issuer: this.url,
      ...(audience === undefined ? {} : { audience }),
      currentDate: new Date(at + this.clockOffsetMs),
    });
    return payload;
  }

  /** Answers every stalled request with a 503 (so no handler outlives the test). */
  releaseStalled(): void {
    for (const res of this.#stalled) {
      res.writeHead(503, { 'content-type': 'application/json' });
      res.end('{"error":"temporarily_unavailable"}');
    }
    this.#stalled.clear();
  }

  async stop(): Promise<void> {
    this.releaseStalled();
    const server = this.#server;
    if (!server) return;
    server.closeAllConnections();
    await new Promise<void>((resolve) => server.close(() => resolve()));
  }

  async #handle(req: IncomingMessage, res: ServerResponse): Promise<void> {
    const send = (status: number, body: unknown): void => {
      res.writeHead(status, { 'content-type': 'application/json' });
      res.end(JSON.stringify(body));
    };
    if (req.method === 'GET' && req.url === '/.well-known/openid-configuration') {
      this.discoveryFetches++;
      send(200, {
        issuer: this.documentIssuer ?? this.url,
        jwks_uri: `${this.url}/keys`,
        token_endpoint: this.documentTokenEndpoint ?? this.tokenEndpoint,
        grant_types_supported: ['client_credentials'],
        token_endpoint_auth_methods_supported: [...this.clientAuth].map((a) =>
          a === 'basic' ? 'client_secret_basic' : 'client_secret_post',
        ),
        id_token_signing_alg_values_supported: ['RS256'],
      });
      return;
    }
    if (req.method === 'GET' && req.url === '/keys') {
      this.jwksFetches++;
      send(200, { keys: this.keys });
      return;
    }
    if (req.method !== 'POST' || req.url !== '/token') {
      res.writeHead(404);
      res.end();
      return;
    }
    const chunks: Buffer[] = [];
    for await (const chunk of req) chunks.push(chunk as Buffer);
    const form = Object.fromEntries(new URLSearchParams(Buffer.concat(chunks).toString('utf8')));
    const record: TokenRequestRecord = {
      at: Date.now(),
      auth: 'none',
      clientId: '',
      form,
      status: 0,
      aborted: false,
    };
    this.requests.push(record);
    const answer = (status: number, body: unknown): void => {
      record.status = status;
      send(status, body);
    };
    let secret: string | undefined;
    const basic = /^Basic (.+)$/.exec(req.headers.authorization ?? '');
    if (basic) {
      const pair = Buffer.from(basic[1]!, 'base64').toString('utf8');
      const colon = pair.indexOf(':');
      record.auth = 'basic';
      record.clientId = formDecode(pair.slice(0, colon));
      secret = formDecode(pair.slice(colon + 1));
    } else if (form.client_id !== undefined) {
      record.auth = 'post';
      record.clientId = form.client_id;
      secret = form.client_secret;
    }
    if (this.mode === 'stall') {
      this.#stalled.add(res);
      res.on('close', () => {
        if (this.#stalled.delete(res)) record.aborted = true;
      });
      return;
    }
    if (this.mode === 'down') {
      answer(503, { error: 'temporarily_unavailable', error_description: 'the issuer is down' });
      return;
    }
    if (
      record.auth === 'none' ||
      !this.clientAuth.has(record.auth) ||
      this.clients.get(record.clientId) !== secret
    ) {
      answer(401, { error: 'invalid_client', error_description: 'client authentication failed' });
      return;
    }
    if (form.grant_type !== 'client_credentials') {
      answer(400, { error: 'unsupported_grant_type' });
      return;
    }
    const now = Date.now() + this.clockOffsetMs;
    const jwt = new SignJWT({ scope: form.scope ?? '', jti: String(this.issued.length + 1) })
      .setProtectedHeader({ alg: 'RS256', kid: 'token-key' })
      .setIssuer(this.url)
      .setSubject(record.clientId)
      .setIssuedAt(Math.floor(now / 1000))
      .setExpirationTime(Math.floor(now / 1000) + (this.expiresIn ?? 3600));
    if (form.audience !== undefined) jwt.setAudience(form.audience);
    const accessToken = await jwt.sign(this.#signingKey!);
    this.issued.push({ accessToken, at: Date.now() });
    answer(200, {
      access_token: accessToken,
      token_type: 'Bearer',
      ...(this.expiresIn === undefined ? {} : { expires_in: this.expiresIn }),
    });
  }
}
