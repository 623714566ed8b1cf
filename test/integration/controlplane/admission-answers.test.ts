// The unit tests judge our webhook answers with test/fixtures/webhooks/golden.ts (kube-apiserver's
// decoding and VerifyAdmissionResponse, re-implemented). This holds that fixture to the real
// kube-apiserver: for each answer, the real server must accept, deny or reject it exactly as the
// fixture predicts, with the fixture's wording inside the server's message.
import { createServer, type Server } from 'node:https';
import type { AddressInfo } from 'node:net';
import { AdmissionregistrationV1Api, type V1ConfigMap } from '@kubernetes/client-node';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createAuthority } from '../../../hack/controlplane/pki.ts';
import { checkAnswer } from '../../fixtures/webhooks/golden.ts';
import { apiOutcome } from '../../helpers/api.ts';
import { TestCluster, uniqueName } from '../../helpers/cluster.ts';
import { eventually } from '../../helpers/eventually.ts';

interface Case {
  name: string;
  /** Which webhook gives the answer; the other allows. */
  path: '/mutate' | '/validate';
  body: (uid: string) => string;
}

const review = (response: object, apiVersion = 'admission.k8s.io/v1'): string =>
  JSON.stringify({ apiVersion, kind: 'AdmissionReview', response });
const b64 = (v: unknown): string => Buffer.from(JSON.stringify(v)).toString('base64');
const addLabel = [{ op: 'add', path: '/metadata/labels', value: { answered: 'yes' } }];

const cases: Case[] = [
  { name: 'allow', path: '/validate', body: (uid) => review({ uid, allowed: true }) },
  {
    name: 'deny-403',
    path: '/validate',
    body: (uid) => review({ uid, allowed: false, status: { code: 403, message: 'refused by the rule' } }),
  },
  {
    name: 'patch',
    path: '/mutate',
    body: (uid) => review({ uid, allowed: true, patchType: 'JSONPatch', patch: b64(addLabel) }),
  },
  {
    name: 'patch-without-type',
    path: '/mutate',
    body: (uid) => review({ uid, allowed: true, patch: b64(addLabel) }),
  },
  {
    name: 'patch-from-validating',
    path: '/validate',
    body: (uid) => review({ uid, allowed: true, patchType: 'JSONPatch', patch: b64(addLabel) }),
  },
  { name: 'wrong-uid', path: '/validate', body: () => review({ uid: 'not-the-request', allowed: true }) },
  {
    name: 'wrong-version',
    path: '/validate',
    body: (uid) => review({ uid, allowed: true }, 'admission.k8s.io/v1beta1'),
  },
  {
    name: 'wrong-kind',
    path: '/validate',
    body: (uid) =>
      JSON.stringify({ apiVersion: 'admission.k8s.io/v1', kind: 'Answer', response: { uid, allowed: true } }),
  },
  {
    name: 'bad-base64',
    path: '/mutate',
    body: (uid) => review({ uid, allowed: true, patchType: 'JSONPatch', patch: 'not base64!' }),
  },
  { name: 'allowed-not-bool', path: '/validate', body: (uid) => review({ uid, allowed: 'yes' }) },
];

let t: TestCluster;
let ns: string;
let server: Server;
let caBundle: string;
const names: string[] = [];
/** The request uid the API server sent for each case. */
const uids = new Map<string, string>();

beforeAll(async () => {
  t = await TestCluster.shared();
  ns = await t.namespace('answers');
  const ca = await createAuthority('answers-ca');
  const pair = await ca.serving(['127.0.0.1']);
  caBundle = Buffer.from(ca.cert).toString('base64');
  server = createServer({ cert: pair.cert, key: pair.key }, (req, res) => {
    let text = '';
    req.on('data', (c: Buffer) => {
      text += c.toString();
    });
    req.on('end', () => {
      const request = (JSON.parse(text) as { request: { uid: string; object?: V1ConfigMap } }).request;
      const name = request.object?.metadata?.name ?? '';
      // kube-apiserver adds ?timeout=<seconds>s to the webhook's URL.
      const path = new URL(req.url ?? '/', 'https://webhook').pathname;
      const c = cases.find((x) => x.name === name);
      if (c && path === c.path) uids.set(c.name, request.uid);
      const probe = name.startsWith('probe-') && path === '/validate';
      const body =
        c && path === c.path
          ? c.body(request.uid)
          : review({ uid: request.uid, allowed: !probe, status: { code: 403, message: 'probe' } });
      res.writeHead(200, { 'Content-Type': 'application/json' });
      res.end(body);
    });
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  const port = (server.address() as AddressInfo).port;
  const admission = t.kc.makeApiClient(AdmissionregistrationV1Api);
  const webhook = (path: string) => ({
    name: `${path.slice(1)}.answers.berth.skaphos.io`,
    admissionReviewVersions: ['v1'],
    sideEffects: 'None',
    failurePolicy: 'Fail',
    timeoutSeconds: 5,
    clientConfig: { url: `https://127.0.0.1:${port}${path}`, caBundle },
    namespaceSelector: { matchLabels: { 'kubernetes.io/metadata.name': ns } },
    rules: [{ apiGroups: [''], apiVersions: ['v1'], operations: ['CREATE'], resources: ['configmaps'] }],
  });
  const name = uniqueName('answers');
  names.push(name);
  await admission.createMutatingWebhookConfiguration({
    body: { metadata: { name }, webhooks: [{ ...webhook('/mutate'), reinvocationPolicy: 'Never' }] },
  });
  await admission.createValidatingWebhookConfiguration({
    body: { metadata: { name }, webhooks: [webhook('/validate')] },
  });
  // In effect once the probe is refused (the API server picks up new configurations asynchronously).
  let probes = 0;
  await eventually(async () => {
    const name = `probe-${++probes}`;
    const outcome = await apiOutcome(
      t.core.createNamespacedConfigMap({ namespace: ns, body: { metadata: { name } } }),
    );
    return outcome.code === 403;
  });
});

afterAll(async () => {
  const admission = t.kc.makeApiClient(AdmissionregistrationV1Api);
  for (const name of names) {
    await admission.deleteMutatingWebhookConfiguration({ name }).catch(() => {});
    await admission.deleteValidatingWebhookConfiguration({ name }).catch(() => {});
  }
  server?.close();
  await t?.stop();
});

/** What the fixture says kube-apiserver does with the case's answer to the request `uid`. */
function predict(c: Case, uid: string): { allowed: true } | { denied: string } | { invalid: string } {
  try {
    const answer = checkAnswer(200, 'application/json', c.body(uid), uid, c.path === '/mutate');
    return answer.allowed ? { allowed: true } : { denied: answer.message ?? '' };
  } catch (err) {
    return { invalid: (err as Error).message };
  }
}

describe('the real kube-apiserver judges webhook answers as the fixture does', () => {
  it.each(cases)('$name', async (c) => {
    const outcome = await apiOutcome(
      t.core.createNamespacedConfigMap({ namespace: ns, body: { metadata: { name: c.name } } }),
    );
    const uid = uids.get(c.name);
    expect(uid, 'the webhook was called').toBeDefined();
    const predicted = predict(c, uid!);
    if ('allowed' in predicted) {
      expect(outcome.code, outcome.message).toBe(200);
      return;
    }
    expect(outcome.code).not.toBe(200);
    if ('denied' in predicted) {
      expect(outcome.code).toBe(403);
      expect(outcome.message).toContain(predicted.denied);
    } else {
      expect(outcome.message).toContain(predicted.invalid);
    }
  });
});
