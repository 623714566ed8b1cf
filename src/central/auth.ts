// Authentication and authorization of the central lease API (docs/behaviour.md §3.6).
// Modes: `none` (no identity, authorization skipped), `static-keys` (a key file of
// `<key-id>:<sha256-hex-of-token>` lines; the identity is the key id; tokens are only ever hashed,
// never stored or logged) and `oidc` (JWTs from an OpenID Connect issuer, oidc.ts).
import { createHash } from 'node:crypto';
import { readFile } from 'node:fs/promises';
import type { Logger } from '../observability/logger.ts';

export interface Identity {
  holder: string;
  tenant: string;
}

/**
 * Resolves a bearer token to an identity, or undefined (or a rejection whose message says why, never
 * holding the token) when it is not recognised.
 */
export interface Authenticator {
  authenticate(token: string): Identity | undefined | Promise<Identity | undefined>;
}

export type AuthMode = 'none' | 'static-keys' | 'oidc';
export const AUTH_MODES: readonly AuthMode[] = ['none', 'static-keys', 'oidc'];

export const AuthMessage = {
  malformed: 'missing or malformed Authorization header',
  unauthorized: 'unauthorized',
  namespaceForbidden: 'not authorized for this namespace',
  holderForbidden: 'holder not authorized for this identity',
} as const;

/** The bearer token of an Authorization header, or undefined when missing, not `Bearer `, or empty. */
export function bearerToken(header: string | undefined): string | undefined {
  if (header === undefined || !header.startsWith('Bearer ')) return undefined;
  const token = header.slice('Bearer '.length);
  return token === '' ? undefined : token;
}

/**
 * Whether an authenticator's answer may be used. Fails closed on a missing identity and on a tenant
 * that is empty or holds `/`, which could pose as another tenant's `<tenant>/...` holder (→ 401).
 */
export function isUsableIdentity(identity: Identity | null | undefined): identity is Identity {
  return (
    identity !== undefined && identity !== null && identity.tenant !== '' && !identity.tenant.includes('/')
  );
}

/** The default authorizer: any namespace; the holder is the tenant or `<tenant>/...`. */
export function authorize(identity: Identity, _namespace: string, holder: string): string | undefined {
  if (holder !== identity.tenant && !holder.startsWith(`${identity.tenant}/`))
    return AuthMessage.holderForbidden;
  return undefined;
}

export const sha256Hex = (token: string): string => createHash('sha256').update(token, 'utf8').digest('hex');

/** Parses a key file; throws with the offending line number (never its content) on any error. */
export function parseKeyFile(text: string, source = 'api keys file'): Map<string, string> {
  const byHash = new Map<string, string>();
  const lines = text.split(/\r?\n/);
  lines.forEach((rawLine, index) => {
    const line = rawLine.trim();
    if (line === '' || line.startsWith('#')) return;
    const where = `${source} line ${index + 1}`;
    const colon = line.indexOf(':');
    if (colon < 0) throw new Error(`${where}: want <key-id>:<sha256-hex>`);
    const keyId = line.slice(0, colon).trim();
    const hash = line.slice(colon + 1).trim();
    if (keyId === '') throw new Error(`${where}: key id is empty`);
    if (keyId.includes('/')) throw new Error(`${where}: key id must not contain "/"`);
    if (!/^[0-9a-f]{64}$/.test(hash))
      throw new Error(`${where}: hash must be 64 lower-case hex digits (sha256)`);
    if (byHash.has(hash)) throw new Error(`${where}: duplicate key hash`);
    byHash.set(hash, keyId);
  });
  if (byHash.size === 0) throw new Error(`${source} contains no keys`);
  return byHash;
}

/** static-keys: looks tokens up by SHA-256; `reload()` (SIGHUP) keeps the old keys when the file is bad. */
export class StaticKeyAuthenticator implements Authenticator {
  readonly #path: string;
  readonly #logger: Logger | undefined;
  #byHash = new Map<string, string>();

  private constructor(path: string, logger: Logger | undefined) {
    this.#path = path;
    this.#logger = logger;
  }

  /** Loads the key file; throws when it cannot be read or parsed. */
  static async load(path: string, logger?: Logger): Promise<StaticKeyAuthenticator> {
    const auth = new StaticKeyAuthenticator(path, logger);
    auth.#byHash = await auth.#read();
    return auth;
  }

  get size(): number {
    return this.#byHash.size;
  }

  authenticate(token: string): Identity | undefined {
    const keyId = this.#byHash.get(sha256Hex(token));
    return keyId === undefined ? undefined : { holder: keyId, tenant: keyId };
  }

  /** Re-reads the key file. Resolves true when the new keys are in use, false when the old ones are kept. */
  async reload(): Promise<boolean> {
    try {
      this.#byHash = await this.#read();
      this.#logger?.info({ path: this.#path, keys: this.#byHash.size }, 'reloaded API keys');
      return true;
    } catch (err) {
      this.#logger?.error({ path: this.#path, err }, 'reloading API keys failed; keeping the previous keys');
      return false;
    }
  }

  async #read(): Promise<Map<string, string>> {
    let text: string;
    try {
      text = await readFile(this.#path, 'utf8');
    } catch (err) {
      throw new Error(`read api keys file ${this.#path}: ${(err as NodeJS.ErrnoException).code ?? 'error'}`);
    }
    return parseKeyFile(text, `api keys file ${this.#path}`);
  }
}
