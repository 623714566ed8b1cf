// The injected helper as real processes against a real `berth-operator central` (HTTPS, static keys),
// with test/helpers/helper-pod.ts playing the kubelet. TTL 7 s and a 2 s heartbeat: the sidecar stops the
// app 4 s (one probe period, the probe's kill grace and the kill margin) before the lease could expire, and
// heartbeat + lead must stay under the TTL.
import { readFileSync } from 'node:fs';
import { appendFile, mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { createAuthority } from '../../../hack/controlplane/pki.ts';
import { HttpLeaseClient } from '../../../src/berth/leaseclient.ts';
import { sha256Hex } from '../../../src/central/auth.ts';
import { RESTART_POD_STOP_MS } from '../../../src/injection/enforcement.ts';
import { RESTART_POD_EXIT_CODE } from '../../../src/injection/restart-pod.ts';
import { eventually } from '../../helpers/eventually.ts';
import {
  type CentralProcess,
  centralCounter,
  type HelperPod,
  overlaps,
  spawnProc,
  startCentralProcess,
  startHelperPod,
  stopHelperProcesses,
  TcpRelay,
} from '../../helpers/helper-pod.ts';

const TTL_SECONDS = 7;
const HEARTBEAT_MS = 2_000;
/** A lease call and scheduling on a loaded 2-core machine, on top of the protocol's own bound. */
const SLACK_MS = 1_000;
const TOKEN = 'token-east-1';

let dir: string;
let caFile: string;
let certFile: string;
let keyFile: string;
let keysFile: string;
let tokenFile: string;
let central: CentralProcess;
let leaseCount = 0;
const pods: HelperPod[] = [];

beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), 'berth-helper-'));
  const ca = await createAuthority('berth-helper-test-ca');
  const serving = await ca.serving(['127.0.0.1']);
  caFile = join(dir, 'ca.crt');
  certFile = join(dir, 'tls.crt');
  keyFile = join(dir, 'tls.key');
  keysFile = join(dir, 'keys');
  tokenFile = join(dir, 'token');
  await writeFile(caFile, ca.cert);
  await writeFile(certFile, serving.cert);
  await writeFile(keyFile, serving.key, { mode: 0o600 });
  await writeFile(keysFile, `east:${sha256Hex(TOKEN)}\n`);
  await writeFile(tokenFile, `${TOKEN}\n`);
  central = await startCentralProcess({
    certFile,
    keyFile,
    args: ['--store-backend=mem', '--auth-mode=static-keys', `--api-keys-file=${keysFile}`],
  });
}, 60_000);

afterEach(async () => {
  await stopHelperProcesses();
  pods.length = 0;
});

afterAll(async () => {
  await central?.stop();
  await stopHelperProcesses();
  await rm(dir, { recursive: true, force: true });
});

function envFor(lease: string, over: Record<string, string> = {}): Record<string, string> {
  return {
    BERTH_LEASE_NAME: lease,
    BERTH_TTL_SECONDS: String(TTL_SECONDS),
    BERTH_HEARTBEAT_SECONDS: String(HEARTBEAT_MS / 1_000),
    BERTH_API_SERVER: central.url,
    BERTH_CA_BUNDLE_FILE: caFile,
    BERTH_API_KEY_FILE: tokenFile,
    BERTH_CLUSTER_ID: 'east',
    ...over,
  };
}

async function pod(
  name: string,
  env: Record<string, string>,
  more: { probe?: boolean; signalGraceSeconds?: number } = {},
): Promise<HelperPod> {
  const p = await startHelperPod({ name, dir: join(dir, `lease-${leaseCount}`), env, ...more });
  pods.push(p);
  return p;
}

/** When the Pod's init container won the lease (its log line's time). */
const acquiredAt = (p: HelperPod): number =>
  Date.parse(String(p.acquire?.logs().find((l) => l.msg === 'lease acquired')?.time));

/** Pod `a`, whose helpers reach the server through `relay` (which can then cut them off). */
const relayedPod = (relay: TcpRelay, lease: string, over: Record<string, string> = {}): Promise<HelperPod> =>
  pod(
    'a',
    envFor(lease, {
      BERTH_API_SERVER: `https://127.0.0.1:${relay.port}`,
      BERTH_SERVER_NAME: '127.0.0.1',
      ...over,
    }),
  );

/** The server's own view of a lease (its expiry), as a renew by another holder of the tenant reports it. */
async function serverState(lease: string) {
  const observer = new HttpLeaseClient({
    baseUrl: central.url,
    caBundle: readFileSync(caFile, 'utf8'),
    apiKeyFile: tokenFile,
  });
  try {
    const state = await observer.renew('team-a', lease, 'east/observer', 1, TTL_SECONDS);
    expect(state.acquired).toBe(false);
    return state;
  } finally {
    observer.close();
  }
}

const waitingLogs = (p: HelperPod): number =>
  p.acquire?.logs().filter((l) => l.msg === 'lease held by another, waiting').length ?? 0;

describe('helper: one app per lease', () => {
  it('runs only one of two Pods with the same lease; the other waits in its init container', async () => {
    const lease = `singleton-${++leaseCount}`;
    const a = await pod('a', envFor(lease));
    await a.waitFor('running');
    const b = await pod('b', envFor(lease));
    await eventually(() => waitingLogs(b) >= 2, { timeoutMs: 15_000 });
    expect(b.phase).toBe('acquiring');
    expect(b.app).toBeUndefined();
    expect(a.phase).toBe('running');
    expect(overlaps(pods)).toEqual([]);
  });

  it('lets the other Pod take over within TTL + heartbeat when the holder dies', async () => {
    const lease = `takeover-${++leaseCount}`;
    const a = await pod('a', envFor(lease));
    await a.waitFor('running');
    const b = await pod('b', envFor(lease));
    await eventually(() => waitingLogs(b) >= 1, { timeoutMs: 15_000 });
    const killedAt = Date.now();
    a.killAll();
    await b.waitFor('running', 20_000);
    // The protocol's bound is on the acquisition; the app then waits for the sidecar's start-up.
    expect(acquiredAt(b) - killedAt).toBeLessThan(TTL_SECONDS * 1_000 + HEARTBEAT_MS + SLACK_MS);
    expect(overlaps(pods)).toEqual([]);
  });

  it('releases on shutdown, so that the other Pod takes over at once (within a heartbeat, not a TTL)', async () => {
    const lease = `release-${++leaseCount}`;
    const a = await pod('a', envFor(lease));
    await a.waitFor('running');
    const b = await pod('b', envFor(lease));
    await eventually(() => waitingLogs(b) >= 1, { timeoutMs: 15_000 });
    await a.terminate();
    const releasedAt = Date.now();
    expect(a.sidecar!.logs().some((l) => l.msg === 'released lease on shutdown')).toBe(true);
    expect(await a.sidecar!.exited).toEqual({ code: 0, signal: null });
    await b.waitFor('running', 20_000);
    // At B's next attempt, not once A's lease expired (at the earliest TTL - heartbeat = 5 s from here).
    expect(acquiredAt(b) - releasedAt).toBeLessThan(HEARTBEAT_MS + SLACK_MS);
    expect(overlaps(pods)).toEqual([]);
  });
});

describe('helper: enforcement', () => {
  it('stops the app before its lease could expire at the server when the server becomes unreachable', async () => {
    const lease = `outage-${++leaseCount}`;
    const relay = await TcpRelay.start(Number(new URL(central.url).port));
    try {
      const a = await relayedPod(relay, lease);
      await a.waitFor('running');
      relay.blackhole();
      await a.waitFor('stopped', 20_000);
      expect(a.app!.stoppedBy).toBe('probe');
      const state = await serverState(lease);
      expect(state.holder).toContain(`uid:${a.uid}`);
      expect(a.app!.exitedAt).toBeDefined();
      expect(a.app!.exitedAt!).toBeLessThan(state.expiresAt!);
      expect(
        a
          .sidecar!.logs()
          .some((l) => /local lease deadline|past the local lease deadline/.test(String(l.msg))),
      ).toBe(true);
    } finally {
      await relay.stop();
    }
  });

  it('signal mode: SIGTERMs the target process in the shared process namespace when the lease is lost', async () => {
    const lease = `signal-${++leaseCount}`;
    const relay = await TcpRelay.start(Number(new URL(central.url).port));
    try {
      // The harness does not probe: only the sidecar's signal can stop the app.
      const a = await pod('a', envFor(lease, { BERTH_API_SERVER: `https://127.0.0.1:${relay.port}` }), {
        probe: false,
        signalGraceSeconds: 1,
      });
      await a.waitFor('running');
      relay.blackhole();
      await a.waitFor('stopped', 20_000);
      expect(a.app!.stoppedBy).toBe('exit');
      expect(await a.app!.proc.exited).toEqual({ code: null, signal: 'SIGTERM' });
      expect(a.sidecar!.logs().some((l) => l.msg === 'sent SIGTERM to main process')).toBe(true);
    } finally {
      await relay.stop();
    }
  });
});

describe('helper: restarting the Pod on a loss', () => {
  it('exits with the restart code at the local deadline, at least the kubelet kill before the server expiry', async () => {
    const lease = `restart-${++leaseCount}`;
    const relay = await TcpRelay.start(Number(new URL(central.url).port));
    try {
      const a = await relayedPod(relay, lease, { BERTH_RESTART_POD_ON_LOSS: 'true' });
      await a.waitFor('running');
      const sidecar = a.sidecar!;
      const exit = sidecar.exited.then((e) => ({ ...e, at: Date.now() }));
      const cutAt = Date.now();
      relay.blackhole();
      const exited = await exit;
      // The process ends by itself: nothing (a pending call, the probe server) keeps it alive.
      expect(exited).toMatchObject({ code: RESTART_POD_EXIT_CODE, signal: null });
      expect(exited.at - cutAt).toBeLessThan(TTL_SECONDS * 1_000);
      expect(
        sidecar
          .logs()
          .some((l) => /exiting so that the kubelet restarts every container/.test(String(l.msg))),
      ).toBe(true);
      const state = await serverState(lease);
      expect(exited.at + RESTART_POD_STOP_MS).toBeLessThanOrEqual(state.expiresAt!);
    } finally {
      await relay.stop();
    }
  });
});

describe('helper: credentials', () => {
  it('picks up a rotated token file without losing the lease', async () => {
    const lease = `rotation-${++leaseCount}`;
    const rotatedFile = join(dir, 'rotating-token');
    await writeFile(rotatedFile, `${TOKEN}\n`);
    const a = await pod('a', envFor(lease, { BERTH_API_KEY_FILE: rotatedFile }));
    await a.waitFor('running');
    // The issuer adds the new key, the broker writes the new token, the old key is revoked.
    await appendFile(keysFile, `east:${sha256Hex('token-east-2')}\n`);
    await central.reloadKeys();
    await writeFile(rotatedFile, 'token-east-2\n');
    const renewed = (): Promise<number> =>
      centralCounter(central, 'berth_apiserver_lease_outcomes_total', 'outcome="renewed"');
    const unauthorized = (): Promise<number> =>
      centralCounter(central, 'berth_apiserver_lease_outcomes_total', 'outcome="unauthorized"');
    const before = await renewed();
    await eventually(async () => (await renewed()) >= before + 2, { timeoutMs: 15_000 });
    await writeFile(keysFile, `east:${sha256Hex('token-east-2')}\n`);
    await central.reloadKeys();
    const revokedAt = await renewed();
    const refusedBefore = await unauthorized();
    await eventually(async () => (await renewed()) >= revokedAt + 3, { timeoutMs: 15_000 });
    expect(await unauthorized()).toBe(refusedBefore);
    expect(a.phase).toBe('running');
    expect(await a.probeOnce()).toBe(200);
    // Restore the first key for the tests that follow.
    await writeFile(keysFile, `east:${sha256Hex(TOKEN)}\neast:${sha256Hex('token-east-2')}\n`);
    await central.reloadKeys();
  });
});

describe('helper: footprint of the process', () => {
  it('never resolves @kubernetes/client-node (nor zod or pino), as `run --help` does', async () => {
    const hook = join(process.cwd(), 'test/fixtures/helper/record-resolutions.mjs');
    const record = async (args: string[], env: Record<string, string>): Promise<string[]> => {
      const out = join(dir, `resolved-${Math.random().toString(36).slice(2)}.txt`);
      const p = spawnProc(
        'recorded',
        join(process.cwd(), 'node_modules/.bin/node'),
        ['--import', hook, join(process.cwd(), 'src/main.ts'), ...args],
        {
          ...env,
          BERTH_RECORD_RESOLUTIONS: out,
        },
      );
      await p.exited;
      return (await readFile(out, 'utf8')).split('\n').filter((l) => l !== '');
    };
    const lease = `footprint-${++leaseCount}`;
    const state = join(dir, 'footprint');
    const helper = await record(['helper', 'acquire'], {
      ...envFor(lease),
      POD_NAMESPACE: 'team-a',
      POD_UID: 'u1',
      BERTH_STATE_DIR: state,
    });
    expect(helper.some((u) => u.includes('/src/berth/leaseclient.ts'))).toBe(true);
    expect(helper.some((u) => u.includes('/src/helper/acquire.ts'))).toBe(true);
    for (const heavy of ['@kubernetes/client-node', '/zod/', '/pino/', '/src/run.ts', '/src/commands.ts'])
      expect(
        helper.filter((u) => u.includes(heavy)),
        heavy,
      ).toEqual([]);
    const operator = await record(['run', '--help'], {});
    expect(operator.some((u) => u.includes('@kubernetes/client-node'))).toBe(true);
  });
});
