// The admission benchmark's peer: Pepr's own admission Controller (Express on node:https), started in this
// process without a cluster, set up like this:
//   - SSL_KEY_PATH / SSL_CERT_PATH point at the benchmark's certificate (instead of the Secret mount);
//   - PEPR_API_PATH is a fixed 64-hex path secret (requests go to /mutate/<it>);
//   - kubernetes-fluent-client's K8s() is replaced for Pepr's PeprStore model only by an in-memory fake:
//     the Controller binds its routes only after its StoreController read the store CR (Get, Patch,
//     Watch). Nothing on the admission path touches the store.
// Same mutation as ours on a managed Pod: a scheduling gate and a label (Pepr adds its own status annotation
// too and computes the patch by diffing). LOG_LEVEL info, Pepr's deployed default, logging to stdout
// (the benchmark sends it to /dev/null).
// Env: BENCH_PEPR_DIR (where pepr is installed), BENCH_CERT, BENCH_KEY, BENCH_PORT.
import Module, { createRequire } from 'node:module';
import { join } from 'node:path';
import { PEPR_API_PATH, PEPR_GATE, PEPR_LABEL } from './pepr-peer.ts';

interface Watcher {
  start(): Promise<void>;
  close(): void;
}
interface FakeStoreClient {
  InNamespace(namespace: string): FakeStoreClient;
  Get(name: string): Promise<unknown>;
  Patch(ops: unknown[]): Promise<unknown>;
  Apply(obj: unknown): Promise<unknown>;
  Watch(cb: (obj: unknown, phase: string) => void): Watcher;
}
type K8sFn = (
  model: { name?: string } | undefined,
  filters?: { namespace?: string; name?: string },
) => unknown;
type Loader = (request: string, parent: unknown, isMain: boolean) => unknown;

const fakeStore = (namespace = 'pepr-system', name = 'pepr-store'): unknown => ({
  apiVersion: 'pepr.dev/v1',
  kind: 'PeprStore',
  metadata: { name, namespace, labels: { 'pepr.dev-cacheID': String(Date.now()) } },
  data: { __pepr_do_not_delete__: 'k-thx-bye' },
});

function stubPeprStore(): void {
  const loader = Module as unknown as { _load: Loader };
  const original = loader._load;
  let wrapped: unknown;
  loader._load = function load(this: unknown, request, parent, isMain) {
    const real = original.call(this, request, parent, isMain);
    if (request !== 'kubernetes-fluent-client') return real;
    if (wrapped !== undefined) return wrapped;
    const realK8s = (real as { K8s: K8sFn }).K8s;
    const K8s: K8sFn = (model, filters = {}) => {
      if (model?.name !== 'Store') return realK8s(model, filters);
      let namespace = filters.namespace;
      const client: FakeStoreClient = {
        InNamespace(n) {
          namespace = n;
          return client;
        },
        Get: async (name) => fakeStore(namespace, name),
        Patch: async () => fakeStore(filters.namespace, filters.name),
        Apply: async (obj) => obj,
        Watch: (cb) => ({
          async start() {
            setImmediate(() => cb(fakeStore(filters.namespace, filters.name), 'ADDED'));
          },
          close() {},
        }),
      };
      return client;
    };
    wrapped = Object.assign(Object.create(null), real, { K8s });
    return wrapped;
  };
}

interface PeprPod {
  SetLabel(key: string, value: string): void;
  Raw: { spec?: { schedulingGates?: { name: string }[] } };
}
interface Pepr {
  PeprModule: new (
    cfg: unknown,
    capabilities: unknown[],
    opts: { deferStart: boolean },
  ) => { start(port: number): void };
  Capability: new (
    cfg: unknown,
  ) => {
    When(kind: unknown): { IsCreated(): { Mutate(fn: (pod: PeprPod) => void): unknown } };
  };
  a: { Pod: unknown };
}

const dir = process.env.BENCH_PEPR_DIR ?? '';
process.env.SSL_KEY_PATH = process.env.BENCH_KEY ?? '';
process.env.SSL_CERT_PATH = process.env.BENCH_CERT ?? '';
process.env.PEPR_API_PATH = PEPR_API_PATH;
process.env.PEPR_WATCH_MODE = 'false';
process.env.LOG_LEVEL ??= 'info';
stubPeprStore();
const require = createRequire(join(dir, 'package.json'));
const { PeprModule, Capability, a } = require('pepr') as Pepr;
const version = (require('pepr/package.json') as { version: string }).version;

const capability = new Capability({
  name: 'berth-bench',
  description: 'gates new Pods as berth does for a managed one',
  namespaces: [],
});
capability
  .When(a.Pod)
  .IsCreated()
  .Mutate((pod) => {
    pod.SetLabel(PEPR_LABEL, 'true');
    pod.Raw.spec ??= {};
    pod.Raw.spec.schedulingGates = [...(pod.Raw.spec.schedulingGates ?? []), { name: PEPR_GATE }];
  });
const module = new PeprModule(
  {
    description: 'berth admission benchmark peer',
    pepr: {
      uuid: 'berth-bench',
      onError: 'ignore',
      webhookTimeout: 10,
      alwaysIgnore: { namespaces: [] },
      peprVersion: version,
      appVersion: '0.0.1',
    },
  },
  [capability],
  { deferStart: true },
);
module.start(Number(process.env.BENCH_PORT));
process.stdin.resume();
process.stdin.on('end', () => process.exit(0));
