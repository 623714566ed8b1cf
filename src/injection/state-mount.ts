// The reserved berth-state volume (docs/injection.md, "Validation"): only the injected helpers may write
// it, since whoever can write it can forge the health marker the sidecar's probe answer rests on. Pure.
import { type Denied, deny } from '../../webhooks/review.ts';
import { ACQUIRE_CONTAINER, SIDECAR_CONTAINER, STATE_VOLUME } from './contract.ts';
import type { Container, Pod } from './pod.ts';
import { REJECTION } from './reasons.ts';

/** Where the Pod arrives: its creation, or `kubectl debug` adding an ephemeral container to it. */
export type AdmissionPath = 'create' | 'ephemeral';

const injectorOwned = (name: string): boolean => name === ACQUIRE_CONTAINER || name === SIDECAR_CONTAINER;

function writableStateMountDenial(path: AdmissionPath, container: string, mountPath: string): Denied {
  if (path === 'ephemeral')
    return deny(
      REJECTION.writableStateMountEphemeral,
      `cannot attach ephemeral container ${JSON.stringify(container)}: it mounts the Berth state volume ${JSON.stringify(STATE_VOLUME)} writably at ${JSON.stringify(mountPath)}. The pod itself is healthy — this debug request is refused. The state volume is reserved: write access would let a container forge the health marker, defeating at-most-once enforcement. Re-run with the mount marked readOnly: true, or without mounting ${STATE_VOLUME}`,
    );
  return deny(
    REJECTION.writableStateMount,
    `cannot inject: container ${JSON.stringify(container)} mounts the Berth state volume ${JSON.stringify(STATE_VOLUME)} writably at ${JSON.stringify(mountPath)}. The state volume is reserved: a writable mount lets the workload forge the health marker, defeating at-most-once enforcement. Either mark the mount readOnly: true, or use a separate volume for workload data`,
  );
}

/**
 * Enforces the reservation on `pod`, repairing in place what is unambiguous: on creation a writable mount
 * at exactly the state dir becomes read-only (the shape a well-meaning author writes); any other writable
 * mount of the volume is a denial. On creation every container is the author's, however it is named; on
 * the ephemeral path the Pod was injected at creation, so its helpers keep their mounts, and an ephemeral
 * container is never repaired (the Pod is not mutated again). Returns the denial, or undefined.
 */
export function enforceStateVolume(pod: Pod, stateDir: string, path: AdmissionPath): Denied | undefined {
  const owned = (name: string): boolean => path === 'ephemeral' && injectorOwned(name);
  const authored: Container[] = [...pod.spec.containers, ...(pod.spec.initContainers ?? [])];
  for (const c of authored) {
    if (owned(c.name)) continue;
    for (const m of c.volumeMounts ?? []) {
      if (m.name !== STATE_VOLUME || m.readOnly === true) continue;
      if (path === 'create' && m.mountPath === stateDir) {
        m.readOnly = true;
        continue;
      }
      return writableStateMountDenial(path, c.name, m.mountPath);
    }
  }
  for (const c of pod.spec.ephemeralContainers ?? []) {
    if (owned(c.name)) continue;
    const m = (c.volumeMounts ?? []).find((v) => v.name === STATE_VOLUME && v.readOnly !== true);
    if (m !== undefined) return writableStateMountDenial('ephemeral', c.name, m.mountPath);
  }
  return undefined;
}
