// `berth-operator oidc-broker` as a process (src/main.ts), as the chart's sidecar runs it, against a local
// HTTPS issuer with real keys (test/helpers/oidc-issuer.ts), trusted through NODE_EXTRA_CA_CERTS: a bad
// flag or secret file is one line and exit 2, a failed discovery exit 1 with no token file; the token
// rotates before expiry while a reader never sees a partial file; an outage keeps the file; SIGTERM exits
// 0; the client secret never reaches the output. Real time, short durations, no fixed sleeps.
import { type ChildProcess, spawn } from 'node:child_process';
import { mkdir, mkdtemp, readdir, readFile, rm, stat, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { eventually } from '../../helpers/eventually.ts';
import { LocalIssuer } from '../../helpers/oidc-issuer.ts';

const NODE = join(process.cwd(), 'node_modules/.bin/node');
const MAIN = join(process.cwd(), 'src/main.ts');
const SECRET = 'process-secret-9d2e';
let dir: string;
let caFile: string;
let issuer: LocalIssuer;

beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), 'berth-oidc-broker-proc-'));
  await writeFile(join(dir, 'secret'), `${SECRET}\n`, { mode: 0o600 });
  await writeFile(join(dir, 'empty-secret'), '\n', { mode: 0o600 });
  issuer = await new LocalIssuer().start();
  issuer.clients.set('berth-operator', SECRET);
  caFile = join(dir, 'ca.crt');
  await writeFile(caFile, issuer.ca);
});
afterAll(async () => {
  await issuer.stop();
  await rm(dir, { recursive: true, force: true });
});

interface Run {
  child: ChildProcess;
  stdout(): string;
  stderr(): string;
  lines(): Array<Record<string, unknown>>;
  exit: Promise<number | null>;
}
const children: ChildProcess[] = [];
afterEach(() => {
  for (const c of children.splice(0)) if (c.exitCode === null) c.kill('SIGKILL');
  issuer.mode = 'up';
  issuer.expiresIn = 3600;
  issuer.clientAuth = new Set(['basic', 'post']);
  issuer.releaseStalled();
  issuer.requests.length = 0;
  issuer.issued.length = 0;
});

function broker(args: string[], node: { args?: string[]; env?: Record<string, string> } = {}): Run {
  const child = spawn(NODE, [...(node.args ?? []), MAIN, 'oidc-broker', ...args], {
    env: { ...process.env, NODE_EXTRA_CA_CERTS: caFile, ...node.env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  children.push(child);
  let out = '';
  let err = '';
  child.stdout!.on('data', (d: Buffer) => {
    out += d.toString();
  });
  child.stderr!.on('data', (d: Buffer) => {
    err += d.toString();
  });
  const exit = new Promise<number | null>((resolve) => child.on('exit', (code) => resolve(code)));
  return {
    child,
    stdout: () => out,
    stderr: () => err,
    lines: () =>
      out
        .split('\n')
        .filter((l) => l.startsWith('{'))
        .map((l) => JSON.parse(l) as Record<string, unknown>),
    exit,
  };
}

const required = (output: string) => [`--output=${output}`, '--oidc-client-id=berth-operator'];

describe('oidc-broker start-up failures', () => {
  it.each([
    ['an unknown flag', ['--bogus'], 2, 'berth-operator: oidc-broker: unknown flag --bogus'],
    [
      'a bad duration',
      ['--refresh-skew=soon'],
      2,
      'berth-operator: oidc-broker: --refresh-skew: invalid duration "soon": use a number with a unit, e.g. 30s, 1m, 500ms',
    ],
    [
      'no client id',
      ['--output=/x', '--oidc-token-url=https://i/t', '--oidc-client-secret=s'],
      2,
      'berth-operator: oidc-broker: --oidc-client-id is required',
    ],
    [
      'a retry cap below the minimum',
      ['--max-retry-interval=1s'],
      2,
      'berth-operator: oidc-broker: --max-retry-interval must be at least --min-refresh-interval',
    ],
    [
      'an http issuer',
      ['--oidc-issuer-url=http://login.example.com'],
      2,
      'berth-operator: oidc-broker: --oidc-issuer-url "http://login.example.com" must be https (http only on localhost)',
    ],
  ])('%s: one line, exit 2', async (_what, extra, code, line) => {
    const base =
      extra[0] === '--output=/x'
        ? []
        : [
            ...required(join(dir, 'never')),
            '--oidc-token-url=https://127.0.0.1:1/t',
            '--oidc-client-secret=s',
          ];
    const run = broker([...base, ...extra]);
    expect(await run.exit).toBe(code);
    expect(run.stderr()).toBe(`${line}\n`);
  });

  it('a missing or empty secret file: one line, exit 2, nothing fetched or written', async () => {
    const output = join(dir, 'secret-fail', 'token');
    for (const [file, line] of [
      [join(dir, 'missing'), `read client secret file "${join(dir, 'missing')}": ENOENT`],
      [join(dir, 'empty-secret'), `client secret file "${join(dir, 'empty-secret')}" is empty`],
    ] as const) {
      const run = broker([
        ...required(output),
        `--oidc-issuer-url=${issuer.url}`,
        `--oidc-client-secret-file=${file}`,
      ]);
      expect(await run.exit).toBe(2);
      expect(run.stderr().split('\n')).toHaveLength(2);
      expect(run.stderr()).toContain(line);
    }
    expect(issuer.requests).toEqual([]);
  });

  it('a failed discovery: one line naming the URL, exit 1, no token file', async () => {
    await mkdir(join(dir, 'discovery-fail'));
    const output = join(dir, 'discovery-fail', 'token');
    const before = issuer.discoveryFetches;
    issuer.documentIssuer = 'https://someone-else.example.com';
    try {
      const run = broker([
        ...required(output),
        `--oidc-issuer-url=${issuer.url}`,
        `--oidc-client-secret-file=${join(dir, 'secret')}`,
      ]);
      expect(await run.exit).toBe(1);
      expect(run.stderr()).toBe(
        `berth-operator: oidc-broker: resolve token endpoint: discover ${issuer.url}/.well-known/openid-configuration: document names issuer "https://someone-else.example.com", want "${issuer.url}"\n`,
      );
    } finally {
      issuer.documentIssuer = undefined;
    }
    expect(issuer.discoveryFetches).toBe(before + 1);
    expect(await readdir(join(dir, 'discovery-fail'))).toEqual([]);
  });
});

describe('oidc-broker running', () => {
  it('discovers, rotates the token before expiry by the skew, atomically (0600), and exits 0 on SIGTERM', async () => {
    await mkdir(join(dir, 'rotate'));
    const output = join(dir, 'rotate', 'token');
    issuer.expiresIn = 3;
    const run = broker([
      ...required(output),
      `--oidc-issuer-url=${issuer.url}`,
      `--oidc-client-secret-file=${join(dir, 'secret')}`,
      '--oidc-audience=berth-api',
      '--refresh-skew=2s',
      '--min-refresh-interval=100ms',
    ]);
    // Read the file as fast as possible while it rotates: every read is a whole token the issuer issued.
    const reads = new Set<string>();
    await eventually(
      async () => {
        try {
          reads.add(await readFile(output, 'utf8'));
        } catch (err) {
          if ((err as NodeJS.ErrnoException).code !== 'ENOENT') throw err;
        }
        return issuer.issued.length >= 3 && reads.size >= 3;
      },
      { timeoutMs: 20_000, intervalMs: 1 },
    );
    const issued = issuer.issued.map((t) => t.accessToken);
    for (const read of reads) expect(issued).toContain(read);
    // Checked as of their issue: a 3 s token may have expired by now on a busy machine.
    for (const { accessToken, at } of issuer.issued.slice(0, 3))
      expect((await issuer.verify(accessToken, 'berth-api', at)).sub).toBe('berth-operator');
    // Each refresh came 1 s (expires_in 3 s - skew 2 s) after the previous answer, before its expiry.
    for (let i = 1; i < 3; i++) {
      const gap = issuer.requests[i]!.at - issuer.issued[i - 1]!.at;
      expect(gap).toBeGreaterThanOrEqual(950);
      expect(gap).toBeLessThan(3000);
    }
    expect((await stat(output)).mode & 0o777).toBe(0o600);

    run.child.kill('SIGTERM');
    expect(await run.exit).toBe(0);
    expect(run.lines().at(-1)).toMatchObject({ msg: 'token broker stopped' });
    expect(run.lines()[0]).toMatchObject({
      msg: 'token broker starting',
      token_url: issuer.tokenEndpoint,
      refresh_skew: '2s',
      min_refresh: '100ms',
      fetch_timeout: '30s',
      max_retry_interval: '5m0s',
    });
    expect(await readdir(join(dir, 'rotate'))).toEqual(['token']);
    expect(run.stdout() + run.stderr()).not.toContain(SECRET);
    for (const token of issued) expect(run.stdout()).not.toContain(token);
  });

  it('with an explicit token URL and a literal secret: no discovery, a warning, and the secret never in the log', async () => {
    await mkdir(join(dir, 'literal'));
    const output = join(dir, 'literal', 'token');
    const before = issuer.discoveryFetches;
    // Only client_secret_post: the first (Basic) attempt fails and its answer echoes nothing of ours.
    issuer.clientAuth = new Set(['post']);
    const run = broker([
      ...required(output),
      `--oidc-token-url=${issuer.tokenEndpoint}`,
      `--oidc-client-secret=${SECRET}`,
    ]);
    await eventually(() => run.lines().some((l) => l.msg === 'token refreshed'));
    expect(await readFile(output, 'utf8')).toBe(issuer.issued[0]!.accessToken);
    expect(issuer.discoveryFetches).toBe(before);
    expect(run.lines()[0]).toMatchObject({
      level: 'warn',
      msg: expect.stringContaining('prefer --oidc-client-secret-file'),
    });
    run.child.kill('SIGTERM');
    expect(await run.exit).toBe(0);
    expect(run.stdout() + run.stderr()).not.toContain(SECRET);
  });

  it('keeps the last token through an outage longer than its life, backing off to the cap, and recovers', async () => {
    await mkdir(join(dir, 'outage'));
    const output = join(dir, 'outage', 'token');
    issuer.expiresIn = 1;
    const run = broker([
      ...required(output),
      `--oidc-token-url=${issuer.tokenEndpoint}`,
      `--oidc-client-secret-file=${join(dir, 'secret')}`,
      '--refresh-skew=0s',
      '--min-refresh-interval=50ms',
      '--max-retry-interval=200ms',
    ]);
    await eventually(() => run.lines().some((l) => l.msg === 'token refreshed'));
    issuer.mode = 'down';
    const good = await readFile(output, 'utf8');
    const failures = () => run.lines().filter((l) => l.level === 'error');
    // 50 + 100 + 200 * 6 ms of failures and more: well past the token's 1 s.
    await eventually(() => failures().length >= 8, { timeoutMs: 20_000 });
    const outageFrom = issuer.requests.find((r) => r.status === 503)!.at;
    await eventually(() => Date.now() - outageFrom > 1500, { timeoutMs: 20_000 });
    expect(await readFile(output, 'utf8')).toBe(good);
    expect(
      failures()
        .map((f) => f.retry_in)
        .slice(0, 6),
    ).toEqual(['50ms', '100ms', '200ms', '200ms', '200ms', '200ms']);
    issuer.mode = 'up';
    await eventually(async () => (await readFile(output, 'utf8')) !== good, { timeoutMs: 20_000 });
    expect(await readFile(output, 'utf8')).toBe(issuer.issued.at(-1)!.accessToken);
    run.child.kill('SIGTERM');
    expect(await run.exit).toBe(0);
  });

  it('never resolves @kubernetes/client-node, zod, pino or jose', async () => {
    await mkdir(join(dir, 'footprint'));
    const output = join(dir, 'footprint', 'token');
    const resolutions = join(dir, 'footprint-resolved.txt');
    const run = broker(
      [
        ...required(output),
        `--oidc-issuer-url=${issuer.url}`,
        `--oidc-client-secret-file=${join(dir, 'secret')}`,
      ],
      {
        args: ['--import', join(process.cwd(), 'test/fixtures/helper/record-resolutions.mjs')],
        env: { BERTH_RECORD_RESOLUTIONS: resolutions },
      },
    );
    await eventually(() => run.lines().some((l) => l.msg === 'token refreshed'));
    run.child.kill('SIGTERM');
    expect(await run.exit).toBe(0);
    const resolved = (await readFile(resolutions, 'utf8')).split('\n');
    expect(resolved.some((u) => u.endsWith('/src/oidc-broker/command.ts'))).toBe(true);
    for (const heavy of [
      '@kubernetes/client-node',
      '/zod/',
      '/pino/',
      '/jose/',
      '/src/commands.ts',
      '/src/run.ts',
    ])
      expect(
        resolved.filter((u) => u.includes(heavy)),
        heavy,
      ).toEqual([]);
  });
});
