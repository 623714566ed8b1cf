// The selfsigned provider driven by a ManualClock over an in-memory CA store: renewal timing, CA rotation
// with the old+new overlap over weeks of simulated time, recovery of a deleted or junk Secret, API outages.
import { createPrivateKey, X509Certificate } from 'node:crypto';
import { afterEach, describe, expect, it } from 'vitest';
import { CA_DATA_KEYS, caData, parseCaData } from '../../../certs/authority.ts';
import { generateCa } from '../../../certs/issue.ts';
import { EXPIRY_METRIC, RELOAD_ERRORS_METRIC } from '../../../certs/metrics.ts';
import { splitPemCertificates } from '../../../certs/pem.ts';
import type { ServingCertificate } from '../../../certs/provider.ts';
import { certificateReadinessCheck } from '../../../certs/readiness.ts';
import { SelfSignedCertificateProvider, type SelfSignedProviderOptions } from '../../../certs/selfsigned.ts';
import { renewalTime } from '../../../certs/timing.ts';
import { ManualClock } from '../../../src/kube/clock.ts';
import { createRegistry } from '../../../src/observability/metrics.ts';
import { eventually } from '../../helpers/eventually.ts';
import { MemoryCaStore } from './memory-store.ts';

const MIN = 60_000;
const HOUR = 60 * MIN;
const DAY = 24 * HOUR;
const NAMES = ['hook.ns.svc', 'hook', 'hook.ns', 'hook.ns.svc.cluster.local'];

const providers: SelfSignedCertificateProvider[] = [];
afterEach(async () => {
  await Promise.all(providers.splice(0).map((p) => p.stop()));
});

function setup(overrides: Partial<SelfSignedProviderOptions> = {}) {
  const clock = new ManualClock();
  const store = new MemoryCaStore();
  const registry = createRegistry({ defaultMetrics: false });
  const provider = new SelfSignedCertificateProvider({
    store,
    dnsNames: NAMES,
    leafValidityMs: 3 * DAY,
    caValidityMs: 9 * DAY,
    caPropagationMs: HOUR,
    // Only the schedule wakes the provider, so simulated weeks take few steps.
    checkIntervalMs: Number.POSITIVE_INFINITY,
    clock,
    registry,
    ...overrides,
  });
  providers.push(provider);
  return { clock, store, registry, provider };
}

const x509 = (pem: string): X509Certificate => new X509Certificate(pem);
const bundleOf = (pair: ServingCertificate): X509Certificate[] =>
  splitPemCertificates(pair.ca ?? '').map(x509);
const issuerOf = (pair: ServingCertificate): X509Certificate | undefined =>
  bundleOf(pair).find((ca) => x509(pair.cert).verify(ca.publicKey));

describe('SelfSignedCertificateProvider', () => {
  it('creates the CA, issues a leaf for the Service names and reports ready', async () => {
    const { clock, store, registry, provider } = setup();
    const ready = certificateReadinessCheck(provider, clock);
    expect(() => ready()).toThrow('no valid webhook serving certificate loaded yet (cert mode selfsigned)');
    const waiting = provider.waitForCertificate();
    await provider.start();
    await waiting;
    const pair = provider.current()!;
    const leaf = x509(pair.cert);
    expect(leaf.subjectAltName).toBe(NAMES.map((n) => `DNS:${n}`).join(', '));
    expect(leaf.checkPrivateKey(createPrivateKey(pair.key))).toBe(true);
    // The CA in the store is the one in the bundle, and it signed the leaf.
    const stored = parseCaData(store.data!, clock.now()).state!;
    expect(bundleOf(pair).map((c) => c.fingerprint256)).toEqual([stored.current.info.fingerprint]);
    expect(issuerOf(pair)?.fingerprint256).toBe(stored.current.info.fingerprint);
    expect(stored.previous).toBeUndefined();
    expect(provider.expiry()).toEqual(leaf.validToDate);
    expect(() => ready()).not.toThrow();
    // Expiry is computed when scraped.
    const expirySeconds = async (): Promise<number> =>
      (await registry.getSingleMetric(EXPIRY_METRIC)!.get()).values[0]!.value;
    expect(await expirySeconds()).toBe((leaf.validToDate.getTime() - clock.now()) / 1000);
    clock.advance(HOUR);
    expect(await expirySeconds()).toBe((leaf.validToDate.getTime() - clock.now()) / 1000);
  });

  it('renews the leaf at 2/3 of its life, from its own timer, with the same CA', async () => {
    const { clock, provider } = setup();
    await provider.start();
    const first = provider.current()!;
    const renewAt = renewalTime({
      notBefore: x509(first.cert).validFromDate,
      notAfter: x509(first.cert).validToDate,
    });
    expect(clock.nextDueAt()).toBe(renewAt);
    const changes: ServingCertificate[] = [];
    provider.onChange((p) => changes.push(p));

    await clock.advanceAsync(renewAt - clock.now() - 1);
    expect(provider.current()).toBe(first);
    expect(changes).toHaveLength(0);

    await clock.advanceAsync(1);
    await eventually(() => changes.length === 1);
    const second = provider.current()!;
    expect(x509(second.cert).serialNumber).not.toBe(x509(first.cert).serialNumber);
    expect(second.ca).toBe(first.ca);
    expect(x509(second.cert).validFromDate.getTime()).toBe(renewAt - MIN);
    // The next wake-up is the new leaf's renewal.
    expect(clock.nextDueAt()).toBe(
      renewalTime({ notBefore: x509(second.cert).validFromDate, notAfter: x509(second.cert).validToDate }),
    );
  });

  it('rotates the CA at 2/3 of its life with an old+new overlap, switching leaves only after propagation', async () => {
    const { clock, store, provider } = setup();
    await provider.start();
    const ca1 = parseCaData(store.data!, clock.now()).state!.current;
    const rotationAt = renewalTime(ca1.info);
    const firstSeen = new Map<string, number>([[ca1.info.fingerprint, clock.now()]]);
    const bundles: string[][] = [];
    const end = clock.now() + 20 * DAY;
    let steps = 0;
    let atRotation = 0;
    while (clock.now() < end) {
      steps++;
      expect(clock.runNext()).toBe(true);
      await provider.refresh();
      const now = clock.now();
      const pair = provider.current()!;
      const bundle = bundleOf(pair);
      const fps = bundle.map((c) => c.fingerprint256);
      bundles.push(fps);
      for (const fp of fps) if (!firstSeen.has(fp)) firstSeen.set(fp, now);
      // Every CA in the bundle is valid, and the leaf chains to one of them and is valid itself.
      for (const ca of bundle) expect(ca.validToDate.getTime()).toBeGreaterThan(now);
      const issuer = issuerOf(pair);
      expect(issuer, `leaf at step ${steps} does not chain to the bundle`).toBeDefined();
      expect(x509(pair.cert).validToDate.getTime()).toBeGreaterThan(now);
      expect(x509(pair.cert).validToDate.getTime()).toBeLessThanOrEqual(issuer!.validToDate.getTime());
      // A leaf is only signed by a CA that was in the bundle for the propagation delay before it was issued
      // (the initial CA excepted: nothing could have trusted anything before it).
      if (issuer!.fingerprint256 !== ca1.info.fingerprint) {
        const issuedAt = x509(pair.cert).validFromDate.getTime() + MIN;
        expect(issuedAt - firstSeen.get(issuer!.fingerprint256)!).toBeGreaterThanOrEqual(HOUR - 2 * MIN);
      }
      // The Secret and the bundle agree.
      const stored = parseCaData(store.data!, now).state!;
      expect(fps[0]).toBe(stored.current.info.fingerprint);
      if (clock.now() >= rotationAt && clock.now() < rotationAt + 1) {
        atRotation++;
        expect(fps).toEqual([stored.current.info.fingerprint, ca1.info.fingerprint]);
        expect(issuer!.fingerprint256).toBe(ca1.info.fingerprint);
      }
    }
    // Rotations at about 6, 12 and 18 days (2/3 of a 9-day CA), each overlap ending when the old CA expired.
    expect(firstSeen.size).toBe(4);
    expect(bundles.some((b) => b.length === 2)).toBe(true);
    expect(bundles.at(-1)).toHaveLength(1);
    expect(steps).toBeLessThan(200);
    expect(atRotation).toBe(1);
  });

  it('has a replica started during the propagation window sign with the previous CA', async () => {
    const { clock, store, provider } = setup();
    await provider.start();
    const ca1 = parseCaData(store.data!, clock.now()).state!.current;
    clock.advance(renewalTime(ca1.info) - clock.now());
    await provider.refresh();
    const rotated = parseCaData(store.data!, clock.now()).state!;
    expect(rotated.previous?.info.fingerprint).toBe(ca1.info.fingerprint);
    const ca2 = rotated.current;

    const replica = () => {
      const p = new SelfSignedCertificateProvider({
        store,
        dnsNames: NAMES,
        leafValidityMs: 3 * DAY,
        caValidityMs: 9 * DAY,
        caPropagationMs: HOUR,
        clock,
      });
      providers.push(p);
      return p;
    };
    clock.advance(30 * MIN);
    const early = replica();
    await early.start();
    expect(bundleOf(early.current()!).map((c) => c.fingerprint256)).toEqual([
      ca2.info.fingerprint,
      ca1.info.fingerprint,
    ]);
    expect(issuerOf(early.current()!)?.fingerprint256).toBe(ca1.info.fingerprint);

    clock.advance(HOUR);
    const late = replica();
    await late.start();
    expect(issuerOf(late.current()!)?.fingerprint256).toBe(ca2.info.fingerprint);
    expect(late.current()!.ca).toBe(early.current()!.ca);
  });

  it('recreates a deleted CA Secret from memory, so existing trust is kept', async () => {
    const { clock, store, provider } = setup();
    await provider.start();
    const before = provider.current()!;
    const fp = parseCaData(store.data!, clock.now()).state!.current.info.fingerprint;
    store.delete();
    await provider.refresh();
    expect(parseCaData(store.data!, clock.now()).state!.current.info.fingerprint).toBe(fp);
    expect(provider.current()).toBe(before);
  });

  it('puts the known CA back when the Secret is overwritten with junk', async () => {
    const { clock, store, provider } = setup();
    await provider.start();
    const before = provider.current()!;
    const fp = parseCaData(store.data!, clock.now()).state!.current.info.fingerprint;
    store.put({ [CA_DATA_KEYS.cert]: 'junk', [CA_DATA_KEYS.key]: 'junk' });
    await provider.refresh();
    expect(parseCaData(store.data!, clock.now()).state?.current.info.fingerprint).toBe(fp);
    expect(provider.current()).toBe(before);
  });

  it('follows a CA replaced by someone else, reissuing the leaf at once', async () => {
    const { clock, store, provider } = setup();
    await provider.start();
    const foreign = await generateCa({ now: clock.now(), validityMs: 9 * DAY });
    store.put(caData({ current: foreign }));
    const changed = new Promise<ServingCertificate>((resolve) => provider.onChange(resolve));
    await provider.refresh();
    const pair = await changed;
    expect(bundleOf(pair).map((c) => c.fingerprint256)).toEqual([foreign.info.fingerprint]);
    expect(issuerOf(pair)?.fingerprint256).toBe(foreign.info.fingerprint);
  });

  it('keeps renewing the leaf from memory while the API server is unreachable, and counts the errors', async () => {
    const { clock, store, registry, provider } = setup({ retry: { minMs: 1_000, maxMs: 30_000 } });
    await provider.start();
    const first = provider.current()!;
    store.failWith = new Error('connect ECONNREFUSED');
    const errors = async (): Promise<number> =>
      (await registry.getSingleMetric(RELOAD_ERRORS_METRIC)!.get()).values[0]!.value;
    expect(await errors()).toBe(0);
    // Jump to the leaf's renewal.
    const renewAt = renewalTime({
      notBefore: x509(first.cert).validFromDate,
      notAfter: x509(first.cert).validToDate,
    });
    clock.advance(renewAt - clock.now());
    await provider.refresh();
    expect(await errors()).toBeGreaterThanOrEqual(1);
    const second = provider.current()!;
    expect(x509(second.cert).serialNumber).not.toBe(x509(first.cert).serialNumber);
    expect(second.ca).toBe(first.ca);
    // Retries back off: 1 s, 2 s, 4 s ... up to 30 s.
    const delays: number[] = [];
    for (let i = 0; i < 7; i++) {
      const at = clock.now();
      expect(clock.runNext()).toBe(true);
      delays.push(clock.now() - at);
      await provider.refresh();
    }
    expect(delays.slice(1)).toEqual([2_000, 4_000, 8_000, 16_000, 30_000, 30_000]);
    // Back to normal once the store answers again.
    store.failWith = undefined;
    clock.runNext();
    await provider.refresh();
    expect(clock.nextDueAt()! - clock.now()).toBeGreaterThan(30_000);
  });

  it('resolves two providers racing for the Secret to one CA', async () => {
    const clock = new ManualClock();
    const store = new MemoryCaStore();
    const make = () =>
      new SelfSignedCertificateProvider({ store, dnsNames: NAMES, clock, checkIntervalMs: DAY });
    const a = make();
    const b = make();
    providers.push(a, b);
    await Promise.all([a.start(), b.start()]);
    expect(store.calls.exists + store.calls.conflict).toBeGreaterThanOrEqual(1);
    expect(a.current()!.ca).toBe(b.current()!.ca);
    expect(a.current()!.cert).not.toBe(b.current()!.cert);
    expect(issuerOf(a.current()!)?.fingerprint256).toBe(issuerOf(b.current()!)?.fingerprint256);
  });

  it('stops its timer and stays stopped', async () => {
    const { clock, provider } = setup();
    await provider.start();
    expect(clock.pending()).toBe(1);
    await provider.stop();
    expect(clock.pending()).toBe(0);
    await provider.refresh();
    expect(clock.pending()).toBe(0);
    expect(provider.current()).toBeDefined();
  });

  it('starts stopped when the signal is already aborted, and stops when it aborts', async () => {
    const { clock, provider } = setup();
    await provider.start(AbortSignal.abort());
    expect(provider.current()).toBeUndefined();
    expect(clock.pending()).toBe(0);

    const other = setup();
    const ac = new AbortController();
    await other.provider.start(ac.signal);
    ac.abort();
    await eventually(() => other.clock.pending() === 0);
    const wait = new AbortController();
    wait.abort(new Error('gave up'));
    await expect(setup().provider.waitForCertificate(wait.signal)).rejects.toThrow('gave up');
  });
});
