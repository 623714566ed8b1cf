import { once } from 'node:events';
import type { IncomingHttpHeaders } from 'node:http';
import https from 'node:https';
import type { AddressInfo } from 'node:net';
import selfsigned from 'selfsigned';
import { afterEach, beforeAll, describe, expect, it } from 'vitest';
import {
  type AdmissionAttributes,
  AdmissionChain,
  type AdmissionDeps,
  AdmissionError,
} from '../../../src/sandbox/admission.ts';
import {
  type Rule,
  ruleMatches,
  shouldCallHook,
  type Webhook,
} from '../../../src/sandbox/admission-match.ts';
import { type JsonObject, type KubeObject, StatusError } from '../../../src/sandbox/types.ts';

// ---------------------------------------------------------------------------------------------------
// Certificates: one CA signs the webhook servers' leaf (SANs hook.ns.svc, localhost, 127.0.0.1); a
// second, unrelated CA stands for a wrong caBundle.

interface Pki {
  caBundle: string;
  otherCaBundle: string;
  key: string;
  cert: string;
}
let pki: Pki;

async function makeCa(cn: string): Promise<{ key: string; cert: string }> {
  const ca = await selfsigned.generate([{ name: 'commonName', value: cn }], {
    algorithm: 'sha256',
    keyType: 'ec',
    extensions: [
      { name: 'basicConstraints', cA: true, critical: true },
      { name: 'keyUsage', keyCertSign: true, cRLSign: true, digitalSignature: true, critical: true },
    ],
  });
  return { key: ca.private, cert: ca.cert };
}

beforeAll(async () => {
  const ca = await makeCa('admission-test-ca');
  const other = await makeCa('some-other-ca');
  const leaf = await selfsigned.generate([{ name: 'commonName', value: 'hook.ns.svc' }], {
    algorithm: 'sha256',
    keyType: 'ec',
    ca,
    extensions: [
      { name: 'basicConstraints', cA: false },
      { name: 'keyUsage', digitalSignature: true, keyEncipherment: true, critical: true },
      { name: 'extKeyUsage', serverAuth: true },
      {
        name: 'subjectAltName',
        altNames: [
          { type: 2, value: 'hook.ns.svc' },
          { type: 2, value: 'localhost' },
          { type: 7, ip: '127.0.0.1' },
        ],
      },
    ],
  });
  pki = {
    caBundle: Buffer.from(ca.cert).toString('base64'),
    otherCaBundle: Buffer.from(other.cert).toString('base64'),
    key: leaf.private,
    cert: leaf.cert,
  };
});

// ---------------------------------------------------------------------------------------------------
// A real HTTPS webhook server. Handlers return an AdmissionResponse (uid and envelope filled in), a raw
// HTTP answer, or 'hang' to never answer.

type Reply =
  | { response: JsonObject }
  | { raw: { status?: number; contentType?: string; body: string } }
  | 'hang';
/** Gets the AdmissionRequest and the path it was sent to (without the query). */
type Handler = (request: JsonObject, path: string) => Reply | Promise<Reply>;

interface Received {
  url: string;
  headers: IncomingHttpHeaders;
  review: JsonObject;
}

interface WebhookServer {
  port: number;
  received: Received[];
  /** Resolves when a request the server never answered has its connection closed by the client. */
  abandoned: Promise<void>;
}

const servers: https.Server[] = [];

afterEach(async () => {
  await Promise.all(
    servers.splice(0).map((s) => {
      s.closeAllConnections();
      return new Promise<void>((resolve) => s.close(() => resolve()));
    }),
  );
});

async function startWebhook(handler: Handler): Promise<WebhookServer> {
  const received: Received[] = [];
  let markAbandoned: () => void = () => {};
  const abandoned = new Promise<void>((resolve) => {
    markAbandoned = resolve;
  });
  const server = https.createServer({ key: pki.key, cert: pki.cert }, async (req, res) => {
    const chunks: Buffer[] = [];
    for await (const chunk of req) chunks.push(chunk as Buffer);
    const review = JSON.parse(Buffer.concat(chunks).toString()) as JsonObject;
    received.push({ url: req.url ?? '', headers: req.headers, review });
    const reply = await handler((review.request ?? {}) as JsonObject, (req.url ?? '').split('?')[0] ?? '');
    if (reply === 'hang') {
      res.on('close', () => markAbandoned());
      return;
    }
    if ('raw' in reply) {
      res.writeHead(reply.raw.status ?? 200, { 'content-type': reply.raw.contentType ?? 'application/json' });
      res.end(reply.raw.body);
      return;
    }
    const uid = (review.request as JsonObject).uid;
    res.writeHead(200, { 'content-type': 'application/json' });
    res.end(
      JSON.stringify({
        apiVersion: review.apiVersion,
        kind: 'AdmissionReview',
        response: { uid, ...reply.response },
      }),
    );
  });
  servers.push(server);
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  return { port: (server.address() as AddressInfo).port, received, abandoned };
}

/** A port nobody listens on: bound once, then released. */
async function closedPort(): Promise<number> {
  const server = https.createServer();
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  const { port } = server.address() as AddressInfo;
  await new Promise<void>((resolve) => server.close(() => resolve()));
  return port;
}

const labelsOf = (object: unknown): Record<string, string> =>
  ((object as KubeObject | null)?.metadata.labels ?? {}) as Record<string, string>;
/** The AdmissionRequest of the server's n-th call. */
function requestOf(server: WebhookServer | undefined, n = 0): JsonObject {
  const review = server?.received[n]?.review;
  if (!review) throw new Error(`the webhook server has no call #${n}`);
  return review.request as JsonObject;
}
const pathsOf = (server: WebhookServer): string[] => server.received.map((r) => r.url.split('?')[0] ?? '');

const allow = (extra: JsonObject = {}): Reply => ({ response: { allowed: true, ...extra } });
const patch = (ops: JsonObject[]): Reply =>
  allow({ patchType: 'JSONPatch', patch: Buffer.from(JSON.stringify(ops)).toString('base64') });

// ---------------------------------------------------------------------------------------------------
// Configurations and requests.

function hook(name: string, overrides: JsonObject = {}): JsonObject {
  return {
    name,
    clientConfig: { service: { namespace: 'ns', name: 'hook', path: `/${name}` }, caBundle: pki.caBundle },
    rules: [{ operations: ['CREATE', 'UPDATE'], apiGroups: [''], apiVersions: ['v1'], resources: ['pods'] }],
    sideEffects: 'None',
    admissionReviewVersions: ['v1'],
    timeoutSeconds: 5,
    ...overrides,
  };
}

const configuration = (kind: string, name: string, webhooks: JsonObject[]): KubeObject => ({
  apiVersion: 'admissionregistration.k8s.io/v1',
  kind,
  metadata: { name },
  webhooks,
});
const mutating = (name: string, ...webhooks: JsonObject[]) =>
  configuration('MutatingWebhookConfiguration', name, webhooks);
const validating = (name: string, ...webhooks: JsonObject[]) =>
  configuration('ValidatingWebhookConfiguration', name, webhooks);

interface Setup {
  mutating?: KubeObject[];
  validating?: KubeObject[];
  /** Port per `<namespace>/<service>`; the default service ns/hook is the first server's. */
  services?: Record<string, number>;
  namespaces?: Record<string, Record<string, string>>;
}

function chainFor(setup: Setup): AdmissionChain {
  const deps: AdmissionDeps = {
    mutatingConfigs: () => setup.mutating ?? [],
    validatingConfigs: () => setup.validating ?? [],
    getNamespace: (name) => {
      const labels = setup.namespaces?.[name];
      return labels ? { apiVersion: 'v1', kind: 'Namespace', metadata: { name, labels } } : undefined;
    },
    resolveService: (namespace, name) => {
      const port = setup.services?.[`${namespace}/${name}`];
      return port === undefined ? undefined : { host: '127.0.0.1', port };
    },
  };
  return new AdmissionChain(deps);
}

const pod = (labels: Record<string, string> = { app: 'web' }): KubeObject => ({
  apiVersion: 'v1',
  kind: 'Pod',
  metadata: { name: 'web', namespace: 'team-a', labels },
  spec: { containers: [{ name: 'c', image: 'nginx' }] },
});

function podAttrs(overrides: Partial<AdmissionAttributes> = {}): AdmissionAttributes {
  return {
    resource: { group: '', version: 'v1', resource: 'pods' },
    subResource: '',
    kind: { group: '', version: 'v1', kind: 'Pod' },
    name: 'web',
    namespace: 'team-a',
    operation: 'CREATE',
    userInfo: {
      username: 'alice',
      uid: 'u-1',
      groups: ['devs', 'system:authenticated'],
      extra: { scope: ['x'] },
    },
    object: pod(),
    oldObject: null,
    options: { kind: 'CreateOptions', apiVersion: 'meta.k8s.io/v1' },
    dryRun: false,
    clusterScoped: false,
    ...overrides,
  };
}

async function rejection(promise: Promise<unknown>): Promise<AdmissionError> {
  try {
    await promise;
  } catch (err) {
    expect(err).toBeInstanceOf(StatusError);
    expect(err).toBeInstanceOf(AdmissionError);
    return err as AdmissionError;
  }
  throw new Error('expected the admission chain to reject the request');
}

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/;

// ---------------------------------------------------------------------------------------------------

describe('rules', () => {
  const attrs = (resource: string, subResource = '', extra: Partial<AdmissionAttributes> = {}) =>
    podAttrs({ resource: { group: '', version: 'v1', resource }, subResource, ...extra });
  const rule = (r: Partial<Rule>): Rule => ({
    operations: ['*'],
    apiGroups: ['*'],
    apiVersions: ['*'],
    resources: ['*'],
    ...r,
  });

  it.each([
    ['pods', 'pods', '', true],
    ['pods', 'pods', 'status', false],
    ['*', 'pods', '', true],
    ['*', 'pods', 'status', false],
    ['*/*', 'pods', 'status', true],
    ['*/*', 'pods', '', true],
    ['pods/*', 'pods', 'exec', true],
    ['pods/*', 'pods', '', true], // kube: a `*` subresource also matches none
    ['pods/binding', 'pods', 'binding', true],
    ['pods/binding', 'pods', 'status', false],
    ['*/status', 'deployments', 'status', true],
    ['*/status', 'deployments', '', false],
    ['services', 'pods', '', false],
  ])('resources [%s] on %s/%s -> %s', (resource, res, sub, want) => {
    expect(ruleMatches(rule({ resources: [resource] }), attrs(res, sub))).toBe(want);
  });

  it('matches apiGroups, apiVersions and operations exactly or by *', () => {
    const apps = podAttrs({ resource: { group: 'apps', version: 'v1', resource: 'deployments' } });
    expect(ruleMatches(rule({ apiGroups: [''] }), apps)).toBe(false);
    expect(ruleMatches(rule({ apiGroups: ['apps'] }), apps)).toBe(true);
    expect(ruleMatches(rule({ apiVersions: ['v1beta1'] }), apps)).toBe(false);
    expect(ruleMatches(rule({ apiVersions: ['v1beta1', 'v1'] }), apps)).toBe(true);
    expect(ruleMatches(rule({ operations: ['CREATE'] }), podAttrs({ operation: 'UPDATE' }))).toBe(false);
    expect(ruleMatches(rule({ operations: ['DELETE', 'UPDATE'] }), podAttrs({ operation: 'UPDATE' }))).toBe(
      true,
    );
    expect(ruleMatches(rule({ operations: ['*'] }), podAttrs({ operation: 'CONNECT' }))).toBe(true);
    expect(ruleMatches(rule({ operations: [] }), podAttrs())).toBe(false);
  });

  it('scopes: a Namespace is cluster-scoped although its request names a namespace', () => {
    const node = podAttrs({ resource: { group: '', version: 'v1', resource: 'nodes' }, namespace: '' });
    const ns = podAttrs({
      resource: { group: '', version: 'v1', resource: 'namespaces' },
      namespace: 'team-a',
    });
    const inNs = podAttrs();
    for (const [scope, want] of [
      ['Namespaced', [false, false, true]],
      ['Cluster', [true, true, false]],
      ['*', [true, true, true]],
      [undefined, [true, true, true]],
      ['Bogus', [false, false, false]],
    ] as const) {
      const r = rule(scope === undefined ? {} : { scope });
      expect(
        [node, ns, inNs].map((a) => ruleMatches(r, a)),
        String(scope),
      ).toEqual(want);
    }
  });
});

describe('selectors and matchConditions', () => {
  const namespaces: Record<string, Record<string, string>> = {
    'team-a': { env: 'prod' },
    'team-b': { env: 'dev' },
  };
  const getNamespace = (name: string): KubeObject | undefined =>
    namespaces[name] ? { metadata: { name, labels: namespaces[name] } } : undefined;
  const wh = (w: Partial<Webhook>): Webhook => ({
    name: 'w.example.com',
    clientConfig: {},
    rules: [{ operations: ['*'], apiGroups: ['*'], apiVersions: ['*'], resources: ['*'] }],
    ...w,
  });
  const decide = (w: Partial<Webhook>, attrs: AdmissionAttributes) =>
    shouldCallHook(wh(w), {
      attrs,
      current: attrs.object,
      request: { operation: attrs.operation },
      getNamespace,
    });
  const prodOnly = { namespaceSelector: { matchLabels: { env: 'prod' } } };

  it("namespaceSelector matches the namespace's labels", () => {
    expect(decide(prodOnly, podAttrs())).toBe(true);
    expect(decide(prodOnly, podAttrs({ namespace: 'team-b' }))).toBe(false);
    expect(
      decide(
        { namespaceSelector: { matchExpressions: [{ key: 'env', operator: 'NotIn', values: ['prod'] }] } },
        podAttrs(),
      ),
    ).toBe(false);
  });

  it('namespaceSelector is ignored for cluster-scoped objects', () => {
    const node = podAttrs({
      resource: { group: '', version: 'v1', resource: 'nodes' },
      namespace: '',
      clusterScoped: true,
    });
    expect(decide(prodOnly, node)).toBe(true);
  });

  it('a Namespace is matched on its own labels when created or updated, on the stored one when deleted', () => {
    const nsResource = { group: '', version: 'v1', resource: 'namespaces' };
    const created = podAttrs({
      resource: nsResource,
      namespace: '',
      name: 'fresh',
      object: { metadata: { name: 'fresh', labels: { env: 'prod' } } },
    });
    expect(decide(prodOnly, created)).toBe(true);
    expect(
      decide(prodOnly, { ...created, object: { metadata: { name: 'fresh', labels: { env: 'dev' } } } }),
    ).toBe(false);
    const deleted = podAttrs({
      resource: nsResource,
      namespace: '',
      name: 'team-a',
      operation: 'DELETE',
      object: null,
    });
    expect(decide(prodOnly, deleted)).toBe(true);
    expect(decide(prodOnly, { ...deleted, name: 'team-b' })).toBe(false);
  });

  it('a missing namespace is a 404, but only for webhooks whose rules match', () => {
    let err: unknown;
    try {
      decide(prodOnly, podAttrs({ namespace: 'ghost' }));
    } catch (e) {
      err = e;
    }
    expect(err).toBeInstanceOf(StatusError);
    expect(err).toMatchObject({ code: 404, reason: 'NotFound', message: 'namespaces "ghost" not found' });
    const servicesOnly = {
      ...prodOnly,
      rules: [{ operations: ['*'], apiGroups: [''], apiVersions: ['v1'], resources: ['services'] }],
    };
    expect(decide(servicesOnly, podAttrs({ namespace: 'ghost' }))).toBe(false);
  });

  it('objectSelector matches the new or the old object', () => {
    const sel = { objectSelector: { matchLabels: { app: 'web' } } };
    expect(decide(sel, podAttrs())).toBe(true);
    expect(decide(sel, podAttrs({ object: pod({ app: 'db' }) }))).toBe(false);
    expect(decide(sel, podAttrs({ operation: 'UPDATE', object: pod({}), oldObject: pod() }))).toBe(true);
    expect(decide(sel, podAttrs({ operation: 'DELETE', object: null, oldObject: pod() }))).toBe(true);
    expect(decide(sel, podAttrs({ operation: 'CONNECT', object: null, oldObject: null }))).toBe(false);
  });

  it('matchConditions: all true calls, any false skips (even next to an error)', () => {
    const withConditions = (...expressions: string[]) => ({
      matchConditions: expressions.map((expression, i) => ({ name: `c${i}`, expression })),
    });
    const scaled = podAttrs({ object: { ...pod(), spec: { replicas: 3 } } });
    expect(decide(withConditions('object.spec.replicas > 2', 'request.operation == "CREATE"'), scaled)).toBe(
      true,
    );
    expect(decide(withConditions('object.spec.replicas > 2', 'oldObject != null'), scaled)).toBe(false);
    expect(decide(withConditions('object.spec.nope == 1', 'false'), scaled)).toBe(false);
  });

  it('a matchConditions error fails closed with 403 under Fail and skips under Ignore', () => {
    const broken = { matchConditions: [{ name: 'c', expression: 'object.spec.nope == 1' }] };
    let err: unknown;
    try {
      decide(broken, podAttrs());
    } catch (e) {
      err = e;
    }
    expect(err).toMatchObject({
      code: 403,
      reason: 'Forbidden',
      message: `pods "web" is forbidden: expression 'object.spec.nope == 1' resulted in error: No such key: nope`,
    });
    expect(decide({ ...broken, failurePolicy: 'Ignore' }, podAttrs())).toBe(false);
    expect(() =>
      decide({ matchConditions: [{ name: 'c', expression: 'object.metadata.name' }] }, podAttrs()),
    ).toThrow(
      `pods "web" is forbidden: expression 'object.metadata.name' resulted in error: expected a bool result`,
    );
  });
});

describe('calling webhooks', () => {
  it('sends an AdmissionReview v1 with every field kube sends, to the service URL with ?timeout', async () => {
    const server = await startWebhook(() => allow());
    const chain = chainFor({
      validating: [
        validating(
          'v',
          hook('check.example.com', {
            clientConfig: {
              service: { namespace: 'ns', name: 'hook', path: '/validate/', port: 8443 },
              caBundle: pki.caBundle,
            },
            rules: [
              { operations: ['UPDATE'], apiGroups: [''], apiVersions: ['v1'], resources: ['pods/status'] },
            ],
            timeoutSeconds: 7,
          }),
        ),
      ],
      services: { 'ns/hook': server.port },
    });
    const old = pod();
    const updated = { ...pod(), status: { phase: 'Running' } };
    const options = { kind: 'UpdateOptions', apiVersion: 'meta.k8s.io/v1', fieldManager: 'kubelet' };
    await chain.validate(
      podAttrs({ operation: 'UPDATE', subResource: 'status', object: updated, oldObject: old, options }),
    );

    expect(server.received).toHaveLength(1);
    const [call] = server.received;
    expect(call?.url).toBe('/validate?timeout=7s');
    expect(call?.headers.host).toBe('hook.ns.svc:8443');
    expect(call?.headers['content-type']).toBe('application/json');
    const uid = requestOf(server).uid;
    expect(uid).toMatch(UUID);
    expect(call?.review).toEqual({
      kind: 'AdmissionReview',
      apiVersion: 'admission.k8s.io/v1',
      request: {
        uid,
        kind: { group: '', version: 'v1', kind: 'Pod' },
        resource: { group: '', version: 'v1', resource: 'pods' },
        subResource: 'status',
        requestKind: { group: '', version: 'v1', kind: 'Pod' },
        requestResource: { group: '', version: 'v1', resource: 'pods' },
        requestSubResource: 'status',
        name: 'web',
        namespace: 'team-a',
        operation: 'UPDATE',
        userInfo: {
          username: 'alice',
          uid: 'u-1',
          groups: ['devs', 'system:authenticated'],
          extra: { scope: ['x'] },
        },
        object: updated,
        oldObject: old,
        dryRun: false,
        options,
      },
    });
  });

  it('leaves out empty subResource, name and namespace and sends null objects, as Go omitempty does', async () => {
    const server = await startWebhook(() => allow());
    const chain = chainFor({
      validating: [
        validating(
          'v',
          hook('nodes.example.com', {
            rules: [{ operations: ['*'], apiGroups: ['*'], apiVersions: ['*'], resources: ['nodes'] }],
          }),
        ),
      ],
      services: { 'ns/hook': server.port },
    });
    const node: KubeObject = { apiVersion: 'v1', kind: 'Node', metadata: { generateName: 'n-' } };
    await chain.validate(
      podAttrs({
        resource: { group: '', version: 'v1', resource: 'nodes' },
        kind: { group: '', version: 'v1', kind: 'Node' },
        name: '',
        namespace: '',
        clusterScoped: true,
        object: node,
        options: null,
        userInfo: { username: 'bob', groups: [] },
      }),
    );
    const request = requestOf(server);
    expect(Object.keys(request)).toEqual([
      'uid',
      'kind',
      'resource',
      'requestKind',
      'requestResource',
      'operation',
      'userInfo',
      'object',
      'oldObject',
      'dryRun',
      'options',
    ]);
    expect(request).toMatchObject({
      userInfo: { username: 'bob' },
      oldObject: null,
      options: null,
      object: node,
    });
    expect(server.received[0]?.url).toBe('/nodes.example.com?timeout=5s');
  });

  it('calls clientConfig.url, verifying the server against caBundle, with the default 10s timeout', async () => {
    const server = await startWebhook(() => allow());
    const chain = chainFor({
      validating: [
        validating('v', {
          ...hook('url.example.com', {
            clientConfig: { url: `https://localhost:${server.port}/check`, caBundle: pki.caBundle },
          }),
          timeoutSeconds: null,
        }),
      ],
    });
    await chain.validate(podAttrs());
    expect(server.received.map((r) => [r.url, r.headers.host])).toEqual([
      ['/check?timeout=10s', `localhost:${server.port}`],
    ]);
  });

  it('never sends webhook configurations to webhooks', async () => {
    const server = await startWebhook(() => ({ response: { allowed: false } }));
    const everything = hook('all.example.com', {
      rules: [{ operations: ['*'], apiGroups: ['*'], apiVersions: ['*'], resources: ['*'] }],
    });
    const chain = chainFor({
      mutating: [mutating('m', everything)],
      validating: [validating('v', everything)],
      services: { 'ns/hook': server.port },
    });
    const attrs = podAttrs({
      resource: {
        group: 'admissionregistration.k8s.io',
        version: 'v1',
        resource: 'validatingwebhookconfigurations',
      },
      kind: { group: 'admissionregistration.k8s.io', version: 'v1', kind: 'ValidatingWebhookConfiguration' },
      namespace: '',
      object: validating('x'),
    });
    await chain.mutate(attrs);
    await chain.validate(attrs);
    expect(server.received).toHaveLength(0);
    await rejection(chain.validate(podAttrs())); // the same webhook does reject a Pod
  });
});

describe('mutation', () => {
  it('applies patches in configuration-name order and webhook order, without touching the input', async () => {
    // Each call adds label n<k>, k = the labels it sees, so the result shows who saw whose patch.
    const server = await startWebhook((request) =>
      patch([
        { op: 'add', path: `/metadata/labels/n${Object.keys(labelsOf(request.object)).length}`, value: 'x' },
      ]),
    );
    const chain = chainFor({
      // Given out of order: kube sorts configurations by name.
      mutating: [
        mutating('b-config', hook('third.example.com')),
        mutating('a-config', hook('first.example.com'), hook('second.example.com')),
      ],
      services: { 'ns/hook': server.port },
    });
    const attrs = podAttrs();
    const before = structuredClone(attrs);
    const result = await chain.mutate(attrs);

    expect(pathsOf(server)).toEqual(['/first.example.com', '/second.example.com', '/third.example.com']);
    expect(
      server.received.map((r) => Object.keys(labelsOf((r.review.request as JsonObject).object))),
    ).toEqual([['app'], ['app', 'n1'], ['app', 'n1', 'n2']]);
    expect(result.object?.metadata.labels).toEqual({ app: 'web', n1: 'x', n2: 'x', n3: 'x' });
    expect(attrs).toEqual(before);
    expect(
      JSON.parse(result.auditAnnotations['mutation.webhook.admission.k8s.io/round_0_index_2'] ?? '{}'),
    ).toEqual({
      configuration: 'b-config',
      webhook: 'third.example.com',
      mutated: true,
    });
    expect(
      JSON.parse(result.auditAnnotations['patch.webhook.admission.k8s.io/round_0_index_0'] ?? '{}'),
    ).toEqual({
      configuration: 'a-config',
      webhook: 'first.example.com',
      patch: [{ op: 'add', path: '/metadata/labels/n1', value: 'x' }],
      patchType: 'JSONPatch',
    });
  });

  it('reinvokes IfNeeded webhooks once when a later webhook changed the object', async () => {
    // Each webhook adds its own label once (idempotent, as reinvoked webhooks must be).
    const server = await startWebhook((request, path) => {
      const label = path.slice(1);
      return labelsOf(request.object)[label]
        ? allow()
        : patch([{ op: 'add', path: `/metadata/labels/${label}`, value: 'y' }]);
    });
    const run = async (policy: string) => {
      server.received.length = 0;
      const chain = chainFor({
        mutating: [mutating('a', hook('early', { reinvocationPolicy: policy }), hook('late'))],
        services: { 'ns/hook': server.port },
      });
      const result = await chain.mutate(podAttrs());
      return { calls: pathsOf(server), result };
    };

    const ifNeeded = await run('IfNeeded');
    expect(ifNeeded.calls).toEqual(['/early', '/late', '/early']);
    // The reinvocation saw the later webhook's change.
    expect(labelsOf(requestOf(server, 2).object)).toEqual({
      app: 'web',
      early: 'y',
      late: 'y',
    });
    expect(ifNeeded.result.auditAnnotations['mutation.webhook.admission.k8s.io/round_1_index_0']).toContain(
      '"mutated":false',
    );

    const never = await run('Never');
    expect(never.calls).toEqual(['/early', '/late']);
    expect(never.result.object?.metadata.labels).toEqual({ app: 'web', early: 'y', late: 'y' });
  });

  it('does not reinvoke a webhook that was itself the last to change the object', async () => {
    const server = await startWebhook((request) =>
      labelsOf(request.object).only
        ? allow()
        : patch([{ op: 'add', path: '/metadata/labels/only', value: 'y' }]),
    );
    const chain = chainFor({
      mutating: [mutating('a', hook('only', { reinvocationPolicy: 'IfNeeded' }))],
      services: { 'ns/hook': server.port },
    });
    await chain.mutate(podAttrs());
    expect(server.received).toHaveLength(1);
  });

  it('does not count an empty patch or one that changes nothing as a change', async () => {
    const server = await startWebhook((_request, path) =>
      path === '/empty' ? patch([]) : patch([{ op: 'replace', path: '/metadata/labels/app', value: 'web' }]),
    );
    const chain = chainFor({
      mutating: [
        mutating('a', hook('first', { reinvocationPolicy: 'IfNeeded' }), hook('empty'), hook('same')),
      ],
      services: { 'ns/hook': server.port },
    });
    const result = await chain.mutate(podAttrs());
    expect(pathsOf(server)).toEqual(['/first', '/empty', '/same']);
    expect(result.object).toEqual(pod());
    expect(result.auditAnnotations['mutation.webhook.admission.k8s.io/round_0_index_2']).toContain(
      '"mutated":false',
    );
  });

  it('rejects a patch for an operation without object and a patch that does not apply, even under Ignore', async () => {
    const server = await startWebhook(() =>
      patch([{ op: 'replace', path: '/spec/missing/field', value: 1 }]),
    );
    const chain = chainFor({
      mutating: [
        mutating(
          'a',
          hook('p.example.com', {
            failurePolicy: 'Ignore',
            rules: [{ operations: ['*'], apiGroups: [''], apiVersions: ['v1'], resources: ['pods'] }],
          }),
        ),
      ],
      services: { 'ns/hook': server.port },
    });
    const onDelete = await rejection(
      chain.mutate(podAttrs({ operation: 'DELETE', object: null, oldObject: pod() })),
    );
    expect(onDelete).toMatchObject({
      code: 500,
      reason: 'InternalError',
      message:
        'Internal error occurred: admission webhook "p.example.com" attempted to modify the object, which is not supported for this operation',
    });
    const unapplicable = await rejection(chain.mutate(podAttrs()));
    expect(unapplicable.code).toBe(500);
    expect(unapplicable.message).toMatch(/^Internal error occurred: /);
  });

  it('treats a patch without patchType as an invalid response', async () => {
    const server = await startWebhook(() => allow({ patch: Buffer.from('[]').toString('base64') }));
    const chain = chainFor({
      mutating: [mutating('a', hook('p.example.com'))],
      services: { 'ns/hook': server.port },
    });
    const err = await rejection(chain.mutate(podAttrs()));
    expect(err.message).toBe(
      'Internal error occurred: failed calling webhook "p.example.com": received invalid webhook response: webhook returned response.patch but not response.patchType',
    );
  });
});

describe('denials', () => {
  async function denyWith(status: JsonObject | undefined) {
    const server = await startWebhook(() => ({
      response: status ? { allowed: false, status } : ({ allowed: false } as JsonObject),
    }));
    const chain = chainFor({
      validating: [validating('v', hook('deny.example.com', { failurePolicy: 'Ignore' }))],
      services: { 'ns/hook': server.port },
    });
    return rejection(chain.validate(podAttrs()));
  }

  it("keeps the webhook's code, reason and message, prefixed with the webhook's name", async () => {
    const err = await denyWith({ code: 403, reason: 'Forbidden', message: 'pods must not run as root' });
    expect(err).toMatchObject({
      code: 403,
      reason: 'Forbidden',
      message: 'admission webhook "deny.example.com" denied the request: pods must not run as root',
    });
    expect(err.toStatus()).toMatchObject({ kind: 'Status', status: 'Failure', code: 403 });
  });

  it('raises a code below 400 (or none) to 400', async () => {
    expect((await denyWith({ code: 200, message: 'nope' })).code).toBe(400);
    expect((await denyWith({ message: 'nope' })).code).toBe(400);
    expect((await denyWith({ code: 422, message: 'nope' })).code).toBe(422);
  });

  it('explains a denial with the reason, or says there is no explanation', async () => {
    expect((await denyWith({ code: 409, reason: 'AlreadyExists' })).message).toBe(
      'admission webhook "deny.example.com" denied the request: AlreadyExists',
    );
    expect((await denyWith(undefined)).message).toBe(
      'admission webhook "deny.example.com" denied the request without explanation',
    );
  });

  it('denies from a mutating webhook too, with warnings gathered so far attached', async () => {
    const server = await startWebhook((request, path) =>
      path === '/warn.example.com'
        ? allow({ warnings: ['first warning'] })
        : { response: { allowed: false, status: { code: 403, message: `no ${String(request.name)}` } } },
    );
    const chain = chainFor({
      mutating: [mutating('a', hook('warn.example.com'), hook('deny.example.com'))],
      services: { 'ns/hook': server.port },
    });
    const err = await rejection(chain.mutate(podAttrs()));
    expect(err.message).toBe('admission webhook "deny.example.com" denied the request: no web');
    expect(err.warnings).toEqual(['first warning']);
  });
});

describe('failurePolicy', () => {
  async function bothPolicies(
    name: string,
    reply: Handler | undefined,
    overrides: JsonObject = {},
    services?: Record<string, number>,
  ) {
    const server = reply ? await startWebhook(reply) : undefined;
    const make = (policy: string) =>
      chainFor({
        validating: [validating('v', hook(name, { failurePolicy: policy, ...overrides }))],
        services: services ?? (server ? { 'ns/hook': server.port } : {}),
      });
    const [fail, ignore] = await Promise.allSettled([
      make('Fail').validate(podAttrs()),
      make('Ignore').validate(podAttrs()),
    ]);
    expect(fail.status).toBe('rejected');
    expect(ignore.status).toBe('fulfilled');
    const err = (fail as PromiseRejectedResult).reason as AdmissionError;
    expect(err).toBeInstanceOf(StatusError);
    expect(err.code).toBe(500);
    expect(err.reason).toBe('InternalError');
    return {
      err,
      ignored: (ignore as PromiseFulfilledResult<{ auditAnnotations: Record<string, string> }>).value,
      server,
    };
  }

  it('on connection refused', async () => {
    const port = await closedPort();
    const { err, ignored } = await bothPolicies('down.example.com', undefined, {}, { 'ns/hook': port });
    expect(err.message).toBe(
      `Internal error occurred: failed calling webhook "down.example.com": failed to call webhook: Post "https://hook.ns.svc:443/down.example.com?timeout=5s": dial tcp 127.0.0.1:${port}: connect: connection refused`,
    );
    expect(ignored.auditAnnotations['failed-open.validating.webhook.admission.k8s.io/round_0_index_0']).toBe(
      'down.example.com',
    );
  });

  it('on a service without endpoints', async () => {
    const { err } = await bothPolicies('gone.example.com', undefined, {}, {});
    expect(err.message).toBe(
      'Internal error occurred: failed calling webhook "gone.example.com": failed to call webhook: Post "https://hook.ns.svc:443/gone.example.com?timeout=5s": no endpoints available for service "hook"',
    );
  });

  it('on timeout, aborting the call', async () => {
    const { err, server } = await bothPolicies('slow.example.com', () => 'hang', { timeoutSeconds: 1 });
    expect(err.message).toBe(
      'Internal error occurred: failed calling webhook "slow.example.com": failed to call webhook: Post "https://hook.ns.svc:443/slow.example.com?timeout=1s": context deadline exceeded',
    );
    // The webhook server sees its unanswered requests' connections closed.
    await server?.abandoned;
    expect(server?.received).toHaveLength(2);
  });

  it('on a server certificate from another CA', async () => {
    const { err } = await bothPolicies('tls.example.com', () => allow(), {
      clientConfig: { service: { namespace: 'ns', name: 'hook', path: '/x' }, caBundle: pki.otherCaBundle },
    });
    expect(err.message).toBe(
      'Internal error occurred: failed calling webhook "tls.example.com": failed to call webhook: Post "https://hook.ns.svc:443/x?timeout=5s": tls: failed to verify certificate: x509: certificate signed by unknown authority',
    );
  });

  it('on a server certificate for another service name', async () => {
    const server = await startWebhook(() => allow());
    const { err } = await bothPolicies(
      'name.example.com',
      undefined,
      { clientConfig: { service: { namespace: 'ns', name: 'other', path: '/x' }, caBundle: pki.caBundle } },
      { 'ns/other': server.port },
    );
    expect(err.message).toBe(
      'Internal error occurred: failed calling webhook "name.example.com": failed to call webhook: Post "https://other.ns.svc:443/x?timeout=5s": tls: failed to verify certificate: x509: certificate is valid for hook.ns.svc, localhost, 127.0.0.1, not other.ns.svc',
    );
    expect(server.received).toHaveLength(0);
  });

  it('on a response uid that does not match the request', async () => {
    const { err, server } = await bothPolicies('uid.example.com', () => allow({ uid: 'bogus' }));
    const uid = String(requestOf(server).uid);
    expect(uid).toMatch(UUID);
    expect(err.message).toMatch(
      /^Internal error occurred: failed calling webhook "uid.example.com": received invalid webhook response: expected response.uid="[0-9a-f-]{36}", got "bogus"$/,
    );
  });

  it('on an error status from the webhook server', async () => {
    const { err } = await bothPolicies('boom.example.com', () => ({
      raw: { status: 500, contentType: 'text/plain', body: 'boom\n' },
    }));
    expect(err.message).toBe(
      'Internal error occurred: failed calling webhook "boom.example.com": failed to call webhook: an error on the server ("boom") has prevented the request from succeeding',
    );
  });

  it('on a validating webhook returning a patch', async () => {
    const { err } = await bothPolicies('val.example.com', () => patch([]));
    expect(err.message).toBe(
      'Internal error occurred: failed calling webhook "val.example.com": received invalid webhook response: validating webhook may not return response.patch',
    );
  });

  it('on a webhook that accepts no AdmissionReview version the API server speaks', async () => {
    const { err, server } = await bothPolicies('v2.example.com', () => allow(), {
      admissionReviewVersions: ['v2'],
    });
    expect(err.message).toBe(
      'Internal error occurred: failed calling webhook "v2.example.com": could not create admission objects: webhook does not accept known AdmissionReview versions (v1, v1beta1)',
    );
    expect(server?.received).toHaveLength(0);
  });

  it('speaks v1beta1 to a webhook that only lists it, without checking the answer uid', async () => {
    const server = await startWebhook(() => allow({ uid: 'anything' }));
    const chain = chainFor({
      validating: [
        validating('v', hook('old.example.com', { admissionReviewVersions: ['v1beta2', 'v1beta1', 'v1'] })),
      ],
      services: { 'ns/hook': server.port },
    });
    await chain.validate(podAttrs());
    expect(server.received[0]?.review.apiVersion).toBe('admission.k8s.io/v1beta1');
  });
});

describe('dryRun and sideEffects', () => {
  async function dryRunWith(sideEffects: string | null, failurePolicy = 'Fail') {
    const server = await startWebhook(() => allow());
    const chain = chainFor({
      mutating: [mutating('a', hook('fx.example.com', { sideEffects, failurePolicy }))],
      services: { 'ns/hook': server.port },
    });
    const outcome = await chain.mutate(podAttrs({ dryRun: true })).then(
      () => undefined,
      (err: unknown) => err as AdmissionError,
    );
    return { outcome, server };
  }

  it('rejects a dry run reaching a webhook with side effects, whatever the failurePolicy', async () => {
    for (const [effects, policy] of [
      ['Some', 'Fail'],
      ['Unknown', 'Ignore'],
    ] as const) {
      const { outcome, server } = await dryRunWith(effects, policy);
      expect(outcome).toBeInstanceOf(StatusError);
      expect(outcome).toMatchObject({
        code: 400,
        reason: 'BadRequest',
        message: 'admission webhook "fx.example.com" does not support dry run',
      });
      expect(server.received).toHaveLength(0);
    }
  });

  it('calls None and NoneOnDryRun webhooks with dryRun set', async () => {
    for (const effects of ['None', 'NoneOnDryRun']) {
      const { outcome, server } = await dryRunWith(effects);
      expect(outcome).toBeUndefined();
      expect(requestOf(server).dryRun).toBe(true);
    }
  });

  it('treats a missing sideEffects as a call failure', async () => {
    const { outcome } = await dryRunWith(null);
    expect(outcome?.message).toBe(
      'Internal error occurred: failed calling webhook "fx.example.com": Webhook SideEffects is nil',
    );
    expect((await dryRunWith(null, 'Ignore')).outcome).toBeUndefined();
  });
});

describe('validation', () => {
  it('calls matching webhooks in parallel and gathers warnings and audit annotations', async () => {
    let release: () => void = () => {};
    const bothArrived = new Promise<void>((resolve) => {
      release = resolve;
    });
    const server = await startWebhook(async (_request, path) => {
      // Answers only once both requests are in: sequential calls would time out instead.
      if (server.received.length === 2) release();
      await bothArrived;
      return allow({
        warnings: [`checked by ${path}`],
        auditAnnotations: { decision: 'ok', 'bad/key': 'dropped' },
      });
    });
    const chain = chainFor({
      validating: [
        validating(
          'v',
          hook('one.example.com', { timeoutSeconds: 2 }),
          hook('two.example.com', { timeoutSeconds: 2 }),
        ),
        validating('w', hook('skipped.example.com', { objectSelector: { matchLabels: { app: 'db' } } })),
      ],
      services: { 'ns/hook': server.port },
    });
    const result = await chain.validate(podAttrs());
    expect(pathsOf(server).sort()).toEqual(['/one.example.com', '/two.example.com']);
    expect([...result.warnings].sort()).toEqual([
      'checked by /one.example.com',
      'checked by /two.example.com',
    ]);
    expect(result.auditAnnotations).toEqual({
      'one.example.com/decision': 'ok',
      'two.example.com/decision': 'ok',
    });
  });

  it('rejects when any webhook denies, after all have answered', async () => {
    const server = await startWebhook((request, path) =>
      path === '/no.example.com'
        ? { response: { allowed: false, status: { message: `no ${String(request.operation)}` } } }
        : allow(),
    );
    const chain = chainFor({
      validating: [validating('v', hook('yes.example.com'), hook('no.example.com'))],
      services: { 'ns/hook': server.port },
    });
    const err = await rejection(chain.validate(podAttrs()));
    expect(err.message).toBe('admission webhook "no.example.com" denied the request: no CREATE');
    expect(server.received).toHaveLength(2);
  });
});
