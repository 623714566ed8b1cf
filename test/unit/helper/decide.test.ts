// The sidecar's decisions and the marker's freshness, pure; and the sidecar itself on a ManualClock with a
// scripted lease client (the cases of the Go helper's renew and deadline tests).
import { mkdtemp, rm, utimes } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import {
  type AcquireResult,
  type LeaseClient,
  LeaseClientError,
  LeaseConflictError,
} from '../../../src/berth/leaseclient.ts';
import { configFromEnv, type HelperConfig, resolveConfig } from '../../../src/helper/config.ts';
import {
  afterReacquire,
  afterRenew,
  callBoundMs,
  type LeaseView,
  probeAnswer,
} from '../../../src/helper/decide.ts';
import { MarkerEnforcer, SignalEnforcer } from '../../../src/helper/enforce.ts';
import { createHelperLog } from '../../../src/helper/log.ts';
import { Sidecar } from '../../../src/helper/renew.ts';
import { evaluateMarker, HelperState, markerReason, markerVerdict } from '../../../src/helper/state.ts';
import { ManualClock } from '../../../src/kube/clock.ts';
import { eventually } from '../../helpers/eventually.ts';

const WINDOW = 26_000; // TTL 30 s minus the 4 s lead: a 2 s probe period, the probe's 1 s kill grace, 1 s to kill
const won = (token: number): AcquireResult => ({
  acquired: true,
  holder: 'h',
  fencingToken: token,
  expiresAt: undefined,
  acquiredAt: undefined,
});
const other: AcquireResult = {
  acquired: false,
  holder: 'rival',
  fencingToken: 3,
  expiresAt: undefined,
  acquiredAt: undefined,
};
const held = (fenceAt: number | undefined): LeaseView => ({ held: true, token: 7, fenceAt });

describe('afterRenew', () => {
  it('confirms until the local send time plus the window, whatever the server says of expiry', () => {
    expect(afterRenew(held(100_000), { ok: true, value: won(8) }, 90_000, 90_500, WINDOW)).toEqual({
      action: 'confirm',
      lease: { held: true, token: 8, fenceAt: 116_000 },
    });
  });

  it('stops the app on a conflict or another holder', () => {
    expect(
      afterRenew(held(100_000), { ok: false, error: new LeaseConflictError('409') }, 0, 1, WINDOW).action,
    ).toBe('lose');
    expect(afterRenew(held(100_000), { ok: true, value: other }, 0, 1, WINDOW)).toMatchObject({
      action: 'lose',
      why: 'renew reports lease held by another: lease lost (holder "rival")',
    });
  });

  it('keeps the app through an error until the deadline, and stops it from the deadline on', () => {
    const err = { ok: false as const, error: new LeaseClientError('network', 'ECONNREFUSED') };
    expect(afterRenew(held(100_000), err, 90_000, 99_999, WINDOW).action).toBe('keep');
    expect(afterRenew(held(100_000), err, 90_000, 100_000, WINDOW).action).toBe('lose');
    // An unconfirmed handoff has no deadline to spend.
    expect(afterRenew(held(undefined), err, 90_000, 90_001, WINDOW).action).toBe('lose');
  });

  it('does not let a late success reopen the lease', () => {
    expect(
      afterRenew(held(200_000), { ok: true, value: won(8) }, 90_000, 90_000 + WINDOW, WINDOW).action,
    ).toBe('lose');
    expect(afterRenew(held(100_000), { ok: true, value: won(8) }, 90_000, 100_000, WINDOW).action).toBe(
      'lose',
    );
  });
});

describe('afterReacquire', () => {
  const gated: LeaseView = { held: false, token: 7, fenceAt: undefined };
  it('confirms a won lease, stays stopped otherwise or when the answer is late', () => {
    expect(afterReacquire(gated, { ok: true, value: won(9) }, 1_000, 1_200, WINDOW)).toEqual({
      action: 'confirm',
      lease: { held: true, token: 9, fenceAt: 27_000 },
    });
    expect(afterReacquire(gated, { ok: true, value: other }, 1_000, 1_200, WINDOW).action).toBe('wait');
    expect(afterReacquire(gated, { ok: true, value: won(9) }, 1_000, 28_000, WINDOW).action).toBe('wait');
    expect(afterReacquire(gated, { ok: false, error: new Error('down') }, 1_000, 1_200, WINDOW).action).toBe(
      'wait',
    );
  });
});

describe('callBoundMs', () => {
  it('is a heartbeat, or what is left before the deadline', () => {
    expect(callBoundMs(held(100_000), 50_000, 10_000)).toBe(10_000);
    expect(callBoundMs(held(100_000), 95_000, 10_000)).toBe(5_000);
    expect(callBoundMs({ held: false, token: 0, fenceAt: undefined }, 95_000, 10_000)).toBe(10_000);
  });
});

describe('marker freshness', () => {
  it('tells absent from stale from fresh', () => {
    expect(markerVerdict('absent', 30_000, 0)).toEqual({ ok: false, reason: 'absent' });
    expect(markerVerdict({ mtimeMs: 0 }, 30_000, 30_000)).toEqual({ ok: true, ageMs: 30_000 });
    expect(markerVerdict({ mtimeMs: 0 }, 30_000, 30_001)).toMatchObject({ ok: false, reason: 'stale' });
    expect(markerVerdict({ mtimeMs: 0 }, 0, 1e12)).toEqual({ ok: true, ageMs: undefined });
    expect(markerReason(markerVerdict({ mtimeMs: 0 }, 30_000, 42_400), '/berth/healthy')).toBe(
      'health marker stale: /berth/healthy not refreshed for 42s (limit 30s); the lease sidecar is not renewing',
    );
    expect(markerReason({ ok: false, reason: 'absent' }, '/berth/healthy')).toBe(
      'health marker absent: /berth/healthy',
    );
  });

  it('answers the probe 503 with why: lease not held, or the marker', () => {
    expect(
      probeAnswer(
        { held: false, token: 1, fenceAt: undefined },
        'renew conflict: lease lost',
        { ok: true, ageMs: 1 },
        '/m',
      ),
    ).toEqual({
      status: 503,
      body: 'lease not held: renew conflict: lease lost',
    });
    expect(probeAnswer(held(1), '', { ok: false, reason: 'absent' }, '/m')).toEqual({
      status: 503,
      body: 'health marker absent: /m',
    });
    expect(probeAnswer(held(1), '', { ok: true, ageMs: 1 }, '/m')).toEqual({ status: 200, body: 'ok' });
  });
});

// ---------------------------------------------------------------------------------------------------
// The sidecar on a ManualClock

type Answer = AcquireResult | Error | 'hang';

class ScriptedClient implements LeaseClient {
  renews: Answer[] = [];
  acquires: Answer[] = [];
  calls: string[] = [];
  released: number[] = [];

  #answer(list: Answer[], signal: AbortSignal | undefined): Promise<AcquireResult> {
    const next = list.shift() ?? new Error('unscripted');
    if (next === 'hang')
      return new Promise((_, reject) =>
        signal?.addEventListener('abort', () => reject(new Error('aborted'))),
      );
    return next instanceof Error ? Promise.reject(next) : Promise.resolve(next);
  }

  acquire(
    _ns: string,
    _n: string,
    _h: string,
    _t: number,
    o?: { signal?: AbortSignal },
  ): Promise<AcquireResult> {
    this.calls.push('acquire');
    return this.#answer(this.acquires, o?.signal);
  }

  renew(
    _ns: string,
    _n: string,
    _h: string,
    token: number,
    _t: number,
    o?: { signal?: AbortSignal },
  ): Promise<AcquireResult> {
    this.calls.push(`renew ${token}`);
    return this.#answer(this.renews, o?.signal);
  }

  async release(_ns: string, _n: string, _h: string, token: number): Promise<void> {
    this.released.push(token);
  }
}

describe('Sidecar', () => {
  let dir: string;
  let state: HelperState;
  let clock: ManualClock;
  let client: ScriptedClient;
  let config: HelperConfig;
  const flush = async (): Promise<void> => {
    for (let i = 0; i < 20; i++) await new Promise((r) => setImmediate(r));
  };
  const healthy = async (): Promise<boolean> =>
    (await evaluateMarker(state.markerPath, 0, () => clock.now())).ok;

  beforeEach(async () => {
    dir = await mkdtemp(join(tmpdir(), 'berth-sidecar-'));
    state = new HelperState(dir);
    restarts = [];
    clock = new ManualClock();
    client = new ScriptedClient();
    config = resolveConfig(
      configFromEnv({
        BERTH_LEASE_NAME: 'checkout',
        POD_NAMESPACE: 'prod',
        POD_NAME: 'p',
        POD_UID: 'u1',
        BERTH_TTL_SECONDS: '30',
        BERTH_API_SERVER: 'https://berth.example',
        BERTH_STATE_DIR: dir,
      }),
    );
  });
  afterEach(async () => {
    await rm(dir, { recursive: true, force: true });
  });

  let restarts: string[];
  const sidecar = (c: HelperConfig = config): Sidecar =>
    new Sidecar(c, {
      client,
      state,
      enforcer: new MarkerEnforcer(state),
      clock,
      log: createHelperLog({ write: () => {} }),
      restartPod: (why) => restarts.push(why),
    });

  it('keeps the app stopped until a renewal confirms the handoff, then renews every heartbeat', async () => {
    await state.writeAcquired(config.holder, 11);
    client.renews = ['hang'];
    const s = sidecar();
    const started = s.start();
    await eventually(async () => client.calls.length === 1 && !(await healthy()));
    expect((await s.probe()).status).toBe(503);
    clock.advance(10_000); // the hung call is bounded by the heartbeat
    await started;
    expect(s.lease.held).toBe(false);
    client.acquires = [won(12)];
    clock.advance(10_000);
    const sentAt = clock.now();
    await eventually(() => s.lease.held);
    expect(s.lease).toEqual({ held: true, token: 12, fenceAt: sentAt + WINDOW });
    expect(await healthy()).toBe(true);
    expect((await s.probe()).status).toBe(200);
  });

  it('stops the app at the local deadline, between heartbeats, when renewals keep failing', async () => {
    await state.writeAcquired(config.holder, 11);
    client.renews = [won(11), new Error('down'), new Error('down'), new Error('down')];
    const s = sidecar();
    await s.start();
    const confirmedAt = clock.now();
    expect(await healthy()).toBe(true);
    await clock.advanceAsync(WINDOW - 1);
    await flush();
    expect(s.lease.held).toBe(true);
    expect(await healthy()).toBe(true);
    await clock.advanceAsync(1);
    await eventually(async () => !s.lease.held && !(await healthy()));
    expect(clock.now() - confirmedAt).toBe(30_000 - 4_000);
    expect((await s.probe()).body).toBe('lease not held: local lease deadline reached');
  });

  it('stops the app at once when the server names another holder, and releases nothing on shutdown', async () => {
    await state.writeAcquired(config.holder, 11);
    client.renews = [won(11), other];
    const s = sidecar();
    await s.start();
    await clock.advanceAsync(10_000);
    await eventually(async () => !s.lease.held && !(await healthy()));
    await s.stop();
    expect(client.released).toEqual([]);
  });

  it('releases the held lease on shutdown and fails the probe from then on', async () => {
    await state.writeAcquired(config.holder, 11);
    client.renews = [won(11)];
    const s = sidecar();
    await s.start();
    await s.stop();
    expect(client.released).toEqual([11]);
    expect((await s.probe()).status).toBe(503);
  });

  it('ignores a handoff of another holder (an older holder format, another Pod incarnation)', async () => {
    await state.writeAcquired('prod/pod:p', 7);
    client.acquires = [other];
    const s = sidecar();
    await s.start();
    expect(client.calls).toEqual([]);
    await clock.advanceAsync(10_000);
    await eventually(() => client.calls.length === 1);
    expect(client.calls).toEqual(['acquire']);
    expect(s.lease.held).toBe(false);
  });

  it('signal mode: a SIGTERM refused with EPERM (an app of another UID) leaves the probe failing until the lease is back', async () => {
    const signalConfig = resolveConfig({
      ...configFromEnv({
        BERTH_LEASE_NAME: 'checkout',
        POD_NAMESPACE: 'prod',
        POD_NAME: 'p',
        POD_UID: 'u1',
        BERTH_TTL_SECONDS: '30',
        BERTH_API_SERVER: 'https://berth.example',
        BERTH_STATE_DIR: dir,
        BERTH_ENFORCE: 'signal',
        BERTH_SIGNAL_TARGET: 'app',
        BERTH_ENFORCE_GRACE_SECONDS: '5',
      }),
    });
    const tried: string[] = [];
    let appRunning = false; // the kubelet starts it once the sidecar's startup probe passes
    const enforcer = new SignalEnforcer(state, 'app', 5_000, {
      procs: {
        self: 40,
        parent: 39,
        list: async () => (appRunning ? [7] : []),
        comm: async () => 'app',
        exe: async () => '/usr/bin/app',
        cmdline: async () => ['app'],
      },
      kill: (pid, signal) => {
        tried.push(`${signal} ${pid}`);
        throw Object.assign(new Error('kill EPERM'), { code: 'EPERM', syscall: 'kill' });
      },
      clock,
      log: createHelperLog({ write: () => {} }),
    });
    await state.writeAcquired(signalConfig.holder, 11);
    client.renews = [won(11), other];
    client.acquires = [other, won(12)];
    const s = new Sidecar(signalConfig, {
      client,
      state,
      enforcer,
      clock,
      log: createHelperLog({ write: () => {} }),
      restartPod: (why) => restarts.push(why),
    });
    await s.start();
    expect((await s.probe()).status).toBe(200);
    appRunning = true;
    const failing = async (): Promise<void> => {
      expect(await s.probe()).toEqual({
        status: 503,
        body: 'lease not held: renew reports lease held by another: lease lost (holder "rival")',
      });
      expect(await healthy()).toBe(false);
    };
    await clock.advanceAsync(10_000); // the renewal names another holder: lost
    await eventually(() => tried.length === 1);
    expect(tried).toEqual(['SIGTERM 7']);
    await failing();
    await clock.advanceAsync(5_000); // the grace: SIGKILL, refused too
    await eventually(() => tried.length === 2);
    expect(tried).toEqual(['SIGTERM 7', 'SIGKILL 7']);
    await failing();
    await clock.advanceAsync(5_000); // a tick: held elsewhere still, enforced again, nothing more to send
    await eventually(() => client.calls.filter((c) => c === 'acquire').length === 1);
    await flush();
    await failing();
    expect(tried.length).toBe(2);
    await clock.advanceAsync(10_000); // won back: the app may run again
    await eventually(() => s.lease.held);
    expect((await s.probe()).status).toBe(200);
    expect(await healthy()).toBe(true);
    expect(restarts).toEqual([]);
  });

  it('reports a stale marker when nobody refreshed it for a TTL', async () => {
    await state.writeAcquired(config.holder, 11);
    client.renews = [won(11)];
    const s = sidecar();
    await s.start();
    const old = new Date(clock.now() - 31_000);
    await utimes(state.markerPath, old, old);
    expect((await s.probe()).body).toMatch(/^health marker stale: .* not refreshed for 31s \(limit 30s\)/);
  });

  describe('restarting the Pod on a loss (restartPodOnLoss)', () => {
    const restarting = (): HelperConfig => ({ ...config, restartPodOnLoss: true });

    it('asks for the restart at the local deadline, with the marker gone, and never reacquires in place', async () => {
      await state.writeAcquired(config.holder, 11);
      client.renews = [won(11), new Error('down'), new Error('down'), new Error('down')];
      const s = sidecar(restarting());
      await s.start();
      const confirmedAt = clock.now();
      expect(await healthy()).toBe(true);
      await clock.advanceAsync(WINDOW - 1);
      await flush();
      expect(restarts).toEqual([]);
      await clock.advanceAsync(1);
      await eventually(() => restarts.length === 1);
      expect(clock.now() - confirmedAt).toBe(WINDOW);
      expect(restarts).toEqual(['local lease deadline reached']);
      expect(await healthy()).toBe(false);
      // Halted: no tick, fence or reacquisition follows.
      const calls = client.calls.length;
      await clock.advanceAsync(60_000);
      await flush();
      expect(client.calls.length).toBe(calls);
      expect(client.calls).not.toContain('acquire');
      expect(restarts.length).toBe(1);
    });

    it('asks for it at once on a conflict', async () => {
      await state.writeAcquired(config.holder, 11);
      client.renews = [won(11), other];
      const s = sidecar(restarting());
      await s.start();
      await clock.advanceAsync(10_000);
      await eventually(() => restarts.length === 1);
      expect(restarts[0]).toMatch(/^renew reports lease held by another/);
      expect(await healthy()).toBe(false);
    });

    it('takes the handoff, so that the same container started again restarts the Pod without a call', async () => {
      await state.writeAcquired(config.holder, 11);
      client.renews = [won(11)];
      const first = sidecar(restarting());
      await first.start();
      expect(first.lease.held).toBe(true);
      expect(await state.readHandoff()).toBeUndefined();
      const calls = client.calls.length;
      const again = sidecar(restarting());
      await again.start();
      expect(restarts).toEqual([
        'no lease handoff from berth-acquire (this container was restarted on its own)',
      ]);
      expect(client.calls.length).toBe(calls);
      expect((await again.probe()).status).toBe(503);
    });

    it('keeps the handoff without the option (Go: a restarted sidecar adopts it)', async () => {
      await state.writeAcquired(config.holder, 11);
      client.renews = [won(11)];
      await sidecar().start();
      expect(await state.readHandoff()).toEqual({ holder: config.holder, token: 11 });
      expect(restarts).toEqual([]);
    });
  });
});
