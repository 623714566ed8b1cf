// Signal enforcement: which processes of the shared process namespace are signalled, and SIGTERM then
// SIGKILL after the grace (Go's enforce tests), on a ManualClock with a fake process table.
import { spawn } from 'node:child_process';
import { chmod, copyFile, mkdtemp, rm, utimes } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { SignalEnforcer } from '../../../src/helper/enforce.ts';
import { createHelperLog } from '../../../src/helper/log.ts';
import {
  isHelperProcess,
  matchesTarget,
  osProcTable,
  type ProcTable,
  workloadPids,
} from '../../../src/helper/procs.ts';
import { evaluateMarker, HelperState } from '../../../src/helper/state.ts';
import { ManualClock } from '../../../src/kube/clock.ts';
import { eventually } from '../../helpers/eventually.ts';

interface FakeProc {
  comm: string;
  exe: string;
  cmdline: string[];
}

function table(procs: Map<number, FakeProc>): ProcTable {
  return {
    self: 40,
    parent: 39,
    list: async () => [...procs.keys()],
    comm: async (pid) => procs.get(pid)?.comm ?? '',
    exe: async (pid) => procs.get(pid)?.exe ?? '',
    cmdline: async (pid) => procs.get(pid)?.cmdline ?? [],
  };
}

const nginx = (): FakeProc => ({
  comm: 'nginx',
  exe: '/usr/sbin/nginx',
  cmdline: ['nginx', '-g', 'daemon off;'],
});

describe('workloadPids', () => {
  it('selects the target only, never PID 1, itself, its parent or a helper process', async () => {
    const procs = new Map<number, FakeProc>([
      [1, { comm: 'pause', exe: '/pause', cmdline: ['/pause'] }],
      [7, nginx()],
      [8, { comm: 'envoy', exe: '/usr/bin/envoy', cmdline: ['envoy'] }],
      [39, nginx()],
      [40, nginx()],
      [41, { comm: 'node', exe: '/usr/local/bin/node', cmdline: ['node', 'src/main.js', 'helper', 'renew'] }],
      [42, { comm: 'node', exe: '/usr/local/bin/node', cmdline: ['node', 'server.js'] }],
    ]);
    expect(await workloadPids(table(procs), 'nginx')).toEqual([7]);
    expect(await workloadPids(table(procs), 'node')).toEqual([42]);
  });

  it("matches the command name, the executable's base name, or a long name's 15-byte prefix", () => {
    expect(matchesTarget('nginx', 'nginx', '')).toBe(true);
    expect(matchesTarget('nginx', 'worker', '/usr/sbin/nginx')).toBe(true);
    expect(matchesTarget('very-long-process-name', 'very-long-proce', '')).toBe(true);
    expect(matchesTarget('nginx', 'nginx-debug', '/x/nginx-debug')).toBe(false);
    expect(isHelperProcess(['/usr/local/bin/node', '/app/src/main.js', 'helper', 'acquire'])).toBe(true);
    expect(isHelperProcess(['node', 'helper.js'])).toBe(false);
  });
});

describe('SignalEnforcer', () => {
  let dir: string;
  beforeEach(async () => {
    dir = await mkdtemp(join(tmpdir(), 'berth-enforce-'));
  });
  afterEach(async () => {
    await rm(dir, { recursive: true, force: true });
  });

  it('sends SIGTERM, then SIGKILL once the grace has passed, and starts over after a release', async () => {
    const procs = new Map<number, FakeProc>([[7, nginx()]]);
    const clock = new ManualClock();
    const sent: string[] = [];
    const enforcer = new SignalEnforcer(new HelperState(dir), 'nginx', 5_000, {
      procs: table(procs),
      kill: (pid, signal) => sent.push(`${signal} ${pid}`),
      clock,
      log: createHelperLog({ write: () => {} }),
    });
    await enforcer.hold();
    expect(sent).toEqual(['SIGTERM 7']);
    await enforcer.hold(); // a tick within the grace: nothing more
    expect(sent).toEqual(['SIGTERM 7']);
    clock.advance(4_999);
    expect(sent).toEqual(['SIGTERM 7']);
    clock.advance(1);
    await eventually(() => sent.length === 2);
    expect(sent).toEqual(['SIGTERM 7', 'SIGKILL 7']);
    procs.delete(7);
    await enforcer.hold();
    expect(clock.pending()).toBe(0);
    procs.set(9, nginx());
    await enforcer.release();
    await enforcer.hold();
    expect(sent).toEqual(['SIGTERM 7', 'SIGKILL 7', 'SIGTERM 9']);
  });
  /** What kill(2) answers for a process of another UID without CAP_KILL, or one already gone. */
  const errno = (code: 'EPERM' | 'ESRCH'): NodeJS.ErrnoException =>
    Object.assign(new Error(`kill ${code}`), { code, syscall: 'kill' });
  const markerFresh = async (state: HelperState, clock: ManualClock): Promise<boolean> =>
    (await evaluateMarker(state.markerPath, 30_000, () => clock.now())).ok;

  // Go's cross-UID test: the helper runs as the image's nonroot UID, the app as another; signals fail, and
  // the failing probe (the marker gone) is what still stops the app.
  it('keeps the marker gone when SIGTERM and SIGKILL of a process of another UID fail with EPERM', async () => {
    const target = join(dir, `bapp-${process.pid}`.slice(0, 15));
    await copyFile('/bin/sleep', target);
    await chmod(target, 0o755);
    const app = spawn(target, ['3600'], { stdio: 'ignore' });
    const exited = new Promise((resolve) => app.once('exit', resolve));
    try {
      const pid = app.pid ?? 0;
      const clock = new ManualClock();
      const state = new HelperState(dir);
      await state.markHealthy();
      const tried: string[] = [];
      const warnings: string[] = [];
      const name = target.slice(target.lastIndexOf('/') + 1);
      const enforcer = new SignalEnforcer(state, name, 5_000, {
        procs: osProcTable(),
        kill: (p, signal) => {
          tried.push(`${signal} ${p}`);
          throw errno('EPERM');
        },
        clock,
        log: createHelperLog({ write: (line) => warnings.push(line) }),
      });
      await eventually(async () => (await osProcTable().comm(pid)) === name); // exec'd
      await enforcer.hold();
      expect(tried).toEqual([`SIGTERM ${pid}`]);
      expect(await markerFresh(state, clock)).toBe(false);
      clock.advance(5_000);
      await eventually(() => tried.length === 2);
      expect(tried).toEqual([`SIGTERM ${pid}`, `SIGKILL ${pid}`]);
      expect(await markerFresh(state, clock)).toBe(false);
      await enforcer.hold(); // the next tick: nothing left to send, still unhealthy
      expect(tried.length).toBe(2);
      expect(await markerFresh(state, clock)).toBe(false);
      expect(warnings.filter((l) => /SIG(TERM|KILL) failed.*kill EPERM/.test(l)).length).toBe(2);
      // Nothing stopped the app: the probe is the fallback that must.
      expect(app.exitCode).toBeNull();
      await enforcer.release();
      expect(await markerFresh(state, clock)).toBe(true);
    } finally {
      app.kill('SIGKILL');
      await exited;
    }
  });

  it('still signals the other target processes when one refuses (EPERM)', async () => {
    const clock = new ManualClock();
    const sent: string[] = [];
    const enforcer = new SignalEnforcer(new HelperState(dir), 'nginx', 5_000, {
      procs: table(
        new Map([
          [7, nginx()],
          [8, nginx()],
        ]),
      ),
      kill: (pid, signal) => {
        if (pid === 7) throw errno('EPERM');
        sent.push(`${signal} ${pid}`);
      },
      clock,
      log: createHelperLog({ write: () => {} }),
    });
    await enforcer.hold();
    expect(sent).toEqual(['SIGTERM 8']);
    clock.advance(5_000);
    await eventually(() => sent.length === 2);
    expect(sent).toEqual(['SIGTERM 8', 'SIGKILL 8']);
  });

  it.each([
    ['permission', 'EPERM'],
    ['scanner', '/proc unreadable'],
    ['no-match', ''],
    ['exited', 'ESRCH'],
  ])('removes the marker whatever the signalling does (%s), and a renewal restores it', async (fault) => {
    const clock = new ManualClock();
    const state = new HelperState(dir);
    await state.markHealthy();
    const procs = table(new Map(fault === 'no-match' ? [] : [[7, nginx()]]));
    if (fault === 'scanner')
      procs.list = () => Promise.reject(Object.assign(new Error('/proc unreadable'), { code: 'EACCES' }));
    const enforcer = new SignalEnforcer(state, 'nginx', 5_000, {
      procs,
      kill: () => {
        throw errno(fault === 'exited' ? 'ESRCH' : 'EPERM');
      },
      clock,
      log: createHelperLog({ write: () => {} }),
    });
    const held = enforcer.hold();
    if (fault === 'scanner') await expect(held).rejects.toThrow('/proc unreadable');
    else await held;
    expect(await markerFresh(state, clock)).toBe(false);
    await enforcer.release();
    const stale = new Date(clock.now() - 3_600_000);
    await utimes(state.markerPath, stale, stale);
    expect(await markerFresh(state, clock)).toBe(false);
    await enforcer.release();
    expect(await markerFresh(state, clock)).toBe(true);
  });
});
