// Real control planes for the benchmarks (hack/controlplane): every one started here, or handed to stopAtExit()
// (OperatorCluster's), is stopped by stopControlPlanes() — at the end of `npm run bench` and on SIGINT —
// unless the benchmark stopped it before.
import { KubeConfig } from '@kubernetes/client-node';
import {
  type ControlPlane,
  type ControlPlaneOptions,
  startControlPlane,
} from '../../hack/controlplane/controlplane.ts';

/**
 * For benchmarks whose Nodes have no kubelet (and no KWOK) behind them: kube-controller-manager's node
 * lifecycle controller would mark them unreachable after 50 s (60 s when they never posted a status),
 * taint them and, 5 minutes later, evict their Pods, writing to Nodes and Pods in the middle of a
 * measurement. A grace of an hour keeps it out of the way, as it stays out of the way of Nodes whose
 * kubelets renew their Leases; every other controller runs as usual.
 */
export const KUBELETLESS_NODES: Pick<ControlPlaneOptions, 'controllerManagerFlags'> = {
  controllerManagerFlags: ['--node-monitor-grace-period=1h', '--node-startup-grace-period=1h'],
};

/** Now as a Kubernetes Time (whole seconds). */
export const kubeNow = (): string => new Date().toISOString().replace(/\.\d+Z$/, 'Z');

/** Node `node-<i>` as a kubelet registers it (Ready), which no kubelet then heartbeats (KUBELETLESS_NODES). */
export const kubeletlessNode = (i: number) => ({
  metadata: { name: `node-${i}`, labels: { 'kubernetes.io/hostname': `node-${i}` } },
  status: {
    conditions: [
      {
        type: 'Ready',
        status: 'True',
        reason: 'KubeletReady',
        lastHeartbeatTime: kubeNow(),
        lastTransitionTime: kubeNow(),
      },
    ],
  },
});

const running = new Set<ControlPlane>();

/** Registers `cp` to be stopped by stopControlPlanes() (stopping twice is harmless). */
export function stopAtExit<T extends ControlPlane | undefined>(cp: T): T {
  if (cp !== undefined) running.add(cp);
  return cp;
}

/** A control plane of the benchmark's own (no KWOK Nodes unless asked for), stopped at the latest at exit. */
export async function benchControlPlane(options: ControlPlaneOptions = {}): Promise<ControlPlane> {
  return stopAtExit(await startControlPlane({ nodes: 0, ...options }));
}

/** Stops every control plane still running. */
export async function stopControlPlanes(): Promise<void> {
  const all = [...running];
  running.clear();
  await Promise.all(all.map((cp) => cp.stop()));
}

/** The admin's client configuration (a client certificate in system:masters). */
export function adminKubeConfig(cp: ControlPlane): KubeConfig {
  const kc = new KubeConfig();
  kc.loadFromString(cp.kubeconfig);
  return kc;
}

/** What every figure measured against a control plane of the bench refers to. */
export const describeServer = (cp: ControlPlane): string =>
  `kube-apiserver ${cp.versions.kubernetes} with etcd ${cp.versions.etcd} (--unsafe-no-fsync) on this machine, as the admin (system:masters: exempt from API Priority and Fairness)`;
