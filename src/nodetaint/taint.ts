// The taint writer (aether S37 / #772 semantics): re-read the Node from the API server, write nothing
// when a taint with the key is already there (any value or effect), otherwise append the taint to the
// current list (every other taint kept) with a JSON merge patch carrying `metadata.resourceVersion`
// (an optimistic lock: a taint changed since the read makes the server answer 409 instead of being
// silently reverted). A 409 re-reads and retries, at most 5 attempts in all about 10 ms apart
// (client-go retry.DefaultRetry, as the agent's dropTaint uses); a conflict that persists is thrown.
// It only ever adds: nothing here can remove a taint.
import type { V1Node, V1Taint } from '@kubernetes/client-node';
import { isConflict, isNotFound, readJson, resourcePath } from '../kube/client.ts';
import { type Clock, realClock } from '../kube/clock.ts';
import type { KubeRequester } from '../kube/transport.ts';
import { DEFAULT_FIELD_MANAGER, type GuardTaint } from './config.ts';
import { hasTaint } from './decide.ts';

/** What the writer needs from the API server (raw transport in production, fakes in unit tests). */
export interface NodeApi {
  /** Reads the Node from the API server (never a cache); throws the API error (404 NotFound). */
  getNode(name: string, signal?: AbortSignal): Promise<V1Node>;
  /** Applies a JSON merge patch; throws the API error (409 when the resourceVersion is stale). */
  mergePatchNode(
    name: string,
    patch: NodeTaintPatch,
    options: { fieldManager: string; signal?: AbortSignal },
  ): Promise<V1Node>;
}

export interface NodeTaintPatch {
  metadata: { resourceVersion: string };
  spec: { taints: V1Taint[] };
}

export function nodeApi(transport: KubeRequester): NodeApi {
  const path = (name: string): string => resourcePath({ version: 'v1', plural: 'nodes' }, name);
  return {
    async getNode(name, signal) {
      return readJson<V1Node>(await transport.request({ path: path(name), ...(signal ? { signal } : {}) }));
    },
    async mergePatchNode(name, patch, options) {
      const res = await transport.request({
        method: 'PATCH',
        path: path(name),
        query: { fieldManager: options.fieldManager },
        body: patch,
        contentType: 'application/merge-patch+json',
        ...(options.signal ? { signal: options.signal } : {}),
      });
      return readJson<V1Node>(res);
    },
  };
}

/**
 * The merge patch adding `taint` to `node`, or undefined when a taint with its key is present. The
 * whole list is sent (merge patch replaces arrays), guarded by the resourceVersion it was read at.
 */
export function taintPatch(node: V1Node, taint: GuardTaint): NodeTaintPatch | undefined {
  if (hasTaint(node, taint.key)) return undefined;
  const resourceVersion = node.metadata?.resourceVersion;
  if (!resourceVersion) throw new Error(`node ${node.metadata?.name ?? ''} has no resourceVersion`);
  const added: V1Taint = { key: taint.key, value: taint.value, effect: taint.effect };
  return { metadata: { resourceVersion }, spec: { taints: [...(node.spec?.taints ?? []), added] } };
}

export interface ArmTaintOptions {
  /** Default `aether-controller`. */
  fieldManager?: string;
  /** Write attempts in all (default 5); the last conflict is thrown. */
  attempts?: number;
  /** Delay between attempts (default 10 ms), spread by up to +10 %. */
  retryDelayMs?: number;
  clock?: Clock;
  random?: () => number;
  signal?: AbortSignal;
}

export type ArmResult =
  | { outcome: 'armed'; node: V1Node; attempts: number }
  | { outcome: 'already-present'; node: V1Node; attempts: number }
  | { outcome: 'node-gone'; attempts: number };

export const DEFAULT_ARM_ATTEMPTS = 5;
export const DEFAULT_ARM_RETRY_DELAY_MS = 10;

/** Adds the taint to the Node unless its key is already there. Throws on a persistent conflict. */
export async function armTaint(
  api: NodeApi,
  nodeName: string,
  taint: GuardTaint,
  options: ArmTaintOptions = {},
): Promise<ArmResult> {
  const attempts = Math.max(1, Math.floor(options.attempts ?? DEFAULT_ARM_ATTEMPTS));
  const delayMs = options.retryDelayMs ?? DEFAULT_ARM_RETRY_DELAY_MS;
  const clock = options.clock ?? realClock;
  const random = options.random ?? Math.random;
  const fieldManager = options.fieldManager ?? DEFAULT_FIELD_MANAGER;
  const signal = options.signal;
  for (let attempt = 1; ; attempt++) {
    signal?.throwIfAborted();
    let node: V1Node;
    try {
      node = await api.getNode(nodeName, signal);
    } catch (err) {
      if (isNotFound(err)) return { outcome: 'node-gone', attempts: attempt - 1 };
      throw err;
    }
    const patch = taintPatch(node, taint);
    if (patch === undefined) return { outcome: 'already-present', node, attempts: attempt - 1 };
    try {
      const patched = await api.mergePatchNode(nodeName, patch, {
        fieldManager,
        ...(signal ? { signal } : {}),
      });
      return { outcome: 'armed', node: patched, attempts: attempt };
    } catch (err) {
      if (isNotFound(err)) return { outcome: 'node-gone', attempts: attempt };
      if (!isConflict(err) || attempt >= attempts) throw err;
    }
    await clock.sleep(delayMs * (1 + 0.1 * random()), signal);
  }
}
