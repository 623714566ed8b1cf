// `--cert-mode=selfsigned` (the default; no cert-manager needed), cert-manager's own webhook design:
//   - one CA for all replicas, kept in a Secret in the operator namespace (certs/ca-store.ts) and created
//     by whichever replica comes first; it is rotated at 2/3 of its life by whichever replica notices
//     first, the previous CA staying in the Secret (and in the caBundle) until it expires;
//   - each replica mints its own short-lived leaf for the webhook Service's DNS names and keeps it in memory
//     only; it is renewed at 2/3 of its life (decisions in certs/authority.ts);
//   - the Secret is re-read every 10 s, so a CA rotated by another replica, a deleted Secret (recreated from
//     the CA held in memory, so trust is not broken) or a Secret overwritten with junk is noticed;
//   - when the API server cannot be reached the leaf is still renewed from the CA held in memory.
// `current().ca` is the caBundle (current CA + previous CA while valid) that the leader's registration
// (webhooks/registration.ts) writes into the webhook configurations.
import { describeError } from '../src/kube/client.ts';
import type { Timer } from '../src/kube/clock.ts';
import {
  type CaState,
  caBundlePem,
  caData,
  decideCa,
  decideLeaf,
  type IssuedLeaf,
  nextChangeAt,
  parseCaData,
  rotatedState,
  signingCa,
} from './authority.ts';
import type { CaStore } from './ca-store.ts';
import { HeldCertificate, type HeldCertificateOptions } from './holder.ts';
import { DEFAULT_CA_NAME, generateCa, issueLeaf } from './issue.ts';
import type { CertificateProvider } from './provider.ts';
import { SerialRunner } from './serial.ts';
import { isExpired } from './timing.ts';

const DAY_MS = 86_400_000;

export const DEFAULT_LEAF_VALIDITY_MS = 7 * DAY_MS;
export const DEFAULT_CA_VALIDITY_MS = 365 * DAY_MS;
/** A new CA signs leaves only this long after its notBefore, once the caBundle surely holds it. */
export const DEFAULT_CA_PROPAGATION_MS = 10 * 60_000;
export const DEFAULT_CA_CHECK_INTERVAL_MS = 10_000;
/** Attempts to get a consistent CA Secret in one sync (each lost race costs one). */
const MAX_CA_ATTEMPTS = 5;

export interface SelfSignedProviderOptions extends HeldCertificateOptions {
  store: CaStore;
  /** The leaf's DNS names; the first is its CN (see serviceDnsNames). */
  dnsNames: readonly string[];
  leafValidityMs?: number;
  caValidityMs?: number;
  caName?: string;
  caPropagationMs?: number;
  /** How often the CA Secret is re-read (default 10 s). */
  checkIntervalMs?: number;
  /** Backoff after a failed sync: from `min` doubling to `max` (default 1 s to 60 s). */
  retry?: { minMs: number; maxMs: number };
}

export class SelfSignedCertificateProvider extends HeldCertificate implements CertificateProvider {
  readonly mode = 'selfsigned' as const;
  readonly #o: SelfSignedProviderOptions;
  readonly #runner = new SerialRunner(() => this.#sync());
  #ca: CaState | undefined;
  #leaf: IssuedLeaf | undefined;
  #failures = 0;
  #timer: Timer | undefined;

  constructor(options: SelfSignedProviderOptions) {
    if (options.dnsNames.length === 0) throw new Error('selfsigned certificates need at least one DNS name');
    super('selfsigned', options);
    this.#o = options;
  }

  /** Runs the first sync (CA, then leaf) and keeps both fresh in the background. */
  protected begin(): Promise<void> {
    return this.#runner.run();
  }

  /** Syncs now; resolves after a sync that started after the call. */
  refresh(): Promise<void> {
    return this.stopped ? Promise.resolve() : this.#runner.run();
  }

  protected halt(): void {
    this.clock.clearTimeout(this.#timer);
  }

  protected settle(): Promise<void> {
    return this.#runner.idle();
  }

  // ---- the sync: CA from the Secret, then the leaf, then the next wake-up ----

  async #sync(): Promise<void> {
    if (this.stopped) return;
    this.clock.clearTimeout(this.#timer);
    let ok = true;
    try {
      this.#ca = await this.#syncCa();
    } catch (err) {
      ok = false;
      this.reloadErrors?.inc();
      this.log?.warn(
        { store: this.#o.store.description, err: describeError(err), caInMemory: this.#ca !== undefined },
        'cannot sync the webhook CA; retrying',
      );
    }
    // Even when the Secret is unreachable, a CA held in memory keeps the leaf fresh.
    const state = this.#ca;
    if (state !== undefined) {
      try {
        await this.#syncLeaf(state);
      } catch (err) {
        ok = false;
        this.reloadErrors?.inc();
        this.log?.error(
          { err: describeError(err) },
          'cannot issue the webhook serving certificate; retrying',
        );
      }
    }
    this.#failures = ok ? 0 : this.#failures + 1;
    this.#schedule();
  }

  async #syncCa(): Promise<CaState> {
    const store = this.#o.store;
    for (let attempt = 0; attempt < MAX_CA_ATTEMPTS; attempt++) {
      const now = this.clock.now();
      const stored = await store.read();
      if (stored === undefined) {
        // Recreate from memory when possible: leaves and caBundles out there still trust that CA.
        const known = this.#ca !== undefined && !isExpired(this.#ca.current.info, now) ? this.#ca : undefined;
        const state = known ?? { current: await this.#newCa(now) };
        const created = await store.create(caData(state));
        if (created === 'exists') continue;
        this.log?.info(
          { store: store.description, ca: state.current.info.subject, fromMemory: known !== undefined },
          known === undefined
            ? 'created the webhook CA'
            : 'recreated the deleted webhook CA Secret from memory',
        );
        return state;
      }
      const parsed = parseCaData(stored.data, now);
      const action = decideCa(parsed, now);
      if (action.action === 'keep' && parsed.state !== undefined) {
        this.#noteCaChange(parsed.state);
        return parsed.state;
      }
      let next: CaState;
      if (action.action === 'rotate' && parsed.state !== undefined) {
        next = rotatedState(parsed.state, await this.#newCa(now));
      } else {
        const known = this.#ca !== undefined && !isExpired(this.#ca.current.info, now) ? this.#ca : undefined;
        next = known ?? { current: await this.#newCa(now) };
        this.log?.warn(
          {
            store: store.description,
            reason: action.action === 'replace' ? action.reason : 'unusable',
            fromMemory: known !== undefined,
          },
          'the webhook CA Secret is unusable; replacing it',
        );
      }
      const written = await store.replace(caData(next), stored.resourceVersion);
      if (written === 'conflict') continue;
      if (action.action === 'rotate') {
        this.log?.info(
          { store: store.description, ca: next.current.info.subject, previous: next.previous?.info.subject },
          'rotated the webhook CA; the previous CA stays trusted until it expires',
        );
      }
      return next;
    }
    throw new Error(`${store.description} kept changing under us (${MAX_CA_ATTEMPTS} attempts)`);
  }

  #noteCaChange(state: CaState): void {
    const before = this.#ca?.current.info.fingerprint;
    if (before !== undefined && before !== state.current.info.fingerprint) {
      this.log?.info(
        { store: this.#o.store.description, ca: state.current.info.subject },
        'the webhook CA changed in the Secret',
      );
    }
  }

  #newCa(now: number): ReturnType<typeof generateCa> {
    return generateCa({
      now,
      validityMs: this.#o.caValidityMs ?? DEFAULT_CA_VALIDITY_MS,
      name: this.#o.caName ?? DEFAULT_CA_NAME,
    });
  }

  async #syncLeaf(state: CaState): Promise<void> {
    const now = this.clock.now();
    const decision = decideLeaf(this.#leaf, state, now, this.#o.dnsNames);
    if (decision.action === 'issue') {
      const signer = signingCa(state, now, this.#o.caPropagationMs ?? DEFAULT_CA_PROPAGATION_MS);
      const leaf = await issueLeaf(signer, {
        now,
        validityMs: this.#o.leafValidityMs ?? DEFAULT_LEAF_VALIDITY_MS,
        dnsNames: this.#o.dnsNames,
      });
      this.#leaf = leaf;
      this.log?.info(
        {
          reason: decision.reason,
          serialNumber: leaf.info.serialNumber,
          notAfter: leaf.info.notAfter.toISOString(),
          issuer: signer.info.subject,
        },
        'issued the webhook serving certificate',
      );
    }
    const leaf = this.#leaf;
    if (leaf === undefined) return;
    this.holder.set(
      { cert: leaf.cert, key: leaf.key, ca: caBundlePem(state, this.clock.now()) },
      leaf.info.notAfter,
    );
  }

  #schedule(): void {
    if (this.stopped) return;
    const now = this.clock.now();
    const retry = this.#o.retry ?? { minMs: 1_000, maxMs: 60_000 };
    let delay = this.#o.checkIntervalMs ?? DEFAULT_CA_CHECK_INTERVAL_MS;
    if (this.#failures > 0) {
      delay = Math.min(delay, retry.maxMs, retry.minMs * 2 ** (this.#failures - 1));
    } else if (this.#ca !== undefined && this.#leaf !== undefined) {
      delay = Math.min(delay, nextChangeAt(this.#ca, this.#leaf, now) - now);
    }
    // Never a busy loop; always finite (an infinite check interval means "only when something is due").
    delay = Math.max(Number.isFinite(delay) ? delay : DAY_MS, retry.minMs);
    this.#timer = this.clock.setTimeout(() => void this.#runner.run(), delay);
  }
}
