// An in-memory WorkloadApi with the API server's guards: merge patches naming a stale resourceVersion
// (or another uid) fail with 409, deletes check the UID precondition, and every call is recorded.

import type { DeleteOutcome, KubeObj, WorkloadApi } from '../../../src/berth/workload-io.ts';
import { KubeApiError } from '../../../src/kube/client.ts';
import type { WorkloadKind } from '../../../src/workloads/model.ts';

type Obj = Record<string, unknown>;
const isObj = (v: unknown): v is Obj => typeof v === 'object' && v !== null && !Array.isArray(v);

/** RFC 7386 merge patch. */
export function mergePatch(target: unknown, patch: unknown): unknown {
  if (!isObj(patch)) return patch;
  const out: Obj = isObj(target) ? { ...target } : {};
  for (const [k, v] of Object.entries(patch)) {
    if (v === null) delete out[k];
    else out[k] = mergePatch(out[k], v);
  }
  return out;
}

const status = (code: number, reason: string, message: string): KubeApiError =>
  new KubeApiError(code, { kind: 'Status', status: 'Failure', code, reason, message });

export class FakeWorkloadApi implements WorkloadApi {
  readonly objects = new Map<string, KubeObj>();
  readonly calls: string[] = [];
  /** The gracePeriodSeconds of every DELETE, in order (undefined: the object's own). */
  readonly graces: { name: string; gracePeriodSeconds: number | undefined }[] = [];
  /** Errors thrown by the next calls matching `verb kind/name` (or `verb kind`). */
  readonly failures = new Map<string, Error[]>();
  #rv = 1000;

  #key(kind: WorkloadKind, name: string): string {
    return `${kind}/${name}`;
  }

  #fail(call: string, kind: WorkloadKind): void {
    for (const key of [call, call.slice(0, call.lastIndexOf('/')), `${call.split(' ')[0]} ${kind}`]) {
      const queue = this.failures.get(key);
      const err = queue?.shift();
      if (err !== undefined) throw err;
    }
  }

  put(kind: WorkloadKind, obj: KubeObj): KubeObj {
    const stored = structuredClone(obj);
    stored.metadata.resourceVersion = String(++this.#rv);
    stored.metadata.uid ??= `uid-${obj.metadata.name}`;
    this.objects.set(this.#key(kind, obj.metadata.name), stored);
    return structuredClone(stored);
  }

  stored(kind: WorkloadKind, name: string): KubeObj | undefined {
    const o = this.objects.get(this.#key(kind, name));
    return o === undefined ? undefined : structuredClone(o);
  }

  async get(kind: WorkloadKind, _namespace: string, name: string): Promise<KubeObj | undefined> {
    const call = `get ${kind}/${name}`;
    this.calls.push(call);
    this.#fail(call, kind);
    return this.stored(kind, name);
  }

  async list(kind: WorkloadKind, _namespace: string, labelSelector?: string): Promise<KubeObj[]> {
    const call = `list ${kind}${labelSelector ? ` ${labelSelector}` : ''}`;
    this.calls.push(call);
    this.#fail(`list ${kind}`, kind);
    const [key, value] = (labelSelector ?? '').split('=');
    return [...this.objects.entries()]
      .filter(([k]) => k.startsWith(`${kind}/`))
      .map(([, o]) => structuredClone(o))
      .filter(
        (o) =>
          !key ||
          (value === undefined ? key in (o.metadata.labels ?? {}) : o.metadata.labels?.[key] === value),
      );
  }

  async mergePatch(
    kind: WorkloadKind,
    _namespace: string,
    name: string,
    patch: Record<string, unknown>,
    _signal?: AbortSignal,
  ): Promise<KubeObj> {
    const call = `patch ${kind}/${name}`;
    this.calls.push(call);
    this.#fail(call, kind);
    const current = this.objects.get(this.#key(kind, name));
    if (current === undefined) throw status(404, 'NotFound', `${kind} "${name}" not found`);
    const meta = (patch.metadata ?? {}) as { resourceVersion?: string; uid?: string };
    if (
      (meta.resourceVersion !== undefined && meta.resourceVersion !== current.metadata.resourceVersion) ||
      (meta.uid !== undefined && meta.uid !== current.metadata.uid)
    )
      throw status(
        409,
        'Conflict',
        `Operation cannot be fulfilled on ${kind} "${name}": the object has been modified`,
      );
    const next = mergePatch(current, patch) as KubeObj;
    next.metadata.resourceVersion = String(++this.#rv);
    this.objects.set(this.#key(kind, name), next);
    return structuredClone(next);
  }

  async delete(
    kind: WorkloadKind,
    _namespace: string,
    name: string,
    uid: string,
    _signal?: AbortSignal,
    gracePeriodSeconds?: number,
  ): Promise<DeleteOutcome> {
    const call = `delete ${kind}/${name}`;
    this.calls.push(call);
    this.graces.push({ name, gracePeriodSeconds });
    this.#fail(call, kind);
    const current = this.objects.get(this.#key(kind, name));
    if (current === undefined || current.metadata.uid !== uid) return 'gone';
    this.objects.delete(this.#key(kind, name));
    return 'deleted';
  }

  writes(): string[] {
    return this.calls.filter((c) => c.startsWith('patch ') || c.startsWith('delete '));
  }
}

export const conflictError = (): KubeApiError => status(409, 'Conflict', 'the object has been modified');
export const serverError = (message = 'etcd unavailable'): KubeApiError =>
  status(500, 'InternalError', message);
