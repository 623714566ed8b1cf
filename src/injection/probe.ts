// The injected liveness probe (docs/decisions/0008-helper-probe-over-http.md): an HTTP GET of the
// berth-sidecar's health endpoint, with every field the API server would default written out, so the
// validating webhook can require it unmodified by comparing what it sees with what was injected. Pure.
import { INJECTION_PROBE_PATH, PROBE_FAILURE_THRESHOLD, PROBE_PERIOD_SECONDS } from './contract.ts';
import { probeKillGraceSeconds } from './enforcement.ts';

export interface HttpProbe {
  httpGet: { path: string; port: number; scheme: 'HTTP' };
  periodSeconds: number;
  timeoutSeconds: number;
  successThreshold: number;
  failureThreshold: number;
  terminationGracePeriodSeconds?: number;
}

const httpGet = (port: number) => ({ path: INJECTION_PROBE_PATH, port, scheme: 'HTTP' as const });

/**
 * The main containers' probe. Its own terminationGracePeriodSeconds bounds the kill it causes, which
 * the sidecar's enforcement lead counts on (enforcement.ts).
 */
export function berthLivenessProbe(port: number, enforceGraceSeconds: number): HttpProbe {
  return {
    httpGet: httpGet(port),
    periodSeconds: PROBE_PERIOD_SECONDS,
    timeoutSeconds: 1,
    successThreshold: 1,
    failureThreshold: PROBE_FAILURE_THRESHOLD,
    terminationGracePeriodSeconds: probeKillGraceSeconds(enforceGraceSeconds),
  };
}

/**
 * The sidecar's startup probe: the kubelet starts the main containers only once it passes, that is once
 * the sidecar has confirmed the lease, so no main container is probed before the sidecar serves. It
 * gives up (and the kubelet restarts the sidecar) after one TTL, past which the lease is gone anyway.
 */
export function berthSidecarStartupProbe(port: number, ttlSeconds: number): HttpProbe {
  return {
    httpGet: httpGet(port),
    periodSeconds: 1,
    timeoutSeconds: 1,
    successThreshold: 1,
    failureThreshold: Math.max(1, ttlSeconds),
  };
}

/** Structural equality of JSON values (key order does not matter; a missing key is not a null one). */
export function jsonEqual(a: unknown, b: unknown): boolean {
  if (a === b) return true;
  if (Array.isArray(a) || Array.isArray(b)) {
    return (
      Array.isArray(a) &&
      Array.isArray(b) &&
      a.length === b.length &&
      a.every((item, i) => jsonEqual(item, b[i]))
    );
  }
  if (typeof a !== 'object' || typeof b !== 'object' || a === null || b === null) return false;
  const ka = Object.keys(a).filter((k) => (a as Record<string, unknown>)[k] !== undefined);
  const kb = Object.keys(b).filter((k) => (b as Record<string, unknown>)[k] !== undefined);
  return (
    ka.length === kb.length &&
    ka.every((k) => jsonEqual((a as Record<string, unknown>)[k], (b as Record<string, unknown>)[k]))
  );
}

/** Whether `probe` is exactly the Berth liveness probe for `port` and the Pod's enforce grace. */
export const isBerthLivenessProbe = (probe: unknown, port: number, enforceGraceSeconds: number): boolean =>
  jsonEqual(probe, berthLivenessProbe(port, enforceGraceSeconds));
