// The rendered installs read as objects: the manifests, the operator's container (of the one Deployment,
// whatever a Helm release names it), and its environment as the kubelet builds it. Used by the local
// system (npm start), the deploy tests and the benchmarks.
import { readFile } from 'node:fs/promises';
import type { V1ConfigMap, V1Container, V1Deployment } from '@kubernetes/client-node';
import { parseAllDocuments } from 'yaml';

export interface ManifestObject {
  apiVersion: string;
  kind: string;
  metadata: { name: string; namespace?: string; [key: string]: unknown };
  [key: string]: unknown;
}

export const deployPath = (path: string): URL => new URL(`../deploy/${path}`, import.meta.url);

export function parseManifests(text: string): ManifestObject[] {
  return parseAllDocuments(text)
    .map((d) => d.toJS() as ManifestObject | null)
    .filter((o): o is ManifestObject => o !== null && typeof o === 'object');
}

export async function readInstall(file: string): Promise<{ text: string; objects: ManifestObject[] }> {
  const text = await readFile(deployPath(file), 'utf8');
  return { text, objects: parseManifests(text) };
}

export function find<T>(objects: ManifestObject[], kind: string, name?: string): T & ManifestObject {
  const found = objects.find((o) => o.kind === kind && (name === undefined || o.metadata.name === name));
  if (found === undefined) throw new Error(`no ${kind}${name ? ` ${name}` : ''} in the install`);
  return found as T & ManifestObject;
}

export function operatorContainer(objects: ManifestObject[]): V1Container {
  const deployment = find<V1Deployment>(objects, 'Deployment');
  const container = deployment.spec?.template.spec?.containers.find((c) => c.name === 'operator');
  if (container === undefined) throw new Error('the Deployment has no operator container');
  return container;
}

const QUANTITY_FACTORS: Record<string, number> = {
  '': 1,
  k: 1e3,
  M: 1e6,
  G: 1e9,
  Ki: 2 ** 10,
  Mi: 2 ** 20,
  Gi: 2 ** 30,
};

/** A memory quantity (`256Mi`, `1G`, `1048576`) in bytes; the suffixes the manifests use. */
export function quantityBytes(quantity: string): number {
  const m = /^(\d+(?:\.\d+)?)(k|M|G|Ki|Mi|Gi)?$/.exec(quantity);
  if (m === null) throw new Error(`unsupported quantity ${quantity}`);
  return Number(m[1]) * QUANTITY_FACTORS[m[2] ?? '']!;
}

/**
 * The container's environment as the kubelet builds it: envFrom first, then env in order, `$(VAR)`
 * expanded from the variables defined before it, the downward API for the Pod's namespace and service
 * account. Secret keys come from `secretKey` (a Secret's key, or undefined when absent); without it, optional
 * ones are absent and required ones refused.
 */
export function containerEnvironment(
  objects: ManifestObject[],
  secretKey?: (name: string, key: string) => string | undefined,
): Record<string, string> {
  const container = operatorContainer(objects);
  const deployment = find<V1Deployment>(objects, 'Deployment');
  const env: Record<string, string> = {};
  for (const source of container.envFrom ?? []) {
    const name = source.configMapRef?.name;
    if (name === undefined) throw new Error('only configMapRef envFrom sources are supported');
    Object.assign(env, find<V1ConfigMap>(objects, 'ConfigMap', name).data ?? {});
  }
  const expand = (value: string): string =>
    value.replace(/\$\$|\$\(([A-Za-z_][A-Za-z0-9_]*)\)/g, (match, name?: string) =>
      name === undefined ? '$' : (env[name] ?? match),
    );
  for (const e of container.env ?? []) {
    if (e.value !== undefined) env[e.name] = expand(e.value);
    else if (e.valueFrom?.fieldRef?.fieldPath === 'metadata.namespace')
      env[e.name] = deployment.metadata?.namespace ?? '';
    else if (e.valueFrom?.fieldRef?.fieldPath === 'spec.serviceAccountName')
      env[e.name] = deployment.spec?.template.spec?.serviceAccountName ?? 'default';
    else if (e.valueFrom?.secretKeyRef !== undefined && secretKey !== undefined) {
      const ref = e.valueFrom.secretKeyRef;
      const value = secretKey(ref.name ?? '', ref.key);
      if (value !== undefined) env[e.name] = value;
      else if (ref.optional !== true)
        throw new Error(`env ${e.name}: Secret ${ref.name} has no key ${ref.key}`);
    } else if (e.valueFrom?.secretKeyRef?.optional === true) continue;
    else throw new Error(`env ${e.name}: unsupported source ${JSON.stringify(e.valueFrom)}`);
  }
  return env;
}
