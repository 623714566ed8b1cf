// Rotation under continuous traffic, end to end, with lifetimes shrunk to seconds: two replicas (each its
// own provider and HTTPS server) share the CA Secret; the leader's reconciler keeps the webhook
// configuration's caBundle; the sandbox API server calls the webhook (failurePolicy Fail) for every
// ConfigMap create, and a direct client trusting exactly the configuration's caBundle makes fresh TLS
// handshakes to both replicas. Leaves rotate every ~2 s and the CA rotates once; no request may fail.
import { X509Certificate } from 'node:crypto';
import { createServer, request, type Server } from 'node:https';
import type { AddressInfo } from 'node:net';
import type { TLSSocket } from 'node:tls';
import { AdmissionregistrationV1Api, CoreV1Api } from '@kubernetes/client-node';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { parseCaData } from '../../../certs/authority.ts';
import { SecretCaStore } from '../../../certs/ca-store.ts';
import { CaBundleReconciler } from '../../../certs/cabundle.ts';
import { serviceDnsNames } from '../../../certs/create.ts';
import { SelfSignedCertificateProvider } from '../../../certs/selfsigned.ts';
import { attachToTlsServer } from '../../../certs/tls-server.ts';
import { eventually } from '../../helpers/eventually.ts';
import { startTestSandbox, type TestSandbox } from '../../helpers/sandbox.ts';

const NAMESPACE = 'berth-system';
const APPS = 'apps';
const SECRET = 'berth-operator-webhook-ca';
const SERVICE = 'berth-operator-webhook';
const CONFIG = 'berth-rotation-test';
const SERVER_NAME = `${SERVICE}.${NAMESPACE}.svc`;
const TLS_OPTIONS = { minVersion: 'TLSv1.2' } as const;

interface Replica {
  provider: SelfSignedCertificateProvider;
  server: Server;
  port: number;
  detach: () => void;
}

let t: TestSandbox;
const replicas: Replica[] = [];
let reconciler: CaBundleReconciler | undefined;

/** Reviews sent by the API server (the direct client's carry uid "x"). */
let reviewsFromApiServer = 0;

function reviewResponse(body: string): string {
  const uid = (JSON.parse(body) as { request?: { uid?: string } }).request?.uid ?? '';
  if (uid !== 'x') reviewsFromApiServer++;
  return JSON.stringify({
    apiVersion: 'admission.k8s.io/v1',
    kind: 'AdmissionReview',
    response: { uid, allowed: true },
  });
}

async function startReplica(user: string): Promise<Replica> {
  const kc = t.kubeConfigFor(t.sandbox.users.add(user).kubeconfig);
  const provider = new SelfSignedCertificateProvider({
    store: new SecretCaStore({ kc, namespace: NAMESPACE, name: SECRET }),
    dnsNames: serviceDnsNames(SERVICE, NAMESPACE),
    leafValidityMs: 3_000,
    caValidityMs: 12_000,
    // Backdating (1.2 s) and whole-second notBefore eat into this; what is left must cover the bundle's
    // journey from the Secret to the configuration (a 200 ms poll and one reconcile).
    caPropagationMs: 4_000,
    checkIntervalMs: 200,
    retry: { minMs: 100, maxMs: 1_000 },
  });
  await provider.start();
  await provider.waitForCertificate();
  const pair = provider.current()!;
  const server = createServer({ ...TLS_OPTIONS, key: pair.key, cert: pair.cert }, (req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      res.writeHead(200, { 'Content-Type': 'application/json' });
      res.end(reviewResponse(Buffer.concat(chunks).toString('utf8') || '{}'));
    });
  });
  const detach = attachToTlsServer(provider, server, TLS_OPTIONS);
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const replica = { provider, server, port: (server.address() as AddressInfo).port, detach };
  replicas.push(replica);
  return replica;
}

interface Seen {
  leaves: Set<string>;
  issuers: Set<string>;
}

/** One request on a fresh connection, trusting exactly `caPem`; resolves with what was served. */
function call(port: number, caPem: string): Promise<{ leaf: string; issuer: string }> {
  return new Promise((resolve, reject) => {
    const req = request(
      {
        host: '127.0.0.1',
        port,
        servername: SERVER_NAME,
        path: '/validate',
        method: 'POST',
        ca: caPem,
        agent: false,
        headers: { 'Content-Type': 'application/json' },
        timeout: 5_000,
      },
      (res) => {
        const peer = (res.socket as TLSSocket).getPeerCertificate(true);
        res.resume();
        res.on('end', () =>
          res.statusCode === 200
            ? resolve({ leaf: peer.fingerprint256, issuer: [peer.issuer.CN ?? ''].flat().join(',') })
            : reject(new Error(`HTTP ${res.statusCode}`)),
        );
      },
    );
    req.on('timeout', () => req.destroy(new Error('timeout')));
    req.on('error', reject);
    req.end(
      JSON.stringify({ apiVersion: 'admission.k8s.io/v1', kind: 'AdmissionReview', request: { uid: 'x' } }),
    );
  });
}

beforeAll(async () => {
  t = await startTestSandbox();
  const core = t.kc.makeApiClient(CoreV1Api);
  await core.createNamespace({ body: { metadata: { name: NAMESPACE } } });
  await core.createNamespace({ body: { metadata: { name: APPS, labels: { admission: 'on' } } } });
  await t.kc.makeApiClient(AdmissionregistrationV1Api).createValidatingWebhookConfiguration({
    body: {
      metadata: { name: CONFIG },
      webhooks: [
        {
          name: 'validate.rotation.berth.skaphos.io',
          admissionReviewVersions: ['v1'],
          sideEffects: 'None',
          failurePolicy: 'Fail',
          timeoutSeconds: 5,
          clientConfig: { service: { namespace: NAMESPACE, name: SERVICE, path: '/validate' } },
          rules: [
            { apiGroups: [''], apiVersions: ['v1'], operations: ['CREATE'], resources: ['configmaps'] },
          ],
          namespaceSelector: { matchLabels: { admission: 'on' } },
        },
      ],
    },
  });
});

afterAll(async () => {
  await reconciler?.stop();
  for (const r of replicas.splice(0)) {
    r.detach();
    await r.provider.stop();
    await new Promise<void>((resolve) => r.server.close(() => resolve()));
  }
  await t?.stop();
});

describe('certificate rotation under traffic', () => {
  it('serves every request across leaf and CA rotations, through the API server and directly', async () => {
    const leader = await startReplica('replica-a');
    await startReplica('replica-b');
    t.sandbox.services.map(NAMESPACE, SERVICE, { host: '127.0.0.1', port: leader.port });
    const leaderKc = t.kubeConfigFor(t.sandbox.users.add('leader').kubeconfig);
    reconciler = new CaBundleReconciler({
      kc: leaderKc,
      mutatingWebhookConfiguration: 'none-in-this-test',
      validatingWebhookConfiguration: CONFIG,
      source: leader.provider,
      resyncIntervalMs: 1_000,
    });
    await reconciler.start();

    const admission = t.kc.makeApiClient(AdmissionregistrationV1Api);
    const core = t.kc.makeApiClient(CoreV1Api);
    // What the API server trusts: the configuration's caBundle, refreshed continuously.
    let trusted = '';
    const bundleSizes = new Set<number>();
    const pemCount = (pem: string): number => pem.split('-----BEGIN CERTIFICATE-----').length - 1;
    const readTrusted = async (): Promise<string> => {
      const v = await admission.readValidatingWebhookConfiguration({ name: CONFIG });
      const b64 = v.webhooks?.[0]?.clientConfig.caBundle ?? '';
      return Buffer.from(b64, 'base64').toString('utf8');
    };
    // Filled by the reconciler.
    trusted = (await eventually(async () => (await readTrusted()) || undefined)) ?? '';

    let running = true;
    const failures: string[] = [];
    const apiCalls = { ok: 0 };
    const direct = { ok: 0 };
    const seen = new Map<Replica, Seen>(replicas.map((r) => [r, { leaves: new Set(), issuers: new Set() }]));

    const bundlePoller = (async () => {
      while (running) {
        try {
          trusted = await readTrusted();
          bundleSizes.add(pemCount(trusted));
        } catch (err) {
          failures.push(`reading the caBundle: ${(err as Error).message}`);
        }
        await new Promise((r) => setTimeout(r, 50));
      }
    })();
    const apiTraffic = (async () => {
      while (running) {
        try {
          await core.createNamespacedConfigMap({
            namespace: APPS,
            body: { metadata: { generateName: 'cm-' } },
          });
          apiCalls.ok++;
        } catch (err) {
          failures.push(`API create: ${(err as { body?: unknown }).body ?? (err as Error).message}`);
        }
      }
    })();
    const directTraffic = replicas.map(async (replica) => {
      const s = seen.get(replica)!;
      while (running) {
        try {
          const served = await call(replica.port, trusted);
          s.leaves.add(served.leaf);
          s.issuers.add(served.issuer);
          direct.ok++;
        } catch (err) {
          failures.push(`direct to :${replica.port}: ${(err as Error).message}`);
        }
      }
    });

    const core2 = t.kc.makeApiClient(CoreV1Api);
    let newCa: string | undefined;
    try {
      // Until the CA has rotated, both replicas serve a leaf of the new CA (after 2+ leaf rotations), and
      // the old CA, expired, has left the caBundle again.
      await eventually(
        async () => {
          const secret = await core2.readNamespacedSecret({ name: SECRET, namespace: NAMESPACE });
          const data = Object.fromEntries(
            Object.entries(secret.data ?? {}).map(([k, v]) => [k, Buffer.from(v, 'base64').toString('utf8')]),
          );
          const state = parseCaData(data, Date.now()).state;
          if (state?.previous !== undefined)
            newCa ??= new X509Certificate(state.current.cert).subject.slice(3);
          const rotatedTo = newCa;
          if (rotatedTo === undefined) return false;
          const switched = [...seen.values()].every((s) => s.issuers.has(rotatedTo) && s.leaves.size >= 3);
          return switched && bundleSizes.has(2) && pemCount(trusted) === 1;
        },
        { timeoutMs: 40_000, intervalMs: 200 },
      );
    } finally {
      running = false;
      await Promise.all([bundlePoller, apiTraffic, ...directTraffic]);
    }

    expect(failures).toEqual([]);
    expect(apiCalls.ok).toBeGreaterThan(50);
    expect(reviewsFromApiServer).toBeGreaterThanOrEqual(apiCalls.ok);
    expect(direct.ok).toBeGreaterThan(50);
    for (const s of seen.values()) expect(s.issuers.size).toBe(2);
    // The follower's leaves are its own.
    const [a, b] = [...seen.values()];
    expect([...a!.leaves].some((fp) => b!.leaves.has(fp))).toBe(false);
  }, 60_000);
});
