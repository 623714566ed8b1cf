// V1Pod builder: `new PodBuilder('web-1').namespace('shop').ownedBy(rs).gates(SCHEDULING_GATE).obj()`.
import type { V1Pod, V1PodCondition, V1PodStatus } from '@kubernetes/client-node';
import { wireTime } from './object.ts';
import { PodSpecBuilder } from './pod-spec.ts';

export class PodBuilder extends PodSpecBuilder<V1Pod> {
  #phase: string | undefined;
  #conditions: V1PodCondition[] | undefined;

  /** status.phase (none by default: a Pod no kubelet has seen). */
  phase(phase: string): this {
    this.#phase = phase;
    return this;
  }

  /** status.conditions, in place of any before (none: an empty list). */
  conditions(...conditions: V1PodCondition[]): this {
    this.#conditions = conditions;
    return this;
  }

  /** Adds the Ready condition, changed last at `since` (an RFC 3339 string or milliseconds) if given. */
  ready(ready: boolean, since?: number | string): this {
    const condition: V1PodCondition = { type: 'Ready', status: ready ? 'True' : 'False' };
    if (since !== undefined) condition.lastTransitionTime = wireTime(since);
    this.#conditions = [...(this.#conditions ?? []), condition];
    return this;
  }

  obj(): V1Pod {
    const pod: V1Pod = { apiVersion: 'v1', kind: 'Pod', metadata: this.metadata(), spec: this.podSpec() };
    if (this.#phase !== undefined || this.#conditions !== undefined) {
      const status: V1PodStatus = {};
      if (this.#phase !== undefined) status.phase = this.#phase;
      if (this.#conditions !== undefined) status.conditions = structuredClone(this.#conditions);
      pod.status = status;
    }
    return pod;
  }
}
