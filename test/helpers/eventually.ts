// Bounded polling for tests: never a fixed sleep, always a deadline with the last failure reported.

export interface EventuallyOptions {
  timeoutMs?: number;
  intervalMs?: number;
}

/** Retries `probe` until it stops throwing (or returns a truthy value) or the deadline passes. */
export async function eventually<T>(probe: () => T | Promise<T>, opts: EventuallyOptions = {}): Promise<T> {
  const deadline = Date.now() + (opts.timeoutMs ?? 10_000);
  const interval = opts.intervalMs ?? 20;
  let lastError: unknown;
  for (;;) {
    try {
      const value = await probe();
      if (value !== false && value !== undefined && value !== null) return value;
      lastError = new Error(`condition returned ${String(value)}`);
    } catch (err) {
      lastError = err;
    }
    if (Date.now() >= deadline) {
      const detail = lastError instanceof Error ? lastError.message : String(lastError);
      throw new Error(`eventually: deadline passed: ${detail}`);
    }
    await new Promise((resolve) => setTimeout(resolve, interval));
  }
}
