// Where the self-signed CA is shared between replicas: a Secret in the operator namespace. Every write is
// race-safe: create (whoever comes first wins; the others get AlreadyExists and read the winner's), and
// replace guarded by the resourceVersion that was read (a 409 means someone else wrote first: re-read).
import type { V1Secret } from '@kubernetes/client-node';
import { isAlreadyExists, isConflict, isNotFound, readJson, resourcePath } from '../src/kube/client.ts';
import type { KubeRequester } from '../src/kube/transport.ts';

/** The Secret's data, decoded (PEM strings by key). */
export type CaData = Record<string, string>;

export interface StoredCa {
  data: CaData;
  resourceVersion: string;
}

export interface CaStore {
  /** For logs, e.g. `secret berth-system/berth-operator-webhook-ca`. */
  readonly description: string;
  /** Undefined when it does not exist. */
  read(): Promise<StoredCa | undefined>;
  /** 'exists' when someone else created it first. */
  create(data: CaData): Promise<StoredCa | 'exists'>;
  /** 'conflict' when it changed (or was deleted) since `resourceVersion` was read. */
  replace(data: CaData, resourceVersion: string): Promise<StoredCa | 'conflict'>;
}

export interface SecretCaStoreOptions {
  /** The process's API transport. */
  transport: KubeRequester;
  namespace: string;
  name: string;
}

export const CA_SECRET_LABELS: Readonly<Record<string, string>> = {
  'app.kubernetes.io/name': 'berth-operator',
  'app.kubernetes.io/component': 'webhook-ca',
  'app.kubernetes.io/managed-by': 'berth-operator',
};

const decode = (data: Record<string, string> | undefined): CaData =>
  Object.fromEntries(
    Object.entries(data ?? {}).map(([k, v]) => [k, Buffer.from(v, 'base64').toString('utf8')]),
  );

const encode = (data: CaData): Record<string, string> =>
  Object.fromEntries(Object.entries(data).map(([k, v]) => [k, Buffer.from(v, 'utf8').toString('base64')]));

export class SecretCaStore implements CaStore {
  readonly description: string;
  readonly #transport: KubeRequester;
  /** The namespace's Secrets collection, and the Secret in it. */
  readonly #secrets: string;
  readonly #path: string;
  readonly #namespace: string;
  readonly #name: string;
  /** The last Secret read or written, so a replace keeps labels, annotations and type set by others. */
  #last: V1Secret | undefined;

  constructor(options: SecretCaStoreOptions) {
    this.#transport = options.transport;
    const secrets = { version: 'v1', plural: 'secrets', namespace: options.namespace };
    this.#secrets = resourcePath(secrets);
    this.#path = resourcePath(secrets, options.name);
    this.#namespace = options.namespace;
    this.#name = options.name;
    this.description = `secret ${options.namespace}/${options.name}`;
  }

  async read(): Promise<StoredCa | undefined> {
    try {
      return this.#stored(await readJson<V1Secret>(await this.#transport.request({ path: this.#path })));
    } catch (err) {
      if (isNotFound(err)) {
        this.#last = undefined;
        return undefined;
      }
      throw err;
    }
  }

  async create(data: CaData): Promise<StoredCa | 'exists'> {
    const body: V1Secret = {
      apiVersion: 'v1',
      kind: 'Secret',
      metadata: { name: this.#name, namespace: this.#namespace, labels: { ...CA_SECRET_LABELS } },
      type: 'Opaque',
      data: encode(data),
    };
    try {
      return this.#stored(
        await readJson<V1Secret>(
          await this.#transport.request({ method: 'POST', path: this.#secrets, body }),
        ),
      );
    } catch (err) {
      if (isAlreadyExists(err)) return 'exists';
      throw err;
    }
  }

  async replace(data: CaData, resourceVersion: string): Promise<StoredCa | 'conflict'> {
    const last = this.#last?.metadata?.resourceVersion === resourceVersion ? this.#last : undefined;
    const body: V1Secret = {
      apiVersion: 'v1',
      kind: 'Secret',
      metadata: {
        ...(last?.metadata ?? {}),
        name: this.#name,
        namespace: this.#namespace,
        resourceVersion,
        labels: { ...(last?.metadata?.labels ?? {}), ...CA_SECRET_LABELS },
      },
      type: last?.type ?? 'Opaque',
      data: encode(data),
    };
    delete body.metadata?.managedFields;
    try {
      return this.#stored(
        await readJson<V1Secret>(await this.#transport.request({ method: 'PUT', path: this.#path, body })),
      );
    } catch (err) {
      // Deleted since it was read: the caller re-reads and creates.
      if (isConflict(err) || isNotFound(err)) return 'conflict';
      throw err;
    }
  }

  #stored(secret: V1Secret): StoredCa {
    this.#last = secret;
    return { data: decode(secret.data), resourceVersion: secret.metadata?.resourceVersion ?? '' };
  }
}
