// V1CronJob builder: every five minutes by default; its Jobs' Pods restart Never.
import type { V1CronJob, V1CronJobSpec } from '@kubernetes/client-node';
import { TemplateBuilder } from './workload.ts';

export class CronJobBuilder extends TemplateBuilder<V1CronJob> {
  #schedule = '*/5 * * * *';
  #suspend: boolean | undefined;
  #concurrencyPolicy: string | undefined;
  #backoffLimit: number | undefined;

  constructor(name: string | { generateName: string }) {
    super(name);
    this.restartPolicy('Never');
  }

  schedule(schedule: string): this {
    this.#schedule = schedule;
    return this;
  }

  suspend(suspend: boolean): this {
    this.#suspend = suspend;
    return this;
  }

  concurrencyPolicy(policy: 'Allow' | 'Forbid' | 'Replace'): this {
    this.#concurrencyPolicy = policy;
    return this;
  }

  /** The backoffLimit of its Jobs. */
  backoffLimit(limit: number): this {
    this.#backoffLimit = limit;
    return this;
  }

  obj(): V1CronJob {
    const spec: V1CronJobSpec = {
      schedule: this.#schedule,
      ...(this.#suspend !== undefined ? { suspend: this.#suspend } : {}),
      ...(this.#concurrencyPolicy !== undefined ? { concurrencyPolicy: this.#concurrencyPolicy } : {}),
      jobTemplate: {
        spec: {
          ...(this.#backoffLimit !== undefined ? { backoffLimit: this.#backoffLimit } : {}),
          template: this.template(),
        },
      },
    };
    return { apiVersion: 'batch/v1', kind: 'CronJob', metadata: this.metadata(), spec };
  }
}
