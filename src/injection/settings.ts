// What the injection webhooks apply to every opted-in Pod: the operator's injection flags, the central
// API settings handed to the helpers (from the BerthLease flags), and the namespaces never injected.
import type { InjectionConfig } from './flags.ts';
import type { InjectionDefaults } from './resolve.ts';

/** The central lease API as the operator reaches it (`--berth-api-server`, `--cluster-id`, ...). */
export interface CentralApiSettings {
  apiServer: string;
  clusterId: string;
  serverName: string;
  insecureSkipTlsVerify: boolean;
}

/** The injection flags the webhooks apply as they are. */
type HelperFlagSettings = Pick<
  InjectionConfig,
  | 'helperImage'
  | 'imagePullPolicy'
  | 'stateDir'
  | 'probePort'
  | 'apiKeyFile'
  | 'apiKeySecret'
  | 'apiKeySecretKey'
  | 'caBundleFile'
  | 'caBundleConfigMap'
  | 'caBundleKey'
>;

export interface InjectorSettings extends InjectionDefaults, HelperFlagSettings, CentralApiSettings {
  /** Never injected nor validated: `--injection-control-plane-namespaces` plus the operator namespace. */
  controlPlaneNamespaces: readonly string[];
}

export function injectorSettings(
  config: InjectionConfig,
  central: CentralApiSettings,
  operatorNamespace: string,
): InjectorSettings {
  return {
    defaultMode: config.defaultMode,
    defaultEnforce: config.defaultEnforce,
    defaultTtlSeconds: config.defaultTtlSeconds,
    restartPodOnLoss: config.restartPodOnLoss,
    helperImage: config.helperImage,
    imagePullPolicy: config.imagePullPolicy,
    controlPlaneNamespaces: controlPlaneNamespaces(config, operatorNamespace),
    stateDir: config.stateDir,
    probePort: config.probePort,
    apiKeyFile: config.apiKeyFile,
    apiKeySecret: config.apiKeySecret,
    apiKeySecretKey: config.apiKeySecretKey,
    caBundleFile: config.caBundleFile,
    caBundleConfigMap: config.caBundleConfigMap,
    caBundleKey: config.caBundleKey,
    apiServer: central.apiServer,
    clusterId: central.clusterId,
    serverName: central.serverName,
    insecureSkipTlsVerify: central.insecureSkipTlsVerify,
  };
}

/** The operator's own namespace first (the Go chart prepends the release namespace), without repeats. */
export function controlPlaneNamespaces(config: InjectionConfig, operatorNamespace: string): string[] {
  return [...new Set([operatorNamespace, ...config.controlPlaneNamespaces].filter((ns) => ns !== ''))];
}
