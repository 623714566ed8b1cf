// deploy/install.yaml (plus the node-taint-guard component) applied to a cluster of its own, and the
// operator run as its service account, authorized by kube-apiserver's RBAC with exactly the install's
// roles, through every scenario (./scenarios.ts, ./managed.ts): no request may be forbidden, every
// permission granted must be used, and removing any single rule must break the scenario that needs it with
// a 403 that the rule would have allowed (the rules are minimal). Every request goes through an ApiProxy,
// which records it with its authorization attributes. One cluster for all.

import {
  AuthorizationV1Api,
  type KubeConfig,
  RbacAuthorizationV1Api,
  type V1ClusterRole,
  type V1PolicyRule,
  type V1Role,
} from '@kubernetes/client-node';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { WEBHOOK_CONFIGURATION_NAME } from '../../../scripts/deploy-rbac.ts';
import { type ManifestObject, readInstall } from '../../../scripts/install-manifest.ts';
import { type CentralServer, startCentralServer } from '../../../src/central/server.ts';
import { createLogger } from '../../../src/observability/logger.ts';
import { createRegistry } from '../../../src/observability/metrics.ts';
import { ApiProxy, describeRequest, type RecordedRequest } from '../../helpers/api-proxy.ts';
import { centralTls } from '../../helpers/central-tls.ts';
import { type ServiceAccountUser, TestCluster } from '../../helpers/cluster.ts';
import { eventually } from '../../helpers/eventually.ts';
import {
  applyInstall,
  describeRule,
  type GrantedRule,
  objectIds,
  operatorRules,
  renderOverlay,
  withoutOperatorPods,
} from './install.ts';
import { SCENARIOS } from './managed.ts';
import { Aborted, createGuardFixtures, OPERATOR_NS, type Scenario } from './scenarios.ts';

const SERVICE_ACCOUNT = 'berth-operator';

/**
 * Permissions granted although nothing requests them, each with the reason it is tolerated. Keyed by
 * `<role> <verb> <group>/<resource>[ <name>]`; an entry that no longer applies fails the test (remove it).
 * It comes from the domain module's rule data and is reported to its owner for removal.
 */
const UNEXERCISED: ReadonlyMap<string, string> = new Map([
  [
    'ClusterRole/berth-operator update berth.skaphos.io/berthleases/finalizers',
    'src/berth/rbac.ts keeps it for OwnerReferencesPermissionEnforcement, which only checks owner references ' +
      'with blockOwnerDeletion to a BerthLease; the operator creates none',
  ],
]);

let t: TestCluster;
let proxy: ApiProxy;
let central: CentralServer;
let applied: ManifestObject[];
let rules: GrantedRule[];
let operator: ServiceAccountUser;
let operatorKubeConfig: KubeConfig;
let runs = 0;
/** Per scenario: duration of its clean run, for picking the quickest one that needs a rule. */
const durations = new Map<string, number>();

/** Whether `rule` allows the request, matched as kube's RBAC authorizer matches (rbac/v1 helpers). */
function ruleAllows(r: RecordedRequest, rule: V1PolicyRule): boolean {
  const has = (list: string[] | undefined, value: string): boolean =>
    (list ?? []).some((v) => v === '*' || v === value);
  const combined = r.subresource === '' ? r.resource : `${r.resource}/${r.subresource}`;
  const resourceMatches = (rule.resources ?? []).some(
    (res) => res === '*' || res === combined || (r.subresource !== '' && res === `*/${r.subresource}`),
  );
  const names = rule.resourceNames ?? [];
  return (
    has(rule.verbs, r.verb) &&
    has(rule.apiGroups, r.apiGroup) &&
    resourceMatches &&
    (names.length === 0 || names.includes(r.name))
  );
}

function authorizedBy(g: GrantedRule, r: RecordedRequest): boolean {
  if (g.namespace !== undefined && g.namespace !== r.namespace) return false;
  return ruleAllows(r, g.rule);
}

/** What kube-apiserver's authorizer says now of the operator making request `r` (SubjectAccessReview). */
async function allowedNow(r: RecordedRequest): Promise<boolean> {
  const review = await t.kc.makeApiClient(AuthorizationV1Api).createSubjectAccessReview({
    body: {
      spec: {
        user: operator.username,
        groups: operator.groups,
        resourceAttributes: {
          verb: r.verb,
          group: r.apiGroup,
          resource: r.resource,
          subresource: r.subresource,
          namespace: r.namespace,
          name: r.name,
        },
      },
    },
  });
  return review.status?.allowed === true;
}

const authorized = (r: RecordedRequest): boolean => r.status !== 401 && r.status !== 403;

let cleanRecords: Promise<RecordedRequest[]> | undefined;
/** Every scenario once with the install's RBAC (once per file): the authorized requests they made. */
function cleanRun(): Promise<RecordedRequest[]> {
  cleanRecords ??= (async () => {
    for (const s of SCENARIOS) {
      const started = performance.now();
      await runScenario(s).catch((err: unknown) => {
        const denied = proxy.forbidden().map(describeRequest);
        throw new Error(
          `scenario ${s.name}: ${String(err)}${denied.length ? `; forbidden: ${denied.join('; ')}` : ''}`,
        );
      });
      durations.set(s.name, performance.now() - started);
    }
    return proxy.records.filter((r) => authorized(r) && durations.has(r.scenario));
  })();
  return cleanRecords;
}

async function runScenario(s: Scenario, signal: AbortSignal = new AbortController().signal): Promise<void> {
  proxy.scenario = s.name;
  try {
    await s.run({ t, install: applied, operatorKubeConfig, centralUrl: central.url, signal, run: ++runs });
  } finally {
    proxy.scenario = '';
  }
}

beforeAll(async () => {
  t = await TestCluster.own();
  // The agent namespace and Pod exist before the fail-closed webhooks do.
  await createGuardFixtures(t);
  await applyInstall(t, (await readInstall('install.yaml')).text);
  // Then the install with the guard component.
  const withGuard = await renderOverlay('kustomize/overlays/node-taint-guard');
  await applyInstall(t, withGuard.text);
  await withoutOperatorPods(t);
  applied = withGuard.objects;
  rules = operatorRules(applied);
  proxy = await ApiProxy.start(t);
  central = await startCentralServer({
    tls: await centralTls(),
    logger: createLogger({ level: 'silent' }),
    registry: createRegistry({ defaultMetrics: false }),
    gc: false,
  });
  operator = await t.serviceAccount(OPERATOR_NS, SERVICE_ACCOUNT);
  operatorKubeConfig = t.kubeConfigFor(proxy.kubeconfigFor(operator.kubeconfig));
}, 60_000);

afterAll(async () => {
  await central?.stop();
  await proxy?.stop();
  await t?.stop();
});

describe('deploy/install.yaml with RBAC enforced', () => {
  it('the node-taint-guard overlay is install.yaml plus the guard (so the scenarios test install.yaml)', async () => {
    const install = (await readInstall('install.yaml')).objects;
    const ids = new Set(objectIds(applied));
    expect(objectIds(install).filter((id) => !ids.has(id))).toEqual([]);
    for (const o of install) {
      if (o.kind === 'Deployment') continue;
      const same = applied.find(
        (a) =>
          a.kind === o.kind &&
          a.metadata.name === o.metadata.name &&
          a.metadata.namespace === o.metadata.namespace,
      );
      expect(same, `${o.kind} ${o.metadata.name}`).toEqual(o);
    }
    const extra = applied.filter((o) => !objectIds(install).includes(objectIds([o])[0]!));
    expect(
      extra.every((o) => o.kind.includes('Role') && o.metadata.name === 'berth-operator-node-taint-guard'),
    ).toBe(true);
    expect(rules.length).toBeGreaterThan(0);
  });

  it('sees name-scoped lists authorized by resourceNames, as kube-apiserver does', async () => {
    // kube-apiserver (requestinfo.go) takes the name of a list/watch from a `metadata.name=` field selector,
    // so the caBundle reconciler's watch is allowed by the resourceNames rule.
    const path = `/apis/admissionregistration.k8s.io/v1/mutatingwebhookconfigurations?fieldSelector=${encodeURIComponent(`metadata.name=${WEBHOOK_CONFIGURATION_NAME}`)}`;
    const kubeconfig = await t.writeKubeconfig(operator.kubeconfig);
    const r = await t.kubectl(['get', '--raw', path], { kubeconfig });
    expect(r.stderr).toBe('');
    expect(r.code).toBe(0);
    // And without the selector, the same list is not.
    const unnamed = await t.kubectl(
      ['get', '--raw', '/apis/admissionregistration.k8s.io/v1/mutatingwebhookconfigurations'],
      { kubeconfig },
    );
    expect(unnamed.stderr).toContain('forbidden');
  });

  it('runs every scenario as the operator service account without a single 403', async () => {
    await cleanRun();
    expect(proxy.forbidden().map(describeRequest)).toEqual([]);
    for (const s of SCENARIOS)
      expect(
        proxy.records.some((r) => r.scenario === s.name),
        s.name,
      ).toBe(true);
  }, 180_000);

  it('uses every permission it is granted', async () => {
    const clean = await cleanRun();
    const unused: string[] = [];
    const stale = new Set(UNEXERCISED.keys());
    for (const g of rules) {
      for (const { key, used } of permissions(g, clean)) {
        stale.delete(key);
        if (!used && !UNEXERCISED.has(key)) unused.push(key);
        if (used && UNEXERCISED.has(key)) unused.push(`${key} is used now: remove it from UNEXERCISED`);
      }
    }
    expect(unused).toEqual([]);
    expect([...stale], 'UNEXERCISED entries that match no permission').toEqual([]);
  }, 180_000);

  it('breaks a scenario with a matching 403 when any single rule is removed', async () => {
    const clean = await cleanRun();
    const rbac = t.kc.makeApiClient(RbacAuthorizationV1Api);
    const problems: string[] = [];
    /** Per rule removed: the scenario run and the first 403 it met. */
    const broken: string[] = [];
    for (const g of rules) {
      // Scenarios with a request that only this rule allows.
      const needing = SCENARIOS.filter((s) =>
        clean.some(
          (r) =>
            r.scenario === s.name && authorizedBy(g, r) && !rules.some((o) => o !== g && authorizedBy(o, r)),
        ),
      ).sort((a, b) => (durations.get(a.name) ?? 0) - (durations.get(b.name) ?? 0));
      const scenario = needing[0];
      // One of its requests that only this rule allows: the authorizer's answer to it shows the change.
      const sole = clean.find(
        (r) =>
          r.scenario === scenario?.name &&
          authorizedBy(g, r) &&
          !rules.some((o) => o !== g && authorizedBy(o, r)),
      );
      if (scenario === undefined || sole === undefined) {
        if (!permissions(g, clean).every((p) => UNEXERCISED.has(p.key)))
          problems.push(`${describeRule(g)}: no scenario needs it`);
        continue;
      }
      const restore = await removeRule(rbac, g, sole);
      const stop = new AbortController();
      let matched: RecordedRequest | undefined;
      const from = proxy.records.length;
      const unsubscribe = proxy.subscribe((r) => {
        if (r.status === 403 && authorizedBy(g, r)) {
          matched ??= r;
          stop.abort();
        }
      });
      try {
        await runScenario(scenario, stop.signal).then(
          () => problems.push(`${describeRule(g)}: removed, yet ${scenario.name} succeeded without a 403`),
          (err: unknown) => {
            if (matched === undefined && !(err instanceof Aborted))
              problems.push(
                `${describeRule(g)}: removed; ${scenario.name} failed without a matching 403: ${String(err)}`,
              );
          },
        );
      } finally {
        unsubscribe();
        await restore();
      }
      if (matched !== undefined)
        broken.push(`${describeRule(g)} -> ${scenario.name}: ${describeRequest(matched)}`);
      const other = proxy.records.slice(from).filter((r) => r.status === 403 && !authorizedBy(g, r));
      if (other.length > 0)
        problems.push(`${describeRule(g)}: removing it also caused ${other.map(describeRequest).join('; ')}`);
    }
    expect(problems).toEqual([]);
    if (process.env.BERTH_TEST_LOGS) process.stdout.write(`${broken.join('\n')}\n`);
    const exempt = rules.filter((g) => permissions(g, clean).every((p) => UNEXERCISED.has(p.key)));
    expect(broken).toHaveLength(rules.length - exempt.length);
  }, 300_000);
});

/** Each single permission a rule grants (verb x group x resource x name), and whether a request used it. */
function permissions(g: GrantedRule, requests: RecordedRequest[]): { key: string; used: boolean }[] {
  const out: { key: string; used: boolean }[] = [];
  for (const group of g.rule.apiGroups ?? [])
    for (const resource of g.rule.resources ?? [])
      for (const verb of g.rule.verbs ?? [])
        for (const name of g.rule.resourceNames?.length ? g.rule.resourceNames : [undefined]) {
          const [res, sub = ''] = resource.split('/');
          const used = requests.some(
            (r) =>
              authorizedBy(g, r) &&
              r.apiGroup === group &&
              r.resource === res &&
              r.subresource === sub &&
              r.verb === verb &&
              (name === undefined || r.name === name),
          );
          out.push({
            key: `${g.role} ${verb} ${group === '' ? 'core' : group}/${resource}${name ? ` ${name}` : ''}`,
            used,
          });
        }
  return out;
}

/**
 * Removes the rule from its (Cluster)Role as the admin; returns the function that puts it back. Each
 * returns once kube-apiserver's authorizer (which learns roles from a watch) answers `probe`, a request
 * only this rule allows, accordingly.
 */
async function removeRule(
  rbac: RbacAuthorizationV1Api,
  g: GrantedRule,
  probe: RecordedRequest,
): Promise<() => Promise<void>> {
  const [kind, ...rest] = g.role.split('/');
  const without = (rules: V1PolicyRule[] | undefined) => (rules ?? []).filter((_, i) => i !== g.index);
  const settled = (allowed: boolean) => eventually(async () => (await allowedNow(probe)) === allowed);
  if (kind === 'ClusterRole') {
    const name = rest[0]!;
    const role: V1ClusterRole = await rbac.readClusterRole({ name });
    const original = role.rules;
    await rbac.replaceClusterRole({ name, body: { ...role, rules: without(original) } });
    await settled(false);
    return async () => {
      const now = await rbac.readClusterRole({ name });
      await rbac.replaceClusterRole({ name, body: { ...now, rules: original ?? [] } });
      await settled(true);
    };
  }
  const [namespace, name] = rest as [string, string];
  const role: V1Role = await rbac.readNamespacedRole({ name, namespace });
  const original = role.rules;
  await rbac.replaceNamespacedRole({ name, namespace, body: { ...role, rules: without(original) } });
  await settled(false);
  return async () => {
    const now = await rbac.readNamespacedRole({ name, namespace });
    await rbac.replaceNamespacedRole({ name, namespace, body: { ...now, rules: original ?? [] } });
    await settled(true);
  };
}
