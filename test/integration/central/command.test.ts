// `berth-operator central`: flag parsing and validation, and the real process (HTTPS, SIGHUP reload of
// the key file, clean exit on SIGTERM).
import { type ChildProcess, spawn } from 'node:child_process';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type Authority, createAuthority, type KeyPair } from '../../../hack/controlplane/pki.ts';
import { HttpLeaseClient } from '../../../src/berth/leaseclient.ts';
import { sha256Hex } from '../../../src/central/auth.ts';
import { centralCommand, parseCentralFlags, runCentral } from '../../../src/central/command.ts';
import type { CentralServer } from '../../../src/central/server.ts';
import { parseFlags, UsageError } from '../../../src/cli.ts';
import { createLogger } from '../../../src/observability/logger.ts';
import { eventually } from '../../helpers/eventually.ts';

const NODE = join(process.cwd(), 'node_modules/.bin/node');
const MAIN = join(process.cwd(), 'src/main.ts');
let dir: string;
let ca: Authority;
let serving: KeyPair;
let certFile: string;
let keyFile: string;
const children: ChildProcess[] = [];

beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), 'berth-central-cmd-'));
  ca = await createAuthority('berth-central-test-ca');
  serving = await ca.serving(['127.0.0.1']);
  certFile = join(dir, 'tls.crt');
  keyFile = join(dir, 'tls.key');
  await writeFile(certFile, serving.cert);
  await writeFile(keyFile, serving.key, { mode: 0o600 });
});
afterAll(async () => {
  for (const c of children) c.kill('SIGKILL');
  await rm(dir, { recursive: true, force: true });
});

const parse = (argv: string[]) => parseCentralFlags(parseFlags(centralCommand, argv));
const tls = ['--tls-cert-file', '/c', '--tls-key-file', '/k'];

describe('central flags', () => {
  it('has the Go server defaults', () => {
    expect(parse(tls)).toEqual({
      'listen-addr': ':8443',
      'tls-cert-file': '/c',
      'tls-key-file': '/k',
      'auth-mode': '',
      'api-keys-file': '',
      'oidc-issuer-url': '',
      'oidc-audience': '',
      'oidc-jwks-url': '',
      'oidc-username-claim': 'sub',
      'oidc-tenant-claim': 'sub',
      'oidc-required-claim': [],
      'metrics-addr': ':8080',
      'log-level': 'info',
      'log-format': 'json',
      // Unset, as in the Go server: the legacy rule picks mem, with a deprecation warning.
      'store-backend': 'mem',
      storeBackendWarning:
        '--store-backend is not set: using mem because --coordination-namespace is empty; this inference is deprecated, set --store-backend mem',
      'sql-driver': '',
      'sql-dsn': '',
      'sql-dsn-file': '',
      'sql-migrate': 'auto',
      'sql-max-conns': undefined,
      'sql-timeout': 5_000,
      'coordination-kubeconfig': '',
      'coordination-namespace': '',
      'coordination-qps': 500,
      'coordination-burst': 1_000,
    });
    expect(parse([...tls, '--metrics-addr', ''])['metrics-addr']).toBe('');
  });

  const bad: Array<[string[], string]> = [
    [[], 'central: --tls-cert-file is required (the lease API is served over HTTPS only)'],
    [
      ['--tls-cert-file', '/c'],
      'central: --tls-key-file is required (the lease API is served over HTTPS only)',
    ],
    [[...tls, '--auth-mode', 'ldap'], 'central: --auth-mode must be one of: none, static-keys, oidc'],
    [
      [...tls, '--auth-mode', 'static-keys'],
      'central: --api-keys-file is required with --auth-mode static-keys',
    ],
    [
      [...tls, '--api-keys-file', '/keys'],
      'central: --api-keys-file is only used with --auth-mode static-keys (the auth mode is none)',
    ],
    [[...tls, '--listen-addr', 'nonsense'], 'central: --listen-addr want [host]:port, e.g. ":8443"'],
    [[...tls, '--listen-addr', ''], 'central: --listen-addr want [host]:port, e.g. ":8443"'],
    [[...tls, '--metrics-addr', 'x:y'], 'central: --metrics-addr want [host]:port or empty'],
    [[...tls, '--log-level', 'loud'], 'central: --log-level'],
    [[...tls, '--store-backend', 'etcd'], 'central: --store-backend must be one of: mem, k8s, sql'],
    [
      [...tls, '--sql-dsn', 'postgres://db/x'],
      'central: --sql-dsn is a sql store flag, but --store-backend is mem',
    ],
    [
      [...tls, '--store-backend', 'mem', '--sql-migrate', 'off'],
      'central: --sql-migrate is a sql store flag, but --store-backend is mem',
    ],
    [
      [...tls, '--store-backend', 'mem', '--sql-timeout', '1s'],
      'central: --sql-timeout is a sql store flag, but --store-backend is mem',
    ],
    [
      [...tls, '--store-backend', 'mem', '--sql-driver', 'sqlite'],
      'central: --sql-driver is a sql store flag, but --store-backend is mem',
    ],
    [
      [...tls, '--store-backend', 'mem', '--sql-max-conns', '10'],
      'central: --sql-max-conns is a sql store flag, but --store-backend is mem',
    ],
    [
      [...tls, '--coordination-qps', '5'],
      'central: --coordination-qps is a k8s store flag, but --store-backend is mem',
    ],
    [
      [
        ...tls,
        '--store-backend',
        'sql',
        '--sql-driver',
        'mysql',
        '--sql-dsn',
        'x',
        '--coordination-namespace',
        'leases',
      ],
      'central: --coordination-namespace is a k8s store flag, but --store-backend is sql',
    ],
    [
      [...tls, '--store-backend', 'k8s', '--coordination-namespace', 'leases', '--sql-dsn-file', '/dsn'],
      'central: --sql-dsn-file is a sql store flag, but --store-backend is k8s',
    ],
    [
      [...tls, '--store-backend', 'sql', '--sql-dsn', 'x', '--api-keys-file', '/keys'],
      'central: --sql-driver is required with --store-backend sql (postgres, mysql, sqlite)',
    ],
    [
      [...tls, '--store-backend', 'sql', '--sql-driver', 'oracle', '--sql-dsn', 'x'],
      'central: --sql-driver must be one of: postgres, mysql, sqlite',
    ],
    [
      [...tls, '--store-backend', 'sql', '--sql-driver', 'postgres', '--api-keys-file', '/keys'],
      'central: --sql-dsn or --sql-dsn-file is required with --store-backend sql',
    ],
    [
      [...tls, '--store-backend', 'sql', '--sql-driver', 'mysql', '--sql-dsn', 'x', '--sql-dsn-file', '/dsn'],
      'central: --sql-dsn and --sql-dsn-file are mutually exclusive',
    ],
    [
      [...tls, '--store-backend', 'sql', '--sql-driver', 'sqlite', '--sql-dsn', 'x'],
      'central: --api-keys-file is required: the auth mode defaults to static-keys with --store-backend sql',
    ],
    [
      [...tls, '--store-backend', 'sql', '--sql-driver', 'mysql', '--sql-dsn', 'x', '--sql-migrate', 'maybe'],
      'central: --sql-migrate must be one of: auto, off',
    ],
    [
      [...tls, '--store-backend', 'sql', '--sql-driver', 'mysql', '--sql-max-conns', '0'],
      'central: --sql-max-conns must be at least 1',
    ],
    [
      [...tls, '--store-backend', 'sql', '--sql-driver', 'sqlite', '--sql-dsn', 'x', '--sql-max-conns', '4'],
      'central: --sql-max-conns must be 1 with --sql-driver sqlite: SQLite has one writer and the store one connection',
    ],
    [
      [...tls, '--store-backend', 'postgres', '--sql-driver', 'mysql', '--sql-dsn', 'x'],
      'central: --sql-driver mysql contradicts --store-backend postgres (use --store-backend sql)',
    ],
    [
      [...tls, '--store-backend', 'postgres', '--sql-dsn', 'x', '--coordination-namespace', 'leases'],
      'central: --coordination-namespace is a k8s store flag, but --store-backend is sql',
    ],
    [
      [...tls, '--store-backend', 'k8s', '--api-keys-file', '/keys'],
      'central: --coordination-namespace is required with --store-backend k8s',
    ],
    [
      [...tls, '--store-backend', 'k8s', '--coordination-namespace', 'Leases_1'],
      'central: --coordination-namespace must be a namespace name (RFC 1123 label)',
    ],
    [[...tls, '--coordination-qps', '-1'], 'central: --coordination-qps must be at least 0'],
    [[...tls, '--coordination-burst', '0'], 'central: --coordination-burst must be at least 1'],
  ];
  it.each(bad)('rejects %j', (argv, message) => {
    let thrown: unknown;
    try {
      parse(argv);
    } catch (err) {
      thrown = err;
    }
    expect(thrown).toBeInstanceOf(UsageError);
    expect((thrown as Error).message.startsWith(message)).toBe(true);
  });

  it('prints a bad flag as one line and returns exit code 2', async () => {
    let err = '';
    const code = await runCentral(parseFlags(centralCommand, []), {
      stderr: { write: (s: string) => (err += s) } as unknown as NodeJS.WritableStream,
    });
    expect(code).toBe(2);
    expect(err).toBe(
      'berth-operator: central: --tls-cert-file is required (the lease API is served over HTTPS only)\n',
    );
  });

  it('accepts each backend with its own flags, defaulting the auth mode per backend', () => {
    expect(
      parse([
        ...tls,
        '--store-backend=sql',
        '--sql-driver=sqlite',
        '--sql-dsn=/var/lib/berth/leases.db',
        '--sql-max-conns=1',
        '--api-keys-file=/keys',
      ]),
    ).toMatchObject({
      'store-backend': 'sql',
      'sql-driver': 'sqlite',
      'sql-max-conns': 1,
      'auth-mode': '',
      storeBackendWarning: undefined,
    });
    expect(
      parse([...tls, '--store-backend', 'postgres', '--sql-dsn-file', '/dsn', '--auth-mode', 'none']),
    ).toMatchObject({
      'store-backend': 'sql',
      'sql-driver': 'postgres',
      'sql-dsn-file': '/dsn',
      storeBackendWarning:
        '--store-backend postgres is deprecated: use --store-backend sql --sql-driver postgres',
    });
    expect(parse([...tls, '--coordination-namespace=leases', '--api-keys-file=/keys'])).toMatchObject({
      'store-backend': 'k8s',
      storeBackendWarning:
        '--store-backend is not set: using k8s because --coordination-namespace is set; this inference is deprecated, set --store-backend k8s',
    });
    expect(
      parse([
        ...tls,
        '--store-backend=k8s',
        '--coordination-namespace=berth-leases',
        '--coordination-qps=0',
        '--api-keys-file=/keys',
      ]),
    ).toMatchObject({ 'store-backend': 'k8s', 'coordination-qps': 0, 'auth-mode': '' });
    // A backend flag given at its default value is harmless.
    expect(parse([...tls, '--sql-migrate', 'auto'])['store-backend']).toBe('mem');
  });

  it('prints mixed backend flags as one line and returns exit code 2', async () => {
    let err = '';
    const code = await runCentral(
      parseFlags(centralCommand, [
        ...tls,
        '--store-backend',
        'k8s',
        '--coordination-namespace',
        'x',
        '--sql-dsn',
        'postgres://u:pw@db/x',
      ]),
      { stderr: { write: (s: string) => (err += s) } as unknown as NodeJS.WritableStream },
    );
    expect(code).toBe(2);
    expect(err).toBe('berth-operator: central: --sql-dsn is a sql store flag, but --store-backend is k8s\n');
  });

  it('fails to start with an unreadable certificate', async () => {
    await expect(
      runCentral(
        parseFlags(centralCommand, ['--tls-cert-file', join(dir, 'nope'), '--tls-key-file', keyFile]),
      ),
    ).rejects.toThrow(`central: read --tls-cert-file ${join(dir, 'nope')}: ENOENT`);
  });
});

describe('runCentral', () => {
  it('serves HTTPS until stopped and reloads the key file on SIGHUP', async () => {
    const keys = join(dir, 'keys');
    await writeFile(keys, `cluster-east:${sha256Hex('first')}\n`);
    const stop = Promise.withResolvers<void>();
    const started = Promise.withResolvers<CentralServer>();
    const running = runCentral(
      parseFlags(centralCommand, [
        '--listen-addr=127.0.0.1:0',
        '--metrics-addr=',
        `--tls-cert-file=${certFile}`,
        `--tls-key-file=${keyFile}`,
        '--auth-mode=static-keys',
        `--api-keys-file=${keys}`,
      ]),
      { logger: createLogger({ level: 'silent' }), until: stop.promise, onStarted: started.resolve },
    );
    const server = await started.promise;
    expect(server.url).toMatch(/^https:\/\/127\.0\.0\.1:\d+$/);
    const first = new HttpLeaseClient({ baseUrl: server.url, caBundle: ca.cert, apiKey: 'first' });
    const second = new HttpLeaseClient({ baseUrl: server.url, caBundle: ca.cert, apiKey: 'second' });
    try {
      expect(await first.acquire('pipeline', 'ingest', 'cluster-east', 30)).toMatchObject({ acquired: true });
      await writeFile(keys, `cluster-east:${sha256Hex('second')}\n`);
      process.emit('SIGHUP', 'SIGHUP');
      await eventually(async () => (await second.acquire('pipeline', 'ingest', 'cluster-east', 30)).acquired);
      await expect(first.acquire('pipeline', 'ingest', 'cluster-east', 30)).rejects.toMatchObject({
        status: 401,
      });
    } finally {
      first.close();
      second.close();
      stop.resolve();
    }
    expect(await running).toBe(0);
    expect(process.listenerCount('SIGHUP')).toBe(0);
  });
});

describe('berth-operator central (process)', () => {
  it('lists its flags with defaults', async () => {
    const child = spawn(NODE, [MAIN, 'central', '--help'], { stdio: ['ignore', 'pipe', 'pipe'] });
    children.push(child);
    let out = '';
    child.stdout?.on('data', (d: Buffer) => (out += d.toString()));
    const code = await new Promise((resolve) => child.on('exit', resolve));
    expect(code).toBe(0);
    for (const text of [
      '--listen-addr <string>',
      '(default: :8443)',
      '--tls-cert-file',
      '--tls-key-file',
      '--auth-mode',
      '--api-keys-file',
      '--oidc-issuer-url <string>',
      '--oidc-required-claim <string>',
      '(repeatable)',
      '--log-format <string>',
      '(default: json)',
      '--metrics-addr',
      '(default: :8080)',
      '--store-backend <string>',
      '--sql-driver <string>',
      '--sql-dsn-file',
      '--sql-migrate <string>',
      '(default: auto)',
      '--coordination-kubeconfig',
      '--coordination-qps <number>',
      '(default: 500)',
      '--coordination-burst <number>',
      '(default: 1000)',
    ])
      expect(out).toContain(text);
  });

  it('serves until SIGTERM and exits 0', async () => {
    const child = spawn(
      NODE,
      [
        MAIN,
        'central',
        '--listen-addr',
        '127.0.0.1:0',
        '--metrics-addr',
        '127.0.0.1:0',
        '--tls-cert-file',
        certFile,
        '--tls-key-file',
        keyFile,
      ],
      { stdio: ['ignore', 'pipe', 'pipe'] },
    );
    children.push(child);
    let out = '';
    child.stdout?.on('data', (d: Buffer) => (out += d.toString()));
    const exit = new Promise<number | null>((resolve) => child.on('exit', (code) => resolve(code)));
    const announced = await eventually(
      (): { url: string; metricsUrl: string } | undefined => {
        const line = out.split('\n').find((l) => l.includes('central lease API serving'));
        return line ? (JSON.parse(line) as { url: string; metricsUrl: string }) : undefined;
      },
      { timeoutMs: 15_000 },
    );
    expect(out).toContain('authentication is disabled');
    const client = new HttpLeaseClient({ baseUrl: announced!.url, caBundle: ca.cert });
    try {
      await client.ping();
      expect(await client.acquire('pipeline', 'ingest', 'east', 30)).toMatchObject({
        acquired: true,
        fencingToken: 1,
      });
    } finally {
      client.close();
    }
    child.kill('SIGTERM');
    expect(await exit).toBe(0);
    expect(out).toContain('central lease API stopped');
  });
});
