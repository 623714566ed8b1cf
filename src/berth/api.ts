// The BerthLease API (berth.skaphos.io/v1alpha1): types, zod schemas, the constants of
// docs/behaviour.md §1.1/§1.3/§2/§4 (exact strings: tests and other clusters rely on them), and the
// reconciler's semantic spec validation (§1.2 rules 1-11). Pure: no I/O, imported by webhooks too.
import { z } from 'zod';
import { OwnerChainMessage } from '../workloads/owner-chain.ts';

// ---------------------------------------------------------------------------------------------------
// Identity (§1.1)

export const GROUP = 'berth.skaphos.io';
export const VERSION = 'v1alpha1';
export const API_VERSION = `${GROUP}/${VERSION}`;
export const KIND = 'BerthLease';
export const LIST_KIND = 'BerthLeaseList';
export const PLURAL = 'berthleases';
export const SINGULAR = 'berthlease';
export const CRD_NAME = `${PLURAL}.${GROUP}`;

// ---------------------------------------------------------------------------------------------------
// Finalizer, labels, annotations, gate (§1.3, §2.4, §4)

export const FINALIZER = 'berth.skaphos.io/lease-release';
/** Whether the operator's finalizer is on the object. */
export const hasFinalizer = (o: { metadata?: { finalizers?: string[] | undefined } | undefined }): boolean =>
  (o.metadata?.finalizers ?? []).includes(FINALIZER);
/** Annotation on managed workloads and Pod templates: the BerthLease name. */
export const MANAGED_LEASE = 'berth.skaphos.io/managed-lease';
/** Annotation and label on managed workloads and Pod templates: the BerthLease UID. */
export const MANAGED_UID = 'berth.skaphos.io/managed-lease-uid';
/** Scheduling gate every managed Pod is born with; only the operator lifts it. */
export const SCHEDULING_GATE = 'berth.skaphos.io/lease-held';
/** Annotation written with every stop: the BerthLease resourceVersion, bumping the target's version. */
export const STOP_FENCE = 'berth.skaphos.io/stop-fence';

// ---------------------------------------------------------------------------------------------------
// The workload admission scope (not in the original; docs/admission.md "The admission scope")

/**
 * The namespace label that puts a namespace in the workload admission scope: with
 * `--workload-admission-scope=opt-in` the workload webhooks only see namespaces carrying it with the value
 * `SCOPE_ENABLED`, and BerthLeases with a target are only admitted there.
 */
export const SCOPE_LABEL = 'berth.skaphos.io/workload-admission';
export const SCOPE_ENABLED = 'enabled';
/**
 * The scope label's value while a namespace leaves the scope: still reviewed, no new BerthLease with a
 * target admitted; the operator removes the label once nothing managed is left and `SCOPE_SETTLE_MS` passed.
 */
export const SCOPE_LEAVING = 'leaving';
/**
 * How long a change of a namespace's scope label must have been in place before the next step that relies
 * on every kube-apiserver seeing it (a BerthLease with a target admitted after the namespace entered the
 * scope; the label removed after it began leaving; the selectors narrowed after the guards were
 * registered). The bound this project assumes on kube-apiserver's informer lag plus the time an admitted
 * request takes to be written (docs/admission.md, "What is assumed").
 */
export const SCOPE_SETTLE_MS = 5_000;
export const AdmissionScope = {
  /** Only namespaces labelled `SCOPE_LABEL=enabled` (the default). */
  OptIn: 'opt-in',
  /** Every namespace but the excluded ones, as the Go operator. */
  All: 'all',
} as const;
export type AdmissionScope = (typeof AdmissionScope)[keyof typeof AdmissionScope];
/** The scope label's value ('' when absent). */
export const scopeValue = (labels: Readonly<Record<string, string>> | undefined): string =>
  labels?.[SCOPE_LABEL] ?? '';
/** Whether a namespace's labels put it in the opt-in scope (entered, or leaving: still reviewed). */
export const inAdmissionScope = (labels: Readonly<Record<string, string>> | undefined): boolean =>
  labels?.[SCOPE_LABEL] === SCOPE_ENABLED || labels?.[SCOPE_LABEL] === SCOPE_LEAVING;
/** How a cluster admin opts `namespace` in, for messages. */
export const optInCommand = (namespace: string): string =>
  `kubectl label namespace ${namespace} ${SCOPE_LABEL}=${SCOPE_ENABLED}`;

// ---------------------------------------------------------------------------------------------------
// Status values (§1.3)

export const LeaseState = {
  Held: 'held',
  Waiting: 'waiting',
  /** Declared by the original but never written. */
  Released: 'released',
} as const;
export type LeaseState = (typeof LeaseState)[keyof typeof LeaseState];

export const WorkloadPhase = {
  None: '',
  Active: 'Active',
  Stopping: 'Stopping',
} as const;
export type WorkloadPhase = (typeof WorkloadPhase)[keyof typeof WorkloadPhase];

export const Semantics = {
  AtMostOnce: 'at-most-once',
  /** Accepted, behaves exactly like at-most-once. */
  AtLeastOnce: 'at-least-once',
} as const;
export type Semantics = (typeof Semantics)[keyof typeof Semantics];

// ---------------------------------------------------------------------------------------------------
// Conditions (§2.5)

export const ConditionType = {
  Acquired: 'Acquired',
  HeartbeatHealthy: 'HeartbeatHealthy',
} as const;
export type ConditionType = (typeof ConditionType)[keyof typeof ConditionType];

export const ConditionReason = {
  // Acquired
  Held: 'Held',
  HeldByOther: 'HeldByOther',
  InvalidSpec: 'InvalidSpec',
  AdmissionRequired: 'AdmissionRequired',
  Stopping: 'Stopping',
  Stopped: 'Stopped',
  // HeartbeatHealthy
  Heartbeating: 'Heartbeating',
  Standby: 'Standby',
  AcquireFailed: 'AcquireFailed',
  /** Not in the original: the target could not be read while Active (kept until the deadline). */
  TargetUnverified: 'TargetUnverified',
} as const;
export type ConditionReason = (typeof ConditionReason)[keyof typeof ConditionReason];

/** Condition messages of §2.5 (the variable ones are functions). */
export const ConditionMessage = {
  held: (token: number): string => `lease held with fencing token ${token}`,
  heldByOther: (holder: string): string => `lease held by ${JSON.stringify(holder)}`,
  renewed: 'lease renewed',
  standby: 'monitoring for reacquire',
  stoppingAcquired: 'waiting for managed Pods to terminate',
  stoppingHeartbeat: 'workload activation is closed during cleanup',
  stopped: 'managed Pods stopped',
} as const;

// ---------------------------------------------------------------------------------------------------
// Limits and timeouts (§1.3, §2.9), in milliseconds unless named otherwise

export const MAX_PERMITTED_PODS = 1024;
/** Whole reconcile, admission request and Pod/Job reconcile bound (`localTimeout`). */
export const LOCAL_TIMEOUT_MS = 5_000;
/** Requeue after a central error, cleanup in progress, AdmissionRequired, post-stop (`defaultRequeueOnFailure`). */
export const REQUEUE_ON_FAILURE_MS = 1_000;
/** Upper bound of one central Acquire (further bounded by the heartbeat and the active deadline). */
export const ACQUIRE_TIMEOUT_MS = 2_500;
/** Bound of one central Release. */
export const RELEASE_TIMEOUT_MS = 2_500;
/** Operator readiness ping of the central `/healthz` (lease-only mode). */
export const READINESS_PING_TIMEOUT_MS = 5_000;

/** The JSON of Go's zero `time.Time`; the central API sends it for "absent". */
export const ZERO_TIME = '0001-01-01T00:00:00Z';

// ---------------------------------------------------------------------------------------------------
// Reconciler error texts (§2.3, §2.6, §2.7)

export const ReconcileError = {
  operatorNamespace: 'workloads cannot be managed in the operator namespace',
  admissionDisabled: 'managed workloads require workload admission; lease-only operation is still available',
  noAdmissionRecord:
    'target has no CREATE admission record; drain and recreate the target after its BerthLease',
  identityMismatch: 'target identity does not match admission record',
  invalidCentralResponse: 'invalid central ownership response',
  targetUIDChanged: 'target UID changed',
  podBindingMismatch: 'pod binding mismatch',
  podAncestryDiffers: 'pod ancestry differs from admitted target UID',
  unregisteredPodNoGate: 'unregistered managed Pod has no scheduling gate',
  maxPods: `maximum ${MAX_PERMITTED_PODS} active Pod registrations reached`,
  /** Prefix of a failed registration status write (§2.7 step 4); the gate is then not removed. */
  registerPodPrefix: 'register Pod UID: ',
  /** Prefix of a failed gate removal (§2.7 step 5). */
  removeGatePrefix: 'remove registered Pod gate: ',
  /** A lease action with neither `suspend` nor `scale` (§2.6). */
  emptyAction: 'lease action sets neither suspend nor scale',
  leaseClientRequired: 'BerthLeaseReconciler.LeaseClient is required',
} as const;

/** Not in the original: a managed lease whose namespace is outside the opt-in admission scope. */
export const outOfScopeMessage = (namespace: string): string =>
  `namespace ${JSON.stringify(namespace)} is outside the workload admission scope, so its workloads are not admitted and cannot be managed: a cluster admin opts it in with \`${optInCommand(namespace)}\``;

// ---------------------------------------------------------------------------------------------------
// WorkloadAdmission (§4)

export const MUTATE_WORKLOADS_PATH = '/mutate-managed-workloads';
export const VALIDATE_WORKLOADS_PATH = '/validate-managed-workloads';
export const MUTATE_WORKLOADS_WEBHOOK = 'mutate-workloads.berth.skaphos.io';
export const VALIDATE_WORKLOADS_WEBHOOK = 'validate-workloads.berth.skaphos.io';
/** The opt-in scope's guards (not in the original), one path for both webhooks. */
export const VALIDATE_SCOPE_PATH = '/validate-admission-scope';
/** Denies a BerthLease with a target in a namespace outside the scope. */
export const LEASE_SCOPE_WEBHOOK = 'berthlease-scope.berth.skaphos.io';
/** Denies a namespace leaving the scope while it holds a managed lease or a stamped object. */
export const NAMESPACE_SCOPE_WEBHOOK = 'namespace-scope.berth.skaphos.io';

/** Denial and error messages of §4.1, §4.3 and §4.4. */
export const AdmissionMessage = {
  operatorUserMismatch:
    'workload admission requires its operator namespace and matching service-account username',
  // The owner chain's own (src/workloads/owner-chain.ts), shared with the reconciler's permit path.
  ownerChainTooDeep: OwnerChainMessage.tooDeep,
  resolveOwnerPrefix: OwnerChainMessage.resolveOwnerPrefix,
  ownerUIDChanged: OwnerChainMessage.uidChanged,
  multipleLeases: 'multiple BerthLeases refer to the same target',
  noLiveLease: 'managed binding has no matching live target lease',
  bindingUIDMismatch: 'managed Pod binding must name the observed Pod UID',
  stillGated: 'managed Pod is still scheduling gated',
  missingTemplate: 'managed workload requires a Pod template',
  cannotAdopt: 'managed controllers cannot adopt unadmitted objects',
  drainLegacy: 'drain and recreate legacy managed targets under admission',
  bindingChanged: 'managed workload binding cannot be removed or changed',
  missingManagedTemplate: 'missing managed Pod template',
  prebound: 'managed Pods cannot be prebound using nodeName',
  ownerImmutable: 'managed Pod owner identity is immutable',
  useBinding: 'managed Pods must use the binding subresource',
  onlyOperatorUngates: 'only the operator may remove the Berth scheduling gate',
  gateRequired: 'managed Pod must be created with the Berth scheduling gate',
  leaseNoLongerPermits: 'lease no longer permits Pod starts',
  notRegistered: 'pod UID was not durably registered',
  activationNotAuthorized: 'lease does not authorize workload activation',
  leaseDeletedOrReplaced: 'target lease is deleted or replaced',
  targetNeedsUID: 'final target CREATE admission requires a Kubernetes UID',
  cleanupActive: 'target cannot be replaced while cleanup responsibility is active',
  targetExists: 'target already exists; CREATE cannot replace its admission record',
} as const;

// ---------------------------------------------------------------------------------------------------
// Supported targets (§1.2 rules 9-11)

export interface TargetKind {
  apiVersion: string;
  kind: string;
}
export const SCALABLE_TARGETS: readonly TargetKind[] = [
  { apiVersion: 'apps/v1', kind: 'Deployment' },
  { apiVersion: 'apps/v1', kind: 'StatefulSet' },
  { apiVersion: 'apps/v1', kind: 'ReplicaSet' },
];
export const CRONJOB_TARGET: TargetKind = { apiVersion: 'batch/v1', kind: 'CronJob' };

export const isCronJobTarget = (t: TargetKind): boolean =>
  t.apiVersion === CRONJOB_TARGET.apiVersion && t.kind === CRONJOB_TARGET.kind;
export const isScalableTarget = (t: TargetKind): boolean =>
  SCALABLE_TARGETS.some((s) => s.apiVersion === t.apiVersion && s.kind === t.kind);

// ---------------------------------------------------------------------------------------------------
// Schemas and types (§1.2, §1.3). They mirror the CRD's structural schema; unknown fields are stripped.

const int32 = z.int32();
const timestamp = z.string();

export const scaleActionSchema = z.object({ replicas: int32.min(0) });
export const leaseActionSchema = z
  .object({
    suspend: z.boolean().optional(),
    scale: scaleActionSchema.optional(),
  })
  .refine((a) => !(a.suspend !== undefined && a.scale !== undefined), {
    message: 'at most one of suspend or scale may be set',
  });
export type LeaseAction = z.infer<typeof leaseActionSchema>;

export const targetRefSchema = z.object({
  apiVersion: z.string().max(63),
  kind: z.string().max(63),
  name: z.string().max(253),
});
export type TargetRef = z.infer<typeof targetRefSchema>;

export const berthLeaseSpecSchema = z.object({
  leaseName: z.string().max(253),
  holderIdentity: z.string().max(253),
  ttlSeconds: int32,
  heartbeatIntervalSeconds: int32,
  semantics: z.enum([Semantics.AtMostOnce, Semantics.AtLeastOnce]),
  target: targetRefSchema.optional(),
  acquireAction: leaseActionSchema.optional(),
  releaseAction: leaseActionSchema.optional(),
});
export type BerthLeaseSpec = z.infer<typeof berthLeaseSpecSchema>;

export const permittedPodSchema = z.object({ name: z.string(), uid: z.string() });
export type PermittedPod = z.infer<typeof permittedPodSchema>;

export const workloadStatusSchema = z.object({
  targetUID: z.string(),
  phase: z.enum([WorkloadPhase.None, WorkloadPhase.Active, WorkloadPhase.Stopping]).optional(),
  deadline: timestamp.optional(),
  leaseName: z.string().optional(),
  holder: z.string().optional(),
  token: int32.optional(),
  pods: z.array(permittedPodSchema).max(MAX_PERMITTED_PODS).optional(),
});
export type WorkloadStatus = z.infer<typeof workloadStatusSchema>;

/** metav1.Condition. */
export const conditionSchema = z.object({
  type: z.string(),
  status: z.enum(['True', 'False', 'Unknown']),
  observedGeneration: z.number().int().min(0).optional(),
  lastTransitionTime: timestamp,
  reason: z.string(),
  message: z.string(),
});
export type Condition = z.infer<typeof conditionSchema>;

export const berthLeaseStatusSchema = z.object({
  workload: workloadStatusSchema.optional(),
  observedGeneration: z.number().int().min(0).optional(),
  leaseState: z.string().optional(),
  currentHolder: z.string().optional(),
  tenant: z.string().optional(),
  acquiredAt: timestamp.optional(),
  expiresAt: timestamp.optional(),
  lastHeartbeat: timestamp.optional(),
  fencingToken: int32.optional(),
  conditions: z.array(conditionSchema).optional(),
});
export type BerthLeaseStatus = z.infer<typeof berthLeaseStatusSchema>;

export const objectMetaSchema = z.looseObject({
  name: z.string(),
  namespace: z.string().optional(),
  uid: z.string().optional(),
  resourceVersion: z.string().optional(),
  generation: z.number().int().optional(),
  deletionTimestamp: z.string().optional(),
  finalizers: z.array(z.string()).optional(),
  labels: z.record(z.string(), z.string()).optional(),
  annotations: z.record(z.string(), z.string()).optional(),
});

export const berthLeaseSchema = z.object({
  apiVersion: z.literal(API_VERSION),
  kind: z.literal(KIND),
  metadata: objectMetaSchema,
  spec: berthLeaseSpecSchema,
  status: berthLeaseStatusSchema.optional(),
});
export type BerthLease = z.infer<typeof berthLeaseSchema>;

// ---------------------------------------------------------------------------------------------------
// Semantic validation (§1.2 rules 1-11, in the Go order: validateSpec, then workloadSpec)

export const SpecError = {
  leaseNameRequired: 'spec.leaseName is required',
  holderIdentityRequired: 'spec.holderIdentity is required',
  ttlPositive: 'spec.ttlSeconds must be positive',
  heartbeatPositive: 'spec.heartbeatIntervalSeconds must be positive',
  heartbeatBelowTtl: 'spec.heartbeatIntervalSeconds must be less than spec.ttlSeconds',
  actionsRequireTarget: 'actions require a target',
  targetNameRequired: 'target name is required',
  managedNeedsActions: 'managed targets require acquireAction and releaseAction',
  cronJobActions: 'CronJobs require acquire suspend=false and release suspend=true',
  unsupportedTarget: 'supported targets are apps/v1 Deployment, StatefulSet, ReplicaSet and batch/v1 CronJob',
  scalableActions: 'scalable targets require scale actions and scale-to-zero release',
} as const;

/** A spec as it may arrive from the API server or a test: every field may be missing. */
export type SpecInput = {
  [K in keyof BerthLeaseSpec]?: BerthLeaseSpec[K] | null;
};

const isSet = <T>(v: T | null | undefined): v is T => v !== undefined && v !== null;

/**
 * The workload rules (§1.2 rules 7-11) for a spec with a target; also used by the admission webhook
 * when it records a target. Returns the first failing rule's message, or undefined.
 */
export function validateWorkloadSpec(spec: SpecInput): string | undefined {
  const target = spec.target;
  if (!isSet(target)) return undefined;
  if (!target.name) return SpecError.targetNameRequired;
  const acquire = spec.acquireAction;
  const release = spec.releaseAction;
  if (!isSet(acquire) || !isSet(release)) return SpecError.managedNeedsActions;
  if (isCronJobTarget(target)) {
    const ok =
      acquire.suspend === false && !isSet(acquire.scale) && release.suspend === true && !isSet(release.scale);
    return ok ? undefined : SpecError.cronJobActions;
  }
  if (!isScalableTarget(target)) return SpecError.unsupportedTarget;
  const ok =
    isSet(acquire.scale) &&
    acquire.scale.replicas >= 0 &&
    !isSet(acquire.suspend) &&
    isSet(release.scale) &&
    release.scale.replicas === 0 &&
    !isSet(release.suspend);
  return ok ? undefined : SpecError.scalableActions;
}

/** §1.2 rules 1-11: the first failing rule's exact message, or undefined when the spec is valid. */
export function validateSpec(spec: SpecInput): string | undefined {
  if (!spec.leaseName) return SpecError.leaseNameRequired;
  if (!spec.holderIdentity) return SpecError.holderIdentityRequired;
  const ttl = spec.ttlSeconds ?? 0;
  const heartbeat = spec.heartbeatIntervalSeconds ?? 0;
  if (ttl <= 0) return SpecError.ttlPositive;
  if (heartbeat <= 0) return SpecError.heartbeatPositive;
  if (heartbeat >= ttl) return SpecError.heartbeatBelowTtl;
  if (!isSet(spec.target)) {
    return isSet(spec.acquireAction) || isSet(spec.releaseAction)
      ? SpecError.actionsRequireTarget
      : undefined;
  }
  return validateWorkloadSpec(spec);
}

/**
 * The default stop lead (`--stop-lead`, docs/behaviour.md §2.3 step 4): an activation ends this long
 * before its recorded deadline, so that the stop (a reconcile, the Pods' bounded grace, the kubelet) is
 * over before the central lease can expire, even with a clock that runs a little slow.
 */
export const DEFAULT_STOP_LEAD_MS = 5_000;

/**
 * `activeAt(now)` (§2.3 step 4), the one definition shared by the reconciler (ownership.ts) and the
 * admission webhook (webhooks/leases.ts): not deleting, a workload record in phase Active whose deadline
 * is more than `stopLeadMs` ahead, and a positive fencing token. Only then may a managed workload run and
 * its Pods be permitted. Go's zero time (`0001-01-01T00:00:00Z`) and anything unparsable count as no
 * deadline. The Go original has no lead (it ends the activation at the deadline itself).
 */
export function workloadActiveAt(
  workload: WorkloadStatus | undefined,
  deleting: boolean,
  now: number,
  stopLeadMs: number,
): boolean {
  if (deleting || workload === undefined || workload.phase !== WorkloadPhase.Active) return false;
  const deadline = workload.deadline ? Date.parse(workload.deadline) : Number.NaN;
  if (!Number.isFinite(deadline) || deadline <= 0) return false;
  return now < deadline - stopLeadMs && (workload.token ?? 0) > 0;
}

/** Holder used at the central API (§2.2): the operator's --cluster-id, else spec.holderIdentity. */
export function holderFor(clusterIdentity: string, spec: Pick<SpecInput, 'holderIdentity'>): string {
  return clusterIdentity !== '' ? clusterIdentity : (spec.holderIdentity ?? '');
}
