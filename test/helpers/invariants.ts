// The invariant monitor: watches any number of clusters through client-node informers (list + watch,
// restarted on error) and records a breach whenever, at any instant it observes:
//
//   double-run      two clusters both have a running Pod of the same managed workload. A managed Pod
//                   carries the annotation `berth.skaphos.io/managed-lease` (the BerthLease name); the
//                   workload is `<namespace>/<spec.leaseName>` of that BerthLease (the central key, the
//                   same in every cluster). Running = phase Running, no Berth scheduling gate, not
//                   terminating.
//   token-decrease  a positive `status.fencingToken` of a BerthLease is lower than the previous positive
//                   one seen in the same cluster for the same central key (a drop to 0 on release is
//                   normal); each decrease is one breach.
//   unregistered    a managed Pod is ungated (its gate gone, not terminating) although its (name, UID)
//                   was never registered in `status.workload.pods` of the BerthLease it names
//                   (src/berth/permit.ts: register, then ungate). Watch streams are not ordered with
//                   each other, so a Pod not yet seen registered is confirmed by a direct GET of its
//                   BerthLease before it counts.
//
// API (kept small; other tests use it):
//   const monitor = await InvariantMonitor.start([{ name: 'east', kc }, { name: 'west', kc }]);
//   ...                                   // drive the system
//   await monitor.settle();               // before judging: waits for the confirmations in flight
//   monitor.breaches();                   // every breach so far (copies)
//   monitor.assertClean();                // throws, listing the breaches, if there is any
//   monitor.running('east');              // running managed Pods it currently sees in a cluster
//   await monitor.stop();
// `kc` should be an admin KubeConfig that fault rules do not target; the monitor's watches restart on
// their own after errors, and `watchErrors()` counts those restarts.
import {
  CoreV1Api,
  CustomObjectsApi,
  type KubeConfig,
  type KubernetesListObject,
  type KubernetesObject,
  makeInformer,
  type Informer as NodeInformer,
  type V1Pod,
} from '@kubernetes/client-node';
import {
  type BerthLease,
  GROUP,
  MANAGED_LEASE,
  MANAGED_UID,
  PLURAL,
  SCHEDULING_GATE,
  VERSION,
} from '../../src/berth/api.ts';
import { DispatcherReuse } from '../../src/kube/transport.ts';
import { typedRequestOptions } from './api.ts';

export interface WatchedCluster {
  name: string;
  kc: KubeConfig;
}

export type BreachKind = 'double-run' | 'token-decrease' | 'unregistered';

export interface Breach {
  kind: BreachKind;
  /** Date.now() when the monitor saw it. */
  at: number;
  /** The clusters involved. */
  clusters: string[];
  /** The managed workload or central key, `<namespace>/<leaseName>`. */
  key: string;
  detail: string;
}

/** Pause before a failed watch is restarted. */
const RESTART_DELAY_MS = 100;

const isGated = (pod: V1Pod): boolean =>
  (pod.spec?.schedulingGates ?? []).some((g) => g.name === SCHEDULING_GATE);
const isTerminating = (pod: V1Pod): boolean => !!pod.metadata?.deletionTimestamp;
const isRunning = (pod: V1Pod): boolean =>
  pod.status?.phase === 'Running' && !isGated(pod) && !isTerminating(pod);
const podId = (name: string | undefined, uid: string | undefined): string => `${name ?? ''}/${uid ?? ''}`;

interface Watched {
  name: string;
  custom: CustomObjectsApi;
  /** One connection pool for the confirmation reads (client-node opens a connection per call). */
  pool: DispatcherReuse;
  pods: NodeInformer<V1Pod> & { list(namespace?: string): ReadonlyArray<V1Pod> };
  leases: NodeInformer<KubernetesObject> & {
    get(name: string, namespace?: string): KubernetesObject | undefined;
  };
  /** Running managed Pod UID -> workload key. */
  running: Map<string, string>;
  /** BerthLease UID -> every `name/uid` ever seen registered. */
  registered: Map<string, Set<string>>;
  /** Central key -> last positive token seen. */
  tokens: Map<string, number>;
  /** Pod UIDs already checked for registration. */
  checked: Set<string>;
}

export class InvariantMonitor {
  readonly #clusters: Watched[];
  readonly #breaches: Breach[] = [];
  /** Workload keys currently in a double-run episode (one breach per episode). */
  readonly #doubleRunning = new Set<string>();
  readonly #pending = new Set<Promise<void>>();
  #watchErrors = 0;
  #stopped = false;

  private constructor(clusters: Watched[]) {
    this.#clusters = clusters;
  }

  /** Starts watching Pods and BerthLeases (all namespaces) of every cluster; resolves once all are listed. */
  static async start(clusters: readonly WatchedCluster[]): Promise<InvariantMonitor> {
    const watched = clusters.map((c): Watched => {
      const core = c.kc.makeApiClient(CoreV1Api);
      const custom = c.kc.makeApiClient(CustomObjectsApi);
      return {
        name: c.name,
        custom,
        pool: new DispatcherReuse(),
        pods: makeInformer<V1Pod>(c.kc, '/api/v1/pods', () => core.listPodForAllNamespaces()),
        leases: makeInformer<KubernetesObject>(
          c.kc,
          `/apis/${GROUP}/${VERSION}/${PLURAL}`,
          async () =>
            (await custom.listClusterCustomObject({
              group: GROUP,
              version: VERSION,
              plural: PLURAL,
            })) as KubernetesListObject<KubernetesObject>,
        ),
        running: new Map(),
        registered: new Map(),
        tokens: new Map(),
        checked: new Set(),
      };
    });
    const monitor = new InvariantMonitor(watched);
    for (const c of watched) {
      // Leases first, so the registrations of Pods that already run are known.
      monitor.#wire(c.leases, (obj) => monitor.#onLease(c, obj as BerthLease));
      monitor.#wire(
        c.pods,
        (pod) => monitor.#onPod(c, pod),
        (pod) => monitor.#onPodGone(c, pod),
      );
      await c.leases.start();
      await c.pods.start();
    }
    return monitor;
  }

  breaches(): Breach[] {
    return this.#breaches.map((b) => ({ ...b, clusters: [...b.clusters] }));
  }

  /** Throws an Error listing every breach, if any. */
  assertClean(): void {
    if (this.#breaches.length === 0) return;
    const lines = this.#breaches.map(
      (b) => `${new Date(b.at).toISOString()} ${b.kind} ${b.key} [${b.clusters.join(', ')}]: ${b.detail}`,
    );
    throw new Error(`invariant breaches (${lines.length}):\n${lines.join('\n')}`);
  }

  /** Running managed Pods the monitor currently sees in a cluster. */
  running(cluster: string): number {
    return this.#clusters.find((c) => c.name === cluster)?.running.size ?? 0;
  }

  /** The last positive fencing token the monitor saw for a central key (`namespace/leaseName`) in a cluster. */
  token(cluster: string, key: string): number | undefined {
    return this.#clusters.find((c) => c.name === cluster)?.tokens.get(key);
  }

  /** How many times a watch failed and was restarted. */
  watchErrors(): number {
    return this.#watchErrors;
  }

  /** Waits for the registration checks in flight. */
  async settle(): Promise<void> {
    while (this.#pending.size > 0) await Promise.allSettled([...this.#pending]);
  }

  async stop(): Promise<void> {
    this.#stopped = true;
    for (const c of this.#clusters) {
      await c.pods.stop();
      await c.leases.stop();
    }
    await this.settle();
    for (const c of this.#clusters) await c.pool.close();
  }

  #wire<T extends KubernetesObject>(
    informer: NodeInformer<T>,
    onChange: (obj: T) => void,
    onDelete: (obj: T) => void = () => {},
  ): void {
    informer.on('add', onChange);
    informer.on('update', onChange);
    informer.on('delete', onDelete);
    informer.on('error', () => {
      if (this.#stopped) return;
      this.#watchErrors++;
      setTimeout(() => {
        if (!this.#stopped) informer.start().catch(() => {});
      }, RESTART_DELAY_MS);
    });
  }

  #record(kind: BreachKind, clusters: string[], key: string, detail: string): void {
    this.#breaches.push({ kind, at: Date.now(), clusters, key, detail });
  }

  // ---- BerthLeases: registrations and tokens ----

  #onLease(c: Watched, lease: BerthLease): void {
    const uid = lease.metadata?.uid;
    if (uid !== undefined) this.#remember(c, uid, lease);
    const token = lease.status?.fencingToken ?? 0;
    if (token <= 0) return;
    const key = `${lease.metadata?.namespace ?? ''}/${lease.spec?.leaseName ?? lease.metadata?.name ?? ''}`;
    const highest = c.tokens.get(key) ?? 0;
    if (token < highest)
      this.#record(
        'token-decrease',
        [c.name],
        key,
        `BerthLease ${lease.metadata?.name} fencingToken ${token} after ${highest}`,
      );
    // Each decrease is reported once: later statuses are compared with the lowered token.
    if (token !== highest) c.tokens.set(key, token);
  }

  #remember(c: Watched, leaseUid: string, lease: BerthLease): void {
    const pods = lease.status?.workload?.pods ?? [];
    if (pods.length === 0) return;
    const seen = c.registered.get(leaseUid) ?? new Set<string>();
    c.registered.set(leaseUid, seen);
    for (const p of pods) seen.add(podId(p.name, p.uid));
  }

  // ---- Pods: double runs and registrations ----

  #workloadKey(c: Watched, pod: V1Pod): string | undefined {
    const leaseName = pod.metadata?.annotations?.[MANAGED_LEASE];
    if (leaseName === undefined) return undefined;
    const namespace = pod.metadata?.namespace ?? '';
    const lease = c.leases.get(leaseName, namespace) as BerthLease | undefined;
    return `${namespace}/${lease?.spec?.leaseName ?? leaseName}`;
  }

  #onPod(c: Watched, pod: V1Pod): void {
    const uid = pod.metadata?.uid;
    const key = this.#workloadKey(c, pod);
    if (uid === undefined || key === undefined) return;
    if (isRunning(pod)) c.running.set(uid, key);
    else c.running.delete(uid);
    this.#checkDoubleRun(key);
    if (!isGated(pod) && !isTerminating(pod) && !c.checked.has(uid)) {
      c.checked.add(uid);
      this.#track(this.#checkRegistered(c, pod, key));
    }
  }

  #onPodGone(c: Watched, pod: V1Pod): void {
    const uid = pod.metadata?.uid;
    if (uid === undefined) return;
    const key = c.running.get(uid);
    c.running.delete(uid);
    if (key !== undefined) this.#checkDoubleRun(key);
  }

  #checkDoubleRun(key: string): void {
    const running = this.#clusters
      .map((c) => ({ name: c.name, pods: [...c.running].filter(([, k]) => k === key).map(([uid]) => uid) }))
      .filter((c) => c.pods.length > 0);
    if (running.length < 2) {
      this.#doubleRunning.delete(key);
      return;
    }
    if (this.#doubleRunning.has(key)) return;
    this.#doubleRunning.add(key);
    const detail = running.map(
      (c) => `${c.name}: ${c.pods.map((uid) => this.#podName(c.name, uid)).join(', ')}`,
    );
    this.#record(
      'double-run',
      running.map((c) => c.name),
      key,
      `running Pods of ${key} in ${running.map((c) => c.name).join(' and ')} (${detail.join('; ')})`,
    );
  }

  #podName(cluster: string, uid: string): string {
    const pods = this.#clusters.find((c) => c.name === cluster)?.pods.list() ?? [];
    return pods.find((p) => p.metadata?.uid === uid)?.metadata?.name ?? uid;
  }

  #track(work: Promise<void>): void {
    this.#pending.add(work);
    void work.finally(() => this.#pending.delete(work));
  }

  async #checkRegistered(c: Watched, pod: V1Pod, key: string): Promise<void> {
    const leaseUid = pod.metadata?.annotations?.[MANAGED_UID] ?? '';
    const id = podId(pod.metadata?.name, pod.metadata?.uid);
    if (c.registered.get(leaseUid)?.has(id)) return;
    // The registration may be on its way on the lease watch: read the lease itself.
    const namespace = pod.metadata?.namespace ?? '';
    const leaseName = pod.metadata?.annotations?.[MANAGED_LEASE] ?? '';
    try {
      const lease = (await c.custom.getNamespacedCustomObject(
        { group: GROUP, version: VERSION, plural: PLURAL, namespace, name: leaseName },
        typedRequestOptions({ pool: c.pool }),
      )) as BerthLease;
      if (lease.metadata?.uid === leaseUid) this.#remember(c, leaseUid, lease);
    } catch {
      // Gone or unreadable: only what the watch saw counts.
    }
    if (c.registered.get(leaseUid)?.has(id)) return;
    this.#record(
      'unregistered',
      [c.name],
      key,
      `Pod ${namespace}/${pod.metadata?.name} (${pod.metadata?.uid}) ungated without registration in BerthLease ${leaseName}`,
    );
  }
}
