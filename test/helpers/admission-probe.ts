// Waiting until kube-apiserver calls our webhooks: it picks up new webhook configurations, their caBundle
// and the webhook Service's EndpointSlices asynchronously, through informers. A dry-run Pod create per
// try, until the admission server has answered one more review on every path.
import type { CoreV1Api } from '@kubernetes/client-node';
import type { Registry } from 'prom-client';
import { MUTATE_WORKLOADS_PATH, VALIDATE_WORKLOADS_PATH } from '../../src/berth/api.ts';
import { eventually } from './eventually.ts';

/** Reviews the admission server answered on `path` (controller-runtime's request counter). */
export async function webhookRequests(registry: Registry, path: string): Promise<number> {
  const values =
    (await registry.getSingleMetric('controller_runtime_webhook_requests_total')?.get())?.values ?? [];
  return values.filter((v) => v.labels.webhook === path).reduce((sum, v) => sum + v.value, 0);
}

export async function untilAdmissionServed(
  core: CoreV1Api,
  namespace: string,
  registry: Registry,
  paths: readonly string[] = [MUTATE_WORKLOADS_PATH, VALIDATE_WORKLOADS_PATH],
): Promise<void> {
  await eventually(
    async () => {
      const before = await Promise.all(paths.map((p) => webhookRequests(registry, p)));
      await core.createNamespacedPod({
        namespace,
        dryRun: 'All',
        body: {
          metadata: { generateName: 'admission-probe-' },
          spec: { containers: [{ name: 'app', image: 'registry.example.com/app:1' }] },
        },
      });
      const after = await Promise.all(paths.map((p) => webhookRequests(registry, p)));
      return after.every((n, i) => n > (before[i] ?? 0));
    },
    { timeoutMs: 30_000, intervalMs: 100 },
  );
}
