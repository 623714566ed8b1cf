// The `reason` of injection denials (berth_webhook_denials_total). The two state-mount reasons are the Go
// operator's, and only they count in its berth_webhook_admission_rejections_total (webhooks/metrics.ts).
import { STATE_MOUNT_REASONS } from '../../webhooks/metrics.ts';

export const REJECTION = {
  ...STATE_MOUNT_REASONS,
  invalidAnnotation: 'invalid_annotation',
  cannotInject: 'cannot_inject',
  runtimeContract: 'runtime_contract',
  malformedPod: 'malformed_pod',
} as const;
