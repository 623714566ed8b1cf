// Who may scrape /metrics with `--metrics-secure`, as controller-runtime's metrics filter decides it
// (docs/metrics.md): the scrape's bearer token is authenticated with a TokenReview, and the user it
// belongs to must be allowed `get` on the non-resource URL `/metrics` by a SubjectAccessReview.
//
//   no token, or a token the API server does not authenticate -> 401 (with WWW-Authenticate: Bearer)
//   authenticated, not allowed                                 -> 403
//   a review the API server did not answer                     -> 503: fail closed, but say that the
//                                                                 credentials were not checked rather
//                                                                 than call them bad
//
// Answers are cached (kube-apiserver's delegating authenticator and authorizer do the same, see
// SCRAPE_CACHE_TTLS), failures are not; concurrent scrapes with the same token share one review. Tokens
// are never logged or kept: the cache key is an HMAC of the token with a key drawn per process.
import { createHmac, randomBytes } from 'node:crypto';
import type { ScrapeRefusal } from '../observability/health.ts';
import type { Logger } from '../observability/logger.ts';
import type { AccessReviewResult, TokenReviewResult, UserInfo } from './access-review.ts';
import { describeError } from './client.ts';
import type { Clock } from './clock.ts';
import { TtlCache } from './ttl-cache.ts';

/** What a scrape must be allowed: the SubjectAccessReview's non-resource attributes. */
export const METRICS_ACCESS = { path: '/metrics', verb: 'get' } as const;

export interface ScrapeCacheTtls {
  /** A token the API server authenticated. */
  authenticatedMs: number;
  /** A token it did not. */
  unauthenticatedMs: number;
  /** A user allowed to get /metrics. */
  allowedMs: number;
  /** A user not allowed to. */
  deniedMs: number;
}

/**
 * Tokens 10 s, as kube-apiserver's delegating authenticator: a revoked token (its ServiceAccount or Pod
 * deleted) stops working within 10 s, and a TokenReview per token per 10 s is nothing for the API
 * server; a bad token presented again is not reviewed again within that time either. Decisions 5 min
 * allowed and 30 s denied, the webhook authorizer's defaults (kubelet, kube-rbac-proxy): RBAC for
 * read-only metrics rarely changes and losing it can wait minutes, while a scraper just granted access
 * should not wait more than a scrape interval or two.
 */
export const SCRAPE_CACHE_TTLS: ScrapeCacheTtls = {
  authenticatedMs: 10_000,
  unauthenticatedMs: 10_000,
  allowedMs: 5 * 60_000,
  deniedMs: 30_000,
};

/** Entries per cache: scrapers are few; a flood of made-up tokens only evicts the oldest. */
export const SCRAPE_CACHE_ENTRIES = 1024;

/** The reviews a scrape needs (./access-review.ts over the operator's transport). */
export interface ScrapeReviewer {
  reviewToken(token: string): Promise<TokenReviewResult>;
  reviewAccess(user: UserInfo): Promise<AccessReviewResult>;
}

export type ScrapeDecision =
  | { kind: 'allowed'; user: string }
  | { kind: 'unauthenticated'; reason: string }
  | { kind: 'forbidden'; user: string; reason: string }
  | { kind: 'unavailable'; review: 'TokenReview' | 'SubjectAccessReview'; reason: string };

/**
 * The bearer token of an Authorization header, as kube-apiserver's bearer-token authenticator reads it:
 * the scheme `Bearer` in any case, one space, a token without whitespace. Undefined otherwise.
 */
export function parseBearerToken(header: string | undefined): string | undefined {
  const match = /^bearer (\S+)$/i.exec((header ?? '').trim());
  return match?.[1];
}

/** The cache key of a token: an HMAC, so neither the cache nor a heap dump holds the token. */
export function tokenKey(secret: Buffer, token: string): string {
  return createHmac('sha256', secret).update(token).digest('base64url');
}

/** The cache key of a user's authorization: everything a SubjectAccessReview is asked about them. */
export function userKey(user: UserInfo): string {
  const extra = Object.entries(user.extra ?? {})
    .map(([k, v]): [string, string[]] => [k, [...v].sort()])
    .sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0));
  return JSON.stringify([user.username, user.uid ?? '', [...user.groups].sort(), extra]);
}

const BEARER_CHALLENGE = { 'www-authenticate': 'Bearer realm="berth-operator metrics"' };

/** The answer to send instead of the metrics, undefined when the scrape is allowed. */
export function refusalFor(decision: ScrapeDecision): ScrapeRefusal | undefined {
  switch (decision.kind) {
    case 'allowed':
      return undefined;
    case 'unauthenticated':
      return { status: 401, body: `Unauthorized: ${decision.reason}\n`, headers: BEARER_CHALLENGE };
    case 'forbidden':
      return {
        status: 403,
        body: `Forbidden: user "${decision.user}" may not ${METRICS_ACCESS.verb} ${METRICS_ACCESS.path}\n`,
        headers: {},
      };
    case 'unavailable':
      return {
        status: 503,
        body: `Service Unavailable: the scrape's credentials could not be checked (the Kubernetes API server did not answer the ${decision.review}); see the operator's log\n`,
        headers: {},
      };
  }
}

export interface ScrapeAuthorizerOptions {
  reviewer: ScrapeReviewer;
  ttls?: ScrapeCacheTtls;
  maxEntries?: number;
  clock?: Clock;
  logger?: Logger;
}

export class ScrapeAuthorizer {
  readonly #reviewer: ScrapeReviewer;
  readonly #ttls: ScrapeCacheTtls;
  readonly #secret = randomBytes(32);
  readonly #tokens: TtlCache<TokenReviewResult>;
  readonly #access: TtlCache<AccessReviewResult>;
  readonly #log: Logger | undefined;

  constructor(options: ScrapeAuthorizerOptions) {
    this.#reviewer = options.reviewer;
    this.#ttls = options.ttls ?? SCRAPE_CACHE_TTLS;
    const cache = {
      maxEntries: options.maxEntries ?? SCRAPE_CACHE_ENTRIES,
      ...(options.clock ? { clock: options.clock } : {}),
    };
    this.#tokens = new TtlCache(cache);
    this.#access = new TtlCache(cache);
    this.#log = options.logger;
  }

  /** The refusal to send for a scrape with this Authorization header, undefined to serve it. */
  async authorize(authorization: string | undefined): Promise<ScrapeRefusal | undefined> {
    return refusalFor(await this.decide(authorization));
  }

  async decide(authorization: string | undefined): Promise<ScrapeDecision> {
    const token = parseBearerToken(authorization);
    if (token === undefined)
      return {
        kind: 'unauthenticated',
        reason: 'a bearer token is required (Authorization: Bearer <token>)',
      };
    let identity: TokenReviewResult;
    try {
      identity = await this.#tokens.getOrLoad(
        tokenKey(this.#secret, token),
        () => this.#reviewer.reviewToken(token),
        (r) => (r.authenticated ? this.#ttls.authenticatedMs : this.#ttls.unauthenticatedMs),
      );
    } catch (err) {
      return this.#unavailable('TokenReview', err);
    }
    if (!identity.authenticated) {
      this.#log?.debug({ reason: identity.reason }, 'metrics scrape refused: token not authenticated');
      return { kind: 'unauthenticated', reason: 'the bearer token is not valid' };
    }
    const { user } = identity;
    let access: AccessReviewResult;
    try {
      access = await this.#access.getOrLoad(
        userKey(user),
        () => this.#reviewer.reviewAccess(user),
        (r) => (r.allowed ? this.#ttls.allowedMs : this.#ttls.deniedMs),
      );
    } catch (err) {
      return this.#unavailable('SubjectAccessReview', err);
    }
    if (!access.allowed) {
      this.#log?.debug({ user: user.username, reason: access.reason }, 'metrics scrape refused: forbidden');
      return { kind: 'forbidden', user: user.username, reason: access.reason };
    }
    return { kind: 'allowed', user: user.username };
  }

  #unavailable(review: 'TokenReview' | 'SubjectAccessReview', err: unknown): ScrapeDecision {
    const reason = describeError(err);
    this.#log?.warn({ review, err: reason }, 'metrics scrape refused: cannot check its credentials');
    return { kind: 'unavailable', review, reason };
  }
}
