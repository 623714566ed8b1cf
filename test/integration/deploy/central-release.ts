// A berth-apiserver release's server, run in the test process as a Pod of the release's Deployment would run
// it (KWOK would only fake the Pod): `berth-operator central` with the container's args, every path they name
// mapped to the files the kubelet would mount there (./kubelet.ts), the in-cluster client
// (automountServiceAccountToken) as the release's ServiceAccount through the recording proxy, and the
// release's Service routed here as the EndpointSlice controller would route it to the Pod. Only the ports
// differ: free ones, as nothing may bind the Pod's. Used by helm-apiserver-install.test.ts and
// helm-pair.test.ts.
import { mkdtemp } from 'node:fs/promises';
import { join } from 'node:path';
import { DiscoveryV1Api, type V1Container, type V1Deployment, type V1PodSpec } from '@kubernetes/client-node';
import { expect } from 'vitest';
import { find, type ManifestObject } from '../../../scripts/install-manifest.ts';
import { centralCommand, runCentral } from '../../../src/central/command.ts';
import type { CentralServer } from '../../../src/central/server.ts';
import { parseFlags } from '../../../src/cli.ts';
import { createLogger } from '../../../src/observability/logger.ts';
import type { ApiProxy } from '../../helpers/api-proxy.ts';
import type { ServiceRoute, TestCluster } from '../../helpers/cluster.ts';
import { eventually } from '../../helpers/eventually.ts';
import { localArg, writeVolumeMounts } from './kubelet.ts';

/** The chart's fullname for release `release` (no nameOverride). */
export const apiserverFullname = (release: string): string => `${release}-berth-apiserver`;

/** The pod spec of the release's Deployment `fullname`. */
export function apiserverPodSpec(install: ManifestObject[], fullname: string): V1PodSpec {
  const spec = find<V1Deployment>(install, 'Deployment', fullname).spec?.template.spec;
  if (spec === undefined) throw new Error('the release has no pod spec');
  return spec;
}

/** Its `apiserver` container. */
export function apiserverContainer(install: ManifestObject[], fullname: string): V1Container {
  const c = apiserverPodSpec(install, fullname).containers.find((x) => x.name === 'apiserver');
  if (c === undefined) throw new Error('the release runs no apiserver container');
  return c;
}

/**
 * The values of a release this process can stand in for: no replicas (KWOK would fake their Pods), the
 * Kubernetes Lease store in `leases`, TLS and static keys from the named Secrets, the Service on `port`
 * (routeService routes port 443 of a Service).
 */
export function standInValues(o: { leases: string; tlsSecret: string; keysSecret: string; port: number }) {
  return {
    replicaCount: 0,
    store: { backend: 'k8s' },
    coordination: { namespace: o.leases, inCluster: true },
    tls: { existingSecret: o.tlsSecret },
    auth: { mode: 'static-keys', staticKeys: { secretName: o.keysSecret } },
    service: { port: o.port },
  };
}

export interface CentralReleaseOptions {
  t: TestCluster;
  proxy: ApiProxy;
  /** The release's objects (`helm get manifest`). */
  install: ManifestObject[];
  namespace: string;
  fullname: string;
  /** Where the Pod's files are written (a fresh directory under it each start). */
  scratch: string;
}

export interface RunningCentral {
  server: CentralServer;
  route: ServiceRoute;
  /** Removes the route, stops the server and expects its exit code 0. */
  stop(): Promise<void>;
}

/** Starts the release's server and routes the release's Service to it once it serves. */
export async function startCentralRelease(o: CentralReleaseOptions): Promise<RunningCentral> {
  const { t, namespace, fullname } = o;
  const pod = apiserverPodSpec(o.install, fullname);
  const c = apiserverContainer(o.install, fullname);
  expect(pod.automountServiceAccountToken).toBe(true);
  const mounts = await writeVolumeMounts(t, namespace, pod, c, await mkdtemp(join(o.scratch, 'pod-')));
  const [command, ...argv] = c.args ?? [];
  expect(command).toBe('central');
  const account = await t.serviceAccount(namespace, pod.serviceAccountName ?? '');
  const inCluster = await t.writeKubeconfig(o.proxy.kubeconfigFor(account.kubeconfig));
  const flags = parseFlags(centralCommand, [
    ...argv.map((arg) => localArg(arg, mounts)),
    '--listen-addr=:0',
    '--metrics-addr=127.0.0.1:0',
    `--coordination-kubeconfig=${inCluster}`,
  ]);
  let stop!: () => void;
  const until = new Promise<void>((resolve) => {
    stop = resolve;
  });
  let started!: (s: CentralServer) => void;
  const server = new Promise<CentralServer>((resolve) => {
    started = resolve;
  });
  const done = runCentral(flags, {
    until,
    onStarted: started,
    logger: createLogger({ name: 'central', level: process.env.BERTH_TEST_LOGS ? 'debug' : 'silent' }),
  });
  const running = await Promise.race([
    server,
    done.then((code) => {
      throw new Error(`central exited with ${code} before serving`);
    }),
  ]);
  const readinessUrl = new URL('/readyz', running.metricsUrl).href;
  const route = await t.routeService(namespace, fullname, [{ port: running.port, readinessUrl }]);
  return {
    server: running,
    route,
    async stop() {
      await route.remove();
      stop();
      expect(await done).toBe(0);
    },
  };
}

/**
 * Where a client of Service `namespace/name` connects: `<address>:<port>` of a ready endpoint of its `https`
 * port, read from its EndpointSlices as kube-proxy would (nothing resolves cluster DNS or ClusterIPs here).
 */
export async function serviceEndpoint(t: TestCluster, namespace: string, name: string): Promise<string> {
  const service = await t.core.readNamespacedService({ namespace, name });
  const port = service.spec?.ports?.find((p) => p.name === 'https');
  expect(port?.targetPort).toBe('https');
  const discovery = t.kc.makeApiClient(DiscoveryV1Api);
  const endpoint = await eventually(
    async () => {
      const slices = await discovery.listNamespacedEndpointSlice({
        namespace,
        labelSelector: `kubernetes.io/service-name=${name}`,
      });
      for (const slice of slices.items) {
        const p = slice.ports?.find((x) => x.name === port?.name);
        const e = (slice.endpoints ?? []).find((x) => x.conditions?.ready);
        if (p?.port !== undefined && e !== undefined) return `${e.addresses[0]}:${p.port}`;
      }
      return undefined;
    },
    { timeoutMs: 10_000 },
  );
  if (endpoint === undefined) throw new Error('unreachable: eventually resolves with a value');
  return endpoint;
}
