// A same-name replacement Pod (a StatefulSet's database-0 recreated with a new UID, e.g. after a force
// deletion while its node is partitioned) against the real central lease manager: the runtime-singleton
// holder contains the Pod UID, so the new incarnation can neither join the old one's epoch nor renew its
// token; it waits in berth-acquire until the old lease is gone, then starts a new epoch. One ManualClock
// drives the helpers and the manager.
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { type AcquireResult, type LeaseClient, LeaseConflictError } from '../../../src/berth/leaseclient.ts';
import { LeaseManager, type LeaseResult, ReleaseConflictError } from '../../../src/central/manager.ts';
import { MemoryStore } from '../../../src/central/memstore.ts';
import { holdLease } from '../../../src/helper/acquire.ts';
import { configFromEnv, type HelperConfig, resolveConfig } from '../../../src/helper/config.ts';
import { MarkerEnforcer } from '../../../src/helper/enforce.ts';
import { createHelperLog } from '../../../src/helper/log.ts';
import { Sidecar } from '../../../src/helper/renew.ts';
import { HelperState } from '../../../src/helper/state.ts';
import { ManualClock } from '../../../src/kube/clock.ts';
import { eventually } from '../../helpers/eventually.ts';

const NAMESPACE = 'prod';
const LEASE = 'database';
const TTL_MS = 30_000;
const HEARTBEAT_MS = 10_000;

/** The helpers' LeaseClient, answered in-process by the manager (the HTTP layer is tested elsewhere). */
class ManagerClient implements LeaseClient {
  readonly calls: string[] = [];
  readonly #manager: LeaseManager;

  constructor(manager: LeaseManager) {
    this.#manager = manager;
  }

  async acquire(namespace: string, name: string, holder: string, ttlSeconds: number): Promise<AcquireResult> {
    this.calls.push(`acquire ${holder}`);
    return this.#manager.acquire({ namespace, name }, holder, ttlSeconds * 1_000);
  }

  async renew(
    namespace: string,
    name: string,
    holder: string,
    token: number,
    ttlSeconds: number,
  ): Promise<AcquireResult> {
    this.calls.push(`renew ${holder} ${token}`);
    return this.#manager.renew({ namespace, name }, holder, token, ttlSeconds * 1_000);
  }

  async release(namespace: string, name: string, holder: string, token: number): Promise<void> {
    this.calls.push(`release ${holder} ${token}`);
    try {
      await this.#manager.release({ namespace, name }, holder, token);
    } catch (err) {
      if (err instanceof ReleaseConflictError) throw new LeaseConflictError(err.message);
      throw err;
    }
  }
}

/** One incarnation of database-0: its configuration (from the injected env) and its own state volume. */
interface Incarnation {
  config: HelperConfig;
  state: HelperState;
}

describe('a same-name replacement Pod (new UID)', () => {
  let dir: string;
  let clock: ManualClock;
  let manager: LeaseManager;
  let client: ManagerClient;
  let logs: string[];
  let old: Incarnation;
  let replacement: Incarnation;
  const log = () => createHelperLog({ level: 'debug', write: (line) => logs.push(line) });

  const incarnation = (uid: string): Incarnation => {
    const stateDir = join(dir, uid);
    return {
      config: resolveConfig(
        configFromEnv({
          BERTH_LEASE_NAME: LEASE,
          BERTH_TTL_SECONDS: String(TTL_MS / 1_000),
          BERTH_API_SERVER: 'https://berth.example',
          BERTH_CLUSTER_ID: 'east-1',
          BERTH_WORKLOAD_KIND: 'StatefulSet',
          BERTH_WORKLOAD_NAME: 'database',
          BERTH_STATE_DIR: stateDir,
          POD_NAMESPACE: NAMESPACE,
          POD_NAME: 'database-0',
          POD_UID: uid,
        }),
      ),
      state: new HelperState(stateDir),
    };
  };

  const sidecarOf = (i: Incarnation, config = i.config): Sidecar =>
    new Sidecar(config, {
      client,
      state: i.state,
      enforcer: new MarkerEnforcer(i.state),
      clock,
      log: log(),
      restartPod: () => {
        throw new Error('unexpected restart');
      },
    });

  /** Log lines of an incarnation's helpers containing `msg`. */
  const lines = (i: Incarnation, msg: string): number =>
    logs.filter((l) => l.includes(msg) && l.includes(`"holder":${JSON.stringify(i.config.holder)}`)).length;

  const serverView = (): Promise<LeaseResult> =>
    // A renew by a third holder changes nothing and reports the current holder and token.
    manager.renew({ namespace: NAMESPACE, name: LEASE }, 'east-1/observer', 1, TTL_MS);

  beforeEach(async () => {
    dir = await mkdtemp(join(tmpdir(), 'berth-replacement-'));
    clock = new ManualClock();
    manager = new LeaseManager({ store: new MemoryStore(), clock });
    client = new ManagerClient(manager);
    logs = [];
    old = incarnation('0b1c2d3e-old');
    replacement = incarnation('9f8e7d6c-new');
  });
  afterEach(async () => {
    await rm(dir, { recursive: true, force: true });
  });

  it('has a holder of its own: same workload and Pod name, another UID', () => {
    expect(old.config.holder).toBe('east-1/prod:StatefulSet:database:pod:database-0:uid:0b1c2d3e-old');
    expect(replacement.config.holder).toBe(
      'east-1/prod:StatefulSet:database:pod:database-0:uid:9f8e7d6c-new',
    );
  });

  it('waits in berth-acquire while the old incarnation renews, and starts a new epoch once its lease is gone', async () => {
    const won = await holdLease(old.config, {
      client,
      state: old.state,
      clock,
      log: log(),
      signal: new AbortController().signal,
    });
    expect(won.fencingToken).toBe(1);
    const oldSidecar = sidecarOf(old, { ...old.config, releaseOnShutdown: false });
    await oldSidecar.start();
    expect((await oldSidecar.probe()).status).toBe(200);

    // The replacement is created while the old Pod still runs (its node is partitioned from the API
    // server, not from the lease server).
    const held = holdLease(replacement.config, {
      client,
      state: replacement.state,
      clock,
      log: log(),
      signal: new AbortController().signal,
    });
    let taken: AcquireResult | undefined;
    void held.then((r) => (taken = r));
    const waiting = (): number => lines(replacement, 'lease held by another, waiting');
    await eventually(() => waiting() === 1);
    for (let beat = 1; beat <= 3; beat++) {
      await clock.advanceAsync(HEARTBEAT_MS);
      await eventually(() => lines(old, '"lease renewed"') === beat && waiting() === beat + 1);
    }
    expect(taken).toBeUndefined();
    expect(await replacement.state.readHandoff()).toBeUndefined();
    expect(await serverView()).toMatchObject({ acquired: false, holder: old.config.holder, fencingToken: 1 });
    expect(oldSidecar.lease.held).toBe(true);

    // The old Pod is gone for good without releasing (the node died): its lease expires at the server,
    // and the replacement's first attempt after that wins.
    await oldSidecar.stop();
    const expiresAt = (await serverView()).expiresAt ?? 0;
    while (taken === undefined) {
      const attempts = waiting();
      expect(clock.now()).toBeLessThanOrEqual(expiresAt);
      await clock.advanceAsync(HEARTBEAT_MS);
      await eventually(() => taken !== undefined || waiting() === attempts + 1);
    }
    expect(clock.now()).toBeGreaterThan(expiresAt);
    expect(taken).toMatchObject({ acquired: true, fencingToken: 2 });
    expect(await replacement.state.readHandoff()).toEqual({ holder: replacement.config.holder, token: 2 });
    // The old epoch is over: its token renews nothing, under either holder.
    const key = { namespace: NAMESPACE, name: LEASE };
    expect(await manager.renew(key, old.config.holder, 1, TTL_MS)).toMatchObject({ acquired: false });
    expect(await manager.renew(key, replacement.config.holder, 1, TTL_MS)).toMatchObject({
      acquired: false,
    });
  });

  it("neither adopts nor renews the old incarnation's token, even handed its state", async () => {
    await holdLease(old.config, {
      client,
      state: old.state,
      clock,
      log: log(),
      signal: new AbortController().signal,
    });
    const oldSidecar = sidecarOf(old);
    await oldSidecar.start();
    // Worst case: the replacement's state volume holds the old incarnation's handoff.
    await replacement.state.writeAcquired(old.config.holder, 1);
    const newSidecar = sidecarOf(replacement);
    await newSidecar.start();
    // One heartbeat at a time, each tick over before the next: a tick that fires while one is out is dropped.
    for (let beat = 1; beat <= 3; beat++) {
      await clock.advanceAsync(HEARTBEAT_MS);
      await eventually(
        () => lines(old, '"lease renewed"') === beat && lines(replacement, 'waiting to reacquire') === beat,
      );
    }

    const byReplacement = client.calls.filter((c) => c.includes(replacement.config.holder));
    expect(byReplacement.every((c) => c === `acquire ${replacement.config.holder}`)).toBe(true);
    expect(newSidecar.lease.held).toBe(false);
    expect((await newSidecar.probe()).status).toBe(503);
    expect(oldSidecar.lease.held).toBe(true);
    expect((await oldSidecar.probe()).status).toBe(200);
    expect(await serverView()).toMatchObject({ holder: old.config.holder, fencingToken: 1 });

    // Had it tried, the server refuses the old token under the new holder, and its release too.
    const key = { namespace: NAMESPACE, name: LEASE };
    expect(await manager.renew(key, replacement.config.holder, 1, TTL_MS)).toMatchObject({
      acquired: false,
      holder: old.config.holder,
    });
    await expect(manager.release(key, replacement.config.holder, 1)).rejects.toBeInstanceOf(
      ReleaseConflictError,
    );
    expect(await serverView()).toMatchObject({ holder: old.config.holder, fencingToken: 1 });
    await newSidecar.stop();
    await oldSidecar.stop();
  });
});
