// Routing a Service to servers on this machine, as the EndpointSlice controller would route it to Pods:
// kube-apiserver (with --enable-aggregator-routing) resolves a webhook's `clientConfig.service` through
// the Service's EndpointSlices and dials the first Ready endpoint. There is no kubelet to probe a local
// server, so an endpoint's readiness URL is polled here. Used by the tests and by `npm start`.
import { CoreV1Api, DiscoveryV1Api, type KubeConfig } from '@kubernetes/client-node';
import { findHostAddress } from './controlplane.ts';

export interface LocalEndpoint {
  /** Port of a server on this machine listening on all addresses (or on the host address). */
  port: number;
  /**
   * Readiness URL (plain HTTP GET, e.g. http://127.0.0.1:8081/readyz): the endpoint is Ready only while it
   * answers 200, as a kubelet's readiness probe would make it. Always Ready without one.
   */
  readinessUrl?: string;
}

export interface ServiceRoute {
  /** Replaces the endpoints. */
  update(endpoints: readonly LocalEndpoint[]): Promise<void>;
  /** Deletes the EndpointSlices (the Service stays, without these endpoints). */
  remove(): Promise<void>;
  /** Stops polling readiness (remove() does too). */
  stopProbing(): void;
}

/** About a kubelet's probe period plus endpoint propagation in a small cluster. */
const READINESS_POLL_MS = 150;
const PROBE_TIMEOUT_MS = 1_000;
const MANAGED_BY = 'berth-local';
const SERVICE_PORT = 443;

const isStatus = (err: unknown, code: number): boolean => (err as { code?: unknown }).code === code;

/**
 * Routes port 443 of Service `namespace/name` to `endpoints` on this machine (one EndpointSlice each, at
 * its non-loopback IPv4 address: EndpointSlices refuse loopback addresses). The Service is created
 * without a selector when missing; an existing one (e.g. the install's) keeps its selector and ports.
 */
export async function routeServiceHere(
  kc: KubeConfig,
  namespace: string,
  name: string,
  endpoints: readonly LocalEndpoint[],
): Promise<ServiceRoute> {
  const address = findHostAddress();
  if (address === undefined)
    throw new Error(
      'this machine has no non-loopback IPv4 address, which an EndpointSlice needs to route a Service here; add one (e.g. `sudo ip addr add 192.0.2.10/32 dev lo`)',
    );
  const core = kc.makeApiClient(CoreV1Api);
  let service = await core.readNamespacedService({ namespace, name }).catch((err: unknown) => {
    if (isStatus(err, 404)) return undefined;
    throw err;
  });
  service ??= await core.createNamespacedService({
    namespace,
    body: { metadata: { name }, spec: { ports: [{ name: 'https', port: SERVICE_PORT, protocol: 'TCP' }] } },
  });
  const port = service.spec?.ports?.find((p) => p.port === SERVICE_PORT);
  if (port === undefined) throw new Error(`Service ${namespace}/${name} has no port ${SERVICE_PORT}`);
  const route = new EndpointRoute(
    kc.makeApiClient(DiscoveryV1Api),
    namespace,
    name,
    port.name ?? '',
    address,
  );
  await route.update(endpoints);
  return route;
}

interface Tracked {
  endpoint: LocalEndpoint;
  ready: boolean;
}

class EndpointRoute implements ServiceRoute {
  readonly #api: DiscoveryV1Api;
  readonly #namespace: string;
  readonly #service: string;
  readonly #portName: string;
  readonly #address: string;
  #tracked: Tracked[] = [];
  #timer: NodeJS.Timeout | undefined;
  #probing = false;

  constructor(api: DiscoveryV1Api, namespace: string, service: string, portName: string, address: string) {
    this.#api = api;
    this.#namespace = namespace;
    this.#service = service;
    this.#portName = portName;
    this.#address = address;
  }

  stopProbing(): void {
    clearInterval(this.#timer);
    this.#timer = undefined;
  }

  #sliceName(i: number): string {
    return `${this.#service}-local-${i}`;
  }

  async #write(i: number, t: Tracked): Promise<void> {
    const body = {
      apiVersion: 'discovery.k8s.io/v1',
      kind: 'EndpointSlice',
      metadata: {
        name: this.#sliceName(i),
        labels: {
          'kubernetes.io/service-name': this.#service,
          // Not the EndpointSlice controller's: it leaves these alone even beside a Service selector.
          'endpointslice.kubernetes.io/managed-by': MANAGED_BY,
        },
      },
      addressType: 'IPv4',
      endpoints: [{ addresses: [this.#address], conditions: { ready: t.ready } }],
      ports: [{ name: this.#portName, port: t.endpoint.port, protocol: 'TCP' }],
    };
    try {
      await this.#api.replaceNamespacedEndpointSlice({
        namespace: this.#namespace,
        name: this.#sliceName(i),
        body,
      });
    } catch (err) {
      if (!isStatus(err, 404)) throw err;
      await this.#api.createNamespacedEndpointSlice({ namespace: this.#namespace, body });
    }
  }

  async update(endpoints: readonly LocalEndpoint[]): Promise<void> {
    this.stopProbing();
    const previous = this.#tracked.length;
    this.#tracked = endpoints.map((endpoint) => ({ endpoint, ready: endpoint.readinessUrl === undefined }));
    for (const t of this.#tracked)
      if (t.endpoint.readinessUrl) t.ready = await probe(t.endpoint.readinessUrl);
    for (const [i, t] of this.#tracked.entries()) await this.#write(i, t);
    for (let i = this.#tracked.length; i < previous; i++) await this.#delete(i);
    if (this.#tracked.some((t) => t.endpoint.readinessUrl !== undefined)) {
      this.#timer = setInterval(() => void this.#probeAll(), READINESS_POLL_MS);
      this.#timer.unref();
    }
  }

  async #probeAll(): Promise<void> {
    if (this.#probing) return;
    this.#probing = true;
    try {
      for (const [i, t] of this.#tracked.entries()) {
        if (!t.endpoint.readinessUrl) continue;
        const ready = await probe(t.endpoint.readinessUrl);
        if (ready === t.ready) continue;
        t.ready = ready;
        // A failed write is retried at the next probe.
        await this.#write(i, t).catch(() => {
          t.ready = !ready;
        });
      }
    } finally {
      this.#probing = false;
    }
  }

  async #delete(i: number): Promise<void> {
    await this.#api
      .deleteNamespacedEndpointSlice({ namespace: this.#namespace, name: this.#sliceName(i) })
      .catch((err: unknown) => {
        if (!isStatus(err, 404)) throw err;
      });
  }

  async remove(): Promise<void> {
    this.stopProbing();
    const n = this.#tracked.length;
    this.#tracked = [];
    for (let i = 0; i < n; i++) await this.#delete(i);
  }
}

async function probe(url: string): Promise<boolean> {
  try {
    const res = await fetch(url, { signal: AbortSignal.timeout(PROBE_TIMEOUT_MS) });
    await res.body?.cancel();
    return res.status === 200;
  } catch {
    return false;
  }
}
