// Shared by the api-faults-*.test.ts files (issue #10, Kubernetes API faults): a collector of errors that
// escaped every handler, the admission world (the operator's WorkloadAdmission behind the fail-closed
// configurations, its deadline on an injected clock) and time-driving helpers for injected clocks.
import { AdmissionregistrationV1Api, AppsV1Api, CustomObjectsApi } from '@kubernetes/client-node';
import { Registry } from 'prom-client';
import { baseRbac } from '../../../scripts/deploy-rbac.ts';
import { GROUP, PLURAL, VERSION } from '../../../src/berth/api.ts';
import type { NamespaceScope } from '../../../src/berth/namespace-scope.ts';
import type { ManualClock } from '../../../src/kube/clock.ts';
import {
  mutatingWebhookConfiguration,
  validatingWebhookConfiguration,
} from '../../../webhooks/configurations.ts';
import { AdmissionServer } from '../../../webhooks/server.ts';
import { kubeWorkloadAdmission } from '../../../webhooks/workload-admission.ts';
import { SwappableCertificates, testPki } from '../../fixtures/webhooks/certs.ts';
import { untilAdmissionServed } from '../../helpers/admission-probe.ts';
import { ApiProxy } from '../../helpers/api-proxy.ts';
import { IN_SCOPE, TestCluster } from '../../helpers/cluster.ts';
import { type EventuallyOptions, eventually } from '../../helpers/eventually.ts';
import { startScopeView } from '../../helpers/scope-view.ts';
import { createObjects } from './operator-cluster.ts';

export interface UncaughtCollector {
  /** One line per unhandled rejection or uncaught exception since the collector was installed. */
  readonly errors: string[];
  dispose(): void;
}

/**
 * Records every unhandled rejection and uncaught exception of this test process. A fault that makes a
 * component drop a promise or throw from a callback shows up here even when the test's own assertions
 * pass.
 */
export function collectUncaught(): UncaughtCollector {
  const errors: string[] = [];
  const describe = (kind: string) => (err: unknown) => {
    errors.push(`${kind}: ${err instanceof Error ? (err.stack ?? err.message) : String(err)}`);
  };
  const onRejection = describe('unhandledRejection');
  const onException = describe('uncaughtException');
  process.on('unhandledRejection', onRejection);
  process.on('uncaughtException', onException);
  return {
    errors,
    dispose() {
      process.off('unhandledRejection', onRejection);
      process.off('uncaughtException', onException);
    },
  };
}

/**
 * Polls `probe` while moving `clock` forward by `stepMs` before each attempt: for code whose retries and
 * timeouts run on an injected clock, so that only as much time passes as the code asks for.
 */
export async function advanceUntil<T>(
  clock: ManualClock,
  stepMs: number,
  probe: () => T | Promise<T>,
  opts: EventuallyOptions = {},
): Promise<T> {
  return eventually(async () => {
    clock.advance(stepMs);
    return probe();
  }, opts);
}

export { rejection } from '../../helpers/rejection.ts';

// ---- the admission world ----

export const ADMISSION_NS = 'shop';
export const OPERATOR_NS = 'berth-system';
export const WEBHOOK_SERVICE = 'berth-operator-webhook';
export const OPERATOR_USER = `system:serviceaccount:${OPERATOR_NS}:berth-operator`;
export const MUTATE_DENIED = 'admission webhook "mutate-workloads.berth.skaphos.io" denied the request: ';
export const VALIDATE_DENIED = 'admission webhook "validate-workloads.berth.skaphos.io" denied the request: ';

export interface AdmissionWorld {
  t: TestCluster;
  /** In front of the API server for the webhook's own reads and writes (and only those). */
  proxy: ApiProxy;
  apps: AppsV1Api;
  custom: CustomObjectsApi;
  /** Drives the admission server's review deadline. */
  clock: ManualClock;
  stop(): Promise<void>;
}

/**
 * A control plane of its own (the configurations are the install's, cluster-wide) with the BerthLease CRD
 * and the operator's WorkloadAdmission behind the fail-closed configurations, reading as the operator's
 * service account (with the install's base RBAC) through `proxy`, so that fault rules hit only the
 * webhook's own reads and writes; the tests act as admin. Review deadlines run on `clock`.
 */
export async function startAdmissionWorld(clock: ManualClock): Promise<AdmissionWorld> {
  const t = await TestCluster.own();
  let proxy: ApiProxy | undefined;
  let server: AdmissionServer | undefined;
  let scope: NamespaceScope | undefined;
  const stop = async (): Promise<void> => {
    await scope?.informer.stop();
    const closing = server?.close();
    // The server's close timers run on `clock`: cut the remaining (idle keep-alive) connections now.
    clock.advance(0);
    await closing;
    await proxy?.stop();
    await t.stop();
  };
  try {
    await t.createNamespace(OPERATOR_NS);
    await t.createNamespace(ADMISSION_NS, IN_SCOPE);
    await t.installBerthLeaseCrd();
    await createObjects(t.kc, baseRbac());
    proxy = await ApiProxy.start(t);
    const sa = await t.serviceAccount(OPERATOR_NS, 'berth-operator');
    // The RBAC authorizer sees the new bindings through its informer, a moment after the writes.
    const asOperator = sa.kc.makeApiClient(CustomObjectsApi);
    await eventually(() =>
      asOperator.listNamespacedCustomObject({
        group: GROUP,
        version: VERSION,
        plural: PLURAL,
        namespace: ADMISSION_NS,
      }),
    );
    const pki = await testPki([`${WEBHOOK_SERVICE}.${OPERATOR_NS}.svc`]);
    const registry = new Registry();
    // The replica's view of the scope reads past the proxy: the faults are for the reviews' own reads.
    scope = await startScopeView(t.transport(sa.kc), clock);
    const handlers = kubeWorkloadAdmission({
      transport: t.transport(t.kubeConfigFor(proxy.kubeconfigFor(sa.kubeconfig))),
      operatorUser: OPERATOR_USER,
      scope: 'opt-in',
      scopeEntries: scope,
      registry,
    });
    // On every address, as the operator's: the Service's endpoint is this machine's address.
    server = new AdmissionServer({
      port: 0,
      certificates: new SwappableCertificates(pki.pair),
      handlers,
      registry,
      clock,
      closeTimeoutMs: 0,
    });
    await server.start();
    await t.routeService(OPERATOR_NS, WEBHOOK_SERVICE, [{ port: server.port }]);
    const configs = t.kc.makeApiClient(AdmissionregistrationV1Api);
    const params = {
      namespace: OPERATOR_NS,
      serviceName: WEBHOOK_SERVICE,
      caBundle: pki.caBundle,
      scope: 'opt-in',
    } as const;
    await configs.createMutatingWebhookConfiguration({ body: mutatingWebhookConfiguration(params) });
    await configs.createValidatingWebhookConfiguration({ body: validatingWebhookConfiguration(params) });
    await untilAdmissionServed(t.core, ADMISSION_NS, registry);
    return {
      t,
      proxy,
      apps: t.kc.makeApiClient(AppsV1Api),
      custom: t.kc.makeApiClient(CustomObjectsApi),
      clock,
      stop,
    };
  } catch (err) {
    await stop();
    throw err;
  }
}
