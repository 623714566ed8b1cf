// The Deployment controller (pkg/controller/deployment): one ReplicaSet per Pod template, named
// `<deployment>-<pod-template-hash>` with the `pod-template-hash` label in its labels, selector and
// template, the deployment's annotations plus `deployment.kubernetes.io/{revision,desired-replicas,
// max-replicas}`, and a controller ownerReference with blockOwnerDeletion. Rollouts follow kube's
// arithmetic: RollingUpdate scales the new ReplicaSet up within maxSurge and old ones down while keeping
// maxUnavailable (unhealthy old replicas first, oldest ReplicaSet first); Recreate scales old ReplicaSets
// to zero, waits until their Pods are gone, then scales the new one up. Scaling a Deployment mid-rollout
// scales its active ReplicaSets proportionally; a paused Deployment only scales. Old ReplicaSets beyond
// revisionHistoryLimit are deleted. Status: replicas, updatedReplicas, readyReplicas, availableReplicas,
// unavailableReplicas, observedGeneration and the Available / Progressing / ReplicaFailure conditions.
// The arithmetic itself is in rollout.ts. `kubectl rollout undo` works (the template of the old ReplicaSet
// is found again and gets the next revision).
// Not simulated: progressDeadlineSeconds (ProgressDeadlineExceeded), the deprecated rollbackTo field,
// collisionCount (a hash collision with a foreign ReplicaSet is reported as a creation failure), adoption
// of ReplicaSets by selector.
import { rfc3339 } from '../objects.ts';
import type { Change } from '../store.ts';
import type { KubeObject } from '../types.ts';
import {
  type Condition,
  canonicalJson,
  conditionsOf,
  controllerUser,
  errorMessage,
  findCondition,
  isAlreadyExists,
  isControlledBy,
  isPodTerminal,
  keyOf,
  nameOf,
  namespaceOf,
  newControllerRef,
  num,
  type Obj,
  obj,
  omitEmpty,
  removeCondition,
  requestContext,
  setCondition,
  splitKey,
  strMap,
  templateHash,
} from './common.ts';
import {
  allKeys,
  getObject,
  ownerKey,
  ownerKeys,
  type SimContext,
  type SimController,
  TYPE_KEYS,
  writeStatus,
} from './context.ts';
import { desiredReplicas, ownedPods } from './replicasets.ts';
import {
  DESIRED_ANNOTATION,
  type DeploymentView,
  deploymentView,
  MAX_ANNOTATION,
  oldestFirst,
  planRollout,
  REVISION_ANNOTATION,
  rsView,
} from './rollout.ts';

const USER = controllerUser('deployment-controller');
const ctxFor = () => requestContext(USER, 'kube-controller-manager');

export const HASH_LABEL = 'pod-template-hash';
/** Deployment annotations that are not copied to its ReplicaSets (annotationsToSkip). */
const SKIPPED_ANNOTATIONS = new Set([
  'kubectl.kubernetes.io/last-applied-configuration',
  REVISION_ANNOTATION,
  'deployment.kubernetes.io/revision-history',
  DESIRED_ANNOTATION,
  MAX_ANNOTATION,
  'deprecated.deployment.rollback.to',
]);

/** The Pod template of a ReplicaSet without its pod-template-hash label (EqualIgnoreHash). */
function templateIgnoringHash(template: unknown): unknown {
  const t = structuredClone(obj(template));
  const meta = obj(t.metadata);
  const labels = strMap(meta.labels);
  delete labels[HASH_LABEL];
  t.metadata = { ...meta, labels };
  return t;
}

/** FindNewReplicaSet: the oldest ReplicaSet whose template equals the Deployment's, or its hash name. */
export function findNewReplicaSet(d: KubeObject, rss: KubeObject[], newName: string): KubeObject | undefined {
  const want = canonicalTemplate(obj(d.spec).template);
  const byAge = [...rss].sort((a, b) => oldestFirst(rsView(a), rsView(b)));
  return (
    byAge.find((rs) => canonicalTemplate(templateIgnoringHash(obj(rs.spec).template)) === want) ??
    byAge.find((rs) => nameOf(rs) === newName)
  );
}

function canonicalTemplate(template: unknown): string {
  const t = obj(template);
  const meta = obj(t.metadata);
  return canonicalJson({ ...t, metadata: { ...meta, labels: strMap(meta.labels) } });
}

/** The ReplicaSet the Deployment controller creates for the current template. */
export function newReplicaSetObject(
  d: KubeObject,
  hash: string,
  replicas: number,
  revision: number,
  view: DeploymentView,
): KubeObject {
  const spec = obj(d.spec);
  const template = structuredClone(obj(spec.template));
  const tmeta = obj(template.metadata);
  template.metadata = { ...tmeta, labels: { ...strMap(tmeta.labels), [HASH_LABEL]: hash } };
  const selector = structuredClone(obj(spec.selector));
  selector.matchLabels = { ...strMap(selector.matchLabels), [HASH_LABEL]: hash };
  const annotations: Record<string, string> = {};
  for (const [k, v] of Object.entries(d.metadata.annotations ?? {}))
    if (!SKIPPED_ANNOTATIONS.has(k)) annotations[k] = v;
  annotations[DESIRED_ANNOTATION] = String(view.replicas);
  annotations[MAX_ANNOTATION] = String(view.replicas + view.maxSurge);
  annotations[REVISION_ANNOTATION] = String(revision);
  const rsSpec: Obj = { replicas, selector, template };
  if (spec.minReadySeconds !== undefined) rsSpec.minReadySeconds = spec.minReadySeconds;
  return {
    apiVersion: 'apps/v1',
    kind: 'ReplicaSet',
    metadata: {
      name: `${nameOf(d)}-${hash}`,
      namespace: namespaceOf(d),
      labels: { ...strMap(tmeta.labels), [HASH_LABEL]: hash },
      annotations,
      ownerReferences: [newControllerRef(d, 'apps/v1', 'Deployment')],
    },
    spec: rsSpec,
  };
}

export interface ProgressNote {
  created?: string;
  createError?: { name: string; message: string };
}

/** calculateStatus + syncRolloutStatus of the Deployment controller. */
export function deploymentStatus(
  d: KubeObject,
  newRS: KubeObject | undefined,
  all: KubeObject[],
  nowIso: string,
  note: ProgressNote,
): Record<string, unknown> {
  const view = deploymentView(d);
  const st = (rs: KubeObject, f: string) => num(obj(rs.status)[f], 0);
  const replicas = all.reduce((n, rs) => n + st(rs, 'replicas'), 0);
  const updated = newRS ? st(newRS, 'replicas') : 0;
  const ready = all.reduce((n, rs) => n + st(rs, 'readyReplicas'), 0);
  const available = all.reduce((n, rs) => n + st(rs, 'availableReplicas'), 0);
  const total = all.reduce((n, rs) => n + desiredReplicas(rs), 0);
  const maxUnavailable = view.recreate ? 0 : Math.min(view.maxUnavailable, view.replicas);
  let conditions: Condition[] = conditionsOf(d.status);
  conditions =
    available >= view.replicas - maxUnavailable
      ? setCondition(
          conditions,
          {
            type: 'Available',
            status: 'True',
            reason: 'MinimumReplicasAvailable',
            message: 'Deployment has minimum availability.',
          },
          nowIso,
          true,
        )
      : setCondition(
          conditions,
          {
            type: 'Available',
            status: 'False',
            reason: 'MinimumReplicasUnavailable',
            message: 'Deployment does not have minimum availability.',
          },
          nowIso,
          true,
        );
  const complete =
    newRS !== undefined &&
    updated === view.replicas &&
    replicas === view.replicas &&
    available === view.replicas;
  const progressing = (status: Condition['status'], reason: string, message: string) => {
    conditions = setCondition(conditions, { type: 'Progressing', status, reason, message }, nowIso, true);
  };
  if (note.createError) {
    progressing(
      'False',
      'FailedRSCreate',
      `Failed to create new replica set "${note.createError.name}": ${note.createError.message}`,
    );
  } else if (view.paused) {
    progressing('Unknown', 'DeploymentPaused', 'Deployment is paused');
  } else if (note.created) {
    progressing('True', 'NewReplicaSetCreated', `Created new replica set "${note.created}"`);
  } else if (newRS && complete) {
    progressing(
      'True',
      'NewReplicaSetAvailable',
      `ReplicaSet "${nameOf(newRS)}" has successfully progressed.`,
    );
  } else if (newRS) {
    progressing('True', 'ReplicaSetUpdated', `ReplicaSet "${nameOf(newRS)}" is progressing.`);
  }
  const failing = [newRS, ...all].find(
    (rs) => rs && findCondition(conditionsOf(rs.status), 'ReplicaFailure'),
  );
  const failure = failing ? findCondition(conditionsOf(failing.status), 'ReplicaFailure') : undefined;
  if (failure) {
    conditions = setCondition(
      conditions,
      {
        type: 'ReplicaFailure',
        status: failure.status,
        reason: failure.reason ?? '',
        message: failure.message ?? '',
      },
      nowIso,
      true,
    );
  } else {
    conditions = removeCondition(conditions, 'ReplicaFailure');
  }
  return omitEmpty(
    {
      observedGeneration: d.metadata.generation,
      replicas,
      updatedReplicas: updated,
      readyReplicas: ready,
      availableReplicas: available,
      unavailableReplicas: Math.max(0, total - available),
      conditions,
    },
    [
      'observedGeneration',
      'replicas',
      'updatedReplicas',
      'readyReplicas',
      'availableReplicas',
      'unavailableReplicas',
      'conditions',
    ],
  );
}

// ---------------------------------------------------------------------------------------------------------
// The controller

export function deploymentController(ctx: SimContext): SimController {
  const { store, objects, types } = ctx;

  const ownedReplicaSets = (d: KubeObject): KubeObject[] =>
    store
      .list(TYPE_KEYS.replicasets, namespaceOf(d))
      .filter((rs) => isControlledBy(rs, d) && !rs.metadata.deletionTimestamp);

  /** Brings one ReplicaSet to `replicas` (when given) and the given annotations, guarded by its resourceVersion. */
  async function patchReplicaSet(
    rs: KubeObject,
    replicas: number | undefined,
    annotations: Record<string, string>,
  ): Promise<void> {
    const current = rs.metadata.annotations ?? {};
    const changedAnnotations = Object.entries(annotations).filter(([k, v]) => current[k] !== v);
    const resize = replicas !== undefined && replicas !== desiredReplicas(rs);
    if (!resize && changedAnnotations.length === 0) return;
    const patch: Obj = {
      metadata: {
        resourceVersion: rs.metadata.resourceVersion,
        annotations: Object.fromEntries(changedAnnotations),
      },
    };
    if (resize) patch.spec = { replicas };
    await objects.patch(
      types.replicasets,
      namespaceOf(rs),
      nameOf(rs),
      'merge',
      JSON.stringify(patch),
      '',
      ctxFor(),
      false,
    );
  }

  async function reconcile(key: string): Promise<number | undefined> {
    const { namespace, name } = splitKey(key);
    const d = getObject(store, TYPE_KEYS.deployments, namespace, name);
    if (!d || d.metadata.deletionTimestamp) return undefined;
    const selector = obj(obj(d.spec).selector);
    if (Object.keys(obj(selector.matchLabels)).length === 0 && !Array.isArray(selector.matchExpressions))
      return undefined;
    const view = deploymentView(d);
    const hash = templateHash(obj(d.spec).template);
    const newName = `${name}-${hash}`;
    const rss = ownedReplicaSets(d);
    let newRS = findNewReplicaSet(d, rss, newName);
    const olds = rss.filter((rs) => rs !== newRS);
    const oldPodsRunning =
      view.recreate &&
      olds.some(
        (rs) => num(obj(rs.status).replicas, 0) > 0 || ownedPods(ctx, rs).some((p) => !isPodTerminal(p)),
      );
    const plan = planRollout(
      view,
      newName,
      newRS ? rsView(newRS) : undefined,
      olds.map(rsView),
      oldPodsRunning,
    );
    const maxOldRevision = Math.max(0, ...olds.map((rs) => rsView(rs).revision));
    const note: ProgressNote = {};
    let failure: unknown;
    if (plan.create !== undefined) {
      try {
        newRS = await objects.create(
          types.replicasets,
          namespace,
          newReplicaSetObject(d, hash, plan.create, maxOldRevision + 1, view),
          ctxFor(),
        );
        note.created = nameOf(newRS);
      } catch (error) {
        const existing = isAlreadyExists(error)
          ? getObject(store, TYPE_KEYS.replicasets, namespace, newName)
          : undefined;
        if (existing && isControlledBy(existing, d) && !existing.metadata.deletionTimestamp) newRS = existing;
        else {
          failure = error;
          note.createError = { name: newName, message: errorMessage(error) };
        }
      }
    }
    if (failure === undefined) {
      const replicaAnnotations = {
        [DESIRED_ANNOTATION]: String(view.replicas),
        [MAX_ANNOTATION]: String(view.replicas + view.maxSurge),
      };
      for (const rs of olds) {
        if (plan.targets.has(nameOf(rs)))
          await patchReplicaSet(rs, plan.targets.get(nameOf(rs)), replicaAnnotations);
      }
      if (newRS && !note.created) {
        const revision = rsView(newRS).revision;
        await patchReplicaSet(newRS, plan.targets.get(nameOf(newRS)), {
          ...replicaAnnotations,
          [REVISION_ANNOTATION]: String(revision > maxOldRevision ? revision : maxOldRevision + 1),
        });
      }
      const latestOlds = ownedReplicaSets(d).filter((rs) => nameOf(rs) !== (newRS ? nameOf(newRS) : ''));
      if (!view.paused && latestOlds.every((rs) => desiredReplicas(rs) === 0))
        await cleanupOld(d, latestOlds);
    }
    const latest = getObject(store, TYPE_KEYS.deployments, namespace, name);
    if (!latest || latest.metadata.uid !== d.metadata.uid) return undefined;
    const current = newRS ? await syncRevision(latest, nameOf(newRS)) : latest;
    const all = ownedReplicaSets(current);
    const currentNew = newRS ? all.find((rs) => nameOf(rs) === nameOf(newRS as KubeObject)) : undefined;
    const status = deploymentStatus(current, currentNew, all, rfc3339(ctx.now()), note);
    await writeStatus(ctx, types.deployments, current, status, ctxFor());
    if (failure !== undefined) throw failure;
    return undefined;
  }

  /** SetDeploymentRevision: the Deployment carries the revision of its new ReplicaSet. */
  async function syncRevision(d: KubeObject, newName: string): Promise<KubeObject> {
    const stored = getObject(store, TYPE_KEYS.replicasets, namespaceOf(d), newName);
    const revision = stored?.metadata.annotations?.[REVISION_ANNOTATION];
    if (!revision || d.metadata.annotations?.[REVISION_ANNOTATION] === revision) return d;
    const patch = {
      metadata: {
        resourceVersion: d.metadata.resourceVersion,
        annotations: { [REVISION_ANNOTATION]: revision },
      },
    };
    const { object } = await objects.patch(
      types.deployments,
      namespaceOf(d),
      nameOf(d),
      'merge',
      JSON.stringify(patch),
      '',
      ctxFor(),
      false,
    );
    return object;
  }

  /** cleanupDeployment: delete the oldest idle ReplicaSets beyond revisionHistoryLimit. */
  async function cleanupOld(d: KubeObject, olds: KubeObject[]): Promise<void> {
    const limit = num(obj(d.spec).revisionHistoryLimit, 10);
    const idle = olds
      .filter(
        (rs) =>
          desiredReplicas(rs) === 0 &&
          num(obj(rs.status).replicas, 0) === 0 &&
          num(obj(rs.status).observedGeneration, 0) >= (rs.metadata.generation ?? 0),
      )
      .sort((a, b) => rsView(a).revision - rsView(b).revision || oldestFirst(rsView(a), rsView(b)));
    for (const rs of idle.slice(0, Math.max(0, olds.length - limit))) {
      await objects.delete(
        types.replicasets,
        namespaceOf(rs),
        nameOf(rs),
        { preconditions: { uid: rs.metadata.uid }, propagationPolicy: 'Background' },
        ctxFor(),
      );
    }
  }

  return {
    name: 'deployment',
    keysFor(change: Change): string[] {
      if (change.typeKey === TYPE_KEYS.deployments) return [keyOf(change.object)];
      if (change.typeKey === TYPE_KEYS.replicasets) return ownerKeys(change, 'Deployment');
      if (change.typeKey === TYPE_KEYS.pods && change.type !== 'MODIFIED') {
        // Recreate waits for old Pods to be gone: a Pod of its ReplicaSet wakes such a Deployment.
        const keys: string[] = [];
        for (const rsKey of ownerKeys(change, 'ReplicaSet')) {
          const { namespace, name } = splitKey(rsKey);
          const rs = getObject(store, TYPE_KEYS.replicasets, namespace, name);
          const key = rs ? ownerKey(rs, 'Deployment') : undefined;
          if (!key) continue;
          const d = getObject(store, TYPE_KEYS.deployments, namespace, splitKey(key).name);
          if (d && obj(obj(d.spec).strategy).type === 'Recreate') keys.push(key);
        }
        return keys;
      }
      return [];
    },
    initialKeys: () => allKeys(store, TYPE_KEYS.deployments),
    reconcile,
  };
}
