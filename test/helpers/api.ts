// Tests' use of client-node's typed clients: assertions on API errors as it reports them (ApiException
// carries the raw Status body), patch content types, and per-call options sharing one connection pool.
import {
  ApiException,
  type ConfigurationOptions,
  Observable,
  PatchStrategy,
  type RequestContext,
  type ResponseContext,
  setHeaderOptions,
} from '@kubernetes/client-node';
import type { DispatcherReuse } from '../../src/kube/transport.ts';

export interface ApiOutcome {
  /** HTTP status; 200 for any success, -1 when the request failed without an HTTP answer. */
  code: number;
  reason?: string;
  message?: string;
  causes: { field: string; message: string; reason: string }[];
  headers: Record<string, string>;
}

/** Settles `p` and describes how it ended, for tests that expect either outcome. */
export async function apiOutcome(p: Promise<unknown>): Promise<ApiOutcome> {
  try {
    await p;
    return { code: 200, causes: [], headers: {} };
  } catch (err) {
    if (!(err instanceof ApiException)) return { code: -1, message: String(err), causes: [], headers: {} };
    const status =
      typeof err.body === 'string' && err.body.startsWith('{')
        ? (JSON.parse(err.body) as {
            reason?: string;
            message?: string;
            details?: { causes?: ApiOutcome['causes'] };
          })
        : {};
    return {
      code: err.code,
      reason: status.reason,
      message: status.message,
      causes: status.details?.causes ?? [],
      headers: err.headers,
    };
  }
}

/** The Status of a request that must fail with an HTTP error. */
export async function apiFailure(p: Promise<unknown>): Promise<ApiOutcome & { message: string }> {
  const outcome = await apiOutcome(p);
  if (outcome.code === 200) throw new Error('expected the request to fail');
  if (outcome.code === -1) throw new Error(`expected an HTTP error, got: ${outcome.message}`);
  return { ...outcome, message: outcome.message ?? '' };
}

export const mergePatch = setHeaderOptions('Content-Type', PatchStrategy.MergePatch);
export const jsonPatch = setHeaderOptions('Content-Type', PatchStrategy.JsonPatch);
export const strategicPatch = setHeaderOptions('Content-Type', PatchStrategy.StrategicMergePatch);

/**
 * Per-call options for client-node's typed APIs (`api.readNamespacedLease(params, options)`): calls
 * given the same `pool` share its connections instead of opening one each, and `signal` (if any) aborts
 * the request. Keep one pool per API client, e.g. `const opts = typedRequestOptions({ pool })`.
 */
export function typedRequestOptions(options: {
  pool: DispatcherReuse;
  signal?: AbortSignal;
}): ConfigurationOptions {
  const { pool, signal } = options;
  return {
    middleware: [
      {
        pre: (ctx: RequestContext) => {
          pool.apply(ctx);
          if (signal !== undefined) ctx.setSignal(signal);
          return new Observable(Promise.resolve(ctx));
        },
        post: (res: ResponseContext) => new Observable(Promise.resolve(res)),
      },
    ],
    middlewareMergeStrategy: 'append',
  };
}
