import { spawnSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { KubeConfig } from '@kubernetes/client-node';
import { describe, expect, it } from 'vitest';
import { cacheKey, cacheRoot, pinnedVersions } from '../../../hack/controlplane/build.ts';
import { kubeconfigYaml } from '../../../hack/controlplane/controlplane.ts';
import { createAuthority } from '../../../hack/controlplane/pki.ts';
import { acquireLock, refusedModule } from '../../../hack/gobuild.ts';

describe('the control-plane build', () => {
  it('reads the pinned versions from the Go modules', () => {
    const v = pinnedVersions();
    expect(v.kubernetes).toMatch(/^v1\.36\.\d+$/);
    expect(v.etcd).toMatch(/^v3\.6\.\d+$/);
    expect(v.kwok).toMatch(/^v0\.8\.\d+$/);
  });

  it('keys the cache by the pins, readably', () => {
    const v = pinnedVersions();
    expect(cacheKey(v)).toBe(cacheKey(v));
    expect(cacheKey(v)).toMatch(
      new RegExp(`^k8s-${v.kubernetes}_etcd-${v.etcd}_kwok-${v.kwok}_[0-9a-f]{12}$`),
    );
    expect(cacheKey({ ...v, kubernetes: 'v1.36.99' })).not.toBe(cacheKey(v));
  });

  it('keeps the cache outside the checkout: $BERTH_CONTROLPLANE_CACHE, else the XDG cache', () => {
    expect(cacheRoot({ BERTH_CONTROLPLANE_CACHE: '/c' })).toBe('/c');
    expect(cacheRoot({ XDG_CACHE_HOME: '/x' })).toBe('/x/berth-operator/controlplane');
  });

  it.each([
    [
      'go: k8s.io/cri-streaming@v0.36.3: reading https://proxy.golang.org/k8s.io/cri-streaming/@v/v0.36.3.mod: 404 Not Found',
      'k8s.io/cri-streaming@v0.36.3 (404 Not Found)',
    ],
    [
      'go: downloading k8s.io/api v0.36.3\nverifying k8s.io/api@v0.36.3: checksum mismatch',
      'k8s.io/api@v0.36.3 (checksum mismatch)',
    ],
    [
      'k8s.io/kubernetes/cmd/kube-apiserver imports\n\tgo.etcd.io/etcd/client/v3@v3.6.8: Get "https://proxy.golang.org/go.etcd.io/etcd/client/v3/@v/v3.6.8.zip": dial tcp: lookup proxy.golang.org: no such host',
      'go.etcd.io/etcd/client/v3@v3.6.8 (no such host)',
    ],
  ])('names the module the proxy refused: %s', (output, expected) => {
    expect(refusedModule(output)).toBe(expected);
  });

  it('finds no refused module in other failures', () => {
    expect(refusedModule('# k8s.io/kubernetes/pkg/x\n./x.go:1:1: syntax error')).toBeUndefined();
  });
});

describe('the build lock', () => {
  it('makes a second build wait for the first, and says so', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'berth-lock-'));
    try {
      const lines: string[] = [];
      const first = await acquireLock(join(dir, 'key.lock'), (l) => lines.push(l));
      let secondHeld = false;
      const second = acquireLock(join(dir, 'key.lock'), (l) => lines.push(l)).then((release) => {
        secondHeld = true;
        return release;
      });
      await new Promise((r) => setTimeout(r, 50));
      expect(secondHeld).toBe(false);
      expect(lines).toEqual([expect.stringMatching(/^waiting for the build running in process \d+/)]);
      first();
      (await second)();
      expect(secondHeld).toBe(true);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it('takes over the lock of a build whose process died', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'berth-lock-'));
    try {
      const dead = spawnSync('true').pid;
      mkdirSync(join(dir, 'key.lock'));
      writeFileSync(join(dir, 'key.lock', 'pid'), String(dead));
      const lines: string[] = [];
      const release = await acquireLock(join(dir, 'key.lock'), (l) => lines.push(l));
      expect(lines).toEqual([`removing the stale build lock of process ${dead}`]);
      release();
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});

describe('control-plane credentials', () => {
  it('writes kubeconfigs client-node and kubectl read: a certificate user and a token user', async () => {
    const ca = await createAuthority('unit-ca');
    const pair = await ca.client('alice', ['team-a', 'team-b']);
    for (const auth of [pair, { token: 'abc' }]) {
      const kc = new KubeConfig();
      kc.loadFromString(kubeconfigYaml('https://127.0.0.1:6443', ca.cert, 'alice', auth));
      expect(kc.getCurrentCluster()?.server).toBe('https://127.0.0.1:6443');
      expect(kc.getCurrentUser()?.name).toBe('alice');
      if ('token' in auth) expect(kc.getCurrentUser()?.token).toBe('abc');
      else expect(Buffer.from(kc.getCurrentUser()?.certData ?? '', 'base64').toString()).toBe(pair.cert);
    }
  });

  it('puts the user in CN and each group in O, and refuses names that would split the subject', async () => {
    const { X509Certificate } = await import('node:crypto');
    const ca = await createAuthority('unit-ca');
    const pair = await ca.client('system:serviceaccount:ns:sa', ['system:masters', 'team-a']);
    const subject = new X509Certificate(pair.cert).subject.split('\n');
    expect(subject).toEqual(['O=system:masters', 'O=team-a', 'CN=system:serviceaccount:ns:sa']);
    await expect(ca.client('a,O=system:masters')).rejects.toThrow(
      /cannot be written into a certificate subject/,
    );
  });
});
