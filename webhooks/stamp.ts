// stampBinding (docs/behaviour.md §4.4 step 6): on CREATE, a managed object gets the managed-lease annotations and label, and
// so does its Pod template (and a CronJob's jobTemplate), and the template gets the scheduling gate. The
// answer is a JSON Patch computed from the raw object, like controller-runtime's PatchResponseFromRaw.
import jsonpatch from 'fast-json-patch';
import { MANAGED_LEASE, MANAGED_UID, SCHEDULING_GATE } from '../src/berth/api.ts';
import type { JsonPatchOp } from '../src/kube/client.ts';
import type { JsonObject } from '../src/workloads/model.ts';
import type { Binding } from './resolve.ts';
import { type ReviewKind, templatePath } from './workload.ts';

const isRecord = (v: unknown): v is JsonObject => typeof v === 'object' && v !== null && !Array.isArray(v);

/** The object at `path`, creating (or replacing non-objects with) empty objects on the way. */
function objectAt(root: JsonObject, path: readonly string[]): JsonObject {
  let at = root;
  for (const key of path) {
    const next = at[key];
    if (isRecord(next)) at = next;
    else {
      const created: JsonObject = {};
      at[key] = created;
      at = created;
    }
  }
  return at;
}

function stampMetadata(holder: JsonObject, binding: Binding): void {
  const metadata = objectAt(holder, ['metadata']);
  const annotations = objectAt(metadata, ['annotations']);
  annotations[MANAGED_LEASE] = binding.name;
  annotations[MANAGED_UID] = binding.uid;
  objectAt(metadata, ['labels'])[MANAGED_UID] = binding.uid;
}

function addGate(template: JsonObject): void {
  const spec = objectAt(template, ['spec']);
  const gates = Array.isArray(spec.schedulingGates) ? spec.schedulingGates : [];
  if (!gates.some((g) => isRecord(g) && g.name === SCHEDULING_GATE)) {
    spec.schedulingGates = [...gates, { name: SCHEDULING_GATE }];
  }
}

/**
 * The stamped copy of `raw`, or undefined when the kind has no Pod template or the object lacks it (the
 * caller denies with "managed workload requires a Pod template").
 */
export function stampedObject(raw: JsonObject, kind: ReviewKind, binding: Binding): JsonObject | undefined {
  const path = templatePath(kind);
  if (path === undefined) return undefined;
  const out = structuredClone(raw);
  let template: JsonObject = out;
  if (path.length > 0) {
    const parent = path.slice(0, -1).reduce<unknown>((at, key) => (isRecord(at) ? at[key] : undefined), out);
    const found = isRecord(parent) ? parent[path[path.length - 1]!] : undefined;
    if (!isRecord(found)) return undefined;
    template = found;
  }
  stampMetadata(out, binding);
  if (template !== out) stampMetadata(template, binding);
  addGate(template);
  if (kind === 'CronJob') stampMetadata(objectAt(out, ['spec', 'jobTemplate']), binding);
  return out;
}

/** stampBinding as a JSON Patch against the raw object; undefined when the template is missing. */
export function stampPatch(raw: JsonObject, kind: ReviewKind, binding: Binding): JsonPatchOp[] | undefined {
  const stamped = stampedObject(raw, kind, binding);
  if (stamped === undefined) return undefined;
  return jsonpatch.compare(raw, stamped) as JsonPatchOp[];
}
