// The sandbox's webhook admission chain: the MutatingAdmissionWebhook and ValidatingAdmissionWebhook
// plugins of kube-apiserver (k8s.io/apiserver/pkg/admission/plugin/webhook/{mutating,validating}/
// dispatcher.go), calling registered webhooks over TLS. Matching lives in admission-match.ts, the wire
// format in admission-review.ts, the HTTPS call in admission-client.ts.
//
// Where the sandbox differs from kube: matchPolicy Equivalent acts as Exact (one version per resource);
// matchConditions get no `authorizer`; no defaulting runs after a patch; a webhook answering in another
// group/version gets VerifyAdmissionResponse's message rather than the serializer's.
import { randomUUID } from 'node:crypto';
import { isDeepStrictEqual } from 'node:util';
import jsonpatch, { type Operation } from 'fast-json-patch';
import { postReview, webhookEndpoint } from './admission-client.ts';
import { dryRunUnsupportedError, internalError, toStatusErr, WebhookCallError } from './admission-errors.ts';
import {
  type AdmissionAttributes,
  failurePolicyOf,
  isExemptFromWebhooks,
  reinvocationPolicyOf,
  shouldCallHook,
  timeoutSecondsOf,
  type WebhookAccessor,
  webhookAccessors,
} from './admission-match.ts';
import {
  admissionReviewRequest,
  celAdmissionRequest,
  type DecodedResponse,
  decodePatch,
  decodeReview,
  NO_KNOWN_REVIEW_VERSION,
  type PatchOperation,
  pickReviewVersion,
  serverResponseMessage,
  verifyAdmissionResponse,
} from './admission-review.ts';
import { type KubeObject, StatusError } from './types.ts';

export type { AdmissionAttributes, AdmissionOperation } from './admission-match.ts';

export interface AdmissionDeps {
  /** Stored MutatingWebhookConfiguration objects, any order (kube sorts them by name). */
  mutatingConfigs(): KubeObject[];
  validatingConfigs(): KubeObject[];
  /** For namespaceSelector. */
  getNamespace(name: string): KubeObject | undefined;
  /** Maps clientConfig.service to a local address; undefined => the call fails like an unreachable service. */
  resolveService(namespace: string, name: string, port: number): { host: string; port: number } | undefined;
  /** Unused: webhook deadlines are real network time, not a decision the sandbox's clock drives. */
  now?(): number;
}

export interface MutateResult {
  object: KubeObject | null;
  warnings: string[];
  /** Audit annotations, keyed as kube keys them (`<webhook>/<key>`, `mutation.webhook.admission.k8s.io/...`). */
  auditAnnotations: Record<string, string>;
}

export interface ValidateResult {
  warnings: string[];
  auditAnnotations: Record<string, string>;
}

/**
 * A rejection from the chain. Kube still sends the warnings gathered before it (as Warning headers) and
 * audits the annotations, so the error carries them.
 */
export class AdmissionError extends StatusError {
  readonly warnings: string[];
  readonly auditAnnotations: Record<string, string>;
  constructor(cause: StatusError, record: AdmissionRecord) {
    super(cause.code, cause.reason, cause.message, cause.details);
    this.name = 'AdmissionError';
    this.warnings = [...record.warnings];
    this.auditAnnotations = { ...record.auditAnnotations };
  }
}

// admission.checkKeyFormat: `<prefix>/<name>`, a qualified name.
const ANNOTATION_KEY =
  /^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*\/[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?$/;

/** What one admission pass gathers besides the object. */
class AdmissionRecord {
  readonly warnings: string[] = [];
  readonly auditAnnotations: Record<string, string> = {};

  /** AddAnnotation: malformed keys and overwrites with another value are dropped, as kube only logs them. */
  annotate(key: string, value: string): void {
    if (!ANNOTATION_KEY.test(key) || key.length > 253 + 1 + 63) return;
    const existing = this.auditAnnotations[key];
    if (existing === undefined || existing === value) this.auditAnnotations[key] = value;
  }

  fail(err: unknown): AdmissionError {
    const status =
      err instanceof StatusError ? err : internalError(err instanceof Error ? err.message : String(err));
    return new AdmissionError(status, this);
  }
}

/** webhookReinvokeContext: which IfNeeded webhooks must run again after a later webhook changed the object. */
class ReinvocationState {
  requested = false;
  #previouslyInvoked = new Set<string>();
  readonly #reinvoke = new Set<string>();

  objectChanged(): void {
    for (const uid of this.#previouslyInvoked) this.#reinvoke.add(uid);
    this.#previouslyInvoked = new Set();
    this.requested = true;
  }
  invoked(uid: string): void {
    this.#previouslyInvoked.add(uid);
  }
  shouldReinvoke(uid: string): boolean {
    return this.#reinvoke.has(uid);
  }
}

const asObject = (v: unknown): v is KubeObject =>
  typeof v === 'object' && v !== null && !Array.isArray(v) && typeof (v as KubeObject).metadata === 'object';

export class AdmissionChain {
  readonly #deps: AdmissionDeps;

  constructor(deps: AdmissionDeps) {
    this.#deps = deps;
  }

  /**
   * Runs matching mutating webhooks in order (configuration name, then webhook order), applying their
   * JSON patches; a second round re-calls the IfNeeded webhooks that ran before a later change. Returns a
   * new object (the input is not touched). Rejections are thrown as AdmissionError (a StatusError).
   */
  async mutate(attrs: AdmissionAttributes): Promise<MutateResult> {
    const record = new AdmissionRecord();
    let object = structuredClone(attrs.object);
    if (isExemptFromWebhooks(attrs.kind)) return { object, warnings: [], auditAnnotations: {} };
    try {
      const hooks = webhookAccessors(this.#deps.mutatingConfigs(), 'MutatingWebhookConfiguration');
      const reinvocation = new ReinvocationState();
      object = await this.#mutatingRound(hooks, attrs, object, 0, reinvocation, record);
      // kube's reinvoker runs the chain once more, and only once, if any webhook changed the object.
      if (reinvocation.requested) {
        object = await this.#mutatingRound(hooks, attrs, object, 1, reinvocation, record);
      }
    } catch (err) {
      throw record.fail(err);
    }
    return { object, warnings: record.warnings, auditAnnotations: record.auditAnnotations };
  }

  /** Runs matching validating webhooks in parallel; the first rejection to arrive is the answer, as in kube. */
  async validate(attrs: AdmissionAttributes): Promise<ValidateResult> {
    const record = new AdmissionRecord();
    if (isExemptFromWebhooks(attrs.kind)) return { warnings: [], auditAnnotations: {} };
    let relevant: WebhookAccessor[];
    try {
      const request = celAdmissionRequest(attrs);
      const getNamespace = (name: string) => this.#deps.getNamespace(name);
      relevant = webhookAccessors(this.#deps.validatingConfigs(), 'ValidatingWebhookConfiguration').filter(
        (h) => shouldCallHook(h.webhook, { attrs, current: attrs.object, request, getNamespace }),
      );
    } catch (err) {
      throw record.fail(err);
    }
    const errors: unknown[] = [];
    await Promise.all(
      relevant.map(async (hook, index) => {
        try {
          await this.#callValidating(hook, attrs, record);
        } catch (err) {
          if (!(err instanceof WebhookCallError)) {
            errors.push(err);
          } else if (failurePolicyOf(hook.webhook) !== 'Ignore') {
            errors.push(internalError(err.message));
          } else {
            const key = `failed-open.validating.webhook.admission.k8s.io/round_0_index_${index}`;
            record.annotate(key, hook.webhook.name);
          }
        }
      }),
    );
    if (errors.length > 0) throw record.fail(errors[0]);
    return { warnings: record.warnings, auditAnnotations: record.auditAnnotations };
  }

  async #mutatingRound(
    hooks: WebhookAccessor[],
    attrs: AdmissionAttributes,
    roundStart: KubeObject | null,
    round: 0 | 1,
    reinvocation: ReinvocationState,
    record: AdmissionRecord,
  ): Promise<KubeObject | null> {
    // Selectors see the object as the round began; matchConditions and the review see the latest patch.
    const roundAttrs = { ...attrs, object: roundStart };
    const request = celAdmissionRequest(attrs);
    const getNamespace = (name: string) => this.#deps.getNamespace(name);
    let current = roundStart;
    for (const [index, hook] of hooks.entries()) {
      if (!shouldCallHook(hook.webhook, { attrs: roundAttrs, current, request, getNamespace })) continue;
      // A reinvocation never calls a webhook for the first time.
      if (round === 1 && !reinvocation.shouldReinvoke(hook.uid)) continue;
      let changed = false;
      let failure: unknown;
      try {
        const out = await this.#callMutating(hook, attrs, current, round, index, record);
        changed = out.changed;
        current = out.object;
      } catch (err) {
        failure = err;
      }
      if (changed) reinvocation.objectChanged();
      if (reinvocationPolicyOf(hook.webhook) === 'IfNeeded') reinvocation.invoked(hook.uid);
      if (failure === undefined) continue;
      if (!(failure instanceof WebhookCallError)) throw failure;
      if (failurePolicyOf(hook.webhook) !== 'Ignore') throw internalError(failure.message);
      record.annotate(
        `failed-open.mutation.webhook.admission.k8s.io/round_${round}_index_${index}`,
        hook.webhook.name,
      );
    }
    return current;
  }

  async #callMutating(
    hook: WebhookAccessor,
    attrs: AdmissionAttributes,
    object: KubeObject | null,
    round: 0 | 1,
    index: number,
    record: AdmissionRecord,
  ): Promise<{ changed: boolean; object: KubeObject | null }> {
    const { webhook, configurationName } = hook;
    const annotationSuffix = `round_${round}_index_${index}`;
    let changed = false;
    try {
      const result = await this.#call(hook, attrs, object, true, record);
      if (!result.allowed) throw toStatusErr(webhook.name, result.status);
      if (!result.patch || result.patch.length === 0) return { changed, object };
      let ops: PatchOperation[];
      try {
        ops = decodePatch(result.patch);
      } catch (err) {
        throw new WebhookCallError(
          webhook.name,
          `received undecodable patch in webhook response: ${(err as Error).message}`,
        );
      }
      if (ops.length === 0) return { changed, object };
      if (object === null) {
        throw internalError(
          `admission webhook "${webhook.name}" attempted to modify the object, which is not supported for this operation`,
        );
      }
      if (result.patchType !== 'JSONPatch') {
        throw new WebhookCallError(webhook.name, `unsupported patch type "${result.patchType ?? ''}"`);
      }
      const patched = applyJsonPatch(object, ops);
      changed = !isDeepStrictEqual(object, patched);
      record.annotate(
        `patch.webhook.admission.k8s.io/${annotationSuffix}`,
        JSON.stringify({
          configuration: configurationName,
          webhook: webhook.name,
          // Go marshals each operation as a map: keys sorted.
          patch: ops.map((op) => Object.fromEntries(Object.entries(op).sort(([a], [b]) => (a < b ? -1 : 1)))),
          patchType: 'JSONPatch',
        }),
      );
      return { changed, object: patched };
    } finally {
      record.annotate(
        `mutation.webhook.admission.k8s.io/${annotationSuffix}`,
        JSON.stringify({ configuration: configurationName, webhook: webhook.name, mutated: changed }),
      );
    }
  }

  async #callValidating(
    hook: WebhookAccessor,
    attrs: AdmissionAttributes,
    record: AdmissionRecord,
  ): Promise<void> {
    const result = await this.#call(hook, attrs, attrs.object, false, record);
    if (!result.allowed) throw toStatusErr(hook.webhook.name, result.status);
  }

  /** One webhook call up to a verified response: dryRun rules, review version, target, POST, decoding. */
  async #call(
    hook: WebhookAccessor,
    attrs: AdmissionAttributes,
    object: KubeObject | null,
    mutating: boolean,
    record: AdmissionRecord,
  ): Promise<DecodedResponse> {
    const { webhook } = hook;
    const name = webhook.name;
    if (attrs.dryRun) {
      if (webhook.sideEffects === undefined) throw new WebhookCallError(name, 'Webhook SideEffects is nil');
      if (webhook.sideEffects !== 'None' && webhook.sideEffects !== 'NoneOnDryRun')
        throw dryRunUnsupportedError(name);
    }
    const version = pickReviewVersion(webhook.admissionReviewVersions);
    if (!version) throw new WebhookCallError(name, NO_KNOWN_REVIEW_VERSION);
    const uid = randomUUID();
    const review = admissionReviewRequest(version, uid, attrs, object);
    const timeoutSeconds = timeoutSecondsOf(webhook);
    let endpoint: ReturnType<typeof webhookEndpoint>;
    try {
      endpoint = webhookEndpoint(webhook.clientConfig, timeoutSeconds, (namespace, service, port) =>
        this.#deps.resolveService(namespace, service, port),
      );
    } catch (err) {
      throw new WebhookCallError(name, `could not get REST client: ${(err as Error).message}`);
    }
    const outcome = await postReview(endpoint, JSON.stringify(review), timeoutSeconds * 1000);
    if (outcome.kind === 'error') {
      throw new WebhookCallError(name, `failed to call webhook: Post "${endpoint.url}": ${outcome.cause}`);
    }
    if (outcome.statusCode < 200 || outcome.statusCode > 206) {
      const message = serverResponseMessage(outcome.statusCode, outcome.contentType, outcome.body);
      throw new WebhookCallError(name, `failed to call webhook: ${message}`);
    }
    let decoded: ReturnType<typeof decodeReview>;
    try {
      decoded = decodeReview(outcome.body, outcome.statusCode, outcome.contentType);
    } catch (err) {
      throw new WebhookCallError(name, `failed to call webhook: ${(err as Error).message}`);
    }
    let result: DecodedResponse;
    try {
      result = verifyAdmissionResponse(uid, mutating, version, decoded);
    } catch (err) {
      throw new WebhookCallError(name, `received invalid webhook response: ${(err as Error).message}`);
    }
    for (const [key, value] of Object.entries(result.auditAnnotations))
      record.annotate(`${name}/${key}`, value);
    record.warnings.push(...result.warnings);
    return result;
  }
}

/** Applies a webhook's JSON patch; failures are internal errors that failurePolicy does not cover. */
function applyJsonPatch(object: KubeObject, ops: PatchOperation[]): KubeObject {
  let patched: unknown;
  try {
    patched = jsonpatch.applyPatch(object, ops as Operation[], true, false).newDocument;
  } catch (err) {
    throw internalError(((err as Error).message ?? String(err)).split('\n')[0] ?? '');
  }
  if (!asObject(patched)) {
    throw internalError('the patched object is not a Kubernetes object (no metadata)');
  }
  return patched;
}
