// Two replicas starting together against the API server both find no CA Secret and both try to create it:
// exactly one create wins, the other gets AlreadyExists and adopts the winner's CA.
import { X509Certificate } from 'node:crypto';
import { CoreV1Api } from '@kubernetes/client-node';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type CaData, type CaStore, SecretCaStore, type StoredCa } from '../../../certs/ca-store.ts';
import { serviceDnsNames } from '../../../certs/create.ts';
import { splitPemCertificates } from '../../../certs/pem.ts';
import { SelfSignedCertificateProvider } from '../../../certs/selfsigned.ts';
import { startTestSandbox, type TestSandbox } from '../../helpers/sandbox.ts';

const NAMESPACE = 'berth-system';
const SECRET = 'berth-operator-webhook-ca';

let t: TestSandbox;
beforeAll(async () => {
  t = await startTestSandbox();
  await t.kc.makeApiClient(CoreV1Api).createNamespace({ body: { metadata: { name: NAMESPACE } } });
});
afterAll(async () => {
  await t?.stop();
});

/** Lets every replica read "no Secret" before any of them creates it, so the race really happens. */
class RacingStore implements CaStore {
  readonly description: string;
  readonly creates: Array<'created' | 'exists'> = [];
  readonly #inner: CaStore;
  readonly #barrier: Promise<void>;
  readonly #onMissing: () => void;

  constructor(inner: CaStore, barrier: Promise<void>, onMissing: () => void) {
    this.#inner = inner;
    this.#barrier = barrier;
    this.description = inner.description;
    this.#onMissing = onMissing;
  }

  async read(): Promise<StoredCa | undefined> {
    const stored = await this.#inner.read();
    if (stored === undefined) this.#onMissing();
    return stored;
  }

  async create(data: CaData): Promise<StoredCa | 'exists'> {
    await this.#barrier;
    const result = await this.#inner.create(data);
    this.creates.push(result === 'exists' ? 'exists' : 'created');
    return result;
  }

  replace(data: CaData, resourceVersion: string): Promise<StoredCa | 'conflict'> {
    return this.#inner.replace(data, resourceVersion);
  }
}

describe('CA Secret bootstrap', () => {
  it('ends with one CA when two replicas race to create it', async () => {
    let missing = 0;
    let open: () => void = () => {};
    const barrier = new Promise<void>((resolve) => {
      open = resolve;
    });
    const onMissing = (): void => {
      if (++missing === 2) open();
    };
    const replica = (user: string) => {
      const kc = t.kubeConfigFor(t.sandbox.users.add(user).kubeconfig);
      const store = new RacingStore(
        new SecretCaStore({ kc, namespace: NAMESPACE, name: SECRET }),
        barrier,
        onMissing,
      );
      const provider = new SelfSignedCertificateProvider({
        store,
        dnsNames: serviceDnsNames('berth-operator-webhook', NAMESPACE),
      });
      return { store, provider };
    };
    const a = replica('replica-a');
    const b = replica('replica-b');
    try {
      await Promise.all([a.provider.start(), b.provider.start()]);
      await Promise.all([a.provider.waitForCertificate(), b.provider.waitForCertificate()]);

      expect([...a.store.creates, ...b.store.creates].sort()).toEqual(['created', 'exists']);
      const secret = await t.kc
        .makeApiClient(CoreV1Api)
        .readNamespacedSecret({ name: SECRET, namespace: NAMESPACE });
      expect(secret.type).toBe('Opaque');
      expect(secret.metadata?.labels?.['app.kubernetes.io/managed-by']).toBe('berth-operator');
      expect(Object.keys(secret.data ?? {}).sort()).toEqual(['ca.crt', 'ca.key']);
      const caPem = Buffer.from(secret.data!['ca.crt']!, 'base64').toString('utf8');
      const ca = new X509Certificate(caPem);

      for (const p of [a.provider, b.provider]) {
        const pair = p.current()!;
        expect(splitPemCertificates(pair.ca!).map((c) => new X509Certificate(c).fingerprint256)).toEqual([
          ca.fingerprint256,
        ]);
        const leaf = new X509Certificate(pair.cert);
        expect(leaf.verify(ca.publicKey)).toBe(true);
        expect(leaf.checkHost('berth-operator-webhook.berth-system.svc')).toBe(
          'berth-operator-webhook.berth-system.svc',
        );
      }
      // Each replica has its own leaf (and key), which never leaves its memory.
      expect(a.provider.current()!.key).not.toBe(b.provider.current()!.key);
    } finally {
      await Promise.all([a.provider.stop(), b.provider.stop()]);
    }
  });
});
