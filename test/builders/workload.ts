// The part the Pod-template kinds share (ReplicaSet, Deployment, StatefulSet, Job, CronJob): the template's
// labels, by default `app: <name>`, which the selector of the kinds that have one matches.
import type { V1PodTemplateSpec } from '@kubernetes/client-node';
import { PodSpecBuilder } from './pod-spec.ts';

export abstract class TemplateBuilder<T> extends PodSpecBuilder<T> {
  #templateLabels: Record<string, string>;

  constructor(name: string | { generateName: string }) {
    super(name);
    this.#templateLabels = { app: typeof name === 'string' ? name : name.generateName };
  }

  /** The template's labels (and the selector's matchLabels), in place of `app: <name>`. */
  templateLabels(labels: Record<string, string>): this {
    this.#templateLabels = labels;
    return this;
  }

  protected matchLabels(): Record<string, string> {
    return { ...this.#templateLabels };
  }

  protected template(): V1PodTemplateSpec {
    return { metadata: { labels: { ...this.#templateLabels } }, spec: this.podSpec() };
  }
}

/** The kinds with `spec.replicas`: one replica by default, as the API server defaults it. */
export abstract class ReplicatedBuilder<T> extends TemplateBuilder<T> {
  #replicas: number | undefined = 1;

  /** undefined: no `spec.replicas` (as a client may send it). */
  replicas(replicas: number | undefined): this {
    this.#replicas = replicas;
    return this;
  }

  /** replicas, selector and template, the spec the three kinds share. */
  protected replicatedSpec(): {
    replicas?: number;
    selector: { matchLabels: Record<string, string> };
    template: V1PodTemplateSpec;
  } {
    return {
      ...(this.#replicas !== undefined ? { replicas: this.#replicas } : {}),
      selector: { matchLabels: this.matchLabels() },
      template: this.template(),
    };
  }
}
