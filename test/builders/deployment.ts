// V1Deployment builder.
import type { V1Deployment } from '@kubernetes/client-node';
import { ReplicatedBuilder } from './workload.ts';

export class DeploymentBuilder extends ReplicatedBuilder<V1Deployment> {
  obj(): V1Deployment {
    return {
      apiVersion: 'apps/v1',
      kind: 'Deployment',
      metadata: this.metadata(),
      spec: this.replicatedSpec(),
    };
  }
}
