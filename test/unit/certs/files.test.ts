// The files provider's poll path (no watcher) on a real directory with a ManualClock: a new pair is picked
// up at the next poll, a bad pair is rejected and counted while the old one stays, a missing directory is
// waited for. (The watch path and the Secret-volume symlink swap run in test/integration/certs/files.test.ts.)
import { mkdir, mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import type { CaKeyPair, IssuedLeaf } from '../../../certs/authority.ts';
import { FilesCertificateProvider, type FilesProviderOptions } from '../../../certs/files.ts';
import { generateCa, issueLeaf } from '../../../certs/issue.ts';
import { RELOAD_ERRORS_METRIC } from '../../../certs/metrics.ts';
import { certificateReadinessCheck } from '../../../certs/readiness.ts';
import { ManualClock } from '../../../src/kube/clock.ts';
import { createLogger } from '../../../src/observability/logger.ts';
import { createRegistry } from '../../../src/observability/metrics.ts';
import { eventually } from '../../helpers/eventually.ts';

const DAY = 86_400_000;
const NAMES = ['hook.ns.svc'];

let root: string;
let ca: CaKeyPair;
let leafA: IssuedLeaf;
let leafB: IssuedLeaf;
let expired: IssuedLeaf;
const clockStart = Date.UTC(2026, 0, 1);

beforeAll(async () => {
  root = await mkdtemp(join(tmpdir(), 'berth-certs-unit-'));
  ca = await generateCa({ now: clockStart, validityMs: 30 * DAY });
  leafA = await issueLeaf(ca, { now: clockStart, validityMs: 7 * DAY, dnsNames: NAMES });
  leafB = await issueLeaf(ca, { now: clockStart, validityMs: 7 * DAY, dnsNames: NAMES });
  expired = await issueLeaf(ca, { now: clockStart - 120_000, validityMs: 60_000, dnsNames: NAMES });
});
afterAll(async () => {
  await rm(root, { recursive: true, force: true });
});

const providers: FilesCertificateProvider[] = [];
afterEach(async () => {
  await Promise.all(providers.splice(0).map((p) => p.stop()));
});

let n = 0;
async function setup(overrides: Partial<FilesProviderOptions> = {}) {
  const dir = join(root, `case-${n++}`);
  const clock = new ManualClock(clockStart);
  const registry = createRegistry({ defaultMetrics: false });
  const lines: string[] = [];
  const logger = createLogger({ level: 'debug', destination: { write: (l: string) => void lines.push(l) } });
  const provider = new FilesCertificateProvider({
    dir,
    watch: false,
    pollIntervalMs: 10_000,
    clock,
    registry,
    logger,
    ...overrides,
  });
  providers.push(provider);
  const errors = async (): Promise<number> =>
    (await registry.getSingleMetric(RELOAD_ERRORS_METRIC)!.get()).values[0]!.value;
  return { dir, clock, provider, errors, lines };
}

async function writePair(dir: string, cert: string, key: string, caPem?: string): Promise<void> {
  await mkdir(dir, { recursive: true });
  await writeFile(join(dir, 'tls.crt'), cert);
  await writeFile(join(dir, 'tls.key'), key);
  if (caPem !== undefined) await writeFile(join(dir, 'ca.crt'), caPem);
}

describe('FilesCertificateProvider (poll)', () => {
  it('loads the pair at start, with ca.crt when present', async () => {
    const { dir, provider, errors } = await setup();
    await writePair(dir, leafA.cert, leafA.key, ca.cert);
    await provider.start();
    expect(provider.current()).toEqual({ cert: leafA.cert, key: leafA.key, ca: ca.cert });
    expect(provider.expiry()).toEqual(leafA.info.notAfter);
    expect(await errors()).toBe(0);
  });

  it('picks up a new pair at the next poll, not before', async () => {
    const { dir, clock, provider } = await setup();
    await writePair(dir, leafA.cert, leafA.key);
    await provider.start();
    await writePair(dir, leafB.cert, leafB.key);
    await clock.advanceAsync(9_999);
    expect(provider.current()?.cert).toBe(leafA.cert);
    await clock.advanceAsync(1);
    await eventually(() => provider.current()?.cert === leafB.cert);
  });

  it('rejects a mismatched, expired or unreadable pair, keeps the old one and counts each failure', async () => {
    const { dir, provider, errors, lines } = await setup();
    await writePair(dir, leafA.cert, leafA.key);
    await provider.start();
    const changes: string[] = [];
    provider.onChange((p) => changes.push(p.cert));

    await writePair(dir, leafB.cert, leafA.key);
    await provider.refresh();
    expect(provider.current()?.cert).toBe(leafA.cert);
    expect(await errors()).toBe(1);
    await provider.refresh();
    expect(await errors()).toBe(2);
    // The same problem is logged once, at warn, without the key.
    const warnings = lines.filter((l) => l.includes('"level":"warn"'));
    expect(warnings).toHaveLength(1);
    expect(warnings[0]).toContain('private key does not match the certificate');
    expect(lines.join('\n')).not.toContain(leafA.key.split('\n')[1]);

    await writePair(dir, expired.cert, expired.key);
    await provider.refresh();
    expect(await errors()).toBe(3);
    expect(provider.current()?.cert).toBe(leafA.cert);

    await rm(join(dir, 'tls.key'));
    await provider.refresh();
    expect(await errors()).toBe(4);
    expect(lines.some((l) => l.includes('ENOENT'))).toBe(true);
    expect(changes).toEqual([]);

    await writePair(dir, leafB.cert, leafB.key);
    await provider.refresh();
    expect(changes).toEqual([leafB.cert]);
    expect(await errors()).toBe(4);
  });

  it('waits for a directory that does not exist yet, and is not ready until then', async () => {
    const { dir, clock, provider } = await setup();
    const ready = certificateReadinessCheck(provider, clock);
    await provider.start();
    expect(provider.current()).toBeUndefined();
    expect(() => ready()).toThrow('no valid webhook serving certificate loaded yet (cert mode files)');
    const loaded = provider.waitForCertificate();
    await writePair(dir, leafA.cert, leafA.key);
    await clock.advanceAsync(10_000);
    await loaded;
    expect(() => ready()).not.toThrow();
    // Readiness fails again once the served certificate expires.
    clock.advance(7 * DAY);
    expect(() => ready()).toThrow(/^webhook serving certificate expired at /);
  });

  it('stops polling on stop()', async () => {
    const { dir, clock, provider } = await setup();
    await writePair(dir, leafA.cert, leafA.key);
    await provider.start();
    expect(clock.pending()).toBe(1);
    await provider.stop();
    expect(clock.pending()).toBe(0);
  });
});
