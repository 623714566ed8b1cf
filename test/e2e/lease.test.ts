// The lease-only scenario against a real cluster (E2E_KUBECONFIG): the operator runs out of cluster with
// the cluster's kubeconfig and an embedded central lease server on this machine, installs nothing but the
// BerthLease CRD (if missing) and a throwaway namespace, and removes what it created.
import { CoreV1Api, CustomObjectsApi, KubeConfig } from '@kubernetes/client-node';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { installBerthLeaseCrd } from '../../src/berth/crd.ts';
import { type CentralServer, startCentralServer } from '../../src/central/server.ts';
import { parseFlags } from '../../src/cli.ts';
import { parseRunConfig } from '../../src/config.ts';
import { isNotFound } from '../../src/kube/client.ts';
import type { Manager } from '../../src/kube/manager.ts';
import { createLogger } from '../../src/observability/logger.ts';
import { buildOperator, parseFeatureConfigs, runCommand } from '../../src/run.ts';
import { eventually } from '../helpers/eventually.ts';

const KUBECONFIG = process.env.E2E_KUBECONFIG;
if (!KUBECONFIG)
  console.warn('E2E_KUBECONFIG is not set: skipping the end-to-end scenarios against a real cluster');

const NS = `berth-e2e-${Date.now().toString(36)}`;
const LEASE = { group: 'berth.skaphos.io', version: 'v1alpha1', plural: 'berthleases', namespace: NS };

describe.skipIf(!KUBECONFIG)('lease-only BerthLease on a real cluster', () => {
  let kc: KubeConfig;
  let central: CentralServer;
  let manager: Manager;
  let done: Promise<unknown>;

  beforeAll(async () => {
    kc = new KubeConfig();
    kc.loadFromFile(KUBECONFIG!);
    await installBerthLeaseCrd(kc, { ifAbsent: true });
    await kc.makeApiClient(CoreV1Api).createNamespace({ body: { metadata: { name: NS } } });
    central = await startCentralServer();
    const flags = parseFlags(runCommand, [
      `--namespace=${NS}`,
      `--berth-api-server=${central.url}`,
      '--cluster-id=e2e',
      '--node-taint-guard=false',
      '--health-probe-bind-address=127.0.0.1:0',
      '--metrics-bind-address=0',
      '--drain-window=0s',
    ]);
    const logger = createLogger({ level: 'warn', name: 'berth-operator-e2e' });
    ({ manager } = buildOperator(parseRunConfig(flags), {
      kubeConfig: kc,
      namespace: NS,
      logger,
      features: parseFeatureConfigs(flags, NS),
    }));
    done = manager.run();
  });

  afterAll(async () => {
    manager?.stop('e2e done');
    await done;
    await central?.stop();
    await kc
      ?.makeApiClient(CoreV1Api)
      .deleteNamespace({ name: NS })
      .catch(() => undefined);
  });

  it('holds the lease, then releases it and clears the finalizer on deletion', async () => {
    const custom = kc.makeApiClient(CustomObjectsApi);
    await custom.createNamespacedCustomObject({
      ...LEASE,
      body: {
        apiVersion: 'berth.skaphos.io/v1alpha1',
        kind: 'BerthLease',
        metadata: { name: 'e2e' },
        spec: {
          leaseName: 'e2e',
          holderIdentity: 'e2e',
          ttlSeconds: 15,
          heartbeatIntervalSeconds: 5,
          semantics: 'at-most-once',
        },
      },
    });
    const held = await eventually(
      async () => {
        const lease = (await custom.getNamespacedCustomObject({ ...LEASE, name: 'e2e' })) as {
          status?: { leaseState?: string; currentHolder?: string; fencingToken?: number };
        };
        return lease.status?.leaseState === 'held' ? lease.status : undefined;
      },
      { timeoutMs: 60_000 },
    );
    expect(held?.currentHolder).toBe('e2e');
    expect(held?.fencingToken).toBeGreaterThan(0);
    await custom.deleteNamespacedCustomObject({ ...LEASE, name: 'e2e' });
    await eventually(
      async () => {
        try {
          await custom.getNamespacedCustomObject({ ...LEASE, name: 'e2e' });
          return false;
        } catch (err) {
          return isNotFound(err);
        }
      },
      { timeoutMs: 60_000 },
    );
  });
});
