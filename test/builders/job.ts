// V1Job builder; its Pods restart Never by default (a Job allows only Never and OnFailure).
import type { V1Job, V1JobSpec } from '@kubernetes/client-node';
import { TemplateBuilder } from './workload.ts';

export class JobBuilder extends TemplateBuilder<V1Job> {
  #suspend: boolean | undefined;
  #backoffLimit: number | undefined;

  constructor(name: string | { generateName: string }) {
    super(name);
    this.restartPolicy('Never');
  }

  suspend(suspend: boolean): this {
    this.#suspend = suspend;
    return this;
  }

  backoffLimit(limit: number): this {
    this.#backoffLimit = limit;
    return this;
  }

  obj(): V1Job {
    const spec: V1JobSpec = {
      ...(this.#suspend !== undefined ? { suspend: this.#suspend } : {}),
      ...(this.#backoffLimit !== undefined ? { backoffLimit: this.#backoffLimit } : {}),
      template: this.template(),
    };
    return { apiVersion: 'batch/v1', kind: 'Job', metadata: this.metadata(), spec };
  }
}
