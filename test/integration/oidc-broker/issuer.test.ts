// `oidc-broker` in this process (runOidcBroker with a ManualClock) against a local HTTPS issuer with real
// keys (test/helpers/oidc-issuer.ts): discovery, the token file's rotation exactly at the skew before
// expiry whatever the issuer's clock says, an outage (errors, then a stalled endpoint) longer than the
// token's life with the retry delay doubling to its cap and the last token left in place, recovery, and the
// client authentication probe. Real requests and files; only the broker's time is the test's.
import { mkdir, mkdtemp, readdir, readFile, rm, stat, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { ManualClock } from '../../../src/kube/clock.ts';
import { runOidcBroker } from '../../../src/oidc-broker/command.ts';
import { httpsTransport } from '../../../src/oidc-broker/transport.ts';
import { eventually } from '../../helpers/eventually.ts';
import { LocalIssuer } from '../../helpers/oidc-issuer.ts';

const S = 1000;
const SECRET = 'integration-secret-4f1c';
let dir: string;
let issuer: LocalIssuer;

beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), 'berth-oidc-broker-'));
  await writeFile(join(dir, 'secret'), `  ${SECRET}\n`, { mode: 0o600 });
  issuer = await new LocalIssuer().start();
  issuer.clients.set('berth-operator', SECRET);
});
afterAll(async () => {
  await issuer.stop();
  await rm(dir, { recursive: true, force: true });
});

interface Broker {
  clock: ManualClock;
  output: string;
  exit: Promise<number>;
  lines(): Array<Record<string, unknown>>;
  refreshes(): Array<Record<string, unknown>>;
  failures(): Array<Record<string, unknown>>;
  stdout(): string;
  shutdown(): void;
}
let running: Broker | undefined;

afterEach(async () => {
  running?.shutdown();
  await running?.exit;
  running = undefined;
  issuer.mode = 'up';
  issuer.clockOffsetMs = 0;
  issuer.expiresIn = 3600;
  issuer.clientAuth = new Set(['basic', 'post']);
  issuer.releaseStalled();
  issuer.requests.length = 0;
  issuer.issued.length = 0;
});

function startBroker(name: string, args: string[]): Broker {
  const clock = new ManualClock();
  const out: string[] = [];
  const output = join(dir, name, 'token');
  let stop = (): void => {};
  const exit = runOidcBroker([`--output=${output}`, '--oidc-client-id=berth-operator', ...args], {
    stdout: (t) => out.push(t),
    stderr: (t) => out.push(t),
    transport: httpsTransport({ ca: issuer.ca }),
    clock,
    onShutdown(s) {
      stop = s;
      return () => {};
    },
  });
  const lines = () =>
    out
      .join('')
      .split('\n')
      .filter((l) => l.startsWith('{'))
      .map((l) => JSON.parse(l) as Record<string, unknown>);
  running = {
    clock,
    output,
    exit,
    lines,
    refreshes: () => lines().filter((l) => l.msg === 'token refreshed'),
    failures: () => lines().filter((l) => l.level === 'error'),
    stdout: () => out.join(''),
    shutdown: () => stop(),
  };
  return running;
}

const secretFile = () => `--oidc-client-secret-file=${join(dir, 'secret')}`;

describe('oidc-broker against an HTTPS issuer', () => {
  it('discovers the token endpoint and rotates the file at the skew before expiry, whatever the issuer clock', async () => {
    await mkdir(join(dir, 'rotation'));
    issuer.expiresIn = 120;
    // The issuer's clock is 2 h ahead: by our clock its tokens are issued in the future and, for exp,
    // valid far longer than expires_in says. The broker counts from the answer, on its own clock.
    issuer.clockOffsetMs = 2 * 3600 * S;
    const b = startBroker('rotation', [
      `--oidc-issuer-url=${issuer.url}`,
      secretFile(),
      '--oidc-audience=berth-api',
      '--oidc-scopes=leases, admin',
    ]);
    const start = b.clock.now();
    await eventually(() => b.refreshes().length === 1);
    expect(issuer.discoveryFetches).toBeGreaterThan(0);
    expect(b.lines()[0]).toMatchObject({ msg: 'token broker starting', token_url: issuer.tokenEndpoint });
    const first = await readFile(b.output, 'utf8');
    expect(first).toBe(issuer.issued[0]!.accessToken);
    const claims = await issuer.verify(first, 'berth-api');
    expect(claims).toMatchObject({ sub: 'berth-operator', scope: 'leases admin' });
    expect(claims.iat! * S).toBeGreaterThan(Date.now() + 3600 * S);
    expect(issuer.requests[0]).toMatchObject({
      auth: 'basic',
      form: { grant_type: 'client_credentials', audience: 'berth-api', scope: 'leases admin' },
    });
    const firstStat = await stat(b.output);
    expect(firstStat.mode & 0o777).toBe(0o600);
    expect(b.refreshes()[0]).toMatchObject({
      expires_at: new Date(start + 120 * S).toISOString(),
      next_refresh_in: '1m0s',
    });

    // 1 ms before the refresh the broker still sleeps (its wait is the next timer); at it, it refreshes.
    await b.clock.advanceAsync(60 * S - 1);
    expect(b.clock.nextDueAt()).toBe(start + 60 * S);
    expect(issuer.requests).toHaveLength(1);
    // The issuer's clock now 2 h behind ours: its token's exp is long past by our clock; no matter.
    issuer.clockOffsetMs = -2 * 3600 * S;
    await b.clock.advanceAsync(1);
    await eventually(() => b.refreshes().length === 2);
    const second = await readFile(b.output, 'utf8');
    expect(second).toBe(issuer.issued[1]!.accessToken);
    expect(second).not.toBe(first);
    expect((await issuer.verify(second)).exp! * S).toBeLessThan(Date.now());
    expect(b.refreshes()[1]).toMatchObject({ next_refresh_in: '1m0s' });
    // Renamed into place: a new inode, mode 0600, no temp file left behind.
    const secondStat = await stat(b.output);
    expect(secondStat.ino).not.toBe(firstStat.ino);
    expect(secondStat.mode & 0o777).toBe(0o600);
    expect(await readdir(join(dir, 'rotation'))).toEqual(['token']);
    expect(b.stdout()).not.toContain(SECRET);
    expect(b.stdout()).not.toContain(first);

    b.shutdown();
    expect(await b.exit).toBe(0);
    expect(b.lines().at(-1)).toMatchObject({ msg: 'token broker stopped' });
  });

  it('keeps the last token through an outage longer than its life, backing off to the cap, then recovers', async () => {
    await mkdir(join(dir, 'outage'));
    issuer.expiresIn = 60;
    const b = startBroker('outage', [
      `--oidc-token-url=${issuer.tokenEndpoint}`,
      secretFile(),
      '--refresh-skew=30s',
      '--min-refresh-interval=1s',
      '--max-retry-interval=8s',
      '--fetch-timeout=5s',
    ]);
    const start = b.clock.now();
    await eventually(() => b.refreshes().length === 1);
    const good = await readFile(b.output, 'utf8');
    const goodStat = await stat(b.output);

    issuer.mode = 'down';
    await b.clock.advanceAsync(30 * S); // the refresh, 30 s before expiry: 503
    // Basic worked for the first token, so each attempt is one request.
    for (const [i, d] of [1, 2, 4, 8].entries()) {
      await eventually(() => b.failures().length === i + 1);
      await b.clock.advanceAsync(d * S);
    }
    await eventually(() => b.failures().length === 5);
    // The endpoint now accepts requests and never answers: each is abandoned at the fetch timeout.
    issuer.mode = 'stall';
    for (const n of [6, 7]) {
      await b.clock.advanceAsync(8 * S);
      await eventually(() => issuer.requests.length === n + 1 && issuer.requests.at(-1)?.status === 0);
      await b.clock.advanceAsync(5 * S - 1);
      expect(b.failures()).toHaveLength(n - 1);
      await b.clock.advanceAsync(1);
      await eventually(() => b.failures().length === n);
      await eventually(() => issuer.requests.at(-1)?.aborted === true);
    }
    expect(b.failures().map((f) => f.retry_in)).toEqual(['1s', '2s', '4s', '8s', '8s', '8s', '8s']);
    expect(b.failures()[0]).toMatchObject({
      msg: 'token refresh failed; keeping the last written token',
      error: 'fetch token: token endpoint answered 503 "temporarily_unavailable" "the issuer is down"',
    });
    expect(b.failures().at(-1)).toMatchObject({ error: 'fetch token: timed out after 5s' });
    // 30 + 1 + 2 + 4 + 8 + (8 + 5) * 2 = 71 s: the token's 60 s are over, its file is untouched.
    expect(b.clock.now() - start).toBe(71 * S);
    expect(await readFile(b.output, 'utf8')).toBe(good);
    expect((await stat(b.output)).ino).toBe(goodStat.ino);

    issuer.mode = 'up';
    await b.clock.advanceAsync(8 * S);
    await eventually(() => b.refreshes().length === 2);
    const recovered = await readFile(b.output, 'utf8');
    expect(recovered).not.toBe(good);
    expect(recovered).toBe(issuer.issued.at(-1)!.accessToken);
    expect(issuer.requests.map((r) => r.status)).toEqual([200, 503, 503, 503, 503, 503, 0, 0, 200]);
    expect(b.refreshes()[1]).toMatchObject({ next_refresh_in: '30s' });
  });

  it('falls back to client_secret_post when Basic is refused, and keeps using it', async () => {
    await mkdir(join(dir, 'post'));
    issuer.clientAuth = new Set(['post']);
    issuer.expiresIn = 90;
    const b = startBroker('post', [`--oidc-token-url=${issuer.tokenEndpoint}`, secretFile()]);
    await eventually(() => b.refreshes().length === 1);
    await b.clock.advanceAsync(30 * S);
    await eventually(() => b.refreshes().length === 2);
    expect(issuer.requests.map((r) => [r.auth, r.status])).toEqual([
      ['basic', 401],
      ['post', 200],
      ['post', 200],
    ]);
    expect(issuer.requests[1]!.form).toMatchObject({ client_id: 'berth-operator', client_secret: SECRET });
    expect(b.failures()).toEqual([]);
    expect(b.stdout()).not.toContain(SECRET);
  });
});
