// Legacy discovery documents (/api, /apis, group and group-version lists), which kubectl and client-go
// fall back to when aggregated discovery is not offered.
import { apiVersionOf, type Registry, type ResourceType } from './registry.ts';
import type { JsonObject } from './types.ts';

const VERBS = ['create', 'delete', 'deletecollection', 'get', 'list', 'patch', 'update', 'watch'];

function resourceEntries(t: ResourceType): JsonObject[] {
  const main: JsonObject = {
    name: t.resource,
    singularName: t.singular,
    namespaced: t.namespaced,
    kind: t.kind,
    verbs: VERBS,
  };
  if (t.shortNames.length) main.shortNames = t.shortNames;
  if (t.categories.length) main.categories = t.categories;
  const entries: JsonObject[] = [main];
  for (const sub of t.subresources) {
    if (sub === 'status')
      entries.push({
        name: `${t.resource}/status`,
        singularName: '',
        namespaced: t.namespaced,
        kind: t.kind,
        verbs: ['get', 'patch', 'update'],
      });
    if (sub === 'scale') {
      entries.push({
        name: `${t.resource}/scale`,
        singularName: '',
        namespaced: t.namespaced,
        group: 'autoscaling',
        version: 'v1',
        kind: 'Scale',
        verbs: ['get', 'patch', 'update'],
      });
    }
    if (sub === 'token')
      entries.push({
        name: `${t.resource}/token`,
        singularName: '',
        namespaced: t.namespaced,
        group: 'authentication.k8s.io',
        version: 'v1',
        kind: 'TokenRequest',
        verbs: ['create'],
      });
    if (sub === 'binding')
      entries.push({
        name: `${t.resource}/binding`,
        singularName: '',
        namespaced: t.namespaced,
        kind: 'Binding',
        verbs: ['create'],
      });
  }
  return entries;
}

export function apiVersions(serverAddress: string): JsonObject {
  return {
    kind: 'APIVersions',
    versions: ['v1'],
    serverAddressByClientCIDRs: [{ clientCIDR: '0.0.0.0/0', serverAddress }],
  };
}

export function resourceList(registry: Registry, group: string, version: string): JsonObject | undefined {
  const types = registry.all().filter((t) => t.group === group && t.version === version);
  if (types.length === 0) return undefined;
  return {
    kind: 'APIResourceList',
    apiVersion: 'v1',
    groupVersion: apiVersionOf({ group, version }),
    resources: types.sort((a, b) => a.resource.localeCompare(b.resource)).flatMap(resourceEntries),
  };
}

function groupEntry(name: string, types: ResourceType[]): JsonObject {
  const versions = [...new Set(types.map((t) => t.version))].map((v) => ({
    groupVersion: `${name}/${v}`,
    version: v,
  }));
  return { name, versions, preferredVersion: versions[0] ?? null };
}

export function groupList(registry: Registry): JsonObject {
  const groups = [...registry.groups().entries()]
    .filter(([name]) => name !== '')
    .sort(([a], [b]) => a.localeCompare(b))
    .map(([name, types]) => groupEntry(name, types));
  return { kind: 'APIGroupList', apiVersion: 'v1', groups };
}

export function group(registry: Registry, name: string): JsonObject | undefined {
  const types = registry.groups().get(name);
  if (!types || name === '') return undefined;
  return { kind: 'APIGroup', apiVersion: 'v1', ...groupEntry(name, types) };
}
