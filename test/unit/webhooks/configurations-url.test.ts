// The start-up verification of webhook configurations that reach the operator by `url` (an operator
// outside the cluster, as the end-to-end suite runs it): the path is read from the URL, not only from a
// Service reference, which used to report `calls path ""` and keep such an operator unready forever.
import { describe, expect, it } from 'vitest';
import {
  type LiveConfigurations,
  mutatingWebhookConfiguration,
  validatingWebhookConfiguration,
  verifyWebhookConfigurations,
} from '../../../webhooks/configurations.ts';

const params = { namespace: 'berth-system', scope: 'opt-in' } as const;

/** The builders' configurations with clientConfig.url to `base` + each webhook's path. */
function byUrl(base: string, paths?: { mutate: string; validate: string }): LiveConfigurations {
  const mutating = mutatingWebhookConfiguration(params);
  const validating = validatingWebhookConfiguration(params);
  for (const [webhook, path] of [
    [mutating.webhooks![0]!, paths?.mutate],
    [validating.webhooks![0]!, paths?.validate],
  ] as const)
    webhook.clientConfig = { url: `${base}${path ?? webhook.clientConfig.service?.path}`, caBundle: 'Q0E=' };
  return { mutating, validating };
}

describe('verifyWebhookConfigurations with url client configs', () => {
  it('accepts webhooks that call the right paths by URL', () => {
    expect(verifyWebhookConfigurations(byUrl('https://172.18.0.1:9443'), params)).toEqual([]);
    expect(verifyWebhookConfigurations(byUrl('https://[fd00::1]:9443'), params)).toEqual([]);
  });

  it('names a URL whose path is not the webhook path', () => {
    const live = byUrl('https://172.18.0.1:9443', {
      mutate: '/validate-managed-workloads',
      validate: '/validate-managed-workloads',
    });
    expect(verifyWebhookConfigurations(live, params)).toEqual([
      'MutatingWebhookConfiguration "berth-operator-injection-workloads" webhook "mutate-workloads.berth.skaphos.io" calls path "/validate-managed-workloads", want "/mutate-managed-workloads"',
    ]);
  });

  it('reports a client config with neither Service nor a parsable URL', () => {
    const live = byUrl('https://172.18.0.1:9443');
    live.mutating!.webhooks![0]!.clientConfig = { url: 'not a url' };
    expect(verifyWebhookConfigurations(live, params)).toEqual([
      'MutatingWebhookConfiguration "berth-operator-injection-workloads" webhook "mutate-workloads.berth.skaphos.io" calls path "", want "/mutate-managed-workloads"',
    ]);
  });
});
