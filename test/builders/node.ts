// V1Node builder: no taints by default (`spec: {}`).
import type { V1Node, V1Taint } from '@kubernetes/client-node';
import { ObjectBuilder } from './object.ts';

export class NodeBuilder extends ObjectBuilder<V1Node> {
  #taints: V1Taint[] = [];

  /** Adds taints. */
  taints(...taints: V1Taint[]): this {
    this.#taints = [...this.#taints, ...taints];
    return this;
  }

  obj(): V1Node {
    const taints = structuredClone(this.#taints);
    return {
      apiVersion: 'v1',
      kind: 'Node',
      metadata: this.metadata(),
      spec: taints.length > 0 ? { taints } : {},
    };
  }
}
