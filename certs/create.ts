// Building the provider `--cert-mode` selects, for the composition root.
import type { Registry } from 'prom-client';
import type { Clock } from '../src/kube/clock.ts';
import type { KubeRequester } from '../src/kube/transport.ts';
import type { Logger } from '../src/observability/logger.ts';
import { SecretCaStore } from './ca-store.ts';
import type { CertConfig } from './config.ts';
import { FilesCertificateProvider } from './files.ts';
import type { CertificateProvider } from './provider.ts';
import { SelfSignedCertificateProvider } from './selfsigned.ts';

/**
 * The names a client may use for the webhook Service: `<svc>.<ns>.svc` first (the name the API server
 * verifies, also used as CN), then `<svc>`, `<svc>.<ns>` and `<svc>.<ns>.svc.<clusterDomain>`.
 */
export function serviceDnsNames(
  service: string,
  namespace: string,
  clusterDomain = 'cluster.local',
): string[] {
  return [
    `${service}.${namespace}.svc`,
    service,
    `${service}.${namespace}`,
    `${service}.${namespace}.svc.${clusterDomain}`,
  ];
}

export interface CertificateProviderDeps {
  /** The process's API transport (the CA Secret's reads and writes). */
  transport: KubeRequester;
  /** The operator namespace: where the CA Secret and the webhook Service live. */
  namespace: string;
  clock?: Clock;
  logger?: Logger;
  registry?: Registry;
}

export function createCertificateProvider(
  config: CertConfig,
  deps: CertificateProviderDeps,
): CertificateProvider {
  const common = {
    ...(deps.clock ? { clock: deps.clock } : {}),
    ...(deps.logger ? { logger: deps.logger } : {}),
    ...(deps.registry ? { registry: deps.registry } : {}),
  };
  if (config.certMode === 'files') return new FilesCertificateProvider({ dir: config.certDir, ...common });
  return new SelfSignedCertificateProvider({
    store: new SecretCaStore({
      transport: deps.transport,
      namespace: deps.namespace,
      name: config.certCaSecretName,
    }),
    dnsNames: serviceDnsNames(config.webhookServiceName, deps.namespace),
    leafValidityMs: config.certLeafValidity,
    caValidityMs: config.certCaValidity,
    ...common,
  });
}
