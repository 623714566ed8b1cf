// V1ReplicaSet builder.
import type { V1ReplicaSet } from '@kubernetes/client-node';
import { ReplicatedBuilder } from './workload.ts';

export class ReplicaSetBuilder extends ReplicatedBuilder<V1ReplicaSet> {
  obj(): V1ReplicaSet {
    return {
      apiVersion: 'apps/v1',
      kind: 'ReplicaSet',
      metadata: this.metadata(),
      spec: this.replicatedSpec(),
    };
  }
}
