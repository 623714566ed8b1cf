// Delegated authentication and authorization, as kube-apiserver's delegating authenticator and
// authorizer do it: a bearer token is checked with a TokenReview (authentication.k8s.io/v1), and what
// the user it belongs to may do with a SubjectAccessReview (authorization.k8s.io/v1). Both are `create`s
// on virtual resources (nothing is stored). A rejected review rejects (KubeApiError, network or timeout
// errors): the caller decides what an unanswered review means. The token is only ever sent in the body.
import { z } from 'zod';
import { readJson } from './client.ts';
import type { KubeRequester } from './transport.ts';

/** Who a token belongs to, as the API server reports it (and as a SubjectAccessReview names it). */
export interface UserInfo {
  username: string;
  uid?: string;
  groups: string[];
  extra?: Record<string, string[]>;
}

export type TokenReviewResult =
  | { authenticated: true; user: UserInfo }
  | { authenticated: false; reason: string };

export type AccessReviewResult = { allowed: boolean; reason: string };

/** A request for a path that is not an API resource, e.g. `get` on `/metrics`. */
export interface NonResourceAttributes {
  path: string;
  verb: string;
}

const tokenReviewSchema = z.object({
  status: z
    .object({
      authenticated: z.boolean().optional(),
      user: z
        .object({
          username: z.string().optional(),
          uid: z.string().optional(),
          groups: z.array(z.string()).optional(),
          extra: z.record(z.string(), z.array(z.string())).optional(),
        })
        .optional(),
      error: z.string().optional(),
    })
    .optional(),
});

const accessReviewSchema = z.object({
  status: z
    .object({
      allowed: z.boolean().optional(),
      reason: z.string().optional(),
      evaluationError: z.string().optional(),
    })
    .optional(),
});

/** Whom `token` authenticates, for the API server's own audiences. */
export async function reviewToken(requester: KubeRequester, token: string): Promise<TokenReviewResult> {
  const res = await requester.request({
    method: 'POST',
    path: '/apis/authentication.k8s.io/v1/tokenreviews',
    body: { apiVersion: 'authentication.k8s.io/v1', kind: 'TokenReview', spec: { token } },
  });
  const status = tokenReviewSchema.parse(await readJson(res)).status;
  const user = status?.user;
  if (status?.authenticated !== true || !user?.username)
    return { authenticated: false, reason: status?.error || 'the token is not valid' };
  return {
    authenticated: true,
    user: {
      username: user.username,
      ...(user.uid ? { uid: user.uid } : {}),
      groups: user.groups ?? [],
      ...(user.extra ? { extra: user.extra } : {}),
    },
  };
}

/** Whether `user` may do `attributes`; no opinion (neither allowed nor denied) counts as denied. */
export async function reviewNonResourceAccess(
  requester: KubeRequester,
  user: UserInfo,
  attributes: NonResourceAttributes,
): Promise<AccessReviewResult> {
  const res = await requester.request({
    method: 'POST',
    path: '/apis/authorization.k8s.io/v1/subjectaccessreviews',
    body: {
      apiVersion: 'authorization.k8s.io/v1',
      kind: 'SubjectAccessReview',
      spec: {
        user: user.username,
        ...(user.uid ? { uid: user.uid } : {}),
        groups: user.groups,
        ...(user.extra ? { extra: user.extra } : {}),
        nonResourceAttributes: attributes,
      },
    },
  });
  const status = accessReviewSchema.parse(await readJson(res)).status;
  return {
    allowed: status?.allowed === true,
    reason: status?.reason || status?.evaluationError || '',
  };
}
