// Binding resolution (docs/behaviour.md §4.3): which BerthLease, if any, a workload belongs to, found
// through its live owner chain (walked by src/workloads/owner-chain.ts with this review's reads), never
// through labels or annotations in the request, then matched against the namespace's BerthLeases.
//
// Cost: a Pod without a controller owner, or owned by a kind that cannot be managed, and a Job without an
// owner, are decided without any read. A root object (Deployment, CronJob, ...) without an owner costs one
// LIST (limit=1) when its namespace holds no BerthLease. An owned object is always walked: one GET per
// owner, its root matched against the BerthLease informer's view (docs/admission.md, "Cached lease
// lookups"), or a LIST until that has synced.
import { AdmissionMessage, MANAGED_LEASE, MANAGED_UID } from '../src/berth/api.ts';
import { describeError, statusOf } from '../src/kube/client.ts';
import { KINDS, type Workload } from '../src/workloads/model.ts';
import {
  type ChainLink,
  followedOwner,
  type OwnerChain,
  OwnerChainError,
  type OwnerReads,
  type OwnerRef,
  walkOwnerChain,
} from '../src/workloads/owner-chain.ts';
import type { AdmissionIO, JsonObject } from './io.ts';
import { leaseFacts, type ReviewLeases, targets } from './leases.ts';
import {
  annotationsOf,
  hasManagedAnnotations,
  hasManagedMetadata,
  hasManagedUIDAnnotation,
  isRootKind,
  type ReviewKind,
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

/**
 * Where the walk need not read the top of the chain (docs/admission.md, "Reads per review"): a live
 * ReplicaSet or Job read from the API server that carries a lease's stamp, whose controller is a
 * Deployment or CronJob. Its stamp already rules out "unmanaged" (step 4 denies when no lease matches),
 * and the lease is matched on its controller reference as on the object; only denials can be missed,
 * and the Pod is then born gated, which the permit path lifts only after its own live walk (§2.7).
 */
const stampedBelowRoot = (owner: ChainLink, next: OwnerRef): boolean =>
  hasManagedUIDAnnotation(owner.object) &&
  ((owner.kind === 'ReplicaSet' && next.kind === 'Deployment') ||
    (owner.kind === 'Job' && next.kind === 'CronJob'));

/**
 * Whether the chain of `o` may end at a Job (a Pod's Job without a CronJob), which no lease can target:
 * the LIST of leases is then only sent once the walk has shown that the root is a CronJob.
 */
const mayEndAtJob = (o: Workload): boolean => followedOwner(o)?.kind === 'Job';

/** The live owner chain of `o`, the object first; its failures are resolution errors. */
async function ownerChain(
  o: Workload,
  kind: ReviewKind,
  apiVersion: string,
  ctx: ResolveContext,
): Promise<OwnerChain<ReviewKind>> {
  const reads: OwnerReads = {
    get: (owner, name) => ctx.io.getWorkload(owner, ctx.namespace, name),
    describe: apiErrorMessage,
  };
  try {
    return await walkOwnerChain({ object: o, kind, apiVersion }, reads, { endAt: stampedBelowRoot });
  } catch (err) {
    if (!(err instanceof OwnerChainError)) throw err;
    throw new ResolveError(err.reason, err.message, { undecided: err.readFailed });
  }
}

/**
 * §4.3 for an object whose resolution cannot be skipped: the chain to its root, the lease that targets
 * the root, and step 4 for every object of the chain.
 */
async function resolveChain(
  o: Workload,
  kind: ReviewKind,
  apiVersion: string,
  ctx: ResolveContext,
): Promise<Binding | undefined> {
  // An owned object's root is matched against the cached leases (docs/admission.md, "Cached lease
  // lookups"); the object itself as root against a live LIST. A LIST does not depend on the walk, so where
  // the walk will end at a root kind it is sent beside the walk's GETs: the review then waits for the
  // slower of them, not for their sum (a consistent LIST waits for the API server's watch cache;
  // docs/admission.md, "What it costs"). Its snapshot is still taken after the review began, which is all
  // the consistency the decision rests on.
  const lookup = (): Promise<JsonObject[]> =>
    listed(async () => (followedOwner(o) === undefined ? ctx.leases.all() : ctx.leases.forOwnedChain()));
  const early = mayEndAtJob(o) ? undefined : lookup();
  early?.catch(() => {}); // awaited below, unless the walk fails first
  const { links, unread } = await ownerChain(o, kind, apiVersion, ctx);
  const last = links[links.length - 1]!;
  const root =
    unread === undefined
      ? {
          kind: last.kind,
          apiVersion: last.apiVersion,
          name: last.object.metadata?.name ?? '',
          uid: last.object.metadata?.uid ?? '',
        }
      : { kind: unread.kind, apiVersion: KINDS[unread.kind].apiVersion, name: unread.name, uid: unread.uid };
  let binding: Binding | undefined;
  if (isRootKind(root.kind)) {
    const leases = await (early ?? lookup());
    const matches = leases.map(leaseFacts).filter((l) => targets(l, root));
    if (matches.length > 1) throw new ResolveError('multiple-leases', AdmissionMessage.multipleLeases);
    const lease = matches[0];
    if (lease !== undefined) binding = { name: lease.name, uid: lease.uid, targetUID: root.uid };
  }
  if (binding === undefined && links.some((link) => hasManagedAnnotations(link.object))) {
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
  kind: ReviewKind,
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
  return resolveChain(o, kind, apiVersion, ctx);
}
