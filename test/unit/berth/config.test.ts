import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { berthFlags, leaseClientFor, parseBerthConfig } from '../../../src/berth/config.ts';
import { parseFlags, UsageError } from '../../../src/cli.ts';

const spec = { name: 'run', summary: '', flags: berthFlags };
const parse = (argv: string[], env: NodeJS.ProcessEnv = {}) => parseBerthConfig(parseFlags(spec, argv, env));

let dir: string;
beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), 'berth-config-'));
});
afterAll(async () => {
  await rm(dir, { recursive: true, force: true });
});

function usage(fn: () => unknown): string {
  try {
    fn();
  } catch (err) {
    if (err instanceof UsageError) return err.message;
    throw err;
  }
  throw new Error('expected a UsageError');
}

describe('berth flags', () => {
  it('defaults: no central API (controller off), no cluster id, 16 workers, a 5 s stop lead', () => {
    expect(parse([])).toEqual({
      apiServer: '',
      apiKey: '',
      apiKeyFile: '',
      caBundleFile: '',
      caBundle: undefined,
      serverName: '',
      insecureSkipTlsVerify: false,
      clusterId: '',
      useSpecHolderIdentity: false,
      maxConcurrentReconciles: 16,
      stopLeadMs: 5_000,
    });
  });

  it('--stop-lead: a duration, 0 for the Go behaviour, from BERTH_STOP_LEAD too; a bad one is one line', () => {
    expect(parse(['--stop-lead=2500ms']).stopLeadMs).toBe(2_500);
    expect(parse(['--stop-lead', '0']).stopLeadMs).toBe(0);
    expect(parse([], { BERTH_STOP_LEAD: '10s' }).stopLeadMs).toBe(10_000);
    expect(usage(() => parse(['--stop-lead=5']))).toBe(
      '--stop-lead: invalid duration "5": use a number with a unit, e.g. 30s, 1m, 500ms',
    );
    expect(usage(() => parse(['--stop-lead=-1s']))).toMatch(/^--stop-lead: invalid duration "-1s"/);
    expect(usage(() => parse(['--stop-lead=11m']))).toBe('--stop-lead: must be at most 10m0s');
  });

  it('reads every flag, and the environment (BERTH_API_KEY as the chart passes it)', () => {
    const config = parse(
      [
        '--berth-api-server',
        'https://berth.example.com',
        '--cluster-id=cluster-east',
        '--berth-server-name',
        'berth.internal',
      ],
      { BERTH_API_KEY: 'secret-token', BERTH_INSECURE_SKIP_TLS_VERIFY: 'true' },
    );
    expect(config).toMatchObject({
      apiServer: 'https://berth.example.com',
      clusterId: 'cluster-east',
      serverName: 'berth.internal',
      apiKey: 'secret-token',
      insecureSkipTlsVerify: true,
    });
  });

  it('rejects bad values with one line naming the flag, never echoing the key', () => {
    expect(usage(() => parse(['--berth-api-server', 'berth.example.com']))).toBe(
      '--berth-api-server: must be an absolute URL, e.g. https://berth.example.com',
    );
    const clearText =
      'must be an https:// URL, not http://: the bearer token would cross the network in clear text';
    expect(usage(() => parse(['--berth-api-server', 'http://berth.example.com']))).toBe(
      `--berth-api-server: ${clearText}`,
    );
    expect(usage(() => parse(['--berth-api-server', 'HTTP://127.0.0.1:8443']))).toBe(
      `--berth-api-server: ${clearText}`,
    );
    expect(usage(() => parse([], { BERTH_API_SERVER: 'http://berth.example.com' }))).toBe(
      `--berth-api-server: ${clearText}`,
    );
    expect(usage(() => parse(['--berth-api-server', 'ftp://x']))).toBe(
      '--berth-api-server: must be an https:// URL, e.g. https://berth.example.com',
    );
    expect(usage(() => parse(['--berth-api-server', 'https://u:p@x']))).toBe(
      '--berth-api-server: must not carry credentials, a query or a fragment',
    );
    const both = usage(() => parse(['--berth-api-key', 'hunter2', '--berth-api-key-file', '/k']));
    expect(both).toBe('--berth-api-key: cannot be combined with --berth-api-key-file');
    expect(both).not.toContain('hunter2');
    expect(usage(() => parse([`--cluster-id=${'x'.repeat(254)}`]))).toContain(
      '--cluster-id: must be at most 253 bytes',
    );
    expect(usage(() => parse(['--cluster-id', ' east']))).toBe(
      '--cluster-id: must not start or end with whitespace',
    );
    expect(usage(() => parse(['--berthlease-max-concurrent-reconciles', '0']))).toBe(
      '--berthlease-max-concurrent-reconciles: must be at least 1',
    );
  });

  it('reads the CA bundle file once and requires a PEM certificate in it', async () => {
    const good = join(dir, 'ca.pem');
    await writeFile(good, '-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n');
    expect(parse(['--berth-ca-bundle-file', good]).caBundle).toContain('BEGIN CERTIFICATE');
    const bad = join(dir, 'not.pem');
    await writeFile(bad, 'hello');
    expect(usage(() => parse(['--berth-ca-bundle-file', bad]))).toBe(
      `--berth-ca-bundle-file: ${bad} contains no PEM certificate`,
    );
    expect(usage(() => parse(['--berth-ca-bundle-file', join(dir, 'missing.pem')]))).toBe(
      `--berth-ca-bundle-file: cannot read ${join(dir, 'missing.pem')}: ENOENT`,
    );
  });

  it('builds the HTTP lease client from the configuration', () => {
    const client = leaseClientFor(parse(['--berth-api-server', 'https://127.0.0.1:1']));
    expect(client.timeoutMs).toBe(10_000);
    client.close();
  });
});

describe('central readiness check', () => {
  it('pings /healthz with the 5 s bound and fails when the central API does not answer', async () => {
    const { centralReadinessCheck } = await import('../../../src/berth/readiness.ts');
    const seen: Array<number | undefined> = [];
    const ok = centralReadinessCheck({
      ping: async (o) => {
        seen.push(o?.timeoutMs);
      },
    });
    await ok();
    expect(seen).toEqual([5_000]);
    const client = leaseClientFor(parse(['--berth-api-server', 'https://127.0.0.1:1']));
    await expect(centralReadinessCheck(client)()).rejects.toThrow(/ping/);
    client.close();
  });
});
