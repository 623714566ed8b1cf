import { Writable } from 'node:stream';
import { describe, expect, it } from 'vitest';
import type { AccessReviewResult, TokenReviewResult, UserInfo } from '../../../src/kube/access-review.ts';
import { ManualClock } from '../../../src/kube/clock.ts';
import {
  parseBearerToken,
  refusalFor,
  SCRAPE_CACHE_TTLS,
  ScrapeAuthorizer,
  type ScrapeReviewer,
  tokenKey,
  userKey,
} from '../../../src/kube/metrics-auth.ts';
import { createLogger } from '../../../src/observability/logger.ts';

const READER: UserInfo = {
  username: 'system:serviceaccount:monitoring:prometheus',
  groups: ['system:serviceaccounts', 'system:authenticated'],
};
const STRANGER: UserInfo = { username: 'system:serviceaccount:apps:web', groups: ['system:authenticated'] };

/** A reviewer whose answers the test sets, counting the reviews asked of it. */
class FakeReviewer implements ScrapeReviewer {
  readonly tokens = new Map<string, UserInfo>();
  readonly allowed = new Set<string>();
  tokenReviews = 0;
  accessReviews = 0;
  failWith: Error | undefined;
  /** When set, token reviews wait for it. */
  gate: Promise<void> | undefined;

  async reviewToken(token: string): Promise<TokenReviewResult> {
    this.tokenReviews++;
    await this.gate;
    if (this.failWith) throw this.failWith;
    const user = this.tokens.get(token);
    return user ? { authenticated: true, user } : { authenticated: false, reason: 'invalid bearer token' };
  }

  async reviewAccess(user: UserInfo): Promise<AccessReviewResult> {
    this.accessReviews++;
    if (this.failWith) throw this.failWith;
    return { allowed: this.allowed.has(user.username), reason: '' };
  }
}

function setup() {
  const clock = new ManualClock();
  const reviewer = new FakeReviewer();
  reviewer.tokens.set('reader-token', READER);
  reviewer.tokens.set('stranger-token', STRANGER);
  reviewer.allowed.add(READER.username);
  let logs = '';
  const destination = new Writable({
    write(chunk, _encoding, done) {
      logs += String(chunk);
      done();
    },
  });
  const logger = createLogger({ level: 'debug', destination });
  const authorizer = new ScrapeAuthorizer({ reviewer, clock, logger });
  return { clock, reviewer, authorizer, logs: () => logs };
}

describe('parseBearerToken', () => {
  it('reads the token as kube-apiserver does: scheme in any case, one space, no whitespace in it', () => {
    expect(parseBearerToken('Bearer abc.def-ghi_~+/=')).toBe('abc.def-ghi_~+/=');
    expect(parseBearerToken('bearer abc')).toBe('abc');
    expect(parseBearerToken('BEARER abc')).toBe('abc');
    expect(parseBearerToken('  Bearer abc  ')).toBe('abc');
    for (const bad of [
      undefined,
      '',
      'Bearer',
      'Bearer ',
      'Bearer  abc',
      'Basic YWxhZGRpbjpv',
      'Bearer a b',
      'abc',
    ])
      expect(parseBearerToken(bad), String(bad)).toBeUndefined();
  });
});

describe('cache keys', () => {
  it('hash tokens with the process key, never holding them', () => {
    const secret = Buffer.alloc(32, 1);
    const key = tokenKey(secret, 'reader-token');
    expect(key).not.toContain('reader-token');
    expect(tokenKey(secret, 'reader-token')).toBe(key);
    expect(tokenKey(secret, 'reader-token2')).not.toBe(key);
    expect(tokenKey(Buffer.alloc(32, 2), 'reader-token')).not.toBe(key);
  });

  it('name a user by everything a SubjectAccessReview is asked, in any order', () => {
    const a = { username: 'u', uid: '1', groups: ['g1', 'g2'], extra: { x: ['2', '1'], a: ['z'] } };
    const b = { username: 'u', uid: '1', groups: ['g2', 'g1'], extra: { a: ['z'], x: ['1', '2'] } };
    expect(userKey(a)).toBe(userKey(b));
    expect(userKey({ ...a, groups: ['g1'] })).not.toBe(userKey(a));
    expect(userKey({ ...a, uid: '2' })).not.toBe(userKey(a));
    expect(userKey({ ...a, extra: { a: ['z'] } })).not.toBe(userKey(a));
  });
});

describe('refusalFor', () => {
  it('maps each decision to its status: 401 with a Bearer challenge, 403, 503, or serve', () => {
    expect(refusalFor({ kind: 'allowed', user: 'u' })).toBeUndefined();
    const unauthenticated = refusalFor({ kind: 'unauthenticated', reason: 'the bearer token is not valid' });
    expect(unauthenticated?.status).toBe(401);
    expect(unauthenticated?.headers['www-authenticate']).toMatch(/^Bearer realm=/);
    expect(unauthenticated?.body).toBe('Unauthorized: the bearer token is not valid\n');
    const forbidden = refusalFor({ kind: 'forbidden', user: 'alice', reason: 'no RBAC' });
    expect(forbidden).toEqual({
      status: 403,
      body: 'Forbidden: user "alice" may not get /metrics\n',
      headers: {},
    });
    const unavailable = refusalFor({ kind: 'unavailable', review: 'TokenReview', reason: 'ECONNREFUSED' });
    expect(unavailable?.status).toBe(503);
    expect(unavailable?.body).toContain('could not be checked');
    expect(unavailable?.body).toContain('TokenReview');
    // The API error stays in the operator's log, not in the answer.
    expect(unavailable?.body).not.toContain('ECONNREFUSED');
  });
});

describe('ScrapeAuthorizer', () => {
  it('refuses a scrape without a bearer token with 401, asking the API server nothing', async () => {
    const { authorizer, reviewer } = setup();
    for (const header of [undefined, 'Basic YWxhZGRpbjpv', 'Bearer'])
      expect((await authorizer.authorize(header))?.status).toBe(401);
    expect(reviewer.tokenReviews).toBe(0);
  });

  it('serves a reader, forbids others with 403, refuses invalid tokens with 401', async () => {
    const { authorizer } = setup();
    expect(await authorizer.decide('Bearer reader-token')).toEqual({
      kind: 'allowed',
      user: READER.username,
    });
    expect(await authorizer.authorize('Bearer reader-token')).toBeUndefined();
    expect(await authorizer.decide('Bearer stranger-token')).toEqual({
      kind: 'forbidden',
      user: STRANGER.username,
      reason: '',
    });
    expect(await authorizer.decide('Bearer made-up')).toEqual({
      kind: 'unauthenticated',
      reason: 'the bearer token is not valid',
    });
  });

  it('caches tokens 10 s and decisions 5 min allowed, 30 s denied', async () => {
    const { authorizer, reviewer, clock } = setup();
    expect(SCRAPE_CACHE_TTLS).toEqual({
      authenticatedMs: 10_000,
      unauthenticatedMs: 10_000,
      allowedMs: 300_000,
      deniedMs: 30_000,
    });
    await authorizer.decide('Bearer reader-token');
    await authorizer.decide('Bearer reader-token');
    expect([reviewer.tokenReviews, reviewer.accessReviews]).toEqual([1, 1]);
    clock.advance(9_999);
    await authorizer.decide('Bearer reader-token');
    expect([reviewer.tokenReviews, reviewer.accessReviews]).toEqual([1, 1]);
    // The token is reviewed again after 10 s; the user's access stays cached for 5 min.
    clock.advance(1);
    await authorizer.decide('Bearer reader-token');
    expect([reviewer.tokenReviews, reviewer.accessReviews]).toEqual([2, 1]);
    clock.advance(300_000 - 10_000 - 1);
    await authorizer.decide('Bearer reader-token');
    expect(reviewer.accessReviews).toBe(1);
    clock.advance(1);
    await authorizer.decide('Bearer reader-token');
    expect(reviewer.accessReviews).toBe(2);
    // Removing the grant shows after the allowed TTL; the denial then lasts 30 s.
    reviewer.allowed.delete(READER.username);
    expect((await authorizer.decide('Bearer reader-token')).kind).toBe('allowed');
    clock.advance(300_000);
    expect((await authorizer.decide('Bearer reader-token')).kind).toBe('forbidden');
    reviewer.allowed.add(READER.username);
    clock.advance(29_999);
    expect((await authorizer.decide('Bearer reader-token')).kind).toBe('forbidden');
    clock.advance(1);
    expect((await authorizer.decide('Bearer reader-token')).kind).toBe('allowed');
  });

  it('caches an unauthenticated token for 10 s', async () => {
    const { authorizer, reviewer, clock } = setup();
    await authorizer.decide('Bearer made-up');
    clock.advance(9_999);
    await authorizer.decide('Bearer made-up');
    expect(reviewer.tokenReviews).toBe(1);
    reviewer.tokens.set('made-up', READER);
    clock.advance(1);
    expect((await authorizer.decide('Bearer made-up')).kind).toBe('allowed');
    expect(reviewer.tokenReviews).toBe(2);
  });

  it('fails closed with 503 when the API server does not answer, and caches nothing then', async () => {
    const { authorizer, reviewer } = setup();
    reviewer.failWith = new Error('connect ECONNREFUSED 10.96.0.1:443');
    expect(await authorizer.decide('Bearer reader-token')).toMatchObject({
      kind: 'unavailable',
      review: 'TokenReview',
    });
    expect((await authorizer.authorize('Bearer reader-token'))?.status).toBe(503);
    expect(reviewer.tokenReviews).toBe(2);
    reviewer.failWith = undefined;
    expect(await authorizer.authorize('Bearer reader-token')).toBeUndefined();
  });

  it('reports a failed SubjectAccessReview as unavailable, not as forbidden', async () => {
    const { authorizer, reviewer } = setup();
    reviewer.reviewAccess = async () => {
      reviewer.accessReviews++;
      throw new Error('503 ServiceUnavailable');
    };
    expect(await authorizer.decide('Bearer reader-token')).toMatchObject({
      kind: 'unavailable',
      review: 'SubjectAccessReview',
    });
    await authorizer.decide('Bearer reader-token');
    expect(reviewer.accessReviews).toBe(2);
  });

  it('shares one review among concurrent scrapes with the same token', async () => {
    const { authorizer, reviewer } = setup();
    let open!: () => void;
    reviewer.gate = new Promise((resolve) => {
      open = resolve;
    });
    const scrapes = Array.from({ length: 5 }, () => authorizer.decide('Bearer reader-token'));
    const other = authorizer.decide('Bearer stranger-token');
    await new Promise((resolve) => setImmediate(resolve));
    open();
    const decisions = await Promise.all(scrapes);
    expect(decisions.every((d) => d.kind === 'allowed')).toBe(true);
    expect((await other).kind).toBe('forbidden');
    expect([reviewer.tokenReviews, reviewer.accessReviews]).toEqual([2, 2]);
  });

  it('never logs a token', async () => {
    const { authorizer, reviewer, logs } = setup();
    await authorizer.decide('Bearer stranger-token');
    await authorizer.decide('Bearer made-up-secret');
    reviewer.failWith = new Error('unreachable');
    await authorizer.decide('Bearer reader-token-xyz');
    const text = logs();
    expect(text).toContain('metrics scrape refused');
    for (const token of ['stranger-token', 'made-up-secret', 'reader-token-xyz'])
      expect(text).not.toContain(token);
  });
});
