// The validating webhook's decision (/validate--v1-pod, docs/injection.md "Validation"): it sees the Pod
// after every mutating webhook ran, so what another injector added after ours is caught here. A
// runtime-singleton Pod must have exactly the two Berth init containers in order, the berth-state emptyDir,
// and the unmodified Berth liveness probe and no startup probe on every main container; no author container
// may mount the state volume writably. On pods/ephemeralcontainers only the state volume rule applies.
// Pure.
import { type AdmissionRequest, allow, type Decision, deny } from '../../webhooks/review.ts';
import { ACQUIRE_CONTAINER, ENV, SIDECAR_CONTAINER, STATE_VOLUME } from './contract.ts';
import { admissionPath, reviewNamespace } from './mutate.ts';
import { parsePod } from './pod.ts';
import { isBerthLivenessProbe } from './probe.ts';
import { REJECTION } from './reasons.ts';
import { optedIn, resolveInjection } from './resolve.ts';
import { isRestartPodRules, MISSING_RULE_HINT } from './restart-pod.ts';
import type { InjectorSettings } from './settings.ts';
import { enforceStateVolume } from './state-mount.ts';

const runtimeContract = (message: string): Decision => deny(REJECTION.runtimeContract, message);

/** The answer of /validate--v1-pod to one review. */
export function decideValidation(request: AdmissionRequest, s: InjectorSettings): Decision {
  const path = admissionPath(request);
  if (path === undefined) return allow();
  const parsed = parsePod(request.object);
  if (!parsed.ok)
    return deny(REJECTION.malformedPod, `malformed Pod in the admission review: ${parsed.problem}`, 400);
  const pod = parsed.pod;
  const namespace = reviewNamespace(request, pod);
  if (s.controlPlaneNamespaces.includes(namespace) || !optedIn(pod)) return allow();
  if (path === 'ephemeral') return enforceStateVolume(pod, s.stateDir, 'ephemeral') ?? allow();
  const resolution = resolveInjection(pod, namespace, s);
  if (!resolution.ok) return deny(REJECTION.invalidAnnotation, resolution.message);
  // The helpers write the state volume; every other container is the author's and must not.
  for (const c of [...pod.spec.containers, ...(pod.spec.initContainers ?? [])]) {
    if (c.name === ACQUIRE_CONTAINER || c.name === SIDECAR_CONTAINER) continue;
    const writable = (c.volumeMounts ?? []).find((m) => m.name === STATE_VOLUME && m.readOnly !== true);
    if (writable !== undefined)
      return deny(
        REJECTION.writableStateMount,
        `cannot admit: container ${JSON.stringify(c.name)} mounts the Berth state volume ${JSON.stringify(STATE_VOLUME)} writably at ${JSON.stringify(writable.mountPath)}; only the injected helpers may write it`,
      );
  }
  if (resolution.resolved.mode !== 'runtime-singleton') return allow();
  const init = pod.spec.initContainers ?? [];
  const [hold, sidecar] = init;
  if (
    init.length !== 2 ||
    hold?.name !== ACQUIRE_CONTAINER ||
    sidecar?.name !== SIDECAR_CONTAINER ||
    (hold.restartPolicy ?? undefined) !== undefined ||
    sidecar.restartPolicy !== 'Always'
  )
    return runtimeContract(
      `cannot admit runtime-singleton: only the injected ${ACQUIRE_CONTAINER} and ${SIDECAR_CONTAINER} init containers are supported; workload init containers and native sidecars cannot be reliably fenced`,
    );
  // Restarting the Pod on a loss is what gates a restarted app: without the rule, or with the sidecar
  // told otherwise, a restarted main container would run unleased.
  if (s.restartPodOnLoss) {
    if (!isRestartPodRules(sidecar.restartPolicyRules))
      return runtimeContract(
        `cannot admit runtime workload: ${SIDECAR_CONTAINER} must keep the injected RestartAllContainers restartPolicyRules (--injection-restart-pod-on-loss); ${MISSING_RULE_HINT}`,
      );
    const env = (sidecar.env ?? []).filter((e) => e.name === ENV.restartPodOnLoss);
    if (env.length !== 1 || env[0]?.value !== 'true')
      return runtimeContract(
        `cannot admit runtime workload: ${SIDECAR_CONTAINER} must keep ${ENV.restartPodOnLoss}=true (--injection-restart-pod-on-loss)`,
      );
  }
  if (pod.spec.hostNetwork === true)
    return runtimeContract(
      'cannot admit runtime workload: hostNetwork puts the berth-sidecar probe port on the node, where it could answer for another pod',
    );
  const states = (pod.spec.volumes ?? []).filter((v) => v.name === STATE_VOLUME);
  if (states.length === 0)
    return runtimeContract('cannot admit runtime workload: Berth state volume is missing');
  if (states.some((v) => (v.emptyDir ?? undefined) === undefined))
    return runtimeContract('cannot admit runtime workload: Berth state volume must remain an emptyDir');
  for (const c of pod.spec.containers) {
    if (
      (c.startupProbe ?? undefined) !== undefined ||
      !isBerthLivenessProbe(c.livenessProbe, s.probePort, resolution.resolved.enforceGraceSeconds)
    )
      return runtimeContract(
        `cannot admit runtime container ${JSON.stringify(c.name)}: the unmodified Berth liveness probe is required and startup probes are unsupported`,
      );
  }
  return allow();
}
