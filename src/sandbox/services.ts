// Service routing for the admission chain: what kube-proxy and the endpoints controller do for a webhook
// Service. A Service maps to one address, or to several endpoints (replicas); an endpoint with a readiness
// URL is used only while that URL answers 200 (polled, like a readiness probe feeding the endpoints
// controller), and calls are spread round-robin over the ready endpoints. With none ready the Service has
// no endpoints, which the API server only discovers when dialing.

export interface ServiceEndpoint {
  host: string;
  port: number;
  /** Readiness probe (plain HTTP GET, e.g. `http://127.0.0.1:8081/readyz`); always ready without one. */
  readinessUrl?: string;
}

/** How often readiness URLs are probed: about kubelet probe + endpoint propagation in a small cluster. */
export const READINESS_POLL_MS = 150;
const PROBE_TIMEOUT_MS = 1_000;

interface Tracked {
  endpoint: ServiceEndpoint;
  ready: boolean;
}

interface Route {
  endpoints: Tracked[];
  next: number;
  timer: NodeJS.Timeout | undefined;
  probing: boolean;
}

export class ServiceRoutes {
  readonly #routes = new Map<string, Route>();

  /** Routes a Service to one address (always ready) or to several endpoints. Replaces any earlier route. */
  map(namespace: string, name: string, target: ServiceEndpoint | readonly ServiceEndpoint[]): void {
    this.unmap(namespace, name);
    const list = Array.isArray(target) ? target : [target as ServiceEndpoint];
    const route: Route = {
      endpoints: list.map((endpoint) => ({ endpoint, ready: endpoint.readinessUrl === undefined })),
      next: 0,
      timer: undefined,
      probing: false,
    };
    this.#routes.set(`${namespace}/${name}`, route);
    if (route.endpoints.some((t) => t.endpoint.readinessUrl !== undefined)) {
      void this.#probe(route);
      route.timer = setInterval(() => void this.#probe(route), READINESS_POLL_MS);
      route.timer.unref();
    }
  }

  unmap(namespace: string, name: string): void {
    const key = `${namespace}/${name}`;
    const route = this.#routes.get(key);
    if (route === undefined) return;
    clearInterval(route.timer);
    this.#routes.delete(key);
  }

  /** The endpoint the next call dials, or undefined when the Service has no ready endpoint. */
  resolve(namespace: string, name: string): { host: string; port: number } | undefined {
    const route = this.#routes.get(`${namespace}/${name}`);
    if (route === undefined) return undefined;
    const ready = route.endpoints.filter((t) => t.ready);
    if (ready.length === 0) return undefined;
    const pick = ready[route.next++ % ready.length]!.endpoint;
    return { host: pick.host, port: pick.port };
  }

  stop(): void {
    for (const route of this.#routes.values()) clearInterval(route.timer);
    this.#routes.clear();
  }

  async #probe(route: Route): Promise<void> {
    // One round at a time: a hung probe must not pile up requests.
    if (route.probing) return;
    route.probing = true;
    try {
      await Promise.all(
        route.endpoints.map(async (tracked) => {
          const url = tracked.endpoint.readinessUrl;
          if (url === undefined) return;
          tracked.ready = await answers200(url);
        }),
      );
    } finally {
      route.probing = false;
    }
  }
}

async function answers200(url: string): Promise<boolean> {
  try {
    const res = await fetch(url, { signal: AbortSignal.timeout(PROBE_TIMEOUT_MS) });
    await res.arrayBuffer();
    return res.status === 200;
  } catch {
    return false;
  }
}
