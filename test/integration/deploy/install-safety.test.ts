// What deploy/install.yaml does to a cluster beyond the operator's own namespace, on a control plane of
// its own (the webhooks are cluster-wide): a first install whose operator never serves blocks nothing; once
// a replica has served, the webhooks stay registered and fail closed when the operator is gone, also
// across a re-apply of the install; deleting the install removes them (docs/webhook-registration.md).
import { AdmissionregistrationV1Api } from '@kubernetes/client-node';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { WEBHOOK_CONFIGURATION_NAME } from '../../../scripts/deploy-rbac.ts';
import { type ManifestObject, readInstall } from '../../../scripts/install-manifest.ts';
import { ApiProxy } from '../../helpers/api-proxy.ts';
import { IN_SCOPE, TestCluster } from '../../helpers/cluster.ts';
import { eventually } from '../../helpers/eventually.ts';
import { type Central, startCentral } from '../berth/harness.ts';
import { applyInstall, kubectlOk, withoutOperatorPods } from './install.ts';
import { operatorContext, waitFor, withCentral, withOperator } from './scenarios.ts';

let t: TestCluster;
let proxy: ApiProxy;
let central: Central;
let text: string;
let install: ManifestObject[];
let admission: AdmissionregistrationV1Api;

const registered = async (): Promise<string[]> => {
  const found: string[] = [];
  for (const [kind, read] of [
    ['mutating', () => admission.readMutatingWebhookConfiguration({ name: WEBHOOK_CONFIGURATION_NAME })],
    ['validating', () => admission.readValidatingWebhookConfiguration({ name: WEBHOOK_CONFIGURATION_NAME })],
  ] as const)
    if (
      await read().then(
        () => true,
        () => false,
      )
    )
      found.push(kind);
  return found;
};

/** Creates a Deployment in `namespace` as the cluster admin; the error text when admission refuses it. */
async function createDeployment(namespace: string, name: string): Promise<string | undefined> {
  const r = await t.kubectl([
    'create',
    'deployment',
    name,
    '-n',
    namespace,
    '--image=registry.example.com/app:1',
  ]);
  return r.code === 0 ? undefined : r.stderr.trim();
}

beforeAll(async () => {
  t = await TestCluster.own();
  const read = await readInstall('install.yaml');
  text = read.text;
  install = read.objects;
  admission = t.kc.makeApiClient(AdmissionregistrationV1Api);
  proxy = await ApiProxy.start(t);
  central = await startCentral();
}, 60_000);
afterAll(async () => {
  await central?.stop();
  await proxy?.stop();
  await t?.stop();
});

describe('deploy/install.yaml and the rest of the cluster', () => {
  it('blocks nothing when its operator never serves (an image that cannot run, a missing setting)', async () => {
    await applyInstall(t, text);
    // The install's Pods are up (KWOK makes them Ready) but no operator process answers.
    await t.createNamespace('apps-1', IN_SCOPE);
    expect(await createDeployment('apps-1', 'web')).toBeUndefined();
    expect(await registered()).toEqual([]);
  });

  it('keeps the webhooks, failing closed, once a replica has served and the operator is gone', async () => {
    await withoutOperatorPods(t);
    const ctx = await operatorContext(t, install, proxy, central.url);
    await withOperator(ctx, withCentral(ctx), async (op) => {
      await waitFor(ctx, 'the replica ready', () => op.ready());
      await waitFor(
        ctx,
        'both webhook configurations registered',
        async () => (await registered()).length === 2,
      );
      expect(await createDeployment('apps-1', 'served')).toBeUndefined();
    });
    // The operator has stopped: its workloads stay guarded, so other writes in the scope are refused;
    // outside it nothing waits for the operator.
    expect(await createDeployment('apps-1', 'unguarded')).toMatch(/failed calling webhook/);
    await t.createNamespace('elsewhere');
    expect(await createDeployment('elsewhere', 'web')).toBeUndefined();
    // An upgrade re-applying the install does not remove or reset them.
    await kubectlOk(t, ['apply', '-f', '-'], text);
    expect(await registered()).toEqual(['mutating', 'validating']);
    expect(await createDeployment('apps-1', 'after-apply')).toMatch(/failed calling webhook/);
  });

  it('removes the webhooks when the install is deleted', async () => {
    await kubectlOk(t, ['delete', '--wait=false', '-f', '-'], text);
    await eventually(async () => (await registered()).length === 0, { timeoutMs: 60_000 });
    await t.createNamespace('apps-2', IN_SCOPE);
    expect(await createDeployment('apps-2', 'web')).toBeUndefined();
  });
});
