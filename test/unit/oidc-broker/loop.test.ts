// The refresh loop (src/oidc-broker/loop.ts) on a ManualClock, with a scripted token endpoint and an
// in-memory token file: the refresh at the skew before expiry, the retry delay doubling to its cap and
// resetting on success, the last good token kept through failures, the per-request deadline on the clock,
// and shutdown in a wait or in a request. No sleeps: time moves only when the test advances it.
import { describe, expect, it } from 'vitest';
import { createHelperLog } from '../../../src/helper/log.ts';
import { ManualClock } from '../../../src/kube/clock.ts';
import type { LoopConfig } from '../../../src/oidc-broker/config.ts';
import { runBrokerLoop } from '../../../src/oidc-broker/loop.ts';
import type { FetchedToken } from '../../../src/oidc-broker/token.ts';
import { eventually } from '../../helpers/eventually.ts';

const S = 1000;
const CONFIG: LoopConfig = {
  outputPath: '/run/berth/token',
  refreshSkewMs: 60 * S,
  minRefreshMs: 30 * S,
  fetchTimeoutMs: 30 * S,
  maxRetryMs: 300 * S,
};

type Reply = { token: string; expiresInS?: number } | Error | 'hang';

/** A loop on a ManualClock whose endpoint answers with `reply(callIndex)`. */
function harness(reply: (call: number) => Reply, config: LoopConfig = CONFIG) {
  const clock = new ManualClock();
  const start = clock.now();
  const stop = new AbortController();
  const calls: Array<{ at: number; signal: AbortSignal }> = [];
  const writes: Array<{ at: number; token: string }> = [];
  const lines: Array<Record<string, unknown>> = [];
  let failWrites = false;
  const log = createHelperLog({ write: (line) => lines.push(JSON.parse(line)), now: () => clock.now() });
  const done = runBrokerLoop({
    config,
    clock,
    log,
    signal: stop.signal,
    fetchToken(signal) {
      const answer = reply(calls.length);
      calls.push({ at: clock.now() - start, signal });
      return new Promise<FetchedToken>((resolve, reject) => {
        signal.addEventListener('abort', () => reject(signal.reason), { once: true });
        if (answer === 'hang') return;
        if (answer instanceof Error) reject(answer);
        else
          resolve({
            accessToken: answer.token,
            expiresAt: answer.expiresInS === undefined ? undefined : clock.now() + answer.expiresInS * S,
          });
      });
    },
    async writeToken(path, token) {
      if (failWrites) throw new Error(`EACCES: permission denied, open '${path}'`);
      writes.push({ at: clock.now() - start, token });
    },
  });
  /** Waits until the loop has logged `n` lines (it then sleeps on the clock, or waits for a request). */
  const logged = (n: number) => eventually(() => lines.length >= n && clock.pending() > 0);
  return {
    clock,
    stop,
    calls,
    writes,
    lines,
    done,
    logged,
    at: () => clock.now() - start,
    failWrites: (on: boolean) => {
      failWrites = on;
    },
    retries: () => lines.filter((l) => l.level === 'error').map((l) => l.retry_in),
  };
}

describe('the refresh loop', () => {
  it('refreshes exactly the skew before expiry, writing each new token', async () => {
    const h = harness((n) => ({ token: `t${n}`, expiresInS: 3600 }));
    await h.logged(1);
    expect(h.writes).toEqual([{ at: 0, token: 't0' }]);
    expect(h.lines[0]).toMatchObject({
      msg: 'token refreshed',
      expires_at: '2026-01-01T01:00:00.000Z',
      next_refresh_in: '59m0s',
    });
    await h.clock.advanceAsync(3540 * S - 1);
    expect(h.calls).toHaveLength(1);
    await h.clock.advanceAsync(1);
    await h.logged(2);
    expect(h.writes).toEqual([
      { at: 0, token: 't0' },
      { at: 3540 * S, token: 't1' },
    ]);
    h.stop.abort();
    await h.done;
  });

  it('waits the minimum interval for a token without expiry or shorter-lived than the skew', async () => {
    const h = harness((n) => (n === 0 ? { token: 'none' } : { token: `short${n}`, expiresInS: 45 }));
    await h.logged(1);
    expect(h.lines[0]).toMatchObject({ expires_at: null, next_refresh_in: '30s' });
    await h.clock.advanceAsync(30 * S);
    await h.logged(2);
    expect(h.lines[1]).toMatchObject({ next_refresh_in: '30s' });
    await h.clock.advanceAsync(30 * S);
    await h.logged(3);
    expect(h.writes.map((w) => w.at)).toEqual([0, 30 * S, 60 * S]);
    h.stop.abort();
    await h.done;
  });

  it('keeps the last token through an outage longer than its life, backing off to the cap, and recovers', async () => {
    // One token of 120 s, then 8 failures (an outage of about 18 min), then tokens again.
    const h = harness((n) =>
      n === 0 || n > 8 ? { token: `t${n}`, expiresInS: 120 } : new Error('connect ECONNREFUSED 10.0.0.1:443'),
    );
    await h.logged(1);
    await h.clock.advanceAsync(60 * S); // the refresh, 60 s before expiry: fails
    const delays = [30, 60, 120, 240, 300, 300, 300, 300];
    for (const [i, d] of delays.entries()) {
      await h.logged(i + 2);
      expect(h.writes).toEqual([{ at: 0, token: 't0' }]);
      await h.clock.advanceAsync(d * S - 1);
      expect(h.calls).toHaveLength(i + 2);
      await h.clock.advanceAsync(1);
    }
    await h.logged(delays.length + 2);
    expect(h.retries()).toEqual(['30s', '1m0s', '2m0s', '4m0s', '5m0s', '5m0s', '5m0s', '5m0s']);
    expect(h.lines[1]).toMatchObject({
      level: 'error',
      msg: 'token refresh failed; keeping the last written token',
      error: 'fetch token: connect ECONNREFUSED 10.0.0.1:443',
    });
    const recoveredAt = 60 * S + delays.reduce((a, d) => a + d * S, 0);
    expect(h.writes).toEqual([
      { at: 0, token: 't0' },
      { at: recoveredAt, token: 't9' },
    ]);
    expect(h.calls.map((c) => c.at)).toEqual([
      0,
      60 * S,
      ...delays.map((_, i) => 60 * S + delays.slice(0, i + 1).reduce((a, d) => a + d * S, 0)),
    ]);
    h.stop.abort();
    await h.done;
  });

  it('resets the retry delay after a success', async () => {
    const outcomes: Reply[] = [new Error('e'), new Error('e'), { token: 'a', expiresInS: 0 }, new Error('e')];
    const h = harness((n) => outcomes[n] ?? { token: 'z' });
    await h.logged(1);
    await h.clock.advanceAsync(30 * S);
    await h.logged(2);
    await h.clock.advanceAsync(60 * S);
    await h.logged(3);
    await h.clock.advanceAsync(30 * S);
    await h.logged(4);
    expect(h.retries()).toEqual(['30s', '1m0s', '30s']);
    h.stop.abort();
    await h.done;
  });

  it('abandons a stalled request at the fetch timeout, on the clock, and retries', async () => {
    const h = harness((n) => (n === 0 ? 'hang' : { token: 'late', expiresInS: 3600 }));
    await eventually(() => h.calls.length === 1);
    await h.clock.advanceAsync(30 * S - 1);
    expect(h.calls[0]!.signal.aborted).toBe(false);
    await h.clock.advanceAsync(1);
    await h.logged(1);
    expect(h.calls[0]!.signal.aborted).toBe(true);
    expect(h.lines[0]).toMatchObject({ error: 'fetch token: timed out after 30s', retry_in: '30s' });
    await h.clock.advanceAsync(30 * S);
    await h.logged(2);
    expect(h.writes).toEqual([{ at: 60 * S, token: 'late' }]);
    h.stop.abort();
    await h.done;
  });

  it('treats a failed write as a failed refresh', async () => {
    const h = harness((n) => ({ token: `t${n}`, expiresInS: 3600 }));
    h.failWrites(true);
    await h.logged(1);
    expect(h.lines[0]).toMatchObject({
      level: 'error',
      error: `write token file "/run/berth/token": EACCES: permission denied, open '/run/berth/token'`,
      retry_in: '30s',
    });
    h.failWrites(false);
    await h.clock.advanceAsync(30 * S);
    await h.logged(2);
    expect(h.writes).toEqual([{ at: 30 * S, token: 't1' }]);
    h.stop.abort();
    await h.done;
  });

  it('ends at once on shutdown during a wait', async () => {
    const h = harness(() => ({ token: 't', expiresInS: 3600 }));
    await h.logged(1);
    h.stop.abort();
    await h.done;
    expect(h.clock.pending()).toBe(0);
    await h.clock.advanceAsync(7200 * S);
    expect(h.calls).toHaveLength(1);
  });

  it('ends at once on shutdown during a request, cancelling it, writing nothing and logging no failure', async () => {
    const h = harness(() => 'hang');
    await eventually(() => h.calls.length === 1);
    h.stop.abort(new Error('shutting down'));
    await h.done;
    expect(h.calls[0]!.signal.aborted).toBe(true);
    expect(h.writes).toEqual([]);
    expect(h.lines).toEqual([]);
    expect(h.clock.pending()).toBe(0);
  });
});
