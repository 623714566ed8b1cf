// BerthLease I/O at the API server, the reconciler's only Kubernetes edge: a direct GET (never the
// informer cache: ownership decisions read the stored object), the finalizer list written with a JSON
// merge patch carrying metadata.resourceVersion, and the status subresource replaced with a PUT that
// carries it too. A stale copy therefore fails with 409 instead of overwriting a newer write.

import { isNotFound, readJson, resourcePath } from '../kube/client.ts';
import type { KubeRequester } from '../kube/transport.ts';
import {
  API_VERSION,
  type BerthLease,
  type BerthLeaseStatus,
  berthLeaseSchema,
  GROUP,
  KIND,
  PLURAL,
  VERSION,
} from './api.ts';

export interface BerthLeaseApi {
  /** The stored object, or undefined when it does not exist. */
  get(namespace: string, name: string, signal?: AbortSignal): Promise<BerthLease | undefined>;
  /** Replaces `metadata.finalizers`, guarded by the copy's resourceVersion. */
  setFinalizers(lease: BerthLease, finalizers: string[], signal?: AbortSignal): Promise<BerthLease>;
  /** Replaces `status`, guarded by the copy's resourceVersion. */
  updateStatus(lease: BerthLease, status: BerthLeaseStatus, signal?: AbortSignal): Promise<BerthLease>;
}

/** A BerthLease from the API server; throws when it does not match the CRD's schema. */
export function parseBerthLease(json: unknown): BerthLease {
  const parsed = berthLeaseSchema.safeParse(json);
  if (parsed.success) return parsed.data;
  const issue = parsed.error.issues[0];
  const meta = (json as { metadata?: { namespace?: unknown; name?: unknown } } | null)?.metadata;
  const id = `${String(meta?.namespace ?? '')}/${String(meta?.name ?? '')}`;
  throw new Error(
    `BerthLease ${id} does not match its schema: ${issue?.path.join('.') || 'object'}: ${issue?.message ?? 'invalid'}`,
  );
}

const leasePath = (namespace: string, name: string): string =>
  resourcePath({ group: GROUP, version: VERSION, plural: PLURAL, namespace }, name);

function identity(lease: BerthLease): { namespace: string; name: string; resourceVersion: string } {
  const { namespace, name, resourceVersion } = lease.metadata;
  if (!namespace) throw new Error(`BerthLease ${name} has no namespace`);
  // Without a resourceVersion the write would be unconditional: refuse.
  if (!resourceVersion) throw new Error(`BerthLease ${namespace}/${name} has no resourceVersion`);
  return { namespace, name, resourceVersion };
}

export function kubeBerthLeaseApi(transport: KubeRequester): BerthLeaseApi {
  const opt = (signal: AbortSignal | undefined) => (signal === undefined ? {} : { signal });
  return {
    async get(namespace, name, signal) {
      try {
        const json = await readJson<unknown>(
          await transport.request({ path: leasePath(namespace, name), ...opt(signal) }),
        );
        return parseBerthLease(json);
      } catch (err) {
        if (isNotFound(err)) return undefined;
        throw err;
      }
    },
    async setFinalizers(lease, finalizers, signal) {
      const { namespace, name, resourceVersion } = identity(lease);
      const res = await transport.request({
        method: 'PATCH',
        path: leasePath(namespace, name),
        body: { metadata: { resourceVersion, finalizers } },
        contentType: 'application/merge-patch+json',
        ...opt(signal),
      });
      return parseBerthLease(await readJson<unknown>(res));
    },
    async updateStatus(lease, status, signal) {
      const { namespace, name } = identity(lease);
      const body = {
        apiVersion: API_VERSION,
        kind: KIND,
        metadata: lease.metadata,
        spec: lease.spec,
        status,
      };
      const res = await transport.request({
        method: 'PUT',
        path: `${leasePath(namespace, name)}/status`,
        body,
        ...opt(signal),
      });
      return parseBerthLease(await readJson<unknown>(res));
    },
  };
}
