// A cluster under test (E2E_KUBECONFIG, E2E_KUBECONFIG_2, or a control plane of the file's own): typed
// clients and kubectl as the kubeconfig's user (an admin, e.g. kind's), the BerthLease CRD, throwaway
// namespaces, and a cleanup list that runs in reverse order at the end so that the suite leaves nothing
// behind in a cluster it does not own.
import { execFile } from 'node:child_process';
import {
  AdmissionregistrationV1Api,
  AppsV1Api,
  BatchV1Api,
  CoreV1Api,
  CustomObjectsApi,
  KubeConfig,
  PatchStrategy,
  RbacAuthorizationV1Api,
  setHeaderOptions,
} from '@kubernetes/client-node';
import { GROUP, PLURAL, VERSION } from '../../src/berth/api.ts';
import { isNotFound } from '../../src/kube/client.ts';
import { installBerthLeaseCrd } from '../helpers/crd.ts';
import { eventually } from '../helpers/eventually.ts';

/** Distinguishes this run's objects from those of earlier (maybe interrupted) runs. */
export const RUN_ID = Date.now().toString(36);
/** Label of every namespace and cluster-scoped object the suite creates (value: RUN_ID). */
export const RUN_LABEL = 'berth-e2e/run';

export const mergePatch = setHeaderOptions('Content-Type', PatchStrategy.MergePatch);

export interface KubectlResult {
  code: number;
  stdout: string;
  stderr: string;
}

export const berthLeaseRef = (namespace: string) => ({
  group: GROUP,
  version: VERSION,
  plural: PLURAL,
  namespace,
});

/** Ignores NotFound: cleanup of something already gone. */
const unlessGone = (err: unknown): void => {
  if (!isNotFound(err)) throw err;
};

export class E2eCluster {
  readonly name: string;
  readonly kubeconfigPath: string;
  readonly kc: KubeConfig;
  readonly core: CoreV1Api;
  readonly apps: AppsV1Api;
  readonly batch: BatchV1Api;
  readonly custom: CustomObjectsApi;
  readonly admission: AdmissionregistrationV1Api;
  readonly rbac: RbacAuthorizationV1Api;
  readonly #cleanups: Array<{ what: string; run: () => Promise<unknown> }> = [];

  constructor(name: string, kubeconfigPath: string) {
    this.name = name;
    this.kubeconfigPath = kubeconfigPath;
    this.kc = new KubeConfig();
    this.kc.loadFromFile(kubeconfigPath);
    this.core = this.kc.makeApiClient(CoreV1Api);
    this.apps = this.kc.makeApiClient(AppsV1Api);
    this.batch = this.kc.makeApiClient(BatchV1Api);
    this.custom = this.kc.makeApiClient(CustomObjectsApi);
    this.admission = this.kc.makeApiClient(AdmissionregistrationV1Api);
    this.rbac = this.kc.makeApiClient(RbacAuthorizationV1Api);
  }

  /** The BerthLease CRD, unless the cluster already has it (then it is left in place). */
  async installCrd(): Promise<void> {
    await installBerthLeaseCrd(this.kc, { ifAbsent: true });
    // The new resource is served once its CRD is Established.
    await eventually(
      () => this.custom.listClusterCustomObject({ group: GROUP, version: VERSION, plural: PLURAL }),
      {
        timeoutMs: 30_000,
        intervalMs: 200,
      },
    );
  }

  /** Registers `run` to be done at cleanup, before everything registered earlier. */
  onCleanup(what: string, run: () => Promise<unknown>): void {
    this.#cleanups.push({ what, run });
  }

  /**
   * Creates namespace `name`, ready for Pods: the ServiceAccount admission plugin refuses them until
   * kube-controller-manager has created the namespace's `default` account.
   */
  async createNamespace(name: string, labels: Readonly<Record<string, string>> = {}): Promise<void> {
    await this.core.createNamespace({
      body: { metadata: { name, labels: { ...labels, [RUN_LABEL]: RUN_ID } } },
    });
    this.onCleanup(`namespace ${name}`, () => this.core.deleteNamespace({ name }).catch(unlessGone));
    await eventually(() => this.core.readNamespacedServiceAccount({ namespace: name, name: 'default' }), {
      timeoutMs: 30_000,
      intervalMs: 100,
    });
  }

  /**
   * Deletes the BerthLeases of a namespace while the operator still runs, so that it drains and releases
   * them; any left after `timeoutMs` lose their finalizer, so that the namespace can go.
   */
  async removeBerthLeases(namespace: string, timeoutMs = 60_000): Promise<void> {
    const ref = berthLeaseRef(namespace);
    const names = async (): Promise<string[]> =>
      (
        (await this.custom.listNamespacedCustomObject(ref)) as {
          items: Array<{ metadata: { name: string } }>;
        }
      ).items.map((l) => l.metadata.name);
    for (const name of await names())
      await this.custom.deleteNamespacedCustomObject({ ...ref, name }).catch(unlessGone);
    try {
      await eventually(async () => (await names()).length === 0, { timeoutMs, intervalMs: 250 });
    } catch {
      for (const name of await names())
        await this.custom
          .patchNamespacedCustomObject({ ...ref, name, body: { metadata: { finalizers: null } } }, mergePatch)
          .catch(unlessGone);
    }
  }

  /** Runs the registered cleanups, newest first; returns what failed (each is tried regardless). */
  async cleanup(): Promise<string[]> {
    const failed: string[] = [];
    for (const { what, run } of this.#cleanups.splice(0).reverse()) {
      try {
        await run();
      } catch (err) {
        failed.push(`${this.name}: ${what}: ${err instanceof Error ? err.message : String(err)}`);
      }
    }
    return failed;
  }

  /** The real kubectl, as the kubeconfig's user. */
  kubectl(args: string[], input?: string): Promise<KubectlResult> {
    return new Promise((resolve) => {
      const child = execFile(
        'kubectl',
        args,
        { env: { ...process.env, KUBECONFIG: this.kubeconfigPath }, timeout: 30_000 },
        (err, stdout, stderr) => {
          const code = err ? (typeof err.code === 'number' ? err.code : 1) : 0;
          resolve({ code, stdout, stderr });
        },
      );
      if (input !== undefined) child.stdin?.end(input);
    });
  }
}
