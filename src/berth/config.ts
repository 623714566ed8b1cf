// The BerthLease flags of `run` (docs/behaviour.md §5.1) in cli.ts's FlagSpec form, and their zod
// validation: one-line UsageError naming the flag. `--berth-api-server` empty means the BerthLease
// controller does not run. The CA bundle file is read (and checked to hold a PEM certificate) here, so
// a bad path is a start-up error, not a failing heartbeat. The API key is never part of a message.
import { readFileSync } from 'node:fs';
import { z } from 'zod';
import { type FlagSpec, type FlagValues, formatDuration, UsageError } from '../cli.ts';
import type { Logger } from '../observability/logger.ts';
import { DEFAULT_STOP_LEAD_MS } from './api.ts';
import { DEFAULT_MAX_CONCURRENT_RECONCILES } from './controller.ts';
import { centralUrlProblem, HttpLeaseClient } from './leaseclient.ts';

export interface BerthConfig {
  /** `--berth-api-server`; '' disables the BerthLease controller. */
  apiServer: string;
  apiKey: string;
  apiKeyFile: string;
  /** `--berth-ca-bundle-file`, and its content (undefined when not set). */
  caBundleFile: string;
  caBundle: string | undefined;
  serverName: string;
  insecureSkipTlsVerify: boolean;
  /** `--cluster-id`: the holder identity for every lease. */
  clusterId: string;
  /** `--use-spec-holder-identity`: with no cluster id, each lease's spec.holderIdentity is its holder. */
  useSpecHolderIdentity: boolean;
  maxConcurrentReconciles: number;
  /** `--stop-lead`, ms: a managed activation ends this long before its recorded deadline. */
  stopLeadMs: number;
}

export const berthFlags: FlagSpec[] = [
  {
    name: 'berth-api-server',
    kind: 'string',
    default: '',
    help: 'Base URL of the central Berth lease API, https:// only (the bearer token never crosses the network in clear text); the BerthLease controller runs only when it is set',
    env: 'BERTH_API_SERVER',
  },
  {
    name: 'cluster-id',
    kind: 'string',
    default: '',
    help: 'Holder identity of this cluster for every BerthLease, unique per cluster (required with --berth-api-server unless --use-spec-holder-identity)',
    env: 'BERTH_CLUSTER_ID',
  },
  {
    name: 'use-spec-holder-identity',
    kind: 'boolean',
    default: false,
    help: "Lease-only use without --cluster-id: each BerthLease's spec.holderIdentity is its holder, so clusters holding the same BerthLease share one holder (not with --enable-workload-admission)",
    env: 'BERTH_USE_SPEC_HOLDER_IDENTITY',
  },
  {
    name: 'berth-api-key',
    kind: 'string',
    default: '',
    help: 'Static bearer token for the central API (prefer the environment or --berth-api-key-file: a flag value is visible in the process list); exclusive with --berth-api-key-file',
    env: 'BERTH_API_KEY',
  },
  {
    name: 'berth-api-key-file',
    kind: 'string',
    default: '',
    help: 'File holding the bearer token, re-read at most once a second (rotated tokens)',
    env: 'BERTH_API_KEY_FILE',
  },
  {
    name: 'berth-ca-bundle-file',
    kind: 'string',
    default: '',
    help: 'PEM certificates trusted for the central API in addition to the system roots',
    env: 'BERTH_CA_BUNDLE_FILE',
  },
  {
    name: 'berth-server-name',
    kind: 'string',
    default: '',
    help: "TLS server name (SNI and verification) of the central API; when empty, the URL's host",
    env: 'BERTH_SERVER_NAME',
  },
  {
    name: 'berth-insecure-skip-tls-verify',
    kind: 'boolean',
    default: false,
    help: 'Do not verify the central API certificate (development only; logged as a warning)',
    env: 'BERTH_INSECURE_SKIP_TLS_VERIFY',
  },
  {
    name: 'berthlease-max-concurrent-reconciles',
    kind: 'number',
    default: DEFAULT_MAX_CONCURRENT_RECONCILES,
    help: 'BerthLeases reconciled in parallel (each one at most once at a time); a hung central call holds one for up to 2.5 s',
    env: 'BERTH_BERTHLEASE_MAX_CONCURRENT_RECONCILES',
  },
  // 5 s: the stop's reconcile (a requeue, a worker, a few API calls), the Pods' grace bounded to end 1 s
  // before the deadline, and the kubelet's kill within that second, with some clock drift to spare;
  // a 30 s TTL with a 10 s heartbeat holds it (heartbeat + 2.5 s + lead < TTL). 0 is the Go original.
  {
    name: 'stop-lead',
    kind: 'duration',
    default: formatDuration(DEFAULT_STOP_LEAD_MS),
    help: 'A managed workload\'s activation ends this long before its local deadline, so its Pods (their grace bounded to fit) are gone before the central lease can expire; "0": at the deadline, as the Go operator',
    env: 'BERTH_STOP_LEAD',
  },
];

const HOLDER_MAX_BYTES = 253;
/** A lead beyond a few minutes stops every lease long before its TTL: surely a typo (`5m` for `5s`). */
const MAX_STOP_LEAD_MS = 600_000;

const apiServer = z.string().superRefine((value, ctx) => {
  const problem = value === '' ? undefined : centralUrlProblem(value);
  if (problem !== undefined) ctx.addIssue({ code: 'custom', message: problem });
});

const schema = z
  .object({
    'berth-api-server': apiServer,
    'cluster-id': z
      .string()
      .refine((v) => Buffer.byteLength(v, 'utf8') <= HOLDER_MAX_BYTES, {
        message: `must be at most ${HOLDER_MAX_BYTES} bytes (the central API's holder limit)`,
      })
      .refine((v) => v === v.trim(), { message: 'must not start or end with whitespace' }),
    'berth-api-key': z.string(),
    'berth-api-key-file': z.string(),
    'berth-ca-bundle-file': z.string(),
    'berth-server-name': z.string(),
    'berth-insecure-skip-tls-verify': z.boolean(),
    'use-spec-holder-identity': z.boolean(),
    'berthlease-max-concurrent-reconciles': z
      .number()
      .int('must be a whole number')
      .min(1, 'must be at least 1')
      .max(64, 'must be at most 64'),
    'stop-lead': z
      .number()
      .nonnegative('must not be negative')
      .max(MAX_STOP_LEAD_MS, `must be at most ${formatDuration(MAX_STOP_LEAD_MS)}`),
  })
  .superRefine((f, ctx) => {
    if (f['berth-api-key'] !== '' && f['berth-api-key-file'] !== '')
      ctx.addIssue({
        code: 'custom',
        path: ['berth-api-key'],
        message: 'cannot be combined with --berth-api-key-file',
      });
  });

function readCaBundle(path: string): string {
  let text: string;
  try {
    text = readFileSync(path, 'utf8');
  } catch (err) {
    throw new UsageError(
      `--berth-ca-bundle-file: cannot read ${path}: ${(err as NodeJS.ErrnoException).code ?? 'error'}`,
    );
  }
  if (!text.includes('-----BEGIN CERTIFICATE-----'))
    throw new UsageError(`--berth-ca-bundle-file: ${path} contains no PEM certificate`);
  return text;
}

/** Parsed flag values -> BerthConfig, or a one-line UsageError naming the flag (never its value). */
export function parseBerthConfig(values: FlagValues): BerthConfig {
  const result = schema.safeParse(values);
  if (!result.success) {
    const first = result.error.issues[0];
    const flag = first?.path[0];
    const where = typeof flag === 'string' ? `--${flag}` : 'berth';
    throw new UsageError(`${where}: ${first?.message ?? 'invalid value'}`);
  }
  const f = result.data;
  const caBundleFile = f['berth-ca-bundle-file'];
  return {
    apiServer: f['berth-api-server'],
    apiKey: f['berth-api-key'],
    apiKeyFile: f['berth-api-key-file'],
    caBundleFile,
    caBundle: caBundleFile === '' ? undefined : readCaBundle(caBundleFile),
    serverName: f['berth-server-name'],
    insecureSkipTlsVerify: f['berth-insecure-skip-tls-verify'],
    clusterId: f['cluster-id'],
    useSpecHolderIdentity: f['use-spec-holder-identity'],
    maxConcurrentReconciles: f['berthlease-max-concurrent-reconciles'],
    stopLeadMs: f['stop-lead'],
  };
}

/** The central lease client of a configuration with `apiServer` set. */
export function leaseClientFor(config: BerthConfig, logger?: Logger): HttpLeaseClient {
  return new HttpLeaseClient({
    baseUrl: config.apiServer,
    ...(config.apiKey === '' ? {} : { apiKey: config.apiKey }),
    ...(config.apiKeyFile === '' ? {} : { apiKeyFile: config.apiKeyFile }),
    ...(config.caBundle === undefined ? {} : { caBundle: config.caBundle }),
    ...(config.serverName === '' ? {} : { serverName: config.serverName }),
    insecureSkipTlsVerify: config.insecureSkipTlsVerify,
    ...(logger === undefined ? {} : { logger }),
  });
}
