// The I/O WorkloadAdmission needs, as a small interface: direct (uncached) reads of BerthLeases, owners,
// targets and Pods, and the one write (BerthLease status at the target's final CREATE). The decisions take
// it as a parameter, so unit tests pass an in-memory fake; kube-io.ts implements it over the API server.
import type { JsonObject, WorkloadKind } from './workload.ts';

export type { JsonObject };

export interface LeaseList {
  items: JsonObject[];
  /** False when the server has more items than were returned (a `continue` token came back). */
  complete: boolean;
}

export interface AdmissionIO {
  /**
   * LIST of BerthLeases in a namespace, read from the API server's storage (no resourceVersion, so never
   * served from a watch cache). `limit` bounds the items returned; without it, every item.
   */
  listLeases(namespace: string, limit?: number): Promise<LeaseList>;
  /** GET of one BerthLease; undefined when it does not exist. */
  getLease(namespace: string, name: string): Promise<JsonObject | undefined>;
  /** GET of a Pod or a workload of a handled kind; undefined when it does not exist. */
  getWorkload(kind: WorkloadKind, namespace: string, name: string): Promise<JsonObject | undefined>;
  /** Status update (PUT of the status subresource) carrying the read resourceVersion; 409 on a race. */
  updateLeaseStatus(lease: JsonObject): Promise<void>;
}

export type ReadKind = 'list-leases' | 'get-lease' | 'get-workload';

/** Wraps an AdmissionIO so that every read is reported (per review and to the metrics). */
export function countingIO(io: AdmissionIO, onRead: (kind: ReadKind) => void): AdmissionIO {
  return {
    listLeases: (namespace, limit) => {
      onRead('list-leases');
      return io.listLeases(namespace, limit);
    },
    getLease: (namespace, name) => {
      onRead('get-lease');
      return io.getLease(namespace, name);
    },
    getWorkload: (kind, namespace, name) => {
      onRead('get-workload');
      return io.getWorkload(kind, namespace, name);
    },
    updateLeaseStatus: (lease) => io.updateLeaseStatus(lease),
  };
}
