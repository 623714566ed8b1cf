// Creating a CustomResourceDefinition exactly as its manifest says. client-node's typed client cannot:
// its model names the `x-kubernetes-*` fields `x_kubernetes_*` and drops them, CEL rules included.
import type { KubeConfig } from '@kubernetes/client-node';
import { isAlreadyExists, readJson } from './client.ts';
import { KubeTransport } from './transport.ts';

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
