// The admission flags of `run`, in cli.ts's FlagSpec form, and their zod validation (one-line
// UsageError naming the flag). Names and defaults mirror the Go operator (docs/behaviour.md §4.1, §5.1) and
// controller-runtime's webhook server (port 9443). The webhook Service name is certs/'s
// `--webhook-service-name` (the serving certificate is issued for it); pass it to the builders.
import { z } from 'zod';
import { AdmissionMessage, AdmissionScope } from '../src/berth/api.ts';
import { type FlagSpec, type FlagValues, UsageError } from '../src/cli.ts';
import { dnsSubdomainSchema, optionalNamespaceSchema } from '../src/kube/names.ts';
import { DEFAULT_CONFIGURATION_NAME } from './configurations.ts';
import { DEFAULT_WEBHOOK_PORT } from './server.ts';

export const webhookFlags: FlagSpec[] = [
  {
    name: 'webhook-port',
    kind: 'number',
    default: DEFAULT_WEBHOOK_PORT,
    help: 'HTTPS port of the admission webhooks (served on every replica)',
    env: 'BERTH_WEBHOOK_PORT',
  },
  {
    name: 'webhook-configuration-name',
    kind: 'string',
    default: DEFAULT_CONFIGURATION_NAME,
    help: 'Name of the Mutating and Validating webhook configurations (and of the ClusterRole that owns them)',
    env: 'BERTH_WEBHOOK_CONFIGURATION_NAME',
  },
  {
    name: 'webhook-registration',
    kind: 'boolean',
    default: true,
    help: 'The leader registers the webhook configurations once the webhook Service has a ready endpoint and keeps them as built; false: they are managed elsewhere (only with --cert-mode files) and only checked',
    env: 'BERTH_WEBHOOK_REGISTRATION',
  },
  {
    name: 'enable-workload-admission',
    kind: 'boolean',
    default: false,
    help: 'Serve WorkloadAdmission (managed workloads); off means lease-only operation',
    env: 'BERTH_ENABLE_WORKLOAD_ADMISSION',
  },
  {
    name: 'workload-admission-scope',
    kind: 'string',
    default: AdmissionScope.OptIn,
    help: 'Namespaces the workload webhooks review: opt-in (only those labelled berth.skaphos.io/workload-admission=enabled, or =leaving while they leave; BerthLeases with a target are only admitted there) or all (every namespace but the excluded ones, as the Go operator)',
    env: 'BERTH_WORKLOAD_ADMISSION_SCOPE',
  },
  {
    name: 'workload-operator-user',
    kind: 'string',
    default: '',
    help: 'The operator service-account username (system:serviceaccount:<ns>:<sa>), the only one that may ungate managed Pods',
    env: 'BERTH_WORKLOAD_OPERATOR_USER',
  },
  {
    name: 'workload-operator-namespace',
    kind: 'string',
    default: '',
    help: 'The operator namespace, excluded from admission and never holding managed targets',
    env: 'BERTH_WORKLOAD_OPERATOR_NAMESPACE',
  },
];

const SERVICE_ACCOUNT_USER = /^system:serviceaccount:([^:]+):([^:]+)$/;

/**
 * Spec §4.1: with workload admission on, the user must be `system:serviceaccount:<ns>:<sa>` with both parts
 * non-empty and `<ns>` equal to the operator namespace. Returns the error message, or undefined.
 */
export function checkWorkloadOperatorIdentity(user: string, namespace: string): string | undefined {
  const m = SERVICE_ACCOUNT_USER.exec(user);
  if (m === null || namespace === '' || m[1] !== namespace || (m[2] ?? '') === '') {
    return AdmissionMessage.operatorUserMismatch;
  }
  return undefined;
}

const schema = z
  .object({
    'webhook-port': z.number().int('must be a whole number').min(0).max(65535, 'must be a port (0-65535)'),
    'webhook-configuration-name': dnsSubdomainSchema,
    'webhook-registration': z.boolean(),
    'enable-workload-admission': z.boolean(),
    'workload-admission-scope': z.enum([AdmissionScope.OptIn, AdmissionScope.All], {
      error: `must be ${AdmissionScope.OptIn} or ${AdmissionScope.All}`,
    }),
    'workload-operator-user': z.string(),
    'workload-operator-namespace': optionalNamespaceSchema,
  })
  .superRefine((f, ctx) => {
    if (!f['enable-workload-admission']) return;
    const error = checkWorkloadOperatorIdentity(
      f['workload-operator-user'],
      f['workload-operator-namespace'],
    );
    if (error !== undefined)
      ctx.addIssue({ code: 'custom', path: ['workload-operator-user'], message: error });
  });

export interface WebhookConfig {
  webhookPort: number;
  webhookConfigurationName: string;
  /** `--webhook-registration`: the leader creates and keeps the configurations. */
  webhookRegistration: boolean;
  enableWorkloadAdmission: boolean;
  /** `--workload-admission-scope`. */
  workloadAdmissionScope: AdmissionScope;
  workloadOperatorUser: string;
  workloadOperatorNamespace: string;
}

/** Parsed flag values -> WebhookConfig, or a one-line UsageError. */
export function parseWebhookConfig(values: FlagValues): WebhookConfig {
  const result = schema.safeParse(values);
  if (result.success) {
    const f = result.data;
    return {
      webhookPort: f['webhook-port'],
      webhookConfigurationName: f['webhook-configuration-name'],
      webhookRegistration: f['webhook-registration'],
      enableWorkloadAdmission: f['enable-workload-admission'],
      workloadAdmissionScope: f['workload-admission-scope'],
      workloadOperatorUser: f['workload-operator-user'],
      workloadOperatorNamespace: f['workload-operator-namespace'],
    };
  }
  const first = result.error.issues[0];
  const flag = first?.path[0];
  if (first?.message === AdmissionMessage.operatorUserMismatch) throw new UsageError(first.message);
  const where = typeof flag === 'string' ? `--${flag}` : 'webhook flags';
  const value = typeof flag === 'string' ? values[flag] : undefined;
  const shown = value === undefined ? '' : ` "${String(value)}"`;
  throw new UsageError(`invalid value${shown} for ${where}: ${first?.message ?? 'invalid'}`);
}
