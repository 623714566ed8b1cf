// hack/prometheus/build.ts: the pin, the release it names, and where the cache lives.
import { describe, expect, it } from 'vitest';
import {
  prometheusCacheKey,
  prometheusCacheRoot,
  prometheusRelease,
} from '../../../hack/prometheus/build.ts';

describe('the Prometheus build', () => {
  it('keys the cache by the pin of github.com/prometheus/prometheus, readably', () => {
    expect(prometheusCacheKey()).toMatch(/^prometheus-v0\.316\.\d+_[0-9a-f]{12}$/);
  });

  it('names the release a module version is (v0.<major><minor>.<patch> since Prometheus 3)', () => {
    expect(prometheusRelease('v0.316.0')).toBe('3.16.0');
    expect(prometheusRelease('v0.305.2')).toBe('3.5.2');
    expect(() => prometheusRelease('v2.53.0')).toThrow(/cannot tell the release/);
  });

  it('keeps the cache outside the checkout: $BERTH_PROMETHEUS_CACHE, else the XDG cache', () => {
    expect(prometheusCacheRoot({ BERTH_PROMETHEUS_CACHE: '/c' })).toBe('/c');
    expect(prometheusCacheRoot({ XDG_CACHE_HOME: '/x' })).toBe('/x/berth-operator/prometheus');
  });
});
