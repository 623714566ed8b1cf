// V1StatefulSet builder.
import type { V1StatefulSet, V1StatefulSetSpec } from '@kubernetes/client-node';
import { ReplicatedBuilder } from './workload.ts';

export class StatefulSetBuilder extends ReplicatedBuilder<V1StatefulSet> {
  #serviceName: string | undefined;

  /** The governing Service (none by default). */
  serviceName(name: string): this {
    this.#serviceName = name;
    return this;
  }

  obj(): V1StatefulSet {
    const spec: V1StatefulSetSpec = this.replicatedSpec();
    if (this.#serviceName !== undefined) spec.serviceName = this.#serviceName;
    return { apiVersion: 'apps/v1', kind: 'StatefulSet', metadata: this.metadata(), spec };
  }
}
