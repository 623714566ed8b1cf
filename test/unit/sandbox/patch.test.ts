import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import {
  applyJsonPatch,
  applyMergePatch,
  applyStrategicMergePatch,
  createMergePatch,
  supportsStrategicMerge,
} from '../../../src/sandbox/patch.ts';
import { type JsonObject, type JsonValue, type KubeObject, StatusError } from '../../../src/sandbox/types.ts';

const obj = (o: JsonObject): KubeObject => o as unknown as KubeObject;
const json = (o: KubeObject): JsonObject => o as unknown as JsonObject;

function statusOf(fn: () => unknown): StatusError {
  try {
    fn();
  } catch (err) {
    if (err instanceof StatusError) return err;
    throw err;
  }
  throw new Error('expected a StatusError');
}

/** Reads a nested value by path segments (numbers index arrays). */
function at(o: unknown, ...path: (string | number)[]): unknown {
  let cur: unknown = o;
  for (const p of path) {
    if (cur === null || typeof cur !== 'object') return undefined;
    cur = (cur as Record<string | number, unknown>)[p];
  }
  return cur;
}

const pod = (spec: JsonObject, extra: JsonObject = {}): KubeObject =>
  obj({ apiVersion: 'v1', kind: 'Pod', metadata: { name: 'p', namespace: 'ns' }, spec, ...extra });

// ---------------------------------------------------------------------------------------------------

describe('applyJsonPatch', () => {
  const base = (): KubeObject =>
    obj({
      apiVersion: 'v1',
      kind: 'ConfigMap',
      metadata: { name: 'c', labels: { a: '1' } },
      data: { k: 'v' },
    });

  it('applies add, replace, remove, move, copy and a passing test', () => {
    const out = applyJsonPatch(base(), [
      { op: 'test', path: '/data/k', value: 'v' },
      { op: 'add', path: '/metadata/labels/b', value: '2' },
      { op: 'replace', path: '/data/k', value: 'w' },
      { op: 'copy', from: '/data/k', path: '/data/copied' },
      { op: 'move', from: '/metadata/labels/a', path: '/metadata/labels/moved' },
      { op: 'remove', path: '/data/copied' },
    ]);
    expect(out.metadata.labels).toEqual({ b: '2', moved: '1' });
    expect(out.data).toEqual({ k: 'w' });
  });

  it('answers a failed test with 422 Invalid and leaves the input untouched', () => {
    const input = base();
    const before = structuredClone(input);
    const err = statusOf(() =>
      applyJsonPatch(input, [
        { op: 'replace', path: '/data/k', value: 'changed' },
        { op: 'test', path: '/metadata/name', value: 'other' },
      ]),
    );
    expect(err.code).toBe(422);
    expect(err.reason).toBe('Invalid');
    expect(err.message).toBe('the server rejected our request due to an error in our request');
    expect(err.details?.causes?.[0]?.message).toContain('Test operation failed');
    expect(input).toEqual(before);
  });

  it('answers an operation on a missing path with 422', () => {
    const err = statusOf(() => applyJsonPatch(base(), [{ op: 'replace', path: '/spec/replicas', value: 3 }]));
    expect(err.code).toBe(422);
    expect(err.details?.causes?.[0]?.field).toBe('/spec/replicas');
    expect(statusOf(() => applyJsonPatch(base(), [{ op: 'remove', path: '/data/missing' }])).code).toBe(422);
    expect(statusOf(() => applyJsonPatch(base(), [{ op: 'frobnicate', path: '/data' }])).code).toBe(422);
  });

  it('answers a patch that is not an array of objects with 400', () => {
    const notArray = statusOf(() => applyJsonPatch(base(), { op: 'add' }));
    expect([notArray.code, notArray.reason]).toEqual([400, 'BadRequest']);
    expect(notArray.message).toBe('json: cannot unmarshal object into Go value of type jsonpatch.Patch');
    expect(statusOf(() => applyJsonPatch(base(), [1])).code).toBe(400);
  });

  it('refuses more operations than kube-apiserver allows', () => {
    const ops = Array.from({ length: 10001 }, () => ({ op: 'test', path: '/data/k', value: 'v' }));
    expect(statusOf(() => applyJsonPatch(base(), ops)).code).toBe(413);
  });

  it('does not alias patch values into the result', () => {
    const value = { x: '1' };
    const out = applyJsonPatch(base(), [{ op: 'add', path: '/spec', value }]);
    value.x = '2';
    expect(at(out, 'spec', 'x')).toBe('1');
  });
});

// ---------------------------------------------------------------------------------------------------

describe('applyMergePatch', () => {
  it('deletes with null, replaces arrays and merges maps', () => {
    const input = obj({
      metadata: { name: 'x', labels: { a: '1', b: '2' } },
      spec: { list: [1, 2, 3], nested: { keep: true, drop: 1 } },
    });
    const before = structuredClone(input);
    const out = applyMergePatch(input, {
      metadata: { labels: { b: null, c: '3' } },
      spec: { list: [9], nested: { drop: null }, added: { inner: null, v: 1 } },
    });
    expect(out.metadata.labels).toEqual({ a: '1', c: '3' });
    expect(out.spec).toEqual({ list: [9], nested: { keep: true }, added: { v: 1 } });
    expect(input).toEqual(before);
  });

  it('answers a patch that is not an object with 400', () => {
    for (const bad of [[], 'x', null, 3]) {
      const err = statusOf(() => applyMergePatch(obj({ metadata: {} }), bad));
      expect([err.code, err.reason, err.message]).toEqual([400, 'BadRequest', 'Invalid JSON Patch']);
    }
  });

  // Null-free JSON: a merge patch cannot express null values.
  const key = fc.constantFrom('a', 'b', 'c', 'd');
  const leaf = fc.oneof(fc.string({ maxLength: 3 }), fc.integer(), fc.boolean());
  const { value } = fc.letrec<{ value: JsonValue }>((tie) => ({
    value: fc.oneof(
      { depthSize: 'small', withCrossShrink: true },
      leaf,
      fc.array(tie('value'), { maxLength: 3 }),
      fc.dictionary(key, tie('value'), { maxKeys: 4 }),
    ),
  }));
  const doc = fc.record({ metadata: fc.dictionary(key, value, { maxKeys: 3 }), spec: value });

  it('turns a document into another by the merge patch of their difference (property)', () => {
    fc.assert(
      fc.property(doc, doc, (a, b) => {
        const patch = createMergePatch(a as JsonObject, b as JsonObject);
        expect(applyMergePatch(obj(a as JsonObject), patch)).toEqual(b);
      }),
      { numRuns: 300 },
    );
  });

  it('agrees with strategic merge on a kind without merge lists (property)', () => {
    const patchValue = fc.oneof(value, fc.constant(null));
    const patchDoc = fc.dictionary(key, patchValue, { maxKeys: 4 });
    fc.assert(
      fc.property(fc.dictionary(key, value, { maxKeys: 4 }), patchDoc, (data, patch) => {
        const cm = obj({ apiVersion: 'v1', kind: 'ConfigMap', metadata: { name: 'c' }, data });
        const body = { data: patch };
        expect(applyStrategicMergePatch(cm, body, 'ConfigMap')).toEqual(applyMergePatch(cm, body));
      }),
      { numRuns: 300 },
    );
  });
});

// ---------------------------------------------------------------------------------------------------

describe('applyStrategicMergePatch: lists merged by key', () => {
  const twoContainers = (): JsonObject => ({
    containers: [
      { name: 'app', image: 'app:1' },
      { name: 'sidecar', image: 'side:1' },
    ],
  });

  // Every place a PodSpec lives, with the object that holds it.
  const templates: { kind: string; wrap: (spec: JsonObject) => JsonObject; path: string[] }[] = [
    { kind: 'Pod', wrap: (spec) => ({ spec }), path: ['spec'] },
    ...['Deployment', 'StatefulSet', 'ReplicaSet', 'DaemonSet', 'Job'].map((kind) => ({
      kind,
      wrap: (spec: JsonObject) => ({ spec: { template: { spec } } }),
      path: ['spec', 'template', 'spec'],
    })),
    {
      kind: 'CronJob',
      wrap: (spec) => ({ spec: { jobTemplate: { spec: { template: { spec } } } } }),
      path: ['spec', 'jobTemplate', 'spec', 'template', 'spec'],
    },
    { kind: 'PodTemplate', wrap: (spec) => ({ template: { spec } }), path: ['template', 'spec'] },
  ];

  for (const { kind, wrap, path } of templates) {
    it(`patches one container by name and keeps the others (${kind})`, () => {
      const target = obj({ kind, metadata: { name: 'x' }, ...wrap(twoContainers()) });
      const before = structuredClone(target);
      const out = applyStrategicMergePatch(
        target,
        wrap({ containers: [{ name: 'sidecar', image: 'side:2' }] }),
        kind,
      );
      expect(at(out, ...path, 'containers')).toEqual([
        { name: 'app', image: 'app:1' },
        { name: 'sidecar', image: 'side:2' },
      ]);
      expect(target).toEqual(before);
    });

    it(`removes a container with $patch: delete (${kind})`, () => {
      const target = obj({ kind, metadata: { name: 'x' }, ...wrap(twoContainers()) });
      const out = applyStrategicMergePatch(
        target,
        wrap({ containers: [{ name: 'app', $patch: 'delete' }] }),
        kind,
      );
      expect(at(out, ...path, 'containers')).toEqual([{ name: 'sidecar', image: 'side:1' }]);
    });
  }

  it('merges init and ephemeral containers by name', () => {
    const target = pod({
      initContainers: [
        { name: 'i1', image: 'a' },
        { name: 'i2', image: 'b' },
      ],
      ephemeralContainers: [{ name: 'e1', image: 'a' }],
      containers: [{ name: 'c', image: 'c' }],
    });
    const out = applyStrategicMergePatch(
      target,
      {
        spec: {
          initContainers: [{ name: 'i2', image: 'B' }],
          ephemeralContainers: [{ name: 'e2', image: 'z' }],
        },
      },
      'Pod',
    );
    expect(at(out, 'spec', 'initContainers')).toEqual([
      { name: 'i1', image: 'a' },
      { name: 'i2', image: 'B' },
    ]);
    // Items the live list lacks come first, where kube-apiserver puts them (mergeSortedSlice).
    expect(at(out, 'spec', 'ephemeralContainers')).toEqual([
      { name: 'e2', image: 'z' },
      { name: 'e1', image: 'a' },
    ]);
  });

  it('merges env by name, ports by containerPort, volumeMounts by mountPath, volumeDevices by devicePath', () => {
    const target = pod({
      containers: [
        {
          name: 'c',
          env: [
            { name: 'A', value: '1' },
            { name: 'B', value: '2' },
          ],
          ports: [
            { containerPort: 80, name: 'http' },
            { containerPort: 443, name: 'https' },
          ],
          volumeMounts: [
            { mountPath: '/a', name: 'va' },
            { mountPath: '/b', name: 'vb' },
          ],
          volumeDevices: [{ devicePath: '/dev/a', name: 'da' }],
        },
      ],
    });
    const out = applyStrategicMergePatch(
      target,
      {
        spec: {
          containers: [
            {
              name: 'c',
              env: [{ name: 'B', value: 'two' }],
              ports: [{ containerPort: 443, name: 'tls' }],
              volumeMounts: [{ mountPath: '/b', name: 'vb', readOnly: true }],
              volumeDevices: [{ devicePath: '/dev/b', name: 'db' }],
            },
          ],
        },
      },
      'Pod',
    );
    const c = at(out, 'spec', 'containers', 0);
    expect(at(c, 'env')).toEqual([
      { name: 'A', value: '1' },
      { name: 'B', value: 'two' },
    ]);
    expect(at(c, 'ports')).toEqual([
      { containerPort: 80, name: 'http' },
      { containerPort: 443, name: 'tls' },
    ]);
    expect(at(c, 'volumeMounts')).toEqual([
      { mountPath: '/a', name: 'va' },
      { mountPath: '/b', name: 'vb', readOnly: true },
    ]);
    expect(at(c, 'volumeDevices')).toEqual([
      { devicePath: '/dev/b', name: 'db' },
      { devicePath: '/dev/a', name: 'da' },
    ]);
  });

  it('merges volumes by name and honours $retainKeys', () => {
    const target = pod({
      volumes: [
        { name: 'v', emptyDir: {} },
        { name: 'w', emptyDir: {} },
      ],
      containers: [],
    });
    const out = applyStrategicMergePatch(
      target,
      { spec: { volumes: [{ name: 'v', $retainKeys: ['configMap', 'name'], configMap: { name: 'cm' } }] } },
      'Pod',
    );
    expect(at(out, 'spec', 'volumes')).toEqual([
      { name: 'v', configMap: { name: 'cm' } },
      { name: 'w', emptyDir: {} },
    ]);
    const bad = statusOf(() =>
      applyStrategicMergePatch(
        target,
        { spec: { volumes: [{ name: 'v', $retainKeys: ['name'], secret: {} }] } },
        'Pod',
      ),
    );
    expect([bad.code, bad.message]).toEqual([400, 'invalid patch format of retainKeys']);
  });

  it('merges imagePullSecrets, hostAliases, resourceClaims and topologySpreadConstraints by their keys', () => {
    const target = pod({
      containers: [],
      imagePullSecrets: [{ name: 'a' }],
      hostAliases: [{ ip: '10.0.0.1', hostnames: ['a'] }],
      resourceClaims: [{ name: 'gpu', resourceClaimName: 'x' }],
      topologySpreadConstraints: [{ topologyKey: 'zone', maxSkew: 1, whenUnsatisfiable: 'DoNotSchedule' }],
    });
    const out = applyStrategicMergePatch(
      target,
      {
        spec: {
          imagePullSecrets: [{ name: 'b' }],
          hostAliases: [
            { ip: '10.0.0.1', hostnames: ['b'] },
            { ip: '10.0.0.2', hostnames: ['c'] },
          ],
          resourceClaims: [{ name: 'fpga', resourceClaimName: 'y' }],
          topologySpreadConstraints: [{ topologyKey: 'zone', maxSkew: 2 }],
        },
      },
      'Pod',
    );
    expect(at(out, 'spec', 'imagePullSecrets')).toEqual([{ name: 'b' }, { name: 'a' }]);
    expect(at(out, 'spec', 'hostAliases')).toEqual([
      { ip: '10.0.0.1', hostnames: ['b'] },
      { ip: '10.0.0.2', hostnames: ['c'] },
    ]);
    expect(at(out, 'spec', 'resourceClaims')).toEqual([
      { name: 'fpga', resourceClaimName: 'y' },
      { name: 'gpu', resourceClaimName: 'x' },
    ]);
    expect(at(out, 'spec', 'topologySpreadConstraints')).toEqual([
      { topologyKey: 'zone', maxSkew: 2, whenUnsatisfiable: 'DoNotSchedule' },
    ]);
  });

  it('merges schedulingGates by name and removes one with $patch: delete', () => {
    const target = pod({
      containers: [],
      schedulingGates: [{ name: 'berth.skaphos.io/lease-held' }, { name: 'other' }],
    });
    const added = applyStrategicMergePatch(target, { spec: { schedulingGates: [{ name: 'third' }] } }, 'Pod');
    expect(at(added, 'spec', 'schedulingGates')).toEqual([
      { name: 'third' },
      { name: 'berth.skaphos.io/lease-held' },
      { name: 'other' },
    ]);
    const lifted = applyStrategicMergePatch(
      target,
      { spec: { schedulingGates: [{ name: 'berth.skaphos.io/lease-held', $patch: 'delete' }] } },
      'Pod',
    );
    expect(at(lifted, 'spec', 'schedulingGates')).toEqual([{ name: 'other' }]);
  });

  it('merges pod status conditions, podIPs and node conditions and addresses by their keys', () => {
    const target = pod(
      { containers: [] },
      {
        status: {
          conditions: [
            { type: 'Ready', status: 'False' },
            { type: 'PodScheduled', status: 'True' },
          ],
          podIPs: [{ ip: '10.0.0.1' }],
        },
      },
    );
    const out = applyStrategicMergePatch(
      target,
      { status: { conditions: [{ type: 'Ready', status: 'True' }], podIPs: [{ ip: 'fd00::1' }] } },
      'Pod',
    );
    expect(at(out, 'status', 'conditions')).toEqual([
      { type: 'Ready', status: 'True' },
      { type: 'PodScheduled', status: 'True' },
    ]);
    expect(at(out, 'status', 'podIPs')).toEqual([{ ip: 'fd00::1' }, { ip: '10.0.0.1' }]);

    const node = obj({
      kind: 'Node',
      metadata: { name: 'n' },
      spec: { podCIDRs: ['10.0.0.0/24'] },
      status: {
        conditions: [
          { type: 'Ready', status: 'True' },
          { type: 'MemoryPressure', status: 'False' },
        ],
        addresses: [
          { type: 'InternalIP', address: '10.1.1.1' },
          { type: 'Hostname', address: 'n' },
        ],
      },
    });
    const nodeOut = applyStrategicMergePatch(
      node,
      {
        spec: { podCIDRs: ['fd00::/64'] },
        status: {
          conditions: [{ type: 'Ready', status: 'False' }],
          addresses: [{ type: 'Hostname', address: 'n2' }],
        },
      },
      'Node',
    );
    expect(at(nodeOut, 'spec', 'podCIDRs')).toEqual(['fd00::/64', '10.0.0.0/24']);
    expect(at(nodeOut, 'status', 'conditions')).toEqual([
      { type: 'Ready', status: 'False' },
      { type: 'MemoryPressure', status: 'False' },
    ]);
    expect(at(nodeOut, 'status', 'addresses')).toEqual([
      { type: 'InternalIP', address: '10.1.1.1' },
      { type: 'Hostname', address: 'n2' },
    ]);
  });

  it('merges status.conditions by type on workloads and jobs', () => {
    for (const kind of ['Deployment', 'StatefulSet', 'ReplicaSet', 'DaemonSet', 'Job', 'Namespace']) {
      const target = obj({
        kind,
        metadata: { name: 'x' },
        status: {
          conditions: [
            { type: 'A', status: 'True' },
            { type: 'B', status: 'True' },
          ],
        },
      });
      const out = applyStrategicMergePatch(
        target,
        { status: { conditions: [{ type: 'B', status: 'False' }] } },
        kind,
      );
      expect(at(out, 'status', 'conditions'), kind).toEqual([
        { type: 'A', status: 'True' },
        { type: 'B', status: 'False' },
      ]);
    }
  });

  it('merges service ports by port, service account secrets and webhooks by name', () => {
    const svc = obj({
      kind: 'Service',
      metadata: { name: 's' },
      spec: { ports: [{ port: 80, name: 'http' }, { port: 443 }] },
    });
    const out = applyStrategicMergePatch(
      svc,
      { spec: { ports: [{ port: 80, targetPort: 8080 }] } },
      'Service',
    );
    expect(at(out, 'spec', 'ports')).toEqual([{ port: 80, name: 'http', targetPort: 8080 }, { port: 443 }]);

    const sa = obj({ kind: 'ServiceAccount', metadata: { name: 'sa' }, secrets: [{ name: 'a' }] });
    expect(
      at(applyStrategicMergePatch(sa, { secrets: [{ name: 'b' }] }, 'ServiceAccount'), 'secrets'),
    ).toEqual([{ name: 'b' }, { name: 'a' }]);

    const hook = obj({
      kind: 'MutatingWebhookConfiguration',
      metadata: { name: 'h' },
      webhooks: [{ name: 'a.example.com', clientConfig: { caBundle: 'old' } }, { name: 'b.example.com' }],
    });
    const patched = applyStrategicMergePatch(
      hook,
      { webhooks: [{ name: 'a.example.com', clientConfig: { caBundle: 'new' } }] },
      'MutatingWebhookConfiguration',
    );
    expect(at(patched, 'webhooks')).toEqual([
      { name: 'a.example.com', clientConfig: { caBundle: 'new' } },
      { name: 'b.example.com' },
    ]);
  });

  it('merges metadata.ownerReferences by uid', () => {
    const ref = (uid: string, name: string): JsonObject => ({
      apiVersion: 'apps/v1',
      kind: 'ReplicaSet',
      name,
      uid,
    });
    const target = obj({
      kind: 'Pod',
      metadata: { name: 'p', ownerReferences: [ref('u1', 'a'), ref('u2', 'b')] },
    });
    const out = applyStrategicMergePatch(
      target,
      {
        metadata: {
          ownerReferences: [
            { uid: 'u2', controller: true },
            { uid: 'u1', $patch: 'delete' },
          ],
        },
      },
      'Pod',
    );
    expect(out.metadata.ownerReferences).toEqual([{ ...ref('u2', 'b'), controller: true }]);
  });
});

// ---------------------------------------------------------------------------------------------------

describe('applyStrategicMergePatch: lists without a strategy and primitive lists', () => {
  it('replaces tolerations, readinessGates and container statuses wholesale', () => {
    const target = pod(
      {
        containers: [],
        tolerations: [{ key: 'a', operator: 'Exists' }],
        readinessGates: [{ conditionType: 'x' }],
      },
      {
        status: {
          containerStatuses: [
            { name: 'a', ready: true },
            { name: 'b', ready: true },
          ],
        },
      },
    );
    const out = applyStrategicMergePatch(
      target,
      {
        spec: { tolerations: [{ key: 'b', operator: 'Exists' }], readinessGates: [{ conditionType: 'y' }] },
        status: { containerStatuses: [{ name: 'b', ready: false }] },
      },
      'Pod',
    );
    expect(at(out, 'spec', 'tolerations')).toEqual([{ key: 'b', operator: 'Exists' }]);
    expect(at(out, 'spec', 'readinessGates')).toEqual([{ conditionType: 'y' }]);
    expect(at(out, 'status', 'containerStatuses')).toEqual([{ name: 'b', ready: false }]);
  });

  it('replaces node taints wholesale', () => {
    const node = obj({
      kind: 'Node',
      metadata: { name: 'n' },
      spec: { taints: [{ key: 'a', effect: 'NoSchedule' }] },
    });
    const taint = { key: 'aether.io/agent-not-ready', value: 'true', effect: 'NoSchedule' };
    const out = applyStrategicMergePatch(node, { spec: { taints: [taint] } }, 'Node');
    expect(at(out, 'spec', 'taints')).toEqual([taint]);
  });

  it('merges finalizers as a set and deletes with $deleteFromPrimitiveList', () => {
    const target = obj({ kind: 'ConfigMap', metadata: { name: 'c', finalizers: ['a', 'b'] } });
    const added = applyStrategicMergePatch(target, { metadata: { finalizers: ['b', 'c'] } }, 'ConfigMap');
    expect(added.metadata.finalizers).toEqual(['a', 'b', 'c']);
    const removed = applyStrategicMergePatch(
      target,
      { metadata: { '$deleteFromPrimitiveList/finalizers': ['a'] } },
      'ConfigMap',
    );
    expect(removed.metadata.finalizers).toEqual(['b']);
    const bad = statusOf(() =>
      applyStrategicMergePatch(
        target,
        { metadata: { $deleteFromPrimitiveListfinalizers: ['a'] } },
        'ConfigMap',
      ),
    );
    expect([bad.code, bad.message]).toEqual([400, 'invalid patch format of primitive list']);
  });

  it('treats an empty merge list as no change and null as removal', () => {
    const target = pod({ containers: [{ name: 'a' }], schedulingGates: [{ name: 'g' }] });
    const out = applyStrategicMergePatch(target, { spec: { containers: [], schedulingGates: null } }, 'Pod');
    expect(at(out, 'spec', 'containers')).toEqual([{ name: 'a' }]);
    expect(at(out, 'spec')).not.toHaveProperty('schedulingGates');
  });
});

// ---------------------------------------------------------------------------------------------------

describe('applyStrategicMergePatch: directives', () => {
  it('replaces a whole list with an item carrying $patch: replace', () => {
    const target = pod({
      containers: [
        { name: 'a', image: '1' },
        { name: 'b', image: '2' },
      ],
    });
    const out = applyStrategicMergePatch(
      target,
      { spec: { containers: [{ name: 'c', image: '3' }, { $patch: 'replace' }] } },
      'Pod',
    );
    expect(at(out, 'spec', 'containers')).toEqual([{ name: 'c', image: '3' }]);
  });

  it('replaces a map with $patch: replace and empties it with $patch: delete', () => {
    const target = pod({
      containers: [],
      securityContext: { runAsUser: 1, fsGroup: 2 },
      dnsConfig: { nameservers: ['x'] },
    });
    const out = applyStrategicMergePatch(
      target,
      {
        spec: { securityContext: { runAsNonRoot: true, $patch: 'replace' }, dnsConfig: { $patch: 'delete' } },
      },
      'Pod',
    );
    expect(at(out, 'spec', 'securityContext')).toEqual({ runAsNonRoot: true });
    expect(at(out, 'spec', 'dnsConfig')).toEqual({});
  });

  it('does not create a new field from a map carrying a directive', () => {
    const out = applyStrategicMergePatch(
      pod({ containers: [] }),
      { spec: { affinity: { $patch: 'delete' } } },
      'Pod',
    );
    expect(at(out, 'spec')).not.toHaveProperty('affinity');
  });

  it('refuses $patch: merge and unknown directives, as kube-apiserver does', () => {
    const target = pod({ containers: [{ name: 'a' }], securityContext: {} });
    const inMap = statusOf(() =>
      applyStrategicMergePatch(
        target,
        { spec: { securityContext: { $patch: 'merge', runAsUser: 1 } } },
        'Pod',
      ),
    );
    expect(inMap.code).toBe(500);
    expect(inMap.message).toBe('unknown patch type: merge in map: map[$patch:merge runAsUser:1]');
    const inList = statusOf(() =>
      applyStrategicMergePatch(target, { spec: { containers: [{ name: 'a', $patch: 'merge' }] } }, 'Pod'),
    );
    expect(inList.message).toBe('merging lists cannot yet be specified in the patch');
    const unknown = statusOf(() =>
      applyStrategicMergePatch(target, { spec: { containers: [{ name: 'a', $patch: 'x' }] } }, 'Pod'),
    );
    expect(unknown.message).toBe('unknown patch type: x in map: map[$patch:x name:a]');
  });

  it('orders a merged list by $setElementOrder', () => {
    const target = pod({ containers: [{ name: 'a' }, { name: 'b' }, { name: 'c' }] });
    const out = applyStrategicMergePatch(
      target,
      {
        spec: {
          '$setElementOrder/containers': [{ name: 'c' }, { name: 'new' }, { name: 'a' }, { name: 'b' }],
          containers: [{ name: 'new', image: 'n' }],
        },
      },
      'Pod',
    );
    expect((at(out, 'spec', 'containers') as JsonObject[]).map((c) => c.name)).toEqual([
      'c',
      'new',
      'a',
      'b',
    ]);
  });

  it('applies a kubectl client-side-apply style three-way patch', () => {
    const deploy = obj({
      apiVersion: 'apps/v1',
      kind: 'Deployment',
      metadata: { name: 'd', finalizers: ['x', 'y'], labels: { app: 'd', stale: 'true' } },
      spec: {
        replicas: 1,
        strategy: { type: 'RollingUpdate', rollingUpdate: { maxSurge: 1 } },
        template: {
          spec: {
            containers: [
              {
                name: 'app',
                image: 'app:1',
                env: [
                  { name: 'A', value: '1' },
                  { name: 'OLD', value: 'x' },
                ],
              },
              { name: 'gone', image: 'g' },
            ],
          },
        },
      },
    });
    const patch = {
      metadata: {
        labels: { stale: null },
        '$setElementOrder/finalizers': ['y', 'z'],
        '$deleteFromPrimitiveList/finalizers': ['x'],
        finalizers: ['z'],
      },
      spec: {
        replicas: 2,
        strategy: { $retainKeys: ['type'], type: 'Recreate', rollingUpdate: null },
        template: {
          spec: {
            '$setElementOrder/containers': [{ name: 'app' }],
            containers: [
              {
                name: 'app',
                image: 'app:2',
                '$setElementOrder/env': [{ name: 'A' }],
                env: [{ name: 'OLD', $patch: 'delete' }],
              },
              { name: 'gone', $patch: 'delete' },
            ],
          },
        },
      },
    };
    const out = applyStrategicMergePatch(deploy, patch, 'Deployment');
    expect(out.metadata.labels).toEqual({ app: 'd' });
    expect(out.metadata.finalizers).toEqual(['y', 'z']);
    expect(out.spec).toEqual({
      replicas: 2,
      strategy: { type: 'Recreate' },
      template: { spec: { containers: [{ name: 'app', image: 'app:2', env: [{ name: 'A', value: '1' }] }] } },
    });
  });

  it('reports a list item without its merge key', () => {
    const err = statusOf(() =>
      applyStrategicMergePatch(
        pod({ containers: [{ name: 'a' }] }),
        { spec: { containers: [{ image: 'x' }] } },
        'Pod',
      ),
    );
    expect(err.message).toBe('map: map[image:x] does not contain declared merge key: name');
  });

  it('answers a patch that is not an object with 400 and never mutates its inputs', () => {
    const target = pod({ containers: [{ name: 'a' }] });
    const err = statusOf(() => applyStrategicMergePatch(target, [], 'Pod'));
    expect([err.code, err.message]).toEqual([
      400,
      'json: cannot unmarshal array into Go value of type map[string]interface {}',
    ]);
    const patch = {
      spec: {
        containers: [
          { name: 'b', $patch: 'delete' },
          { name: 'a', image: 'z' },
        ],
      },
    };
    const patchBefore = structuredClone(patch);
    const before = structuredClone(target);
    applyStrategicMergePatch(target, patch, 'Pod');
    expect(patch).toEqual(patchBefore);
    expect(target).toEqual(before);
  });
});

// Vectors from apimachinery's strategicpatch patch_test.go (its mergingList is keyed by name and
// mergingIntList is a primitive merge list), applied to containers and finalizers.
describe('applyStrategicMergePatch: upstream test vectors', () => {
  const names = (o: KubeObject): unknown => (at(o, 'spec', 'containers') as JsonObject[]).map((c) => c.name);

  it('merge lists of maps', () => {
    const current = pod({
      containers: [
        { name: '1', other: 'a' },
        { name: '2', value: '2', other: 'b' },
      ],
    });
    const out = applyStrategicMergePatch(
      current,
      {
        spec: {
          '$setElementOrder/containers': [{ name: '4' }, { name: '1' }, { name: '2' }, { name: '3' }],
          containers: [
            { name: '4', value: '4' },
            { name: '3', value: '3' },
          ],
        },
      },
      'Pod',
    );
    expect(at(out, 'spec', 'containers')).toEqual([
      { name: '4', value: '4' },
      { name: '1', other: 'a' },
      { name: '2', value: '2', other: 'b' },
      { name: '3', value: '3' },
    ]);
  });

  it('nested patch merge with empty list', () => {
    const current = pod({ containers: [{ name: 'hello2' }] });
    const out = applyStrategicMergePatch(
      current,
      {
        spec: {
          '$setElementOrder/containers': [{ name: 'hello' }, { name: 'doesntexist' }],
          containers: [{ name: 'hello' }, { $patch: 'delete', name: 'doesntexist' }],
        },
      },
      'Pod',
    );
    expect(names(out)).toEqual(['hello', 'hello2']);
  });

  it('delete, then add and delete, items in lists of scalars', () => {
    const current = obj({ kind: 'ConfigMap', metadata: { name: 'c', finalizers: ['1', '2', '3', '4'] } });
    const deleted = applyStrategicMergePatch(
      current,
      {
        metadata: { '$setElementOrder/finalizers': ['1', '2'], '$deleteFromPrimitiveList/finalizers': ['3'] },
      },
      'ConfigMap',
    );
    expect(deleted.metadata.finalizers).toEqual(['1', '2', '4']);
    const replaced = applyStrategicMergePatch(
      obj({ kind: 'ConfigMap', metadata: { name: 'c', finalizers: ['1', '2', '3'] } }),
      {
        metadata: {
          '$setElementOrder/finalizers': ['1', '2', '4'],
          '$deleteFromPrimitiveList/finalizers': ['3'],
          finalizers: ['4'],
        },
      },
      'ConfigMap',
    );
    expect(replaced.metadata.finalizers).toEqual(['1', '2', '4']);
  });

  it('refuses a $setElementOrder list that contradicts the patch list', () => {
    const current = obj({ kind: 'ConfigMap', metadata: { name: 'c', finalizers: ['1', '3', '2'] } });
    const err = statusOf(() =>
      applyStrategicMergePatch(
        current,
        { metadata: { '$setElementOrder/finalizers': ['1', '2', '3'], finalizers: ['3', '1'] } },
        'ConfigMap',
      ),
    );
    expect(err.message).toContain("doesn't match");
  });
});

describe('supportsStrategicMerge', () => {
  it('is true for built-in kinds and false for custom resources', () => {
    for (const kind of [
      'Pod',
      'Deployment',
      'Node',
      'ConfigMap',
      'Secret',
      'Lease',
      'CustomResourceDefinition',
    ]) {
      expect(supportsStrategicMerge(kind), kind).toBe(true);
    }
    expect(supportsStrategicMerge('BerthLease')).toBe(false);
  });
});

describe('applyStrategicMergePatch on objects without a schema', () => {
  it('merges maps and replaces lists', () => {
    const lease = obj({
      kind: 'BerthLease',
      metadata: { name: 'l' },
      spec: { a: { b: 1 }, list: [{ name: 'x' }] },
    });
    const out = applyStrategicMergePatch(
      lease,
      { spec: { a: { c: 2 }, list: [{ name: 'y' }] } },
      'BerthLease',
    );
    expect(json(out).spec).toEqual({ a: { b: 1, c: 2 }, list: [{ name: 'y' }] });
  });
});
