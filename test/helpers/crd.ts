// The BerthLease CRD as shipped in deploy/crds (the one manifest the install and the tests use), created
// exactly as its manifest says. client-node's typed client cannot: its model names the `x-kubernetes-*`
// fields `x_kubernetes_*` and drops them, CEL rules included.
import { readFile } from 'node:fs/promises';
import type { KubeConfig } from '@kubernetes/client-node';
import { parse as parseYaml } from 'yaml';
import { isAlreadyExists, readJson } from '../../src/kube/client.ts';
import { KubeTransport } from '../../src/kube/transport.ts';

export const BERTHLEASE_CRD_PATH = new URL('../../deploy/crds/berthlease.yaml', import.meta.url);

export async function readBerthLeaseCrd(): Promise<unknown> {
  return parseYaml(await readFile(BERTHLEASE_CRD_PATH, 'utf8')) as unknown;
}

/** POSTs the CRD through a raw request; an existing CRD of that name is left as it is when `ifAbsent`. */
export async function createCustomResourceDefinition(
  kc: KubeConfig,
  crd: unknown,
  opts: { ifAbsent?: boolean } = {},
): Promise<void> {
  const transport = new KubeTransport(kc);
  try {
    await readJson(
      await transport.request({
        method: 'POST',
        path: '/apis/apiextensions.k8s.io/v1/customresourcedefinitions',
        body: crd,
      }),
    );
  } catch (err) {
    if (!(opts.ifAbsent && isAlreadyExists(err))) throw err;
  } finally {
    transport.close();
  }
}

/** Installs the BerthLease CRD with every validation rule intact. */
export async function installBerthLeaseCrd(kc: KubeConfig, opts: { ifAbsent?: boolean } = {}): Promise<void> {
  await createCustomResourceDefinition(kc, await readBerthLeaseCrd(), opts);
}
