// Just enough OpenAPI for kubectl: v3 group-version documents whose operations carry
// x-kubernetes-group-version-kind and x-kubernetes-action, so kubectl finds that the server supports
// server-side field validation and dry-run, and a v2 document for older clients. Schemas are open
// objects: the sandbox validates on the server, it does not publish full type schemas.
import { apiVersionOf, type Registry, type ResourceType } from './registry.ts';
import type { JsonObject } from './types.ts';

const gvPath = (t: { group: string; version: string }): string =>
  t.group ? `apis/${t.group}/${t.version}` : `api/${t.version}`;

const definitionName = (t: ResourceType): string =>
  `io.k8s.sandbox.${(t.group || 'core').split('.').reverse().join('.')}.${t.version}.${t.kind}`;

function operations(t: ResourceType): Record<string, JsonObject> {
  const gvk = [{ group: t.group, version: t.version, kind: t.kind }];
  const base = `/${gvPath(t)}${t.namespaced ? '/namespaces/{namespace}' : ''}/${t.resource}`;
  const ref = { $ref: `#/components/schemas/${definitionName(t)}` };
  const body = { content: { 'application/json': { schema: ref } } };
  const param = (name: string): JsonObject => ({
    name,
    in: 'query',
    schema: { type: 'string', uniqueItems: true },
  });
  const writeParams = [param('dryRun'), param('fieldManager'), param('fieldValidation')];
  const op = (action: string, extra: JsonObject = {}): JsonObject => ({
    operationId: `${action}${t.kind}`,
    'x-kubernetes-action': action,
    'x-kubernetes-group-version-kind': gvk[0] as JsonObject,
    responses: { '200': body },
    ...extra,
  });
  return {
    [base]: {
      get: op('list'),
      post: op('post', { parameters: writeParams, requestBody: body }),
      delete: op('deletecollection'),
    },
    [`${base}/{name}`]: {
      get: op('get'),
      put: op('put', { parameters: writeParams, requestBody: body }),
      patch: op('patch', {
        parameters: [...writeParams, param('force')],
        requestBody: { content: { 'application/merge-patch+json': { schema: { type: 'object' } } } },
      }),
      delete: op('delete', { parameters: [param('dryRun')] }),
    },
  };
}

function schemaOf(t: ResourceType): JsonObject {
  return {
    type: 'object',
    'x-kubernetes-group-version-kind': [{ group: t.group, version: t.version, kind: t.kind }],
    'x-kubernetes-preserve-unknown-fields': true,
  };
}

export function openApiV3Root(registry: Registry): JsonObject {
  const paths: JsonObject = {};
  for (const t of registry.all())
    paths[gvPath(t)] = { serverRelativeURL: `/openapi/v3/${gvPath(t)}?hash=${hashOf(registry, gvPath(t))}` };
  return { paths };
}

export function openApiV3Document(registry: Registry, gv: string): JsonObject | undefined {
  const types = registry.all().filter((t) => gvPath(t) === gv);
  if (types.length === 0) return undefined;
  const paths: JsonObject = {};
  const schemas: JsonObject = {};
  for (const t of types) {
    Object.assign(paths, operations(t));
    schemas[definitionName(t)] = schemaOf(t);
  }
  return {
    openapi: '3.0.0',
    info: { title: 'Kubernetes', version: 'v1.32.0' },
    paths,
    components: { schemas },
  };
}

export function openApiV2(registry: Registry): JsonObject {
  const definitions: JsonObject = {};
  for (const t of registry.all()) definitions[definitionName(t)] = schemaOf(t);
  return { swagger: '2.0', info: { title: 'Kubernetes', version: 'v1.32.0' }, paths: {}, definitions };
}

/** Changes whenever the served types of a group-version change, so clients refetch. */
function hashOf(registry: Registry, gv: string): string {
  const names = registry
    .all()
    .filter((t) => gvPath(t) === gv)
    .map((t) => `${apiVersionOf(t)}/${t.kind}`)
    .sort()
    .join(',');
  let h = 0;
  for (let i = 0; i < names.length; i++) h = (h * 31 + names.charCodeAt(i)) | 0;
  return (h >>> 0).toString(16).toUpperCase();
}
