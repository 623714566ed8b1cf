// Resolution of an opted-in Pod's annotations against the operator defaults (docs/injection.md,
// "Annotations"): the validated per-Pod configuration, or a message naming the annotation that is wrong.
// Messages are the Go operator's. Pure.
import { formatDuration } from '../cli.ts';
import {
  ANNOTATIONS,
  ENFORCEMENTS,
  type Enforcement,
  INJECT_LABEL,
  INJECT_VALUE,
  type InjectionMode,
  type LeaseSettings,
  MODES,
} from './contract.ts';
import { describeLead, enforcementLeadMs, heartbeatMsOf, renewCycleFits } from './enforcement.ts';
import { controllerOwner, type Pod } from './pod.ts';

export interface InjectionDefaults {
  defaultMode: InjectionMode;
  defaultEnforce: Enforcement;
  defaultTtlSeconds: number;
  /** `--injection-restart-pod-on-loss`: it sets a floor under the enforcement lead. */
  restartPodOnLoss: boolean;
}

export interface Resolved extends LeaseSettings {
  /** 0: the helper derives ttl/3. */
  heartbeatSeconds: number;
  /** 0: the helper's default. */
  enforceGraceSeconds: number;
  /** '' (the mode's default), 'true' or 'false'. */
  releaseOnShutdown: '' | 'true' | 'false';
  holderIdentity: string;
  workloadKind: string;
  workloadName: string;
}

export type Resolution = { ok: true; resolved: Resolved } | { ok: false; message: string };

const MAX_TTL_SECONDS = 2_147_483_647;

/** Go's strconv.Atoi: an optional sign and decimal digits, nothing else. */
const INTEGER = /^[+-]?\d+$/;

type IntAnnotation = { ok: true; value: number } | { ok: false; message: string };

function intAnnotation(annotations: Record<string, string>, key: string, fallback: number): IntAnnotation {
  const raw = annotations[key];
  if (raw === undefined || raw === '') return { ok: true, value: fallback };
  const value = Number(raw);
  if (!INTEGER.test(raw) || !Number.isSafeInteger(value))
    return { ok: false, message: `invalid ${key} ${JSON.stringify(raw)}: must be an integer` };
  return { ok: true, value };
}

const fail = (message: string): Resolution => ({ ok: false, message });

/** Whether the Pod opted in (the label on its template, copied onto the Pod). */
export const optedIn = (pod: Pod): boolean => pod.metadata?.labels?.[INJECT_LABEL] === INJECT_VALUE;

/** The Pod's configuration: annotations over `defaults`, lease namespace defaulting to `namespace`. */
export function resolveInjection(pod: Pod, namespace: string, defaults: InjectionDefaults): Resolution {
  const ann = pod.metadata?.annotations ?? {};
  const leaseName = ann[ANNOTATIONS.leaseName] ?? '';
  if (leaseName === '')
    return fail(`${ANNOTATIONS.leaseName} is required when ${INJECT_LABEL}=${INJECT_VALUE}`);
  const mode = ann[ANNOTATIONS.mode] || defaults.defaultMode;
  if (!(MODES as readonly string[]).includes(mode))
    return fail(`invalid ${ANNOTATIONS.mode} ${JSON.stringify(mode)}`);
  const enforce = ann[ANNOTATIONS.enforce] || defaults.defaultEnforce;
  if (!(ENFORCEMENTS as readonly string[]).includes(enforce))
    return fail(`invalid ${ANNOTATIONS.enforce} ${JSON.stringify(enforce)}`);
  const signalTarget = ann[ANNOTATIONS.signalTarget] ?? '';
  if (mode === 'runtime-singleton' && enforce === 'signal' && signalTarget === '')
    return fail(
      `${ANNOTATIONS.signalTarget} is required when ${ANNOTATIONS.mode}=runtime-singleton and ${ANNOTATIONS.enforce}=signal: an empty target signals every process in the shared PID namespace, which can terminate co-located sidecars; set it to the workload's process name (comm or executable basename)`,
    );
  const ttl = intAnnotation(ann, ANNOTATIONS.ttlSeconds, defaults.defaultTtlSeconds);
  if (!ttl.ok) return ttl;
  const heartbeat = intAnnotation(ann, ANNOTATIONS.heartbeatSeconds, 0);
  if (!heartbeat.ok) return heartbeat;
  const grace = intAnnotation(ann, ANNOTATIONS.enforceGraceSeconds, 0);
  if (!grace.ok) return grace;
  if (ttl.value <= 0 || ttl.value > MAX_TTL_SECONDS)
    return fail(`${ANNOTATIONS.ttlSeconds} must be between 1 and ${MAX_TTL_SECONDS} seconds`);
  if (heartbeat.value < 0) return fail(`${ANNOTATIONS.heartbeatSeconds} must not be negative`);
  if (heartbeat.value > 0 && heartbeat.value >= ttl.value)
    return fail(
      `${ANNOTATIONS.heartbeatSeconds} (${heartbeat.value}) must be less than ${ANNOTATIONS.ttlSeconds} (${ttl.value})`,
    );
  if (grace.value < 0) return fail(`${ANNOTATIONS.enforceGraceSeconds} must not be negative`);
  const release = ann[ANNOTATIONS.releaseOnShutdown] ?? '';
  if (release !== '' && release !== 'true' && release !== 'false')
    return fail(`invalid ${ANNOTATIONS.releaseOnShutdown} ${JSON.stringify(release)} (want true or false)`);
  // The helper refuses (exit 2, a crash loop) a runtime Pod whose renew cycle does not fit its TTL.
  if (mode === 'runtime-singleton') {
    const lead = enforcementLeadMs(enforce as Enforcement, grace.value, defaults.restartPodOnLoss);
    const heartbeatMs = heartbeatMsOf(ttl.value, heartbeat.value);
    if (!renewCycleFits(ttl.value * 1_000, heartbeatMs, lead))
      return fail(
        `${ANNOTATIONS.heartbeatSeconds} (${formatDuration(heartbeatMs)}) plus the enforcement lead (${formatDuration(lead)}: ${describeLead(enforce as Enforcement, defaults.restartPodOnLoss)}) must be less than ${ANNOTATIONS.ttlSeconds} (${ttl.value}s): the sidecar stops the app that long before the lease can expire`,
      );
  }
  // Signal enforcement needs a shared process namespace: an explicit opt-out is refused, not overridden.
  if (mode === 'runtime-singleton' && enforce === 'signal' && pod.spec.shareProcessNamespace === false)
    return fail(`${ANNOTATIONS.enforce}=signal requires shareProcessNamespace, but the pod sets it to false`);
  const owner = controllerOwner(pod);
  return {
    ok: true,
    resolved: {
      leaseName,
      leaseNamespace: ann[ANNOTATIONS.leaseNamespace] || namespace,
      mode: mode as InjectionMode,
      enforce: enforce as Enforcement,
      signalTarget,
      ttlSeconds: ttl.value,
      heartbeatSeconds: heartbeat.value,
      enforceGraceSeconds: grace.value,
      releaseOnShutdown: release,
      holderIdentity: ann[ANNOTATIONS.holderIdentity] ?? '',
      workloadKind: owner?.kind ?? '',
      workloadName: owner?.name ?? '',
    },
  };
}
