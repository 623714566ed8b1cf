// Binding resolution (docs/behaviour.md §4.3): which BerthLease, if any, a workload belongs to, found through its live
// controller owners, never through labels or annotations in the request. A missing or replaced parent is
// an error, never "unmanaged".
//
// Cost: a Pod without a controller owner, or owned by a kind that cannot be managed, and a Job without an
// owner, are decided without any read. A root object (Deployment, CronJob, ...) without an owner costs one
// LIST (limit=1) when its namespace holds no BerthLease. An owned object is always walked: one GET per
// owner, then the namespace's leases.
import { AdmissionMessage, MANAGED_LEASE, MANAGED_UID, MAX_OWNER_DEPTH } from '../src/berth/api.ts';
import { describeError, statusOf } from '../src/kube/client.ts';
import type { AdmissionIO } from './io.ts';
import { leaseFacts, type ReviewLeases, targets } from './leases.ts';
import {
  annotationsOf,
  controllerRef,
  groupOf,
  hasManagedAnnotations,
  hasManagedMetadata,
  isOwnerKind,
  isRootKind,
  OWNER_RESOURCES,
  parseWorkload,
  type Workload,
  type WorkloadKind,
  workloadKind,
} from './workload.ts';

export interface Binding {
  /** BerthLease name. */
  name: string;
  /** BerthLease UID. */
  uid: string;
  /** UID of the lease's target (the root of the chain); '' when it is not known yet (mutating CREATE). */
  targetUID: string;
}

/** A resolution failure; its message is the denial message. */
export class ResolveError extends Error {
  readonly reason: string;
  /**
   * A read of the API server failed (error, throttling, timeout): resolution found nothing definite, so
   * nothing may be concluded from it, not even that the object is unmanaged.
   */
  readonly undecided: boolean;
  constructor(reason: string, message: string, options: { undecided?: boolean } = {}) {
    super(message);
    this.name = 'ResolveError';
    this.reason = reason;
    this.undecided = options.undecided ?? false;
  }
}

export interface ResolveContext {
  io: AdmissionIO;
  leases: ReviewLeases;
  namespace: string;
}

/** The binding an object carries in its annotations (an admitted object keeps its identity). */
export function bindingFromAnnotations(o: Workload): Binding {
  const a = annotationsOf(o.metadata);
  return { name: a[MANAGED_LEASE] ?? '', uid: a[MANAGED_UID] ?? '', targetUID: '' };
}

/** The controller owner reference resolution follows, if the owner is of a kind that can be managed. */
function followedOwner(o: Workload): { kind: WorkloadKind; name: string; uid: string } | undefined {
  const ref = controllerRef(o);
  if (ref === undefined) return undefined;
  const kind = workloadKind(groupOf(ref.apiVersion), ref.kind);
  return isOwnerKind(kind) ? { kind, name: ref.name, uid: ref.uid } : undefined;
}

/** Go's NotFound text for a resource, e.g. `replicasets.apps "web-5d9c" not found`. */
function notFoundMessage(kind: WorkloadKind, name: string): string {
  const r = OWNER_RESOURCES[kind];
  const resource = r ? `${r.plural}.${r.group}` : kind.toLowerCase();
  return `${resource} ${JSON.stringify(name)} not found`;
}

/** The message of an API error (the Status message kube would print), without headers or bodies. */
export function apiErrorMessage(err: unknown): string {
  const status = statusOf(err);
  if (status?.message) return status.message;
  return describeError(err);
}

/** A failed LIST of BerthLeases is a resolution error like a failed owner GET. */
async function listed<T>(read: () => Promise<T>): Promise<T> {
  try {
    return await read();
  } catch (err) {
    throw new ResolveError('list-leases', `list BerthLeases: ${apiErrorMessage(err)}`, { undecided: true });
  }
}

async function resolveAt(
  o: Workload,
  kind: WorkloadKind,
  apiVersion: string,
  depth: number,
  ctx: ResolveContext,
): Promise<Binding | undefined> {
  if (depth > MAX_OWNER_DEPTH)
    throw new ResolveError('owner-chain-too-deep', AdmissionMessage.ownerChainTooDeep);
  let binding: Binding | undefined;
  const owner = followedOwner(o);
  if (owner !== undefined) {
    let raw: Record<string, unknown> | undefined;
    try {
      raw = await ctx.io.getWorkload(owner.kind, ctx.namespace, owner.name);
    } catch (err) {
      throw new ResolveError('resolve-owner', AdmissionMessage.resolveOwnerPrefix + apiErrorMessage(err), {
        undecided: true,
      });
    }
    if (raw === undefined) {
      throw new ResolveError(
        'resolve-owner',
        AdmissionMessage.resolveOwnerPrefix + notFoundMessage(owner.kind, owner.name),
      );
    }
    const parsed = parseWorkload(raw);
    if (!parsed.ok) {
      throw new ResolveError(
        'resolve-owner',
        `${AdmissionMessage.resolveOwnerPrefix}malformed owner: ${parsed.error}`,
      );
    }
    const parent = parsed.value;
    if ((parent.metadata?.uid ?? '') !== owner.uid) {
      throw new ResolveError('owner-uid-changed', AdmissionMessage.ownerUIDChanged);
    }
    const parentApiVersion = OWNER_RESOURCES[owner.kind]?.apiVersion ?? '';
    binding = await resolveAt(parent, owner.kind, parentApiVersion, depth + 1, ctx);
  } else if (isRootKind(kind)) {
    const ref = { apiVersion, kind, name: o.metadata?.name ?? '' };
    const matches = (await listed(() => ctx.leases.all())).map(leaseFacts).filter((l) => targets(l, ref));
    if (matches.length > 1) throw new ResolveError('multiple-leases', AdmissionMessage.multipleLeases);
    const lease = matches[0];
    if (lease !== undefined) binding = { name: lease.name, uid: lease.uid, targetUID: o.metadata?.uid ?? '' };
  }
  if (binding === undefined && hasManagedAnnotations(o)) {
    throw new ResolveError('no-live-lease', AdmissionMessage.noLiveLease);
  }
  return binding;
}

/**
 * expectedBinding (§4.3) with the cost rules above. `apiVersion` is the object's, from the request.
 * Undefined means unmanaged. Throws ResolveError; other errors are bugs or aborts.
 */
export async function expectedBinding(
  o: Workload,
  kind: WorkloadKind,
  apiVersion: string,
  old: Workload | undefined,
  ctx: ResolveContext,
): Promise<Binding | undefined> {
  if (followedOwner(o) === undefined && !isRootKind(kind)) {
    // Nothing to follow and nothing a lease can target: decided without a read.
    if (hasManagedAnnotations(o)) throw new ResolveError('no-live-lease', AdmissionMessage.noLiveLease);
    return undefined;
  }
  // An object without an owner to follow: only itself can carry a binding, and one LIST (limit=1) shows
  // whether any lease could target it. An owned object is always walked, like the Go operator: an ancestor
  // may carry the stamp of a lease that is gone (an orphaned, stamped ReplicaSet adopting a Pod), which
  // only the walk refuses — docs/admission.md "Owner chains".
  if (
    followedOwner(o) === undefined &&
    !hasManagedMetadata(o) &&
    !hasManagedMetadata(old) &&
    !(await listed(() => ctx.leases.any()))
  ) {
    return undefined;
  }
  return resolveAt(o, kind, apiVersion, 0, ctx);
}
