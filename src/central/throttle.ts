// Client-side request rate limit of the Kubernetes lease store (client-go's token-bucket
// `--kube-api-qps/--kube-api-burst`, here `--coordination-qps/--coordination-burst`): each request
// reserves a token and waits for it on the injected clock. qps 0 disables the limit.
import { type Clock, realClock } from '../kube/clock.ts';
import { reserveToken, type TokenBucketState } from '../kube/ratelimit.ts';

export class RequestThrottle {
  readonly #qps: number;
  readonly #burst: number;
  readonly #clock: Clock;
  #state: TokenBucketState | undefined;
  /** Total time callers were made to wait, in ms (observability and tests). */
  waitedMs = 0;

  constructor(qps: number, burst: number, clock: Clock = realClock) {
    if (!(qps >= 0) || !Number.isFinite(qps)) throw new Error(`qps must be a finite number >= 0, got ${qps}`);
    if (qps > 0 && !(burst >= 1)) throw new Error(`burst must be at least 1, got ${burst}`);
    this.#qps = qps;
    this.#burst = burst;
    this.#clock = clock;
  }

  /** Delay (ms) the next request must wait; reserves its token. */
  reserve(): number {
    if (this.#qps === 0) return 0;
    const { state, delayMs } = reserveToken(this.#state, this.#clock.now(), this.#qps, this.#burst);
    this.#state = state;
    return delayMs;
  }

  /** Resolves when the caller may send its request. */
  async wait(signal?: AbortSignal): Promise<void> {
    const delay = this.reserve();
    if (delay <= 0) return;
    this.waitedMs += delay;
    await this.#clock.sleep(delay, signal);
  }
}
