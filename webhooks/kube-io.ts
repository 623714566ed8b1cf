// AdmissionIO over the API server: every read is a direct request (no informer cache; LISTs carry no
// resourceVersion, so they are consistent reads from storage, never a possibly stale watch cache), made
// through the project's client-node transport and aborted with the review's deadline.
import { API_VERSION, GROUP, MANAGED_UID, PLURAL, VERSION } from '../src/berth/api.ts';
import { isNotFound, readJson, resourcePath } from '../src/kube/client.ts';
import type { KubeRequester, RawRequest } from '../src/kube/transport.ts';
import { workloadPath } from '../src/workloads/paths.ts';
import type { AdmissionIO, JsonObject, LeaseList } from './io.ts';

const isRecord = (v: unknown): v is JsonObject => typeof v === 'object' && v !== null && !Array.isArray(v);

const leasesPath = (namespace: string, name?: string): string =>
  resourcePath({ group: GROUP, version: VERSION, plural: PLURAL, namespace }, name);

/** An AdmissionIO whose requests are aborted with `signal`. */
export function kubeAdmissionIO(transport: KubeRequester, signal?: AbortSignal): AdmissionIO {
  const send = async (req: RawRequest): Promise<unknown> =>
    readJson<unknown>(await transport.request(signal ? { ...req, signal } : req));
  const getOrUndefined = async (path: string): Promise<JsonObject | undefined> => {
    try {
      const body = await send({ path });
      if (!isRecord(body)) throw new Error(`GET ${path}: the API server answered with a non-object`);
      return body;
    } catch (err) {
      if (isNotFound(err)) return undefined;
      throw err;
    }
  };
  return {
    async listLeases(namespace: string, limit?: number): Promise<LeaseList> {
      const body = await send({ path: leasesPath(namespace), query: { limit } });
      const items = isRecord(body) && Array.isArray(body.items) ? body.items.filter(isRecord) : [];
      const metadata = isRecord(body) && isRecord(body.metadata) ? body.metadata : {};
      const more = typeof metadata.continue === 'string' && metadata.continue !== '';
      return { items, complete: !more };
    },
    getLease: (namespace, name) => getOrUndefined(leasesPath(namespace, name)),
    getWorkload: (kind, namespace, name) => {
      if (kind === 'Other') throw new Error('cannot read objects of kind Other');
      return getOrUndefined(workloadPath(kind, namespace, name));
    },
    async firstStamped(kind, namespace) {
      const body = await send({
        path: workloadPath(kind, namespace),
        query: { labelSelector: MANAGED_UID, limit: 1 },
      });
      const items = isRecord(body) && Array.isArray(body.items) ? body.items.filter(isRecord) : [];
      return items[0];
    },
    async updateLeaseStatus(lease: JsonObject): Promise<void> {
      const metadata = isRecord(lease.metadata) ? lease.metadata : {};
      const namespace = typeof metadata.namespace === 'string' ? metadata.namespace : '';
      const name = typeof metadata.name === 'string' ? metadata.name : '';
      await send({
        method: 'PUT',
        path: `${leasesPath(namespace, name)}/status`,
        body: { ...lease, apiVersion: API_VERSION },
      });
    },
  };
}
