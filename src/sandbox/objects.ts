// The generic REST storage flow of kube-apiserver for every resource: create, update, patch, delete,
// status/scale/binding subresources, with mutating admission -> defaulting/validation -> validating
// admission -> optimistic-concurrency write, in that order (k8s.io/apiserver handlers + registry Store).
import { randomBytes, randomUUID } from 'node:crypto';
import { parse as parseYaml } from 'yaml';
import type { AdmissionAttributes } from './admission.ts';
import { serverSideApply, updateManagedFields } from './managedfields.ts';
import {
  applyJsonPatch,
  applyMergePatch,
  applyStrategicMergePatch,
  supportsStrategicMerge,
} from './patch.ts';
import { apiVersionOf, type Registry, type ResourceType, typeKey } from './registry.ts';
import type { CompiledSchema } from './schema.ts';
import { type FieldRequirement, matchesFields, matchesSelector, type Selector } from './selectors.ts';
import type { Store } from './store.ts';
import { deepEqual, stampNamespaceLabel, strategyFor } from './strategy.ts';
import {
  badRequest,
  type FieldCause,
  invalidError,
  type JsonObject,
  type KubeObject,
  StatusError,
  type UserInfo,
} from './types.ts';
import { metadataErrors, nameErrors, requiredCause } from './validation.ts';

export interface Admission {
  mutate(attrs: AdmissionAttributes): Promise<{ object: KubeObject | null; warnings: string[] }>;
  validate(attrs: AdmissionAttributes): Promise<{ warnings: string[] }>;
}

export interface RequestContext {
  user: UserInfo;
  dryRun: boolean;
  /** fieldManager query parameter, else derived from the user agent as kube-apiserver does. */
  fieldManager: string;
  /** Warnings collected for the `Warning` response header. */
  warnings: string[];
  /** fieldValidation: what to do with fields the schema does not declare (kube's default is Warn). */
  fieldValidation?: 'Strict' | 'Warn' | 'Ignore';
}

export interface DeleteOptions {
  preconditions?: { uid?: string; resourceVersion?: string };
  propagationPolicy?: 'Background' | 'Foreground' | 'Orphan';
  gracePeriodSeconds?: number;
}

export interface ObjectHooks {
  /** Compiled CRD schema of a custom resource type. */
  schemaFor(type: ResourceType): CompiledSchema | undefined;
  /** Runs after a committed write (CRD registration, namespace bootstrap). */
  afterWrite?(type: ResourceType, object: KubeObject, deleted: boolean): void;
  /** Deletion of dependents and namespaces, asynchronous like the controllers that do it. */
  onDeleteRequested?(
    type: ResourceType,
    object: KubeObject,
    policy: DeleteOptions['propagationPolicy'],
  ): void;
}

export type PatchType = 'json' | 'merge' | 'strategic' | 'apply';

export const PATCH_CONTENT_TYPES: Record<string, PatchType> = {
  'application/json-patch+json': 'json',
  'application/merge-patch+json': 'merge',
  'application/strategic-merge-patch+json': 'strategic',
  'application/apply-patch+yaml': 'apply',
};

const NAME_CHARS = 'bcdfghjklmnpqrstvwxz2456789';

/**
 * How often a generated name is drawn before a create fails with AlreadyExists: kube-apiserver draws again
 * when the name is taken (RetryGenerateName, on by default since 1.31), 8 draws in all.
 */
const GENERATE_NAME_DRAWS = 8;

function generateSuffix(): string {
  const bytes = randomBytes(5);
  let out = '';
  for (const b of bytes) out += NAME_CHARS[b % NAME_CHARS.length];
  return out;
}

export const rfc3339 = (ms: number): string => new Date(ms).toISOString().replace(/\.\d{3}Z$/, 'Z');

const clone = <T>(v: T): T => structuredClone(v);

/** `pods "x"` or `deployments.apps "x"` as kube-apiserver names a resource in messages. */
export function qualifiedResource(type: ResourceType): string {
  return type.group ? `${type.resource}.${type.group}` : type.resource;
}

export const notFound = (type: ResourceType, name: string): StatusError =>
  new StatusError(404, 'NotFound', `${qualifiedResource(type)} "${name}" not found`, {
    name,
    group: type.group,
    kind: type.resource,
  });

export const conflict = (type: ResourceType, name: string, detail: string): StatusError =>
  new StatusError(
    409,
    'Conflict',
    `Operation cannot be fulfilled on ${qualifiedResource(type)} "${name}": ${detail}`,
    {
      name,
      group: type.group,
      kind: type.resource,
    },
  );

const MODIFIED =
  'the object has been modified; please apply your changes to the latest version and try again';

/**
 * The stored object changed while an update was in admission (the webhooks are awaited). kube-apiserver
 * checks the resourceVersion inside the storage transaction, after admission: a write that named one
 * conflicts, one that did not is retried on the latest object. Only update() and patch() see this.
 */
class StaleBase extends Error {}

/** Attempts of an update or patch without a resourceVersion precondition that keeps losing races. */
const STALE_RETRIES = 5;

/** Whether a patch body sets metadata.resourceVersion (a merge patch's field, or a JSON patch op on it). */
function namesResourceVersion(body: unknown): boolean {
  if (Array.isArray(body))
    return body.some(
      (op) =>
        typeof op === 'object' &&
        op !== null &&
        (op as { path?: unknown }).path === '/metadata/resourceVersion',
    );
  const metadata =
    typeof body === 'object' && body !== null ? (body as { metadata?: unknown }).metadata : undefined;
  return typeof metadata === 'object' && metadata !== null && 'resourceVersion' in metadata;
}

/** Everything but resourceVersion and managedFields: an update that changes none of it writes nothing. */
function sameContent(a: KubeObject, b: KubeObject): boolean {
  const strip = (o: KubeObject) => ({
    ...o,
    metadata: { ...o.metadata, resourceVersion: undefined, managedFields: undefined },
  });
  return deepEqual(strip(a), strip(b));
}

/** The part of an object that metadata.generation tracks: all but metadata and status. */
function generationView(o: KubeObject): unknown {
  const { metadata: _m, status: _s, ...rest } = o;
  return rest;
}

function reportUnknownFields(type: ResourceType, fields: string[], ctx: RequestContext): void {
  const mode = ctx.fieldValidation ?? 'Warn';
  if (mode === 'Ignore') return;
  const unknown = fields.map((f) => `unknown field "${f}"`);
  if (mode === 'Warn') {
    ctx.warnings.push(...unknown);
    return;
  }
  throw badRequest(
    `${type.kind} in version "${type.version}" cannot be handled as a ${type.kind}: strict decoding error: ${unknown.join(', ')}`,
  );
}

export class ObjectService {
  private readonly store: Store;
  private readonly registry: Registry;
  private readonly now: () => number;
  private readonly hooks: ObjectHooks;
  private readonly nameSuffix: () => string;
  admission: Admission | undefined;

  constructor(opts: {
    store: Store;
    registry: Registry;
    now: () => number;
    hooks: ObjectHooks;
    admission?: Admission;
    nameSuffix?: () => string;
  }) {
    this.nameSuffix = opts.nameSuffix ?? generateSuffix;
    this.store = opts.store;
    this.registry = opts.registry;
    this.now = opts.now;
    this.hooks = opts.hooks;
    this.admission = opts.admission;
  }

  get(type: ResourceType, namespace: string, name: string): KubeObject {
    const found = this.store.get(
      typeKey(type.group, type.resource),
      type.namespaced ? namespace : undefined,
      name,
    );
    if (!found) throw notFound(type, name);
    return found;
  }

  list(
    type: ResourceType,
    namespace: string,
    labels: Selector,
    fields: FieldRequirement[],
  ): { items: KubeObject[]; resourceVersion: string } {
    const rv = String(this.store.currentRv());
    const all = this.store.list(
      typeKey(type.group, type.resource),
      type.namespaced && namespace ? namespace : undefined,
    );
    const items =
      labels.length === 0 && fields.length === 0
        ? all
        : all.filter((o) => matchesSelector(labels, o.metadata.labels) && matchesFields(fields, o));
    return { items, resourceVersion: rv };
  }

  /** `applied`: the body comes from server-side apply, which has recorded its own managedFields. */
  async create(
    type: ResourceType,
    namespace: string,
    body: unknown,
    ctx: RequestContext,
    applied = false,
  ): Promise<KubeObject> {
    const obj = this.decode(type, body, namespace);
    this.applyDefaults(type, obj, ctx);
    if (!applied)
      obj.metadata.managedFields = updateManagedFields(
        undefined,
        obj,
        ctx.fieldManager,
        this.mfOptions(type, ''),
      );
    const mutated = await this.mutate(type, '', 'CREATE', obj, null, ctx, {
      kind: 'CreateOptions',
      apiVersion: 'meta.k8s.io/v1',
    });
    this.checkIdentity(type, mutated, namespace, undefined);
    this.applyDefaults(type, mutated);
    this.prepareCreate(type, mutated);
    this.validate(type, mutated, undefined, '');
    this.checkNamespace(type, mutated);
    const key = typeKey(type.group, type.resource);
    if (this.store.get(key, mutated.metadata.namespace, mutated.metadata.name ?? '')) {
      throw new StatusError(
        409,
        'AlreadyExists',
        `${qualifiedResource(type)} "${mutated.metadata.name}" already exists`,
        {
          name: mutated.metadata.name ?? '',
          group: type.group,
          kind: type.resource,
        },
      );
    }
    await this.validateAdmission(type, '', 'CREATE', mutated, null, ctx, {
      kind: 'CreateOptions',
      apiVersion: 'meta.k8s.io/v1',
    });
    if (ctx.dryRun) return mutated;
    const stored = this.store.put(key, mutated);
    this.hooks.afterWrite?.(type, stored, false);
    return stored;
  }

  /** PUT of the object or of its status subresource. */
  async update(
    type: ResourceType,
    namespace: string,
    name: string,
    body: unknown,
    subresource: '' | 'status',
    ctx: RequestContext,
  ): Promise<KubeObject> {
    for (let attempt = 1; ; attempt++) {
      const old = this.get(type, namespace, name);
      const next = this.decode(type, body, namespace);
      if (type.custom) this.applyDefaults(type, next, ctx);
      if (next.metadata.name !== name) {
        throw badRequest(
          `the name of the object (${next.metadata.name ?? ''}) does not match the name on the URL (${name})`,
        );
      }
      const named = !!next.metadata.resourceVersion;
      try {
        return await this.commitUpdate(type, old, next, subresource, ctx, 'UpdateOptions');
      } catch (err) {
        if (!(err instanceof StaleBase)) throw err;
        if (named || attempt >= STALE_RETRIES) throw conflict(type, name, MODIFIED);
      }
    }
  }

  async patch(
    type: ResourceType,
    namespace: string,
    name: string,
    patchType: PatchType,
    patch: string,
    subresource: '' | 'status',
    ctx: RequestContext,
    force: boolean,
  ): Promise<{ object: KubeObject; created: boolean }> {
    for (let attempt = 1; ; attempt++) {
      const named = { value: false };
      try {
        return await this.patchOnce(type, namespace, name, patchType, patch, subresource, ctx, force, named);
      } catch (err) {
        if (!(err instanceof StaleBase)) throw err;
        if (named.value || attempt >= STALE_RETRIES) throw conflict(type, name, MODIFIED);
      }
    }
  }

  private async patchOnce(
    type: ResourceType,
    namespace: string,
    name: string,
    patchType: PatchType,
    patch: string,
    subresource: '' | 'status',
    ctx: RequestContext,
    force: boolean,
    named: { value: boolean },
  ): Promise<{ object: KubeObject; created: boolean }> {
    const key = typeKey(type.group, type.resource);
    const existing = this.store.get(key, type.namespaced ? namespace : undefined, name);
    if (patchType === 'apply') {
      const applied = this.parseApply(type, patch, namespace, name);
      if (!existing) {
        if (subresource) throw notFound(type, name);
        const created = serverSideApply(undefined, applied, this.applyOptions(type, ctx, force));
        return { object: await this.create(type, namespace, created, ctx, true), created: true };
      }
      const merged = serverSideApply(clone(existing), applied, this.applyOptions(type, ctx, force));
      return {
        object: await this.commitUpdate(type, existing, merged, subresource, ctx, 'PatchOptions', true),
        created: false,
      };
    }
    if (!existing) throw notFound(type, name);
    let body: unknown;
    try {
      body = JSON.parse(patch);
    } catch (err) {
      throw badRequest(`error decoding patch: ${(err as Error).message}`);
    }
    let patched: KubeObject;
    if (patchType === 'json') patched = applyJsonPatch(existing, body);
    else if (patchType === 'merge') patched = applyMergePatch(existing, body);
    else {
      if (type.custom || !supportsStrategicMerge(type.kind)) {
        throw new StatusError(
          415,
          'UnsupportedMediaType',
          'the body of the request was in an unknown format - accepted media types include: application/json-patch+json, application/merge-patch+json, application/apply-patch+yaml',
        );
      }
      patched = applyStrategicMergePatch(existing, body, type.kind);
    }
    if (!patched.metadata || typeof patched.metadata !== 'object') patched.metadata = {};
    if (type.custom) this.applyDefaults(type, patched, ctx);
    // A patch that names a resourceVersion is a precondition on it, as in kube-apiserver.
    named.value = namesResourceVersion(body);
    if (patched.metadata.resourceVersion === undefined)
      patched.metadata.resourceVersion = existing.metadata.resourceVersion;
    return {
      object: await this.commitUpdate(type, existing, patched, subresource, ctx, 'PatchOptions'),
      created: false,
    };
  }

  async delete(
    type: ResourceType,
    namespace: string,
    name: string,
    opts: DeleteOptions,
    ctx: RequestContext,
  ): Promise<{ object: KubeObject; removed: boolean }> {
    const old = this.get(type, namespace, name);
    const pre = opts.preconditions ?? {};
    if (pre.uid && pre.uid !== old.metadata.uid) {
      throw conflict(
        type,
        name,
        `Precondition failed: UID in precondition: ${pre.uid}, UID in object meta: ${old.metadata.uid}`,
      );
    }
    if (pre.resourceVersion && pre.resourceVersion !== old.metadata.resourceVersion) {
      throw conflict(
        type,
        name,
        `Precondition failed: ResourceVersion in precondition: ${pre.resourceVersion}, ResourceVersion in object meta: ${old.metadata.resourceVersion}`,
      );
    }
    await this.validateAdmission(type, '', 'DELETE', null, old, ctx, {
      kind: 'DeleteOptions',
      apiVersion: 'meta.k8s.io/v1',
      ...(opts as JsonObject),
    });
    if (ctx.dryRun) return { object: old, removed: false };
    const key = typeKey(type.group, type.resource);
    const policy = opts.propagationPolicy ?? 'Background';
    const finalizers = [...(old.metadata.finalizers ?? [])];
    if (policy === 'Foreground' && !finalizers.includes('foregroundDeletion'))
      finalizers.push('foregroundDeletion');
    if (policy === 'Orphan' && !finalizers.includes('orphan')) finalizers.push('orphan');
    const graceful = this.podGracePeriod(type, old, opts);
    if (type.resource === 'namespaces' && type.group === '') {
      const next = clone(old);
      next.metadata.deletionTimestamp ??= rfc3339(this.now());
      next.metadata.deletionGracePeriodSeconds = 0;
      next.status = { ...(next.status as object), phase: 'Terminating' };
      const stored = old.metadata.deletionTimestamp ? old : this.store.put(key, next);
      this.hooks.onDeleteRequested?.(type, stored, policy);
      return { object: stored, removed: false };
    }
    if (finalizers.length > 0 || graceful > 0) {
      if (old.metadata.deletionTimestamp && graceful === (old.metadata.deletionGracePeriodSeconds ?? 0)) {
        return { object: old, removed: false };
      }
      const next = clone(old);
      next.metadata.finalizers = finalizers;
      next.metadata.deletionTimestamp =
        old.metadata.deletionTimestamp && graceful >= (old.metadata.deletionGracePeriodSeconds ?? 0)
          ? old.metadata.deletionTimestamp
          : rfc3339(this.now() + graceful * 1000);
      next.metadata.deletionGracePeriodSeconds = graceful;
      if (finalizers.length === 0 && graceful === 0) return this.remove(type, key, old, policy);
      if (!old.metadata.deletionTimestamp || !sameContent(old, next)) {
        if (next.metadata.generation !== undefined) next.metadata.generation += 1;
        const stored = this.store.put(key, next);
        this.hooks.onDeleteRequested?.(type, stored, policy);
        return { object: stored, removed: false };
      }
      return { object: old, removed: false };
    }
    return this.remove(type, key, old, policy);
  }

  /** Deletes an object whose finalizers are done, without admission (the GC and namespace controller path). */
  removeNow(type: ResourceType, object: KubeObject): void {
    this.remove(type, typeKey(type.group, type.resource), object, 'Background');
  }

  async bind(namespace: string, name: string, body: unknown, ctx: RequestContext): Promise<void> {
    const podType = this.registry.get('', 'v1', 'pods')!;
    const pod = this.get(podType, namespace, name);
    const binding = this.asObject(body);
    const target = (binding.target ?? {}) as { name?: string; kind?: string };
    if (!target.name)
      throw invalidError({ group: '', kind: 'Binding' }, name, [requiredCause('target.name')]);
    await this.validateAdmission(
      podType,
      'binding',
      'CREATE',
      { ...binding, metadata: { ...binding.metadata, name, namespace } },
      null,
      ctx,
      {
        kind: 'CreateOptions',
        apiVersion: 'meta.k8s.io/v1',
      },
      { group: '', version: 'v1', kind: 'Binding' },
    );
    const spec = (pod.spec ?? {}) as { nodeName?: string; schedulingGates?: unknown[] };
    if (pod.metadata.deletionTimestamp)
      throw conflict(podType, name, 'pod is being deleted, cannot be assigned to a host');
    if (spec.nodeName)
      throw conflict(
        { ...podType, resource: 'pods/binding' },
        name,
        `pod ${name} is already assigned to node "${spec.nodeName}"`,
      );
    if ((spec.schedulingGates ?? []).length > 0) {
      throw new StatusError(
        500,
        'InternalError',
        `Internal error occurred: pod ${name} has non-empty .spec.schedulingGates`,
      );
    }
    if (ctx.dryRun) return;
    const next = clone(pod);
    (next.spec as { nodeName?: string }).nodeName = target.name;
    const status = (next.status ?? {}) as { conditions?: JsonObject[] };
    status.conditions = [
      ...(status.conditions ?? []).filter((c) => c.type !== 'PodScheduled'),
      { type: 'PodScheduled', status: 'True', lastProbeTime: null, lastTransitionTime: rfc3339(this.now()) },
    ];
    next.status = status;
    this.store.put(typeKey('', 'pods'), next);
  }

  /** GET of the scale subresource: autoscaling/v1 Scale built from the parent. */
  scaleOf(object: KubeObject): KubeObject {
    const spec = (object.spec ?? {}) as {
      replicas?: number;
      selector?: { matchLabels?: Record<string, string> };
    };
    const status = (object.status ?? {}) as { replicas?: number };
    const selector = Object.entries(spec.selector?.matchLabels ?? {})
      .map(([k, v]) => `${k}=${v}`)
      .join(',');
    return {
      kind: 'Scale',
      apiVersion: 'autoscaling/v1',
      metadata: {
        name: object.metadata.name,
        namespace: object.metadata.namespace,
        uid: object.metadata.uid,
        resourceVersion: object.metadata.resourceVersion,
        creationTimestamp: object.metadata.creationTimestamp,
      },
      spec: { replicas: spec.replicas ?? 0 },
      status: { replicas: status.replicas ?? 0, ...(selector ? { selector } : {}) },
    };
  }

  /** PUT or PATCH of the scale subresource: admission sees Scale objects, the parent's replicas change. */
  async updateScale(
    type: ResourceType,
    namespace: string,
    name: string,
    compute: (current: KubeObject) => KubeObject,
    ctx: RequestContext,
  ): Promise<KubeObject> {
    const parent = this.get(type, namespace, name);
    const oldScale = this.scaleOf(parent);
    const newScale = compute(oldScale);
    const rv = newScale.metadata?.resourceVersion;
    if (rv && rv !== parent.metadata.resourceVersion) throw conflict(type, name, MODIFIED);
    const replicas = (newScale.spec as { replicas?: unknown } | undefined)?.replicas;
    if (typeof replicas !== 'number' || replicas < 0 || !Number.isInteger(replicas)) {
      throw invalidError({ group: 'autoscaling', kind: 'Scale' }, name, [
        {
          reason: 'FieldValueInvalid',
          field: 'spec.replicas',
          message: `Invalid value: ${JSON.stringify(replicas)}: must be greater than or equal to 0`,
        },
      ]);
    }
    const scaleKind = { group: 'autoscaling', version: 'v1', kind: 'Scale' };
    const mutatedScale =
      (await this.mutate(
        type,
        'scale',
        'UPDATE',
        newScale,
        oldScale,
        ctx,
        { kind: 'UpdateOptions', apiVersion: 'meta.k8s.io/v1' },
        scaleKind,
      )) ?? newScale;
    await this.validateAdmission(
      type,
      'scale',
      'UPDATE',
      mutatedScale,
      oldScale,
      ctx,
      { kind: 'UpdateOptions', apiVersion: 'meta.k8s.io/v1' },
      scaleKind,
    );
    const next = clone(parent);
    (next.spec as { replicas?: number }).replicas = (mutatedScale.spec as { replicas: number }).replicas;
    if (sameContent(next, parent)) return oldScale;
    if (next.metadata.generation !== undefined) next.metadata.generation += 1;
    this.validate(type, next, parent, '');
    if (ctx.dryRun) return this.scaleOf(next);
    const stored = this.store.put(typeKey(type.group, type.resource), next);
    return this.scaleOf(stored);
  }

  private async commitUpdate(
    type: ResourceType,
    old: KubeObject,
    body: KubeObject,
    subresource: '' | 'status',
    ctx: RequestContext,
    optionsKind: string,
    applied = false,
  ): Promise<KubeObject> {
    const name = old.metadata.name ?? '';
    const rv = body.metadata.resourceVersion;
    if (rv !== undefined && rv !== '' && rv !== old.metadata.resourceVersion)
      throw conflict(type, name, MODIFIED);
    let next = body;
    this.checkIdentity(type, next, old.metadata.namespace ?? '', old);
    // System fields come from the stored object; clients cannot change them.
    next.metadata.uid = old.metadata.uid;
    next.metadata.creationTimestamp = old.metadata.creationTimestamp;
    next.metadata.deletionTimestamp = old.metadata.deletionTimestamp;
    next.metadata.deletionGracePeriodSeconds = old.metadata.deletionGracePeriodSeconds;
    next.metadata.generation = old.metadata.generation;
    next.metadata.resourceVersion = old.metadata.resourceVersion;
    if (next.metadata.generateName === undefined && old.metadata.generateName !== undefined) {
      next.metadata.generateName = old.metadata.generateName;
    }
    if (subresource === 'status') {
      // The status subresource changes status only (and nothing in metadata but what we copy back).
      next = { ...clone(old), status: next.status } as KubeObject;
    } else if (type.subresources.includes('status')) {
      if (old.status === undefined) delete next.status;
      else next.status = clone(old.status);
    }
    this.applyDefaults(type, next);
    if (!applied) {
      next.metadata.managedFields = updateManagedFields(
        old,
        next,
        ctx.fieldManager,
        this.mfOptions(type, subresource),
      );
    }
    const options = { kind: optionsKind, apiVersion: 'meta.k8s.io/v1' };
    next = await this.mutate(type, subresource, 'UPDATE', next, old, ctx, options);
    this.checkIdentity(type, next, old.metadata.namespace ?? '', old);
    next.metadata.uid = old.metadata.uid;
    const strategy = strategyFor(typeKey(type.group, type.resource));
    strategy.prepareForUpdate?.(next, old, subresource, rfc3339(this.now()));
    if (type.group === '' && type.resource === 'namespaces') stampNamespaceLabel(next);
    if (type.generation && !deepEqual(generationView(next), generationView(old))) {
      next.metadata.generation = (old.metadata.generation ?? 0) + 1;
    }
    this.validate(type, next, old, subresource);
    if (sameContent(next, old)) return old;
    await this.validateAdmission(type, subresource, 'UPDATE', next, old, ctx, options);
    if (ctx.dryRun) return next;
    const key = typeKey(type.group, type.resource);
    // The precondition holds up to the write: another write admitted meanwhile makes this one stale.
    const latest = this.store.get(key, type.namespaced ? (old.metadata.namespace ?? '') : undefined, name);
    if (latest?.metadata.resourceVersion !== old.metadata.resourceVersion) throw new StaleBase();
    if (
      next.metadata.deletionTimestamp &&
      (next.metadata.finalizers ?? []).length === 0 &&
      !this.awaitsKubelet(type, next)
    ) {
      return this.remove(type, key, next, 'Background').object;
    }
    const stored = this.store.put(key, next);
    this.hooks.afterWrite?.(type, stored, false);
    return stored;
  }

  private remove(
    type: ResourceType,
    key: string,
    object: KubeObject,
    policy: DeleteOptions['propagationPolicy'],
  ): { object: KubeObject; removed: boolean } {
    const deleted = this.store.remove(key, object) ?? object;
    this.hooks.afterWrite?.(type, deleted, true);
    this.hooks.onDeleteRequested?.(type, deleted, policy);
    return { object: deleted, removed: true };
  }

  /** Pods bound to a node terminate gracefully: the kubelet (absent here) would remove them. */
  private podGracePeriod(type: ResourceType, pod: KubeObject, opts: DeleteOptions): number {
    if (type.group !== '' || type.resource !== 'pods') return 0;
    const spec = (pod.spec ?? {}) as { nodeName?: string; terminationGracePeriodSeconds?: number };
    const phase = (pod.status as { phase?: string } | undefined)?.phase;
    if (!spec.nodeName || phase === 'Succeeded' || phase === 'Failed') return 0;
    return Math.max(0, opts.gracePeriodSeconds ?? spec.terminationGracePeriodSeconds ?? 30);
  }

  private awaitsKubelet(type: ResourceType, obj: KubeObject): boolean {
    return (
      type.group === '' && type.resource === 'pods' && (obj.metadata.deletionGracePeriodSeconds ?? 0) > 0
    );
  }

  private mfOptions(type: ResourceType, subresource: string) {
    return { apiVersion: apiVersionOf(type), now: rfc3339(this.now()), subresource, kind: type.kind };
  }

  private applyOptions(type: ResourceType, ctx: RequestContext, force: boolean) {
    return {
      manager: ctx.fieldManager,
      force,
      apiVersion: apiVersionOf(type),
      now: rfc3339(this.now()),
      kind: type.kind,
    };
  }

  private parseApply(type: ResourceType, patch: string, namespace: string, name: string): KubeObject {
    let doc: unknown;
    try {
      doc = parseYaml(patch);
    } catch (err) {
      throw badRequest(`error decoding YAML: ${(err as Error).message}`);
    }
    const obj = this.asObject(doc);
    if (!obj.apiVersion || !obj.kind) throw badRequest('apiVersion and kind must be set in an apply request');
    if (obj.metadata.name && obj.metadata.name !== name) {
      throw badRequest(
        `the name of the object (${obj.metadata.name}) does not match the name on the URL (${name})`,
      );
    }
    obj.metadata.name = name;
    if (type.namespaced) obj.metadata.namespace = namespace;
    return obj;
  }

  private asObject(body: unknown): KubeObject {
    if (typeof body !== 'object' || body === null || Array.isArray(body)) {
      throw badRequest("Object 'Kind' is missing in the request body");
    }
    const obj = clone(body) as KubeObject;
    if (typeof obj.metadata !== 'object' || obj.metadata === null || Array.isArray(obj.metadata))
      obj.metadata = {};
    return obj;
  }

  /** Decoding checks of kube-apiserver: kind and apiVersion, namespace agreement, type-specific formats. */
  private decode(type: ResourceType, body: unknown, namespace: string): KubeObject {
    const obj = this.asObject(body);
    const expected = apiVersionOf(type);
    if (obj.kind === undefined || obj.kind === '') obj.kind = type.kind;
    if (obj.apiVersion === undefined || obj.apiVersion === '') obj.apiVersion = expected;
    if (obj.kind !== type.kind || obj.apiVersion !== expected) {
      throw badRequest(
        `the API version in the data (${obj.apiVersion}) does not match the expected API version (${expected})`,
      );
    }
    if (type.namespaced) {
      if (obj.metadata.namespace && obj.metadata.namespace !== namespace) {
        throw badRequest(
          'the namespace of the provided object does not match the namespace sent on the request',
        );
      }
      obj.metadata.namespace = namespace;
    } else {
      delete obj.metadata.namespace;
    }
    strategyFor(typeKey(type.group, type.resource)).decode?.(obj);
    return obj;
  }

  private checkIdentity(
    type: ResourceType,
    obj: KubeObject,
    namespace: string,
    old: KubeObject | undefined,
  ): void {
    if (obj.kind !== type.kind || obj.apiVersion !== apiVersionOf(type)) {
      throw badRequest(
        `the API version in the data (${obj.apiVersion}) does not match the expected API version (${apiVersionOf(type)})`,
      );
    }
    if (type.namespaced && obj.metadata.namespace !== namespace) {
      throw badRequest(
        'the namespace of the provided object does not match the namespace sent on the request',
      );
    }
    if (old && obj.metadata.name !== old.metadata.name) {
      throw badRequest(
        `the name of the object (${obj.metadata.name ?? ''}) does not match the name on the URL (${old.metadata.name})`,
      );
    }
  }

  /** With `ctx` (the client's own content), unknown fields are reported as its fieldValidation asks. */
  private applyDefaults(type: ResourceType, obj: KubeObject, ctx?: RequestContext): void {
    if (type.custom) {
      const schema = this.hooks.schemaFor(type);
      if (schema) {
        const pruned = schema.prune(obj as unknown as JsonObject);
        if (ctx && pruned.length > 0) reportUnknownFields(type, pruned, ctx);
        schema.applyDefaults(obj as unknown as JsonObject);
      }
      return;
    }
    strategyFor(typeKey(type.group, type.resource)).defaults?.(obj);
  }

  private prepareCreate(type: ResourceType, obj: KubeObject): void {
    const meta = obj.metadata;
    if (!meta.name && meta.generateName) {
      const key = typeKey(type.group, type.resource);
      for (let draw = 0; draw < GENERATE_NAME_DRAWS; draw++) {
        meta.name = `${meta.generateName}${this.nameSuffix()}`;
        if (!this.store.get(key, meta.namespace, meta.name)) break;
      }
    }
    const now = this.now();
    meta.uid = randomUUID();
    meta.creationTimestamp = rfc3339(now);
    delete meta.deletionTimestamp;
    delete meta.deletionGracePeriodSeconds;
    delete meta.resourceVersion;
    if (type.generation) meta.generation = 1;
    else delete meta.generation;
    if (type.custom) {
      if (type.subresources.includes('status')) delete obj.status;
    } else {
      strategyFor(typeKey(type.group, type.resource)).prepareForCreate?.(obj, rfc3339(now));
    }
    if (type.group === '' && type.resource === 'namespaces') stampNamespaceLabel(obj);
  }

  private validate(
    type: ResourceType,
    obj: KubeObject,
    old: KubeObject | undefined,
    subresource: string,
  ): void {
    const strategy = strategyFor(typeKey(type.group, type.resource));
    const name = obj.metadata.name ?? '';
    const causes: FieldCause[] = [];
    if (!name) causes.push(requiredCause('metadata.name', 'name or generateName is required'));
    else if (!old) causes.push(...nameErrors(name, type.custom ? 'subdomain' : strategy.nameRule));
    causes.push(...metadataErrors(obj));
    if (old?.metadata.deletionTimestamp) {
      const before = new Set(old.metadata.finalizers ?? []);
      if ((obj.metadata.finalizers ?? []).some((f) => !before.has(f))) {
        causes.push({
          reason: 'FieldValueForbidden',
          field: 'metadata.finalizers',
          message: 'Forbidden: no new finalizers can be added if the object is being deleted',
        });
      }
    }
    if (type.custom) {
      const schema = this.hooks.schemaFor(type);
      if (schema)
        causes.push(
          ...schema.validate(obj as unknown as JsonObject, old as unknown as JsonObject | undefined),
        );
    } else {
      causes.push(...(strategy.validate?.(obj) ?? []));
      if (old) causes.push(...(strategy.validateUpdate?.(obj, old, subresource) ?? []));
    }
    if (causes.length > 0) throw invalidError({ group: type.group, kind: type.kind }, name, causes);
  }

  private checkNamespace(type: ResourceType, obj: KubeObject): void {
    const namespace = obj.metadata.namespace;
    if (!type.namespaced || !namespace) return;
    const nsType = this.registry.get('', 'v1', 'namespaces')!;
    const ns = this.store.get(typeKey('', 'namespaces'), undefined, namespace);
    if (!ns) throw notFound(nsType, namespace);
    if (ns.metadata.deletionTimestamp) {
      throw new StatusError(
        403,
        'Forbidden',
        `${qualifiedResource(type)} "${obj.metadata.name ?? ''}" is forbidden: unable to create new content in namespace ${namespace} because it is being terminated`,
        { group: type.group, kind: type.resource },
      );
    }
  }

  private attributes(
    type: ResourceType,
    subresource: string,
    operation: AdmissionAttributes['operation'],
    object: KubeObject | null,
    oldObject: KubeObject | null,
    ctx: RequestContext,
    options: JsonObject,
    kind?: { group: string; version: string; kind: string },
  ): AdmissionAttributes {
    const meta = (object ?? oldObject)?.metadata ?? {};
    return {
      resource: { group: type.group, version: type.version, resource: type.resource },
      subResource: subresource,
      kind: kind ?? { group: type.group, version: type.version, kind: type.kind },
      name: meta.name ?? '',
      namespace: type.namespaced ? (meta.namespace ?? '') : '',
      operation,
      userInfo: ctx.user,
      object,
      oldObject,
      options,
      dryRun: ctx.dryRun,
      clusterScoped: !type.namespaced,
    };
  }

  private async mutate(
    type: ResourceType,
    subresource: string,
    operation: AdmissionAttributes['operation'],
    object: KubeObject,
    oldObject: KubeObject | null,
    ctx: RequestContext,
    options: JsonObject,
    kind?: { group: string; version: string; kind: string },
  ): Promise<KubeObject> {
    if (!this.admission) return object;
    const result = await this.admission.mutate(
      this.attributes(type, subresource, operation, object, oldObject, ctx, options, kind),
    );
    ctx.warnings.push(...result.warnings);
    return result.object ?? object;
  }

  private async validateAdmission(
    type: ResourceType,
    subresource: string,
    operation: AdmissionAttributes['operation'],
    object: KubeObject | null,
    oldObject: KubeObject | null,
    ctx: RequestContext,
    options: JsonObject,
    kind?: { group: string; version: string; kind: string },
  ): Promise<void> {
    if (!this.admission) return;
    const result = await this.admission.validate(
      this.attributes(type, subresource, operation, object, oldObject, ctx, options, kind),
    );
    ctx.warnings.push(...result.warnings);
  }
}
