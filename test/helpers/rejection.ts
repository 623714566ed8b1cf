// The message of a rejected API call, as kubectl prints it: the Status message of the response body, else
// the body, else the error's message. Tests compare it with the exact texts of the admission denials.

/** The message of an error thrown by a client-node call. */
export function errorMessage(err: unknown): string {
  const body = (err as { body?: unknown }).body;
  if (typeof body === 'string') {
    try {
      return (JSON.parse(body) as { message?: string }).message ?? body;
    } catch {
      return body;
    }
  }
  return err instanceof Error ? err.message : String(err);
}

/** Awaits a call that must be rejected and returns its message; throws if it succeeds. */
export async function rejection(call: Promise<unknown>): Promise<string> {
  try {
    await call;
  } catch (err) {
    return errorMessage(err);
  }
  throw new Error('the call was not rejected');
}

/**
 * Whether a rejection only says "not yet": the opt-in scope admits a BerthLease with a target once the
 * serving replica has seen its namespace in scope for the settle period (after a replica's start too), and
 * asks to retry until then (webhooks/scope.ts).
 */
export const settling = (message: string): boolean =>
  message.includes('entered the workload admission scope moments ago') ||
  message.includes('the namespaces of the workload admission scope are not known yet');

/** Runs `create` until it is not refused as settling (as a GitOps tool retries), within `timeoutMs`. */
export async function whenSettled<T>(create: () => Promise<T>, timeoutMs = 20_000): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    try {
      return await create();
    } catch (err) {
      if (!settling(errorMessage(err)) || Date.now() > deadline) throw err;
      await new Promise((resolve) => setTimeout(resolve, 200));
    }
  }
}
