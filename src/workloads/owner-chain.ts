// The owner chain of a workload (docs/behaviour.md §4.3 steps 1-2, used by §2.7 step 3): its live
// controller owners up to the root, Pod -> ReplicaSet -> Deployment, Pod -> StatefulSet, Pod -> Job ->
// CronJob, ... The one walk both the reconciler (permitting) and WorkloadAdmission (binding resolution)
// use; each brings its own reads (the reconciler's memoized ones, the review's deadline-bound ones) and
// its own naming of a failed read. Each parent must exist and still have the UID the ownerReference
// names: a missing or replaced parent is an error, never "this object is unmanaged" (docs/admission.md).
import {
  controllerOf,
  isOwnerKind,
  KINDS,
  kindOf,
  type OwnerKind,
  parseWorkload,
  qualifiedName,
  type Workload,
} from './model.ts';

/** The deepest owner chain followed: the object itself is depth 0. */
export const MAX_OWNER_DEPTH = 4;

/** The walk's messages; wire-compatible with the Go operator's (docs/behaviour.md §4.3). */
export const OwnerChainMessage = {
  tooDeep: 'workload owner chain exceeds supported depth',
  resolveOwnerPrefix: 'resolve controller owner: ',
  uidChanged: 'controller owner UID changed',
} as const;

export type OwnerChainReason = 'owner-chain-too-deep' | 'resolve-owner' | 'owner-uid-changed';

export class OwnerChainError extends Error {
  /** The failure, as admission labels its denials. */
  readonly reason: OwnerChainReason;
  /** A read failed (error, throttling, timeout): nothing definite was learnt about the chain. */
  readonly readFailed: boolean;
  constructor(reason: OwnerChainReason, message: string, readFailed = false) {
    super(message);
    this.name = 'OwnerChainError';
    this.reason = reason;
    this.readFailed = readFailed;
  }
}

/** How a walk reads owners; each caller brings its own. */
export interface OwnerReads {
  /**
   * The owner `kind`/`name` in the walked object's namespace, as the API server returns it (raw JSON or
   * an already parsed workload); undefined when it does not exist. Throws when the read fails.
   */
  get(kind: OwnerKind, name: string): Promise<unknown>;
  /** The text of a failed read in the error message, as the caller names API errors. */
  describe(err: unknown): string;
}

/** One object of a chain, with the kind and apiVersion it is known by. */
export interface ChainLink<K extends string = string> {
  object: Workload;
  kind: K | OwnerKind;
  /** The walked object's as its caller gives it; an owner's is its group's v1, where it was read. */
  apiVersion: string;
}

/** A controller ownerReference the walk follows. */
export interface OwnerRef {
  kind: OwnerKind;
  name: string;
  uid: string;
}

/** The controller owner a chain follows from `o`, if it is of a kind that can own a workload. */
export function followedOwner(o: Workload): OwnerRef | undefined {
  const ref = controllerOf(o);
  if (ref === undefined) return undefined;
  const kind = kindOf(ref.apiVersion, ref.kind);
  return isOwnerKind(kind) ? { kind, name: ref.name, uid: ref.uid } : undefined;
}

export interface OwnerChain<K extends string = string> {
  /** The walked object first, then each owner read, live and with the referenced UID. */
  links: ChainLink<K>[];
  /** The last link's controller owner when `endAt` ended the walk before reading it. */
  unread?: OwnerRef;
}

export interface WalkOptions {
  /**
   * Asked for each owner read (never for the walked object): end the walk at `next`, that owner's own
   * controller reference, without reading it. Only where the caller's decision can only become
   * stricter for it: what the read would have refused is then refused later (docs/admission.md, "Reads
   * per review").
   */
  endAt?: (owner: ChainLink, next: OwnerRef) => boolean;
}

/**
 * The chain of `start` (an object with its kind and apiVersion): the object first, then each live
 * controller owner, the root last. Throws OwnerChainError.
 */
export async function walkOwnerChain<K extends string>(
  start: ChainLink<K>,
  reads: OwnerReads,
  options: WalkOptions = {},
): Promise<OwnerChain<K>> {
  const links: ChainLink<K>[] = [start];
  for (let depth = 0; ; depth++) {
    if (depth > MAX_OWNER_DEPTH) throw new OwnerChainError('owner-chain-too-deep', OwnerChainMessage.tooDeep);
    const last = links[links.length - 1]!;
    const owner = followedOwner(last.object);
    if (owner === undefined) return { links };
    // The unread owner still counts towards the depth limit.
    if (depth > 0 && depth < MAX_OWNER_DEPTH && options.endAt?.(last, owner) === true)
      return { links, unread: owner };
    let raw: unknown;
    try {
      raw = await reads.get(owner.kind, owner.name);
    } catch (err) {
      throw new OwnerChainError(
        'resolve-owner',
        OwnerChainMessage.resolveOwnerPrefix + reads.describe(err),
        true,
      );
    }
    if (raw === undefined) {
      throw new OwnerChainError(
        'resolve-owner',
        `${OwnerChainMessage.resolveOwnerPrefix}${qualifiedName(owner.kind, owner.name)} not found`,
      );
    }
    const parsed = parseWorkload(raw);
    if (!parsed.ok) {
      throw new OwnerChainError(
        'resolve-owner',
        `${OwnerChainMessage.resolveOwnerPrefix}malformed owner: ${parsed.error}`,
      );
    }
    if ((parsed.value.metadata?.uid ?? '') !== owner.uid)
      throw new OwnerChainError('owner-uid-changed', OwnerChainMessage.uidChanged);
    links.push({ object: parsed.value, kind: owner.kind, apiVersion: KINDS[owner.kind].apiVersion });
  }
}
