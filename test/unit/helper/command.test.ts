// `berth-operator helper ...` in-process: a bad flag, variable or combination is one line and exit code 2;
// check answers 0/1 with Go's reasons.
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { runHelper, splitPositionals } from '../../../src/helper/command.ts';

let dir: string;
beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), 'berth-helper-cmd-'));
});
afterAll(async () => {
  await rm(dir, { recursive: true, force: true });
});

async function run(
  args: string[],
  env: NodeJS.ProcessEnv = {},
): Promise<{ code: number; out: string; err: string }> {
  let out = '';
  let err = '';
  const code = await runHelper(args, {
    env,
    stdout: (t) => (out += t),
    stderr: (t) => (err += t),
    exit: (c) => {
      throw new Error(`unexpected exit ${c}`);
    },
  });
  return { code, out, err };
}

const ENV = { BERTH_LEASE_NAME: 'l', POD_NAMESPACE: 'ns', POD_UID: 'u', BERTH_TTL_SECONDS: '30' };

describe('helper command line', () => {
  it('refuses bad flags, variables and combinations with one line and exit code 2', async () => {
    const cases: Array<[string[], NodeJS.ProcessEnv, string]> = [
      [
        ['acquire', '--ttl-seconds', 'x'],
        ENV,
        'berth-operator: helper acquire: invalid value "x" for --ttl-seconds: expected a number\n',
      ],
      [['acquire', '--nope'], ENV, 'berth-operator: helper acquire: unknown flag --nope\n'],
      [['acquire', 'extra'], ENV, 'berth-operator: helper acquire: unexpected argument "extra"\n'],
      [
        ['acquire'],
        { ...ENV, BERTH_TTL_SECONDS: 'soon' },
        'berth-operator: helper acquire: BERTH_TTL_SECONDS="soon": must be an integer number of seconds\n',
      ],
      [['acquire'], ENV, 'berth-operator: helper acquire: api server URL is required\n'],
      [
        ['acquire', '--api-server=http://berth.example'],
        ENV,
        'berth-operator: helper acquire: api server URL "http://berth.example" (--api-server or BERTH_API_SERVER) must be an https:// URL, not http://: the bearer token would cross the network in clear text\n',
      ],
      [
        ['acquire', '--acquire-timeout', '5'],
        ENV,
        'berth-operator: helper acquire: --acquire-timeout: invalid duration "5": use a number with a unit, e.g. 30s, 1m, 500ms\n',
      ],
      [
        ['renew', '--mode=startup-gate', '--api-server=https://x'],
        ENV,
        'berth-operator: helper renew: renew requires mode=runtime-singleton, got startup-gate\n',
      ],
      [
        ['check', 'a', 'b'],
        {},
        'berth-operator: helper check: accepts at most 1 argument (the marker path), received 2\n',
      ],
      [
        ['sidecar'],
        {},
        'berth-operator: helper: unknown command "sidecar" (commands: acquire, renew, check)\n',
      ],
    ];
    for (const [args, env, message] of cases) {
      const { code, err } = await run(args, env);
      expect({ args, code, err }).toEqual({ args, code: 2, err: message });
    }
  });

  it('check: 0 for a present (and fresh) marker, 1 with the reason otherwise', async () => {
    const marker = join(dir, 'healthy');
    expect(await run(['check', marker])).toMatchObject({ code: 1, err: `health marker absent: ${marker}\n` });
    await writeFile(marker, 'ok\n');
    expect((await run(['check', marker])).code).toBe(0);
    expect((await run(['check', '--max-age', '1m', marker])).code).toBe(0);
    expect((await run(['check', '--state-dir', dir])).code).toBe(0);
    expect((await run(['check'], { BERTH_STATE_DIR: dir })).code).toBe(0);
    expect((await run(['check'], { BERTH_STATE_DIR: join(dir, 'none') })).err).toBe(
      `health marker absent: ${join(dir, 'none', 'healthy')}\n`,
    );
  });

  it('tells the marker argument from flag values', () => {
    expect(splitPositionals('check', ['--max-age', '30s', '/m'])).toEqual({
      flags: ['--max-age', '30s'],
      positionals: ['/m'],
    });
    expect(splitPositionals('check', ['/m', '--max-age=30s'])).toEqual({
      flags: ['--max-age=30s'],
      positionals: ['/m'],
    });
    expect(splitPositionals('check', ['--insecure-skip-tls-verify', '/m'])).toEqual({
      flags: ['--insecure-skip-tls-verify'],
      positionals: ['/m'],
    });
  });

  it('lists the subcommands, and each one its flags', async () => {
    expect((await run(['--help'])).out).toContain('acquire  Block until the lease is acquired');
    const help = (await run(['renew', '--help'])).out;
    expect(help).toContain('--probe-port <number>');
    expect(help).toContain('overrides BERTH_PROBE_PORT');
  });
});
