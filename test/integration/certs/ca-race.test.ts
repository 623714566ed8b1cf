// Two replicas starting together against the real API server (each its own user, with the install's rules
// for the CA Secret) both find no CA Secret and both try to create it: exactly one create wins, the other
// gets AlreadyExists and adopts the winner's CA.
import { X509Certificate } from 'node:crypto';
import { CoreV1Api, type V1PolicyRule } from '@kubernetes/client-node';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type CaData, type CaStore, SecretCaStore, type StoredCa } from '../../../certs/ca-store.ts';
import { serviceDnsNames } from '../../../certs/create.ts';
import { splitPemCertificates } from '../../../certs/pem.ts';
import { SelfSignedCertificateProvider } from '../../../certs/selfsigned.ts';
import { caSecretRules } from '../../../scripts/deploy-rbac.ts';
import { TestCluster, uniqueName } from '../../helpers/cluster.ts';

const SECRET = 'berth-operator-webhook-ca';
/** What the install grants for the CA Secret (scripts/deploy-rbac.ts). */
const SECRET_RULES: V1PolicyRule[] = caSecretRules(SECRET);

let t: TestCluster;
/** Stands for the operator namespace. */
let ns: string;
beforeAll(async () => {
  t = await TestCluster.shared();
  ns = await t.namespace('ca-race');
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
    const replica = async (name: string) => {
      const user = await t.user(uniqueName(name));
      await t.grant(user.username, SECRET_RULES, ns);
      const store = new RacingStore(
        new SecretCaStore({ transport: t.transport(user.kc), namespace: ns, name: SECRET }),
        barrier,
        onMissing,
      );
      const provider = new SelfSignedCertificateProvider({
        store,
        dnsNames: serviceDnsNames('berth-operator-webhook', ns),
      });
      return { store, provider };
    };
    const [a, b] = await Promise.all([replica('replica-a'), replica('replica-b')]);
    try {
      await Promise.all([a.provider.start(), b.provider.start()]);
      await Promise.all([a.provider.waitForCertificate(), b.provider.waitForCertificate()]);

      expect([...a.store.creates, ...b.store.creates].sort()).toEqual(['created', 'exists']);
      const secret = await t.kc
        .makeApiClient(CoreV1Api)
        .readNamespacedSecret({ name: SECRET, namespace: ns });
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
        expect(leaf.checkHost(`berth-operator-webhook.${ns}.svc`)).toBe(`berth-operator-webhook.${ns}.svc`);
      }
      // Each replica has its own leaf (and key), which never leaves its memory.
      expect(a.provider.current()!.key).not.toBe(b.provider.current()!.key);
    } finally {
      await Promise.all([a.provider.stop(), b.provider.stop()]);
    }
  });
});
