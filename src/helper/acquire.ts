// `helper acquire`, the init container berth-acquire (Go's Hold): blocks until the lease is won, writes
// the state for the sidecar (holder, token, marker), returns. While another holder has the lease it asks
// again every heartbeat, so a standby Pod takes over within TTL + one heartbeat of the holder's last
// renewal; after an error it backs off from 500 ms, doubling up to the heartbeat (docs/helper.md §3.1).
import { type AcquireResult, CLIENT_DEFAULT_TIMEOUT_MS, type LeaseClient } from '../berth/leaseclient.ts';
import { formatDuration } from '../cli.ts';
import type { Clock } from '../kube/clock.ts';
import type { HelperConfig } from './config.ts';
import type { HelperLog } from './log.ts';
import type { HelperState } from './state.ts';

const FIRST_ERROR_BACKOFF_MS = 500;

/** The wait before the next attempt: a heartbeat while the lease is held elsewhere, else a backoff. */
export function retryDelayMs(
  outcome: 'held-by-other' | 'error',
  consecutiveErrors: number,
  heartbeatMs: number,
): number {
  if (outcome === 'held-by-other') return heartbeatMs;
  return Math.min(heartbeatMs, FIRST_ERROR_BACKOFF_MS * 2 ** Math.max(0, consecutiveErrors - 1));
}

/** The bound of one call: a heartbeat (at least 1 s), at most the client's default. */
export const callTimeoutMs = (heartbeatMs: number): number =>
  Math.min(CLIENT_DEFAULT_TIMEOUT_MS, Math.max(1_000, heartbeatMs));

export interface HoldDeps {
  client: LeaseClient;
  state: HelperState;
  clock: Clock;
  log: HelperLog;
  /** SIGTERM, or --acquire-timeout. */
  signal: AbortSignal;
}

/** Resolves with the winning answer once the state is written; rejects when `signal` aborts first. */
export async function holdLease(config: HelperConfig, deps: HoldDeps): Promise<AcquireResult> {
  const log = deps.log.with({
    lease: config.leaseName,
    namespace: config.leaseNamespace,
    holder: config.holder,
    mode: config.mode,
  });
  let errors = 0;
  for (;;) {
    let res: AcquireResult | undefined;
    try {
      res = await deps.client.acquire(
        config.leaseNamespace,
        config.leaseName,
        config.holder,
        config.ttlSeconds,
        {
          signal: deps.signal,
          timeoutMs: callTimeoutMs(config.heartbeatMs),
        },
      );
    } catch (err) {
      if (deps.signal.aborted) throw deps.signal.reason;
      errors++;
      const delay = retryDelayMs('error', errors, config.heartbeatMs);
      log.warn('acquire failed, retrying', { error: err, retryIn: formatDuration(delay) });
      await deps.clock.sleep(delay, deps.signal);
      continue;
    }
    if (res.acquired) {
      // A failure to write the state ends the command: the sidecar could not take over.
      await deps.state.writeAcquired(config.holder, res.fencingToken);
      log.info('lease acquired', {
        fencingToken: res.fencingToken,
        expiresAt: res.expiresAt === undefined ? undefined : new Date(res.expiresAt).toISOString(),
      });
      return res;
    }
    errors = 0;
    const delay = retryDelayMs('held-by-other', 0, config.heartbeatMs);
    log.info('lease held by another, waiting', { currentHolder: res.holder, retryIn: formatDuration(delay) });
    await deps.clock.sleep(delay, deps.signal);
  }
}
