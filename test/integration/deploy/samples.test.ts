// deploy/samples/ apply cleanly to a cluster with the BerthLease CRD (schema and CEL rules), and each
// BerthLease passes the reconciler's own semantic checks. On the shared cluster: the CRD is deploy/crds'
// (the one every suite installs), the samples go to a namespace of their own, and no operator runs.
import { readdir, readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { deployPath, parseManifests } from '../../../scripts/install-manifest.ts';
import { type SpecInput, validateSpec } from '../../../src/berth/api.ts';
import { TestCluster } from '../../helpers/cluster.ts';
import { kubectlOk } from './install.ts';

let t: TestCluster;
let namespace: string;

async function sampleFiles(dir = deployPath('samples/').pathname): Promise<string[]> {
  const out: string[] = [];
  for (const entry of await readdir(dir, { withFileTypes: true })) {
    const path = join(dir, entry.name);
    if (entry.isDirectory()) out.push(...(await sampleFiles(path)));
    else if (entry.name.endsWith('.yaml')) out.push(path);
  }
  return out.sort();
}

beforeAll(async () => {
  t = await TestCluster.shared();
  await t.installBerthLeaseCrd();
  namespace = await t.namespace('samples');
});

afterAll(async () => {
  await t?.stop();
});

describe('deploy/samples', () => {
  it('holds a lease-only BerthLease, a managed Deployment and a managed CronJob, each lease valid', async () => {
    const objects = (
      await Promise.all((await sampleFiles()).map(async (f) => parseManifests(await readFile(f, 'utf8'))))
    ).flat();
    const leases = objects.filter((o) => o.kind === 'BerthLease');
    const targets = leases
      .map((l) => (l.spec as { target?: { kind: string } }).target?.kind ?? 'none')
      .sort();
    expect(targets).toEqual(['CronJob', 'Deployment', 'none']);
    for (const lease of leases)
      expect(validateSpec(lease.spec as SpecInput), lease.metadata.name).toBeUndefined();
    for (const lease of leases) {
      const target = (lease.spec as { target?: { kind: string; name: string } }).target;
      if (target)
        expect(objects.some((o) => o.kind === target.kind && o.metadata.name === target.name)).toBe(true);
    }
  });

  it('apply to the API server (schema, CEL rules), leases before their targets', async () => {
    const out = await kubectlOk(t, ['apply', '-n', namespace, '-R', '-f', deployPath('samples/').pathname]);
    const applied = out.trim().split('\n');
    expect(applied).toHaveLength(5);
    for (const [lease, target] of [
      ['web', 'deployment.apps/web'],
      ['nightly-report', 'cronjob.batch/nightly-report'],
    ]) {
      const leaseAt = applied.findIndex((l) => l.startsWith(`berthlease.berth.skaphos.io/${lease} `));
      expect(leaseAt).toBeGreaterThanOrEqual(0);
      expect(leaseAt).toBeLessThan(applied.findIndex((l) => l.startsWith(`${target} `)));
    }
    const listed = await kubectlOk(t, ['get', 'berthleases', '-n', namespace, '-o', 'name']);
    expect(listed.trim().split('\n').sort()).toEqual([
      'berthlease.berth.skaphos.io/nightly-report',
      'berthlease.berth.skaphos.io/reports-singleton',
      'berthlease.berth.skaphos.io/web',
    ]);
  });
});
