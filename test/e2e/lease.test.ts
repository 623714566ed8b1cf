// The lease-only scenario against a real cluster (E2E_KUBECONFIG, or a control plane of this file's own):
// the operator runs out of cluster with the cluster's kubeconfig and an embedded central lease server on
// this machine, installs nothing but the BerthLease CRD (if missing) and a throwaway namespace, and removes
// what it created.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type CentralServer, startCentralServer } from '../../src/central/server.ts';
import { parseFlags } from '../../src/cli.ts';
import { parseRunConfig } from '../../src/config.ts';
import { parseFeatureConfigs } from '../../src/features.ts';
import { isNotFound } from '../../src/kube/client.ts';
import type { Manager } from '../../src/kube/manager.ts';
import { createLogger } from '../../src/observability/logger.ts';
import { buildOperator, runCommand } from '../../src/run.ts';
import { BerthLeaseBuilder } from '../builders/berthlease.ts';
import { centralTls } from '../helpers/central-tls.ts';
import { eventually } from '../helpers/eventually.ts';
import { berthLeaseRef, E2eCluster, RUN_ID } from './cluster.ts';
import { type E2eTarget, e2eTarget, skipReason } from './env.ts';

const skip = skipReason('the lease-only scenario', ['kubeconfig']);

const NS = `berth-e2e-${RUN_ID}`;
const LEASE = berthLeaseRef(NS);

describe.skipIf(skip)('lease-only BerthLease on a real cluster', () => {
  let target: E2eTarget | undefined;
  let cluster: E2eCluster;
  let central: CentralServer;
  let manager: Manager;
  let done: Promise<unknown>;

  beforeAll(async () => {
    target = await e2eTarget(1);
    cluster = new E2eCluster('cluster', target.kubeconfigs[0]!);
    await cluster.installCrd();
    await cluster.createNamespace(NS);
    central = await startCentralServer({
      tls: await centralTls(),
      logger: createLogger({ level: 'silent' }),
    });
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
      kubeConfig: cluster.kc,
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
    const failed = (await cluster?.cleanup()) ?? [];
    if (failed.length > 0) console.warn(`e2e cleanup left something behind:\n${failed.join('\n')}`);
    await target?.stop();
  });

  it('holds the lease, then releases it and clears the finalizer on deletion', async () => {
    const { custom } = cluster;
    await custom.createNamespacedCustomObject({
      ...LEASE,
      body: new BerthLeaseBuilder('e2e')
        .holderIdentity('e2e')
        .ttlSeconds(15)
        .heartbeatIntervalSeconds(5)
        .obj(),
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
