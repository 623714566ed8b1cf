// Readiness for the probe server: not ready until a valid serving certificate is loaded, and not ready once
// the one being served has expired (the provider could not renew it). Reads cached state only.
import { type Clock, realClock } from '../src/kube/clock.ts';
import type { HealthCheck } from '../src/observability/health.ts';
import type { CertificateProvider } from './provider.ts';

export function certificateReadinessCheck(
  provider: Pick<CertificateProvider, 'current' | 'expiry' | 'mode'>,
  clock: Clock = realClock,
): HealthCheck {
  return () => {
    if (provider.current() === undefined) {
      throw new Error(`no valid webhook serving certificate loaded yet (cert mode ${provider.mode})`);
    }
    const expiry = provider.expiry();
    if (expiry !== undefined && clock.now() >= expiry.getTime()) {
      throw new Error(`webhook serving certificate expired at ${expiry.toISOString()}`);
    }
  };
}
