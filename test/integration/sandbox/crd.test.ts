// CustomResourceDefinitions: served as soon as created, schema validation, defaults, pruning, CEL rules
// (including transition rules with oldSelf), the status subresource and printer columns.
import { CustomObjectsApi, PatchStrategy, setHeaderOptions } from '@kubernetes/client-node';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { apiFailure } from '../../helpers/api.ts';
import { eventually } from '../../helpers/eventually.ts';
import { kubectlAvailable, startTestSandbox, type TestSandbox } from '../../helpers/sandbox.ts';

const hasKubectl = await kubectlAvailable();
if (!hasKubectl) console.warn('kubectl is not installed: skipping the CRD tests that apply through kubectl');

const CRD = `
apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: widgets.example.com
spec:
  group: example.com
  scope: Namespaced
  names: {plural: widgets, singular: widget, kind: Widget, listKind: WidgetList, shortNames: [wd]}
  versions:
  - name: v1
    served: true
    storage: true
    subresources: {status: {}}
    additionalPrinterColumns:
    - {name: Size, type: integer, jsonPath: .spec.size}
    - {name: Phase, type: string, jsonPath: .status.phase}
    schema:
      openAPIV3Schema:
        type: object
        properties:
          spec:
            type: object
            required: [owner, size]
            x-kubernetes-validations:
            - rule: self.owner == oldSelf.owner
              message: owner is immutable
            - rule: "!(has(self.a) && has(self.b))"
              message: at most one of a or b may be set
            properties:
              owner: {type: string, maxLength: 10}
              size: {type: integer, minimum: 1}
              mode: {type: string, enum: [fast, slow], default: fast}
              a: {type: string}
              b: {type: string}
          status:
            type: object
            properties:
              phase: {type: string}
`;

let t: TestSandbox;
let custom: CustomObjectsApi;

beforeAll(async () => {
  t = await startTestSandbox();
  custom = t.kc.makeApiClient(CustomObjectsApi);
});
afterAll(async () => {
  await t?.stop();
});

const widget = (name: string, spec: Record<string, unknown>) => ({
  apiVersion: 'example.com/v1',
  kind: 'Widget',
  metadata: { name },
  spec,
});

const create = (body: object) =>
  custom.createNamespacedCustomObject({
    group: 'example.com',
    version: 'v1',
    namespace: 'default',
    plural: 'widgets',
    body,
  });

describe.skipIf(!hasKubectl)('custom resources', () => {
  it('serves a CRD as soon as it is applied and marks it Established', async () => {
    const applied = await t.kubectl(['apply', '-f', '-'], { input: CRD });
    expect(applied.stdout.trim()).toBe(
      'customresourcedefinition.apiextensions.k8s.io/widgets.example.com created',
    );
    const waited = await t.kubectl([
      'wait',
      '--for=condition=Established',
      'crd/widgets.example.com',
      '--timeout=10s',
    ]);
    expect(waited.code).toBe(0);
    await eventually(async () => (await t.kubectl(['get', 'widgets'])).code === 0);
  });

  it('validates the schema with kube-apiserver messages', async () => {
    const res = await apiFailure(
      create(widget('bad', { owner: 'far-too-long-owner', size: 0, mode: 'odd' })),
    );
    expect(res.code).toBe(422);
    expect(res.message).toContain('Widget.example.com "bad" is invalid: [');
    expect(res.message).toContain(
      'spec.size: Invalid value: 0: spec.size in body should be greater than or equal to 1',
    );
    expect(res.message).toContain('spec.mode: Unsupported value: "odd": supported values: "fast", "slow"');
    const missing = await apiFailure(create(widget('missing', { size: 1 })));
    expect(missing.message).toContain('spec.owner: Required value');
  });

  it('applies defaults, prunes unknown fields and evaluates CEL rules', async () => {
    const created = (await create(widget('ok', { owner: 'me', size: 2, unknown: true }))) as {
      spec: Record<string, unknown>;
    };
    expect(created.spec).toEqual({ owner: 'me', size: 2, mode: 'fast' });
    const both = await apiFailure(create(widget('both', { owner: 'me', size: 1, a: 'x', b: 'y' })));
    expect(both.message).toBe(
      'Widget.example.com "both" is invalid: spec: Invalid value: "object": at most one of a or b may be set',
    );
  });

  it('rejects unknown fields under fieldValidation=Strict, as kubectl apply sends it', async () => {
    const res = await t.kubectl(['apply', '-f', '-'], {
      input:
        'apiVersion: example.com/v1\nkind: Widget\nmetadata:\n  name: strict\n  namespace: default\nspec:\n  owner: me\n  size: 1\n  colour: red\n',
    });
    expect(res.code).not.toBe(0);
    expect(res.stderr).toContain('strict decoding error: unknown field "spec.colour"');
  });

  it('rejects a CRD whose CEL rule does not compile', async () => {
    const bad = CRD.replace('widgets.example.com', 'gadgets.example.com')
      .replace(
        '{plural: widgets, singular: widget, kind: Widget, listKind: WidgetList, shortNames: [wd]}',
        '{plural: gadgets, kind: Gadget}',
      )
      .replace('rule: self.owner == oldSelf.owner', 'rule: self.owner == 1 +');
    const res = await t.kubectl(['apply', '-f', '-'], { input: bad });
    expect(res.code).not.toBe(0);
    expect(res.stderr).toContain(
      'The CustomResourceDefinition "gadgets.example.com" is invalid: spec.versions[0].schema.openAPIV3Schema',
    );
    expect(res.stderr).toContain('compilation failed');
  });

  it('enforces transition rules with oldSelf on update', async () => {
    await create(widget('immutable', { owner: 'me', size: 1 }));
    const res = await apiFailure(
      custom.patchNamespacedCustomObject(
        {
          group: 'example.com',
          version: 'v1',
          namespace: 'default',
          plural: 'widgets',
          name: 'immutable',
          body: { spec: { owner: 'you' } },
        },
        setHeaderOptions('Content-Type', PatchStrategy.MergePatch),
      ),
    );
    expect(res.code).toBe(422);
    expect(res.message).toBe(
      'Widget.example.com "immutable" is invalid: spec: Invalid value: "object": owner is immutable',
    );
  });

  it('keeps status writes on the status subresource and prints the printer columns', async () => {
    await create(widget('status', { owner: 'me', size: 3 }));
    const status = await custom.patchNamespacedCustomObjectStatus(
      {
        group: 'example.com',
        version: 'v1',
        namespace: 'default',
        plural: 'widgets',
        name: 'status',
        body: { status: { phase: 'Ready' }, spec: { size: 9 } },
      },
      setHeaderOptions('Content-Type', PatchStrategy.MergePatch),
    );
    expect((status as { spec: { size: number }; status: { phase: string } }).spec.size).toBe(3);
    expect((status as { status: { phase: string } }).status.phase).toBe('Ready');
    const table = await t.kubectl(['get', 'widget', 'status']);
    expect(table.stdout).toMatch(/^NAME\s+SIZE\s+PHASE\n/);
    expect(table.stdout).toMatch(/\nstatus\s+3\s+Ready\n/);
    const strategic = await apiFailure(
      custom.patchNamespacedCustomObject(
        {
          group: 'example.com',
          version: 'v1',
          namespace: 'default',
          plural: 'widgets',
          name: 'status',
          body: { spec: { size: 4 } },
        },
        setHeaderOptions('Content-Type', PatchStrategy.StrategicMergePatch),
      ),
    );
    expect(strategic.code).toBe(415);
  });

  it('deletes the custom resources with their CRD', async () => {
    expect((await t.kubectl(['delete', 'crd', 'widgets.example.com'])).code).toBe(0);
    await eventually(async () => (await t.kubectl(['get', 'crd', 'widgets.example.com'])).code !== 0);
    expect(t.sandbox.count('example.com', 'widgets')).toBe(0);
  });
});
