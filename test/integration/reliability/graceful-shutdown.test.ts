// Graceful shutdown of a webhook replica under continuous admission traffic: two operator processes serve
// the fail-closed webhooks behind the webhook Service (each replica an endpoint while its /readyz answers
// 200), a loop creates and updates Pods through the API server (every write passes both webhooks),
// and one replica gets SIGTERM — the non-leader, then the leader. No admission request fails; /readyz
// drops while the webhook listener still accepts connections (the drain window), and every answer from
// then on closes its connection (kube-apiserver keeps its connections to a replica that is no longer an
// endpoint and sends reviews on them until they close); a review in flight on the stopping replica is
// answered; the leader clears its Lease (release-on-cancel) so the other replica
// takes over without waiting for expiry; the process exits 0 (0, not 1, means the sequence finished
// within --graceful-shutdown-timeout).
import { Agent, request as httpsRequest } from 'node:https';
import { connect as tlsConnect } from 'node:tls';
import { type V1CronJob, type V1Lease, Watch } from '@kubernetes/client-node';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ADMIN_USER } from '../../../hack/controlplane/controlplane.ts';
import { VALIDATE_WORKLOADS_PATH } from '../../../src/berth/api.ts';
import { BerthLeaseBuilder } from '../../builders/berthlease.ts';
import { CronJobBuilder } from '../../builders/cronjob.ts';
import { PodBuilder } from '../../builders/pod.ts';
import { eventually } from '../../helpers/eventually.ts';
import { type OperatorProcess, stopOperatorProcesses } from '../../helpers/operator-process.ts';
import {
  LEADER_LEASE,
  NS,
  OPERATOR_NS,
  OPERATOR_USER,
  OperatorCluster,
  WEBHOOK_SERVICE,
} from './operator-cluster.ts';

/**
 * Far longer than the route's readiness polling (150 ms) and the EndpointSlice reaching the API server:
 * the API server dials a replica no more before it closes.
 */
const DRAIN_MS = 1_500;
const SHUTDOWN_FLAGS = [
  `--drain-window=${DRAIN_MS}ms`,
  '--graceful-shutdown-timeout=20s',
  // No failover here waits for expiry (a stopping leader releases): long durations keep a busy machine
  // from costing a replica its leadership.
  '--leader-election-lease-duration=15s',
  '--leader-election-renew-deadline=10s',
  // A stopping leader reads the Lease every 250 ms for its successor, each read bounded by this period.
  // At the cluster's 250 ms such reads timed out on a loaded machine; should they keep doing so, the
  // leader waits out its whole hand-over wait (6 s) before its listener closes. A successor still takes
  // a released Lease at once: it watches the holder.
  '--leader-election-retry-period=1s',
];
const OWNER = 'traffic-owner';
/**
 * Reviews of Pods owned by this CronJob read it from the API server, which the test holds until the
 * listener has closed: what comes before the close (the drain window; a leader also stops its controllers,
 * releases its Lease and waits for a successor) took 2 s here and about 7 s in one CI run, so no fixed
 * delay orders them. The review's 5 s budget still bounds it; past that, the assertion prints the steps.
 */
const SLOW_OWNER = 'slow-owner';

let cluster: OperatorCluster;
const owners: Record<string, V1CronJob> = {};

/**
 * Unmanaged owners of the traffic's Pods (created once admission works: it is fail-closed), and a
 * lease-only BerthLease, whose presence makes each review follow the Pod's owner with an API read. The
 * owners are suspended CronJobs: no controller acts on Pods they own (a ReplicaSet's controller would
 * delete them, or release those its selector does not match).
 */
async function createOwners(): Promise<void> {
  await cluster.createLease(
    'placeholder',
    new BerthLeaseBuilder('placeholder').holderIdentity('nobody').spec(),
  );
  for (const name of [OWNER, SLOW_OWNER]) {
    owners[name] = await cluster.batch.createNamespacedCronJob({
      namespace: NS,
      body: new CronJobBuilder(name).schedule('0 0 1 1 *').suspend(true).containers(APP).obj(),
    });
  }
}

beforeAll(async () => {
  cluster = await OperatorCluster.start();
});
afterAll(async () => {
  await stopOperatorProcesses();
  await cluster?.stop();
});

const APP = { name: 'app', image: 'app:1' };

interface Traffic {
  ok: number;
  failures: string[];
  /** Stops the loop and waits for its workers. */
  stop(): Promise<void>;
}

/** Workers creating a Pod (mutating + validating webhook, owner read) and then updating it (validating). */
function startTraffic(prefix: string, workers = 3): Traffic {
  let stopped = false;
  let n = 0;
  const traffic: Traffic = { ok: 0, failures: [], stop: async () => {} };
  const worker = async (): Promise<void> => {
    while (!stopped) {
      const name = `${prefix}-${n++}`;
      try {
        await cluster.core.createNamespacedPod({
          namespace: NS,
          body: new PodBuilder(name).labels({ app: OWNER }).ownedBy(owners[OWNER]!).containers(APP).obj(),
        });
        traffic.ok++;
        await cluster.core.patchNamespacedPod({
          namespace: NS,
          name,
          body: [{ op: 'add', path: '/metadata/labels/step', value: 'updated' }],
        });
        traffic.ok++;
      } catch (err) {
        const body = (err as { body?: unknown }).body;
        traffic.failures.push(`${name}: ${typeof body === 'string' ? body : String(err)}`);
      }
    }
  };
  const running = Array.from({ length: workers }, () => worker());
  traffic.stop = async () => {
    stopped = true;
    await Promise.all(running);
  };
  return traffic;
}

interface Sample {
  at: number;
  readyz: number;
  /** The webhook port completed a TLS handshake. */
  accepting: boolean;
}

function tlsAccepts(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const socket = tlsConnect({ host: '127.0.0.1', port, rejectUnauthorized: false, servername: 'probe' });
    socket.setTimeout(2_000, () => {
      socket.destroy();
      resolve(false);
    });
    socket.once('secureConnect', () => {
      socket.end();
      resolve(true);
    });
    socket.once('error', () => resolve(false));
  });
}

/**
 * Samples /readyz and the webhook listener of a stopping replica until it exits; calls `onClosed` once,
 * after the first sample that found the listener closed.
 */
async function sampleUntilExit(
  replica: OperatorProcess,
  port: number,
  onClosed: () => void,
): Promise<Sample[]> {
  const samples: Sample[] = [];
  while (!replica.hasExited()) {
    const at = Date.now();
    const [readyz, accepting] = await Promise.all([replica.readyz(), tlsAccepts(port)]);
    samples.push({ at, readyz, accepting });
    if (!accepting) onClosed();
    await new Promise((resolve) => setTimeout(resolve, 10));
  }
  return samples;
}

interface Answer {
  status: number;
  body: string;
  at: number;
  /** The answer's Connection header. */
  connection: string | undefined;
  /** Sent on a connection the agent kept alive from an earlier request. */
  reused: boolean;
}

/**
 * An AdmissionReview for a Pod owned by `owner`, POSTed straight to one replica as the API server would
 * (on a connection of its own, or of `agent`'s pool).
 */
function postReview(port: number, caBundle: string, owner: V1CronJob, agent: Agent | false): Promise<Answer> {
  const uid = crypto.randomUUID();
  const pod = new PodBuilder('in-flight').namespace(NS).ownedBy(owner).containers(APP).json();
  const review = {
    apiVersion: 'admission.k8s.io/v1',
    kind: 'AdmissionReview',
    request: {
      uid,
      kind: { group: '', version: 'v1', kind: 'Pod' },
      resource: { group: '', version: 'v1', resource: 'pods' },
      requestKind: { group: '', version: 'v1', kind: 'Pod' },
      requestResource: { group: '', version: 'v1', resource: 'pods' },
      name: 'in-flight',
      namespace: NS,
      operation: 'CREATE',
      userInfo: { username: ADMIN_USER, groups: ['system:masters', 'system:authenticated'] },
      object: pod,
      oldObject: null,
      dryRun: false,
      options: { apiVersion: 'meta.k8s.io/v1', kind: 'CreateOptions' },
    },
  };
  const body = JSON.stringify(review);
  return new Promise((resolve, reject) => {
    const req = httpsRequest(
      {
        method: 'POST',
        host: '127.0.0.1',
        port,
        path: `${VALIDATE_WORKLOADS_PATH}?timeout=10s`,
        servername: `${WEBHOOK_SERVICE}.${OPERATOR_NS}.svc`,
        ca: Buffer.from(caBundle, 'base64').toString('utf8'),
        agent,
        headers: { 'content-type': 'application/json', 'content-length': Buffer.byteLength(body) },
      },
      (res) => {
        let text = '';
        res.on('data', (d: Buffer) => {
          text += d.toString();
        });
        res.on('end', () =>
          resolve({
            status: res.statusCode ?? 0,
            body: text,
            at: Date.now(),
            connection: res.headers.connection,
            reused: req.reusedSocket,
          }),
        );
        res.on('error', reject);
      },
    );
    req.on('error', reject);
    req.end(body);
  });
}

/** Every holderIdentity the leader-election Lease goes through, in order, from now on. */
async function watchLeaderLease(): Promise<{ holders: string[]; stop(): void }> {
  const holders: string[] = [];
  const watch = new Watch(cluster.t.kc);
  const req = await watch.watch(
    `/apis/coordination.k8s.io/v1/namespaces/${OPERATOR_NS}/leases`,
    { fieldSelector: `metadata.name=${LEADER_LEASE}` },
    (_type: string, lease: V1Lease) => {
      const holder = lease.spec?.holderIdentity ?? '';
      if (holders.at(-1) !== holder) holders.push(holder);
    },
    () => {},
  );
  return { holders, stop: () => req.abort() };
}

/** Reviews a replica has answered with HTTP 200, from its /metrics. */
async function reviewsServed(replica: OperatorProcess): Promise<number> {
  const text = await (await fetch(`http://${await replica.metrics()}/metrics`)).text();
  const samples = text.matchAll(
    /^controller_runtime_webhook_requests_total\{[^}]*code="200"[^}]*\} (\d+)$/gm,
  );
  return [...samples].reduce((sum, m) => sum + Number(m[1]), 0);
}

async function startReplica(name: string): Promise<OperatorProcess> {
  const replica = cluster.startOperator({ name, args: SHUTDOWN_FLAGS });
  await replica.ready();
  return replica;
}

/** The replica holding the leader Lease, once one does. */
async function leaderOf(replicas: OperatorProcess[]): Promise<OperatorProcess> {
  const leader = await eventually(async () => {
    const holder = await cluster.leaderHolder();
    for (const r of replicas) if ((await r.identity()) === holder) return r;
    return undefined;
  });
  if (leader === undefined) throw new Error('no leader');
  return leader;
}

/**
 * SIGTERMs `victim` under traffic and checks the shutdown from outside; returns the Lease holders seen
 * from just before the signal until the exit.
 */
async function terminateUnderTraffic(victim: OperatorProcess, prefix: string): Promise<string[]> {
  const port = await victim.webhookPort();
  const caBundle = (await cluster.caBundles()).validating;
  const lease = await watchLeaderLease();
  const traffic = startTraffic(prefix);
  const closed = Promise.withResolvers<void>();
  try {
    // Traffic flows through the victim too before the signal.
    await eventually(async () => traffic.ok >= 10 && (await reviewsServed(victim)) > 0, {
      timeoutMs: 10_000,
    });
    const slowRead = cluster.proxy.inject({
      user: OPERATOR_USER,
      verbs: ['get'],
      resource: 'cronjobs',
      name: SLOW_OWNER,
      until: closed.promise,
    });
    const inFlight = postReview(port, caBundle, owners[SLOW_OWNER]!, false);
    // A connection kept alive from before the signal, as the API server keeps its own.
    const pool = new Agent({ keepAlive: true, maxSockets: 1 });
    const pooled = await postReview(port, caBundle, owners[OWNER]!, pool);
    // The review is being decided (its owner read has reached the API server) when the signal arrives.
    await eventually(() => slowRead.hits() >= 1);
    const okAtSignal = traffic.ok;
    const signalAt = Date.now();
    victim.kill('SIGTERM');
    const whileDraining = (async () => {
      await eventually(async () => (await victim.readyz()) !== 200);
      return postReview(port, caBundle, owners[OWNER]!, pool);
    })();
    const samples = await sampleUntilExit(victim, port, closed.resolve);
    const exit = await victim.exited;
    const answered = await inFlight;
    const drained = await whileDraining;
    pool.destroy();
    slowRead.remove();
    const okDuringShutdown = traffic.ok - okAtSignal;
    // A little more traffic after the exit: the remaining replica serves alone.
    const okAtExit = traffic.ok;
    await eventually(() => traffic.ok >= okAtExit + 5, { timeoutMs: 10_000 });
    await traffic.stop();

    expect(traffic.failures).toEqual([]);
    expect(okDuringShutdown).toBeGreaterThan(0);
    expect(exit).toEqual({ code: 0, signal: null });
    expect(victim.stderr()).toBe('');
    expect(victim.logs().some((l) => l.msg === 'graceful shutdown timed out')).toBe(false);
    // Readiness dropped first: a moment where /readyz fails while the listener still accepts, and never
    // the listener gone while /readyz still passes.
    expect(samples.some((s) => s.readyz !== 200 && s.accepting)).toBe(true);
    expect(samples.some((s) => s.readyz === 200 && !s.accepting)).toBe(false);
    expect(samples.at(-1)?.accepting ?? false).toBe(false);
    // The review in flight when the signal came was answered in full, allowed (an unmanaged owner), after
    // the listener had stopped accepting connections. Should the close come after the review's 5 s budget,
    // the shutdown's steps say what took that long.
    const closedAt = samples.find((s) => !s.accepting)?.at ?? Number.POSITIVE_INFINITY;
    const steps = victim
      .logs()
      .map((l) => ({ after: Date.parse(String(l.time)) - signalAt, msg: l.msg }))
      .filter((l) => l.after >= 0)
      .map((l) => `+${l.after} ms ${l.msg}`);
    const timeline = [
      ...steps,
      `closed +${closedAt - signalAt} ms, answered +${answered.at - signalAt} ms`,
    ].join('\n');
    expect(closedAt, timeline).toBeLessThan(answered.at);
    expect(answered.status, timeline).toBe(200);
    expect(JSON.parse(answered.body), timeline).toMatchObject({ response: { allowed: true } });
    // Not ready any more, the replica still answers on a kept-alive connection, and closes it with that
    // answer: its client sends nothing more on a connection the replica is about to close.
    expect(pooled).toMatchObject({ status: 200, connection: 'keep-alive' });
    expect(drained).toMatchObject({ status: 200, connection: 'close', reused: true });
    expect(JSON.parse(drained.body)).toMatchObject({ response: { allowed: true } });
    return [...lease.holders];
  } finally {
    closed.resolve();
    lease.stop();
    await traffic.stop();
  }
}

describe('graceful shutdown of a webhook replica under admission traffic', () => {
  let replicas: OperatorProcess[];

  it('SIGTERM of the non-leader: no admission request fails, readiness drops first, exit 0', async () => {
    replicas = await Promise.all([startReplica('a'), startReplica('b')]);
    await cluster.route(replicas);
    await cluster.admissionWorks();
    await createOwners();
    const leader = await leaderOf(replicas);
    const victim = replicas.find((r) => r !== leader)!;
    const holders = await terminateUnderTraffic(victim, 'non-leader');
    // The leader was not disturbed.
    expect(holders).toEqual([await leader.identity()]);
    replicas = [leader];
  }, 60_000);

  it('SIGTERM of the leader: the same, and the Lease is released so the other replica leads at once', async () => {
    const successor = await startReplica('c');
    replicas = [...replicas, successor];
    await cluster.route(replicas);
    const leader = await leaderOf(replicas);
    expect(leader).not.toBe(successor);
    const holders = await terminateUnderTraffic(leader, 'leader');
    expect(leader.logs().some((l) => l.msg === 'released leader election lease')).toBe(true);
    // Released (holder cleared) before the successor took it: no wait for the Lease to expire.
    await eventually(async () => (await cluster.leaderHolder()) === (await successor.identity()), {
      timeoutMs: 10_000,
    });
    expect(holders.slice(0, 2)).toEqual([await leader.identity(), '']);
  }, 60_000);
});
