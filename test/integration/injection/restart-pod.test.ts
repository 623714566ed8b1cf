// `--injection-restart-pod-on-loss` on real kube-apiservers (docs/injection.md, "Restarting the Pod on a
// loss"): the injection webhooks served from this process, registered as the leader registers them, for a
// Pod created through the API. Kubernetes 1.36 with its default feature gates stores the injected
// RestartAllContainers rule on berth-sidecar as written (the kubelet's side, which no KWOK node runs, is
// the assumption docs/verification.md states), and its scheduler places such a Pod only on a node that
// declares RestartAllContainersOnContainerExits (NodeDeclaredFeatures), so a kubelet that would ignore the
// rule never runs it. An API server with the ContainerRestartRules gate off drops the rule before the
// validating webhook sees the Pod, and the webhook then refuses it, naming the gates, instead of admitting
// a Pod whose restarted app would run unleased.
import { AdmissionregistrationV1Api, type V1Pod } from '@kubernetes/client-node';
import { Registry } from 'prom-client';
import { afterEach, describe, expect, it } from 'vitest';
import { createAuthority } from '../../../hack/controlplane/pki.ts';
import { parseFlags } from '../../../src/cli.ts';
import {
  injectionMutatingConfiguration,
  injectionValidatingConfiguration,
} from '../../../src/injection/configurations.ts';
import {
  ANNOTATIONS,
  ENV,
  INJECT_LABEL,
  INJECT_VALUE,
  SIDECAR_CONTAINER,
} from '../../../src/injection/contract.ts';
import { parseInjectionConfig } from '../../../src/injection/flags.ts';
import { injectionHandlers, MUTATE_POD_PATH, VALIDATE_POD_PATH } from '../../../src/injection/handlers.ts';
import { RESTART_POD_EXIT_CODE } from '../../../src/injection/restart-pod.ts';
import { injectorSettings } from '../../../src/injection/settings.ts';
import { runCommand } from '../../../src/run.ts';
import { AdmissionServer } from '../../../webhooks/server.ts';
import { SwappableCertificates } from '../../fixtures/webhooks/certs.ts';
import { webhookRequests } from '../../helpers/admission-probe.ts';
import { mergePatch } from '../../helpers/api.ts';
import { TestCluster } from '../../helpers/cluster.ts';
import { eventually } from '../../helpers/eventually.ts';
import { rejection } from '../../helpers/rejection.ts';

const OPERATOR_NS = 'berth-system';
const SERVICE = 'berth-operator-webhook';
const NS = 'apps';
const VALIDATE = 'admission webhook "validate-injection.berth.skaphos.io" denied the request: ';

const settings = injectorSettings(
  parseInjectionConfig(
    parseFlags(
      runCommand,
      [
        '--enable-injection-webhook',
        '--injection-helper-image=registry.example.com/berth-operator:test',
        '--injection-restart-pod-on-loss',
      ],
      {},
    ),
  ),
  {
    apiServer: 'https://berth.example:8443',
    clusterId: 'east',
    serverName: '',
    insecureSkipTlsVerify: false,
  },
  OPERATOR_NS,
);

const optedIn = (name: string): V1Pod => ({
  metadata: {
    name,
    labels: { [INJECT_LABEL]: INJECT_VALUE },
    annotations: { [ANNOTATIONS.leaseName]: name },
  },
  spec: { containers: [{ name: 'app', image: 'registry.example.com/app:1' }] },
});

let t: TestCluster | undefined;
let server: AdmissionServer | undefined;

afterEach(async () => {
  await server?.close();
  await t?.stop();
  server = undefined;
  t = undefined;
});

/** A control plane with `apiServerFlags`, the injection webhooks served here and called by it. */
async function clusterServingInjection(apiServerFlags: string[], nodes = 0): Promise<TestCluster> {
  const cluster = await TestCluster.own({ nodes, apiServerFlags });
  t = cluster;
  await cluster.createNamespace(OPERATOR_NS);
  await cluster.createNamespace(NS);
  const ca = await createAuthority('berth-webhook-ca');
  const pair = await ca.serving([`${SERVICE}.${OPERATOR_NS}.svc`]);
  const registry = new Registry();
  server = new AdmissionServer({
    port: 0,
    certificates: new SwappableCertificates({ ...pair, ca: ca.cert }),
    handlers: injectionHandlers(settings),
    registry,
  });
  await server.start();
  await cluster.routeService(OPERATOR_NS, SERVICE, [{ port: server.port }]);
  const params = { namespace: OPERATOR_NS, controlPlaneNamespaces: settings.controlPlaneNamespaces };
  const caBundle = Buffer.from(ca.cert).toString('base64');
  const mutating = injectionMutatingConfiguration(params);
  const validating = injectionValidatingConfiguration(params);
  for (const hook of [...(mutating.webhooks ?? []), ...(validating.webhooks ?? [])])
    hook.clientConfig.caBundle = caBundle;
  const configs = cluster.kc.makeApiClient(AdmissionregistrationV1Api);
  await configs.createMutatingWebhookConfiguration({ body: mutating });
  await configs.createValidatingWebhookConfiguration({ body: validating });
  // The API server picks the configurations and the Service's endpoints up asynchronously.
  await eventually(
    async () => {
      const before = await webhookRequests(registry, MUTATE_POD_PATH);
      await cluster.core
        .createNamespacedPod({ namespace: NS, dryRun: 'All', body: optedIn('probe') })
        .catch(() => undefined);
      return (await webhookRequests(registry, MUTATE_POD_PATH)) > before;
    },
    { timeoutMs: 30_000, intervalMs: 100 },
  );
  await eventually(async () => (await webhookRequests(registry, VALIDATE_POD_PATH)) > 0, {
    timeoutMs: 30_000,
  });
  return cluster;
}

describe('restarting the Pod on a loss, on real API servers', () => {
  it('Kubernetes 1.36 with its default gates stores the RestartAllContainers rule on berth-sidecar', async () => {
    const cluster = await clusterServingInjection([]);
    const created = await cluster.core.createNamespacedPod({ namespace: NS, body: optedIn('web') });
    const stored = await cluster.core.readNamespacedPod({
      namespace: NS,
      name: created.metadata?.name ?? '',
    });
    const sidecar = stored.spec?.initContainers?.find((c) => c.name === SIDECAR_CONTAINER);
    expect(sidecar?.restartPolicy).toBe('Always');
    expect(sidecar?.restartPolicyRules).toEqual([
      { action: 'RestartAllContainers', exitCodes: { operator: 'In', values: [RESTART_POD_EXIT_CODE] } },
    ]);
    expect(sidecar?.env).toContainEqual({ name: ENV.restartPodOnLoss, value: 'true' });
  }, 90_000);

  it('the scheduler places the Pod only on a node that declares RestartAllContainers', async () => {
    const cluster = await clusterServingInjection([], 2);
    const created = await cluster.core.createNamespacedPod({ namespace: NS, body: optedIn('web') });
    const name = created.metadata?.name ?? '';
    // KWOK's nodes declare no features, as a kubelet without the gate (or older than 1.35) declares none.
    const unschedulable = await eventually(
      async () => {
        const pod = await cluster.core.readNamespacedPod({ namespace: NS, name });
        const scheduled = pod.status?.conditions?.find((c) => c.type === 'PodScheduled');
        return scheduled?.status === 'False' ? scheduled : undefined;
      },
      { timeoutMs: 30_000 },
    );
    expect(unschedulable?.reason).toBe('Unschedulable');
    expect(unschedulable?.message).toContain("didn't match Pod's required features");
    const [declaring] = cluster.nodeNames;
    await cluster.core.patchNodeStatus(
      {
        name: declaring ?? '',
        body: { status: { declaredFeatures: ['RestartAllContainersOnContainerExits'] } },
      },
      mergePatch,
    );
    const bound = await eventually(
      async () => (await cluster.core.readNamespacedPod({ namespace: NS, name })).spec?.nodeName || undefined,
      { timeoutMs: 30_000 },
    );
    expect(bound).toBe(declaring);
  }, 90_000);

  it('an API server that drops the rule gets the Pod refused, naming the feature gates', async () => {
    const cluster = await clusterServingInjection([
      '--feature-gates=ContainerRestartRules=false,RestartAllContainersOnContainerExits=false',
    ]);
    const message = await rejection(
      cluster.core.createNamespacedPod({ namespace: NS, body: optedIn('web') }),
    );
    expect(message).toContain(VALIDATE);
    expect(message).toContain('RestartAllContainers restartPolicyRules');
    expect(message).toContain('ContainerRestartRules feature gate');
    expect((await cluster.core.listNamespacedPod({ namespace: NS })).items).toEqual([]);
  }, 90_000);
});
