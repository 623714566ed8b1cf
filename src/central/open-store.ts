// Builds the Store `--store-backend` selects: the in-memory store, Kubernetes Leases (kubeconfig file,
// or in-cluster when empty) or SQL (PostgreSQL, MySQL/MariaDB or SQLite; DSN from the flag or a file;
// table created or verified).
import { readFile } from 'node:fs/promises';
import type { KubeConfig } from '@kubernetes/client-node';
import { describeError, loadKubeConfig, SERVICE_ACCOUNT_DIR } from '../kube/client.ts';
import type { Logger } from '../observability/logger.ts';
import { K8sLeaseStore } from './k8sstore.ts';
import { MemoryStore } from './memstore.ts';
import type { SqlDriver } from './sql/dialect.ts';
import { type MigrateMode, SqlStore } from './sql/store.ts';
import type { Store } from './store.ts';

export const STORE_BACKENDS = ['mem', 'k8s', 'sql'] as const;
export type StoreBackend = (typeof STORE_BACKENDS)[number];

export type StoreConfig =
  | { backend: 'mem' }
  | {
      backend: 'sql';
      driver: SqlDriver;
      dsn: string;
      dsnFile: string;
      migrate: MigrateMode;
      /** Undefined: the store's default. */
      maxConnections: number | undefined;
      timeoutMs: number;
    }
  | { backend: 'k8s'; kubeconfig: string; namespace: string; qps: number; burst: number };

export interface OpenStoreOptions {
  logger?: Logger;
  /** Environment for in-cluster detection (default process.env). */
  env?: NodeJS.ProcessEnv;
  /** Service-account directory for in-cluster configuration (tests). */
  serviceAccountDir?: string;
}

async function readDsnFile(path: string): Promise<string> {
  let text: string;
  try {
    text = await readFile(path, 'utf8');
  } catch (err) {
    throw new Error(
      `central: read --sql-dsn-file ${path}: ${(err as NodeJS.ErrnoException).code ?? 'error'}`,
    );
  }
  const dsn = text.trim();
  if (dsn === '') throw new Error(`central: --sql-dsn-file ${path} is empty`);
  return dsn;
}

/**
 * The coordination cluster: the kubeconfig file when given, otherwise in-cluster only — KUBECONFIG and
 * ~/.kube/config are deliberately not consulted, so a stray file cannot redirect the lease data.
 */
export function coordinationKubeConfig(path: string, options: OpenStoreOptions = {}): KubeConfig {
  if (path !== '') return loadKubeConfig({ kubeconfig: path }).kc;
  const env = options.env ?? process.env;
  const saDir = options.serviceAccountDir ?? SERVICE_ACCOUNT_DIR;
  try {
    return loadKubeConfig({
      env: {
        KUBERNETES_SERVICE_HOST: env.KUBERNETES_SERVICE_HOST,
        KUBERNETES_SERVICE_PORT: env.KUBERNETES_SERVICE_PORT,
      },
      home: '/nonexistent',
      serviceAccountDir: saDir,
    }).kc;
  } catch {
    throw new Error(
      `central: --coordination-kubeconfig is empty and there is no in-cluster configuration (KUBERNETES_SERVICE_HOST and ${saDir}/token)`,
    );
  }
}

export async function openStore(config: StoreConfig, options: OpenStoreOptions = {}): Promise<Store> {
  switch (config.backend) {
    case 'mem':
      return new MemoryStore();
    case 'sql':
      return SqlStore.open({
        driver: config.driver,
        dsn: config.dsnFile !== '' ? await readDsnFile(config.dsnFile) : config.dsn,
        migrate: config.migrate,
        maxConnections: config.maxConnections,
        timeoutMs: config.timeoutMs,
        logger: options.logger,
      });
    case 'k8s': {
      const store = new K8sLeaseStore({
        kc: coordinationKubeConfig(config.kubeconfig, options),
        namespace: config.namespace,
        qps: config.qps,
        burst: config.burst,
      });
      // Not fatal: the API server may come later; /readyz reports it meanwhile.
      await store.ping().then(
        () =>
          options.logger?.info(
            { namespace: config.namespace, qps: config.qps, burst: config.burst },
            'kubernetes lease store ready',
          ),
        (err: unknown) =>
          options.logger?.warn(
            { namespace: config.namespace, err: describeError(err) },
            'kubernetes lease store not reachable yet',
          ),
      );
      return store;
    }
  }
}
