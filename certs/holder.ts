// The state both providers share: the pair being served, its expiry, change listeners and the waiters of
// waitForCertificate. Listeners run after the new pair is visible and can never break the provider.
import type { Logger } from '../src/observability/logger.ts';
import type { CertificateListener, ServingCertificate } from './provider.ts';

export class CertificateHolder {
  #current: ServingCertificate | undefined;
  #expiry: Date | undefined;
  readonly #listeners = new Set<CertificateListener>();
  #waiters: Array<() => void> = [];
  readonly #logger: Logger | undefined;

  constructor(logger?: Logger) {
    this.#logger = logger;
  }

  current(): ServingCertificate | undefined {
    return this.#current;
  }

  expiry(): Date | undefined {
    return this.#expiry;
  }

  /** Serves `pair` from now on; false (and no notification) when nothing changed. */
  set(pair: ServingCertificate, expiry: Date): boolean {
    const old = this.#current;
    this.#expiry = expiry;
    if (old !== undefined && old.cert === pair.cert && old.key === pair.key && old.ca === pair.ca)
      return false;
    this.#current = Object.freeze({ ...pair });
    for (const wake of this.#waiters.splice(0)) wake();
    for (const listener of [...this.#listeners]) {
      try {
        listener(this.#current);
      } catch (err) {
        this.#logger?.error(
          { err: err instanceof Error ? err.message : String(err) },
          'certificate change listener threw',
        );
      }
    }
    return true;
  }

  onChange(listener: CertificateListener): () => void {
    this.#listeners.add(listener);
    return () => {
      this.#listeners.delete(listener);
    };
  }

  waitFor(signal?: AbortSignal): Promise<void> {
    if (this.#current !== undefined) return Promise.resolve();
    if (signal?.aborted) return Promise.reject(signal.reason);
    return new Promise<void>((resolve, reject) => {
      const onAbort = (): void => {
        this.#waiters = this.#waiters.filter((w) => w !== wake);
        reject(signal?.reason);
      };
      const wake = (): void => {
        signal?.removeEventListener('abort', onAbort);
        resolve();
      };
      this.#waiters.push(wake);
      signal?.addEventListener('abort', onAbort, { once: true });
    });
  }
}

/**
 * The read side every CertificateProvider serves from its CertificateHolder (the pair to serve, waiting
 * for the first one, change listeners, expiry): a provider extends it and sets `holder`'s pairs.
 */
export abstract class HeldCertificate {
  protected readonly holder: CertificateHolder;

  constructor(logger?: Logger) {
    this.holder = new CertificateHolder(logger);
  }

  current(): ServingCertificate | undefined {
    return this.holder.current();
  }

  waitForCertificate(signal?: AbortSignal): Promise<void> {
    return this.holder.waitFor(signal);
  }

  onChange(listener: CertificateListener): () => void {
    return this.holder.onChange(listener);
  }

  expiry(): Date | undefined {
    return this.holder.expiry();
  }
}
