// /readyz of the central server: the store probe behind a single-flight cache, so a storm of readiness
// requests causes at most one backend probe per TTL (docs/behaviour.md §3.3).
import { type Clock, realClock } from '../kube/clock.ts';

export const READY_CACHE_TTL_MS = 1_000;
export const READY_PROBE_TIMEOUT_MS = 2_000;

export interface CachedProbeOptions {
  probe: (signal: AbortSignal) => Promise<void>;
  clock?: Clock;
  ttlMs?: number;
  timeoutMs?: number;
}

export class CachedProbe {
  readonly #probe: (signal: AbortSignal) => Promise<void>;
  readonly #clock: Clock;
  readonly #ttlMs: number;
  readonly #timeoutMs: number;
  #last: { at: number; ok: boolean } | undefined;
  #inflight: Promise<boolean> | undefined;

  constructor(options: CachedProbeOptions) {
    this.#probe = options.probe;
    this.#clock = options.clock ?? realClock;
    this.#ttlMs = options.ttlMs ?? READY_CACHE_TTL_MS;
    this.#timeoutMs = options.timeoutMs ?? READY_PROBE_TIMEOUT_MS;
  }

  /** True when the last probe (at most ttl old) succeeded; joins a probe already running. */
  check(): Promise<boolean> {
    const last = this.#last;
    if (last !== undefined && this.#clock.now() - last.at < this.#ttlMs) return Promise.resolve(last.ok);
    this.#inflight ??= this.#run().finally(() => {
      this.#inflight = undefined;
    });
    return this.#inflight;
  }

  async #run(): Promise<boolean> {
    const controller = new AbortController();
    const timer = this.#clock.setTimeout(
      () => controller.abort(new Error(`store probe timed out after ${this.#timeoutMs}ms`)),
      this.#timeoutMs,
    );
    let ok: boolean;
    try {
      await Promise.race([
        this.#probe(controller.signal),
        new Promise<never>((_, reject) => {
          controller.signal.addEventListener('abort', () => reject(controller.signal.reason), { once: true });
        }),
      ]);
      ok = true;
    } catch {
      ok = false;
    } finally {
      timer.cancel();
    }
    this.#last = { at: this.#clock.now(), ok };
    return ok;
  }
}
