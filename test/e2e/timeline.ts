// Every change of the managed Pods as the clusters' watches deliver it, in arrival order, with the
// singleton invariant checked at each one: never Pods of one workload running in two clusters at once. A
// Pod counts as running from the moment it is bound to a node until it is gone or terminal (a terminating
// Pod still runs), which is conservative.
import type { KubernetesObject, V1Pod } from '@kubernetes/client-node';
import { SCHEDULING_GATE } from '../../src/berth/api.ts';
import { KubeTransport } from '../../src/kube/client.ts';
import { Informer } from '../../src/kube/informer.ts';
import type { E2eCluster } from './cluster.ts';

export type Change = 'added' | 'ungated' | 'running' | 'stopped' | 'removed';

export interface TimelineEvent {
  at: number;
  cluster: string;
  pod: string;
  change: Change;
  /** Whether the Pod carried the Berth gate when it was first seen ('added'). */
  gated?: boolean;
}

interface PodState {
  running: boolean;
  gated: boolean;
}

export const isGated = (pod: V1Pod): boolean =>
  (pod.spec?.schedulingGates ?? []).some((g) => g.name === SCHEDULING_GATE);
export const isRunning = (pod: V1Pod): boolean =>
  !!pod.spec?.nodeName && pod.status?.phase !== 'Succeeded' && pod.status?.phase !== 'Failed';

export class Timeline {
  readonly events: TimelineEvent[] = [];
  readonly violations: Array<{ at: number; running: Record<string, number> }> = [];
  readonly #pods = new Map<string, Map<string, PodState>>();

  observe(cluster: string, name: string, uid: string, pod: V1Pod | undefined): void {
    const pods = this.#pods.get(cluster) ?? new Map<string, PodState>();
    this.#pods.set(cluster, pods);
    const before = pods.get(uid);
    const at = performance.now();
    const push = (change: Change, gated?: boolean): void => {
      this.events.push({ at, cluster, pod: name, change, ...(gated === undefined ? {} : { gated }) });
    };
    if (pod === undefined) {
      pods.delete(uid);
      if (before?.running) push('stopped');
      push('removed');
    } else {
      const now = { running: isRunning(pod), gated: isGated(pod) };
      pods.set(uid, now);
      if (before === undefined) push('added', now.gated);
      if (before?.gated !== false && !now.gated) push('ungated');
      if (now.running && !before?.running) push('running');
      if (!now.running && before?.running) push('stopped');
    }
    const running = this.running();
    if (Object.values(running).filter((n) => n > 0).length > 1) this.violations.push({ at, running });
  }

  /** Running Pods per cluster now. */
  running(): Record<string, number> {
    const out: Record<string, number> = {};
    for (const [cluster, pods] of this.#pods)
      out[cluster] = [...pods.values()].filter((p) => p.running).length;
    return out;
  }

  /** The cluster running exactly `n` Pods while the others run none, if any. */
  soleRunner(n: number): string | undefined {
    const active = Object.entries(this.running()).filter(([, count]) => count > 0);
    return active.length === 1 && active[0]?.[1] === n ? active[0][0] : undefined;
  }

  select(filter: { cluster?: string; change?: Change; since?: number; pod?: RegExp }): TimelineEvent[] {
    return this.events.filter(
      (e) =>
        (filter.cluster === undefined || e.cluster === filter.cluster) &&
        (filter.change === undefined || e.change === filter.change) &&
        e.at >= (filter.since ?? 0) &&
        (filter.pod === undefined || filter.pod.test(e.pod)),
    );
  }
}

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
