// The rollout arithmetic of the Deployment controller (pkg/controller/deployment rolling.go, recreate.go,
// sync.go `scale`), pure: given a Deployment and its ReplicaSets, the replica counts of one sync.
import type { KubeObject } from '../types.ts';
import { nameOf, num, obj, parseTime, scaledValue } from './common.ts';
import { desiredReplicas } from './replicasets.ts';

export const REVISION_ANNOTATION = 'deployment.kubernetes.io/revision';
export const DESIRED_ANNOTATION = 'deployment.kubernetes.io/desired-replicas';
export const MAX_ANNOTATION = 'deployment.kubernetes.io/max-replicas';

/** What the rollout arithmetic needs of a Deployment. */
export interface DeploymentView {
  replicas: number;
  maxSurge: number;
  maxUnavailable: number;
  recreate: boolean;
  paused: boolean;
  /** status.replicas, the fallback base of proportional scaling. */
  statusReplicas: number;
}

/** What it needs of a ReplicaSet. */
export interface RsView {
  name: string;
  replicas: number;
  availableReplicas: number;
  created: number;
  revision: number;
  desiredAnnotation: number | undefined;
  maxAnnotation: number | undefined;
}

export interface RolloutPlan {
  /** Create the new ReplicaSet with this many replicas. */
  create?: number;
  /** spec.replicas to set, by ReplicaSet name; ReplicaSets listed also get fresh replica annotations. */
  targets: Map<string, number>;
}

/** deploymentutil.ResolveFenceposts: maxSurge rounds up, maxUnavailable down, never both zero. */
export function fenceposts(d: KubeObject): { maxSurge: number; maxUnavailable: number } {
  const spec = obj(d.spec);
  const strategy = obj(spec.strategy);
  if (strategy.type === 'Recreate') return { maxSurge: 0, maxUnavailable: 0 };
  const rolling = obj(strategy.rollingUpdate);
  const desired = desiredReplicas(d);
  const maxSurge = scaledValue(rolling.maxSurge ?? '25%', desired, true);
  let maxUnavailable = scaledValue(rolling.maxUnavailable ?? '25%', desired, false);
  if (maxSurge === 0 && maxUnavailable === 0) maxUnavailable = 1;
  return { maxSurge, maxUnavailable };
}

export function deploymentView(d: KubeObject): DeploymentView {
  const spec = obj(d.spec);
  const { maxSurge, maxUnavailable } = fenceposts(d);
  return {
    replicas: desiredReplicas(d),
    maxSurge,
    maxUnavailable,
    recreate: obj(spec.strategy).type === 'Recreate',
    paused: spec.paused === true,
    statusReplicas: num(obj(d.status).replicas, 0),
  };
}

const annotationNumber = (rs: KubeObject, key: string): number | undefined => {
  const v = rs.metadata.annotations?.[key];
  if (v === undefined || !/^\d+$/.test(v)) return undefined;
  return Number(v);
};

export function rsView(rs: KubeObject): RsView {
  return {
    name: nameOf(rs),
    replicas: desiredReplicas(rs),
    availableReplicas: num(obj(rs.status).availableReplicas, 0),
    created: parseTime(rs.metadata.creationTimestamp) ?? 0,
    revision: annotationNumber(rs, REVISION_ANNOTATION) ?? 0,
    desiredAnnotation: annotationNumber(rs, DESIRED_ANNOTATION),
    maxAnnotation: annotationNumber(rs, MAX_ANNOTATION),
  };
}

const sum = (rss: RsView[], f: (r: RsView) => number): number => rss.reduce((n, r) => n + f(r), 0);
export const oldestFirst = (a: RsView, b: RsView): number =>
  a.created - b.created || (a.name < b.name ? -1 : a.name > b.name ? 1 : 0);

/** isScalingEvent: an active ReplicaSet was sized for another replica count. */
export function isScalingEvent(d: DeploymentView, rss: RsView[]): boolean {
  return rss.some(
    (r) => r.replicas > 0 && r.desiredAnnotation !== undefined && r.desiredAnnotation !== d.replicas,
  );
}

/** The `scale` step: resize the active ReplicaSets when the Deployment's replica count changed. */
export function scaleTargets(
  d: DeploymentView,
  newRS: RsView | undefined,
  olds: RsView[],
): Map<string, number> {
  const targets = new Map<string, number>();
  const all = newRS ? [newRS, ...olds] : olds;
  const active = all.filter((r) => r.replicas > 0);
  if (active.length <= 1) {
    const latest = [...olds].sort((a, b) => b.revision - a.revision || b.created - a.created)[0];
    const target = active[0] ?? newRS ?? latest;
    if (target) targets.set(target.name, d.replicas);
    return targets;
  }
  if (
    newRS &&
    newRS.replicas === d.replicas &&
    newRS.desiredAnnotation === d.replicas &&
    newRS.availableReplicas === d.replicas
  ) {
    for (const r of olds) if (r.replicas > 0) targets.set(r.name, 0);
    return targets;
  }
  const allowed = d.replicas > 0 ? d.replicas + d.maxSurge : 0;
  const toAdd = allowed - sum(active, (r) => r.replicas);
  const sorted = [...active].sort((a, b) =>
    toAdd > 0
      ? b.replicas - a.replicas || b.created - a.created
      : toAdd < 0
        ? b.replicas - a.replicas || a.created - b.created
        : 0,
  );
  let added = 0;
  const sizes = new Map<string, number>();
  for (const r of sorted) {
    let proportion = 0;
    if (toAdd !== 0 && r.replicas > 0 && toAdd !== added) {
      let fraction: number;
      if (d.replicas === 0) fraction = -r.replicas;
      else {
        const before = r.maxAnnotation || d.statusReplicas;
        fraction = before ? Math.round((r.replicas * (d.replicas + d.maxSurge)) / before) - r.replicas : 0;
      }
      const remaining = toAdd - added;
      proportion = toAdd > 0 ? Math.min(fraction, remaining) : Math.max(fraction, remaining);
    }
    sizes.set(r.name, r.replicas + proportion);
    added += proportion;
  }
  sorted.forEach((r, i) => {
    let size = sizes.get(r.name) ?? r.replicas;
    if (i === 0 && toAdd !== 0) size = Math.max(0, size + toAdd - added);
    targets.set(r.name, size);
  });
  return targets;
}

/** rolloutRolling: reconcileNewReplicaSet, then (when it did not scale up) reconcileOldReplicaSets. */
export function rollingTargets(d: DeploymentView, newRS: RsView, olds: RsView[]): Map<string, number> {
  const targets = new Map<string, number>();
  if (newRS.replicas > d.replicas) {
    targets.set(newRS.name, d.replicas);
    return targets;
  }
  if (newRS.replicas < d.replicas) {
    const current = sum(olds, (r) => r.replicas) + newRS.replicas;
    const maxTotal = d.replicas + d.maxSurge;
    const up = Math.min(maxTotal - current, d.replicas - newRS.replicas);
    if (up > 0) {
      targets.set(newRS.name, newRS.replicas + up);
      return targets;
    }
  }
  const oldTotal = sum(olds, (r) => r.replicas);
  if (oldTotal === 0) return targets;
  const minAvailable = d.replicas - d.maxUnavailable;
  const newUnavailable = newRS.replicas - newRS.availableReplicas;
  const maxScaledDown = oldTotal + newRS.replicas - minAvailable - newUnavailable;
  if (maxScaledDown <= 0) return targets;
  const sizes = new Map(olds.map((r) => [r.name, r.replicas]));
  const byAge = [...olds].sort(oldestFirst);
  // cleanupUnhealthyReplicas: unavailable old replicas go first.
  let cleaned = 0;
  for (const r of byAge) {
    if (cleaned >= maxScaledDown) break;
    const size = sizes.get(r.name) ?? 0;
    if (size === 0 || size <= r.availableReplicas) continue;
    const down = Math.min(maxScaledDown - cleaned, size - r.availableReplicas);
    sizes.set(r.name, size - down);
    cleaned += down;
  }
  // scaleDownOldReplicaSetsForRollingUpdate: then available ones, down to minAvailable.
  const available = sum(olds, (r) => r.availableReplicas) + newRS.availableReplicas;
  const total = available - minAvailable;
  let scaled = 0;
  if (total > 0) {
    for (const r of byAge) {
      if (scaled >= total) break;
      const size = sizes.get(r.name) ?? 0;
      if (size === 0) continue;
      const down = Math.min(size, total - scaled);
      sizes.set(r.name, size - down);
      scaled += down;
    }
  }
  for (const r of olds) if (sizes.get(r.name) !== r.replicas) targets.set(r.name, sizes.get(r.name) ?? 0);
  return targets;
}

/** NewRSNewReplicas for a ReplicaSet about to be created. */
export function initialReplicas(d: DeploymentView, olds: RsView[]): number {
  if (d.recreate) return d.replicas;
  const current = sum(olds, (r) => r.replicas);
  const maxTotal = d.replicas + d.maxSurge;
  if (current >= maxTotal) return 0;
  return Math.min(maxTotal - current, d.replicas);
}

/**
 * One sync of a Deployment's ReplicaSets. `oldPodsRunning`: Pods of old ReplicaSets are not all terminal
 * or gone (Recreate waits for that before scaling up).
 */
export function planRollout(
  d: DeploymentView,
  newName: string,
  newRS: RsView | undefined,
  olds: RsView[],
  oldPodsRunning: boolean,
): RolloutPlan {
  const all = newRS ? [newRS, ...olds] : olds;
  if (d.paused || isScalingEvent(d, all)) return { targets: scaleTargets(d, newRS, olds) };
  if (d.recreate) {
    const active = olds.filter((r) => r.replicas > 0);
    if (active.length > 0) return { targets: new Map(active.map((r) => [r.name, 0])) };
    if (oldPodsRunning) return { targets: new Map() };
    if (!newRS) return { create: d.replicas, targets: new Map() };
    return { targets: newRS.replicas === d.replicas ? new Map() : new Map([[newRS.name, d.replicas]]) };
  }
  if (!newRS) {
    const create = initialReplicas(d, olds);
    const created: RsView = {
      name: newName,
      replicas: create,
      availableReplicas: 0,
      created: Number.MAX_SAFE_INTEGER,
      revision: 0,
      desiredAnnotation: d.replicas,
      maxAnnotation: d.replicas + d.maxSurge,
    };
    const targets = rollingTargets(d, created, olds);
    targets.delete(newName);
    return { create, targets };
  }
  return { targets: rollingTargets(d, newRS, olds) };
}
