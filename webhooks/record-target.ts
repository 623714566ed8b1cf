// recordTarget (docs/behaviour.md §4.4 step 7e): at the final (validating) CREATE of a lease's target, record the UID the API
// server assigned in the lease's status.workload.targetUID. That record, not any annotation, is what the
// reconciler later trusts. Never written on dry-run; a write conflict is retried from a fresh read.
import { validateWorkloadSpec } from '../src/berth/api.ts';
import { isConflict } from '../src/kube/client.ts';
import { denyWith } from './decide-validate.ts';
import type { AdmissionIO, JsonObject } from './io.ts';
import {
  hasCleanupResponsibility,
  leaseFacts,
  leaseSpec,
  type ObjectRef,
  type ReviewLeases,
  targets,
} from './leases.ts';
import { apiErrorMessage, type Binding } from './resolve.ts';
import { allow, type Decision, deny } from './review.ts';
import type { ReviewKind } from './workload.ts';

/** Attempts of the read-check-write cycle when the status write loses a race. */
export const RECORD_TARGET_ATTEMPTS = 3;

export interface RecordTargetInput {
  io: AdmissionIO;
  leases: ReviewLeases;
  namespace: string;
  binding: Binding;
  /** The object being created (apiVersion and kind from the request). */
  object: ObjectRef & { kind: string; uid: string };
  workloadKind: ReviewKind;
  dryRun: boolean;
}

const isRecord = (v: unknown): v is JsonObject => typeof v === 'object' && v !== null && !Array.isArray(v);

function withTargetRecord(raw: JsonObject, targetUID: string): JsonObject {
  const status = isRecord(raw.status) ? raw.status : {};
  return { ...raw, status: { ...status, workload: { targetUID } } };
}

export async function recordTarget(input: RecordTargetInput): Promise<Decision> {
  const { io, leases, namespace, binding, object } = input;
  let checkedAbsent = false;
  for (let attempt = 1; attempt <= RECORD_TARGET_ATTEMPTS; attempt++) {
    let raw: JsonObject | undefined;
    try {
      raw = await leases.get(binding.name);
    } catch (err) {
      return deny('api-error', `get BerthLease ${JSON.stringify(binding.name)}: ${apiErrorMessage(err)}`);
    }
    const lease = raw === undefined ? undefined : leaseFacts(raw);
    if (raw === undefined || lease === undefined || lease.uid !== binding.uid || lease.deleting) {
      return denyWith('leaseDeletedOrReplaced');
    }
    // A descendant (a Deployment's ReplicaSet, a CronJob's Job, any Pod) is not the target.
    if (!targets(lease, object)) return allow();
    const specError = validateWorkloadSpec(leaseSpec(raw));
    if (specError !== undefined) return deny('invalid-target-spec', specError);
    if (object.uid === '') return denyWith('targetNeedsUID');
    if (hasCleanupResponsibility(raw)) return denyWith('cleanupActive');
    if (!checkedAbsent) {
      let existing: JsonObject | undefined;
      try {
        existing = await io.getWorkload(input.workloadKind, namespace, object.name);
      } catch (err) {
        return deny('api-error', `get target ${JSON.stringify(object.name)}: ${apiErrorMessage(err)}`);
      }
      if (existing !== undefined) return denyWith('targetExists');
      checkedAbsent = true;
    }
    if (input.dryRun) return allow();
    try {
      await io.updateLeaseStatus(withTargetRecord(raw, object.uid));
      return allow();
    } catch (err) {
      if (!isConflict(err)) {
        return deny('api-error', `record target UID in BerthLease status: ${apiErrorMessage(err)}`);
      }
      leases.invalidate();
    }
  }
  return deny(
    'api-error',
    `record target UID in BerthLease status: conflicting writes after ${RECORD_TARGET_ATTEMPTS} attempts`,
  );
}
