// Every change of the managed Pods as the clusters' watches deliver it, in arrival order, with the
// singleton invariant checked at each one: never Pods of one workload running in two clusters at once. A
// Pod counts as running from the moment it is bound to a node until it is gone or terminal (a terminating
// Pod still runs), which is conservative.
import type { V1Pod } from '@kubernetes/client-node';
import { SCHEDULING_GATE } from '../../src/berth/api.ts';

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

  last(cluster: string, change: Change, since = 0): TimelineEvent | undefined {
    return this.select({ cluster, change, since }).at(-1);
  }

  first(cluster: string, change: Change, since = 0): TimelineEvent | undefined {
    return this.select({ cluster, change, since })[0];
  }

  /** Per ungated Pod: from its creation to the removal of its gate, as the watch saw them (ms). */
  gateLatencies(): number[] {
    const added = new Map<string, number>();
    const out: number[] = [];
    for (const e of this.events) {
      const key = `${e.cluster}/${e.pod}`;
      if (e.change === 'added') added.set(key, e.at);
      if (e.change === 'ungated' && added.has(key)) out.push(e.at - (added.get(key) ?? e.at));
    }
    return out;
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
