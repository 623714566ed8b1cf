// The node taint guard: re-arms the agent-not-ready startup taint on nodes whose agent pod exists but
// has not been Ready for the grace period; never removes it. See controller.ts for the wiring.
export {
  DEFAULT_FIELD_MANAGER,
  type GuardTaint,
  NO_EXECUTE_REFUSED,
  type NodeTaintConfig,
  nodeTaintFlags,
  parseNodeTaintConfig,
} from './config.ts';
export {
  isAgentPod,
  NodeTaintGuard,
  type NodeTaintGuardOptions,
  POD_NODE_INDEX,
  podToNode,
} from './controller.ts';
export { decideTaint, type GraceMemory, type TaintDecision } from './decide.ts';
export { NODE_EVENTS_NAMESPACE, type NodeTaintRbac, nodeTaintRbac, nodeTaintRbacObjects } from './rbac.ts';
export { CONTROLLER_NAME, NodeTaintReconciler, REARM_EVENT_REASON } from './reconciler.ts';
export { type ArmResult, armTaint, type NodeApi, nodeApi } from './taint.ts';
