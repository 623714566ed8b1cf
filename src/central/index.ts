// The embedded central Berth lease API: public surface.
export type { Authenticator, AuthMode, Identity } from './auth.ts';
export { parseKeyFile, StaticKeyAuthenticator, sha256Hex } from './auth.ts';
export { type CentralFlags, centralCommand, parseCentralFlags, runCentral } from './command.ts';
export { TtlCollector } from './gc.ts';
export { K8sLeaseStore, type K8sStoreOptions } from './k8sstore.ts';
export { LeaseManager, LeaseManagerError, type LeaseResult, ReleaseConflictError } from './manager.ts';
export { MemoryStore } from './memstore.ts';
export { openStore, STORE_BACKENDS, type StoreBackend, type StoreConfig } from './open-store.ts';
export type { LeaseKey, LeaseRecord } from './record.ts';
export { type CentralServer, type CentralServerOptions, startCentralServer } from './server.ts';
export { SQL_DRIVERS, type SqlDriver } from './sql/dialect.ts';
export { SqlStore, SqlStoreError, type SqlStoreOptions } from './sql/store.ts';
export { isStoreConflict, type Store, StoreConflictError } from './store.ts';
