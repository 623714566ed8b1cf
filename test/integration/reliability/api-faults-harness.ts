// Shared by the api-faults-*.test.ts files (issue #10, Kubernetes API faults): a collector of errors that
// escaped every handler, the admission world (the operator's WorkloadAdmission behind the fail-closed
// configurations, its deadline on an injected clock) and time-driving helpers for injected clocks.
import { AdmissionregistrationV1Api, AppsV1Api, CoreV1Api, CustomObjectsApi } from '@kubernetes/client-node';
import { Registry } from 'prom-client';
import { GROUP, PLURAL, VERSION } from '../../../src/berth/api.ts';
import { installBerthLeaseCrd } from '../../../src/berth/crd.ts';
import type { ManualClock } from '../../../src/kube/clock.ts';
import {
  mutatingWebhookConfiguration,
  validatingWebhookConfiguration,
} from '../../../webhooks/configurations.ts';
import { AdmissionServer } from '../../../webhooks/server.ts';
import { type KubeWorkloadAdmission, kubeWorkloadAdmission } from '../../../webhooks/workload-admission.ts';
import { SwappableCertificates, testPki } from '../../fixtures/webhooks/certs.ts';
import { type EventuallyOptions, eventually } from '../../helpers/eventually.ts';
import { kubeConfigFrom, startTestSandbox, type TestSandbox } from '../../helpers/sandbox.ts';

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
  t: TestSandbox;
  apps: AppsV1Api;
  custom: CustomObjectsApi;
  /** Drives the admission server's review deadline. */
  clock: ManualClock;
  stop(): Promise<void>;
}

/**
 * A sandbox (RBAC off: the tests act as admin) with the BerthLease CRD and the operator's WorkloadAdmission
 * reading as the operator's service account, so that fault rules scoped to OPERATOR_USER hit only the
 * webhook's own reads and writes. Review deadlines run on `clock`.
 */
export async function startAdmissionWorld(clock: ManualClock): Promise<AdmissionWorld> {
  const t = await startTestSandbox();
  let admission: KubeWorkloadAdmission | undefined;
  let server: AdmissionServer | undefined;
  const stop = async (): Promise<void> => {
    const closing = server?.close();
    // The server's close timers run on `clock`: cut the remaining (idle keep-alive) connections now.
    clock.advance(0);
    await closing;
    await admission?.close();
    await t.stop();
  };
  try {
    const core = t.kc.makeApiClient(CoreV1Api);
    const custom = t.kc.makeApiClient(CustomObjectsApi);
    for (const name of [OPERATOR_NS, ADMISSION_NS])
      await core.createNamespace({ body: { metadata: { name } } });
    await installBerthLeaseCrd(t.kc);
    await eventually(() =>
      custom.listNamespacedCustomObject({
        group: GROUP,
        version: VERSION,
        plural: PLURAL,
        namespace: ADMISSION_NS,
      }),
    );
    const pki = await testPki([`${WEBHOOK_SERVICE}.${OPERATOR_NS}.svc`]);
    const registry = new Registry();
    admission = kubeWorkloadAdmission({
      kc: kubeConfigFrom(t.sandbox.users.serviceAccount(OPERATOR_NS, 'berth-operator').kubeconfig),
      operatorUser: OPERATOR_USER,
      registry,
    });
    server = new AdmissionServer({
      port: 0,
      host: '127.0.0.1',
      certificates: new SwappableCertificates(pki.pair),
      handlers: admission.handlers,
      registry,
      clock,
      closeTimeoutMs: 0,
    });
    await server.start();
    t.sandbox.services.map(OPERATOR_NS, WEBHOOK_SERVICE, { host: '127.0.0.1', port: server.port });
    const configs = t.kc.makeApiClient(AdmissionregistrationV1Api);
    const params = { namespace: OPERATOR_NS, serviceName: WEBHOOK_SERVICE, caBundle: pki.caBundle };
    await configs.createMutatingWebhookConfiguration({ body: mutatingWebhookConfiguration(params) });
    await configs.createValidatingWebhookConfiguration({ body: validatingWebhookConfiguration(params) });
    return { t, apps: t.kc.makeApiClient(AppsV1Api), custom, clock, stop };
  } catch (err) {
    await stop();
    throw err;
  }
}
