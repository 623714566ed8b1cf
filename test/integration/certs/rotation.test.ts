// Rotation under continuous traffic, end to end, with lifetimes shrunk to seconds: two replicas (each its
// own provider and HTTPS server, its own user with the install's rules) share the CA Secret; the leader's
// registration keeps the webhook configuration's caBundle; the real API server calls the webhook
// (failurePolicy Fail) through its Service for every ConfigMap create in the test's namespace, and a direct
// client trusting exactly the configuration's caBundle makes fresh TLS handshakes to both replicas. Leaves
// rotate every ~4 s and the CA rotates once; no request may fail.
import { X509Certificate } from 'node:crypto';
import { createServer, request, type Server } from 'node:https';
import type { AddressInfo } from 'node:net';
import type { TLSSocket } from 'node:tls';
import {
  AdmissionregistrationV1Api,
  CoreV1Api,
  RbacAuthorizationV1Api,
  type V1PolicyRule,
  type V1ValidatingWebhookConfiguration,
} from '@kubernetes/client-node';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { parseCaData } from '../../../certs/authority.ts';
import { SecretCaStore } from '../../../certs/ca-store.ts';
import { serviceDnsNames } from '../../../certs/create.ts';
import { SelfSignedCertificateProvider } from '../../../certs/selfsigned.ts';
import { attachToTlsServer } from '../../../certs/tls-server.ts';
import {
  caSecretRules,
  webhookEndpointsRule,
  webhookRegistrationRules,
} from '../../../scripts/deploy-rbac.ts';
import { WebhookRegistration } from '../../../webhooks/registration.ts';
import { TestCluster, uniqueName } from '../../helpers/cluster.ts';
import { eventually } from '../../helpers/eventually.ts';

const SECRET = 'berth-operator-webhook-ca';
const SERVICE = 'berth-operator-webhook';
const CONFIG = uniqueName('berth-rotation-test');
const TLS_OPTIONS = { minVersion: 'TLSv1.2' } as const;
/** The install's rules (scripts/deploy-rbac.ts): the CA Secret for each replica, the registration for the leader. */
const SECRET_RULES: V1PolicyRule[] = caSecretRules(SECRET);
const REGISTRATION_RULES: V1PolicyRule[] = webhookRegistrationRules(CONFIG);

interface Replica {
  provider: SelfSignedCertificateProvider;
  server: Server;
  port: number;
  detach: () => void;
}

let t: TestCluster;
/** Stands for the operator namespace. */
let ns: string;
/** Where the webhook applies. */
let apps: string;
let serverName: string;
const replicas: Replica[] = [];
let registration: WebhookRegistration | undefined;

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

async function startReplica(name: string): Promise<Replica> {
  const user = await t.user(uniqueName(name));
  await t.grant(user.username, SECRET_RULES, ns);
  const provider = new SelfSignedCertificateProvider({
    store: new SecretCaStore({ transport: t.transport(user.kc), namespace: ns, name: SECRET }),
    dnsNames: serviceDnsNames(SERVICE, ns),
    // A leaf is renewed a third of its life before it expires, after a read of the CA Secret: on the real
    // API server under load that read took up to a second (the in-process fake: milliseconds), so the
    // leaves live 6 s, not 3.
    leafValidityMs: 6_000,
    caValidityMs: 24_000,
    // Backdating (2.4 s) and whole-second notBefore eat into this; what is left must cover the bundle's
    // journey from the Secret to the configuration (a 200 ms poll and one reconcile).
    caPropagationMs: 8_000,
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
  // On every address: the API server reaches it through the Service's EndpointSlice at t.hostAddress.
  await new Promise<void>((resolve) => server.listen(0, '0.0.0.0', resolve));
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
        servername: serverName,
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
  t = await TestCluster.shared();
  ns = await t.namespace('rotation');
  apps = await t.namespace('rotation-apps');
  serverName = `${SERVICE}.${ns}.svc`;
  const admission = t.kc.makeApiClient(AdmissionregistrationV1Api);
  const rbac = t.kc.makeApiClient(RbacAuthorizationV1Api);
  // The owner the registration requires; deleting it removes both configurations.
  await rbac.createClusterRole({ body: { metadata: { name: CONFIG }, rules: [] } });
  t.onCleanup(`clusterrole ${CONFIG}`, async () => {
    await rbac.deleteClusterRole({ name: CONFIG });
    await admission.deleteValidatingWebhookConfiguration({ name: CONFIG }).catch(() => {});
    await admission.deleteMutatingWebhookConfiguration({ name: CONFIG }).catch(() => {});
  });
});

/** What the leader registers: one validating webhook for the test namespace's ConfigMaps, no mutating one. */
const validating = (): V1ValidatingWebhookConfiguration => ({
  metadata: { name: CONFIG },
  webhooks: [
    {
      name: 'validate.rotation.berth.skaphos.io',
      admissionReviewVersions: ['v1'],
      sideEffects: 'None',
      failurePolicy: 'Fail',
      timeoutSeconds: 5,
      clientConfig: { service: { namespace: ns, name: SERVICE, path: '/validate' } },
      rules: [{ apiGroups: [''], apiVersions: ['v1'], operations: ['CREATE'], resources: ['configmaps'] }],
      namespaceSelector: { matchLabels: { 'kubernetes.io/metadata.name': apps } },
    },
  ],
});

afterAll(async () => {
  await registration?.stop();
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
    await t.routeService(ns, SERVICE, [{ port: leader.port }]);
    const leaderUser = await t.user(uniqueName('leader'));
    await t.grant(leaderUser.username, REGISTRATION_RULES);
    await t.grant(leaderUser.username, [webhookEndpointsRule()], ns);
    registration = new WebhookRegistration({
      transport: t.transport(leaderUser.kc),
      mutating: { metadata: { name: CONFIG }, webhooks: [] },
      validating: validating(),
      service: { namespace: ns, name: SERVICE },
      source: leader.provider,
      resyncIntervalMs: 1_000,
    });
    await registration.start();

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
            namespace: apps,
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
          const secret = await core2.readNamespacedSecret({ name: SECRET, namespace: ns });
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
