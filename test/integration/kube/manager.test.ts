// Two managers (two "replicas") with real leader election against the real API server (each its own user,
// through the fault proxy): start and stop order, the drain window in which the admission stand-in keeps
// serving after readiness dropped, the Lease released only after the controllers stopped, hand-over to the
// other replica, and the immediate exit on lost leadership.
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { CoordinationV1Api, CoreV1Api } from '@kubernetes/client-node';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { kubeLeaseClient, LeaderElector } from '../../../src/kube/leader.ts';
import {
  type LifecycleEvent,
  Manager,
  type ManagerResult,
  type Runnable,
} from '../../../src/kube/manager.ts';
import { createLogger } from '../../../src/observability/logger.ts';
import { createRegistry } from '../../../src/observability/metrics.ts';
import { ApiProxy } from '../../helpers/api-proxy.ts';
import { TestCluster, uniqueName } from '../../helpers/cluster.ts';
import { eventually } from '../../helpers/eventually.ts';

const LEASE = 'manager-test';

let t: TestCluster;
let proxy: ApiProxy;
let ns: string;
beforeAll(async () => {
  t = await TestCluster.shared();
  ns = await t.namespace('manager');
  proxy = await ApiProxy.start(t);
});
afterAll(async () => {
  await proxy?.stop();
  await t?.stop();
});

interface Replica {
  name: string;
  /** The user name, unique in the run (faults target it). */
  user: string;
  manager: Manager;
  elector: LeaderElector;
  events: string[];
  done: Promise<ManagerResult>;
  webhookUrl: () => string;
  /** Times the leader-only worker wrote while its signal was not aborted. */
  beats: number[];
  ctrlSignal: () => AbortSignal | undefined;
}

/** An HTTP server standing in for the admission webhook server. */
function webhookRunnable(): Runnable & { url: () => string } {
  let server: Server | undefined;
  let url = '';
  return {
    name: 'admission',
    needLeaderElection: false,
    group: 'webhooks',
    url: () => url,
    async start() {
      server = createServer((_req, res) => res.end('allowed'));
      await new Promise<void>((resolve) => server?.listen(0, '127.0.0.1', resolve));
      url = `http://127.0.0.1:${(server.address() as AddressInfo).port}/`;
    },
    async stop() {
      await new Promise<void>((resolve) => {
        server?.close(() => resolve());
        server?.closeAllConnections();
      });
    },
  };
}

async function replica(name: string): Promise<Replica> {
  const { username: user, kubeconfig } = await t.user(uniqueName(name));
  await t.grant(
    user,
    [
      // The install's leader-election rules (scripts/deploy-rbac.ts), and the workers' reads.
      { apiGroups: ['coordination.k8s.io'], resources: ['leases'], verbs: ['create'] },
      {
        apiGroups: ['coordination.k8s.io'],
        resources: ['leases'],
        resourceNames: [LEASE],
        verbs: ['get', 'list', 'update', 'watch'],
      },
      { apiGroups: [''], resources: ['configmaps'], verbs: ['list'] },
    ],
    ns,
  );
  const kc = t.kubeConfigFor(proxy.kubeconfigFor(kubeconfig));
  const core = kc.makeApiClient(CoreV1Api);
  const registry = createRegistry({ defaultMetrics: false });
  const logger = createLogger({ level: 'silent' });
  const elector = new LeaderElector({
    client: kubeLeaseClient(t.transport(kc)),
    namespace: ns,
    name: LEASE,
    identity: `${name}_id`,
    leaseDurationMs: 2_000,
    renewDeadlineMs: 1_000,
    retryPeriodMs: 250,
    releaseOnCancel: true,
    logger,
    registry,
  });
  const events: string[] = [];
  const manager = new Manager({
    logger,
    registry,
    healthProbeBindAddress: '127.0.0.1:0',
    metricsBindAddress: '127.0.0.1:0',
    gracefulShutdownTimeoutMs: 10_000,
    drainWindowMs: 400,
    elector,
    onEvent: (e: LifecycleEvent) => events.push(e.runnable ? `${e.step}:${e.runnable}` : e.step),
  });
  const webhook = webhookRunnable();
  const beats: number[] = [];
  let ctrlSignal: AbortSignal | undefined;
  let worker: Promise<void> | undefined;
  manager.add({
    name: 'ctrl',
    needLeaderElection: true,
    async start(signal) {
      ctrlSignal = signal;
      // Leader-only work: talks to the API server until told to stop.
      worker = (async () => {
        while (!signal.aborted) {
          await core.listNamespacedConfigMap({ namespace: ns });
          if (!signal.aborted) beats.push(Date.now());
          await new Promise((r) => setTimeout(r, 20));
        }
      })();
    },
    async stop() {
      await worker;
    },
  });
  manager.add({
    name: 'cache',
    needLeaderElection: false,
    group: 'caches',
    async start() {
      await core.listNamespacedConfigMap({ namespace: ns }); // "synced"
    },
  });
  manager.add(webhook);
  const done = manager.run();
  return {
    name,
    user,
    manager,
    elector,
    events,
    done,
    webhookUrl: webhook.url,
    beats,
    ctrlSignal: () => ctrlSignal,
  };
}

async function status(url: string): Promise<number> {
  const res = await fetch(url);
  await res.text();
  return res.status;
}

async function holder(): Promise<string | undefined> {
  const lease = await t.kc
    .makeApiClient(CoordinationV1Api)
    .readNamespacedLease({ name: LEASE, namespace: ns });
  return lease.spec?.holderIdentity;
}

describe('Manager with leader election', () => {
  it('starts and stops in order, drains with webhooks serving, and hands the Lease over', async () => {
    const a = await replica('replica-a');
    await eventually(() => a.elector.isLeader(), { timeoutMs: 5_000 });
    const b = await replica('replica-b');
    try {
      await eventually(() => b.events.includes('leader-election-started'), { timeoutMs: 5_000 });
      await eventually(() => a.beats.length > 3, { timeoutMs: 5_000 });
      expect(a.events).toEqual([
        'probe-server-started',
        'runnable-started:admission',
        'runnable-started:cache',
        'ready',
        'leader-election-started',
        'elected',
        'runnable-started:ctrl',
      ]);
      expect(b.events).not.toContain('elected');
      expect(b.ctrlSignal()).toBeUndefined();
      expect(await holder()).toBe('replica-a_id');
      // Both replicas are ready and serve admission; only one runs the controller.
      expect(await status(`http://${a.manager.addresses?.health}/readyz`)).toBe(200);
      expect(await status(`http://${b.manager.addresses?.health}/readyz`)).toBe(200);
      expect(await status(b.webhookUrl())).toBe(200);
      expect(await status(`http://${a.manager.addresses?.metrics}/metrics`)).toBe(200);

      a.events.length = 0;
      const stopAt = Date.now();
      a.manager.stop('SIGTERM');
      // Readiness drops first; the admission server and the controller keep going during the drain.
      await eventually(async () => (await status(`http://${a.manager.addresses?.health}/readyz`)) === 500, {
        timeoutMs: 200,
        intervalMs: 5,
      });
      expect(await status(a.webhookUrl())).toBe(200);
      expect(a.elector.isLeader()).toBe(true);

      const result = await a.done;
      expect(result).toEqual({ exitCode: 0, reason: 'SIGTERM' });
      expect(Date.now() - stopAt).toBeGreaterThanOrEqual(400);
      expect(a.events).toEqual([
        'shutdown-requested',
        'not-ready',
        'drained',
        'runnable-stopped:ctrl',
        'leader-election-stopped',
        'runnable-stopped:cache',
        'runnable-stopped:admission',
        'probe-server-stopped',
      ]);
      // The controller did not work after the Lease was released.
      const lastBeat = a.beats.at(-1) ?? 0;
      await expect(fetch(a.webhookUrl())).rejects.toThrow();

      // Released, so the other replica takes over at its next poll, not after a lease duration.
      await eventually(() => b.elector.isLeader(), { timeoutMs: 1_500, intervalMs: 5 });
      await eventually(() => b.beats.length > 0, { timeoutMs: 2_000 });
      expect(b.beats[0]).toBeGreaterThan(lastBeat);
      expect(await holder()).toBe('replica-b_id');

      // Lost leadership: cut replica-b off the API server. It exits at once with 1, without draining.
      b.events.length = 0;
      const fault = proxy.inject({ user: b.user, resource: 'leases', status: 500 });
      try {
        const lost = await b.done;
        expect(lost).toEqual({ exitCode: 1, reason: 'leader election lost' });
        expect(b.ctrlSignal()?.aborted).toBe(true);
        expect(b.events.slice(0, 3)).toEqual(['leadership-lost', 'shutdown-requested', 'not-ready']);
        expect(b.events).not.toContain('drained');
        expect(b.events).not.toContain('leader-election-stopped');
        expect(b.events.at(-1)).toBe('probe-server-stopped');
      } finally {
        fault.remove();
      }
      // Lost means not released: the Lease still names replica-b until it expires.
      expect(await holder()).toBe('replica-b_id');
    } finally {
      a.manager.stop();
      b.manager.stop();
      await Promise.all([a.done, b.done]);
    }
  });
});
