// The files the helper's containers share through the state volume (docs/helper.md §4), as the Go helper
// lays them out:
//
//   <dir>/holder   the holder identity `acquire` acquired with
//   <dir>/token    its fencing token
//   <dir>/healthy  the health marker: present while the lease is confirmed, rewritten at every renewal
//
// Every write goes through a temporary file and a rename, so a reader never sees half a file. Go also
// copies its binary to <dir>/check for an exec probe; this helper's probe is HTTP, so there is none.
import { randomBytes } from 'node:crypto';
import { chmod, mkdir, readFile, rename, rm, stat, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { formatDuration } from '../cli.ts';
import { MARKER_FILE } from '../injection/contract.ts';

export interface Handoff {
  holder: string;
  token: number;
}

export class HelperState {
  readonly dir: string;

  constructor(dir: string) {
    this.dir = dir;
  }

  get markerPath(): string {
    return join(this.dir, MARKER_FILE);
  }

  /** A won lease: holder and token for the sidecar, then the marker. */
  async writeAcquired(holder: string, token: number): Promise<void> {
    await mkdir(this.dir, { recursive: true });
    await writeAtomic(join(this.dir, 'holder'), holder);
    await writeAtomic(join(this.dir, 'token'), String(token));
    await this.markHealthy();
  }

  /** What `acquire` left, or undefined when either file is missing or the token is not a number. */
  async readHandoff(): Promise<Handoff | undefined> {
    try {
      const holder = await readFile(join(this.dir, 'holder'), 'utf8');
      const text = (await readFile(join(this.dir, 'token'), 'utf8')).trim();
      if (!/^-?\d+$/.test(text)) return undefined;
      return { holder, token: Number(text) };
    } catch {
      return undefined;
    }
  }

  /** The handoff, removed so that nobody adopts it twice (a sidecar restarted on its own finds none). */
  async takeHandoff(): Promise<Handoff | undefined> {
    const handoff = await this.readHandoff();
    await rm(join(this.dir, 'token'), { force: true });
    return handoff;
  }

  /** Creates (or refreshes the modification time of) the marker. */
  async markHealthy(): Promise<void> {
    await mkdir(this.dir, { recursive: true });
    await writeAtomic(this.markerPath, 'ok\n');
  }

  /** Removes the marker; a missing one is already the unhealthy state. */
  async markUnhealthy(): Promise<void> {
    await rm(this.markerPath, { force: true });
  }
}

async function writeAtomic(path: string, data: string): Promise<void> {
  const tmp = `${path}.tmp-${randomBytes(4).toString('hex')}`;
  try {
    await writeFile(tmp, data);
    await chmod(tmp, 0o644);
    await rename(tmp, path);
  } catch (err) {
    await rm(tmp, { force: true });
    throw err;
  }
}

/**
 * Why the marker passes or fails. Absent and stale are different stories: absent, the sidecar removed it
 * because the lease was lost (an expected failover); stale, nobody refreshed it (the sidecar is dead or
 * stuck: an incident).
 */
export type MarkerVerdict =
  | { ok: true; ageMs: number | undefined }
  | { ok: false; reason: 'absent' }
  | { ok: false; reason: 'stale'; ageMs: number; maxAgeMs: number }
  | { ok: false; reason: 'indeterminate'; error: string };

/** The one freshness rule (Go's EvaluateMarker): `maxAgeMs` ≤ 0 checks presence only. */
export function markerVerdict(
  observed: { mtimeMs: number } | 'absent' | Error,
  maxAgeMs: number,
  now: number,
): MarkerVerdict {
  if (observed === 'absent') return { ok: false, reason: 'absent' };
  if (observed instanceof Error) return { ok: false, reason: 'indeterminate', error: observed.message };
  if (maxAgeMs <= 0) return { ok: true, ageMs: undefined };
  const ageMs = now - observed.mtimeMs;
  if (ageMs > maxAgeMs) return { ok: false, reason: 'stale', ageMs, maxAgeMs };
  return { ok: true, ageMs };
}

/** One line for the probe's answer and the check command's stderr (Go's HealthResult.Reason). */
export function markerReason(verdict: MarkerVerdict, path: string): string {
  if (verdict.ok) return '';
  switch (verdict.reason) {
    case 'absent':
      return `health marker absent: ${path}`;
    case 'stale':
      return `health marker stale: ${path} not refreshed for ${formatDuration(Math.round(verdict.ageMs / 1_000) * 1_000)} (limit ${formatDuration(verdict.maxAgeMs)}); the lease sidecar is not renewing`;
    case 'indeterminate':
      return `health marker indeterminate: ${path}: ${verdict.error}`;
  }
}

/** Stats the marker and applies markerVerdict with the caller's clock (one node clock for both sides). */
export async function evaluateMarker(
  path: string,
  maxAgeMs: number,
  now: () => number,
): Promise<MarkerVerdict> {
  let observed: { mtimeMs: number } | 'absent' | Error;
  try {
    observed = await stat(path);
  } catch (err) {
    observed = (err as NodeJS.ErrnoException).code === 'ENOENT' ? 'absent' : (err as Error);
  }
  return markerVerdict(observed, maxAgeMs, now());
}
