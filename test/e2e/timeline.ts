// Feeds a cluster's Pods into the shared Timeline (test/helpers/timeline.ts) through a watch.
import type { KubernetesObject } from '@kubernetes/client-node';
import { Informer } from '../../src/kube/informer.ts';
import { KubeTransport } from '../../src/kube/transport.ts';
import type { Timeline } from '../helpers/timeline.ts';
import type { E2eCluster } from './cluster.ts';

export { isGated, isRunning, Timeline } from '../helpers/timeline.ts';

/** Feeds the Pods of one namespace of a cluster into a timeline, through a watch (list + watch). */
export class PodWatch {
  readonly #informer: Informer<KubernetesObject>;
  readonly #transport: KubeTransport;
  readonly #stop = new AbortController();

  constructor(cluster: E2eCluster, namespace: string, timeline: Timeline) {
    this.#transport = new KubeTransport(cluster.kc);
    this.#informer = new Informer<KubernetesObject>({
      name: `e2e-pods-${cluster.name}`,
      transport: this.#transport,
      resource: { version: 'v1', plural: 'pods', namespace },
    });
    const feed = (pod: KubernetesObject, gone = false): void =>
      timeline.observe(
        cluster.name,
        pod.metadata?.name ?? '',
        pod.metadata?.uid ?? '',
        gone ? undefined : pod,
      );
    this.#informer.addEventHandler({
      onAdd: (p) => feed(p),
      onUpdate: (_old, p) => feed(p),
      onDelete: (p) => feed(p, true),
    });
  }

  async start(): Promise<void> {
    this.#informer.start(this.#stop.signal);
    await this.#informer.waitForSync();
  }

  async stop(): Promise<void> {
    this.#stop.abort();
    await this.#informer.stop();
    await this.#transport.close();
  }
}
