// The leader-only webhook registration: the operator, not the install, creates its Mutating and Validating
// webhook configurations, and only once the webhook Service has a ready endpoint, so an install whose
// operator never becomes ready (an image that cannot be pulled, a crash loop on a missing setting) blocks
// nothing. Once registered they stay, fail-closed, whatever happens to the operator: nothing here deletes
// them. Each carries an ownerReference to the ClusterRole of the same name (the install's registration
// rights), so removing the install removes them through the garbage collector. Why this design:
// docs/webhook-registration.md.
//
// Kept equal to the desired objects: every field of the desired webhooks (rules, selectors, failurePolicy,
// timeouts, clientConfig with the provider's CA bundle) and the owner reference; fields the API server
// defaults and metadata written by others are left alone. A wiped caBundle, a re-applied old manifest or a
// hand edit are undone.
//
// Triggers: a watch on each configuration (scoped to its name), a watch on the Service's EndpointSlices,
// every change of the provider's bundle, and a periodic resync (default 60 s). Every write is preceded by
// direct GETs (the live object, and the owner ClusterRole, whose UID can change with a reinstall) and is
// guarded by the resourceVersion read, so it cannot overwrite a concurrent change; a 409 re-reads and
// retries (bounded), then the key is requeued with backoff.
import type {
  KubernetesObject,
  V1EndpointSlice,
  V1MutatingWebhook,
  V1MutatingWebhookConfiguration,
  V1OwnerReference,
  V1ValidatingWebhook,
  V1ValidatingWebhookConfiguration,
} from '@kubernetes/client-node';
import type { Counter, Registry } from 'prom-client';
import { toCaBundleField } from '../certs/pem.ts';
import type { CertificateProvider } from '../certs/provider.ts';
import { isAlreadyExists, isConflict, isNotFound, readJson } from '../src/kube/client.ts';
import type { Clock } from '../src/kube/clock.ts';
import { Controller, type ReconcileContext, type ReconcileResult } from '../src/kube/controller.ts';
import { Informer } from '../src/kube/informer.ts';
import type { KubeTransport, RawRequest } from '../src/kube/transport.ts';
import type { Logger } from '../src/observability/logger.ts';
import { getOrCreateCounter } from '../src/observability/metrics.ts';

export const DEFAULT_REGISTRATION_RESYNC_MS = 60_000;
const MAX_CONFLICT_RETRIES = 5;
const GROUP = 'admissionregistration.k8s.io';
const CONFIG_PATH = `/apis/${GROUP}/v1`;
const RBAC_PATH = '/apis/rbac.authorization.k8s.io/v1/clusterroles';
/** The label EndpointSlice controllers put on the slices of a Service. */
const SERVICE_NAME_LABEL = 'kubernetes.io/service-name';

type Webhook = V1MutatingWebhook | V1ValidatingWebhook;
type WebhookConfiguration = V1MutatingWebhookConfiguration | V1ValidatingWebhookConfiguration;
type Kind = 'MutatingWebhookConfiguration' | 'ValidatingWebhookConfiguration';

/** Whether every field `want` sets has that value in `have` (arrays: same length, element by element). */
export function covers(want: unknown, have: unknown): boolean {
  if (Array.isArray(want))
    return Array.isArray(have) && have.length === want.length && want.every((w, i) => covers(w, have[i]));
  if (typeof want === 'object' && want !== null) {
    if (typeof have !== 'object' || have === null || Array.isArray(have)) return false;
    const h = have as Record<string, unknown>;
    return Object.entries(want).every(([k, v]) => v === undefined || covers(v, h[k]));
  }
  return want === have;
}

/** `webhooks` with every caBundle set to `caBundle` (base64 PEM). */
export function withCaBundle<W extends Webhook>(webhooks: readonly W[], caBundle: string): W[] {
  return webhooks.map((w) => ({ ...w, clientConfig: { ...w.clientConfig, caBundle } }));
}

/** The owner reference of a configuration to the ClusterRole that grants its registration. */
export function ownerReference(clusterRole: { name: string; uid: string }): V1OwnerReference {
  return { apiVersion: 'rbac.authorization.k8s.io/v1', kind: 'ClusterRole', ...clusterRole };
}

/** An objectSelector without terms (the API server defaults an absent one to {}). */
const emptySelector = (w: Webhook | undefined): boolean =>
  Object.keys(w?.objectSelector?.matchLabels ?? {}).length === 0 &&
  (w?.objectSelector?.matchExpressions ?? []).length === 0;

/** Whether a webhook added by someone else, a missing one, or a changed field separates live from want. */
function webhooksDrift(live: readonly Webhook[], want: readonly Webhook[]): boolean {
  // A selector term `want` does not have is drift: objects could opt out (or, for an opt-in selector such
  // as the injection webhooks', be selected differently). covers() checks only the terms `want` sets.
  const selectorDrift = (w: Webhook, i: number): boolean =>
    emptySelector(want[i])
      ? !emptySelector(w)
      : JSON.stringify(w.objectSelector) !== JSON.stringify(want[i]?.objectSelector);
  return !covers(want, live) || live.some(selectorDrift);
}

/** Whether `owner` is among the configuration's owner references. */
const ownedBy = (live: WebhookConfiguration, owner: V1OwnerReference): boolean =>
  (live.metadata?.ownerReferences ?? []).some((r) => r.uid === owner.uid);

export type RegistrationAction = 'wait' | 'create' | 'update' | 'none';

/**
 * What to do about one configuration: create it only once the Service can serve, otherwise bring the live
 * object back to `want` (its webhooks and the owner reference).
 */
export function registrationAction(
  live: WebhookConfiguration | undefined,
  want: readonly Webhook[],
  owner: V1OwnerReference,
  serving: boolean,
): RegistrationAction {
  if (live === undefined) return serving ? 'create' : 'wait';
  return webhooksDrift(live.webhooks ?? [], want) || !ownedBy(live, owner) ? 'update' : 'none';
}

/** Whether any endpoint of the slices is ready (an unknown `ready` counts as ready, as for kube-proxy). */
export function hasReadyEndpoint(slices: readonly V1EndpointSlice[]): boolean {
  return slices.some((s) => (s.endpoints ?? []).some((e) => e.conditions?.ready !== false));
}

/** `live` carrying `want`'s webhooks and owner reference; everything else (labels of others, …) is kept. */
export function updated<C extends WebhookConfiguration>(live: C, want: C, owner: V1OwnerReference): C {
  const others = (live.metadata?.ownerReferences ?? []).filter(
    (r) => !(r.kind === owner.kind && r.apiVersion === owner.apiVersion && r.name === owner.name),
  );
  return {
    ...live,
    metadata: {
      ...live.metadata,
      labels: { ...live.metadata?.labels, ...want.metadata?.labels },
      ownerReferences: [...others, owner],
    },
    webhooks: want.webhooks,
  };
}

export interface WebhookRegistrationOptions {
  /** The process's API transport (shared; its owner closes it). */
  transport: KubeTransport;
  /** The configurations as they must be, without caBundle (the provider's is added). Both share a name. */
  mutating: V1MutatingWebhookConfiguration;
  validating: V1ValidatingWebhookConfiguration;
  /** The webhook Service the configurations call: registration waits for one of its endpoints to be ready. */
  service: { namespace: string; name: string };
  /** The ClusterRole owning both configurations; default their name. */
  ownerClusterRole?: string;
  /** Names the controller and its watches (metrics, logs): one registration per configuration pair. */
  controllerName?: string;
  /** Where the bundle comes from: `current().ca` (PEM), with `onChange` to follow it. */
  source: Pick<CertificateProvider, 'current' | 'onChange'>;
  /** Re-read interval of each configuration besides the watches (default 60 s). */
  resyncIntervalMs?: number;
  /** How long start() waits for the watches' first list (default 2 min). */
  cacheSyncTimeoutMs?: number;
  clock?: Clock;
  logger?: Logger;
  registry?: Registry;
  /**
   * What to write in place of the built webhooks, given the live ones (undefined: none yet), and when to
   * look again; it may write first (the opt-in scope's labelling, scope-migration.ts). Errors abort the
   * write, which is retried with backoff. Without it, the built webhooks.
   */
  plan?: (
    live: readonly Webhook[] | undefined,
    want: readonly Webhook[],
    signal: AbortSignal,
  ) => Promise<{ webhooks: Webhook[]; requeueAfterMs?: number }>;
}

interface Target {
  kind: Kind;
  plural: string;
  want: WebhookConfiguration;
}

export class WebhookRegistration {
  readonly #o: WebhookRegistrationOptions;
  readonly #transport: KubeTransport;
  readonly #informers: Array<Informer<KubernetesObject>> = [];
  readonly #slices: Informer<V1EndpointSlice>;
  readonly #controller: Controller;
  readonly #targets = new Map<string, Target>();
  readonly #name: string;
  readonly #owner: string;
  readonly #writes: Counter<'kind' | 'action'> | undefined;
  #unsubscribe: (() => void) | undefined;
  #started = false;
  /** The last reason logged per key for not writing, so a waiting state is logged once, not every resync. */
  readonly #waiting = new Map<string, string>();

  constructor(options: WebhookRegistrationOptions) {
    this.#o = options;
    this.#name = options.mutating.metadata?.name ?? '';
    if (this.#name === '' || options.validating.metadata?.name !== this.#name)
      throw new Error('webhook registration: both configurations must carry the same name');
    this.#owner = options.ownerClusterRole ?? this.#name;
    this.#transport = options.transport;
    const common = {
      ...(options.clock ? { clock: options.clock } : {}),
      ...(options.logger ? { logger: options.logger } : {}),
      ...(options.registry ? { registry: options.registry } : {}),
    };
    this.#controller = new Controller({
      name: options.controllerName ?? 'webhook-registration',
      reconcile: (key, ctx) => this.#reconcile(key, ctx),
      maxConcurrentReconciles: 2,
      ...(options.cacheSyncTimeoutMs === undefined ? {} : { cacheSyncTimeoutMs: options.cacheSyncTimeoutMs }),
      ...common,
    });
    const targets: Target[] = [
      {
        kind: 'MutatingWebhookConfiguration',
        plural: 'mutatingwebhookconfigurations',
        want: options.mutating,
      },
      {
        kind: 'ValidatingWebhookConfiguration',
        plural: 'validatingwebhookconfigurations',
        want: options.validating,
      },
    ];
    for (const target of targets) {
      this.#targets.set(target.kind, target);
      const informer = new Informer<KubernetesObject>({
        name: `${options.controllerName ?? 'webhook-registration'}-${target.plural}`,
        transport: this.#transport,
        resource: { group: GROUP, version: 'v1', plural: target.plural },
        fieldSelector: `metadata.name=${this.#name}`,
        ...common,
      });
      this.#informers.push(informer);
      this.#controller.watches(informer, { map: () => target.kind });
    }
    this.#slices = new Informer<V1EndpointSlice>({
      name: `${options.controllerName ?? 'webhook-registration'}-endpointslices`,
      transport: this.#transport,
      resource: {
        group: 'discovery.k8s.io',
        version: 'v1',
        plural: 'endpointslices',
        namespace: options.service.namespace,
      },
      labelSelector: `${SERVICE_NAME_LABEL}=${options.service.name}`,
      ...common,
    });
    this.#controller.watches(this.#slices, { map: () => [...this.#targets.keys()] });
    this.#writes =
      options.registry === undefined
        ? undefined
        : getOrCreateCounter(options.registry, {
            name: 'berth_webhook_registration_writes_total',
            help: 'Writes of the webhook configurations: a registration (create) or undoing a change (update)',
            labelNames: ['kind', 'action'],
          });
  }

  /**
   * Starts the watches and the reconciler; resolves once the watches have synced (rejects if they do not
   * within cacheSyncTimeoutMs). Aborting `signal` stops it. Run it on the leader only.
   */
  async start(signal?: AbortSignal): Promise<void> {
    if (this.#started) return;
    this.#started = true;
    for (const informer of [...this.#informers, this.#slices]) informer.start();
    this.#unsubscribe = this.#o.source.onChange(() => this.#enqueueAll());
    await this.#controller.start(signal);
    this.#enqueueAll();
  }

  /** Stops watching and waits for an in-flight reconcile to finish. Never unregisters anything. */
  async stop(): Promise<void> {
    this.#unsubscribe?.();
    this.#unsubscribe = undefined;
    await this.#controller.stop();
    await Promise.all([...this.#informers, this.#slices].map((i) => i.stop()));
  }

  #enqueueAll(): void {
    for (const key of this.#targets.keys()) this.#controller.enqueue(key);
  }

  async #get<T>(path: string): Promise<T | undefined> {
    try {
      return await readJson<T>(await this.#transport.request({ path }));
    } catch (err) {
      if (isNotFound(err)) return undefined;
      throw err;
    }
  }

  async #send(req: RawRequest): Promise<void> {
    await readJson<unknown>(await this.#transport.request(req));
  }

  /** Logs why a configuration is not written, once per new reason. */
  #wait(key: string, ctx: ReconcileContext, reason: string): void {
    if (this.#waiting.get(key) === reason) return;
    this.#waiting.set(key, reason);
    ctx.log.warn({ kind: key }, `webhook configuration not registered: ${reason}`);
  }

  async #reconcile(key: string, ctx: ReconcileContext): Promise<ReconcileResult> {
    const resync = { requeueAfter: this.#o.resyncIntervalMs ?? DEFAULT_REGISTRATION_RESYNC_MS };
    const target = this.#targets.get(key);
    if (target === undefined) return {};
    const pem = this.#o.source.current()?.ca;
    if (pem === undefined || pem === '') {
      // The provider's first bundle enqueues us again.
      this.#wait(key, ctx, 'no CA bundle for the serving certificate yet (files mode: ca.crt in --cert-dir)');
      return {};
    }
    const built = withCaBundle<Webhook>(target.want.webhooks ?? [], toCaBundleField(pem));
    const path = `${CONFIG_PATH}/${target.plural}`;
    for (let attempt = 0; attempt <= MAX_CONFLICT_RETRIES; attempt++) {
      // The live object before its owner: a configuration gone because the garbage collector removed it
      // with its owner is then never seen next to an owner read from before that deletion.
      const live = await this.#get<WebhookConfiguration>(`${path}/${encodeURIComponent(this.#name)}`);
      const role = await this.#get<KubernetesObject>(`${RBAC_PATH}/${encodeURIComponent(this.#owner)}`);
      const uid = role?.metadata?.uid;
      if (uid === undefined) {
        // Uninstalled (or not installed as documented): a configuration without its owner would outlive
        // the install and deny workload writes with nothing left to serve them.
        this.#wait(key, ctx, `its owner ClusterRole ${JSON.stringify(this.#owner)} does not exist`);
        return resync;
      }
      const owner = ownerReference({ name: this.#owner, uid });
      const serving = hasReadyEndpoint(this.#slices.list());
      // Nothing is planned for a configuration that waits for a serving endpoint anyway.
      const planned =
        this.#o.plan === undefined || (live === undefined && !serving)
          ? { webhooks: built }
          : await this.#o.plan(live?.webhooks, built, ctx.signal);
      const want = planned.webhooks;
      const next =
        planned.requeueAfterMs === undefined
          ? resync
          : { requeueAfter: Math.min(resync.requeueAfter, planned.requeueAfterMs) };
      const action = registrationAction(live, want, owner, serving);
      if (action === 'wait') {
        const svc = `${this.#o.service.namespace}/${this.#o.service.name}`;
        this.#wait(key, ctx, `Service ${svc} has no ready endpoint yet (nothing is blocked until then)`);
        return resync;
      }
      this.#waiting.delete(key);
      if (action === 'none') return next;
      const desired = { ...target.want, webhooks: want };
      try {
        if (live === undefined)
          await this.#send({
            method: 'POST',
            path,
            body: {
              ...desired,
              apiVersion: `${GROUP}/v1`,
              kind: target.kind,
              metadata: { ...desired.metadata, ownerReferences: [owner] },
            },
          });
        else
          await this.#send({
            method: 'PUT',
            path: `${path}/${encodeURIComponent(this.#name)}`,
            body: updated(live, desired, owner),
          });
      } catch (err) {
        if (isConflict(err) || isAlreadyExists(err)) continue;
        throw err;
      }
      this.#writes?.inc({ kind: target.kind, action });
      ctx.log.info(
        { kind: target.kind, webhooks: want.length },
        action === 'create' ? 'registered the webhook configuration' : 'restored the webhook configuration',
      );
      return next;
    }
    throw new Error(`${target.kind} ${this.#name} kept changing; not written`);
  }
}
