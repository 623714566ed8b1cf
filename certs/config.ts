// Certificate flags, in the same two shapes as src/config.ts: CERT_FLAGS (FlagDef rows, which can be
// merged into RUN_FLAGS as they are) and certFlags (cli.ts FlagSpecs), plus parseCertConfig, which
// validates the parsed values once with zod and reports a bad flag in one line.
import { z } from 'zod';
import type { FlagSpec, FlagValues } from '../src/cli.ts';
import { UsageError } from '../src/cli.ts';
import type { FlagDef } from '../src/config.ts';
import { dns1035LabelSchema, dnsSubdomainSchema } from '../src/kube/names.ts';
import { DEFAULT_CERT_DIR } from './files.ts';
import { DEFAULT_CA_NAME } from './issue.ts';

const MINUTE = 60_000;

export const CERT_FLAGS = {
  'cert-mode': {
    kind: 'string',
    default: 'selfsigned',
    help: 'Webhook serving certificates: "selfsigned" (CA in a Secret, per-replica leaf) or "files" (tls.crt/tls.key in --cert-dir, e.g. from cert-manager, hot-reloaded; its ca.crt is the caBundle of the webhooks)',
    schema: z.enum(['selfsigned', 'files']),
  },
  'cert-dir': {
    kind: 'string',
    default: DEFAULT_CERT_DIR,
    help: 'Directory holding tls.crt and tls.key (and optionally ca.crt) in files mode',
    schema: z.string().min(1, 'must not be empty'),
  },
  'webhook-service-name': {
    kind: 'string',
    default: 'berth-operator-webhook',
    help: 'Service in front of the webhook server; the selfsigned leaf is issued for its DNS names',
    schema: dns1035LabelSchema,
  },
  'cert-ca-secret-name': {
    kind: 'string',
    default: DEFAULT_CA_NAME,
    help: 'Secret in the operator namespace holding the selfsigned CA (created by the first replica)',
    schema: dnsSubdomainSchema,
  },
  'cert-leaf-validity': {
    kind: 'duration',
    default: '168h',
    help: 'Validity of each replica’s selfsigned serving certificate; renewed at 2/3 of it',
    schema: z.number().min(MINUTE, 'must be at least 1m'),
  },
  'cert-ca-validity': {
    kind: 'duration',
    default: '8760h',
    help: 'Validity of the selfsigned CA; rotated at 2/3 of it, the old CA staying trusted until it expires',
    schema: z.number().min(MINUTE, 'must be at least 1m'),
  },
} as const satisfies Record<string, FlagDef>;

type CertFlagName = keyof typeof CERT_FLAGS;

const envVarFor = (name: string): string => `BERTH_${name.toUpperCase().replace(/-/g, '_')}`;

/** The certificate flags in cli.ts's form (parsing, env fallbacks BERTH_<NAME>, `--help`). */
export const certFlags: FlagSpec[] = Object.entries(CERT_FLAGS as Record<string, FlagDef>).map(
  ([name, def]) => ({
    name,
    kind: def.kind,
    default: def.default,
    help: def.help,
    env: def.env ?? envVarFor(name),
  }),
);

export interface CertConfig {
  certMode: 'selfsigned' | 'files';
  certDir: string;
  webhookServiceName: string;
  certCaSecretName: string;
  /** Milliseconds. */
  certLeafValidity: number;
  /** Milliseconds. */
  certCaValidity: number;
}

const shape = Object.fromEntries(Object.entries(CERT_FLAGS).map(([name, def]) => [name, def.schema])) as {
  [K in CertFlagName]: (typeof CERT_FLAGS)[K]['schema'];
};

export const certConfigSchema = z
  .object(shape)
  .superRefine((f, ctx) => {
    // A leaf signed by the previous CA just after a rotation must fit in that CA's last third of life.
    if (f['cert-ca-validity'] < 3 * f['cert-leaf-validity']) {
      ctx.addIssue({
        code: 'custom',
        path: ['cert-ca-validity'],
        message: 'must be at least 3 x --cert-leaf-validity',
      });
    }
  })
  .transform(
    (f): CertConfig => ({
      certMode: f['cert-mode'],
      certDir: f['cert-dir'],
      webhookServiceName: f['webhook-service-name'],
      certCaSecretName: f['cert-ca-secret-name'],
      certLeafValidity: f['cert-leaf-validity'],
      certCaValidity: f['cert-ca-validity'],
    }),
  );

/** Parsed flag values -> CertConfig, or a one-line UsageError naming the flag. */
export function parseCertConfig(values: FlagValues): CertConfig {
  const picked = Object.fromEntries(Object.keys(CERT_FLAGS).map((name) => [name, values[name]]));
  const result = certConfigSchema.safeParse(picked);
  if (result.success) return result.data;
  const first = result.error.issues[0];
  const flag = first?.path[0];
  const where = typeof flag === 'string' ? `--${flag}` : 'certificate flags';
  const value = typeof flag === 'string' ? values[flag] : undefined;
  const shown = value === undefined ? '' : ` "${String(value)}"`;
  throw new UsageError(`invalid value${shown} for ${where}: ${first?.message ?? 'invalid'}`);
}
