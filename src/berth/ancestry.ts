// A managed Pod's ancestry through its live controller owners (docs/behaviour.md §4.3, as
// `permitPod` uses it in §2.7 step 3): Pod -> ReplicaSet -> Deployment, Pod -> StatefulSet,
// Pod -> ReplicaSet, Pod -> Job -> CronJob. Each parent is read from the API server and must still
// have the UID the ownerReference names; a missing or replaced parent is an error, never "unmanaged".
// The same rules and messages as WorkloadAdmission's resolution (the webhook has its own copy: the
// domain packages do not import each other).
import { AdmissionMessage, MAX_OWNER_DEPTH } from './api.ts';
import {
  apiMessage,
  controllerOf,
  KINDS,
  type KubeObj,
  kindOf,
  qualifiedName,
  uidOf,
  type WorkloadApi,
  type WorkloadKind,
} from './workload-io.ts';

/** The object at the top of the chain: the workload a BerthLease can target. */
export interface AncestryRoot {
  kind: WorkloadKind;
  apiVersion: string;
  name: string;
  uid: string;
}

export class AncestryError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'AncestryError';
  }
}

/** Reads one owner; undefined when it does not exist. */
export type OwnerGetter = (kind: WorkloadKind, name: string) => Promise<KubeObj | undefined>;

const OWNER_KINDS: ReadonlySet<WorkloadKind> = new Set([
  'Deployment',
  'ReplicaSet',
  'StatefulSet',
  'Job',
  'CronJob',
]);

/**
 * Follows the controller owners of `object` (of `kind`) to the root. Throws AncestryError with the
 * webhook's messages: `workload owner chain exceeds supported depth`, `resolve controller owner: ...`,
 * `controller owner UID changed`.
 */
export async function resolveRoot(
  object: KubeObj,
  kind: WorkloadKind,
  get: OwnerGetter,
): Promise<AncestryRoot> {
  let current = object;
  let currentKind = kind;
  for (let depth = 0; ; depth++) {
    if (depth > MAX_OWNER_DEPTH) throw new AncestryError(AdmissionMessage.ownerChainTooDeep);
    const ref = controllerOf(current);
    const ownerKind = ref === undefined ? undefined : kindOf(ref.apiVersion, ref.kind);
    if (ref === undefined || ownerKind === undefined || !OWNER_KINDS.has(ownerKind)) {
      return {
        kind: currentKind,
        apiVersion: KINDS[currentKind].apiVersion,
        name: current.metadata.name,
        uid: uidOf(current),
      };
    }
    let parent: KubeObj | undefined;
    try {
      parent = await get(ownerKind, ref.name);
    } catch (err) {
      throw new AncestryError(AdmissionMessage.resolveOwnerPrefix + apiMessage(err));
    }
    if (parent === undefined)
      throw new AncestryError(
        `${AdmissionMessage.resolveOwnerPrefix}${qualifiedName(ownerKind, ref.name)} not found`,
      );
    if (uidOf(parent) !== ref.uid) throw new AncestryError(AdmissionMessage.ownerUIDChanged);
    current = parent;
    currentKind = ownerKind;
  }
}

/**
 * An OwnerGetter over the API server that reads each owner at most once (for the Pods of one permit
 * pass, which mostly share their ReplicaSet or Job); nothing outlives the pass.
 */
export function memoizedOwners(api: WorkloadApi, namespace: string, signal?: AbortSignal): OwnerGetter {
  const seen = new Map<string, Promise<KubeObj | undefined>>();
  return (kind, name) => {
    const key = `${kind}/${name}`;
    let read = seen.get(key);
    if (read === undefined) {
      read = api.get(kind, namespace, name, signal);
      seen.set(key, read);
    }
    return read;
  };
}
