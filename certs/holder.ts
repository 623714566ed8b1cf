// What every certificate provider shares: the pair being served, its expiry, change listeners and the
// waiters of waitForCertificate (CertificateHolder; listeners run after the new pair is visible and can
// never break the provider), and the provider's life (HeldCertificate: its logger, clock and metrics,
// starting once, stopping once).
import type { Counter, Registry } from 'prom-client';
import { type Clock, realClock } from '../src/kube/clock.ts';
import type { Logger } from '../src/observability/logger.ts';
import { registerExpirySource, reloadErrorsCounter } from './metrics.ts';
import type { CertificateListener, CertMode, ServingCertificate } from './provider.ts';

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

/** What every provider takes besides its own options. */
export interface HeldCertificateOptions {
  clock?: Clock;
  logger?: Logger;
  /**
   * Where the provider counts its failures (`berth_webhook_certificate_reload_errors_total`) and reports
   * its expiry (`berth_webhook_certificate_expiry_seconds`); without one it has no metrics.
   */
  registry?: Registry;
}

/**
 * A CertificateProvider's common part: the read side it serves from its CertificateHolder (the pair to
 * serve, waiting for the first one, change listeners, expiry), its logger, clock and metrics, and its life:
 * `start` runs `begin` once (an aborted or aborting signal stops it), `stop` runs `halt` once and then
 * waits for `settle`. A provider extends it, implements those three and sets `holder`'s pairs.
 */
export abstract class HeldCertificate {
  abstract readonly mode: CertMode;
  protected readonly holder: CertificateHolder;
  protected readonly clock: Clock;
  protected readonly log: Logger | undefined;
  /** Counts a failed load, issue or refresh; undefined without a registry. */
  protected readonly reloadErrors: Counter | undefined;
  readonly #unregisterExpiry: () => void;
  #started = false;
  #stopped = false;

  constructor(mode: CertMode, options: HeldCertificateOptions) {
    this.log = options.logger?.child({ component: 'certificates', certMode: mode });
    this.holder = new CertificateHolder(this.log);
    this.clock = options.clock ?? realClock;
    const registry = options.registry;
    this.reloadErrors = registry === undefined ? undefined : reloadErrorsCounter(registry);
    this.#unregisterExpiry =
      registry === undefined
        ? () => {}
        : registerExpirySource(registry, () => {
            const expiry = this.holder.expiry();
            return expiry === undefined ? undefined : (expiry.getTime() - this.clock.now()) / 1000;
          });
  }

  /** True once `stop` was called. */
  protected get stopped(): boolean {
    return this.#stopped;
  }

  /** Begins (once) and keeps the pair fresh in the background; aborting `signal` stops. Never throws. */
  async start(signal?: AbortSignal): Promise<void> {
    if (this.#started) return;
    this.#started = true;
    if (signal?.aborted) {
      await this.stop();
      return;
    }
    signal?.addEventListener('abort', () => void this.stop(), { once: true });
    await this.begin();
  }

  /** Cancels timers and watchers, then waits for in-flight work; `current()` stays readable. */
  async stop(): Promise<void> {
    if (!this.#stopped) {
      this.#stopped = true;
      this.#unregisterExpiry();
      this.halt();
    }
    await this.settle();
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

  /** The first load or issue, and the background work that keeps the pair fresh. */
  protected abstract begin(): Promise<void>;
  /** Cancels the background work (called once, on stop). */
  protected abstract halt(): void;
  /** Resolves once no work is in flight. */
  protected abstract settle(): Promise<void>;
}
