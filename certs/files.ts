// `--cert-mode=files`: serve `tls.crt`/`tls.key` from a directory (a cert-manager Certificate's Secret, or
// any Secret, mounted as a volume) and pick up new ones without a restart, like controller-runtime's
// CertWatcher: the directory is watched *and* re-read every 10 s, because the kubelet updates a Secret
// volume by swapping the `..data` symlink, which a watcher can miss. Every read is checked (parses, key
// matches, not expired) before it is served; a bad read keeps the current pair and counts an error.
// `ca.crt`, when present (cert-manager writes one), is offered as `current().ca`.
import { type FSWatcher, watch } from 'node:fs';
import { readFile } from 'node:fs/promises';
import { join } from 'node:path';
import type { Timer } from '../src/kube/clock.ts';
import { HeldCertificate, type HeldCertificateOptions } from './holder.ts';
import { checkServingPair, parseCertificate } from './pair.ts';
import type { CertificateProvider } from './provider.ts';
import { SerialRunner } from './serial.ts';

export const DEFAULT_CERT_DIR = '/tmp/k8s-webhook-server/serving-certs';
export const DEFAULT_POLL_INTERVAL_MS = 10_000;

export interface FilesProviderOptions extends HeldCertificateOptions {
  dir: string;
  certFile?: string;
  keyFile?: string;
  caFile?: string;
  /** Re-read interval besides the watch (default 10 s). */
  pollIntervalMs?: number;
  /** Quiet time after a watch event before reading, so a multi-step swap is read once (default 100 ms). */
  debounceMs?: number;
  /** Watch the directory (default true); without it only the poll picks changes up. */
  watch?: boolean;
}

function errorCode(err: unknown): string {
  const code = (err as { code?: unknown } | null)?.code;
  return typeof code === 'string' ? code : err instanceof Error ? err.name : 'error';
}

async function readOptional(path: string): Promise<string | undefined> {
  try {
    return await readFile(path, 'utf8');
  } catch (err) {
    if (errorCode(err) === 'ENOENT') return undefined;
    throw err;
  }
}

export class FilesCertificateProvider extends HeldCertificate implements CertificateProvider {
  readonly mode = 'files' as const;
  readonly #o: FilesProviderOptions;
  readonly #runner = new SerialRunner(() => this.#load());
  readonly #certFile: string;
  readonly #keyFile: string;
  readonly #caFile: string;
  #watcher: FSWatcher | undefined;
  #poll: Timer | undefined;
  #debounce: Timer | undefined;
  #lastProblem: string | undefined;

  constructor(options: FilesProviderOptions) {
    super('files', options);
    this.#o = options;
    this.#certFile = options.certFile ?? 'tls.crt';
    this.#keyFile = options.keyFile ?? 'tls.key';
    this.#caFile = options.caFile ?? 'ca.crt';
  }

  /** Loads the pair once and starts watching and polling. */
  protected async begin(): Promise<void> {
    this.#ensureWatcher();
    this.#poll = this.clock.setInterval(() => {
      this.#ensureWatcher();
      void this.#runner.run();
    }, this.#o.pollIntervalMs ?? DEFAULT_POLL_INTERVAL_MS);
    await this.#runner.run();
  }

  /** Re-reads the files now; resolves after a read that started after the call. */
  refresh(): Promise<void> {
    return this.stopped ? Promise.resolve() : this.#runner.run();
  }

  protected halt(): void {
    this.clock.clearTimeout(this.#poll);
    this.clock.clearTimeout(this.#debounce);
    this.#watcher?.close();
    this.#watcher = undefined;
  }

  protected settle(): Promise<void> {
    return this.#runner.idle();
  }

  #ensureWatcher(): void {
    if (this.stopped || this.#watcher !== undefined || this.#o.watch === false) return;
    try {
      const watcher = watch(this.#o.dir, { persistent: false }, () => this.#scheduleRead());
      watcher.on('error', (err) => {
        this.log?.debug(
          { dir: this.#o.dir, code: errorCode(err) },
          'certificate directory watch failed; polling',
        );
        watcher.close();
        if (this.#watcher === watcher) this.#watcher = undefined;
      });
      this.#watcher = watcher;
    } catch (err) {
      // The directory may not exist yet; the poll retries the watch.
      this.log?.debug(
        { dir: this.#o.dir, code: errorCode(err) },
        'cannot watch the certificate directory; polling',
      );
    }
  }

  #scheduleRead(): void {
    if (this.stopped) return;
    this.clock.clearTimeout(this.#debounce);
    this.#debounce = this.clock.setTimeout(() => {
      this.#debounce = undefined;
      void this.#runner.run();
    }, this.#o.debounceMs ?? 100);
  }

  async #load(): Promise<void> {
    if (this.stopped) return;
    const dir = this.#o.dir;
    let cert: string;
    let key: string;
    let ca: string | undefined;
    try {
      [cert, key, ca] = await Promise.all([
        readFile(join(dir, this.#certFile), 'utf8'),
        readFile(join(dir, this.#keyFile), 'utf8'),
        readOptional(join(dir, this.#caFile)),
      ]);
    } catch (err) {
      this.#reject(`cannot read ${dir}: ${errorCode(err)}`);
      return;
    }
    const current = this.holder.current();
    if (current !== undefined && current.cert === cert && current.key === key && current.ca === ca) {
      this.#lastProblem = undefined;
      return;
    }
    const checked = checkServingPair(cert, key, this.clock.now(), {
      certName: this.#certFile,
      keyName: this.#keyFile,
    });
    if (!checked.ok) {
      this.#reject(checked.reason);
      return;
    }
    if (ca !== undefined && !parseCertificate(ca, this.#caFile).ok) {
      this.log?.warn({ dir, file: this.#caFile }, 'ignoring an unparsable CA file');
      ca = undefined;
    }
    this.#lastProblem = undefined;
    const info = checked.value;
    if (this.holder.set(ca === undefined ? { cert, key } : { cert, key, ca }, info.notAfter)) {
      this.log?.info(
        {
          dir,
          subject: info.subject,
          serialNumber: info.serialNumber,
          fingerprint: info.fingerprint,
          dnsNames: info.dnsNames,
          notAfter: info.notAfter.toISOString(),
        },
        'serving certificate loaded',
      );
    }
  }

  #reject(reason: string): void {
    this.reloadErrors?.inc();
    const keeping = this.holder.current() !== undefined;
    // Log a persisting problem once, not on every poll.
    if (reason !== this.#lastProblem) {
      this.log?.warn(
        { dir: this.#o.dir, reason, keepingCurrent: keeping },
        keeping
          ? 'rejected the serving certificate files; keeping the current pair'
          : 'no usable serving certificate in the directory yet',
      );
    }
    this.#lastProblem = reason;
  }
}
