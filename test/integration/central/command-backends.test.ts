// `berth-operator central --store-backend sql|k8s`: the command opens the store its flags describe
// (sql on each --sql-driver), serves leases from it over HTTPS, keeps them across a restart, and refuses
// to start on a bad schema; the deprecated `--store-backend postgres` still works, with a warning.
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type Authority, createAuthority, type KeyPair } from '../../../hack/controlplane/pki.ts';
import { HttpLeaseClient } from '../../../src/berth/leaseclient.ts';
import { centralCommand, runCentral } from '../../../src/central/command.ts';
import { leaseObjectName } from '../../../src/central/k8slease.ts';
import type { CentralServer } from '../../../src/central/server.ts';
import { SQL_DRIVERS } from '../../../src/central/sql/dialect.ts';
import { dsnPassword } from '../../../src/central/sql/dsn.ts';
import { parseFlags } from '../../../src/cli.ts';
import { createLogger } from '../../../src/observability/logger.ts';
import { TestCluster } from '../../helpers/cluster.ts';
import { logSink } from './http-client.ts';
import { sqlTestDatabase } from './sql-databases.ts';

let dir: string;
let ca: Authority;
let serving: KeyPair;
let tls: string[];
beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), 'berth-central-backends-'));
  ca = await createAuthority('berth-central-test-ca');
  serving = await ca.serving(['127.0.0.1']);
  await writeFile(join(dir, 'tls.crt'), serving.cert);
  await writeFile(join(dir, 'tls.key'), serving.key, { mode: 0o600 });
  tls = [
    `--tls-cert-file=${join(dir, 'tls.crt')}`,
    `--tls-key-file=${join(dir, 'tls.key')}`,
    '--listen-addr=127.0.0.1:0',
    '--metrics-addr=',
    '--auth-mode=none',
  ];
});
afterAll(async () => {
  await rm(dir, { recursive: true, force: true });
});

/** Runs the command with `argv`, calls `fn` with a client of the running server, then stops it. */
async function withCentral(
  argv: string[],
  fn: (client: HttpLeaseClient, server: CentralServer) => Promise<void>,
  logs = logSink(),
): Promise<void> {
  const stop = Promise.withResolvers<void>();
  const started = Promise.withResolvers<CentralServer>();
  const running = runCentral(parseFlags(centralCommand, [...tls, ...argv]), {
    logger: createLogger({ level: 'info', destination: logs }),
    until: stop.promise,
    onStarted: started.resolve,
  });
  const server = await Promise.race([
    started.promise,
    running.then(() => Promise.reject(new Error('exited'))),
  ]);
  const client = new HttpLeaseClient({ baseUrl: server.url, caBundle: ca.cert });
  try {
    await fn(client, server);
  } finally {
    client.close();
    stop.resolve();
  }
  expect(await running).toBe(0);
}

for (const driver of SQL_DRIVERS) {
  const result = await sqlTestDatabase(driver, `central command on ${driver}`);
  if (!result.ok) {
    describe.skip(`central --store-backend sql --sql-driver ${driver}: ${result.reason}`, () => {
      it(`needs ${driver}`, () => {});
    });
    continue;
  }
  const db = result.db;
  afterAll(() => db.stop());

  describe(`central --store-backend sql --sql-driver ${driver}`, () => {
    it('serves leases from the database and keeps them (tokens too) across a restart with --sql-migrate off', async () => {
      const d = await db.create();
      try {
        const dsnFile = join(dir, `dsn-${driver}`);
        await writeFile(dsnFile, `${d.dsn}\n`, { mode: 0o600 });
        const logs = logSink();
        const argv = ['--store-backend=sql', `--sql-driver=${driver}`, `--sql-dsn-file=${dsnFile}`];
        await withCentral(
          argv,
          async (client, server) => {
            expect(server.store.backend).toBe('sql');
            const a = await client.acquire('pipeline', 'ingest', 'cluster-east', 30);
            expect(a).toMatchObject({ acquired: true, fencingToken: 1 });
            await client.release('pipeline', 'ingest', 'cluster-east', 1);
            expect(await client.acquire('pipeline', 'ingest', 'cluster-east', 30)).toMatchObject({
              fencingToken: 2,
            });
          },
          logs,
        );
        expect(logs.text()).toContain('sql lease store ready');
        expect(logs.text()).not.toContain('deprecated');
        const password = dsnPassword(driver, d.dsn);
        if (password !== undefined) expect(logs.text()).not.toContain(password);
        await withCentral([...argv, '--sql-migrate=off'], async (client) => {
          expect(await client.acquire('pipeline', 'ingest', 'cluster-west', 30)).toMatchObject({
            acquired: false,
            holder: 'cluster-east',
            fencingToken: 2,
          });
        });
        const rows = await d.exec('SELECT holder, fencing_token, version FROM berth_leases');
        expect(rows.map((r) => [r.holder, Number(r.fencing_token), Number(r.version)])).toEqual([
          ['cluster-east', 2, 3],
        ]);
      } finally {
        await d.drop();
      }
    });

    it('refuses to start with --sql-migrate off on a database without the table', async () => {
      const d = await db.create();
      try {
        const err = await runCentral(
          parseFlags(centralCommand, [
            ...tls,
            '--store-backend=sql',
            `--sql-driver=${driver}`,
            `--sql-dsn=${d.dsn}`,
            '--sql-migrate=off',
          ]),
          { logger: createLogger({ level: 'silent' }) },
        ).catch((e: Error) => e);
        expect(err).toBeInstanceOf(Error);
        expect((err as Error).message).toMatch(
          new RegExp(
            `^${driver} store \\S+: table berth_leases does not match the lease schema: table berth_leases does not exist \\(--sql-migrate off\\)$`,
          ),
        );
      } finally {
        await d.drop();
      }
    });

    if (driver === 'postgres')
      it('still serves --store-backend postgres (deprecated), logging the replacement once', async () => {
        const d = await db.create();
        try {
          const logs = logSink();
          await withCentral(
            ['--store-backend=postgres', `--sql-dsn=${d.dsn}`],
            async (client, server) => {
              expect(server.store.backend).toBe('sql');
              expect(await client.acquire('pipeline', 'ingest', 'cluster-east', 30)).toMatchObject({
                acquired: true,
              });
            },
            logs,
          );
          const warnings = logs
            .text()
            .split('\n')
            .filter((l) => l.includes('deprecated'));
          expect(warnings).toHaveLength(1);
          expect(warnings[0]).toContain(
            '--store-backend postgres is deprecated: use --store-backend sql --sql-driver postgres',
          );
        } finally {
          await d.drop();
        }
      });
  });
}

describe('central --store-backend k8s', () => {
  it('serves leases from coordination.k8s.io Leases of the cluster in --coordination-kubeconfig', async () => {
    const t = await TestCluster.shared();
    try {
      const namespace = await t.namespace('berth-leases');
      const argv = [
        '--store-backend=k8s',
        `--coordination-kubeconfig=${t.kubeconfigPath}`,
        `--coordination-namespace=${namespace}`,
      ];
      await withCentral(argv, async (client, server) => {
        expect(server.store.backend).toBe('k8s');
        expect(await client.acquire('pipeline', 'ingest', 'cluster-east', 30)).toMatchObject({
          acquired: true,
          fencingToken: 1,
        });
      });
      const got = await t.kubectl([
        'get',
        'lease',
        '-n',
        namespace,
        leaseObjectName({ namespace: 'pipeline', name: 'ingest' }),
        '-o',
        'jsonpath={.spec.holderIdentity}',
      ]);
      expect(got.stdout).toBe('cluster-east');
      await withCentral(argv, async (client) => {
        expect(await client.acquire('pipeline', 'ingest', 'cluster-west', 30)).toMatchObject({
          acquired: false,
          holder: 'cluster-east',
        });
      });
    } finally {
      await t.stop();
    }
  });

  it('refuses to start without a kubeconfig outside a cluster', async () => {
    const saved = process.env.KUBERNETES_SERVICE_HOST;
    delete process.env.KUBERNETES_SERVICE_HOST;
    try {
      await expect(
        runCentral(
          parseFlags(centralCommand, [...tls, '--store-backend=k8s', '--coordination-namespace=leases']),
          {
            logger: createLogger({ level: 'silent' }),
          },
        ),
      ).rejects.toThrow(
        'central: --coordination-kubeconfig is empty and there is no in-cluster configuration (KUBERNETES_SERVICE_HOST and /var/run/secrets/kubernetes.io/serviceaccount/token)',
      );
    } finally {
      if (saved !== undefined) process.env.KUBERNETES_SERVICE_HOST = saved;
    }
  });
});
