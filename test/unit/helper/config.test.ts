// The helper's configuration: Go's environment names, flag overrides, defaults, validation messages and
// holder identity rules (the cases of the Go helper's config tests).
import { describe, expect, it } from 'vitest';
import { parseFlags } from '../../../src/cli.ts';
import {
  configFromEnv,
  type HelperConfig,
  holderOf,
  type RawHelperConfig,
  resolveConfig,
  withFlags,
} from '../../../src/helper/config.ts';
import { subcommandSpec } from '../../../src/helper/spec.ts';

const BASE_ENV = {
  BERTH_LEASE_NAME: 'checkout',
  POD_NAMESPACE: 'prod',
  POD_NAME: 'checkout-7f6c-j4n8x',
  POD_UID: '8c21b044-49ae-4db6-9fe3-530fb06cb5ea',
  BERTH_TTL_SECONDS: '30',
  BERTH_API_SERVER: 'https://berth.example:8443',
};

const raw = (env: Record<string, string> = {}): RawHelperConfig => configFromEnv({ ...BASE_ENV, ...env });
const resolve = (env: Record<string, string> = {}): HelperConfig => resolveConfig(raw(env));
const flags = (argv: string[]) => parseFlags(subcommandSpec('renew'), argv);

describe('helper configuration defaults', () => {
  it('applies the Go defaults', () => {
    expect(resolve()).toMatchObject({
      stateDir: '/berth',
      mode: 'runtime-singleton',
      enforce: 'probe',
      leaseNamespace: 'prod',
      heartbeatMs: 10_000,
      releaseOnShutdown: true,
      probePort: 9394,
      enforceGraceMs: 0,
    });
  });

  it('does not release on shutdown by default in startup-gate mode', () => {
    expect(resolve({ BERTH_MODE: 'startup-gate' }).releaseOnShutdown).toBe(false);
    expect(resolve({ BERTH_MODE: 'startup-gate', BERTH_RELEASE_ON_SHUTDOWN: 'T' }).releaseOnShutdown).toBe(
      true,
    );
  });

  it('keeps ttl/3 exact, as a Go duration', () => {
    expect(resolve({ BERTH_TTL_SECONDS: '10' }).heartbeatMs).toBeCloseTo(3_333.333, 2);
  });
});

describe('helper configuration validation', () => {
  const cases: Array<[string, Record<string, string>, string]> = [
    ['no lease name', { BERTH_LEASE_NAME: '' }, 'lease name is required'],
    [
      'no namespace',
      { POD_NAMESPACE: '' },
      'lease namespace is required (set --lease-namespace or POD_NAMESPACE)',
    ],
    [
      'bad mode',
      { BERTH_MODE: 'weird' },
      'invalid mode "weird" (want "startup-gate" or "runtime-singleton")',
    ],
    ['bad enforce', { BERTH_ENFORCE: 'nuke' }, 'invalid enforce "nuke" (want "probe" or "signal")'],
    [
      'zero ttl',
      { BERTH_TTL_SECONDS: '0' },
      'ttl must be positive and at most 2147483647 seconds (the API limit)',
    ],
    [
      'heartbeat >= ttl',
      { BERTH_HEARTBEAT_SECONDS: '30' },
      'heartbeat interval (30s) must be less than ttl (30s)',
    ],
    ['negative grace', { BERTH_ENFORCE_GRACE_SECONDS: '-1' }, 'enforce grace must not be negative'],
    ['no api server', { BERTH_API_SERVER: '' }, 'api server URL is required'],
    [
      'a clear-text api server',
      { BERTH_API_SERVER: 'http://berth.example:8080' },
      'api server URL "http://berth.example:8080" (--api-server or BERTH_API_SERVER) must be an https:// URL, not http://: the bearer token would cross the network in clear text',
    ],
    [
      'an api server without a scheme',
      { BERTH_API_SERVER: 'berth.example:8443' },
      'api server URL "berth.example:8443" (--api-server or BERTH_API_SERVER) must be an https:// URL, e.g. https://berth.example.com',
    ],
    [
      'key and key file',
      { BERTH_API_KEY: 'k', BERTH_API_KEY_FILE: '/f' },
      'api key and api key file are mutually exclusive',
    ],
    ['signal without target', { BERTH_ENFORCE: 'signal' }, 'signal target is required when enforce=signal'],
    [
      'no pod UID',
      { POD_UID: '' },
      'pod UID is required for the runtime-singleton holder (set --pod-uid or POD_UID from metadata.uid)',
    ],
    [
      'heartbeat plus the lead',
      { BERTH_TTL_SECONDS: '12', BERTH_HEARTBEAT_SECONDS: '10' },
      "heartbeat interval (10s) plus the enforcement lead (4s: one probe period, the probe's kill grace and 1s to kill) must be less than ttl (12s)",
    ],
  ];
  for (const [name, env, message] of cases)
    it(`refuses: ${name}`, () => {
      expect(() => resolve(env)).toThrow(message);
    });

  it('accepts signal enforcement with a target, and in startup-gate mode without one', () => {
    expect(resolve({ BERTH_ENFORCE: 'signal', BERTH_SIGNAL_TARGET: 'nginx' }).enforce).toBe('signal');
    expect(resolve({ BERTH_MODE: 'startup-gate', BERTH_ENFORCE: 'signal' }).mode).toBe('startup-gate');
  });

  it('refuses malformed numbers and booleans in the environment, naming the variable', () => {
    expect(() => raw({ BERTH_TTL_SECONDS: '1.5' })).toThrow(
      'BERTH_TTL_SECONDS="1.5": must be an integer number of seconds',
    );
    expect(() => raw({ BERTH_RELEASE_ON_SHUTDOWN: 'yes' })).toThrow(
      'BERTH_RELEASE_ON_SHUTDOWN="yes": invalid boolean (want true or false)',
    );
  });

  it("refuses Pod UIDs that are not one identity component, as Go's", () => {
    for (const uid of ['other/uid', 'other:uid', 'uid ', ' uid', 'uid\n', '\u00a0uid'])
      expect(() => resolve({ POD_UID: uid }), JSON.stringify(uid)).toThrow('pod UID must be');
    expect(resolve({ POD_UID: '', BERTH_HOLDER_IDENTITY: 'explicit' }).holder).toBe('explicit');
    expect(resolve({ POD_UID: '', BERTH_MODE: 'startup-gate' }).holder).toBe('prod/checkout-7f6c-j4n8x');
  });

  it('counts the runtime holder in bytes, at most 253, and keeps the UID whole', () => {
    for (const size of [253, 254]) {
      const fixed = holderOf({ ...raw(), mode: 'runtime-singleton', workloadName: 'é' });
      const name = `é${'a'.repeat(size - Buffer.byteLength(fixed))}`;
      const env = { BERTH_WORKLOAD_NAME: name };
      expect(Buffer.byteLength(holderOf({ ...raw(env), mode: 'runtime-singleton' }))).toBe(size);
      if (size > 253) expect(() => resolve(env)).toThrow('runtime holder exceeds the API limit of 253 bytes');
      else expect(resolve(env).holder.endsWith(':uid:8c21b044-49ae-4db6-9fe3-530fb06cb5ea')).toBe(true);
    }
  });
});

describe('helper flags', () => {
  it('override the environment only when given', () => {
    const merged = withFlags(
      raw({ BERTH_MODE: 'startup-gate' }),
      flags(['--ttl-seconds', '60', '--lease-name=other']),
    );
    expect(merged).toMatchObject({ ttlSeconds: 60, leaseName: 'other', mode: 'startup-gate' });
    expect(withFlags(raw(), flags(['--release-on-shutdown=false'])).releaseOnShutdown).toBe(false);
    expect(withFlags(raw(), flags([])).releaseOnShutdown).toBeUndefined();
  });

  it('want whole seconds', () => {
    expect(() => withFlags(raw(), flags(['--ttl-seconds', '1.5']))).toThrow(
      '--ttl-seconds: want a whole number, got 1.5',
    );
  });
});

describe('holder identity', () => {
  const holder = (mode: string, over: Partial<RawHelperConfig> = {}): string =>
    holderOf({ ...raw(), mode, ...over });

  it('runtime-singleton: cluster root, workload, Pod name and UID', () => {
    expect(
      holder('runtime-singleton', {
        clusterId: 'east',
        workloadKind: 'deployment',
        workloadName: 'checkout',
      }),
    ).toBe('east/prod:deployment:checkout:pod:checkout-7f6c-j4n8x:uid:8c21b044-49ae-4db6-9fe3-530fb06cb5ea');
    expect(holder('runtime-singleton')).toBe(
      'prod/pod:checkout-7f6c-j4n8x:uid:8c21b044-49ae-4db6-9fe3-530fb06cb5ea',
    );
  });

  it('startup-gate: rooted at the cluster id too, workload-level, the Pod only when the workload is unknown', () => {
    expect(holder('startup-gate', { workloadKind: 'deployment', workloadName: 'checkout' })).toBe(
      'prod/deployment:checkout',
    );
    expect(
      holder('startup-gate', { clusterId: 'east', workloadKind: 'deployment', workloadName: 'checkout' }),
    ).toBe('east/prod:deployment:checkout');
    expect(holder('startup-gate', { clusterId: 'east' })).toBe('east/prod:checkout-7f6c-j4n8x');
    expect(holder('startup-gate', { podUid: 'replacement' })).toBe(holder('startup-gate'));
  });

  it('an explicit identity replaces the default, unchanged', () => {
    expect(holder('runtime-singleton', { holderIdentity: ' my holder ' })).toBe(' my holder ');
  });
});
