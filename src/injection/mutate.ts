// The mutating webhook's decision (/mutate--v1-pod, docs/injection.md "What is injected"): an opted-in Pod
// gets the berth-state volume, the blocking berth-acquire init container and, in runtime-singleton mode, the
// berth-sidecar native sidecar and the Berth liveness probe on every main container. The answer is a JSON
// Patch from the Pod as received to the Pod as injected. On `kubectl debug` (pods/ephemeralcontainers) the
// Pod is only checked, never injected again. Whether a Pod was injected is decided by the admission path,
// never by the Pod's berth.skaphos.io/injected annotation, which its author controls. Pure.
import jsonpatch from 'fast-json-patch';
import { type AdmissionRequest, allow, type Decision, deny } from '../../webhooks/review.ts';
import type { JsonPatchOp } from '../kube/client.ts';
import {
  ACQUIRE_CONTAINER,
  ANNOTATIONS,
  AUTH_CA_VOLUME,
  AUTH_TOKEN_VOLUME,
  ENV,
  HELPER_ACQUIRE_ARGS,
  HELPER_RENEW_ARGS,
  SIDECAR_CONTAINER,
  STATE_VOLUME,
} from './contract.ts';
import { type Container, type Pod, parsePod, type VolumeMount } from './pod.ts';
import { berthLivenessProbe, berthSidecarStartupProbe } from './probe.ts';
import { REJECTION } from './reasons.ts';
import { optedIn, type Resolved, resolveInjection } from './resolve.ts';
import { restartPodRules } from './restart-pod.ts';
import type { InjectorSettings } from './settings.ts';
import { type AdmissionPath, enforceStateVolume } from './state-mount.ts';

const EPHEMERAL_CONTAINERS = 'ephemeralcontainers';

/** The path a Pod review arrives on, or undefined for one injection does not act on (an UPDATE, a DELETE). */
export function admissionPath(request: AdmissionRequest): AdmissionPath | undefined {
  if (request.subResource === EPHEMERAL_CONTAINERS) return 'ephemeral';
  if ((request.subResource ?? '') === '' && request.operation === 'CREATE') return 'create';
  return undefined;
}

/** The authoritative namespace: the request's (a Pod being created often has none of its own). */
export const reviewNamespace = (request: AdmissionRequest, pod: Pod): string =>
  request.namespace || pod.metadata?.namespace || '';

const hasContainer = (pod: Pod, name: string): boolean =>
  [...pod.spec.containers, ...(pod.spec.initContainers ?? [])].some((c) => c.name === name);
const hasVolume = (pod: Pod, name: string): boolean => (pod.spec.volumes ?? []).some((v) => v.name === name);

/** Why the Pod cannot be injected safely, or undefined (Go's preflight, plus the probe port rules). */
export function preflightProblem(pod: Pod, r: Resolved, s: InjectorSettings): string | undefined {
  const runtime = r.mode === 'runtime-singleton';
  for (const name of runtime ? [ACQUIRE_CONTAINER, SIDECAR_CONTAINER] : [ACQUIRE_CONTAINER])
    if (hasContainer(pod, name))
      return `cannot inject: pod already has a container named ${JSON.stringify(name)}`;
  // Enforcement covers the regular containers only: an author's init container or native sidecar would
  // run unfenced. Every init container here is the author's (the helpers are added below).
  const firstInit = pod.spec.initContainers?.[0];
  if (runtime && firstInit !== undefined)
    return `cannot inject runtime-singleton: workload init container ${JSON.stringify(firstInit.name)} is unsupported; init containers and native sidecars cannot be reliably fenced`;
  if (
    (pod.spec.volumes ?? []).some((v) => v.name === STATE_VOLUME && (v.emptyDir ?? undefined) === undefined)
  )
    return `cannot inject: pod already has a volume named ${JSON.stringify(STATE_VOLUME)} that is not an emptyDir`;
  if (s.apiKeySecret !== '' && hasVolume(pod, AUTH_TOKEN_VOLUME))
    return `cannot inject: pod already has a volume named ${JSON.stringify(AUTH_TOKEN_VOLUME)} (reserved for the injected auth token)`;
  if (s.caBundleConfigMap !== '' && hasVolume(pod, AUTH_CA_VOLUME))
    return `cannot inject: pod already has a volume named ${JSON.stringify(AUTH_CA_VOLUME)} (reserved for the injected CA bundle)`;
  if (!runtime) return undefined;
  // The probe goes to the Pod's IP: on the node's network it could reach another Pod's sidecar.
  if (pod.spec.hostNetwork === true)
    return "cannot inject runtime enforcement: the pod uses hostNetwork, where the berth-sidecar probe port would be the node's and could answer for another pod";
  for (const c of pod.spec.containers) {
    if (c.livenessProbe !== undefined && c.livenessProbe !== null)
      return `cannot inject runtime enforcement: container ${JSON.stringify(c.name)} already defines a livenessProbe; Berth must own the liveness probe in both probe and signal modes`;
    if (c.startupProbe !== undefined && c.startupProbe !== null)
      return `cannot inject runtime enforcement: container ${JSON.stringify(c.name)} defines a startupProbe that can delay Berth liveness enforcement`;
  }
  for (const c of pod.spec.containers)
    if ((c.ports ?? []).some((p) => p.containerPort === s.probePort))
      return `cannot inject runtime enforcement: container ${JSON.stringify(c.name)} declares port ${s.probePort}, where the berth-sidecar serves the liveness probe (--injection-probe-port)`;
  return undefined;
}

type EnvVar = {
  name: string;
  value?: string;
  valueFrom?: { fieldRef: { fieldPath: string } };
};

/** The helpers' environment, in the Go webhook's order (docs/injection.md lists it). */
export function helperEnv(r: Resolved, s: InjectorSettings): EnvVar[] {
  const fieldRef = (name: string, fieldPath: string): EnvVar => ({
    name,
    valueFrom: { fieldRef: { fieldPath } },
  });
  const env: EnvVar[] = [
    { name: ENV.leaseName, value: r.leaseName },
    { name: ENV.leaseNamespace, value: r.leaseNamespace },
    { name: ENV.mode, value: r.mode },
    { name: ENV.enforce, value: r.enforce },
    { name: ENV.ttlSeconds, value: String(r.ttlSeconds) },
    { name: ENV.stateDir, value: s.stateDir },
    fieldRef(ENV.podNamespace, 'metadata.namespace'),
    fieldRef(ENV.podName, 'metadata.name'),
    fieldRef(ENV.podUid, 'metadata.uid'),
  ];
  const add = (when: boolean, name: string, value: string): void => {
    if (when) env.push({ name, value });
  };
  add(r.signalTarget !== '' && r.enforce === 'signal', ENV.signalTarget, r.signalTarget);
  add(r.heartbeatSeconds > 0, ENV.heartbeatSeconds, String(r.heartbeatSeconds));
  add(r.enforceGraceSeconds > 0, ENV.enforceGraceSeconds, String(r.enforceGraceSeconds));
  add(r.releaseOnShutdown !== '', ENV.releaseOnShutdown, r.releaseOnShutdown);
  add(r.holderIdentity !== '', ENV.holderIdentity, r.holderIdentity);
  add(r.workloadKind !== '', ENV.workloadKind, r.workloadKind);
  add(r.workloadName !== '', ENV.workloadName, r.workloadName);
  add(s.clusterId !== '', ENV.clusterId, s.clusterId);
  add(s.apiServer !== '', ENV.apiServer, s.apiServer);
  add(s.apiKeyFile !== '', ENV.apiKeyFile, s.apiKeyFile);
  add(s.caBundleFile !== '', ENV.caBundleFile, s.caBundleFile);
  add(s.serverName !== '', ENV.serverName, s.serverName);
  add(s.insecureSkipTlsVerify, ENV.insecureSkipTlsVerify, 'true');
  add(r.mode === 'runtime-singleton', ENV.probePort, String(s.probePort));
  add(r.mode === 'runtime-singleton' && s.restartPodOnLoss, ENV.restartPodOnLoss, 'true');
  return env;
}

const dirname = (file: string): string => file.slice(0, file.lastIndexOf('/'));
const basename = (file: string): string => file.slice(file.lastIndexOf('/') + 1);

/** The token and CA volumes (when their sources are configured) and their read-only mounts. */
type Volume = NonNullable<Pod['spec']['volumes']>[number];

function authVolumes(s: InjectorSettings): { volumes: Volume[]; mounts: VolumeMount[] } {
  const volumes: Volume[] = [];
  const mounts: VolumeMount[] = [];
  if (s.apiKeySecret !== '') {
    volumes.push({
      name: AUTH_TOKEN_VOLUME,
      secret: {
        secretName: s.apiKeySecret,
        items: [{ key: s.apiKeySecretKey, path: basename(s.apiKeyFile) }],
      },
    });
    mounts.push({ name: AUTH_TOKEN_VOLUME, mountPath: dirname(s.apiKeyFile), readOnly: true });
  }
  if (s.caBundleConfigMap !== '') {
    volumes.push({
      name: AUTH_CA_VOLUME,
      configMap: {
        name: s.caBundleConfigMap,
        items: [{ key: s.caBundleKey, path: basename(s.caBundleFile) }],
      },
    });
    mounts.push({ name: AUTH_CA_VOLUME, mountPath: dirname(s.caBundleFile), readOnly: true });
  }
  return { volumes, mounts };
}

/** Injects `pod` in place (resolve and preflight have passed). */
export function inject(pod: Pod, r: Resolved, s: InjectorSettings): void {
  const spec = pod.spec;
  const volumes = [...(spec.volumes ?? [])];
  if (!hasVolume(pod, STATE_VOLUME)) volumes.push({ name: STATE_VOLUME, emptyDir: {} });
  const auth = authVolumes(s);
  volumes.push(...auth.volumes);
  spec.volumes = volumes;
  const env = helperEnv(r, s);
  const volumeMounts: VolumeMount[] = [{ name: STATE_VOLUME, mountPath: s.stateDir }, ...auth.mounts];
  const helper = { image: s.helperImage, imagePullPolicy: s.imagePullPolicy, env, volumeMounts };
  const injected: Container[] = [{ name: ACQUIRE_CONTAINER, args: [...HELPER_ACQUIRE_ARGS], ...helper }];
  if (r.mode === 'runtime-singleton') {
    // A native sidecar: runs beside the main containers and does not hold up a Job's completion.
    injected.push({
      name: SIDECAR_CONTAINER,
      args: [...HELPER_RENEW_ARGS],
      ...helper,
      restartPolicy: 'Always',
      ports: [{ containerPort: s.probePort, protocol: 'TCP' }],
      startupProbe: berthSidecarStartupProbe(s.probePort, r.ttlSeconds),
      ...(s.restartPodOnLoss ? { restartPolicyRules: restartPodRules() } : {}),
    });
  }
  // First: the hold gates the whole start-up, startup-gate's author init containers included.
  spec.initContainers = [...injected, ...(spec.initContainers ?? [])];
  if (r.mode === 'runtime-singleton') {
    if (r.enforce === 'signal') spec.shareProcessNamespace = true;
    // In signal mode too: the kubelet's restart is the fallback when signalling fails or the sidecar dies.
    for (const c of spec.containers) c.livenessProbe = berthLivenessProbe(s.probePort, r.enforceGraceSeconds);
  }
  const metadata = pod.metadata ?? {};
  metadata.annotations = { ...metadata.annotations, [ANNOTATIONS.injected]: 'true' };
  pod.metadata = metadata;
}

const malformed = (problem: string): Decision =>
  deny(REJECTION.malformedPod, `malformed Pod in the admission review: ${problem}`, 400);

/** The JSON Patch from `before` (the raw object) to `after` (a plain JSON value). */
function patchBetween(before: unknown, after: Pod): JsonPatchOp[] {
  return jsonpatch.compare(before as object, JSON.parse(JSON.stringify(after)) as object) as JsonPatchOp[];
}

/** The answer of /mutate--v1-pod to one review. */
export function decideInjection(request: AdmissionRequest, s: InjectorSettings): Decision {
  const path = admissionPath(request);
  if (path === undefined) return allow();
  const parsed = parsePod(request.object);
  if (!parsed.ok) return malformed(parsed.problem);
  const pod = parsed.pod;
  if (s.controlPlaneNamespaces.includes(reviewNamespace(request, pod)) || !optedIn(pod)) return allow();
  const denied = enforceStateVolume(pod, s.stateDir, path);
  if (denied !== undefined) return denied;
  // A debug container never re-injects: the Pod was mutated when it was created.
  if (path === 'ephemeral') return allow();
  const resolution = resolveInjection(pod, reviewNamespace(request, pod), s);
  if (!resolution.ok) return deny(REJECTION.invalidAnnotation, resolution.message);
  const problem = preflightProblem(pod, resolution.resolved, s);
  if (problem !== undefined) return deny(REJECTION.cannotInject, problem);
  inject(pod, resolution.resolved, s);
  return allow({ patch: patchBetween(request.object, pod) });
}
