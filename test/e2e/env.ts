// What the end-to-end suite needs from its environment, and why a scenario skips when something is missing
// (printed, so a skipped run never passes for a green one unnoticed).

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
   * runs until SIGTERM, so Pods run without pulling anything.
   */
  image: process.env.E2E_IMAGE || 'registry.k8s.io/pause:3.10',
};

type Need = 'kubeconfig' | 'kubeconfig2' | 'webhookHost';

const WHY: Record<Need, string> = {
  kubeconfig: 'E2E_KUBECONFIG is not set (the admin kubeconfig of the cluster under test)',
  kubeconfig2: 'E2E_KUBECONFIG_2 is not set (a second cluster for the two-cluster scenarios)',
  webhookHost:
    "E2E_WEBHOOK_HOST is not set (this machine's address as the API server reaches it, where the operator serves its webhooks)",
};

/** Why `what` cannot run here (printed as a warning), or undefined when everything it needs is set. */
export function skipReason(what: string, needs: Need[]): string | undefined {
  const missing = needs.filter((n) => e2eEnv[n] === '').map((n) => WHY[n]);
  if (missing.length === 0) return undefined;
  const reason = `skipping ${what}: ${missing.join('; ')}`;
  console.warn(reason);
  return reason;
}
