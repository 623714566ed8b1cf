// The rendered installs as objects: reading them, applying them to a cluster with kubectl, and the RBAC they
// grant to the operator's service account (every rule with the scope it applies in).
import { AppsV1Api, CoreV1Api, type V1PolicyRule } from '@kubernetes/client-node';
import { kubectl } from '../../../scripts/deploy.ts';
import { APP_NAME, OPERATOR_NAMESPACE, SERVICE_ACCOUNT } from '../../../scripts/deploy-rbac.ts';
import { deployPath, type ManifestObject, parseManifests } from '../../../scripts/install-manifest.ts';
import { mergePatch } from '../../helpers/api.ts';
import type { TestCluster } from '../../helpers/cluster.ts';
import { eventually } from '../../helpers/eventually.ts';
import { whenSettled } from '../../helpers/rejection.ts';

/** `kubectl kustomize deploy/<overlay>` (e.g. the node-taint-guard example overlay). */
export async function renderOverlay(overlay: string): Promise<{ text: string; objects: ManifestObject[] }> {
  const text = await kubectl(['kustomize', deployPath(overlay).pathname]);
  return { text, objects: parseManifests(text) };
}

// ---- applying ----

export async function kubectlOk(t: TestCluster, args: string[], input?: string): Promise<string> {
  const r = await t.kubectl(args, input === undefined ? {} : { input });
  if (r.code !== 0) throw new Error(`kubectl ${args.join(' ')} failed: ${r.stderr.trim()}`);
  return r.stdout;
}

async function listed(t: TestCluster, namespaced: boolean, namespace?: string): Promise<string[]> {
  const kinds = (
    await kubectlOk(t, ['api-resources', `--namespaced=${namespaced}`, '--verbs=list', '-o', 'name'])
  )
    .split('\n')
    .filter((k) => k !== '' && k !== 'events' && k !== 'events.events.k8s.io');
  const names = await kubectlOk(t, [
    'get',
    kinds.join(','),
    '-o',
    'name',
    ...(namespace === undefined ? [] : ['-n', namespace]),
  ]);
  return names.split('\n').filter((n) => n !== '');
}

/**
 * Every listable object but Events, as kubectl names them: the cluster-scoped ones (`kind.group/name`), and
 * those of `namespaces` (`<namespace>/kind.group/name`). Compared before an install and after its
 * uninstall, the difference is what the uninstall leaves behind.
 */
export async function listedObjects(
  t: TestCluster,
  namespaces: readonly string[],
): Promise<{ cluster: Set<string>; namespaced: Set<string> }> {
  const namespaced: string[] = [];
  for (const ns of namespaces) namespaced.push(...(await listed(t, true, ns)).map((n) => `${ns}/${n}`));
  return { cluster: new Set(await listed(t, false)), namespaced: new Set(namespaced) };
}

/**
 * Applies a sample directory of deploy/ (`samples/deployment/`): its BerthLease first, retried while the
 * opt-in scope asks to (a replica that just started has not seen the namespace settled yet), then the
 * rest, as a user keeps the documented order: the lease before its target.
 */
export async function applySample(t: TestCluster, namespace: string, dir: string): Promise<void> {
  const path = deployPath(dir).pathname;
  await whenSettled(() => kubectlOk(t, ['apply', '-n', namespace, '-f', `${path}berthlease.yaml`]));
  await kubectlOk(t, ['apply', '-n', namespace, '-f', path]);
}

/** Applies an install (as the admin) and waits until the BerthLease API is served. */
export async function applyInstall(t: TestCluster, text: string): Promise<void> {
  await kubectlOk(t, ['apply', '-f', '-'], text);
  await kubectlOk(t, ['wait', '--for=condition=Established', 'crd/berthleases.berth.skaphos.io']);
  await eventually(() => kubectlOk(t, ['get', 'berthleases', '-A']), { timeoutMs: 30_000 });
}

/**
 * Scales the install's Deployment to 0 and waits until its Pods are gone. KWOK would make them Running and
 * Ready without running anything, and the webhook Service would then send the API server's admission
 * calls to their addresses, where nothing listens: the tests run the operator in this process instead and
 * route the Service to it (TestCluster.routeService).
 */
export async function withoutOperatorPods(t: TestCluster): Promise<void> {
  await t.kc
    .makeApiClient(AppsV1Api)
    .patchNamespacedDeploymentScale(
      { namespace: OPERATOR_NAMESPACE, name: APP_NAME, body: { spec: { replicas: 0 } } },
      mergePatch,
    );
  const core = t.kc.makeApiClient(CoreV1Api);
  await eventually(
    async () =>
      (
        await core.listNamespacedPod({
          namespace: OPERATOR_NAMESPACE,
          labelSelector: `app.kubernetes.io/name=${APP_NAME}`,
        })
      ).items.length === 0,
    { timeoutMs: 30_000 },
  );
}

// ---- the RBAC granted to the operator ----

export interface GrantedRule {
  /** `ClusterRole/<name>` or `Role/<namespace>/<name>`. */
  role: string;
  index: number;
  rule: V1PolicyRule;
  /** Where it applies: undefined cluster-wide (ClusterRoleBinding), else the RoleBinding's namespace. */
  namespace: string | undefined;
}

export const roleKey = (o: ManifestObject): string =>
  o.kind === 'Role' ? `Role/${o.metadata.namespace}/${o.metadata.name}` : `ClusterRole/${o.metadata.name}`;

export const describeRule = (g: GrantedRule): string => {
  const names = g.rule.resourceNames?.length ? ` named ${g.rule.resourceNames.join(',')}` : '';
  const groups = (g.rule.apiGroups ?? []).map((x) => (x === '' ? 'core' : x)).join(',');
  return `${g.role} rule ${g.index} (${(g.rule.verbs ?? []).join(',')} on ${groups} ${(g.rule.resources ?? []).join(',')}${names})`;
};

interface Binding {
  kind: string;
  metadata: { namespace?: string };
  roleRef: { kind: string; name: string };
  subjects?: { kind: string; name: string; namespace?: string }[];
}

/** Every rule bound to the operator's service account by the objects. */
export function operatorRules(objects: ManifestObject[]): GrantedRule[] {
  const bindsOperator = (b: Binding): boolean =>
    (b.subjects ?? []).some(
      (s) =>
        s.kind === 'ServiceAccount' &&
        s.name === SERVICE_ACCOUNT &&
        (s.namespace ?? b.metadata.namespace) === OPERATOR_NAMESPACE,
    );
  const out: GrantedRule[] = [];
  const seen = new Set<string>();
  for (const o of objects) {
    if (o.kind !== 'ClusterRoleBinding' && o.kind !== 'RoleBinding') continue;
    const binding = o as unknown as Binding;
    if (!bindsOperator(binding)) continue;
    const namespace = o.kind === 'RoleBinding' ? o.metadata.namespace : undefined;
    const role = objects.find(
      (r) =>
        r.kind === binding.roleRef.kind &&
        r.metadata.name === binding.roleRef.name &&
        (r.kind === 'ClusterRole' || r.metadata.namespace === namespace),
    );
    if (role === undefined) throw new Error(`${o.kind} ${o.metadata.name} refers to a missing role`);
    const key = `${roleKey(role)}@${namespace ?? ''}`;
    if (seen.has(key)) continue;
    seen.add(key);
    ((role.rules as V1PolicyRule[] | undefined) ?? []).forEach((rule, index) => {
      out.push({ role: roleKey(role), index, rule, namespace });
    });
  }
  return out;
}

/** Every object's identity (`kind/namespace/name`), for comparing what two renders contain. */
export const objectIds = (objects: ManifestObject[]): string[] =>
  objects.map((o) => `${o.kind}/${o.metadata.namespace ?? ''}/${o.metadata.name}`);

/** What Helm adds to every object, and the pod annotation that rolls the replicas on a config change. */
const HELM_KEYS = new Set([
  'helm.sh/chart',
  'app.kubernetes.io/instance',
  'app.kubernetes.io/version',
  'app.kubernetes.io/managed-by',
  'helm.sh/resource-policy',
  'checksum/config',
]);
/** Lists whose order carries no meaning (env order does, for $(VAR): compared through containerEnvironment). */
const BY_NAME = new Set(['env', 'volumes', 'volumeMounts']);

/** `value` without Helm's own labels and annotations, its by-name lists sorted: a chart's render as kustomize's. */
export function withoutHelm(value: unknown, key = ''): unknown {
  if (Array.isArray(value)) {
    const items = value.map((v) => withoutHelm(v));
    return BY_NAME.has(key)
      ? items.sort((a, b) =>
          String((a as { name?: string }).name).localeCompare(String((b as { name?: string }).name)),
        )
      : items;
  }
  if (value === null || typeof value !== 'object') return value;
  const out: Record<string, unknown> = {};
  for (const [k, v] of Object.entries(value)) {
    if (HELM_KEYS.has(k)) continue;
    const cleaned = withoutHelm(v, k);
    // A labels or annotations map that held only Helm's keys.
    if ((k === 'labels' || k === 'annotations') && Object.keys(cleaned as object).length === 0) continue;
    out[k] = cleaned;
  }
  return out;
}

/** The objects by identity, without Helm's keys (withoutHelm). */
export const byId = (objects: ManifestObject[]): Record<string, unknown> =>
  Object.fromEntries(objects.map((o, i) => [objectIds(objects)[i], withoutHelm(o)]));
