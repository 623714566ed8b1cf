// The domain features of `run` and the rules that hold between them. Each feature validates its own
// flags; the rules here refuse the combinations that would leave an install half-working or let two
// clusters hold one lease (docs/safe-defaults.md), each with a one-line UsageError naming the flag to set.
import { type CertConfig, parseCertConfig } from '../certs/config.ts';
import { parseWebhookConfig, type WebhookConfig } from '../webhooks/flags.ts';
import { type BerthConfig, parseBerthConfig } from './berth/config.ts';
import type { FlagValues } from './cli.ts';
import { UsageError } from './cli.ts';
import { type InjectionConfig, parseInjectionConfig } from './injection/flags.ts';
import { type NodeTaintConfig, parseNodeTaintConfig } from './nodetaint/index.ts';

/** The domain features' own configurations, parsed from the same flags. */
export interface FeatureConfigs {
  berth: BerthConfig;
  webhook: WebhookConfig;
  certs: CertConfig;
  nodeTaint: NodeTaintConfig;
  injection: InjectionConfig;
}

type Features = Pick<FeatureConfigs, 'berth' | 'webhook' | 'certs'> & {
  injection?: Pick<InjectionConfig, 'enabled'>;
};

/** Why these features must not run together, or undefined. Pure: the flags are already valid one by one. */
export function combinationProblem({ berth, webhook, certs, injection }: Features): string | undefined {
  const controller = berth.apiServer !== '';
  const injecting = injection?.enabled === true;
  if (injecting && !controller)
    return '--berth-api-server (BERTH_API_SERVER) is required with --enable-injection-webhook: the injected helpers hold their leases at that central Berth lease API';
  if (webhook.enableWorkloadAdmission && !controller)
    return '--berth-api-server (BERTH_API_SERVER) is required with --enable-workload-admission: managed Pods are born gated and only the BerthLease controller ungates them; set it to the central Berth lease API URL';
  if (berth.useSpecHolderIdentity && berth.clusterId !== '')
    return '--use-spec-holder-identity cannot be combined with --cluster-id: the cluster id is the holder of every lease';
  if (berth.useSpecHolderIdentity && webhook.enableWorkloadAdmission)
    return '--use-spec-holder-identity cannot be combined with --enable-workload-admission: managed workloads need a --cluster-id (BERTH_CLUSTER_ID) unique to this cluster';
  if (controller && berth.clusterId === '' && !berth.useSpecHolderIdentity)
    return '--cluster-id (BERTH_CLUSTER_ID) is required with --berth-api-server: set a holder identity unique to this cluster (clusters sharing one would all hold the same lease), or --use-spec-holder-identity for lease-only use';
  if (
    (webhook.enableWorkloadAdmission || injecting) &&
    !webhook.webhookRegistration &&
    certs.certMode === 'selfsigned'
  )
    return '--webhook-registration=false needs --cert-mode files: only the operator knows its self-signed CA, which the configurations must trust';
  return undefined;
}

/** Validates the feature flags and their combination (one-line UsageError on a bad value). */
export function parseFeatureConfigs(flags: FlagValues, namespace: string): FeatureConfigs {
  const features = {
    berth: parseBerthConfig(flags),
    webhook: parseWebhookConfig(flags),
    certs: parseCertConfig(flags),
    nodeTaint: parseNodeTaintConfig(flags, { operatorNamespace: namespace }),
    injection: parseInjectionConfig(flags),
  };
  const problem = combinationProblem(features);
  if (problem !== undefined) throw new UsageError(problem);
  return features;
}
