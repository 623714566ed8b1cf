// BerthLease status, pure: metav1.Time formatting, meta.SetStatusCondition, and the status the
// reconciler writes in each outcome of docs/behaviour.md §2.3-§2.5 (held, waiting, acquire
// failed, invalid spec, admission required, stopping, stopped) plus one the original lacks: a held
// lease-only status whose central expiry passed during an outage (`Expired`).
//
// Every builder takes the current status and returns a new one: fields it does not own (the workload
// record, `tenant`) are carried over, and `observedGeneration` (status and conditions) is stamped.
import {
  type BerthLeaseStatus,
  type Condition,
  ConditionMessage,
  ConditionReason,
  ConditionType,
  LeaseState,
  type WorkloadStatus,
} from './api.ts';

/** Reason of `Acquired=False` when a held lease-only lease passed its expiry without renewal. */
export const EXPIRED_REASON = 'Expired';

/** Message of `Acquired=False/Expired`. */
export const expiredMessage = (expiresAt: string): string => `lease expired at ${expiresAt} without renewal`;

/** metav1.Time as Go marshals it: RFC 3339 in UTC at whole seconds (truncated). */
export function formatTime(ms: number): string {
  return new Date(Math.floor(ms / 1000) * 1000).toISOString().replace(/\.\d{3}Z$/, 'Z');
}

/** A status timestamp to epoch ms; undefined when absent or unreadable. */
export function parseTime(text: string | undefined): number | undefined {
  if (text === undefined || text === '') return undefined;
  const ms = Date.parse(text);
  return Number.isNaN(ms) ? undefined : ms;
}

export interface ConditionInput {
  type: string;
  status: 'True' | 'False' | 'Unknown';
  reason: string;
  message: string;
}

/**
 * meta.SetStatusCondition: adds or updates the condition of `input.type`. `lastTransitionTime` is set
 * to `now` when the condition is new or its status flips, and kept otherwise; reason, message and
 * `observedGeneration` are always written. Returns a new array (order kept, new conditions last).
 */
export function setCondition(
  conditions: readonly Condition[] | undefined,
  input: ConditionInput,
  now: number,
  generation: number | undefined,
): Condition[] {
  const list = [...(conditions ?? [])];
  const i = list.findIndex((c) => c.type === input.type);
  const existing = i < 0 ? undefined : list[i];
  const next: Condition = {
    type: input.type,
    status: input.status,
    ...(generation === undefined ? {} : { observedGeneration: generation }),
    lastTransitionTime:
      existing !== undefined && existing.status === input.status
        ? existing.lastTransitionTime
        : formatTime(now),
    reason: input.reason,
    message: input.message,
  };
  if (i < 0) list.push(next);
  else list[i] = next;
  return list;
}

export function findCondition(status: BerthLeaseStatus | undefined, type: string): Condition | undefined {
  return status?.conditions?.find((c) => c.type === type);
}

/** When and for which object generation a status is written. */
export interface StatusStamp {
  now: number;
  /** `metadata.generation` of the BerthLease. */
  generation: number | undefined;
}

type TimeField = 'acquiredAt' | 'expiresAt';

function stamped(status: BerthLeaseStatus | undefined, stamp: StatusStamp): BerthLeaseStatus {
  const next: BerthLeaseStatus = { ...(status ?? {}) };
  if (stamp.generation !== undefined) next.observedGeneration = stamp.generation;
  return next;
}

function withTime(status: BerthLeaseStatus, field: TimeField, ms: number | undefined): void {
  if (ms === undefined) delete status[field];
  else status[field] = formatTime(ms);
}

function withConditions(
  status: BerthLeaseStatus,
  stamp: StatusStamp,
  ...inputs: ConditionInput[]
): BerthLeaseStatus {
  let conditions = status.conditions;
  for (const input of inputs) conditions = setCondition(conditions, input, stamp.now, stamp.generation);
  return { ...status, conditions };
}

export interface HeldInput {
  holder: string;
  fencingToken: number;
  /** Epoch ms from the central answer; undefined when it sent the zero time. */
  acquiredAt: number | undefined;
  expiresAt: number | undefined;
  /** The workload record to write with it (managed targets); undefined keeps the current one. */
  workload?: WorkloadStatus;
}

/** §2.3 step 13: `held`, our holder and token, the central times, lastHeartbeat=now. */
export function heldStatus(
  status: BerthLeaseStatus | undefined,
  held: HeldInput,
  stamp: StatusStamp,
): BerthLeaseStatus {
  const next = stamped(status, stamp);
  next.leaseState = LeaseState.Held;
  next.currentHolder = held.holder;
  next.fencingToken = held.fencingToken;
  withTime(next, 'acquiredAt', held.acquiredAt);
  withTime(next, 'expiresAt', held.expiresAt);
  next.lastHeartbeat = formatTime(stamp.now);
  if (held.workload !== undefined) next.workload = held.workload;
  return withConditions(
    next,
    stamp,
    {
      type: ConditionType.Acquired,
      status: 'True',
      reason: ConditionReason.Held,
      message: ConditionMessage.held(held.fencingToken),
    },
    {
      type: ConditionType.HeartbeatHealthy,
      status: 'True',
      reason: ConditionReason.Heartbeating,
      message: ConditionMessage.renewed,
    },
  );
}

export interface OtherHolder {
  /** The current holder ("" for none, e.g. a released lease). */
  holder: string;
  expiresAt: number | undefined;
}

/** §2.3 step 9 (lease-only standby): `waiting`, token 0, the other holder and its expiry. */
export function waitingStatus(
  status: BerthLeaseStatus | undefined,
  other: OtherHolder,
  stamp: StatusStamp,
): BerthLeaseStatus {
  const next = stamped(status, stamp);
  next.leaseState = LeaseState.Waiting;
  next.fencingToken = 0;
  next.currentHolder = other.holder;
  withTime(next, 'expiresAt', other.expiresAt);
  delete next.acquiredAt;
  return withConditions(
    next,
    stamp,
    {
      type: ConditionType.Acquired,
      status: 'False',
      reason: ConditionReason.HeldByOther,
      message: ConditionMessage.heldByOther(other.holder),
    },
    {
      type: ConditionType.HeartbeatHealthy,
      status: 'True',
      reason: ConditionReason.Standby,
      message: ConditionMessage.standby,
    },
  );
}

/** `HeartbeatHealthy=False` with `reason`; state, token and Acquired untouched. */
function heartbeatUnhealthy(
  status: BerthLeaseStatus | undefined,
  reason: ConditionReason,
  message: string,
  stamp: StatusStamp,
): BerthLeaseStatus {
  return withConditions(stamped(status, stamp), stamp, {
    type: ConditionType.HeartbeatHealthy,
    status: 'False',
    reason,
    message,
  });
}

/**
 * Not in the original: `HeartbeatHealthy=False/TargetUnverified` while an Active target cannot be read;
 * the ownership is not renewed, so the workload stops at its deadline unless a read succeeds first.
 */
export function targetUnverifiedStatus(
  status: BerthLeaseStatus | undefined,
  message: string,
  stamp: StatusStamp,
): BerthLeaseStatus {
  return heartbeatUnhealthy(
    status,
    ConditionReason.TargetUnverified,
    `target not verified: ${message}`,
    stamp,
  );
}

/** §2.3 step 8: only `HeartbeatHealthy=False/AcquireFailed`; state, token and Acquired untouched. */
export function acquireFailedStatus(
  status: BerthLeaseStatus | undefined,
  message: string,
  stamp: StatusStamp,
): BerthLeaseStatus {
  return heartbeatUnhealthy(status, ConditionReason.AcquireFailed, message, stamp);
}

/**
 * Beyond the original: a held lease-only lease whose central expiry passed while the central API
 * could not be reached no longer claims to hold it (the other cluster may hold it by now): `waiting`,
 * token 0, holder unknown (""), `Acquired=False/Expired`, and `HeartbeatHealthy=False/AcquireFailed`.
 */
export function expiredStatus(
  status: BerthLeaseStatus | undefined,
  acquireError: string,
  stamp: StatusStamp,
): BerthLeaseStatus {
  const next = stamped(status, stamp);
  const expiresAt = next.expiresAt ?? formatTime(stamp.now);
  next.leaseState = LeaseState.Waiting;
  next.fencingToken = 0;
  next.currentHolder = '';
  delete next.acquiredAt;
  return withConditions(
    next,
    stamp,
    {
      type: ConditionType.Acquired,
      status: 'False',
      reason: EXPIRED_REASON,
      message: expiredMessage(expiresAt),
    },
    {
      type: ConditionType.HeartbeatHealthy,
      status: 'False',
      reason: ConditionReason.AcquireFailed,
      message: acquireError,
    },
  );
}

/** §2.3 step 5: `Acquired=False/InvalidSpec` with the validation error; nothing else changes. */
export function invalidSpecStatus(
  status: BerthLeaseStatus | undefined,
  message: string,
  stamp: StatusStamp,
): BerthLeaseStatus {
  return withConditions(stamped(status, stamp), stamp, {
    type: ConditionType.Acquired,
    status: 'False',
    reason: ConditionReason.InvalidSpec,
    message,
  });
}

/** §2.3 step 6: `Acquired=False/AdmissionRequired` with the verification error. */
export function admissionRequiredStatus(
  status: BerthLeaseStatus | undefined,
  message: string,
  stamp: StatusStamp,
): BerthLeaseStatus {
  return withConditions(stamped(status, stamp), stamp, {
    type: ConditionType.Acquired,
    status: 'False',
    reason: ConditionReason.AdmissionRequired,
    message,
  });
}

/**
 * §2.4 step 1 (managed): the workload record in phase Stopping (created from the recorded central
 * identity when absent), `HeartbeatHealthy=False/Stopping`, `Acquired=False/Stopping`.
 */
export function stoppingStatus(
  status: BerthLeaseStatus | undefined,
  leaseName: string,
  stamp: StatusStamp,
): BerthLeaseStatus {
  const next = stamped(status, stamp);
  const w: WorkloadStatus = next.workload ?? {
    targetUID: '',
    leaseName,
    holder: next.currentHolder ?? '',
    token: next.fencingToken ?? 0,
  };
  next.workload = { ...w, phase: 'Stopping' };
  return withConditions(
    next,
    stamp,
    {
      type: ConditionType.HeartbeatHealthy,
      status: 'False',
      reason: ConditionReason.Stopping,
      message: ConditionMessage.stoppingHeartbeat,
    },
    {
      type: ConditionType.Acquired,
      status: 'False',
      reason: ConditionReason.Stopping,
      message: ConditionMessage.stoppingAcquired,
    },
  );
}

/**
 * §2.4 step 4 (released, not deleting): the workload record reset (targetUID kept), `waiting`, token
 * 0, no holder or times, `Acquired=False/Stopped`. HeartbeatHealthy stays as it is.
 */
export function stoppedStatus(status: BerthLeaseStatus | undefined, stamp: StatusStamp): BerthLeaseStatus {
  const next = stamped(status, stamp);
  if (next.workload !== undefined) {
    next.workload = { targetUID: next.workload.targetUID, phase: '', leaseName: '', holder: '', token: 0 };
  }
  next.leaseState = LeaseState.Waiting;
  next.fencingToken = 0;
  next.currentHolder = '';
  delete next.expiresAt;
  delete next.acquiredAt;
  return withConditions(next, stamp, {
    type: ConditionType.Acquired,
    status: 'False',
    reason: ConditionReason.Stopped,
    message: ConditionMessage.stopped,
  });
}

/** Whether a status claims this cluster holds the lease. */
export const claimsHeld = (status: BerthLeaseStatus | undefined): boolean =>
  status?.leaseState === LeaseState.Held && (status.fencingToken ?? 0) > 0;
