// The opt-in admission scope's two guards, one review path (docs/admission.md, "The admission scope"):
//
// - Entry, settled. Every CREATE of a BerthLease with a target is reviewed, in every namespace: admitted
//   only when this replica's informer has shown the namespace `enabled` for SCOPE_SETTLE_MS, so that every
//   kube-apiserver reviews the namespace before anything in it can be managed.
// - Exit, in two steps. A namespace's scope label may switch between `enabled` and `leaving` freely; any
//   other change (removal, another value) is the operator's alone: from `leaving`, seen for
//   SCOPE_SETTLE_MS, with nothing managed left (live LISTs: a BerthLease with a target, any object with a
//   lease's stamp). A `leaving` namespace is still reviewed and admits no new BerthLease with a target.
//   The operator's exit controller (scope-exit.ts) makes that last write.
//
// Lease-only BerthLeases need no admission and neither need nor hold the scope.
import {
  GROUP,
  KIND,
  MANAGED_LEASE,
  MANAGED_UID,
  optInCommand,
  SCOPE_ENABLED,
  SCOPE_LABEL,
  SCOPE_LEAVING,
  SCOPE_SETTLE_MS,
  scopeValue,
} from '../src/berth/api.ts';
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

/** How this replica sees a namespace (src/berth/namespace-scope.ts `NamespaceScope`; tests pass fakes). */
export interface ScopeEntries {
  /**
   * In scope with its value, since when this replica has seen it and the resourceVersion it saw; 'out';
   * undefined before the first list.
   */
  entry(namespace: string): { value: string; since: number; resourceVersion: string } | 'out' | undefined;
}

const seconds = (ms: number): string => `${Math.ceil(ms / 1000)} s`;
const leaveCommand = (namespace: string): string =>
  `kubectl label namespace ${namespace} ${SCOPE_LABEL}=${SCOPE_LEAVING} --overwrite`;

export const ScopeMessage = {
  leaseOutOfScope: (namespace: string): string =>
    `BerthLeases with spec.target are only admitted in namespaces in the workload admission scope, and ${JSON.stringify(namespace)} is not in it: a cluster admin opts it in with \`${optInCommand(namespace)}\``,
  leaseLeaving: (namespace: string): string =>
    `namespace ${JSON.stringify(namespace)} is leaving the workload admission scope (${SCOPE_LABEL}=${SCOPE_LEAVING}): no BerthLease with spec.target is admitted there; set it back to ${SCOPE_ENABLED} to stay`,
  leaseSettling: (namespace: string, waitMs: number): string =>
    `namespace ${JSON.stringify(namespace)} entered the workload admission scope moments ago: BerthLeases with spec.target are admitted once every API server reviews it, in ${seconds(waitMs)}; retry then`,
  scopeUnknown: 'the namespaces of the workload admission scope are not known yet: retry in a few seconds',
  exitInTwoSteps: (namespace: string): string =>
    `namespace ${JSON.stringify(namespace)} leaves the workload admission scope in two steps: \`${leaveCommand(namespace)}\`, then the operator removes the label once nothing managed is left in it`,
  exitSettling: (namespace: string, waitMs: number): string =>
    `namespace ${JSON.stringify(namespace)} began leaving the workload admission scope moments ago; the label may go in ${seconds(waitMs)}`,
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

/**
 * How long until `entry` has been `value` for the settle period (0: it has), or undefined when this
 * replica does not see the namespace with that value.
 */
export function settleLeft(
  entry: ReturnType<ScopeEntries['entry']>,
  value: string,
  now: number,
): number | undefined {
  if (entry === undefined || entry === 'out' || entry.value !== value) return undefined;
  return Math.max(0, entry.since + SCOPE_SETTLE_MS - now);
}

/** Entry: a BerthLease with a target, by how this replica has seen its namespace. Pure. */
export function decideLeaseScope(
  namespace: string,
  entry: ReturnType<ScopeEntries['entry']>,
  now: number,
): Decision {
  if (entry === undefined) return deny('scope-unknown', ScopeMessage.scopeUnknown, 503);
  if (entry === 'out') return deny('out-of-scope', ScopeMessage.leaseOutOfScope(namespace));
  if (entry.value !== SCOPE_ENABLED) return deny('scope-leaving', ScopeMessage.leaseLeaving(namespace));
  const left = settleLeft(entry, SCOPE_ENABLED, now) ?? 0;
  return left > 0 ? deny('scope-settling', ScopeMessage.leaseSettling(namespace, left)) : allow();
}

export interface ScopeReviewDeps {
  io: AdmissionIO;
  scope: ScopeEntries;
  /** `--workload-operator-user`: the only one who may end a namespace's leaving. */
  operatorUser: string;
  now: () => number;
}

/** One review of the scope path. Anything it does not guard is allowed (the configuration sends none). */
export async function decideScopeReview(req: AdmissionRequest, deps: ScopeReviewDeps): Promise<Decision> {
  if (req.kind.group === GROUP && req.kind.kind === KIND) {
    const spec = isRecord(req.object) && isRecord(req.object.spec) ? req.object.spec : {};
    if (req.operation !== 'CREATE' || spec.target === undefined) return allow();
    const namespace = req.namespace ?? '';
    return decideLeaseScope(namespace, deps.scope.entry(namespace), deps.now());
  }
  if (req.kind.group !== '' || req.kind.kind !== 'Namespace' || req.operation !== 'UPDATE') return allow();
  const before = scopeValue(labelsOf(req.oldObject));
  const after = scopeValue(labelsOf(req.object));
  const inScope = (v: string): boolean => v === SCOPE_ENABLED || v === SCOPE_LEAVING;
  if (!inScope(before) || before === after || inScope(after)) return allow();
  const namespace = req.name ?? '';
  if (req.userInfo.username !== deps.operatorUser || before !== SCOPE_LEAVING)
    return deny('scope-exit', ScopeMessage.exitInTwoSteps(namespace));
  const left = settleLeft(deps.scope.entry(namespace), SCOPE_LEAVING, deps.now());
  if (left === undefined || left > 0)
    return deny('scope-settling', ScopeMessage.exitSettling(namespace, left ?? SCOPE_SETTLE_MS));
  let holder: string | undefined;
  try {
    holder = await scopeHolder(deps.io, namespace);
  } catch (err) {
    return deny(
      'api-error',
      `cannot tell whether namespace ${JSON.stringify(namespace)} may leave the workload admission scope: ${apiErrorMessage(err)}`,
    );
  }
  return holder === undefined ? allow() : deny('scope-in-use', holder);
}
