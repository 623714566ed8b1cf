import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import {
  type ApplyOptions,
  decodeFieldsV1,
  encodeFieldsV1,
  pathString,
  serverSideApply,
  updateManagedFields,
} from '../../../src/sandbox/managedfields.ts';
import { type JsonObject, type KubeObject, StatusError } from '../../../src/sandbox/types.ts';

const obj = (o: JsonObject): KubeObject => o as unknown as KubeObject;
const NOW = '2024-05-01T10:00:00Z';
const LATER = '2024-05-01T10:05:00Z';

function statusOf(fn: () => unknown): StatusError {
  try {
    fn();
  } catch (err) {
    if (err instanceof StatusError) return err;
    throw err;
  }
  throw new Error('expected a StatusError');
}

const apply = (opts: Partial<ApplyOptions> = {}): ApplyOptions => ({
  manager: 'mgr',
  force: false,
  apiVersion: 'apps/v1',
  now: NOW,
  kind: 'Deployment',
  ...opts,
});

const withMetadata = (o: KubeObject, metadata: KubeObject['metadata']): KubeObject => ({
  ...o,
  metadata: { ...o.metadata, ...metadata },
});
const entries = (o: KubeObject): JsonObject[] => o.metadata.managedFields ?? [];
const entryOf = (list: JsonObject[], manager: string, operation = 'Update'): JsonObject | undefined =>
  list.find((e) => e.manager === manager && e.operation === operation);

function deployment(spec: JsonObject, metadata: JsonObject = {}): KubeObject {
  return obj({
    apiVersion: 'apps/v1',
    kind: 'Deployment',
    metadata: { name: 'd', namespace: 'ns', ...metadata },
    spec,
  });
}

// ---------------------------------------------------------------------------------------------------

describe('updateManagedFields', () => {
  it('on create, owns every field set, in the FieldsV1 encoding, without system metadata', () => {
    const pod = obj({
      apiVersion: 'v1',
      kind: 'Pod',
      metadata: {
        name: 'p',
        namespace: 'ns',
        uid: 'u',
        resourceVersion: '5',
        creationTimestamp: NOW,
        generation: 1,
        labels: { app: 'x' },
        finalizers: ['f'],
      },
      spec: { containers: [{ name: 'c', image: 'i', ports: [{ containerPort: 80, protocol: 'TCP' }] }] },
    });
    const mf = updateManagedFields(undefined, pod, 'kubectl-create', {
      apiVersion: 'v1',
      now: NOW,
      subresource: '',
      kind: 'Pod',
    });
    expect(mf).toEqual([
      {
        manager: 'kubectl-create',
        operation: 'Update',
        apiVersion: 'v1',
        time: NOW,
        fieldsType: 'FieldsV1',
        fieldsV1: {
          'f:metadata': { 'f:finalizers': { '.': {}, 'v:"f"': {} }, 'f:labels': { '.': {}, 'f:app': {} } },
          'f:spec': {
            'f:containers': {
              '.': {},
              'k:{"name":"c"}': {
                '.': {},
                'f:image': {},
                'f:name': {},
                'f:ports': {
                  '.': {},
                  'k:{"containerPort":80,"protocol":"TCP"}': {
                    '.': {},
                    'f:containerPort': {},
                    'f:protocol': {},
                  },
                },
              },
            },
          },
        },
      },
    ]);
  });

  it('moves a changed field to the writer and drops a manager left with nothing', () => {
    const created = deployment({ replicas: 1, paused: false });
    const first = updateManagedFields(undefined, created, 'creator', {
      apiVersion: 'apps/v1',
      now: NOW,
      subresource: '',
      kind: 'Deployment',
    });
    const stored = { ...created, metadata: { ...created.metadata, managedFields: first } };

    const scaled = deployment({ replicas: 3, paused: false }, { managedFields: first });
    const second = updateManagedFields(stored, scaled, 'scaler', {
      apiVersion: 'apps/v1',
      now: LATER,
      subresource: '',
      kind: 'Deployment',
    });
    expect(entryOf(second, 'creator')?.fieldsV1).toEqual({ 'f:spec': { 'f:paused': {} } });
    expect(entryOf(second, 'scaler')).toMatchObject({
      time: LATER,
      fieldsV1: { 'f:spec': { 'f:replicas': {} } },
    });

    const stored2 = { ...scaled, metadata: { ...scaled.metadata, managedFields: second } };
    const unpaused = deployment({ replicas: 3, paused: true }, { managedFields: second });
    const third = updateManagedFields(stored2, unpaused, 'scaler', {
      apiVersion: 'apps/v1',
      now: LATER,
      subresource: '',
      kind: 'Deployment',
    });
    expect(entryOf(third, 'creator')).toBeUndefined();
    expect(entryOf(third, 'scaler')?.fieldsV1).toEqual({ 'f:spec': { 'f:paused': {}, 'f:replicas': {} } });
  });

  it('adds no entry for a write that changes nothing, and forgets removed fields', () => {
    const cm = obj({
      apiVersion: 'v1',
      kind: 'ConfigMap',
      metadata: { name: 'c' },
      data: { a: '1', b: '2' },
    });
    const opts = { apiVersion: 'v1', now: NOW, subresource: '', kind: 'ConfigMap' };
    const first = updateManagedFields(undefined, cm, 'a', opts);
    const stored = obj({ ...(cm as unknown as JsonObject), metadata: { name: 'c', managedFields: first } });
    expect(updateManagedFields(stored, stored, 'b', opts)).toEqual(first);
    const removed = obj({ ...(cm as unknown as JsonObject), metadata: { name: 'c' }, data: { a: '1' } });
    const after = updateManagedFields(stored, removed, 'b', opts);
    expect(entryOf(after, 'a')?.fieldsV1).toEqual({ 'f:data': { '.': {}, 'f:a': {} } });
    expect(entryOf(after, 'b')).toBeUndefined();
  });

  it('ignores status on the main resource and records only status on the status subresource', () => {
    const old = deployment({ replicas: 1 });
    const next = obj({ ...(deployment({ replicas: 2 }) as unknown as JsonObject), status: { replicas: 2 } });
    const main = updateManagedFields(old, next, 'writer', {
      apiVersion: 'apps/v1',
      now: NOW,
      subresource: '',
      kind: 'Deployment',
    });
    expect(main).toEqual([expect.objectContaining({ fieldsV1: { 'f:spec': { 'f:replicas': {} } } })]);
    expect(main[0]).not.toHaveProperty('subresource');

    const status = updateManagedFields(old, next, 'controller', {
      apiVersion: 'apps/v1',
      now: NOW,
      subresource: 'status',
      kind: 'Deployment',
    });
    expect(status).toEqual([
      {
        manager: 'controller',
        operation: 'Update',
        apiVersion: 'apps/v1',
        time: NOW,
        fieldsType: 'FieldsV1',
        fieldsV1: { 'f:status': { '.': {}, 'f:replicas': {} } },
        subresource: 'status',
      },
    ]);
    // A custom resource declares its status subresource through the caller.
    const cr = updateManagedFields(old, next, 'w', {
      apiVersion: 'x/v1',
      now: NOW,
      subresource: '',
      kind: 'Widget',
      hasStatusSubresource: false,
    });
    expect(cr[0]?.fieldsV1).toHaveProperty('f:status');
  });

  it('lets a request reset managedFields with [{}]', () => {
    const old = deployment(
      { replicas: 1 },
      { managedFields: [{ manager: 'x', operation: 'Update', fieldsV1: { 'f:spec': { 'f:paused': {} } } }] },
    );
    const next = deployment({ replicas: 1 }, { managedFields: [{}] });
    expect(
      updateManagedFields(old, next, 'w', {
        apiVersion: 'apps/v1',
        now: NOW,
        subresource: '',
        kind: 'Deployment',
      }),
    ).toEqual([]);
  });
});

// ---------------------------------------------------------------------------------------------------

describe('serverSideApply', () => {
  const config = (spec: JsonObject, metadata: JsonObject = {}): KubeObject =>
    obj({
      apiVersion: 'apps/v1',
      kind: 'Deployment',
      metadata: { name: 'd', namespace: 'ns', ...metadata },
      spec,
    });

  it('creates the object and records an Apply entry', () => {
    const created = serverSideApply(
      undefined,
      config({ replicas: 2, selector: { matchLabels: { app: 'd' } } }, { labels: { app: 'd' } }),
      apply(),
    );
    expect(created.spec).toEqual({ replicas: 2, selector: { matchLabels: { app: 'd' } } });
    expect(entries(created)).toEqual([
      {
        manager: 'mgr',
        operation: 'Apply',
        apiVersion: 'apps/v1',
        time: NOW,
        fieldsType: 'FieldsV1',
        // LabelSelector is atomic: owned as a whole.
        fieldsV1: {
          'f:metadata': { 'f:labels': { 'f:app': {} } },
          'f:spec': { 'f:replicas': {}, 'f:selector': {} },
        },
      },
    ]);
  });

  it('merges into the live object: maps merged, containers by name, others kept', () => {
    const live = serverSideApply(
      undefined,
      config({
        replicas: 1,
        template: {
          spec: {
            containers: [
              { name: 'a', image: 'a:1' },
              { name: 'b', image: 'b:1' },
            ],
          },
        },
      }),
      apply({ manager: 'first' }),
    );
    const second = config(
      { template: { spec: { containers: [{ name: 'b', image: 'b:2', args: ['x'] }] } } },
      { labels: { l: '1' } },
    );
    const conflict = statusOf(() => serverSideApply(live, second, apply({ manager: 'second' })));
    expect(conflict.message).toBe(
      'Apply failed with 1 conflict: conflict with "first": .spec.template.spec.containers[name="b"].image',
    );

    const out = serverSideApply(live, second, apply({ manager: 'second', force: true }));
    expect(out.metadata.labels).toEqual({ l: '1' });
    expect(out.spec).toEqual({
      replicas: 1,
      template: {
        spec: {
          containers: [
            { name: 'a', image: 'a:1' },
            { name: 'b', image: 'b:2', args: ['x'] },
          ],
        },
      },
    });
    // The image changed hands; 'first' keeps the rest of container b.
    const image = ['f:spec', 'f:template', 'f:spec', 'f:containers', 'k:{"name":"b"}', 'f:image'];
    const first = decodeFieldsV1(entryOf(entries(out), 'first', 'Apply')?.fieldsV1);
    expect(first.has(JSON.stringify(image))).toBe(false);
    expect(first.has(JSON.stringify([...image.slice(0, -1), 'f:name']))).toBe(true);
    expect(
      decodeFieldsV1(entryOf(entries(out), 'second', 'Apply')?.fieldsV1).has(JSON.stringify(image)),
    ).toBe(true);
  });

  it('removes a field the manager stopped applying, unless another manager owns it', () => {
    const live = serverSideApply(
      undefined,
      config({ replicas: 1 }, { labels: { a: '1', b: '2', c: '3' } }),
      apply(),
    );
    // Another writer claims label c.
    const mf = updateManagedFields(
      live,
      withMetadata(live, { labels: { a: '1', b: '2', c: '33' } }),
      'editor',
      { apiVersion: 'apps/v1', now: NOW, subresource: '', kind: 'Deployment' },
    );
    const edited = withMetadata(live, { labels: { a: '1', b: '2', c: '33' }, managedFields: mf });
    const out = serverSideApply(edited, config({ replicas: 1 }, { labels: { a: '1' } }), apply());
    expect(out.metadata.labels).toEqual({ a: '1', c: '33' });
    expect(entryOf(entries(out), 'mgr', 'Apply')?.fieldsV1).toEqual({
      'f:metadata': { 'f:labels': { 'f:a': {} } },
      'f:spec': { 'f:replicas': {} },
    });
  });

  it('removes a list item the manager stopped applying', () => {
    const live = serverSideApply(
      undefined,
      config({
        template: {
          spec: {
            containers: [
              { name: 'a', image: 'a' },
              { name: 'b', image: 'b' },
            ],
          },
        },
      }),
      apply(),
    );
    const out = serverSideApply(
      live,
      config({ template: { spec: { containers: [{ name: 'a', image: 'a' }] } } }),
      apply(),
    );
    expect(out.spec).toEqual({ template: { spec: { containers: [{ name: 'a', image: 'a' }] } } });
  });

  it('answers a change to another manager’s field with 409, worded like kube-apiserver', () => {
    const created = serverSideApply(undefined, config({ replicas: 1 }), apply({ manager: 'owner' }));
    const mf = updateManagedFields(
      created,
      config({ replicas: 3 }, { managedFields: entries(created) }),
      'kubectl-client-side-apply',
      {
        apiVersion: 'apps/v1',
        now: LATER,
        subresource: '',
        kind: 'Deployment',
      },
    );
    const live = config({ replicas: 3 }, { managedFields: mf });
    const err = statusOf(() => serverSideApply(live, config({ replicas: 5 }), apply()));
    expect([err.code, err.reason]).toEqual([409, 'Conflict']);
    expect(err.message).toBe(
      'Apply failed with 1 conflict: conflict with "kubectl-client-side-apply" using apps/v1: .spec.replicas',
    );
    expect(err.details?.causes).toEqual([
      {
        reason: 'FieldManagerConflict',
        message: 'conflict with "kubectl-client-side-apply" using apps/v1',
        field: '.spec.replicas',
      },
    ]);
    // The same value is no conflict: the field becomes shared.
    const shared = serverSideApply(live, config({ replicas: 3 }), apply());
    expect(entryOf(entries(shared), 'kubectl-client-side-apply')?.fieldsV1).toEqual({
      'f:spec': { 'f:replicas': {} },
    });
    expect(entryOf(entries(shared), 'mgr', 'Apply')?.fieldsV1).toEqual({ 'f:spec': { 'f:replicas': {} } });
  });

  it('lists several conflicts per manager, managers sorted', () => {
    const live = obj({
      apiVersion: 'v1',
      kind: 'ConfigMap',
      metadata: {
        name: 'c',
        managedFields: [
          {
            manager: 'zeta',
            operation: 'Apply',
            apiVersion: 'v1',
            fieldsType: 'FieldsV1',
            fieldsV1: { 'f:data': { 'f:c': {} } },
          },
          {
            manager: 'alpha',
            operation: 'Update',
            apiVersion: 'v1',
            fieldsType: 'FieldsV1',
            fieldsV1: { 'f:data': { 'f:b': {}, 'f:a': {} } },
          },
        ],
      },
      data: { a: '1', b: '2', c: '3' },
    });
    const err = statusOf(() =>
      serverSideApply(
        live,
        obj({
          apiVersion: 'v1',
          kind: 'ConfigMap',
          metadata: { name: 'c' },
          data: { a: 'x', b: 'y', c: 'z' },
        }),
        {
          manager: 'me',
          force: false,
          apiVersion: 'v1',
          now: NOW,
          kind: 'ConfigMap',
        },
      ),
    );
    expect(err.message).toBe(
      'Apply failed with 3 conflicts: conflicts with "alpha" using v1:\n- .data.a\n- .data.b\nconflicts with "zeta":\n- .data.c',
    );
  });

  it('takes ownership with force, dropping a manager left with nothing', () => {
    const live = obj({
      apiVersion: 'apps/v1',
      kind: 'Deployment',
      metadata: {
        name: 'd',
        managedFields: [
          {
            manager: 'hpa',
            operation: 'Update',
            apiVersion: 'apps/v1',
            fieldsType: 'FieldsV1',
            fieldsV1: { 'f:spec': { 'f:replicas': {} } },
          },
        ],
      },
      spec: { replicas: 4 },
    });
    const out = serverSideApply(live, config({ replicas: 1 }), apply({ force: true }));
    expect(out.spec).toEqual({ replicas: 1 });
    expect(entries(out).map((e) => `${e.manager}/${e.operation}`)).toEqual(['mgr/Apply']);
  });

  it('owns finalizers as a set and ownerReferences by uid as atomic items', () => {
    const out = serverSideApply(
      undefined,
      obj({
        apiVersion: 'v1',
        kind: 'ConfigMap',
        metadata: {
          name: 'c',
          finalizers: ['example.com/f'],
          ownerReferences: [{ apiVersion: 'v1', kind: 'Secret', name: 's', uid: 'u-1' }],
        },
      }),
      apply({ apiVersion: 'v1', kind: 'ConfigMap' }),
    );
    expect(entries(out)[0]?.fieldsV1).toEqual({
      'f:metadata': {
        'f:finalizers': { 'v:"example.com/f"': {} },
        'f:ownerReferences': { 'k:{"uid":"u-1"}': {} },
      },
    });
  });

  it('ignores status applied to the main resource of a kind with a status subresource', () => {
    const live = obj({ ...(deployment({ replicas: 1 }) as unknown as JsonObject), status: { replicas: 1 } });
    const out = serverSideApply(
      live,
      obj({ ...(config({ replicas: 1 }) as unknown as JsonObject), status: { replicas: 9 } }),
      apply(),
    );
    expect(out.status).toEqual({ replicas: 1 });
    expect(entries(out)[0]?.fieldsV1).toEqual({ 'f:spec': { 'f:replicas': {} } });
  });

  it('refuses managedFields in the applied configuration and never mutates its inputs', () => {
    const err = statusOf(() => serverSideApply(undefined, config({}, { managedFields: [] }), apply()));
    expect([err.code, err.message]).toEqual([400, 'metadata.managedFields must be nil']);
    const live = serverSideApply(undefined, config({ replicas: 1 }, { labels: { a: '1' } }), apply());
    const cfg = config({ replicas: 2 });
    const before = [structuredClone(live), structuredClone(cfg)];
    serverSideApply(live, cfg, apply());
    expect([live, cfg]).toEqual(before);
  });
});

// ---------------------------------------------------------------------------------------------------

describe('FieldsV1', () => {
  it('renders paths as fieldpath does', () => {
    expect(pathString(['f:spec', 'f:containers', 'k:{"name":"app"}', 'f:image'])).toBe(
      '.spec.containers[name="app"].image',
    );
    expect(pathString(['f:spec', 'f:ports', 'k:{"port":80,"protocol":"TCP"}'])).toBe(
      '.spec.ports[port=80,protocol="TCP"]',
    );
    expect(pathString(['f:metadata', 'f:finalizers', 'v:"x"'])).toBe('.metadata.finalizers[="x"]');
  });

  it('decodes what it encodes (property)', () => {
    const element = fc.oneof(
      fc.constantFrom('a', 'b', 'c').map((n) => `f:${n}`),
      fc.constantFrom('x', 'y').map((n) => `k:${JSON.stringify({ name: n })}`),
      fc.constantFrom('1', '2').map((n) => `v:${JSON.stringify(n)}`),
    );
    fc.assert(
      fc.property(
        fc.uniqueArray(fc.array(element, { minLength: 1, maxLength: 4 }), {
          maxLength: 8,
          selector: (p) => p.join('/'),
        }),
        (paths) => {
          const set = new Map(paths.map((p) => [JSON.stringify(p), p] as const));
          const decoded = decodeFieldsV1(encodeFieldsV1(set));
          expect(new Set(decoded.keys())).toEqual(new Set(set.keys()));
        },
      ),
      { numRuns: 300 },
    );
  });
});
