// Helper injection as installed: the self-signed install plus the injection component
// (deploy/kustomize/overlays/injection) applied to a control plane of its own (the webhooks are
// cluster-wide), the operator run in this process as the install's service account with exactly the
// install's RBAC (through the recording proxy: no request may be forbidden), configured by the install's
// Deployment, its webhook Service routed here. The real kube-apiserver calls the injection webhooks its
// leader registered: the Deployment controller's Pods of an opted-in template are injected, bad Pods are
// denied naming what is wrong, `kubectl debug` cannot mount the state volume writably (the API server
// admits the pods/ephemeralcontainers subresource as UPDATE: with the rule on CREATE the writable mount
// is admitted), the control-plane namespace is never injected, a relaxed configuration is put back, every
// permission of the component's ClusterRole is used and granted by it alone, and deleting the install
// removes the configurations through their owner ClusterRole. Then the chart with injection alone (the
// lease-only RBAC variant: the injection ClusterRole creates its configurations and reads the EndpointSlices
// itself) registers and serves them with no request forbidden.
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import {
  AdmissionregistrationV1Api,
  AppsV1Api,
  RbacAuthorizationV1Api,
  type V1Container,
  type V1Pod,
  type V1PolicyRule,
  type V1Volume,
} from '@kubernetes/client-node';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  INJECTION_CONFIGURATION_NAME,
  OPERATOR_NAMESPACE,
  ruleCovers,
} from '../../../scripts/deploy-rbac.ts';
import { type ManifestObject, parseManifests } from '../../../scripts/install-manifest.ts';
import {
  ACQUIRE_CONTAINER,
  ANNOTATIONS,
  DEFAULT_INJECTION_PROBE_PORT,
  ENV,
  INJECT_LABEL,
  INJECT_VALUE,
  INJECTION_PROBE_PATH,
  SIDECAR_CONTAINER,
  STATE_VOLUME,
} from '../../../src/injection/contract.ts';
import { ApiProxy, describeRequest } from '../../helpers/api-proxy.ts';
import { TestCluster } from '../../helpers/cluster.ts';
import { eventually } from '../../helpers/eventually.ts';
import { Helm } from '../../helpers/helm.ts';
import { rejection } from '../../helpers/rejection.ts';
import { type Central, startCentral } from '../berth/harness.ts';
import {
  applyInstall,
  kubectlOk,
  operatorRules,
  renderOverlay,
  withoutOperatorPods,
} from '../deploy/install.ts';
import { type RunningOperator, startOperator } from '../deploy/operator.ts';
import { operatorContext, type ScenarioContext, waitFor } from '../deploy/scenarios.ts';

const APPS = 'apps';
const INJECT = 'admission webhook "inject.berth.skaphos.io" denied the request: ';

let t: TestCluster;
let proxy: ApiProxy;
let central: Central;
let text: string;
let install: ManifestObject[];
let ctx: ScenarioContext;
let op: RunningOperator | undefined;
/** For kubectl debug's --custom files. */
let scratch: string;

/** The injection configurations that exist. */
async function configurations() {
  const api = t.kc.makeApiClient(AdmissionregistrationV1Api);
  const found = await Promise.all([
    api.readMutatingWebhookConfiguration({ name: INJECTION_CONFIGURATION_NAME }).catch(() => undefined),
    api.readValidatingWebhookConfiguration({ name: INJECTION_CONFIGURATION_NAME }).catch(() => undefined),
  ]);
  return found.filter((c) => c !== undefined);
}

/** An opted-in Pod (label and lease annotation) with one main container, plus `extra` annotations. */
const optedInPod = (
  name: string,
  extra: Record<string, string> = {},
  container: Partial<V1Container> = {},
  volumes: V1Volume[] = [],
): V1Pod => ({
  metadata: {
    name,
    labels: { [INJECT_LABEL]: INJECT_VALUE },
    annotations: { [ANNOTATIONS.leaseName]: name, ...extra },
  },
  spec: {
    containers: [{ name: 'app', image: 'registry.example.com/app:1', ...container }],
    ...(volumes.length > 0 ? { volumes } : {}),
  },
});

const containerNames = (pod: V1Pod): string[] => [
  ...(pod.spec?.initContainers ?? []).map((c) => c.name),
  ...(pod.spec?.containers ?? []).map((c) => c.name),
];

beforeAll(async () => {
  scratch = await mkdtemp(join(tmpdir(), 'berth-debug-'));
  t = await TestCluster.own();
  const rendered = await renderOverlay('kustomize/overlays/injection');
  text = rendered.text;
  install = rendered.objects;
  await applyInstall(t, text);
  await withoutOperatorPods(t);
  await t.createNamespace(APPS);
  proxy = await ApiProxy.start(t);
  central = await startCentral();
  ctx = await operatorContext(t, install, proxy, central.url);
  op = startOperator({
    t,
    install,
    kubeConfig: ctx.operatorKubeConfig,
    env: { BERTH_NODE_TAINT_GUARD: 'false', BERTH_API_SERVER: central.url, BERTH_CLUSTER_ID: 'cluster-a' },
  });
  await waitFor(ctx, 'the replica ready', () => op?.ready(), 60_000);
}, 120_000);

afterAll(async () => {
  await op?.stop();
  await central?.stop();
  await proxy?.stop();
  await t?.stop();
  if (scratch) await rm(scratch, { recursive: true, force: true });
});

describe('the injection component of the install', () => {
  it('has its leader register both injection configurations, owned by the ClusterRole of their name', async () => {
    await waitFor(ctx, 'both injection configurations registered', async () => {
      const found = await configurations();
      return found.length === 2 && found.every((c) => (c.webhooks?.[0]?.clientConfig.caBundle ?? '') !== '');
    });
    const owner = await t.kc
      .makeApiClient(RbacAuthorizationV1Api)
      .readClusterRole({ name: INJECTION_CONFIGURATION_NAME });
    for (const c of await configurations()) {
      expect(c.metadata?.ownerReferences).toEqual([
        expect.objectContaining({
          kind: 'ClusterRole',
          name: INJECTION_CONFIGURATION_NAME,
          uid: owner.metadata?.uid,
        }),
      ]);
      const [hook] = c.webhooks ?? [];
      expect(hook).toMatchObject({
        failurePolicy: 'Fail',
        matchPolicy: 'Equivalent',
        sideEffects: 'None',
        timeoutSeconds: 10,
        objectSelector: { matchLabels: { [INJECT_LABEL]: INJECT_VALUE } },
      });
      expect(hook?.rules?.map((r) => `${r.operations?.join(',')} ${r.resources?.join(',')}`)).toEqual([
        'CREATE pods',
        'UPDATE pods/ephemeralcontainers',
      ]);
    }
  }, 60_000);

  it('injects the Pods of a Deployment whose template opts in', async () => {
    const apps = t.kc.makeApiClient(AppsV1Api);
    const labels = { app: 'worker', [INJECT_LABEL]: INJECT_VALUE };
    await apps.createNamespacedDeployment({
      namespace: APPS,
      body: {
        metadata: { name: 'worker' },
        spec: {
          replicas: 1,
          selector: { matchLabels: { app: 'worker' } },
          template: {
            metadata: { labels, annotations: { [ANNOTATIONS.leaseName]: 'worker' } },
            spec: { containers: [{ name: 'app', image: 'registry.example.com/app:1' }] },
          },
        },
      },
    });
    const pod = await eventually(
      async () => {
        const [found] = (await t.core.listNamespacedPod({ namespace: APPS, labelSelector: 'app=worker' }))
          .items;
        if (found === undefined) throw new Error('no Pod yet');
        return found;
      },
      { timeoutMs: 60_000 },
    );
    expect(containerNames(pod)).toEqual([ACQUIRE_CONTAINER, SIDECAR_CONTAINER, 'app']);
    const [acquire, sidecar] = pod.spec?.initContainers ?? [];
    expect(acquire?.restartPolicy).toBeUndefined();
    expect(sidecar?.restartPolicy).toBe('Always');
    const operatorImage = install.find((o) => o.kind === 'Deployment') as unknown as {
      spec: { template: { spec: { containers: { image: string }[] } } };
    };
    expect(acquire?.image).toBe(operatorImage.spec.template.spec.containers[0]?.image);
    expect(acquire?.args).toEqual(['helper', 'acquire']);
    expect(sidecar?.args).toEqual(['helper', 'renew']);
    // Stored as injected: the main containers wait for the sidecar's confirmed lease.
    expect(sidecar?.startupProbe).toMatchObject({
      httpGet: { path: INJECTION_PROBE_PATH, port: DEFAULT_INJECTION_PROBE_PORT },
      periodSeconds: 1,
    });
    for (const helper of [acquire, sidecar]) {
      expect(helper?.env).toContainEqual({
        name: ENV.podUid,
        valueFrom: { fieldRef: { apiVersion: 'v1', fieldPath: 'metadata.uid' } },
      });
      expect(helper?.env).toContainEqual({ name: ENV.leaseName, value: 'worker' });
      expect(helper?.env).toContainEqual({ name: ENV.apiServer, value: central.url });
    }
    const app = pod.spec?.containers[0];
    expect(app?.livenessProbe).toMatchObject({
      httpGet: { path: INJECTION_PROBE_PATH, port: DEFAULT_INJECTION_PROBE_PORT },
      periodSeconds: 2,
      failureThreshold: 1,
      // The API server keeps the probe's own kill grace (the sidecar's lead counts on it).
      terminationGracePeriodSeconds: 1,
    });
    expect(pod.spec?.volumes?.find((v) => v.name === STATE_VOLUME)?.emptyDir).toBeDefined();
  }, 90_000);

  it('denies a Pod with a bad annotation, naming the annotation', async () => {
    const message = await rejection(
      t.core.createNamespacedPod({
        namespace: APPS,
        body: optedInPod('bad-mode', { [ANNOTATIONS.mode]: 'always-on' }),
      }),
    );
    expect(message.startsWith(INJECT)).toBe(true);
    expect(message).toContain(ANNOTATIONS.mode);
  });

  it('denies a Pod whose container mounts the reserved state volume writably', async () => {
    const message = await rejection(
      t.core.createNamespacedPod({
        namespace: APPS,
        body: optedInPod('forger', {}, { volumeMounts: [{ name: STATE_VOLUME, mountPath: '/data' }] }, [
          { name: STATE_VOLUME, emptyDir: {} },
        ]),
      }),
    );
    expect(message).toContain(
      `container "app" mounts the Berth state volume "${STATE_VOLUME}" writably at "/data"`,
    );
  });

  it('lets `kubectl debug` mount the state volume read-only only (the subresource is admitted as UPDATE)', async () => {
    await t.core.createNamespacedPod({ namespace: APPS, body: optedInPod('debuggee') });
    // kubectl debug --custom: a partial container spec merged into the debug container.
    const custom = async (container: string, mount: Record<string, unknown>): Promise<string> => {
      const file = join(scratch, `${container}.json`);
      await writeFile(file, JSON.stringify({ volumeMounts: [{ name: STATE_VOLUME, ...mount }] }));
      return file;
    };
    const debug = (name: string, file: string) =>
      t.kubectl([
        'debug',
        '-n',
        APPS,
        'pod/debuggee',
        `--container=${name}`,
        '--image=registry.example.com/debug:1',
        '--profile=general',
        `--custom=${file}`,
      ]);
    const writable = await debug('debugger', await custom('debugger', { mountPath: '/berth' }));
    expect(writable.code).not.toBe(0);
    expect(writable.stderr).toContain(
      `${INJECT}cannot attach ephemeral container "debugger": it mounts the Berth state volume "${STATE_VOLUME}" writably at "/berth"`,
    );
    const readOnly = await debug('reader', await custom('reader', { mountPath: '/berth', readOnly: true }));
    expect(readOnly.stderr).toBe('');
    expect(readOnly.code).toBe(0);
    const pod = await t.core.readNamespacedPod({ namespace: APPS, name: 'debuggee' });
    expect((pod.spec?.ephemeralContainers ?? []).map((c) => c.name)).toEqual(['reader']);
  });

  it('never injects a Pod in the control-plane namespace', async () => {
    // The namespace enforces the restricted Pod Security profile (deploy/kustomize/base/namespace.yaml).
    const restricted: Partial<V1Container> = {
      securityContext: {
        allowPrivilegeEscalation: false,
        runAsNonRoot: true,
        capabilities: { drop: ['ALL'] },
        seccompProfile: { type: 'RuntimeDefault' },
      },
    };
    // An annotation the webhook would deny: the Pod is admitted because no webhook is called for it.
    const pod = await t.core.createNamespacedPod({
      namespace: OPERATOR_NAMESPACE,
      body: optedInPod('control-plane', { [ANNOTATIONS.mode]: 'always-on' }, restricted),
    });
    expect(containerNames(pod)).toEqual(['app']);
    await t.core.deleteNamespacedPod({ namespace: OPERATOR_NAMESPACE, name: 'control-plane' });
  });

  it('puts back a relaxed failurePolicy on either configuration', async () => {
    const patch = '[{"op":"replace","path":"/webhooks/0/failurePolicy","value":"Ignore"}]';
    const since = proxy.records.length;
    for (const kind of ['mutatingwebhookconfiguration', 'validatingwebhookconfiguration'])
      await kubectlOk(t, ['patch', kind, INJECTION_CONFIGURATION_NAME, '--type=json', '-p', patch]);
    // The proxy records the operator's PUT when its answer arrives, after kube-apiserver committed it.
    const restored = (resource: string): boolean =>
      proxy.records
        .slice(since)
        .some(
          (r) =>
            r.verb === 'update' &&
            r.resource === resource &&
            r.name === INJECTION_CONFIGURATION_NAME &&
            r.status < 400,
        );
    await waitFor(ctx, 'the failurePolicy put back', async () => {
      const found = await configurations();
      return (
        found.length === 2 &&
        found.every((c) => c.webhooks?.[0]?.failurePolicy === 'Fail') &&
        restored('mutatingwebhookconfigurations') &&
        restored('validatingwebhookconfigurations')
      );
    });
  });

  it('served all this with the install RBAC alone: no request forbidden, every injection permission used and granted once', () => {
    expect(proxy.forbidden().map(describeRequest)).toEqual([]);
    const role = install.find(
      (o) => o.kind === 'ClusterRole' && o.metadata.name === INJECTION_CONFIGURATION_NAME,
    ) as unknown as { rules: V1PolicyRule[] };
    const others = operatorRules(install).filter(
      (g) => g.role !== `ClusterRole/${INJECTION_CONFIGURATION_NAME}`,
    );
    const unused: string[] = [];
    const twice: string[] = [];
    for (const rule of role.rules)
      for (const group of rule.apiGroups ?? [])
        for (const resource of rule.resources ?? [])
          for (const verb of rule.verbs ?? [])
            for (const name of rule.resourceNames ?? []) {
              const cell = {
                apiGroups: [group],
                resources: [resource],
                verbs: [verb],
                resourceNames: [name],
              };
              const used = proxy.records.some(
                (r) =>
                  r.status < 400 &&
                  r.apiGroup === group &&
                  r.resource === resource &&
                  r.verb === verb &&
                  r.name === name,
              );
              if (!used) unused.push(`${verb} ${group}/${resource} ${name}`);
              // Granted by this role alone, so removing its rule would forbid a request the operator makes.
              if (others.some((g) => ruleCovers(g.rule, g.namespace, cell, undefined)))
                twice.push(`${verb} ${group}/${resource} ${name}`);
            }
    expect(unused).toEqual([]);
    expect(twice).toEqual([]);
  });

  it('removes the injection configurations when the install is deleted', async () => {
    await op?.stop();
    op = undefined;
    await kubectlOk(t, ['delete', '--wait=false', '-f', '-'], text);
    await eventually(async () => (await configurations()).length === 0, { timeoutMs: 60_000 });
    // Nothing intercepts an opted-in Pod any more.
    await t.createNamespace('apps-after');
    const pod = await t.core.createNamespacedPod({ namespace: 'apps-after', body: optedInPod('plain') });
    expect(containerNames(pod)).toEqual(['app']);
  }, 90_000);
});

describe('the chart with injection.enabled and no workload management', () => {
  const RELEASE = 'solo';
  const NAMESPACE = 'berth-solo';
  const CONFIGURATION = `${RELEASE}-berth-operator-injection`;
  let helm: Helm | undefined;

  afterAll(async () => {
    await helm?.stop();
  });

  it('registers and serves the injection webhooks with the lease-only RBAC variant alone', async () => {
    // The kustomize install's CRD and namespace are gone (the previous test deleted the install).
    await kubectlOk(t, ['wait', '--for=delete', 'crd/berthleases.berth.skaphos.io', '--timeout=120s']).catch(
      () => undefined,
    );
    helm = await Helm.start();
    const rendered = await helm.template({
      release: RELEASE,
      namespace: NAMESPACE,
      values: [
        {
          clusterID: 'cluster-a',
          berth: { apiServer: central.url },
          injection: { enabled: true },
          replicaCount: 0,
        },
      ],
    });
    expect(rendered.stderr).toBe('');
    await t.createNamespace(NAMESPACE);
    await applyInstall(t, rendered.stdout);
    const objects = parseManifests(rendered.stdout);
    const account = await t.serviceAccount(NAMESPACE, `${RELEASE}-berth-operator`);
    const from = proxy.records.length;
    const solo = startOperator({
      t,
      install: objects,
      kubeConfig: t.kubeConfigFor(proxy.kubeconfigFor(account.kubeconfig)),
    });
    try {
      await waitFor(ctx, 'the chart replica ready', () => solo.ready(), 60_000);
      await waitFor(ctx, 'its injection configurations registered', async () => {
        const api = t.kc.makeApiClient(AdmissionregistrationV1Api);
        const found = await Promise.all([
          api.readMutatingWebhookConfiguration({ name: CONFIGURATION }).catch(() => undefined),
          api.readValidatingWebhookConfiguration({ name: CONFIGURATION }).catch(() => undefined),
        ]);
        return found.every((c) => (c?.webhooks?.[0]?.clientConfig.caBundle ?? '') !== '');
      });
      await t.createNamespace('apps-chart');
      const pod = await t.core.createNamespacedPod({ namespace: 'apps-chart', body: optedInPod('charted') });
      expect(containerNames(pod)).toEqual([ACQUIRE_CONTAINER, SIDECAR_CONTAINER, 'app']);
    } finally {
      await solo.stop();
    }
    expect(
      proxy.records
        .slice(from)
        .filter((r) => r.status === 403)
        .map(describeRequest),
    ).toEqual([]);
  }, 180_000);
});
