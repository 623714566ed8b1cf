// A managed Pod's ancestry for `permitPod` (docs/behaviour.md §2.7 step 3): the root of its live owner
// chain, walked by the shared src/workloads/owner-chain.ts with the reconciler's reads (direct GETs,
// each owner read once per permit pass) and its naming of API errors.
import { KINDS, type WorkloadKind } from '../workloads/model.ts';
import { walkOwnerChain } from '../workloads/owner-chain.ts';
import { apiMessage, type KubeObj, type WorkloadApi } from './workload-io.ts';

/** The object at the top of the chain: the workload a BerthLease can target. */
export interface AncestryRoot {
  kind: WorkloadKind;
  apiVersion: string;
  name: string;
  uid: string;
}

/** Reads one owner; undefined when it does not exist. */
export type OwnerGetter = (kind: WorkloadKind, name: string) => Promise<KubeObj | undefined>;

/**
 * The root of `object`'s (of `kind`) owner chain. Throws OwnerChainError with the webhook's messages:
 * `workload owner chain exceeds supported depth`, `resolve controller owner: ...`,
 * `controller owner UID changed`.
 */
export async function resolveRoot(
  object: KubeObj,
  kind: WorkloadKind,
  get: OwnerGetter,
): Promise<AncestryRoot> {
  const start = { object, kind, apiVersion: KINDS[kind].apiVersion };
  const { links } = await walkOwnerChain(start, { get, describe: apiMessage });
  const root = links[links.length - 1]!;
  return {
    kind: root.kind,
    apiVersion: root.apiVersion,
    name: root.object.metadata?.name ?? '',
    uid: root.object.metadata?.uid ?? '',
  };
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
