// The broker's start-up rules (src/oidc-broker/config.ts, schedule.ts): the Go broker's required and
// exclusive flags, the bounds of its durations, the URL rule, the scopes, and its timing decisions.
import { describe, expect, it } from 'vitest';
import { parseFlags, UsageError } from '../../../src/cli.ts';
import { brokerConfig, parseScopes, secretFromFile } from '../../../src/oidc-broker/config.ts';
import { nextRetry, refreshDelay, tokenExpiry } from '../../../src/oidc-broker/schedule.ts';
import { oidcBrokerCommand } from '../../../src/oidc-broker/spec.ts';

const config = (...args: string[]) => brokerConfig(parseFlags(oidcBrokerCommand, args));
const base = ['--oidc-client-id=x', '--output=/tmp/t'];

describe('brokerConfig', () => {
  it("has the Go broker's defaults", () => {
    expect(config(...base, '--oidc-issuer-url=https://i', '--oidc-client-secret=s')).toEqual({
      issuerUrl: 'https://i',
      tokenUrl: '',
      clientId: 'x',
      clientSecret: 's',
      clientSecretFile: '',
      audience: '',
      scopes: [],
      outputPath: '/tmp/t',
      refreshSkewMs: 60_000,
      minRefreshMs: 30_000,
      fetchTimeoutMs: 30_000,
      maxRetryMs: 300_000,
    });
  });

  it('accepts a token URL with a secret file', () => {
    expect(
      config(...base, '--oidc-token-url=https://i/token', '--oidc-client-secret-file=/etc/secret'),
    ).toMatchObject({ tokenUrl: 'https://i/token', clientSecretFile: '/etc/secret' });
  });

  it.each([
    [
      'a missing client id',
      ['--output=/t', '--oidc-issuer-url=https://i', '--oidc-client-secret=s'],
      /--oidc-client-id is required/,
    ],
    [
      'a missing output',
      ['--oidc-client-id=x', '--oidc-issuer-url=https://i', '--oidc-client-secret=s'],
      /--output is required/,
    ],
    [
      'no issuer or token URL',
      [...base, '--oidc-client-secret=s'],
      /either --oidc-issuer-url or --oidc-token-url/,
    ],
    [
      'no secret',
      [...base, '--oidc-issuer-url=https://i'],
      /either --oidc-client-secret or --oidc-client-secret-file/,
    ],
    [
      'both secrets',
      [...base, '--oidc-issuer-url=https://i', '--oidc-client-secret=s', '--oidc-client-secret-file=/f'],
      /mutually exclusive/,
    ],
    [
      'a zero fetch timeout',
      [...base, '--oidc-issuer-url=https://i', '--oidc-client-secret=s', '--fetch-timeout=0'],
      /--fetch-timeout must be positive/,
    ],
    [
      'a zero minimum interval',
      [...base, '--oidc-issuer-url=https://i', '--oidc-client-secret=s', '--min-refresh-interval=0'],
      /--min-refresh-interval must be positive/,
    ],
    [
      'a retry cap below the minimum',
      [...base, '--oidc-issuer-url=https://i', '--oidc-client-secret=s', '--max-retry-interval=1s'],
      /--max-retry-interval must be at least --min-refresh-interval/,
    ],
    [
      'an http issuer off loopback',
      [...base, '--oidc-issuer-url=http://issuer.example.com', '--oidc-client-secret=s'],
      /--oidc-issuer-url "http:\/\/issuer.example.com" must be https/,
    ],
    [
      'a relative token URL',
      [...base, '--oidc-token-url=/token', '--oidc-client-secret=s'],
      /--oidc-token-url "\/token" must be an absolute URL/,
    ],
  ])('refuses %s with a UsageError', (_what, args, message) => {
    expect(() => config(...args)).toThrow(UsageError);
    expect(() => config(...args)).toThrow(message);
  });

  it('refuses a negative skew at parsing (no duration has a sign)', () => {
    expect(() =>
      config(...base, '--oidc-issuer-url=https://i', '--oidc-client-secret=s', '--refresh-skew=-1s'),
    ).toThrow(UsageError);
  });

  it('accepts http on loopback, for development', () => {
    expect(
      config(...base, '--oidc-token-url=http://127.0.0.1:5556/token', '--oidc-client-secret=s').tokenUrl,
    ).toBe('http://127.0.0.1:5556/token');
  });
});

describe('parseScopes and the secret file', () => {
  it.each([
    ['', []],
    ['openid', ['openid']],
    ['openid,profile', ['openid', 'profile']],
    [' openid , email,,', ['openid', 'email']],
  ])('splits %j', (text, scopes) => {
    expect(parseScopes(text)).toEqual(scopes);
  });

  it('trims the secret and refuses an empty one', () => {
    expect(secretFromFile('/s', '  abcd1234\n')).toBe('abcd1234');
    expect(() => secretFromFile('/s', '\n')).toThrow('client secret file "/s" is empty');
  });
});

describe('timing decisions', () => {
  const now = Date.UTC(2026, 0, 1);

  it('counts expires_in from the answer; none or 0 is no expiry', () => {
    expect(tokenExpiry(now, 3600)).toBe(now + 3_600_000);
    expect(tokenExpiry(now, undefined)).toBeUndefined();
    expect(tokenExpiry(now, 0)).toBeUndefined();
    expect(tokenExpiry(now, -5)).toBe(now - 5000);
  });

  it.each([
    ['no expiry: the minimum', undefined, 30_000, 60_000, 60_000],
    ['an expired token: the minimum', now - 60_000, 0, 30_000, 30_000],
    ['a normal token: the skew before expiry', now + 7_200_000, 60_000, 30_000, 7_140_000],
    ['a token shorter-lived than the skew: the minimum', now + 45_000, 60_000, 30_000, 30_000],
    ['exactly at the minimum', now + 90_000, 60_000, 30_000, 30_000],
  ])('%s', (_what, expiresAt, skew, min, delay) => {
    expect(refreshDelay(expiresAt, now, skew, min)).toBe(delay);
  });

  it.each([
    [30_000, 300_000, 60_000],
    [120_000, 300_000, 240_000],
    [240_000, 300_000, 300_000],
    [300_000, 300_000, 300_000],
    [Number.MAX_VALUE, 300_000, 300_000],
  ])('retry after %d (cap %d) is %d', (current, limit, next) => {
    expect(nextRetry(current, limit)).toBe(next);
  });
});
