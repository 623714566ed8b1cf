// The broker's refresh loop (docs/oidc-broker.md §2), as the Go broker's runLoop: fetch a token (each
// request bounded by the fetch timeout), write it, wait until the refresh skew before its expiry (at least
// the minimum interval), repeat. A failed fetch or write keeps the file last written, so readers use the
// last good token until it expires, and retries after a delay that starts at the minimum interval and
// doubles up to the maximum; a success resets it. Shutdown (the signal) ends the loop at once, in a wait or
// in a request, without a write. Every wait and deadline runs on the injected clock.
import { formatDuration } from '../cli.ts';
import type { HelperLog } from '../helper/log.ts';
import type { Clock } from '../kube/clock.ts';
import type { LoopConfig } from './config.ts';
import { nextRetry, refreshDelay } from './schedule.ts';
import { type FetchedToken, failureReason } from './token.ts';

export interface BrokerLoopDeps {
  config: LoopConfig;
  /** One client-credentials grant; must reject promptly once `signal` aborts. */
  fetchToken(signal: AbortSignal): Promise<FetchedToken>;
  writeToken(path: string, token: string): Promise<void>;
  clock: Clock;
  log: HelperLog;
  /** Aborted on SIGTERM/SIGINT. */
  signal: AbortSignal;
}

function timeoutError(ms: number): Error {
  const err = new Error(`timed out after ${formatDuration(ms)}`);
  err.name = 'TimeoutError';
  return err;
}

async function fetchWithDeadline(deps: BrokerLoopDeps): Promise<FetchedToken> {
  const deadline = new AbortController();
  const ms = deps.config.fetchTimeoutMs;
  const timer = deps.clock.setTimeout(() => deadline.abort(timeoutError(ms)), ms);
  try {
    return await deps.fetchToken(AbortSignal.any([deps.signal, deadline.signal]));
  } finally {
    timer.cancel();
  }
}

/** Waits on the clock; false when the signal aborted first. */
async function wait(deps: BrokerLoopDeps, ms: number): Promise<boolean> {
  try {
    await deps.clock.sleep(ms, deps.signal);
    return true;
  } catch {
    return false;
  }
}

/** Runs until `deps.signal` aborts. */
export async function runBrokerLoop(deps: BrokerLoopDeps): Promise<void> {
  const { config, clock, log, signal } = deps;
  let retry = config.minRefreshMs;
  while (!signal.aborted) {
    let token: FetchedToken;
    let failure: string;
    try {
      token = await fetchWithDeadline(deps);
      try {
        await deps.writeToken(config.outputPath, token.accessToken);
        failure = '';
      } catch (err) {
        failure = `write token file "${config.outputPath}": ${failureReason(err)}`;
      }
    } catch (err) {
      token = { accessToken: '', expiresAt: undefined };
      failure = `fetch token: ${failureReason(err)}`;
    }
    // Shutdown raced the request or the write: a clean exit, not a failure worth a line.
    if (signal.aborted) return;
    if (failure !== '') {
      log.error('token refresh failed; keeping the last written token', {
        error: failure,
        retry_in: formatDuration(retry),
      });
      if (!(await wait(deps, retry))) return;
      retry = nextRetry(retry, config.maxRetryMs);
      continue;
    }
    retry = config.minRefreshMs;
    const next = refreshDelay(token.expiresAt, clock.now(), config.refreshSkewMs, config.minRefreshMs);
    log.info('token refreshed', {
      expires_at: token.expiresAt === undefined ? null : new Date(token.expiresAt).toISOString(),
      next_refresh_in: formatDuration(next),
    });
    if (!(await wait(deps, next))) return;
  }
}
