// OIDC authentication: the pure parts (URLs, required claims, claim extraction, the discovery
// document) and token verification against a local JWKS with a manual clock.
import {
  CompactSign,
  type CryptoKey,
  createLocalJWKSet,
  errors,
  exportJWK,
  generateKeyPair,
  type JWK,
  SignJWT,
} from 'jose';
import { beforeAll, describe, expect, it } from 'vitest';
import { isUsableIdentity } from '../../../src/central/auth.ts';
import {
  claimString,
  discoveryUrl,
  endpointUrlProblem,
  failureReason,
  identityFromClaims,
  jwksUriOf,
  OIDC_CLOCK_TOLERANCE_S,
  OidcAuthenticator,
  type OidcConfig,
  parseRequiredClaims,
} from '../../../src/central/oidc.ts';
import { ManualClock } from '../../../src/kube/clock.ts';

const ISSUER = 'https://issuer.example.com';
const claimsConfig = { usernameClaim: 'sub', tenantClaim: 'sub', requiredClaims: {} };

describe('endpointUrlProblem', () => {
  it('accepts https anywhere and http on loopback only', () => {
    expect(endpointUrlProblem('https://issuer.example.com/realms/x')).toBeUndefined();
    expect(endpointUrlProblem('http://127.0.0.1:5556/dex')).toBeUndefined();
    expect(endpointUrlProblem('http://localhost/')).toBeUndefined();
    expect(endpointUrlProblem('http://[::1]:80/')).toBeUndefined();
    expect(endpointUrlProblem('http://issuer.example.com')).toBe('must be https (http only on localhost)');
    expect(endpointUrlProblem('ftp://issuer.example.com')).toBe('must be an https URL');
    expect(endpointUrlProblem('issuer.example.com')).toBe('must be an absolute URL');
  });
});

describe('parseRequiredClaims', () => {
  it('splits at the first "=", keeping empty and "="-holding values', () => {
    expect(parseRequiredClaims(['env=prod', 'expr=a=b', 'empty='])).toEqual({
      env: 'prod',
      expr: 'a=b',
      empty: '',
    });
    expect(parseRequiredClaims([])).toEqual({});
  });

  it('rejects an entry without key=value and a claim given twice', () => {
    expect(() => parseRequiredClaims(['env'])).toThrow('want key=value, got "env"');
    expect(() => parseRequiredClaims(['=prod'])).toThrow('want key=value, got "=prod"');
    expect(() => parseRequiredClaims(['env=a', 'env=b'])).toThrow('claim "env" is given twice');
  });
});

describe('claimString', () => {
  it('takes a string, or the first element of an array when it is a string', () => {
    expect(claimString('east')).toBe('east');
    expect(claimString(['east', 'west'])).toBe('east');
    expect(claimString([])).toBeUndefined();
    expect(claimString([7, 'east'])).toBeUndefined();
    expect(claimString(7)).toBeUndefined();
    expect(claimString(undefined)).toBeUndefined();
    expect(claimString({ tenant: 'east' })).toBeUndefined();
  });
});

describe('identityFromClaims', () => {
  it('takes the holder from the username claim and the tenant from the tenant claim', () => {
    expect(identityFromClaims({ sub: 'east' }, claimsConfig)).toEqual({
      ok: true,
      identity: { holder: 'east', tenant: 'east' },
    });
    expect(
      identityFromClaims(
        { sub: 'u-1', email: 'ops@east', groups: ['cluster-east', 'admins'] },
        { ...claimsConfig, usernameClaim: 'email', tenantClaim: 'groups' },
      ),
    ).toEqual({ ok: true, identity: { holder: 'ops@east', tenant: 'cluster-east' } });
  });

  it('refuses a missing, empty or non-string username or tenant', () => {
    const cfg = { ...claimsConfig, tenantClaim: 'tenant' };
    expect(identityFromClaims({ tenant: 'east' }, cfg)).toEqual({
      ok: false,
      reason: 'username claim "sub" is not a non-empty string',
    });
    expect(identityFromClaims({ user: ['east'], tenant: 'east' }, { ...cfg, usernameClaim: 'user' })).toEqual(
      {
        ok: false,
        reason: 'username claim "user" is not a non-empty string',
      },
    );
    for (const tenant of [undefined, '', [], [''], 42, { id: 'east' }])
      expect(identityFromClaims({ sub: 'east', tenant }, cfg)).toEqual({
        ok: false,
        reason: 'tenant claim "tenant" is not a non-empty string',
      });
  });

  it('requires every required claim to be present with exactly the string value', () => {
    const cfg = { ...claimsConfig, requiredClaims: { env: 'prod', team: 'ops' } };
    expect(identityFromClaims({ sub: 'east', env: 'prod', team: 'ops' }, cfg).ok).toBe(true);
    for (const claims of [
      { sub: 'east', env: 'prod' },
      { sub: 'east', env: 'Prod', team: 'ops' },
      { sub: 'east', env: ['prod'], team: 'ops' },
      { sub: 'east', env: 'prod', team: true },
    ])
      expect(identityFromClaims(claims, cfg)).toMatchObject({
        ok: false,
        reason: expect.stringMatching(/^required claim "(env|team)"/),
      });
  });

  it('hands over a tenant holding "/" as decoded, for the request guard to refuse', () => {
    // {"sub":"east\/evil"} decodes to east/evil, so an escaped slash cannot slip through either.
    const claims = JSON.parse('{"sub":"east\\/evil","groups":["a\\/b"]}') as { sub: string };
    const byArray = identityFromClaims(claims, { ...claimsConfig, tenantClaim: 'groups' });
    const bySub = identityFromClaims(claims, claimsConfig);
    expect(bySub).toEqual({ ok: true, identity: { holder: 'east/evil', tenant: 'east/evil' } });
    expect(byArray).toMatchObject({ ok: true, identity: { tenant: 'a/b' } });
    for (const checked of [bySub, byArray])
      expect(checked.ok && isUsableIdentity(checked.identity)).toBe(false);
  });
});

describe('discovery', () => {
  it('appends the well-known path to the issuer, ignoring a trailing slash', () => {
    expect(discoveryUrl(ISSUER)).toBe(`${ISSUER}/.well-known/openid-configuration`);
    expect(discoveryUrl(`${ISSUER}/realms/x/`)).toBe(`${ISSUER}/realms/x/.well-known/openid-configuration`);
  });

  it('takes jwks_uri from a document naming exactly the configured issuer', () => {
    const doc = { issuer: ISSUER, jwks_uri: `${ISSUER}/keys`, authorization_endpoint: `${ISSUER}/auth` };
    expect(jwksUriOf(doc, ISSUER)).toBe(`${ISSUER}/keys`);
    expect(() => jwksUriOf(doc, `${ISSUER}/`)).toThrow(
      `document names issuer "${ISSUER}", want "${ISSUER}/"`,
    );
    expect(() => jwksUriOf({ issuer: ISSUER }, ISSUER)).toThrow(
      'document lacks string "issuer" and "jwks_uri"',
    );
    expect(() => jwksUriOf('not json object', ISSUER)).toThrow('document lacks');
    expect(() => jwksUriOf({ ...doc, jwks_uri: 'http://keys.example.com/' }, ISSUER)).toThrow(
      'jwks_uri "http://keys.example.com/" must be https (http only on localhost)',
    );
  });
});

describe('failureReason', () => {
  it('reports jose messages and network causes, never more', () => {
    expect(failureReason(new errors.JWTExpired('"exp" claim timestamp check failed', { exp: 1 }))).toBe(
      '"exp" claim timestamp check failed',
    );
    const fetchError = new TypeError('fetch failed', {
      cause: new Error('connect ECONNREFUSED 127.0.0.1:9'),
    });
    expect(failureReason(fetchError)).toBe('fetch failed: connect ECONNREFUSED 127.0.0.1:9');
    expect(failureReason(new DOMException('The operation was aborted due to timeout', 'TimeoutError'))).toBe(
      'timed out',
    );
    expect(failureReason('odd')).toBe('odd');
  });
});

describe('OidcAuthenticator', () => {
  const T0 = Date.UTC(2026, 8, 7, 9, 0, 0);
  const seconds = (ms: number) => Math.floor(ms / 1000);
  let signer: CryptoKey;
  let forger: CryptoKey;
  let jwk: JWK;

  beforeAll(async () => {
    const pair = await generateKeyPair('ES256');
    signer = pair.privateKey;
    forger = (await generateKeyPair('ES256')).privateKey;
    jwk = { ...(await exportJWK(pair.publicKey)), kid: 'k1', alg: 'ES256', use: 'sig' };
  });

  const config: OidcConfig = {
    issuerUrl: ISSUER,
    audience: 'berth',
    jwksUrl: '',
    usernameClaim: 'sub',
    tenantClaim: 'tenant',
    requiredClaims: { env: 'prod' },
  };
  const valid = { sub: 'ops', tenant: 'east', env: 'prod' };

  function setup() {
    const clock = new ManualClock(T0);
    const auth = new OidcAuthenticator({ config, keys: createLocalJWKSet({ keys: [jwk] }), clock });
    return { clock, auth };
  }

  function token(
    claims: Record<string, unknown> = valid,
    over: {
      iss?: string;
      aud?: string | string[];
      exp?: number;
      nbf?: number;
      key?: CryptoKey;
      kid?: string;
    } = {},
  ): Promise<string> {
    const jwt = new SignJWT(claims)
      .setProtectedHeader({ alg: 'ES256', kid: over.kid ?? 'k1' })
      .setIssuer(over.iss ?? ISSUER)
      .setAudience(over.aud ?? 'berth')
      .setIssuedAt(seconds(T0))
      .setExpirationTime(over.exp ?? seconds(T0) + 300);
    if (over.nbf !== undefined) jwt.setNotBefore(over.nbf);
    return jwt.sign(over.key ?? signer);
  }

  it('accepts a valid token, with the audience alone or among others', async () => {
    const { auth } = setup();
    expect(await auth.authenticate(await token())).toEqual({ holder: 'ops', tenant: 'east' });
    expect(await auth.authenticate(await token(valid, { aud: ['other', 'berth'] }))).toEqual({
      holder: 'ops',
      tenant: 'east',
    });
  });

  it(`allows ${OIDC_CLOCK_TOLERANCE_S}s of clock skew on exp and nbf, and no more`, async () => {
    const { clock, auth } = setup();
    const expiring = await token(valid, { exp: seconds(T0) + 10 });
    clock.advance((10 + OIDC_CLOCK_TOLERANCE_S - 1) * 1000);
    await expect(auth.authenticate(expiring)).resolves.toMatchObject({ tenant: 'east' });
    clock.advance(2000);
    await expect(auth.authenticate(expiring)).rejects.toThrow(
      'OIDC token refused: "exp" claim timestamp check failed',
    );

    const early = setup();
    const notYet = await token(valid, { nbf: seconds(T0) + OIDC_CLOCK_TOLERANCE_S + 10 });
    await expect(early.auth.authenticate(notYet)).rejects.toThrow(
      'OIDC token refused: "nbf" claim timestamp check failed',
    );
    early.clock.advance(11_000);
    await expect(early.auth.authenticate(notYet)).resolves.toMatchObject({ tenant: 'east' });
  });

  it('refuses forged, misaddressed, foreign and unsigned tokens with a reason that holds no token', async () => {
    const { auth } = setup();
    const refused: Array<[Promise<string> | string, string]> = [
      [token(valid, { key: forger }), 'signature verification failed'],
      [token(valid, { key: forger, kid: 'other' }), 'no applicable key found in the JSON Web Key Set'],
      [token(valid, { aud: 'someone-else' }), 'unexpected "aud" claim value'],
      [token(valid, { iss: 'https://evil.example.com' }), 'unexpected "iss" claim value'],
      [token({ sub: 'ops', tenant: 'east' }), 'required claim "env" is missing or differs'],
      [token({ tenant: 'east', env: 'prod' }), 'username claim "sub" is not a non-empty string'],
      [
        `${Buffer.from('{"alg":"none"}').toString('base64url')}.${Buffer.from(JSON.stringify(valid)).toString('base64url')}.`,
        '"alg" (Algorithm) Header Parameter value not allowed',
      ],
      // A shared-secret signature is never accepted, whatever the key set holds.
      [
        new SignJWT(valid)
          .setProtectedHeader({ alg: 'HS256', kid: 'k1' })
          .setIssuer(ISSUER)
          .setAudience('berth')
          .setExpirationTime(seconds(T0) + 300)
          .sign(new TextEncoder().encode('a-shared-secret-of-32-bytes-long')),
        '"alg" (Algorithm) Header Parameter value not allowed',
      ],
      ['not-a-jwt', 'Invalid Compact JWS'],
    ];
    for (const [pending, reason] of refused) {
      const jwt = await pending;
      const err = (await auth.authenticate(jwt).then(
        () => undefined,
        (e: unknown) => e,
      )) as Error;
      expect(err?.message, reason).toBe(`OIDC token refused: ${reason}`);
      expect(err.message).not.toContain(jwt);
    }
  });

  it('takes a JSON-escaped slash in the tenant as a slash', async () => {
    const { auth } = setup();
    const payload = `{"sub":"ops","tenant":"east\\/evil","env":"prod","iss":"${ISSUER}","aud":"berth","exp":${seconds(T0) + 300}}`;
    const jwt = await new CompactSign(new TextEncoder().encode(payload))
      .setProtectedHeader({ alg: 'ES256', kid: 'k1' })
      .sign(signer);
    const identity = await auth.authenticate(jwt);
    expect(identity.tenant).toBe('east/evil');
    expect(isUsableIdentity(identity)).toBe(false);
  });
});
