// Assertions on API errors as client-node reports them: ApiException carries the raw Status body.
import { ApiException, PatchStrategy, setHeaderOptions } from '@kubernetes/client-node';

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
