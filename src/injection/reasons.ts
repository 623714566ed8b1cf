// The `reason` label of berth_webhook_admission_rejections_total for injection denials. The two state-mount
// reasons are the Go operator's, so its dashboards keep working.
export const REJECTION = {
  writableStateMount: 'writable_state_mount',
  writableStateMountEphemeral: 'writable_state_mount_ephemeral',
  invalidAnnotation: 'invalid_annotation',
  cannotInject: 'cannot_inject',
  runtimeContract: 'runtime_contract',
  malformedPod: 'malformed_pod',
} as const;
