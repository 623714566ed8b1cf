// WorkloadAdmission's handler flow (docs/behaviour.md §4.4), shared by /mutate-managed-workloads and
// /validate-managed-workloads: the binding subresource, binding resolution, stamping on the mutating path,
// and on the validating path the rules of decide-validate.ts plus the lease-dependent ones (gate removal,
// activation, recordTarget). All I/O goes through the AdmissionIO passed in.

import { DEFAULT_STOP_LEAD_MS } from '../src/berth/api.ts';
import { type JsonObject, parseWorkload, type Workload } from '../src/workloads/model.ts';
import {
  decideUnadmittedUpdate,
  denyWith,
  removesGate,
  sameOwners,
  validateManagedObject,
} from './decide-validate.ts';
import type { AdmissionIO } from './io.ts';
import { activeAt, type LeaseCache, leaseFacts, ReviewLeases } from './leases.ts';
import { recordTarget } from './record-target.ts';
import {
  apiErrorMessage,
  type Binding,
  bindingFromAnnotations,
  expectedBinding,
  type ResolveContext,
  ResolveError,
} from './resolve.ts';
import { type AdmissionRequest, allow, type Decision, deny } from './review.ts';
import { stampPatch } from './stamp.ts';
import {
  hasGate,
  hasManagedUIDAnnotation,
  increasesActivity,
  type ReviewKind,
  reviewKind,
  templateOf,
} from './workload.ts';

export type AdmissionMode = 'mutate' | 'validate';

export interface WorkloadAdmissionDeps {
  /** Reads and writes for this review (bound to its deadline). */
  io: AdmissionIO;
  /** Wall-clock milliseconds, for activeAt. */
  now: () => number;
  /** `--stop-lead`, activeAt's lead (default DEFAULT_STOP_LEAD_MS, as the reconciler's). */
  stopLeadMs?: number;
  /** `--workload-operator-user`: the only username that may remove the scheduling gate. */
  operatorUser: string;
  /** The BerthLease informer's view, for the root of owned objects' chains; without it, live LISTs. */
  leaseCache?: LeaseCache;
}

const isRecord = (v: unknown): v is JsonObject => typeof v === 'object' && v !== null && !Array.isArray(v);

const malformed = (what: string): Decision => deny('malformed', `malformed AdmissionReview: ${what}`, 400);

/** §4.4 step 1, validateBinding: a managed Pod is bound only under its observed UID and once ungated. */
async function decideBinding(req: AdmissionRequest, deps: WorkloadAdmissionDeps): Promise<Decision> {
  const namespace = req.namespace ?? '';
  const name = req.name ?? '';
  if (namespace === '' || name === '') return malformed('a binding needs the Pod namespace and name');
  let raw: JsonObject | undefined;
  try {
    raw = await deps.io.getWorkload('Pod', namespace, name);
  } catch (err) {
    return deny('api-error', `get Pod ${JSON.stringify(name)}: ${apiErrorMessage(err)}`);
  }
  if (raw === undefined) {
    return deny('api-error', `get Pod ${JSON.stringify(name)}: pods ${JSON.stringify(name)} not found`);
  }
  const pod = parseWorkload(raw);
  if (!pod.ok) return deny('api-error', `get Pod ${JSON.stringify(name)}: malformed Pod: ${pod.error}`);
  if (!hasManagedUIDAnnotation(pod.value)) return allow();
  const binding = isRecord(req.object) ? req.object : {};
  const bindingMeta = isRecord(binding.metadata) ? binding.metadata : {};
  const uid = typeof bindingMeta.uid === 'string' ? bindingMeta.uid : '';
  if (uid === '' || uid !== (pod.value.metadata?.uid ?? '')) return denyWith('bindingUIDMismatch');
  if (hasGate(templateOf(pod.value, 'Pod'))) return denyWith('stillGated');
  return allow();
}

interface Parsed {
  raw: JsonObject;
  object: Workload;
  old: Workload | undefined;
  kind: ReviewKind;
  apiVersion: string;
  namespace: string;
}

function parseRequest(req: AdmissionRequest): Parsed | Decision {
  if (!isRecord(req.object)) return malformed(`request.object is required on ${req.operation}`);
  const parsed = parseWorkload(req.object);
  if (!parsed.ok) return malformed(`request.object.${parsed.error}`);
  let old: Workload | undefined;
  if (req.operation === 'UPDATE') {
    if (!isRecord(req.oldObject)) return malformed('request.oldObject is required on UPDATE');
    const parsedOld = parseWorkload(req.oldObject);
    if (!parsedOld.ok) return malformed(`request.oldObject.${parsedOld.error}`);
    old = parsedOld.value;
  }
  const kind = reviewKind(req.kind.group, req.kind.kind);
  const namespace = req.namespace ?? '';
  if (namespace === '' && kind !== 'Other') return malformed(`request.namespace is required for a ${kind}`);
  const apiVersion = req.kind.group === '' ? req.kind.version : `${req.kind.group}/${req.kind.version}`;
  // The request, not the body, says where the object lives and what it is.
  const located = (w: Workload): Workload => ({
    ...w,
    apiVersion,
    kind: req.kind.kind,
    metadata: { ...(w.metadata ?? {}), namespace },
  });
  return {
    raw: req.object,
    object: located(parsed.value),
    old: old === undefined ? undefined : located(old),
    kind,
    apiVersion,
    namespace,
  };
}

const isDecision = (v: Parsed | Decision): v is Decision => 'allowed' in v;

/**
 * §4.4 steps 4-5: the binding this review is judged under, or the decision when resolution settles it.
 * An admitted object keeps the identity its old version carries. Otherwise the binding is resolved
 * through the live owners (§4.3) of the new object and, when the UPDATE changes the owners, of the old
 * one as well: an object that its old owners bound to a lease stays bound to it, so dropping or replacing
 * the controller of a managed Pod (or ReplicaSet, or Job) cannot take it out of admission and, with it,
 * out of the rule that only the operator lifts the gate. Then step 7a judges the owner change.
 */
async function reviewBinding(
  p: Parsed,
  ctx: ResolveContext,
): Promise<{ binding: Binding | undefined } | Decision> {
  const { object: o, old } = p;
  if (old !== undefined && hasManagedUIDAnnotation(old)) return { binding: bindingFromAnnotations(old) };
  try {
    const binding = await expectedBinding(o, p.kind, p.apiVersion, old, ctx);
    if (binding !== undefined || old === undefined || sameOwners(o, old)) return { binding };
    return { binding: await expectedBinding(old, p.kind, p.apiVersion, o, ctx) };
  } catch (err) {
    if (!(err instanceof ResolveError)) throw err;
    // Step 5: an unadmitted object whose owners are unchanged, e.g. a Pod whose owner is gone. Not when
    // a read failed: the original allows then too, which let a legacy target be scaled up whenever the
    // webhook could not list the leases that would have denied it (fail-closed instead).
    const unmanagedUpdate =
      old !== undefined && !hasManagedUIDAnnotation(o) && sameOwners(o, old) && !err.undecided;
    return unmanagedUpdate ? allow() : deny(err.reason, err.message);
  }
}

async function leaseAuthorizes(
  leases: ReviewLeases,
  binding: Binding,
  now: number,
  stopLeadMs: number,
): Promise<{ ok: true; raw: JsonObject } | { ok: false; error?: Decision }> {
  let raw: JsonObject | undefined;
  try {
    raw = await leases.get(binding.name);
  } catch (err) {
    return {
      ok: false,
      error: deny('api-error', `get BerthLease ${JSON.stringify(binding.name)}: ${apiErrorMessage(err)}`),
    };
  }
  if (raw === undefined) return { ok: false };
  const lease = leaseFacts(raw);
  return lease.uid === binding.uid && activeAt(lease, now, stopLeadMs) ? { ok: true, raw } : { ok: false };
}

/** Steps 7c-7e and 8, after validateManagedObject passed. */
async function decideLeaseRules(
  req: AdmissionRequest,
  p: Parsed,
  binding: Binding,
  leases: ReviewLeases,
  deps: WorkloadAdmissionDeps,
): Promise<Decision> {
  const o = p.object;
  if (req.operation === 'UPDATE' && p.old !== undefined) {
    if (p.kind === 'Pod' && removesGate(o, p.old, p.kind)) {
      const auth = await leaseAuthorizes(
        leases,
        binding,
        deps.now(),
        deps.stopLeadMs ?? DEFAULT_STOP_LEAD_MS,
      );
      if (!auth.ok) return auth.error ?? denyWith('leaseNoLongerPermits');
      const pods = leaseFacts(auth.raw).workload?.pods ?? [];
      const uid = o.metadata?.uid ?? '';
      const name = o.metadata?.name ?? '';
      if (uid === '' || !pods.some((r) => r.uid === uid && r.name === name)) return denyWith('notRegistered');
      return allow();
    }
    if (p.kind !== 'Pod' && increasesActivity(o, p.old, p.kind)) {
      const auth = await leaseAuthorizes(
        leases,
        binding,
        deps.now(),
        deps.stopLeadMs ?? DEFAULT_STOP_LEAD_MS,
      );
      if (!auth.ok) return auth.error ?? denyWith('activationNotAuthorized');
    }
    return allow();
  }
  return recordTarget({
    io: deps.io,
    leases,
    namespace: p.namespace,
    binding,
    object: {
      apiVersion: p.apiVersion,
      kind: req.kind.kind,
      name: o.metadata?.name ?? '',
      uid: o.metadata?.uid ?? '',
    },
    workloadKind: p.kind,
    dryRun: req.dryRun === true,
  });
}

/** The whole of §4.4 for one review. Never throws for a decision; unexpected errors propagate. */
export async function decideWorkloadAdmission(
  req: AdmissionRequest,
  mode: AdmissionMode,
  deps: WorkloadAdmissionDeps,
): Promise<Decision> {
  if (req.subResource === 'binding') return decideBinding(req, deps);
  if (req.operation !== 'CREATE' && req.operation !== 'UPDATE') return allow();
  // The mutating webhook is registered for CREATE only and leaves UPDATEs unchanged: no reads.
  if (mode === 'mutate' && req.operation === 'UPDATE') return allow();
  const p = parseRequest(req);
  if (isDecision(p)) return p;
  const { object: o, old } = p;
  const leases = new ReviewLeases(deps.io, p.namespace, deps.leaseCache);

  const resolved = await reviewBinding(p, { io: deps.io, leases, namespace: p.namespace });
  if (!('binding' in resolved)) return resolved;
  const { binding } = resolved;
  if (binding === undefined) return allow();

  if (mode === 'mutate') {
    const patch = stampPatch(p.raw, p.kind, binding);
    return patch === undefined ? denyWith('missingTemplate') : allow({ patch });
  }

  if (old !== undefined && !hasManagedUIDAnnotation(old))
    return decideUnadmittedUpdate(o, old, p.kind) ?? allow();
  const isOperator = deps.operatorUser !== '' && req.userInfo.username === deps.operatorUser;
  const broken = validateManagedObject({ object: o, old, kind: p.kind, binding, isOperator });
  if (broken !== undefined) return broken;
  return decideLeaseRules(req, p, binding, leases, deps);
}
