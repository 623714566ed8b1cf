// `--auth-mode oidc` of the central lease API (README "OIDC authentication"): bearer tokens are JWTs
// verified with `jose` against the issuer's JWKS: signature, `iss`, `aud`, `exp`/`nbf` and the
// required claims. The username claim becomes the holder identity and the tenant claim the tenant
// that the default authorizer checks holders against. Tokens are never stored or logged: a refusal
// says why in fixed words (jose's or ours), never with the token or its claims.
import {
  createRemoteJWKSet,
  errors,
  type JWSAlgorithm,
  type JWTPayload,
  type JWTVerifyGetKey,
  jwtVerify,
} from 'jose';
import { z } from 'zod';
import type { Clock, Timer } from '../kube/clock.ts';
import type { Logger } from '../observability/logger.ts';
import type { Authenticator, Identity } from './auth.ts';
import { endpointUrlProblem } from './endpoint-url.ts';

export { endpointUrlProblem };

export interface OidcConfig {
  /** Must equal the tokens' `iss` and the discovery document's `issuer`. */
  issuerUrl: string;
  /** Must be one of the tokens' `aud` values. */
  audience: string;
  /** The JWKS to verify with; empty means the discovery document's `jwks_uri` (no discovery otherwise). */
  jwksUrl: string;
  /** Claim whose string value is the holder identity. */
  usernameClaim: string;
  /** Claim whose value (a string, or an array's first element) is the tenant. */
  tenantClaim: string;
  /** Claims that must be present with exactly these string values. */
  requiredClaims: Readonly<Record<string, string>>;
}

/** The bound of the discovery request, as in the Go server. */
export const OIDC_DISCOVERY_TIMEOUT_MS = 30_000;
/** Clock skew allowed on `exp` and `nbf`, in seconds. */
export const OIDC_CLOCK_TOLERANCE_S = 30;
/** The bound of one JWKS request (a request waits for it only when a token names an unknown key). */
export const JWKS_TIMEOUT_MS = 5_000;
/** After a JWKS fetch, an unknown key id triggers no other fetch for this long (bounds forged-kid load). */
export const JWKS_COOLDOWN_MS = 5_000;
/** Background JWKS refresh, so removed keys stop verifying; a failed refresh keeps the cached keys. */
export const JWKS_REFRESH_MS = 10 * 60_000;

// Asymmetric signatures only: an issuer's JWKS holds public keys, never a shared secret.
const ALGORITHMS: JWSAlgorithm[] = [
  'RS256',
  'RS384',
  'RS512',
  'PS256',
  'PS384',
  'PS512',
  'ES256',
  'ES384',
  'ES512',
  'EdDSA',
  'Ed25519',
];

/** `--oidc-required-claim key=value` occurrences as a map; throws naming the bad or repeated entry. */
export function parseRequiredClaims(entries: readonly string[]): Record<string, string> {
  const claims: Record<string, string> = {};
  for (const entry of entries) {
    const eq = entry.indexOf('=');
    if (eq <= 0) throw new Error(`want key=value, got "${entry}"`);
    const key = entry.slice(0, eq);
    if (Object.hasOwn(claims, key)) throw new Error(`claim "${key}" is given twice`);
    claims[key] = entry.slice(eq + 1);
  }
  return claims;
}

/** A claim as a string: the value itself, or the first element of an array; else undefined. */
export function claimString(value: unknown): string | undefined {
  const first: unknown = Array.isArray(value) ? value[0] : value;
  return typeof first === 'string' ? first : undefined;
}

export type ClaimsCheck = { ok: true; identity: Identity } | { ok: false; reason: string };

/**
 * The identity of verified claims. The tenant is taken as decoded, so a JSON-escaped `\/` is a `/`
 * like any other, and the request guard refuses it (auth.ts isUsableIdentity).
 */
export function identityFromClaims(
  claims: JWTPayload,
  config: Pick<OidcConfig, 'usernameClaim' | 'tenantClaim' | 'requiredClaims'>,
): ClaimsCheck {
  for (const [key, value] of Object.entries(config.requiredClaims))
    if (claims[key] !== value) return { ok: false, reason: `required claim "${key}" is missing or differs` };
  const holder = claims[config.usernameClaim];
  if (typeof holder !== 'string' || holder === '')
    return { ok: false, reason: `username claim "${config.usernameClaim}" is not a non-empty string` };
  const tenant = claimString(claims[config.tenantClaim]);
  if (tenant === undefined || tenant === '')
    return { ok: false, reason: `tenant claim "${config.tenantClaim}" is not a non-empty string` };
  return { ok: true, identity: { holder, tenant } };
}

/** `<issuer>/.well-known/openid-configuration`, a trailing slash of the issuer ignored. */
export function discoveryUrl(issuerUrl: string): string {
  return `${issuerUrl.replace(/\/$/, '')}/.well-known/openid-configuration`;
}

const discoverySchema = z.object({ issuer: z.string(), jwks_uri: z.string() });

/** The `jwks_uri` of a discovery document; throws when it is malformed or names another issuer. */
export function jwksUriOf(document: unknown, issuerUrl: string): string {
  const parsed = discoverySchema.safeParse(document);
  if (!parsed.success) throw new Error('document lacks string "issuer" and "jwks_uri"');
  const { issuer, jwks_uri } = parsed.data;
  if (issuer !== issuerUrl) throw new Error(`document names issuer "${issuer}", want "${issuerUrl}"`);
  const problem = endpointUrlProblem(jwks_uri);
  if (problem !== undefined) throw new Error(`jwks_uri "${jwks_uri}" ${problem}`);
  return jwks_uri;
}

/** Why a fetch or a verification failed, safe to log: jose's fixed messages, or the network cause. */
export function failureReason(err: unknown): string {
  if (err instanceof errors.JOSEError) return err.message;
  if (!(err instanceof Error)) return String(err);
  if (err.name === 'TimeoutError') return 'timed out';
  // fetch() itself only says "fetch failed".
  return err.cause instanceof Error ? `${err.message}: ${err.cause.message}` : err.message;
}

/** Fetches the discovery document (bounded by OIDC_DISCOVERY_TIMEOUT_MS) and returns its jwks_uri. */
export async function discoverJwksUri(
  issuerUrl: string,
  timeoutMs = OIDC_DISCOVERY_TIMEOUT_MS,
): Promise<string> {
  const url = discoveryUrl(issuerUrl);
  try {
    const response = await fetch(url, {
      headers: { accept: 'application/json' },
      signal: AbortSignal.timeout(timeoutMs),
    });
    if (response.status !== 200) throw new Error(`status ${response.status}`);
    return jwksUriOf(await response.json(), issuerUrl);
  } catch (err) {
    throw new Error(`OIDC discovery ${url}: ${failureReason(err)}`);
  }
}

export interface OidcAuthenticatorOptions {
  config: OidcConfig;
  /** The verification keys (a remote JWKS in production). */
  keys: JWTVerifyGetKey;
  /** For `exp`/`nbf`. */
  clock: Clock;
}

/** Verifies bearer JWTs; a refused token throws an Error whose message says why (never the token). */
export class OidcAuthenticator implements Authenticator {
  readonly #config: OidcConfig;
  readonly #keys: JWTVerifyGetKey;
  readonly #clock: Clock;
  #refresh: Timer | undefined;

  constructor(options: OidcAuthenticatorOptions) {
    this.#config = options.config;
    this.#keys = options.keys;
    this.#clock = options.clock;
  }

  async authenticate(token: string): Promise<Identity> {
    let claims: JWTPayload;
    try {
      ({ payload: claims } = await jwtVerify(token, this.#keys, {
        issuer: this.#config.issuerUrl,
        audience: this.#config.audience,
        algorithms: ALGORITHMS,
        clockTolerance: OIDC_CLOCK_TOLERANCE_S,
        currentDate: new Date(this.#clock.now()),
      }));
    } catch (err) {
      throw new Error(`OIDC token refused: ${failureReason(err)}`);
    }
    const checked = identityFromClaims(claims, this.#config);
    if (!checked.ok) throw new Error(`OIDC token refused: ${checked.reason}`);
    return checked.identity;
  }

  /**
   * Discovers the JWKS (unless configured), fetches it once and keeps it refreshed in the background.
   * Any failure rejects with one line naming the URL: the server then refuses to start.
   */
  static async start(config: OidcConfig, clock: Clock, logger: Logger): Promise<OidcAuthenticator> {
    const jwksUrl = config.jwksUrl || (await discoverJwksUri(config.issuerUrl));
    // Cached keys never expire on their own, so an issuer outage does not refuse every token; an
    // unknown key id (rotation) and the refresh timer fetch the set again.
    const jwks = createRemoteJWKSet(new URL(jwksUrl), {
      timeoutDuration: JWKS_TIMEOUT_MS,
      cooldownDuration: JWKS_COOLDOWN_MS,
      cacheMaxAge: Number.POSITIVE_INFINITY,
    });
    try {
      await jwks.reload();
    } catch (err) {
      throw new Error(`OIDC JWKS ${jwksUrl}: ${failureReason(err)}`);
    }
    const auth = new OidcAuthenticator({ config, keys: jwks, clock });
    auth.#refresh = clock.setInterval(() => {
      jwks
        .reload()
        .catch((err: unknown) =>
          logger.warn(
            { jwksUrl, reason: failureReason(err) },
            'OIDC JWKS refresh failed; keeping the cached keys',
          ),
        );
    }, JWKS_REFRESH_MS);
    logger.info(
      { issuer: config.issuerUrl, jwksUrl, audience: config.audience },
      'OIDC authentication ready',
    );
    return auth;
  }

  /** Stops the background refresh. */
  close(): void {
    this.#clock.clearTimeout(this.#refresh);
    this.#refresh = undefined;
  }
}
