// WorkloadAdmission under Kubernetes API faults (issue #10): when the webhook's own reads fail (500, 503,
// 429 with Retry-After, a reset connection) or answer after its deadline, every review it cannot decide
// is DENIED with a message naming the cause, within the deadline (the webhook answers itself, the API
// server never has to time it out), and the same requests get their normal answers once the fault is
// gone. Each request below has a different normal answer (allowed, allowed, denied for another reason),
// so a webhook that allowed on error, or kept denying afterwards, fails here.
import { PatchStrategy, setHeaderOptions, type V1Deployment } from '@kubernetes/client-node';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { AdmissionMessage, GROUP, PLURAL, SCHEDULING_GATE, VERSION } from '../../../src/berth/api.ts';
import { ManualClock } from '../../../src/kube/clock.ts';
import { RECORD_TARGET_ATTEMPTS } from '../../../webhooks/record-target.ts';
import type { FaultRule } from '../../helpers/api-proxy.ts';
import { eventually } from '../../helpers/eventually.ts';
import { appDeployment } from '../managed/harness.ts';
import {
  ADMISSION_NS,
  type AdmissionWorld,
  collectUncaught,
  MUTATE_DENIED,
  OPERATOR_USER,
  rejection,
  startAdmissionWorld,
  VALIDATE_DENIED,
} from './api-faults-harness.ts';

const uncaught = collectUncaught();
let w: AdmissionWorld;
const merge = setHeaderOptions('Content-Type', PatchStrategy.MergePatch);
const ref = { group: GROUP, version: VERSION, plural: PLURAL, namespace: ADMISSION_NS };
/** The review budget: the configurations' 10 s timeout less the margin, capped at 5 s (server.ts). */
const REVIEW_BUDGET_MS = 5_000;

const leaseBody = (name: string) => ({
  apiVersion: `${GROUP}/${VERSION}`,
  kind: 'BerthLease',
  metadata: { name },
  spec: {
    leaseName: name,
    holderIdentity: 'cluster-east',
    ttlSeconds: 30,
    heartbeatIntervalSeconds: 10,
    semantics: 'at-most-once',
    target: { apiVersion: 'apps/v1', kind: 'Deployment', name },
    acquireAction: { scale: { replicas: 1 } },
    releaseAction: { scale: { replicas: 0 } },
  },
});

const createLease = (name: string) =>
  w.custom.createNamespacedCustomObject({ ...ref, body: leaseBody(name) });
const readLease = (name: string) =>
  w.custom.getNamespacedCustomObject({ ...ref, name }) as Promise<{
    status?: { workload?: { targetUID?: string } };
  }>;
/**
 * Paused: the Deployment controller then makes no ReplicaSet (nor Pods), whose admission reviews would read
 * through the faults at moments the tests do not choose.
 */
const createDeployment = (name: string): Promise<V1Deployment> => {
  const body = appDeployment(name, 0);
  return w.apps.createNamespacedDeployment({
    namespace: ADMISSION_NS,
    body: { ...body, spec: { ...body.spec!, paused: true } },
  });
};
const replicas = async (name: string): Promise<number> =>
  (await w.apps.readNamespacedDeployment({ namespace: ADMISSION_NS, name })).spec?.replicas ?? 0;
const scaleUp = async (name: string): Promise<V1Deployment> =>
  w.apps.patchNamespacedDeployment(
    { namespace: ADMISSION_NS, name, body: { spec: { replicas: (await replicas(name)) + 1 } } },
    merge,
  );

beforeAll(async () => {
  w = await startAdmissionWorld(new ManualClock(Date.now()));
  // `web`: an admitted target whose lease authorizes activation (Active, deadline an hour away).
  await createLease('web');
  const web = await createDeployment('web');
  await w.custom.patchNamespacedCustomObjectStatus(
    {
      ...ref,
      name: 'web',
      body: {
        status: {
          workload: {
            targetUID: web.metadata?.uid,
            phase: 'Active',
            leaseName: 'web',
            holder: 'cluster-east',
            token: 1,
            deadline: new Date(Date.now() + 3_600_000).toISOString().replace(/\.\d+Z$/, 'Z'),
          },
        },
      },
    },
    merge,
  );
  // `legacy`: created before its lease, so never admitted; it may only ever be stopped.
  await createDeployment('legacy');
  await createLease('legacy');
});
afterEach(() => {
  w.proxy.clear();
  expect(uncaught.errors).toEqual([]);
});
afterAll(async () => {
  uncaught.dispose();
  await w?.stop();
});

interface Request {
  name: string;
  /** Makes what the request needs (called once per case with a fresh index). */
  prepare(i: number): Promise<void>;
  send(i: number): Promise<unknown>;
  /** The denial under a failing read, up to the cause. */
  deniedPrefix: string;
  /** Asserts the normal answer once the fault is gone. */
  normal(i: number): Promise<void>;
}

const requests: Request[] = [
  {
    name: 'CREATE of a lease target',
    prepare: async (i) => void (await createLease(`fresh-${i}`)),
    send: (i) => createDeployment(`fresh-${i}`),
    deniedPrefix: `${MUTATE_DENIED}list BerthLeases: `,
    async normal(i) {
      const created = await createDeployment(`fresh-${i}`);
      expect(created.spec?.template.spec?.schedulingGates).toEqual([{ name: SCHEDULING_GATE }]);
      expect((await readLease(`fresh-${i}`)).status?.workload).toEqual({ targetUID: created.metadata?.uid });
    },
  },
  {
    name: 'scale-up of an admitted target whose lease is active',
    prepare: async () => {},
    send: () => scaleUp('web'),
    deniedPrefix: `${VALIDATE_DENIED}get BerthLease "web": `,
    async normal() {
      const before = await replicas('web');
      expect((await scaleUp('web')).spec?.replicas).toBe(before + 1);
    },
  },
  {
    name: 'scale-up of a legacy (never admitted) target',
    prepare: async () => {},
    send: () => scaleUp('legacy'),
    deniedPrefix: `${VALIDATE_DENIED}list BerthLeases: `,
    async normal() {
      expect(await rejection(scaleUp('legacy'))).toBe(`${VALIDATE_DENIED}${AdmissionMessage.drainLegacy}`);
      expect(await replicas('legacy')).toBe(0);
    },
  },
];

interface ReadFault {
  name: string;
  rule: FaultRule;
  /** The cause in the denial message. */
  cause: RegExp;
}

const leaseReads = { verbs: ['get', 'list'], resource: 'berthleases', user: OPERATOR_USER };
const readFaults: ReadFault[] = [
  {
    name: '500',
    rule: { ...leaseReads, status: 500, message: 'etcd leader changed' },
    cause: /^etcd leader changed$/,
  },
  {
    name: '503',
    rule: { ...leaseReads, status: 503, message: 'storage is (re)initializing' },
    cause: /^storage is \(re\)initializing$/,
  },
  {
    name: '429 with Retry-After',
    rule: { ...leaseReads, status: 429, retryAfterSeconds: 1, message: 'too many requests' },
    cause: /^too many requests$/,
  },
  {
    name: 'a reset connection',
    rule: { ...leaseReads, resetConnection: true },
    cause: /fetch failed|socket|closed/i,
  },
];

let index = 0;

describe.each(readFaults)('webhook reads fail with $name', ({ rule, cause }) => {
  it.each(requests)('$name: denied while failing, normal answer after', async (r) => {
    const i = ++index;
    await r.prepare(i);
    const fault = w.proxy.inject(rule);
    const message = await rejection(r.send(i));
    expect(message.startsWith(r.deniedPrefix), message).toBe(true);
    expect(message.slice(r.deniedPrefix.length)).toMatch(cause);
    expect(fault.hits()).toBeGreaterThan(0);
    fault.remove();
    await r.normal(i);
  });
});

describe('webhook reads slower than the review deadline', () => {
  it.each(requests)('$name: denied at the deadline by the webhook itself, normal answer after', async (r) => {
    const i = ++index;
    await r.prepare(i);
    const fault = w.proxy.inject({ ...leaseReads, delayMs: 120_000 });
    const answer = rejection(r.send(i));
    await eventually(() => fault.hits() === 1);
    // One millisecond short of the budget the webhook still waits for its read.
    w.clock.advance(REVIEW_BUDGET_MS - 1);
    w.clock.advance(1);
    const message = await answer;
    const webhook = r.deniedPrefix.startsWith(MUTATE_DENIED) ? MUTATE_DENIED : VALIDATE_DENIED;
    expect(message).toBe(`${webhook}admission review did not complete within ${REVIEW_BUDGET_MS}ms`);
    fault.remove();
    await r.normal(i);
  });
});

describe('the target record write at the final CREATE', () => {
  const statusWrites = {
    verbs: ['update'],
    resource: 'berthleases',
    subresource: 'status',
    user: OPERATOR_USER,
  };

  it('a persistent 409 is retried from fresh reads, then denied; nothing is recorded', async () => {
    await createLease('conflicted');
    const fault = w.proxy.inject({ ...statusWrites, status: 409 });
    const reads = w.proxy.inject({
      verbs: ['get', 'list'],
      resource: 'berthleases',
      user: OPERATOR_USER,
    });
    expect(await rejection(createDeployment('conflicted'))).toBe(
      `${VALIDATE_DENIED}record target UID in BerthLease status: conflicting writes after ${RECORD_TARGET_ATTEMPTS} attempts`,
    );
    expect(fault.hits()).toBe(RECORD_TARGET_ATTEMPTS);
    // Each retry read the lease again (after the mutating and validating resolutions' reads).
    expect(reads.hits()).toBeGreaterThanOrEqual(RECORD_TARGET_ATTEMPTS + 1);
    expect((await readLease('conflicted')).status?.workload).toBeUndefined();
    fault.remove();
    reads.remove();
    const created = await createDeployment('conflicted');
    expect((await readLease('conflicted')).status?.workload).toEqual({ targetUID: created.metadata?.uid });
  });

  it('a transient 409 is retried and the record written', async () => {
    await createLease('raced');
    const fault = w.proxy.inject({
      ...statusWrites,
      status: 409,
      times: RECORD_TARGET_ATTEMPTS - 1,
    });
    const created = await createDeployment('raced');
    expect(fault.hits()).toBe(RECORD_TARGET_ATTEMPTS - 1);
    expect((await readLease('raced')).status?.workload).toEqual({ targetUID: created.metadata?.uid });
  });

  it.each([
    { name: 'a 500', rule: { status: 500 } },
    { name: 'a reset connection', rule: { resetConnection: true } },
  ])('$name on the write is denied, not allowed unrecorded', async ({ rule }) => {
    const lease = `unwritten-${++index}`;
    await createLease(lease);
    const fault = w.proxy.inject({ ...statusWrites, ...rule });
    const message = await rejection(createDeployment(lease));
    expect(message).toMatch(
      new RegExp(`^${escapeRegExp(VALIDATE_DENIED)}record target UID in BerthLease status: `),
    );
    await expect(w.apps.readNamespacedDeployment({ namespace: ADMISSION_NS, name: lease })).rejects.toThrow();
    fault.remove();
    const created = await createDeployment(lease);
    expect((await readLease(lease)).status?.workload).toEqual({ targetUID: created.metadata?.uid });
  });

  it('a failing GET of the target (does it exist already?) is denied', async () => {
    await createLease('unchecked');
    const fault = w.proxy.inject({
      verbs: ['get'],
      resource: 'deployments',
      user: OPERATOR_USER,
      status: 503,
      message: 'etcd timeout',
    });
    expect(await rejection(createDeployment('unchecked'))).toBe(
      `${VALIDATE_DENIED}get target "unchecked": etcd timeout`,
    );
    fault.remove();
    const created = await createDeployment('unchecked');
    expect((await readLease('unchecked')).status?.workload).toEqual({ targetUID: created.metadata?.uid });
  });
});

const escapeRegExp = (s: string): string => s.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');
