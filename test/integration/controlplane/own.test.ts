// A control plane of a file's own: separate from the shared one, and a component that dies is reported
// with the last lines of its log.
import { afterAll, beforeAll, expect, it } from 'vitest';
import { TestCluster } from '../../helpers/cluster.ts';
import { eventually } from '../../helpers/eventually.ts';

let shared: TestCluster;
let own: TestCluster;
const reported: string[] = [];

beforeAll(async () => {
  shared = await TestCluster.shared();
  own = await TestCluster.own({ nodes: 1, onComponentExit: (m) => reported.push(m) });
});

afterAll(async () => {
  await own?.stop();
  await shared?.stop();
});

it('is a cluster of its own', async () => {
  expect(own.url).not.toBe(shared.url);
  const ns = await own.namespace('own');
  await expect(shared.core.readNamespace({ name: ns })).rejects.toMatchObject({ code: 404 });
  expect(own.nodeNames).toEqual(['kwok-node-0']);
});

it('names a component that dies, with its last log lines', async () => {
  const cp = own.controlPlane!;
  const scheduler = cp.components.find((c) => c.name === 'kube-scheduler')!;
  process.kill(scheduler.pid!, 'SIGKILL');
  await eventually(() => cp.failure() !== undefined);
  expect(cp.failure()).toMatch(
    /^kube-scheduler was killed by SIGKILL; last lines of .*kube-scheduler\.log:\n {2}\S/,
  );
  expect(reported).toEqual([cp.failure()]);
});
