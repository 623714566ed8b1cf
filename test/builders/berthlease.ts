// BerthLease builder (the project's own type): lease-only by default, leaseName the object's name, ttl 30 s,
// heartbeat 10 s, at-most-once. `.targets('Deployment', 'web').scales(3)` makes a managed one.
import {
  API_VERSION,
  type BerthLease,
  type BerthLeaseSpec,
  type BerthLeaseStatus,
  FINALIZER,
  KIND,
  type LeaseAction,
  type TargetRef,
  type WorkloadStatus,
} from '../../src/berth/api.ts';
import { KINDS, type WorkloadKind } from '../../src/workloads/model.ts';
import { ObjectBuilder } from './object.ts';

export class BerthLeaseBuilder extends ObjectBuilder<BerthLease> {
  #spec: BerthLeaseSpec;
  #status: BerthLeaseStatus | undefined;

  constructor(name: string) {
    super(name);
    this.#spec = {
      leaseName: name,
      holderIdentity: 'cluster-east',
      ttlSeconds: 30,
      heartbeatIntervalSeconds: 10,
      semantics: 'at-most-once',
    };
  }

  /** The finalizer the operator adds before it acquires anything. */
  withFinalizer(): this {
    return this.finalizers(FINALIZER);
  }

  leaseName(name: string): this {
    this.#spec.leaseName = name;
    return this;
  }

  holderIdentity(identity: string): this {
    this.#spec.holderIdentity = identity;
    return this;
  }

  ttlSeconds(seconds: number): this {
    this.#spec.ttlSeconds = seconds;
    return this;
  }

  heartbeatIntervalSeconds(seconds: number): this {
    this.#spec.heartbeatIntervalSeconds = seconds;
    return this;
  }

  /** The workload it manages: one of ours by kind (its apiVersion follows), or any `apiVersion`/`kind`. */
  targets(kind: WorkloadKind, name: string): this;
  targets(target: TargetRef): this;
  targets(target: WorkloadKind | TargetRef, name = ''): this {
    this.#spec.target =
      typeof target === 'string'
        ? { apiVersion: KINDS[target].apiVersion, kind: target, name }
        : { ...target };
    return this;
  }

  /** Scale to `replicas` while held, to 0 when released (a Deployment, StatefulSet or ReplicaSet target). */
  scales(replicas: number): this {
    return this.actions({ scale: { replicas } }, { scale: { replicas: 0 } });
  }

  /** Resume while held, suspend when released (a CronJob target). */
  suspends(): this {
    return this.actions({ suspend: false }, { suspend: true });
  }

  actions(acquire: LeaseAction, release: LeaseAction): this {
    this.#spec.acquireAction = structuredClone(acquire);
    this.#spec.releaseAction = structuredClone(release);
    return this;
  }

  status(status: BerthLeaseStatus): this {
    this.#status = structuredClone(status);
    return this;
  }

  /** status.workload, the rest of the status as it is. */
  workload(workload: WorkloadStatus): this {
    this.#status = { ...this.#status, workload: structuredClone(workload) };
    return this;
  }

  obj(): BerthLease {
    const { name = '', ...meta } = this.jsonMetadata();
    const lease: BerthLease = {
      apiVersion: API_VERSION,
      kind: KIND,
      metadata: { name, ...meta },
      spec: structuredClone(this.#spec),
    };
    if (this.#status !== undefined) lease.status = structuredClone(this.#status);
    return lease;
  }

  /** The spec alone (what a test creates through the API, with only a name). */
  spec(): BerthLeaseSpec {
    return structuredClone(this.#spec);
  }
}
