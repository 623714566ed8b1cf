// Restarting the whole Pod on a lease loss (`--injection-restart-pod-on-loss`, docs/injection.md
// "Restarting the Pod on a loss"). The kubelet restarts a main container that the liveness probe killed on
// its own, without waiting for any sidecar, so a Pod that lost its lease would run its app again for a
// probe period at each restart. With a container restart rule of action RestartAllContainers on
// berth-sidecar, the sidecar exits with a reserved code instead, and the kubelet kills every container
// without grace and runs the init containers again, berth-acquire first: no main container runs until the
// lease is won again. The rule needs Kubernetes 1.36 (feature gates ContainerRestartRules and
// RestartAllContainersOnContainerExits, beta and on by default there). Shared by the webhook (what it
// injects and requires) and the helper (when it exits), so the two cannot disagree. Pure.
import { jsonEqual } from './probe.ts';

/** berth-sidecar's exit code when its lease is lost: only this code restarts the Pod's containers. */
export const RESTART_POD_EXIT_CODE = 86;

export interface ContainerRestartRule {
  action: 'RestartAllContainers';
  exitCodes: { operator: 'In'; values: number[] };
}

/**
 * The rule on berth-sidecar. Only the reserved code: a sidecar that crashes or that the kubelet stops at
 * a Job's end must not restart a Pod's containers (a restarted sidecar exits with the code itself, as it
 * finds no lease handoff to adopt: docs/helper.md).
 */
export const restartPodRules = (): ContainerRestartRule[] => [
  { action: 'RestartAllContainers', exitCodes: { operator: 'In', values: [RESTART_POD_EXIT_CODE] } },
];

/** Whether a container's restartPolicyRules are exactly the injected ones. */
export const isRestartPodRules = (rules: unknown): boolean => jsonEqual(rules, restartPodRules());

/** Why the rule is missing from an admitted sidecar, for the validating webhook's denial. */
export const MISSING_RULE_HINT =
  'the API server drops restartPolicyRules while its ContainerRestartRules feature gate is off (Kubernetes before 1.35, or turned off): enable it and RestartAllContainersOnContainerExits, or turn --injection-restart-pod-on-loss off';
