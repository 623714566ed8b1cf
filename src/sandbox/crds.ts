// CustomResourceDefinitions: validated like apiextensions-apiserver, then served as resource types at
// once (NamesAccepted and Established are set on write), with their schema compiled for validation,
// defaulting and pruning of the custom resources.
import type { Registry, ResourceType } from './registry.ts';
import { type CompiledSchema, compileSchema } from './schema.ts';
import type { Strategy } from './strategy.ts';
import type { PrinterColumn } from './tables.ts';
import { type FieldCause, type JsonObject, type KubeObject, StatusError } from './types.ts';
import { invalidCause, requiredCause } from './validation.ts';

interface CrdVersion {
  name: string;
  served?: boolean;
  storage?: boolean;
  schema?: { openAPIV3Schema?: JsonObject };
  subresources?: { status?: object; scale?: object };
  additionalPrinterColumns?: PrinterColumn[];
}

interface CrdSpec {
  group?: string;
  scope?: string;
  names?: {
    plural?: string;
    singular?: string;
    kind?: string;
    listKind?: string;
    shortNames?: string[];
    categories?: string[];
  };
  versions?: CrdVersion[];
}

const specOf = (crd: KubeObject): CrdSpec => (crd.spec ?? {}) as CrdSpec;

function servedVersion(spec: CrdSpec): CrdVersion | undefined {
  const versions = spec.versions ?? [];
  return versions.find((v) => v.storage && v.served) ?? versions.find((v) => v.served);
}

function crdErrors(crd: KubeObject): FieldCause[] {
  const spec = specOf(crd);
  const causes: FieldCause[] = [];
  const names = spec.names ?? {};
  if (!spec.group) causes.push(requiredCause('spec.group'));
  if (!names.plural) causes.push(requiredCause('spec.names.plural'));
  if (!names.kind) causes.push(requiredCause('spec.names.kind'));
  if (spec.scope !== 'Namespaced' && spec.scope !== 'Cluster') {
    causes.push({
      reason: 'FieldValueNotSupported',
      field: 'spec.scope',
      message: `Unsupported value: ${JSON.stringify(spec.scope ?? '')}: supported values: "Cluster", "Namespaced"`,
    });
  }
  if (names.plural && spec.group && crd.metadata.name !== `${names.plural}.${spec.group}`) {
    causes.push(invalidCause('metadata.name', crd.metadata.name, 'must be spec.names.plural+"."+spec.group'));
  }
  const versions = spec.versions ?? [];
  if (versions.length === 0)
    causes.push(requiredCause('spec.versions', 'must have exactly one version marked as storage version'));
  else if (versions.filter((v) => v.storage).length !== 1) {
    causes.push(
      invalidCause(
        'spec.versions',
        versions.map((v) => v.name),
        'must have exactly one version marked as storage version',
      ),
    );
  }
  versions.forEach((v, i) => {
    if (!v.schema?.openAPIV3Schema)
      causes.push(requiredCause(`spec.versions[${i}].schema.openAPIV3Schema`, 'schemas are required'));
  });
  return causes;
}

export class CrdManager {
  private readonly registry: Registry;
  private readonly schemas = new Map<string, CompiledSchema>();

  constructor(registry: Registry) {
    this.registry = registry;
  }

  schemaFor(type: ResourceType): CompiledSchema | undefined {
    return this.schemas.get(`${type.group}/${type.resource}`);
  }

  /** Serves (or re-serves) the CRD's types after a committed write. */
  register(crd: KubeObject): void {
    const spec = specOf(crd);
    const version = servedVersion(spec);
    const names = spec.names ?? {};
    if (!version || !spec.group || !names.plural || !names.kind) return;
    const subresources: ResourceType['subresources'] = version.subresources?.status ? ['status'] : [];
    const type: ResourceType = {
      group: spec.group,
      version: version.name,
      resource: names.plural,
      singular: names.singular ?? names.kind.toLowerCase(),
      kind: names.kind,
      listKind: names.listKind ?? `${names.kind}List`,
      namespaced: spec.scope === 'Namespaced',
      shortNames: names.shortNames ?? [],
      categories: names.categories ?? [],
      subresources,
      fieldSelectors: [],
      generation: true,
      custom: true,
      printerColumns: version.additionalPrinterColumns ?? [],
    };
    this.registry.add(type);
    const schema = version.schema?.openAPIV3Schema;
    if (schema) this.schemas.set(`${type.group}/${type.resource}`, compileSchema(schema));
  }

  unregister(crd: KubeObject): void {
    const spec = specOf(crd);
    if (!spec.group || !spec.names?.plural) return;
    this.registry.remove(spec.group, spec.names.plural);
    this.schemas.delete(`${spec.group}/${spec.names.plural}`);
  }
}

/** The CRD's own strategy: validation (including that every schema compiles) and its status. */
export const crdStrategy: Strategy = (() => {
  const setStatus = (crd: KubeObject, now: string): void => {
    const spec = specOf(crd);
    const storage = (spec.versions ?? []).find((v) => v.storage)?.name;
    const old = (crd.status ?? {}) as { storedVersions?: string[] };
    const stored = new Set(old.storedVersions ?? []);
    if (storage) stored.add(storage);
    const condition = (type: string, reason: string, message: string) => ({
      type,
      status: 'True',
      lastTransitionTime: now,
      reason,
      message,
    });
    crd.status = {
      acceptedNames: { ...spec.names },
      storedVersions: [...stored],
      conditions: [
        condition('NamesAccepted', 'NoConflicts', 'no conflicts found'),
        condition('Established', 'InitialNamesAccepted', 'the initial names have been accepted'),
      ],
    };
  };
  return {
    nameRule: 'subdomain',
    prepareForCreate: (crd, now) => {
      crd.metadata.finalizers = [
        ...new Set([...(crd.metadata.finalizers ?? []), 'customresourcecleanup.apiextensions.k8s.io']),
      ];
      setStatus(crd, now);
    },
    prepareForUpdate: (next, old, subresource, now) => {
      if (subresource === 'status') next.spec = old.spec;
      else setStatus(next, now);
    },
    validate: (crd) => {
      const causes = crdErrors(crd);
      if (causes.length > 0) return causes;
      (specOf(crd).versions ?? []).forEach((v, i) => {
        try {
          compileSchema(v.schema?.openAPIV3Schema ?? {}, {
            basePath: `spec.versions[${i}].schema.openAPIV3Schema`,
            crdName: crd.metadata.name ?? '',
          });
        } catch (err) {
          if (err instanceof StatusError && err.details?.causes) causes.push(...err.details.causes);
          else
            causes.push(
              invalidCause(`spec.versions[${i}].schema.openAPIV3Schema`, 'object', (err as Error).message),
            );
        }
      });
      return causes;
    },
  };
})();
