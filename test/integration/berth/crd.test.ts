// deploy/crds/berthlease.yaml applied to the real kube-apiserver (the run's shared one: the CRD is the
// same for every suite): the structural schema, the CEL rules with the server's exact messages, the
// status subresource and the printer columns. Objects live in a namespace of this file's own.
import { readFile } from 'node:fs/promises';
import { ApiException, CustomObjectsApi, PatchStrategy, setHeaderOptions } from '@kubernetes/client-node';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { CRD_NAME, GROUP, KIND, PLURAL, VERSION } from '../../../src/berth/api.ts';
import { TestCluster } from '../../helpers/cluster.ts';
import { eventually } from '../../helpers/eventually.ts';

const CRD_PATH = new URL('../../../deploy/crds/berthlease.yaml', import.meta.url);

let t: TestCluster;
let custom: CustomObjectsApi;
let ns: string;

beforeAll(async () => {
  t = await TestCluster.shared();
  custom = t.kc.makeApiClient(CustomObjectsApi);
  ns = await t.namespace('berthlease-crd');
});
afterAll(async () => {
  await t?.stop();
});

type Obj = Record<string, unknown>;

const baseSpec = {
  leaseName: 'ingest',
  holderIdentity: 'worker-east-1',
  ttlSeconds: 30,
  heartbeatIntervalSeconds: 10,
  semantics: 'at-most-once',
};
const managedSpec = {
  ...baseSpec,
  target: { apiVersion: 'apps/v1', kind: 'Deployment', name: 'web' },
  acquireAction: { scale: { replicas: 2 } },
  releaseAction: { scale: { replicas: 0 } },
};

const lease = (name: string, spec: Obj): Obj => ({
  apiVersion: `${GROUP}/${VERSION}`,
  kind: KIND,
  metadata: { name, namespace: ns },
  spec,
});

const ref = () => ({ group: GROUP, version: VERSION, namespace: ns, plural: PLURAL });
const create = (body: Obj) => custom.createNamespacedCustomObject({ ...ref(), body }) as Promise<Obj>;
const mergePatch = (name: string, body: Obj) =>
  custom.patchNamespacedCustomObject(
    { ...ref(), name, body },
    setHeaderOptions('Content-Type', PatchStrategy.MergePatch),
  ) as Promise<Obj>;
const statusPatch = (name: string, body: Obj) =>
  custom.patchNamespacedCustomObjectStatus(
    { ...ref(), name, body },
    setHeaderOptions('Content-Type', PatchStrategy.MergePatch),
  ) as Promise<Obj>;

async function failure(p: Promise<unknown>): Promise<{ code: number; message: string }> {
  try {
    await p;
  } catch (err) {
    if (err instanceof ApiException)
      return { code: err.code, message: (JSON.parse(err.body as string) as { message: string }).message };
    throw err;
  }
  throw new Error('expected the request to fail');
}

const invalid = (name: string, detail: string): string =>
  `BerthLease.berth.skaphos.io "${name}" is invalid: ${detail}`;
// kube-apiserver leaves an object's value out of a CEL rule's error: `<path>: Invalid value: <message>`.
const cel = (path: string, message: string): string => `${path}: Invalid value: ${message}`;

describe('BerthLease CRD', () => {
  // Server-side: the same answer whether this run's shared cluster has the CRD already (another suite
  // created it) or not; a client-side apply over a created CRD warns of its missing last-applied record.
  it('applies and is Established, served with a status subresource', async () => {
    const yaml = await readFile(CRD_PATH, 'utf8');
    const applied = await t.kubectl(['apply', '--server-side', '-f', '-'], { input: yaml });
    expect(applied.stderr).toBe('');
    expect(applied.stdout.trim()).toBe(
      `customresourcedefinition.apiextensions.k8s.io/${CRD_NAME} serverside-applied`,
    );
    const waited = await t.kubectl([
      'wait',
      '--for=condition=Established',
      `crd/${CRD_NAME}`,
      '--timeout=10s',
    ]);
    expect(waited.code).toBe(0);
    await eventually(async () => (await t.kubectl(['get', PLURAL])).code === 0);
    const resources = await t.kubectl(['api-resources', '--api-group', GROUP, '-o', 'wide']);
    expect(resources.stdout).toMatch(/berthleases\s+berth\.skaphos\.io\/v1alpha1\s+true\s+BerthLease/);
  });

  it('accepts the lease-only example through kubectl and stores it unchanged (no defaults)', async () => {
    const res = await t.kubectl(['apply', '-f', '-'], {
      input:
        `apiVersion: berth.skaphos.io/v1alpha1\nkind: BerthLease\nmetadata: {name: example, namespace: ${ns}}\n` +
        'spec: {leaseName: ingest, holderIdentity: worker-east-1, ttlSeconds: 30, heartbeatIntervalSeconds: 10, semantics: at-most-once}\n',
    });
    expect(res.stderr).toBe('');
    const got = (await custom.getNamespacedCustomObject({ ...ref(), name: 'example' })) as { spec: Obj };
    expect(got.spec).toEqual(baseSpec);
  });

  it('requires every spec field and validates types, lengths and the semantics enum', async () => {
    const missing = await failure(create(lease('missing', {})));
    expect(missing.code).toBe(422);
    for (const field of [
      'leaseName',
      'holderIdentity',
      'ttlSeconds',
      'heartbeatIntervalSeconds',
      'semantics',
    ])
      expect(missing.message).toContain(`spec.${field}: Required value`);

    const long = await failure(
      create(lease('long', { ...baseSpec, leaseName: 'a'.repeat(254), holderIdentity: 'h'.repeat(254) })),
    );
    expect(long.code).toBe(422);
    expect(long.message).toContain('spec.leaseName: Too long');
    expect(long.message).toContain('spec.holderIdentity: Too long');
    // 253 is allowed.
    await create(
      lease('max-length', { ...baseSpec, leaseName: 'a'.repeat(253), holderIdentity: 'h'.repeat(253) }),
    );

    const semantics = await failure(create(lease('semantics', { ...baseSpec, semantics: 'exactly-once' })));
    expect(semantics.message).toContain(
      'spec.semantics: Unsupported value: "exactly-once": supported values: "at-most-once", "at-least-once"',
    );
    const ttlType = await failure(create(lease('ttl-type', { ...baseSpec, ttlSeconds: '30' })));
    expect(ttlType.message).toContain(
      'spec.ttlSeconds: Invalid value: "string": spec.ttlSeconds in body must be of type integer',
    );
    // No schema minimum on ttl/heartbeat: the reconciler reports those (InvalidSpec).
    await create(lease('zero-ttl', { ...baseSpec, ttlSeconds: 0, heartbeatIntervalSeconds: -1 }));
  });

  it('validates the target and the actions', async () => {
    const target = await failure(
      create(
        lease('target', {
          ...managedSpec,
          target: { apiVersion: 'a'.repeat(64), kind: 'k'.repeat(64), name: 'n'.repeat(254) },
        }),
      ),
    );
    expect(target.message).toContain('spec.target.apiVersion: Too long');
    expect(target.message).toContain('spec.target.kind: Too long');
    expect(target.message).toContain('spec.target.name: Too long');
    const noName = await failure(
      create(lease('no-name', { ...managedSpec, target: { apiVersion: 'apps/v1', kind: 'Deployment' } })),
    );
    expect(noName.message).toContain('spec.target.name: Required value');

    const both = await failure(
      create(lease('both', { ...managedSpec, acquireAction: { suspend: false, scale: { replicas: 1 } } })),
    );
    expect(both.message).toBe(
      invalid('both', cel('spec.acquireAction', 'at most one of suspend or scale may be set')),
    );
    const bothRelease = await failure(
      create(
        lease('both-release', { ...managedSpec, releaseAction: { suspend: true, scale: { replicas: 0 } } }),
      ),
    );
    expect(bothRelease.message).toBe(
      invalid('both-release', cel('spec.releaseAction', 'at most one of suspend or scale may be set')),
    );
    const negative = await failure(
      create(lease('negative', { ...managedSpec, acquireAction: { scale: { replicas: -1 } } })),
    );
    expect(negative.message).toContain(
      'spec.acquireAction.scale.replicas: Invalid value: -1: spec.acquireAction.scale.replicas in body should be greater than or equal to 0',
    );
    const noReplicas = await failure(
      create(lease('no-replicas', { ...managedSpec, releaseAction: { scale: {} } })),
    );
    expect(noReplicas.message).toContain('spec.releaseAction.scale.replicas: Required value');
    await create(lease('managed', managedSpec));
  });

  it('makes leaseName, holderIdentity, target and releaseAction immutable, with the exact messages', async () => {
    await create(lease('immutable', managedSpec));
    const cases: Array<[Obj, string]> = [
      [{ leaseName: 'other' }, 'leaseName is immutable'],
      [{ holderIdentity: 'other' }, 'holderIdentity is immutable'],
      [{ target: { name: 'other' } }, 'target is immutable'],
      [{ target: null }, 'target is immutable'],
      [{ releaseAction: { scale: null, suspend: true } }, 'releaseAction is immutable'],
      [{ releaseAction: null }, 'releaseAction is immutable'],
    ];
    for (const [spec, message] of cases) {
      const res = await failure(mergePatch('immutable', { spec }));
      expect(res.code, JSON.stringify(spec)).toBe(422);
      expect(res.message, JSON.stringify(spec)).toBe(invalid('immutable', cel('spec', message)));
    }
    const two = await failure(mergePatch('immutable', { spec: { leaseName: 'x', holderIdentity: 'y' } }));
    expect(two.message).toBe(
      invalid(
        'immutable',
        `[${cel('spec', 'leaseName is immutable')}, ${cel('spec', 'holderIdentity is immutable')}]`,
      ),
    );
    // acquireAction, ttl, heartbeat and semantics stay mutable.
    const patched = (await mergePatch('immutable', {
      spec: { acquireAction: { scale: { replicas: 5 } }, ttlSeconds: 60, semantics: 'at-least-once' },
    })) as { spec: Obj; metadata: { generation: number } };
    expect(patched.spec.acquireAction).toEqual({ scale: { replicas: 5 } });
    expect(patched.metadata.generation).toBe(2);
  });

  it('rejects adding a target or a releaseAction to a lease-only lease', async () => {
    await create(lease('lease-only', baseSpec));
    const addTarget = await failure(mergePatch('lease-only', { spec: { target: managedSpec.target } }));
    expect(addTarget.message).toBe(invalid('lease-only', cel('spec', 'target is immutable')));
    const addRelease = await failure(
      mergePatch('lease-only', { spec: { releaseAction: { suspend: true } } }),
    );
    expect(addRelease.message).toBe(invalid('lease-only', cel('spec', 'releaseAction is immutable')));
  });

  it('writes status only through the status subresource and validates it', async () => {
    await create(lease('status', baseSpec));
    const status = {
      leaseState: 'held',
      currentHolder: 'cluster-east',
      fencingToken: 7,
      acquiredAt: '2026-09-07T09:00:00Z',
      expiresAt: '2026-09-07T10:00:30Z',
      lastHeartbeat: '2026-09-07T10:00:00Z',
      observedGeneration: 1,
      conditions: [
        {
          type: 'Acquired',
          status: 'True',
          reason: 'Held',
          message: 'lease held with fencing token 7',
          lastTransitionTime: '2026-09-07T09:00:00Z',
          observedGeneration: 1,
        },
      ],
      workload: { targetUID: 'uid-1', phase: 'Active', token: 7, pods: [{ name: 'p', uid: 'a' }] },
    };
    const written = (await statusPatch('status', { status, spec: { ttlSeconds: 99 } })) as {
      spec: Obj;
      status: Obj;
    };
    expect(written.status).toEqual(status);
    expect(written.spec.ttlSeconds).toBe(30);
    const viaMain = (await mergePatch('status', { status: { leaseState: 'waiting' } })) as { status: Obj };
    expect(viaMain.status.leaseState).toBe('held');

    const badPhase = await failure(statusPatch('status', { status: { workload: { phase: 'Running' } } }));
    expect(badPhase.message).toContain(
      'status.workload.phase: Unsupported value: "Running": supported values: "", "Active", "Stopping"',
    );
    const noTarget = await failure(
      statusPatch('status', { status: { workload: { targetUID: null, phase: 'Active' } } }),
    );
    expect(noTarget.message).toContain('status.workload.targetUID: Required value');
    const duplicate = await failure(
      statusPatch('status', {
        status: {
          workload: {
            targetUID: 'u',
            pods: [
              { name: 'p', uid: 'a' },
              { name: 'q', uid: 'a' },
            ],
          },
        },
      }),
    );
    expect(duplicate.message).toContain('status.workload.pods[1]: Duplicate value');
    const pods = Array.from({ length: 1025 }, (_, i) => ({ name: `p${i}`, uid: `u${i}` }));
    const tooMany = await failure(statusPatch('status', { status: { workload: { targetUID: 'u', pods } } }));
    expect(tooMany.message).toContain('status.workload.pods: Too many: 1025: must have at most 1024 items');
    const badReason = await failure(
      statusPatch('status', {
        status: { conditions: [{ ...status.conditions[0], reason: 'has spaces' }] },
      }),
    );
    expect(badReason.message).toContain('status.conditions[0].reason: Invalid value: "has spaces"');
    const badTime = await failure(statusPatch('status', { status: { expiresAt: 'tomorrow' } }));
    expect(badTime.message).toContain('status.expiresAt: Invalid value: "tomorrow"');
    const negativeGen = await failure(statusPatch('status', { status: { observedGeneration: -1 } }));
    expect(negativeGen.message).toContain('status.observedGeneration: Invalid value: -1');
  });

  it('prints State, Holder, Token, Expires and Age', async () => {
    const table = await t.kubectl(['get', 'berthlease', 'status', '-n', ns]);
    expect(table.stderr).toBe('');
    expect(table.stdout).toMatch(/^NAME\s+STATE\s+HOLDER\s+TOKEN\s+EXPIRES\s+AGE\n/);
    expect(table.stdout).toMatch(/\nstatus\s+held\s+cluster-east\s+7\s+2026-09-07T10:00:30Z\s+\d+s\n/);
    const empty = await t.kubectl(['get', 'berthlease', 'example', '-n', ns]);
    expect(empty.stdout).toMatch(/\nexample\s+\d+s\n/);
  });
});
