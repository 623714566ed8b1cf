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
