// What a relist changes compared with the cache: the informer emits these as events, so changes missed
// while a watch was down (deletes included) still reach the handlers. Pure.
import type { KubernetesObject } from '@kubernetes/client-node';
import type { IndexedStore } from './store.ts';

export interface RelistDiff<T> {
  added: T[];
  /** Objects whose resourceVersion changed: [cached, listed]. */
  updated: Array<[T, T]>;
  /** Cached objects absent from the new list (their last known state). */
  deleted: T[];
}

/**
 * What a relist changes compared with the cache: adds for new keys, updates for keys whose
 * resourceVersion differs, deletes for keys that vanished (changes missed while the watch was down).
 */
export function diffRelist<T extends KubernetesObject>(
  cached: ReadonlyMap<string, T> | IndexedStore<T>,
  listed: ReadonlyMap<string, T>,
): RelistDiff<T> {
  const diff: RelistDiff<T> = { added: [], updated: [], deleted: [] };
  for (const [key, obj] of listed) {
    const old = cached.get(key);
    if (old === undefined) diff.added.push(obj);
    else if (old.metadata?.resourceVersion !== obj.metadata?.resourceVersion) diff.updated.push([old, obj]);
  }
  for (const [key, old] of cached.entries()) if (!listed.has(key)) diff.deleted.push(old);
  return diff;
}
