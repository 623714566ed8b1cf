// The opt-in admission scope's two guards, one review path (docs/admission.md, "The admission scope"):
//
// - A BerthLease with a target created in a namespace outside the scope. kube-apiserver only calls for such
//   a lease (its namespaceSelector and matchConditions, webhooks/configurations.ts `scopeWebhooks`), judged
//   on its own view of the namespace's labels, the view it also uses to skip the workload webhooks: the
//   lease is denied without a read, with the command that opts the namespace in.
// - A namespace losing the scope label. It is denied while the namespace holds a BerthLease with a target
//   or an object carrying a lease's stamp, naming one of them; every read is live (a LIST per kind, the
//   stamped ones by label with limit=1), and a failed read denies.
//
// Lease-only BerthLeases need no admission and neither need nor hold the scope.
import { GROUP, inAdmissionScope, KIND, MANAGED_LEASE, MANAGED_UID, optInCommand } from '../src/berth/api.ts';
import type { WorkloadKind } from '../src/workloads/model.ts';
import type { AdmissionIO, JsonObject } from './io.ts';
import { leaseFacts } from './leases.ts';
import { apiErrorMessage } from './resolve.ts';
import { type AdmissionRequest, allow, type Decision, deny } from './review.ts';

const isRecord = (v: unknown): v is JsonObject => typeof v === 'object' && v !== null && !Array.isArray(v);

/** The kinds admission stamps, in the order a denial names them (roots before what they own). */
export const STAMPED_KINDS: readonly WorkloadKind[] = [
  'Deployment',
  'StatefulSet',
  'ReplicaSet',
  'CronJob',
  'Job',
  'Pod',
];

export const ScopeMessage = {
  leaseOutOfScope: (namespace: string): string =>
    `BerthLeases with spec.target are only admitted in namespaces in the workload admission scope, and ${JSON.stringify(namespace)} is not in it: a cluster admin opts it in with \`${optInCommand(namespace)}\``,
  holdsLease: (namespace: string, lease: string, target: string): string =>
    `namespace ${JSON.stringify(namespace)} cannot leave the workload admission scope while it holds BerthLease ${JSON.stringify(lease)} (its target ${target} would no longer be admitted): delete the BerthLease and let its workload drain first`,
  holdsStamped: (namespace: string, kind: string, name: string, lease: string): string =>
    `namespace ${JSON.stringify(namespace)} cannot leave the workload admission scope while it holds ${kind} ${JSON.stringify(name)}, managed for BerthLease ${JSON.stringify(lease)}: delete it first`,
} as const;

function labelsOf(o: unknown): Record<string, string> {
  const metadata = isRecord(o) && isRecord(o.metadata) ? o.metadata : {};
  const labels = isRecord(metadata.labels) ? metadata.labels : {};
  return Object.fromEntries(
    Object.entries(labels).filter((e): e is [string, string] => typeof e[1] === 'string'),
  );
}

/** Why `namespace` must stay in the scope (the first BerthLease with a target or stamped object), or undefined. */
export async function scopeHolder(io: AdmissionIO, namespace: string): Promise<string | undefined> {
  const [leases, ...stamped] = await Promise.all([
    io.listLeases(namespace),
    ...STAMPED_KINDS.map((kind) => io.firstStamped(kind, namespace)),
  ]);
  for (const raw of leases.items) {
    const lease = leaseFacts(raw);
    if (lease.target !== undefined)
      return ScopeMessage.holdsLease(
        namespace,
        lease.name,
        `${lease.target.kind} ${JSON.stringify(lease.target.name)}`,
      );
  }
  for (const [i, raw] of stamped.entries()) {
    if (raw === undefined) continue;
    const metadata = isRecord(raw.metadata) ? raw.metadata : {};
    const annotations = isRecord(metadata.annotations) ? metadata.annotations : {};
    const lease = annotations[MANAGED_LEASE] ?? labelsOf(raw)[MANAGED_UID] ?? '';
    return ScopeMessage.holdsStamped(
      namespace,
      STAMPED_KINDS[i]!,
      String(metadata.name ?? ''),
      String(lease),
    );
  }
  return undefined;
}

/** One review of the scope path. Anything it does not guard is allowed (the configuration sends none). */
export async function decideScopeReview(req: AdmissionRequest, io: AdmissionIO): Promise<Decision> {
  if (req.kind.group === GROUP && req.kind.kind === KIND) {
    const spec = isRecord(req.object) && isRecord(req.object.spec) ? req.object.spec : {};
    if (req.operation !== 'CREATE' || spec.target === undefined) return allow();
    return deny('out-of-scope', ScopeMessage.leaseOutOfScope(req.namespace ?? ''));
  }
  if (req.kind.group !== '' || req.kind.kind !== 'Namespace' || req.operation !== 'UPDATE') return allow();
  if (!inAdmissionScope(labelsOf(req.oldObject)) || inAdmissionScope(labelsOf(req.object))) return allow();
  const namespace = req.name ?? '';
  let holder: string | undefined;
  try {
    holder = await scopeHolder(io, namespace);
  } catch (err) {
    return deny(
      'api-error',
      `cannot tell whether namespace ${JSON.stringify(namespace)} may leave the workload admission scope: ${apiErrorMessage(err)}`,
    );
  }
  return holder === undefined ? allow() : deny('scope-in-use', holder);
}
