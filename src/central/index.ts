// The embedded central Berth lease API: public surface.
export type { Authenticator, AuthMode, Identity } from './auth.ts';
export { parseKeyFile, StaticKeyAuthenticator, sha256Hex } from './auth.ts';
export { type CentralFlags, centralCommand, parseCentralFlags, runCentral } from './command.ts';
export { TtlCollector } from './gc.ts';
export { LeaseManager, LeaseManagerError, type LeaseResult, ReleaseConflictError } from './manager.ts';
export { MemoryStore } from './memstore.ts';
export type { LeaseKey, LeaseRecord } from './record.ts';
export { type CentralServer, type CentralServerOptions, startCentralServer } from './server.ts';
export { isStoreConflict, type Store, StoreConflictError } from './store.ts';
