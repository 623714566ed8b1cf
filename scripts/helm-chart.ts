// The generated templates of the Helm chart (deploy/helm/berth-operator/templates/*.generated.yaml),
// written by `npm run deploy:render` from what the kustomize sources are built from: the RBAC of
// scripts/deploy-rbac.ts, in both WorkloadAdmission variants (workloadManagement.enabled), each object under
// the Helm condition of its part and with the install's names replaced by the chart's (release namespace,
// fullname, service account, ...); and the BerthLease CRD of deploy/crds. The hand-written templates are
// checked against the rendered installs by test/integration/deploy/helm-template.test.ts.
import { readFileSync } from 'node:fs';
import { isDeepStrictEqual } from 'node:util';
import { parse, stringify } from 'yaml';
import { NAMESPACE_WRITES_POLICY, namespaceWritesPolicy } from '../src/berth/rbac.ts';
import { NODE_EVENTS_NAMESPACE } from '../src/nodetaint/rbac.ts';
import {
  AGENT_NAMESPACE,
  APP_NAME,
  CA_SECRET_NAME,
  LEADER_ELECTION_ID,
  METRICS_READER_ROLE,
  OPERATOR_NAMESPACE,
  type RbacObject,
  rbacLayers,
  SERVICE_ACCOUNT,
  WEBHOOK_CONFIGURATION_NAME,
} from './deploy-rbac.ts';

/** The chart, relative to deploy/. */
export const CHART_DIR = 'helm/berth-operator';

const COMPONENT = 'app.kubernetes.io/component';
const WORKLOAD_MANAGEMENT = '.Values.workloadManagement.enabled';
/** `--workload-admission-scope`: opt-in (default) or all. */
const ADMISSION_SCOPE = '.Values.workloadManagement.admissionScope';
/** The webhook server runs (and needs its certificate) for workload admission or helper injection. */
const WEBHOOKS = `(or ${WORKLOAD_MANAGEMENT} .Values.injection.enabled)`;

/** Plain-scalar stand-ins for template expressions, swapped in after YAML serialisation. */
const EXPRESSIONS = {
  __helm_fullname__: '{{ include "berth-operator.fullname" . }}',
  __helm_namespace__: '{{ .Release.Namespace }}',
  __helm_service_account__: '{{ include "berth-operator.serviceAccountName" . }}',
  __helm_leader_election_id__: '{{ include "berth-operator.leaderElectionId" . }}',
  __helm_ca_secret__: '{{ include "berth-operator.caSecretName" . }}',
  __helm_webhook_configuration__: '{{ include "berth-operator.webhookConfigurationName" . }}',
  __helm_agent_namespace__: '{{ include "berth-operator.agentNamespace" . }}',
  __helm_operator_user__:
    '{{ printf "system:serviceaccount:%s:%s" .Release.Namespace (include "berth-operator.serviceAccountName" .) }}',
} as const;
type Token = keyof typeof EXPRESSIONS;
/** metadata.labels: the chart's labels and the component label, or (with none) Helm's labels only. */
const LABELS = '__helm_labels__';

/** The install's names the chart takes from its helpers; other names follow the fullname. */
const NAMED: Record<string, Token> = {
  [WEBHOOK_CONFIGURATION_NAME]: '__helm_webhook_configuration__',
  [LEADER_ELECTION_ID]: '__helm_leader_election_id__',
  [CA_SECRET_NAME]: '__helm_ca_secret__',
};

function chartName(name: string): string {
  const token = NAMED[name];
  if (token !== undefined) return token;
  if (name === APP_NAME || name.startsWith(`${APP_NAME}-`))
    return `__helm_fullname__${name.slice(APP_NAME.length)}`;
  throw new Error(`scripts/helm-chart.ts: the RBAC name ${name} does not start with ${APP_NAME}`);
}

function chartNamespace(namespace: string): string {
  if (namespace === OPERATOR_NAMESPACE) return '__helm_namespace__';
  if (namespace === AGENT_NAMESPACE) return '__helm_agent_namespace__';
  if (namespace === NODE_EVENTS_NAMESPACE) return namespace;
  throw new Error(`scripts/helm-chart.ts: no chart value for the RBAC namespace ${namespace}`);
}

const componentOf = (o: RbacObject): string => o.metadata?.labels?.[COMPONENT] ?? '';
const nameOf = (o: RbacObject): string => ('roleRef' in o ? o.roleRef.name : (o.metadata?.name ?? ''));

/** When each part's objects are rendered (besides rbac.create and the WorkloadAdmission variant). */
function partCondition(o: RbacObject): string | undefined {
  switch (componentOf(o)) {
    case 'berthlease-controller':
    case 'workload-admission':
      return undefined;
    case 'admission-scope':
      return `(eq ${ADMISSION_SCOPE} "opt-in")`;
    case 'leader-election':
      return '(or .Values.leaderElection.enabled .Values.rbac.leaderElection)';
    case 'webhook-certificates':
      return `(and ${WEBHOOKS} (eq (include "berth-operator.certMode" .) "selfsigned"))`;
    case 'injection':
      return '.Values.injection.enabled';
    case 'node-taint-guard':
      return '.Values.nodeTaintGuard.enabled';
    case 'metrics':
      return nameOf(o) === METRICS_READER_ROLE
        ? '(and .Values.metrics.secure .Values.metrics.reader.create)'
        : '(and .Values.metrics.secure .Values.metrics.auth.create)';
    default:
      throw new Error(
        `scripts/helm-chart.ts: no Helm condition for the RBAC component "${componentOf(o)}" of ${o.kind} ${o.metadata?.name}`,
      );
  }
}

/** `o` with the chart's names and labels in place of the install's. */
function templated(o: RbacObject): object {
  const meta = o.metadata ?? {};
  if (meta.labels?.['app.kubernetes.io/name'] !== APP_NAME)
    throw new Error(`scripts/helm-chart.ts: ${o.kind} ${meta.name} lacks the install's name label`);
  const out: Record<string, unknown> = {
    ...o,
    metadata: {
      name: chartName(meta.name ?? ''),
      ...(meta.namespace === undefined ? {} : { namespace: chartNamespace(meta.namespace) }),
      labels: { [LABELS]: componentOf(o) },
    },
  };
  if ('roleRef' in o) out.roleRef = { ...o.roleRef, name: chartName(o.roleRef.name) };
  if ('subjects' in o)
    out.subjects = (o.subjects ?? []).map((s) => {
      if (s.kind !== 'ServiceAccount' || s.name !== SERVICE_ACCOUNT)
        throw new Error(`scripts/helm-chart.ts: ${o.kind} ${meta.name} binds ${s.kind} ${s.name}`);
      return { ...s, name: '__helm_service_account__', namespace: chartNamespace(s.namespace ?? '') };
    });
  if ('rules' in o)
    out.rules = (o.rules ?? []).map((r) =>
      r.resourceNames === undefined ? r : { ...r, resourceNames: r.resourceNames.map(chartName) },
    );
  return out;
}

/** YAML of `o` with the stand-ins replaced by their template expressions. */
function templateYaml(o: object): string {
  return stringify(o, { lineWidth: 0, indentSeq: false, aliasDuplicateObjects: false })
    .replace(new RegExp(`^( *)${LABELS}: (.*)$`, 'gm'), (_m, indent: string, component: string) => {
      const include = (labels: string) =>
        `${indent}{{- include "berth-operator.${labels}" . | nindent ${indent.length} }}`;
      return component === '""'
        ? include('releaseLabels')
        : `${include('labels')}\n${indent}${COMPONENT}: ${component}`;
    })
    .replace(/__helm_[a-z_]+?__/g, (token) => {
      const expression = EXPRESSIONS[token as Token];
      if (expression === undefined) throw new Error(`scripts/helm-chart.ts: unknown stand-in ${token}`);
      return expression;
    });
}

const header = (sources: string): string =>
  `{{- /* Generated by \`npm run deploy:render\` (scripts/helm-chart.ts) from ${sources}; do not edit. */ -}}\n`;

function block(conditions: readonly string[], o: object): string {
  const condition = conditions.length === 1 ? conditions[0] : `and ${conditions.join(' ')}`;
  return `{{- if ${condition} }}\n---\n${templateYaml(o)}{{- end }}\n`;
}

const idOf = (o: RbacObject): string => `${o.kind}/${o.metadata?.namespace ?? ''}/${o.metadata?.name}`;

/** Every object of every layer, by identity, in layer order. */
function layerObjects(workloadAdmission: boolean): Map<string, RbacObject> {
  const objects: RbacObject[] = Object.values(rbacLayers({ workloadAdmission })).flatMap((l) => l.objects);
  return new Map(objects.map((o) => [idOf(o), o]));
}

/**
 * The RBAC templates, one file per component: an object both variants have alike is rendered under its
 * part's condition; one that differs or exists in one variant only, also under workloadManagement.enabled
 * (or its negation).
 */
function rbacTemplates(): Map<string, string> {
  const managed = layerObjects(true);
  const leaseOnly = layerObjects(false);
  const files = new Map<string, string[]>();
  const add = (o: RbacObject, variant: string | undefined): void => {
    const part = partCondition(o);
    const conditions = ['.Values.rbac.create', ...(part ? [part] : []), ...(variant ? [variant] : [])];
    const file = `${CHART_DIR}/templates/rbac-${componentOf(o)}.generated.yaml`;
    files.set(file, [...(files.get(file) ?? []), block(conditions, templated(o))]);
  };
  for (const id of new Set([...managed.keys(), ...leaseOnly.keys()])) {
    const on = managed.get(id);
    const off = leaseOnly.get(id);
    if (on !== undefined && off !== undefined && isDeepStrictEqual(on, off)) add(on, undefined);
    else {
      if (on !== undefined) add(on, WORKLOAD_MANAGEMENT);
      if (off !== undefined) add(off, `(not ${WORKLOAD_MANAGEMENT})`);
    }
  }
  return new Map(
    [...files].map(([file, blocks]) => [
      file,
      `${header('scripts/deploy-rbac.ts (src/berth/rbac.ts, src/nodetaint/rbac.ts)')}${blocks.join('')}`,
    ]),
  );
}

/** deploy/crds' CRD under installCRDs, kept on uninstall: deleting it would delete every BerthLease. */
function crdTemplate(): string {
  const source = 'deploy/crds/berthlease.yaml';
  const text = readFileSync(new URL(`../${source}`, import.meta.url), 'utf8');
  if (text.includes('{{')) throw new Error(`scripts/helm-chart.ts: ${source} contains a template delimiter`);
  const crd = parse(text) as { metadata: { name: string } };
  const chartCrd = {
    ...crd,
    metadata: {
      name: crd.metadata.name,
      labels: { [LABELS]: '' },
      annotations: { 'helm.sh/resource-policy': 'keep' },
    },
  };
  return `${header(source)}{{- if .Values.installCRDs }}\n${templateYaml(chartCrd)}{{- end }}\n`;
}

/** The opt-in scope's namespace-writes policy (src/berth/rbac.ts), for the release's service account. */
function namespaceWritesTemplate(): string {
  const objects = namespaceWritesPolicy('__helm_operator_user__').map((o) => ({
    ...o,
    metadata: { name: chartName(o.metadata?.name ?? ''), labels: { [LABELS]: 'admission-scope' } },
    ...('policyName' in (o.spec ?? {})
      ? { spec: { ...o.spec, policyName: chartName(NAMESPACE_WRITES_POLICY) } }
      : {}),
  }));
  const condition = ['.Values.rbac.create', WORKLOAD_MANAGEMENT, `(eq ${ADMISSION_SCOPE} "opt-in")`];
  return `${header('src/berth/rbac.ts (namespaceWritesPolicy)')}${objects.map((o) => block(condition, o)).join('')}`;
}

/** Every generated chart template: path relative to deploy/ -> content. */
export function chartSources(): Map<string, string> {
  return new Map([
    ...rbacTemplates(),
    [`${CHART_DIR}/templates/crd.generated.yaml`, crdTemplate()],
    [`${CHART_DIR}/templates/admission-scope-policy.generated.yaml`, namespaceWritesTemplate()],
  ]);
}
