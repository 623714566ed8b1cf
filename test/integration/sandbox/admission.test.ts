// The sandbox's admission chain end to end: a real HTTPS webhook registered through the API, reached
// through a Service mapping and verified against its caBundle.
import { AdmissionregistrationV1Api, ApiException, CoreV1Api } from '@kubernetes/client-node';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestSandbox, type TestSandbox } from '../../helpers/sandbox.ts';
import { startWebhookServer, type TestWebhookServer } from '../../helpers/webhook-server.ts';

let t: TestSandbox;
let hook: TestWebhookServer;
let core: CoreV1Api;

beforeAll(async () => {
  t = await startTestSandbox();
  core = t.kc.makeApiClient(CoreV1Api);
  hook = await startWebhookServer('hook.hooks.svc', (req, path) => {
    if (req.resource.resource === 'configmaps' && req.object?.metadata?.name === 'forbidden') {
      return { allowed: false, status: { code: 403, message: 'name "forbidden" is not allowed' } };
    }
    if (
      path.startsWith('/mutate') &&
      req.operation === 'CREATE' &&
      req.resource.resource === 'configmaps' &&
      req.object?.metadata?.labels?.stamp === 'me'
    ) {
      return {
        allowed: true,
        patch: [{ op: 'add', path: '/metadata/labels/stamped', value: 'yes' }],
        warnings: ['stamped by the test webhook'],
      };
    }
    return { allowed: true };
  });
  t.sandbox.services.map('hooks', 'hook', { host: '127.0.0.1', port: hook.port });
  await core.createNamespace({ body: { metadata: { name: 'watched', labels: { admission: 'on' } } } });
  await core.createNamespace({ body: { metadata: { name: 'ignored' } } });
  const admission = t.kc.makeApiClient(AdmissionregistrationV1Api);
  const clientConfig = {
    caBundle: hook.caBundle,
    service: { namespace: 'hooks', name: 'hook', path: '/mutate' },
  };
  const rules = [
    { apiGroups: [''], apiVersions: ['v1'], operations: ['CREATE', 'UPDATE'], resources: ['configmaps'] },
  ];
  await admission.createMutatingWebhookConfiguration({
    body: {
      metadata: { name: 'test-mutating' },
      webhooks: [
        {
          name: 'mutate.test.example.com',
          clientConfig,
          rules,
          sideEffects: 'None',
          admissionReviewVersions: ['v1'],
          namespaceSelector: { matchLabels: { admission: 'on' } },
        },
      ],
    },
  });
  await admission.createValidatingWebhookConfiguration({
    body: {
      metadata: { name: 'test-validating' },
      webhooks: [
        {
          name: 'validate.test.example.com',
          clientConfig: { ...clientConfig, service: { ...clientConfig.service, path: '/validate' } },
          rules,
          sideEffects: 'None',
          admissionReviewVersions: ['v1'],
          namespaceSelector: { matchLabels: { admission: 'on' } },
        },
      ],
    },
  });
});
afterAll(async () => {
  await t.stop();
  await hook.stop();
});

describe('admission chain', () => {
  it('applies a mutating webhook patch and passes its warnings on', async () => {
    const cm = await core.createNamespacedConfigMap({
      namespace: 'watched',
      body: { metadata: { name: 'stamp', labels: { stamp: 'me' } } },
    });
    expect(cm.metadata?.labels).toEqual({ stamp: 'me', stamped: 'yes' });
    const seen = hook.requests.filter((r) => r.name === 'stamp');
    expect(seen.map((r) => r.operation)).toEqual(['CREATE', 'CREATE']);
    expect(seen[0]?.userInfo.username).toBe('sandbox-admin');
  });

  it('denies with the webhook message, prefixed as kube-apiserver does', async () => {
    try {
      await core.createNamespacedConfigMap({
        namespace: 'watched',
        body: { metadata: { name: 'forbidden' } },
      });
      expect.unreachable();
    } catch (err) {
      expect(err).toBeInstanceOf(ApiException);
      const e = err as ApiException<string>;
      expect(e.code).toBe(403);
      expect(JSON.parse(e.body).message).toBe(
        'admission webhook "mutate.test.example.com" denied the request: name "forbidden" is not allowed',
      );
    }
  });

  it('honours the namespaceSelector', async () => {
    const before = hook.requests.length;
    await core.createNamespacedConfigMap({ namespace: 'ignored', body: { metadata: { name: 'forbidden' } } });
    expect(hook.requests.length).toBe(before);
  });

  it('gives the validating webhook the stored uid on CREATE', async () => {
    await core.createNamespacedConfigMap({ namespace: 'watched', body: { metadata: { name: 'uid-check' } } });
    const validating = hook.requests.filter((r) => r.name === 'uid-check');
    expect(validating).toHaveLength(2);
    expect(validating[0]?.object?.metadata?.uid).toBeUndefined();
    expect(validating[1]?.object?.metadata?.uid).toMatch(/^[0-9a-f-]{36}$/);
  });

  it('fails closed when the webhook cannot be reached', async () => {
    t.sandbox.services.unmap('hooks', 'hook');
    try {
      await core.createNamespacedConfigMap({
        namespace: 'watched',
        body: { metadata: { name: 'unreachable' } },
      });
      expect.unreachable();
    } catch (err) {
      const e = err as ApiException<string>;
      expect(e.code).toBe(500);
      expect(JSON.parse(e.body).message).toMatch(
        /^Internal error occurred: failed calling webhook "mutate.test.example.com": failed to call webhook: /,
      );
    } finally {
      t.sandbox.services.map('hooks', 'hook', { host: '127.0.0.1', port: hook.port });
    }
  });
});
