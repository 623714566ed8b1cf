// Signal enforcement: which processes of the shared process namespace are signalled, and SIGTERM then
// SIGKILL after the grace (Go's enforce tests), on a ManualClock with a fake process table.
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { SignalEnforcer } from '../../../src/helper/enforce.ts';
import { createHelperLog } from '../../../src/helper/log.ts';
import { isHelperProcess, matchesTarget, type ProcTable, workloadPids } from '../../../src/helper/procs.ts';
import { HelperState } from '../../../src/helper/state.ts';
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
});
