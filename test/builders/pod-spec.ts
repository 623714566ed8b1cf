// The Pod spec setters of every builder that carries one: the Pod's own, or its template's (workload
// builders). One container by default, so that the API server accepts the object.
import type { V1Container, V1PodSpec, V1Toleration } from '@kubernetes/client-node';
import { ObjectBuilder } from './object.ts';

export const DEFAULT_CONTAINER: V1Container = { name: 'app', image: 'registry.example.com/app:1' };

export abstract class PodSpecBuilder<T> extends ObjectBuilder<T> {
  #containers: V1Container[] = [DEFAULT_CONTAINER];
  #terminationGracePeriodSeconds: number | undefined;
  #restartPolicy: string | undefined;
  #nodeName: string | undefined;
  #tolerations: V1Toleration[] | undefined;
  #gates: string[] | undefined;

  /** The containers, in place of the default one. */
  containers(...containers: V1Container[]): this {
    this.#containers = containers;
    return this;
  }

  terminationGracePeriodSeconds(seconds: number): this {
    this.#terminationGracePeriodSeconds = seconds;
    return this;
  }

  restartPolicy(policy: string): this {
    this.#restartPolicy = policy;
    return this;
  }

  /** Bound to a node (or, in a template, every Pod of it). */
  nodeName(nodeName: string): this {
    this.#nodeName = nodeName;
    return this;
  }

  tolerations(...tolerations: V1Toleration[]): this {
    this.#tolerations = tolerations;
    return this;
  }

  /** Scheduling gates, by name (none: an empty list). */
  gates(...names: string[]): this {
    this.#gates = names;
    return this;
  }

  protected podSpec(): V1PodSpec {
    const spec: V1PodSpec = { containers: structuredClone(this.#containers) };
    if (this.#terminationGracePeriodSeconds !== undefined)
      spec.terminationGracePeriodSeconds = this.#terminationGracePeriodSeconds;
    if (this.#restartPolicy !== undefined) spec.restartPolicy = this.#restartPolicy;
    if (this.#nodeName !== undefined) spec.nodeName = this.#nodeName;
    if (this.#tolerations !== undefined) spec.tolerations = structuredClone(this.#tolerations);
    if (this.#gates !== undefined) spec.schedulingGates = this.#gates.map((name) => ({ name }));
    return spec;
  }
}
