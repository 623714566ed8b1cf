// The leader-only caBundle reconciler (`selfsigned` mode): keeps `clientConfig.caBundle` of every webhook in
// the operator's MutatingWebhookConfiguration and ValidatingWebhookConfiguration equal to the provider's CA
// bundle (current CA + previous CA during a rotation), and puts it back when someone wipes or changes it
// (`kubectl apply` of the raw manifests, a Helm upgrade, a hand edit), like OPA cert-controller.
//
// Triggers: a watch on each configuration (scoped to its name), every change of the provider's bundle,
// and a periodic resync (default 60 s) that reads the live object. Every read that leads to a write is a
// direct GET (never a possibly stale cache), and every write is a merge patch carrying the resourceVersion
// that was read, so it cannot overwrite a concurrent change; a 409 re-reads and retries (bounded), then the
// key is requeued with backoff. The configurations themselves are created by the deploy manifests; a
// missing one is waited for, not created.
//
// RBAC: get/list/watch/patch on both kinds, restricted by resourceNames (list/watch are scoped with a
// metadata.name field selector, which kube-apiserver authorizes against resourceNames).
import {
  AdmissionregistrationV1Api,
  type KubeConfig,
  type V1MutatingWebhook,
  type V1MutatingWebhookConfiguration,
  type V1ValidatingWebhook,
  type V1ValidatingWebhookConfiguration,
} from '@kubernetes/client-node';
import type { Counter, Registry } from 'prom-client';
import {
  DispatcherReuse,
  isConflict,
  isNotFound,
  KubeTransport,
  mergePatchOptions,
  typedRequestOptions,
} from '../src/kube/client.ts';
import type { Clock } from '../src/kube/clock.ts';
import { Controller, type ReconcileContext, type ReconcileResult } from '../src/kube/controller.ts';
import { Informer } from '../src/kube/informer.ts';
import type { Logger } from '../src/observability/logger.ts';
import { getOrCreateCounter } from '../src/observability/metrics.ts';
import { toCaBundleField } from './pem.ts';
import type { CertificateProvider } from './provider.ts';

export const DEFAULT_CABUNDLE_RESYNC_MS = 60_000;
const MAX_CONFLICT_RETRIES = 5;
const GROUP = 'admissionregistration.k8s.io';

type Webhook = V1MutatingWebhook | V1ValidatingWebhook;
type WebhookConfiguration = V1MutatingWebhookConfiguration | V1ValidatingWebhookConfiguration;

/** Why a configuration's caBundles need a write, or undefined when every webhook already has `want`. */
export function caBundleDrift(
  webhooks: readonly Webhook[],
  want: string,
): 'missing' | 'different' | undefined {
  let drift: 'missing' | 'different' | undefined;
  for (const webhook of webhooks) {
    const have = webhook.clientConfig?.caBundle;
    if (have === undefined || have === '') return 'missing';
    if (have !== want) drift = 'different';
  }
  return drift;
}

/** `webhooks` with every caBundle set to `want`; everything else untouched. */
export function withCaBundle<W extends Webhook>(webhooks: readonly W[], want: string): W[] {
  return webhooks.map((w) => ({ ...w, clientConfig: { ...w.clientConfig, caBundle: want } }));
}

export interface CaBundleReconcilerOptions {
  kc: KubeConfig;
  /** Names of the two configurations (from the webhook configuration builders). */
  mutatingWebhookConfiguration: string;
  validatingWebhookConfiguration: string;
  /** Where the bundle comes from: `current().ca` (PEM), with `onChange` to follow it. */
  source: Pick<CertificateProvider, 'current' | 'onChange'>;
  /** Re-read interval of each configuration besides the watch (default 60 s). */
  resyncIntervalMs?: number;
  /** How long start() waits for the watches' first list (default 2 min). */
  cacheSyncTimeoutMs?: number;
  clock?: Clock;
  logger?: Logger;
  registry?: Registry;
}

interface Target {
  kind: 'MutatingWebhookConfiguration' | 'ValidatingWebhookConfiguration';
  name: string;
  read(): Promise<WebhookConfiguration>;
  patch(body: object): Promise<unknown>;
}

export class CaBundleReconciler {
  readonly #o: CaBundleReconcilerOptions;
  readonly #transport: KubeTransport;
  readonly #informers: Array<Informer<WebhookConfiguration>>;
  readonly #controller: Controller;
  readonly #targets = new Map<string, Target>();
  readonly #writes: Counter<'kind'> | undefined;
  #unsubscribe: (() => void) | undefined;
  #started = false;
  /** Targets reported missing, so a wrong name is logged once, not on every resync. */
  readonly #missing = new Set<string>();

  constructor(options: CaBundleReconcilerOptions) {
    this.#o = options;
    this.#transport = new KubeTransport(options.kc);
    const api = options.kc.makeApiClient(AdmissionregistrationV1Api);
    // One connection pool for all four calls: client-node would open a TCP + TLS connection per call.
    const pool = new DispatcherReuse();
    const reads = typedRequestOptions({ pool });
    const mutating = options.mutatingWebhookConfiguration;
    const validating = options.validatingWebhookConfiguration;
    const targets: Array<Target & { plural: string }> = [
      {
        kind: 'MutatingWebhookConfiguration',
        plural: 'mutatingwebhookconfigurations',
        name: mutating,
        read: () => api.readMutatingWebhookConfiguration({ name: mutating }, reads),
        patch: (body) =>
          api.patchMutatingWebhookConfiguration({ name: mutating, body }, mergePatchOptions(pool)),
      },
      {
        kind: 'ValidatingWebhookConfiguration',
        plural: 'validatingwebhookconfigurations',
        name: validating,
        read: () => api.readValidatingWebhookConfiguration({ name: validating }, reads),
        patch: (body) =>
          api.patchValidatingWebhookConfiguration({ name: validating, body }, mergePatchOptions(pool)),
      },
    ];
    const common = {
      ...(options.clock ? { clock: options.clock } : {}),
      ...(options.logger ? { logger: options.logger } : {}),
      ...(options.registry ? { registry: options.registry } : {}),
    };
    this.#controller = new Controller({
      name: 'webhook-cabundle',
      reconcile: (key, ctx) => this.#reconcile(key, ctx),
      maxConcurrentReconciles: 2,
      ...(options.cacheSyncTimeoutMs === undefined ? {} : { cacheSyncTimeoutMs: options.cacheSyncTimeoutMs }),
      ...common,
    });
    this.#informers = [];
    for (const target of targets) {
      // Keys name the kind too: both configurations may well share one name.
      const key = `${target.kind}:${target.name}`;
      this.#targets.set(key, target);
      const informer = new Informer<WebhookConfiguration>({
        name: `webhook-cabundle-${target.plural}`,
        transport: this.#transport,
        resource: { group: GROUP, version: 'v1', plural: target.plural },
        fieldSelector: `metadata.name=${target.name}`,
        ...common,
      });
      this.#informers.push(informer);
      this.#controller.watches(informer, { map: () => key });
    }
    this.#writes =
      options.registry === undefined
        ? undefined
        : getOrCreateCounter(options.registry, {
            name: 'berth_webhook_cabundle_writes_total',
            help: 'caBundle writes to the webhook configurations (a first fill, a CA rotation, or undoing an edit)',
            labelNames: ['kind'],
          });
  }

  /**
   * Starts the watches and the reconciler; resolves once the watches have synced (rejects if they do not
   * within cacheSyncTimeoutMs). Aborting `signal` stops it. Run it on the leader only.
   */
  async start(signal?: AbortSignal): Promise<void> {
    if (this.#started) return;
    this.#started = true;
    for (const informer of this.#informers) informer.start();
    this.#unsubscribe = this.#o.source.onChange(() => this.#enqueueAll());
    await this.#controller.start(signal);
    this.#enqueueAll();
  }

  /** Stops watching and waits for an in-flight reconcile to finish. */
  async stop(): Promise<void> {
    this.#unsubscribe?.();
    this.#unsubscribe = undefined;
    await this.#controller.stop();
    await Promise.all(this.#informers.map((i) => i.stop()));
    await this.#transport.close();
  }

  #enqueueAll(): void {
    for (const key of this.#targets.keys()) this.#controller.enqueue(key);
  }

  async #reconcile(key: string, ctx: ReconcileContext): Promise<ReconcileResult> {
    const resync = { requeueAfter: this.#o.resyncIntervalMs ?? DEFAULT_CABUNDLE_RESYNC_MS };
    const target = this.#targets.get(key);
    if (target === undefined) return {};
    const pem = this.#o.source.current()?.ca;
    // No CA yet: the provider's first change enqueues us again.
    if (pem === undefined || pem === '') return {};
    const want = toCaBundleField(pem);
    for (let attempt = 0; attempt <= MAX_CONFLICT_RETRIES; attempt++) {
      let live: WebhookConfiguration;
      try {
        live = await target.read();
      } catch (err) {
        if (!isNotFound(err)) throw err;
        if (!this.#missing.has(key)) {
          this.#missing.add(key);
          ctx.log.warn(
            { kind: target.kind },
            'webhook configuration not found; its caBundle is set once it exists',
          );
        }
        return resync;
      }
      this.#missing.delete(key);
      const webhooks: Webhook[] = live.webhooks ?? [];
      const drift = caBundleDrift(webhooks, want);
      if (drift === undefined) return resync;
      try {
        await target.patch({
          metadata: { resourceVersion: live.metadata?.resourceVersion },
          webhooks: withCaBundle(webhooks, want),
        });
      } catch (err) {
        if (isConflict(err)) continue;
        throw err;
      }
      this.#writes?.inc({ kind: target.kind });
      ctx.log.info(
        { kind: target.kind, webhooks: webhooks.length, drift },
        drift === 'missing' ? 'filled the webhook caBundle' : 'updated the webhook caBundle',
      );
      return resync;
    }
    throw new Error(`${target.kind} ${target.name} kept changing; caBundle not written`);
  }
}
