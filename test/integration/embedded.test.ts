// `sandbox --with-operator` (what `npm start` runs without a cluster): the sandbox with the CRD and the
// webhook configurations, the central lease server and the operator, all in one process.
import { mkdtemp, readFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { AdmissionregistrationV1Api, AppsV1Api, CoreV1Api, CustomObjectsApi } from '@kubernetes/client-node';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type EmbeddedSystem, startEmbeddedSystem } from '../../src/embedded.ts';
import { apiFailure, mergePatch } from '../helpers/api.ts';
import { eventually } from '../helpers/eventually.ts';
import { kubeConfigFrom } from '../helpers/sandbox.ts';

let dir: string;
let system: EmbeddedSystem;

beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), 'berth-embedded-'));
  system = await startEmbeddedSystem({
    listen: '127.0.0.1:0',
    kubeconfigPath: join(dir, 'kubeconfig'),
    simulateWorkloads: true,
    clusterId: 'sandbox',
    logPath: join(dir, 'operator.log'),
  });
  await system.ready;
});
afterAll(async () => {
  await system?.stop();
  await rm(dir, { recursive: true, force: true });
});

describe('the embedded system', () => {
  it('fills the caBundle of both webhook configurations', async () => {
    const api = kubeConfigFrom(system.sandbox.kubeconfig).makeApiClient(AdmissionregistrationV1Api);
    await eventually(async () => {
      const m = await api.readMutatingWebhookConfiguration({ name: 'berth-operator-injection-workloads' });
      const v = await api.readValidatingWebhookConfiguration({ name: 'berth-operator-injection-workloads' });
      return m.webhooks?.[0]?.clientConfig.caBundle && v.webhooks?.[0]?.clientConfig.caBundle;
    });
  });

  it('holds a lease-only BerthLease against the embedded central server', async () => {
    const custom = kubeConfigFrom(system.sandbox.kubeconfig).makeApiClient(CustomObjectsApi);
    await custom.createNamespacedCustomObject({
      group: 'berth.skaphos.io',
      version: 'v1alpha1',
      namespace: 'default',
      plural: 'berthleases',
      body: {
        apiVersion: 'berth.skaphos.io/v1alpha1',
        kind: 'BerthLease',
        metadata: { name: 'demo' },
        spec: {
          leaseName: 'demo',
          holderIdentity: 'demo',
          ttlSeconds: 15,
          heartbeatIntervalSeconds: 5,
          semantics: 'at-most-once',
        },
      },
    });
    const lease = await eventually(async () => {
      const got = (await custom.getNamespacedCustomObject({
        group: 'berth.skaphos.io',
        version: 'v1alpha1',
        namespace: 'default',
        plural: 'berthleases',
        name: 'demo',
      })) as { status?: { leaseState?: string; currentHolder?: string; fencingToken?: number } };
      return got.status?.leaseState === 'held' ? got.status : undefined;
    });
    expect(lease?.currentHolder).toBe('sandbox');
    expect(lease?.fencingToken).toBeGreaterThan(0);
  });

  it('installs the CRD with its CEL rules (immutable leaseName)', async () => {
    const custom = kubeConfigFrom(system.sandbox.kubeconfig).makeApiClient(CustomObjectsApi);
    const res = await apiFailure(
      custom.patchNamespacedCustomObject(
        {
          group: 'berth.skaphos.io',
          version: 'v1alpha1',
          namespace: 'default',
          plural: 'berthleases',
          name: 'demo',
          body: { spec: { leaseName: 'renamed' } },
        },
        mergePatch,
      ),
    );
    expect(res.code).toBe(422);
    expect(res.message).toContain('leaseName is immutable');
  });

  it('admits and runs an ordinary Deployment through the fail-closed webhooks', async () => {
    const kc = kubeConfigFrom(system.sandbox.kubeconfig);
    const labels = { app: 'plain' };
    await kc.makeApiClient(AppsV1Api).createNamespacedDeployment({
      namespace: 'default',
      body: {
        metadata: { name: 'plain' },
        spec: {
          replicas: 2,
          selector: { matchLabels: labels },
          template: { metadata: { labels }, spec: { containers: [{ name: 'c', image: 'nginx:1.27' }] } },
        },
      },
    });
    const core = kc.makeApiClient(CoreV1Api);
    await eventually(
      async () => {
        const pods = await core.listNamespacedPod({ namespace: 'default', labelSelector: 'app=plain' });
        return pods.items.length === 2 && pods.items.every((p) => p.status?.phase === 'Running');
      },
      { timeoutMs: 15_000 },
    );
  });

  it('writes the operator log to its file, not to the terminal', async () => {
    const log = await readFile(join(dir, 'operator.log'), 'utf8');
    expect(log).toContain('"msg":"lifecycle: ready"');
  });
});
