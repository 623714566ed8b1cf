// The BerthLease CRD as shipped in deploy/crds (the one manifest the install and the tests use).
import { readFile } from 'node:fs/promises';
import type { KubeConfig } from '@kubernetes/client-node';
import { parse as parseYaml } from 'yaml';
import { createCustomResourceDefinition } from '../kube/crd.ts';

export const BERTHLEASE_CRD_PATH = new URL('../../deploy/crds/berthlease.yaml', import.meta.url);

export async function readBerthLeaseCrd(): Promise<unknown> {
  return parseYaml(await readFile(BERTHLEASE_CRD_PATH, 'utf8')) as unknown;
}

/** Installs the BerthLease CRD with every validation rule intact. */
export async function installBerthLeaseCrd(kc: KubeConfig, opts: { ifAbsent?: boolean } = {}): Promise<void> {
  await createCustomResourceDefinition(kc, await readBerthLeaseCrd(), opts);
}
