// WorkloadAdmission's handler flow (§4.4), shared by /mutate-managed-workloads and
// /validate-managed-workloads: the binding subresource, binding resolution, stamping on the mutating path,
// and on the validating path the rules of decide-validate.ts plus the lease-dependent ones (gate removal,
// activation, recordTarget). All I/O goes through the AdmissionIO passed in.
import { isDeepStrictEqual } from 'node:util';
import { decideUnadmittedUpdate, denyWith, removesGate, validateManagedObject } from './decide-validate.ts';
import type { AdmissionIO } from './io.ts';
import { activeAt, leaseFacts, ReviewLeases } from './leases.ts';
import { recordTarget } from './record-target.ts';
import {
  apiErrorMessage,
  type Binding,
  bindingFromAnnotations,
  expectedBinding,
  ResolveError,
} from './resolve.ts';
import { type AdmissionRequest, allow, type Decision, deny } from './review.ts';
import { stampPatch } from './stamp.ts';
import {
  hasGate,
  hasManagedUIDAnnotation,
  increasesActivity,
  type JsonObject,
  ownerReferencesOf,
  parseWorkload,
  templateOf,
  type Workload,
  type WorkloadKind,
  workloadKind,
} from './workload.ts';

export type AdmissionMode = 'mutate' | 'validate';

export interface WorkloadAdmissionDeps {
  /** Reads and writes for this review (bound to its deadline). */
  io: AdmissionIO;
  /** Wall-clock milliseconds, for activeAt. */
  now: () => number;
  /** `--workload-operator-user`: the only username that may remove the scheduling gate. */
  operatorUser: string;
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
  kind: WorkloadKind;
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
  const kind = workloadKind(req.kind.group, req.kind.kind);
  const namespace = req.namespace ?? '';
  if (namespace === '' && kind !== 'Other') return malformed(`request.namespace is required for a ${kind}`);
  const apiVersion = req.kind.group === '' ? req.kind.version : `${req.kind.group}/${req.kind.version}`;
  // The request, not the body, says where the object lives and what it is.
  const object: Workload = {
    ...parsed.value,
    apiVersion,
    kind: req.kind.kind,
    metadata: { ...(parsed.value.metadata ?? {}), namespace },
  };
  return { raw: req.object, object, old, kind, apiVersion, namespace };
}

const isDecision = (v: Parsed | Decision): v is Decision => 'allowed' in v;

async function leaseAuthorizes(
  leases: ReviewLeases,
  binding: Binding,
  now: number,
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
  return lease.uid === binding.uid && activeAt(lease, now) ? { ok: true, raw } : { ok: false };
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
      const auth = await leaseAuthorizes(leases, binding, deps.now());
      if (!auth.ok) return auth.error ?? denyWith('leaseNoLongerPermits');
      const pods = leaseFacts(auth.raw).workload?.pods ?? [];
      const uid = o.metadata?.uid ?? '';
      const name = o.metadata?.name ?? '';
      if (uid === '' || !pods.some((r) => r.uid === uid && r.name === name)) return denyWith('notRegistered');
      return allow();
    }
    if (p.kind !== 'Pod' && increasesActivity(o, p.old, p.kind)) {
      const auth = await leaseAuthorizes(leases, binding, deps.now());
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
  const leases = new ReviewLeases(deps.io, p.namespace);

  let binding: Binding | undefined;
  if (old !== undefined && hasManagedUIDAnnotation(old)) {
    binding = bindingFromAnnotations(old);
  } else {
    try {
      binding = await expectedBinding(o, p.kind, p.apiVersion, old, {
        io: deps.io,
        leases,
        namespace: p.namespace,
      });
    } catch (err) {
      if (!(err instanceof ResolveError)) throw err;
      const unmanagedUpdate =
        old !== undefined &&
        !hasManagedUIDAnnotation(o) &&
        isDeepStrictEqual(ownerReferencesOf(o), ownerReferencesOf(old));
      return unmanagedUpdate ? allow() : deny(err.reason, err.message);
    }
  }
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
