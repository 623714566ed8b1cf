// The resource types the sandbox serves: the built-in ones below plus one per served CRD version.
import type { PrinterColumn } from './tables.ts';

export type Subresource = 'status' | 'scale' | 'binding' | 'token';

export interface ResourceType {
  group: string;
  version: string;
  /** Plural, lower-case: `pods`. */
  resource: string;
  singular: string;
  kind: string;
  listKind: string;
  namespaced: boolean;
  shortNames: string[];
  categories: string[];
  subresources: Subresource[];
  /** Fields the server accepts in field selectors besides metadata.name / metadata.namespace. */
  fieldSelectors: string[];
  /** metadata.generation is maintained (bumped on changes outside metadata and status). */
  generation: boolean;
  /** Custom resources: no strategic merge patch, schema from the CRD. */
  custom: boolean;
  /** CRD additionalPrinterColumns, for server-side tables. */
  printerColumns?: PrinterColumn[];
  /** Path of the scale subresource fields (CRDs declare them; built-ins use spec.replicas/status.replicas). */
  scale?: { specReplicasPath: string; statusReplicasPath: string; labelSelectorPath?: string };
}

export const apiVersionOf = (t: { group: string; version: string }): string =>
  t.group ? `${t.group}/${t.version}` : t.version;

/** Key of a resource type in maps: `apps/deployments`, `/pods` for the core group. */
export const typeKey = (group: string, resource: string): string => `${group}/${resource}`;

interface BuiltinSpec {
  group: string;
  version: string;
  resource: string;
  kind: string;
  namespaced?: boolean;
  shortNames?: string[];
  categories?: string[];
  subresources?: Subresource[];
  fieldSelectors?: string[];
  generation?: boolean;
}

const BUILTINS: BuiltinSpec[] = [
  {
    group: '',
    version: 'v1',
    resource: 'namespaces',
    kind: 'Namespace',
    namespaced: false,
    shortNames: ['ns'],
    subresources: ['status'],
    fieldSelectors: ['status.phase'],
  },
  {
    group: '',
    version: 'v1',
    resource: 'pods',
    kind: 'Pod',
    shortNames: ['po'],
    categories: ['all'],
    subresources: ['status', 'binding'],
    fieldSelectors: [
      'spec.nodeName',
      'spec.restartPolicy',
      'spec.schedulerName',
      'spec.serviceAccountName',
      'spec.hostNetwork',
      'status.phase',
      'status.podIP',
      'status.nominatedNodeName',
    ],
  },
  {
    group: '',
    version: 'v1',
    resource: 'nodes',
    kind: 'Node',
    namespaced: false,
    shortNames: ['no'],
    subresources: ['status'],
    fieldSelectors: ['spec.unschedulable'],
  },
  { group: '', version: 'v1', resource: 'secrets', kind: 'Secret', fieldSelectors: ['type'] },
  { group: '', version: 'v1', resource: 'configmaps', kind: 'ConfigMap', shortNames: ['cm'] },
  {
    group: '',
    version: 'v1',
    resource: 'services',
    kind: 'Service',
    shortNames: ['svc'],
    categories: ['all'],
    subresources: ['status'],
  },
  {
    group: '',
    version: 'v1',
    resource: 'serviceaccounts',
    kind: 'ServiceAccount',
    shortNames: ['sa'],
    subresources: ['token'],
  },
  {
    group: '',
    version: 'v1',
    resource: 'events',
    kind: 'Event',
    shortNames: ['ev'],
    fieldSelectors: [
      'involvedObject.kind',
      'involvedObject.namespace',
      'involvedObject.name',
      'involvedObject.uid',
      'involvedObject.apiVersion',
      'involvedObject.resourceVersion',
      'involvedObject.fieldPath',
      'reason',
      'reportingComponent',
      'source',
      'type',
    ],
  },
  {
    group: 'events.k8s.io',
    version: 'v1',
    resource: 'events',
    kind: 'Event',
    shortNames: ['ev'],
    fieldSelectors: [
      'regarding.kind',
      'regarding.namespace',
      'regarding.name',
      'regarding.uid',
      'reason',
      'type',
    ],
  },
  { group: 'coordination.k8s.io', version: 'v1', resource: 'leases', kind: 'Lease' },
  {
    group: 'apps',
    version: 'v1',
    resource: 'deployments',
    kind: 'Deployment',
    shortNames: ['deploy'],
    categories: ['all'],
    subresources: ['status', 'scale'],
    generation: true,
  },
  {
    group: 'apps',
    version: 'v1',
    resource: 'statefulsets',
    kind: 'StatefulSet',
    shortNames: ['sts'],
    categories: ['all'],
    subresources: ['status', 'scale'],
    generation: true,
  },
  {
    group: 'apps',
    version: 'v1',
    resource: 'replicasets',
    kind: 'ReplicaSet',
    shortNames: ['rs'],
    categories: ['all'],
    subresources: ['status', 'scale'],
    generation: true,
  },
  {
    group: 'apps',
    version: 'v1',
    resource: 'daemonsets',
    kind: 'DaemonSet',
    shortNames: ['ds'],
    categories: ['all'],
    subresources: ['status'],
    generation: true,
  },
  {
    group: 'batch',
    version: 'v1',
    resource: 'jobs',
    kind: 'Job',
    categories: ['all'],
    subresources: ['status'],
    fieldSelectors: ['status.successful'],
    generation: true,
  },
  {
    group: 'batch',
    version: 'v1',
    resource: 'cronjobs',
    kind: 'CronJob',
    shortNames: ['cj'],
    categories: ['all'],
    subresources: ['status'],
    generation: true,
  },
  {
    group: 'admissionregistration.k8s.io',
    version: 'v1',
    resource: 'mutatingwebhookconfigurations',
    kind: 'MutatingWebhookConfiguration',
    namespaced: false,
    generation: true,
  },
  {
    group: 'admissionregistration.k8s.io',
    version: 'v1',
    resource: 'validatingwebhookconfigurations',
    kind: 'ValidatingWebhookConfiguration',
    namespaced: false,
    generation: true,
  },
  {
    group: 'apiextensions.k8s.io',
    version: 'v1',
    resource: 'customresourcedefinitions',
    kind: 'CustomResourceDefinition',
    namespaced: false,
    shortNames: ['crd', 'crds'],
    subresources: ['status'],
    generation: true,
  },
  { group: 'rbac.authorization.k8s.io', version: 'v1', resource: 'roles', kind: 'Role' },
  { group: 'rbac.authorization.k8s.io', version: 'v1', resource: 'rolebindings', kind: 'RoleBinding' },
  {
    group: 'rbac.authorization.k8s.io',
    version: 'v1',
    resource: 'clusterroles',
    kind: 'ClusterRole',
    namespaced: false,
  },
  {
    group: 'rbac.authorization.k8s.io',
    version: 'v1',
    resource: 'clusterrolebindings',
    kind: 'ClusterRoleBinding',
    namespaced: false,
  },
];

export function builtinTypes(): ResourceType[] {
  return BUILTINS.map((b) => ({
    group: b.group,
    version: b.version,
    resource: b.resource,
    singular: b.kind.toLowerCase(),
    kind: b.kind,
    listKind: `${b.kind}List`,
    namespaced: b.namespaced ?? true,
    shortNames: b.shortNames ?? [],
    categories: b.categories ?? [],
    subresources: b.subresources ?? [],
    fieldSelectors: b.fieldSelectors ?? [],
    generation: b.generation ?? false,
    custom: false,
  }));
}

/** Resource types by `group/resource`, plus lookup by kind for ownerReference and admission needs. */
export class Registry {
  private readonly byKey = new Map<string, ResourceType>();

  constructor(types: ResourceType[] = builtinTypes()) {
    for (const t of types) this.add(t);
  }

  add(t: ResourceType): void {
    this.byKey.set(typeKey(t.group, t.resource), t);
  }

  remove(group: string, resource: string): void {
    this.byKey.delete(typeKey(group, resource));
  }

  get(group: string, version: string, resource: string): ResourceType | undefined {
    const t = this.byKey.get(typeKey(group, resource));
    return t && t.version === version ? t : undefined;
  }

  byGroupResource(group: string, resource: string): ResourceType | undefined {
    return this.byKey.get(typeKey(group, resource));
  }

  byKind(apiVersion: string, kind: string): ResourceType | undefined {
    for (const t of this.byKey.values()) if (t.kind === kind && apiVersionOf(t) === apiVersion) return t;
    return undefined;
  }

  all(): ResourceType[] {
    return [...this.byKey.values()];
  }

  groups(): Map<string, ResourceType[]> {
    const groups = new Map<string, ResourceType[]>();
    for (const t of this.byKey.values()) {
      const list = groups.get(t.group) ?? [];
      list.push(t);
      groups.set(t.group, list);
    }
    return groups;
  }
}
