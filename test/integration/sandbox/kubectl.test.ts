// The sandbox driven by the real kubectl: apply (create and update), get (tables, -o json), patch,
// delete, wait and get -w.
import { spawn } from 'node:child_process';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { eventually } from '../../helpers/eventually.ts';
import { kubectlAvailable, startTestSandbox, type TestSandbox } from '../../helpers/sandbox.ts';

const hasKubectl = await kubectlAvailable();
if (!hasKubectl) console.warn('kubectl is not installed: skipping the kubectl conformance tests');

let t: TestSandbox;

beforeAll(async () => {
  if (hasKubectl) t = await startTestSandbox();
});
afterAll(async () => {
  await t?.stop();
});

const deploymentYaml = (replicas: number, image = 'nginx:1.27') => `
apiVersion: apps/v1
kind: Deployment
metadata:
  name: web
  namespace: default
  labels: {app: web}
spec:
  replicas: ${replicas}
  selector:
    matchLabels: {app: web}
  template:
    metadata:
      labels: {app: web}
    spec:
      containers:
      - name: web
        image: ${image}
        ports:
        - containerPort: 80
      - name: sidecar
        image: busybox:1.36
`;

const namespaceYaml = (name: string) => `apiVersion: v1\nkind: Namespace\nmetadata:\n  name: ${name}\n`;
const configMapYaml = (name: string, extra = '') =>
  `apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: ${name}\n${extra}\n`;

describe.skipIf(!hasKubectl)('kubectl', () => {
  it('applies a manifest, then applies a change to it', async () => {
    const created = await t.kubectl(['apply', '-f', '-'], { input: deploymentYaml(1) });
    expect(created.stderr).toBe('');
    expect(created.stdout.trim()).toBe('deployment.apps/web created');
    const updated = await t.kubectl(['apply', '-f', '-'], { input: deploymentYaml(2, 'nginx:1.28') });
    expect(updated.stdout.trim()).toBe('deployment.apps/web configured');
    const unchanged = await t.kubectl(['apply', '-f', '-'], { input: deploymentYaml(2, 'nginx:1.28') });
    expect(unchanged.stdout.trim()).toBe('deployment.apps/web unchanged');
    const got = JSON.parse((await t.kubectl(['get', 'deployment', 'web', '-o', 'json'])).stdout);
    expect(got.spec.replicas).toBe(2);
    expect(
      got.spec.template.spec.containers.map((c: { name: string; image: string }) => `${c.name}=${c.image}`),
    ).toEqual(['web=nginx:1.28', 'sidecar=busybox:1.36']);
    expect(got.metadata.generation).toBe(2);
  });

  it('applies server-side with a field manager', async () => {
    const cm =
      'apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: ssa\n  namespace: default\ndata:\n  a: "1"\n';
    const res = await t.kubectl(['apply', '--server-side', '--field-manager=tester', '-f', '-'], {
      input: cm,
    });
    expect(res.stderr).toBe('');
    expect(res.stdout.trim()).toBe('configmap/ssa serverside-applied');
    const got = JSON.parse(
      (await t.kubectl(['get', 'configmap', 'ssa', '-o', 'json', '--show-managed-fields'])).stdout,
    );
    expect(
      got.metadata.managedFields.map(
        (m: { manager: string; operation: string }) => `${m.manager}/${m.operation}`,
      ),
    ).toContain('tester/Apply');
  });

  it('prints server-side tables', async () => {
    await t.kubectl(['apply', '-f', '-'], { input: namespaceYaml('tables') });
    const res = await t.kubectl(['get', 'namespaces']);
    expect(res.stdout).toMatch(/^NAME\s+STATUS\s+AGE\n/);
    expect(res.stdout).toMatch(/\ntables\s+Active\s+\d+s\n/);
  });

  it('patches with every patch type', async () => {
    await t.kubectl(['apply', '-f', '-'], { input: configMapYaml('p', 'data: {a: "1"}') });
    expect(
      (
        await t.kubectl(['patch', 'configmap', 'p', '--type=merge', '-p', '{"data":{"b":"2"}}'])
      ).stdout.trim(),
    ).toBe('configmap/p patched');
    expect(
      (
        await t.kubectl([
          'patch',
          'configmap',
          'p',
          '--type=json',
          '-p',
          '[{"op":"remove","path":"/data/a"}]',
        ])
      ).code,
    ).toBe(0);
    expect(
      (await t.kubectl(['patch', 'configmap', 'p', '--type=strategic', '-p', '{"data":{"c":"3"}}'])).code,
    ).toBe(0);
    const got = JSON.parse((await t.kubectl(['get', 'configmap', 'p', '-o', 'json'])).stdout);
    expect(got.data).toEqual({ b: '2', c: '3' });
    const failed = await t.kubectl([
      'patch',
      'configmap',
      'p',
      '--type=json',
      '-p',
      '[{"op":"test","path":"/data/b","value":"9"}]',
    ]);
    expect(failed.code).not.toBe(0);
    expect(failed.stderr.trim()).toBe('The request is invalid: /data/b: Test operation failed (operation 0)');
  });

  it('waits for a condition and for deletion', async () => {
    await t.kubectl(['create', '-f', '-'], { input: configMapYaml('gone') });
    const waiter = t.kubectl(['wait', '--for=delete', 'configmap/gone', '--timeout=20s']);
    await t.kubectl(['delete', 'configmap', 'gone']);
    expect((await waiter).code).toBe(0);
    await t.kubectl(['create', '-f', '-'], { input: namespaceYaml('waited') });
    const ready = await t.kubectl([
      'wait',
      '--for=jsonpath={.status.phase}=Active',
      'namespace/waited',
      '--timeout=20s',
    ]);
    expect(ready.code).toBe(0);
  });

  it('streams changes with get -w', async () => {
    await t.kubectl(['create', '-f', '-'], { input: namespaceYaml('watched') });
    const child = spawn('kubectl', ['get', 'configmaps', '-n', 'watched', '-w', '--output-watch-events'], {
      env: { ...process.env, KUBECONFIG: t.kubeconfigPath },
    });
    let out = '';
    child.stdout.on('data', (d: Buffer) => {
      out += d.toString();
    });
    try {
      await eventually(
        () => t.sandbox.faults.activeWatches({ resource: 'configmaps', namespace: 'watched' }) > 0,
      );
      await t.kubectl(['create', '-n', 'watched', '-f', '-'], { input: configMapYaml('live') });
      await eventually(() => /ADDED\s+live/.test(out));
      await t.kubectl(['delete', 'configmap', 'live', '-n', 'watched']);
      await eventually(() => /DELETED\s+live/.test(out));
    } finally {
      child.kill();
    }
  });

  it('refuses protobuf bodies (kubectl create generators) with a clear 415', async () => {
    const res = await t.kubectl(['create', 'configmap', 'proto', '--from-literal=a=1']);
    expect(res.code).not.toBe(0);
    expect(res.stderr).toContain(
      'does not decode application/vnd.kubernetes.protobuf; use kubectl apply or kubectl create -f',
    );
  });

  it('reports errors the way a real cluster does', async () => {
    const missing = await t.kubectl(['get', 'configmap', 'nope']);
    expect(missing.code).toBe(1);
    expect(missing.stderr.trim()).toBe('Error from server (NotFound): configmaps "nope" not found');
    const unknown = await t.kubectl(['get', 'widgets']);
    expect(unknown.stderr).toContain(`the server doesn't have a resource type "widgets"`);
  });
});
