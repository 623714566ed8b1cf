// The pure rules of the validating path (docs/behaviour.md §4.4 steps 7a and 7b): what a managed object must look like, who
// may change what, and what an unadmitted object that now resolves to a lease may still do. No I/O; the
// lease-dependent rules (7c-7e) live in decide-workload.ts.
import { isDeepStrictEqual } from 'node:util';
import { AdmissionMessage, MANAGED_LEASE, MANAGED_UID } from '../src/berth/api.ts';
import { type Metadata, ownerReferencesOf, type Workload } from '../src/workloads/model.ts';
import type { Binding } from './resolve.ts';
import { type Denied, deny } from './review.ts';
import {
  annotationsOf,
  hasGate,
  hasManagedUIDAnnotation,
  isInactive,
  labelsOf,
  nodeNameOf,
  type ReviewKind,
  templateOf,
} from './workload.ts';

/** A denial for one of the fixed messages of §4.4; the reason label is the message's key. */
export const denyWith = (key: keyof typeof AdmissionMessage, code = 403): Denied =>
  deny(key, AdmissionMessage[key], code);

/** Whether an UPDATE leaves the ownerReferences as they were. */
export const sameOwners = (o: Workload, old: Workload): boolean =>
  isDeepStrictEqual(ownerReferencesOf(o), ownerReferencesOf(old));

/**
 * Step 7a: an UPDATE of an object whose old version was never admitted (no managed-lease-uid annotation)
 * but that resolves to a binding, through its new owners or, when the UPDATE changes them, its old ones.
 * It may be stopped, or (a Pod) touched without changing its spec, but not adopted, released from its
 * managed controller, started or given the managed identity.
 */
export function decideUnadmittedUpdate(o: Workload, old: Workload, kind: ReviewKind): Denied | undefined {
  if (!sameOwners(o, old)) return denyWith('cannotAdopt');
  const stoppedOrUntouched =
    kind === 'Pod' ? isDeepStrictEqual(o.spec ?? null, old.spec ?? null) : isInactive(o, kind);
  if (stoppedOrUntouched && !hasManagedUIDAnnotation(o)) return undefined;
  return denyWith('drainLegacy');
}

const carriesBinding = (m: Metadata | null | undefined, b: Binding): boolean =>
  annotationsOf(m)[MANAGED_LEASE] === b.name &&
  annotationsOf(m)[MANAGED_UID] === b.uid &&
  labelsOf(m)[MANAGED_UID] === b.uid;

/** Whether this write takes the scheduling gate off (old template gated, new one not). */
export function removesGate(o: Workload, old: Workload | undefined, kind: ReviewKind): boolean {
  if (old === undefined) return false;
  return hasGate(templateOf(old, kind)) && !hasGate(templateOf(o, kind));
}

export interface ManagedObjectInput {
  object: Workload;
  /** The old object on UPDATE. */
  old: Workload | undefined;
  kind: ReviewKind;
  binding: Binding;
  /** The request's username is the operator's service account. */
  isOperator: boolean;
}

/** Step 7b, validateManagedObject: the first rule broken, in the original's order. */
export function validateManagedObject(input: ManagedObjectInput): Denied | undefined {
  const { object: o, old, kind, binding, isOperator } = input;
  const isUpdate = old !== undefined;
  if (!carriesBinding(o.metadata, binding)) return denyWith('bindingChanged');
  const template = templateOf(o, kind);
  if (template === undefined) return denyWith('missingManagedTemplate');
  if (!carriesBinding(template.metadata, binding)) return denyWith('bindingChanged');
  if (kind === 'CronJob' && !carriesBinding(o.spec?.jobTemplate?.metadata, binding)) {
    return denyWith('bindingChanged');
  }
  if (nodeNameOf(template) !== '' && (kind !== 'Pod' || !isUpdate)) return denyWith('prebound');
  if (kind === 'Pod' && isUpdate) {
    if (!sameOwners(o, old)) return denyWith('ownerImmutable');
    if (nodeNameOf(template) !== nodeNameOf(templateOf(old, kind))) return denyWith('useBinding');
    if (removesGate(o, old, kind) && !isOperator) return denyWith('onlyOperatorUngates');
  }
  if ((!isUpdate || kind !== 'Pod') && !hasGate(template)) return denyWith('gateRequired');
  return undefined;
}
