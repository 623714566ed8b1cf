// The serving-certificate provider: the one interface the admission server consumes, whatever the source
// of the certificate (`--cert-mode`):
//   - `selfsigned` (default): a CA shared by all replicas through a Secret, a per-replica leaf in memory
//     (certs/selfsigned.ts); the leader writes its CA bundle into the webhook configurations
//     (webhooks/registration.ts);
//   - `files`: `tls.crt`/`tls.key` in `--cert-dir` (cert-manager or any Secret mount), hot-reloaded
//     (certs/files.ts).
// The secure metrics server (`--metrics-secure`) uses `files` (`--metrics-cert-dir`) or `ephemeral`, a
// self-signed pair in memory (certs/ephemeral.ts).
//
// Contract:
//   - `start(signal)` begins loading/issuing and keeps the pair fresh in the background; it never throws
//     for a transient failure (those are logged, counted in
//     `berth_webhook_certificate_reload_errors_total` and retried). Aborting `signal` stops the provider.
//   - `waitForCertificate(signal)` resolves once a valid pair is loaded (at once if one already is).
//   - `current()` is the pair to serve now, or undefined before the first valid one. A pair is only ever
//     replaced by another valid pair: a bad read keeps the old one.
//   - `onChange(listener)` is called, after `current()` already returns the new value, whenever `cert`,
//     `key` or `ca` change. Listeners must not throw (a throw is caught and logged). Returns unsubscribe.
//   - `expiry()` is the serving certificate's notAfter.
//   - `stop()` cancels timers and watchers and waits for in-flight work; `current()` stays readable.
//
// How a server serves with it, without restarts: wait for the first pair, create the TLS server with it,
// and on every `onChange` call `server.setSecureContext({ ...tlsOptions, key, cert })`: new connections
// get the new pair, open keep-alive connections keep the old one (valid, and its CA is still in the
// caBundle). setSecureContext rebuilds the whole context, so options such as `minVersion` must be passed
// again each time. The two servers of the operator do this:
//   - the admission server (webhooks/server.ts) subscribes itself, so that a pair that fails to load is
//     counted in `berth_webhook_certificate_reload_errors_total` while the previous one keeps serving;
//   - the `--metrics-secure` listener (src/secure-metrics.ts) uses `attachToTlsServer(provider, server,
//     tlsOptions, logger)` (certs/tls-server.ts), detached when the server closes.
//
// Readiness: `certificateReadinessCheck(provider)` (certs/readiness.ts) fails until a valid pair is loaded
// and once the served one has expired.

export type CertMode = 'selfsigned' | 'files' | 'ephemeral';

export interface ServingCertificate {
  /** PEM: the leaf first, then any intermediates. */
  readonly cert: string;
  /** PEM private key of the leaf. Never log it. */
  readonly key: string;
  /**
   * PEM bundle of the CAs clients should trust: in `selfsigned` mode the current CA followed by the previous
   * one while it is still valid (what `caBundle` must hold); in `files` mode `ca.crt` when the directory
   * has one.
   */
  readonly ca?: string;
}

export type CertificateListener = (pair: ServingCertificate) => void;

export interface CertificateProvider {
  readonly mode: CertMode;
  start(signal?: AbortSignal): Promise<void>;
  current(): ServingCertificate | undefined;
  waitForCertificate(signal?: AbortSignal): Promise<void>;
  onChange(listener: CertificateListener): () => void;
  expiry(): Date | undefined;
  stop(): Promise<void>;
}
