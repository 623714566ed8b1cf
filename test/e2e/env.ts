// Where the end-to-end suite runs. With E2E_KUBECONFIG: against the clusters it (and E2E_KUBECONFIG_2,
// E2E_WEBHOOK_HOST) name, e.g. kind clusters; a scenario skips when something it needs is missing
// (printed, so a skipped run never passes for a green one unnoticed). Without it: each file starts the
// real control planes it needs (hack/controlplane) and stops them at the end. Files never share a
// cluster of their own: each file's operator covers every namespace.
import {
  type ControlPlane,
  findHostAddress,
  startControlPlane,
} from '../../hack/controlplane/controlplane.ts';

export const e2eEnv = {
  /** Admin kubeconfig of the cluster under test (e.g. `kind get kubeconfig`). */
  kubeconfig: process.env.E2E_KUBECONFIG ?? '',
  /** A second cluster (a second kind cluster): the two-cluster scenarios run only with it. */
  kubeconfig2: process.env.E2E_KUBECONFIG_2 ?? '',
  /**
   * The address at which the clusters' API servers reach this machine, where the operator serves its
   * webhooks (for kind on Linux the gateway of the `kind` docker network, e.g. 172.18.0.1).
   */
  webhookHost: process.env.E2E_WEBHOOK_HOST ?? '',
  /**
   * The image of the managed Pods. The default is the sandbox image every kind node has preloaded; it
   * runs until SIGTERM, so Pods run without pulling anything (KWOK Nodes pull nothing at all).
   */
  image: process.env.E2E_IMAGE || 'registry.k8s.io/pause:3.10',
};

/** True when the suite runs against the external clusters of E2E_KUBECONFIG*. */
export const external = e2eEnv.kubeconfig !== '';

type Need = 'kubeconfig' | 'kubeconfig2' | 'webhookHost';

const WHY: Record<Need, string> = {
  kubeconfig: 'E2E_KUBECONFIG is not set (the admin kubeconfig of the cluster under test)',
  kubeconfig2: 'E2E_KUBECONFIG_2 is not set (a second cluster for the two-cluster scenarios)',
  webhookHost:
    "E2E_WEBHOOK_HOST is not set (this machine's address as the API server reaches it, where the operator serves its webhooks)",
};

/**
 * Why `what` cannot run against the external clusters (printed as a warning), or undefined when
 * everything it needs is set. Local control planes (no E2E_KUBECONFIG) need nothing.
 */
export function skipReason(what: string, needs: Need[]): string | undefined {
  if (!external) return undefined;
  const missing = needs.filter((n) => e2eEnv[n] === '').map((n) => WHY[n]);
  if (missing.length === 0) return undefined;
  const reason = `skipping ${what}: ${missing.join('; ')}`;
  console.warn(reason);
  return reason;
}

/** The clusters of one test file: admin kubeconfig files, and where their API servers reach webhooks. */
export interface E2eTarget {
  kubeconfigs: string[];
  webhookHost: string;
  /** Stops the file's own control planes (nothing for external clusters); throws if one failed meanwhile. */
  stop(): Promise<void>;
}

/**
 * `count` clusters: the external ones (E2E_KUBECONFIG, then E2E_KUBECONFIG_2), or as many real control
 * planes of this file's own, started side by side. Their API servers run on this machine and call the
 * webhooks at its non-loopback address, as a kind cluster calls its host (loopback when it has none).
 */
export async function e2eTarget(count: 1 | 2): Promise<E2eTarget> {
  if (external)
    return {
      kubeconfigs: [e2eEnv.kubeconfig, e2eEnv.kubeconfig2].slice(0, count),
      webhookHost: e2eEnv.webhookHost,
      stop: async () => {},
    };
  const started = await Promise.allSettled(Array.from({ length: count }, () => startControlPlane()));
  const planes = started.flatMap((s) => (s.status === 'fulfilled' ? [s.value] : []));
  const failed = started.find((s): s is PromiseRejectedResult => s.status === 'rejected');
  if (failed !== undefined) {
    await Promise.all(planes.map((cp) => cp.stop()));
    throw failed.reason;
  }
  return {
    // Each control plane writes its admin kubeconfig into its own temporary directory.
    kubeconfigs: planes.map((cp) => cp.kubeconfigPath),
    webhookHost: findHostAddress() ?? '127.0.0.1',
    stop: () => stopAll(planes),
  };
}

async function stopAll(planes: ControlPlane[]): Promise<void> {
  const failures = planes.flatMap((cp) => cp.failure() ?? []);
  await Promise.all(planes.map((cp) => cp.stop()));
  if (failures.length > 0)
    throw new Error(`a control plane component failed during the run: ${failures.join('; ')}`);
}
