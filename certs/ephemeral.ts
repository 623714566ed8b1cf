// A serving certificate that lives in memory only, as controller-runtime's metrics server generates one
// when it is given no certificate directory: a CA of its own signs a leaf, both new on every start and
// renewed at 2/3 of their life. Nothing outside the process trusts (or can trust) it, so clients either
// skip verification or are given a certificate directory instead (`--metrics-cert-dir`, certs/files.ts).
import type { Timer } from '../src/kube/clock.ts';
import { HeldCertificate, type HeldCertificateOptions } from './holder.ts';
import { generateCa, issueLeaf } from './issue.ts';
import type { CertificateProvider } from './provider.ts';
import { renewalTime } from './timing.ts';

/** As the webhook leaves (`--cert-leaf-validity`): the key never leaves the process anyway. */
export const EPHEMERAL_VALIDITY_MS = 7 * 86_400_000;
const RETRY_MS = 60_000;

export interface EphemeralProviderOptions extends Omit<HeldCertificateOptions, 'registry'> {
  /** The leaf's DNS names; the first is its CN. */
  dnsNames: readonly string[];
  /** Subject CN prefix of the CA. */
  caName: string;
  validityMs?: number;
}

export class EphemeralCertificateProvider extends HeldCertificate implements CertificateProvider {
  readonly mode = 'ephemeral' as const;
  readonly #o: EphemeralProviderOptions;
  #timer: Timer | undefined;
  #issuing: Promise<void> | undefined;

  constructor(options: EphemeralProviderOptions) {
    super('ephemeral', options);
    this.#o = options;
  }

  /** Issues the first pair and keeps renewing it (a failure is logged and retried). */
  protected begin(): Promise<void> {
    return this.#issue();
  }

  protected halt(): void {
    this.clock.clearTimeout(this.#timer);
  }

  protected async settle(): Promise<void> {
    await this.#issuing;
  }

  #issue(): Promise<void> {
    this.#issuing = (async () => {
      if (this.stopped) return;
      const now = this.clock.now();
      const validityMs = this.#o.validityMs ?? EPHEMERAL_VALIDITY_MS;
      let next = now + RETRY_MS;
      try {
        const ca = await generateCa({ now, validityMs, name: this.#o.caName });
        const leaf = await issueLeaf(ca, { now, validityMs, dnsNames: this.#o.dnsNames });
        this.holder.set({ cert: leaf.cert, key: leaf.key, ca: ca.cert }, leaf.info.notAfter);
        next = renewalTime(leaf.info);
        this.log?.info(
          { dnsNames: leaf.info.dnsNames, notAfter: leaf.info.notAfter.toISOString() },
          'generated a self-signed serving certificate in memory',
        );
      } catch (err) {
        this.log?.error(
          { err: err instanceof Error ? err.message : String(err) },
          'cannot generate the self-signed serving certificate; retrying',
        );
      }
      if (!this.stopped)
        this.#timer = this.clock.setTimeout(() => void this.#issue(), next - this.clock.now());
    })();
    return this.#issuing;
  }
}
