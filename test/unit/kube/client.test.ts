import { mkdir, mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { delimiter, join } from 'node:path';
import { ApiException } from '@kubernetes/client-node';
import { afterEach, describe, expect, it } from 'vitest';
import {
  chooseKubeConfig,
  describeError,
  isAlreadyExists,
  isConflict,
  isGone,
  isNotFound,
  isTooManyRequests,
  KubeApiError,
  loadKubeConfig,
  readJson,
  resourcePath,
  retryAfterSeconds,
  statusCodeOf,
  statusOf,
} from '../../../src/kube/client.ts';

const status = (code: number, reason: string, extra: Record<string, unknown> = {}): string =>
  JSON.stringify({
    kind: 'Status',
    apiVersion: 'v1',
    status: 'Failure',
    code,
    reason,
    message: `m${code}`,
    ...extra,
  });

describe('chooseKubeConfig', () => {
  it('prefers --kubeconfig, then KUBECONFIG, then in-cluster, then ~/.kube/config', () => {
    const all = { flag: '/f', env: `/e1${delimiter}/e2`, inCluster: true, homeConfig: '/h' };
    expect(chooseKubeConfig(all)).toEqual({ source: 'flag', paths: ['/f'] });
    expect(chooseKubeConfig({ ...all, flag: '' })).toEqual({ source: 'env', paths: ['/e1', '/e2'] });
    expect(chooseKubeConfig({ ...all, flag: undefined, env: '' })).toEqual({ source: 'in-cluster' });
    expect(chooseKubeConfig({ inCluster: false, homeConfig: '/h' })).toEqual({
      source: 'home',
      paths: ['/h'],
    });
    expect(chooseKubeConfig({ inCluster: false })).toBeUndefined();
  });
});

describe('loadKubeConfig', () => {
  let dir: string;
  afterEach(async () => {
    if (dir) await rm(dir, { recursive: true, force: true });
  });

  const kubeconfig = (name: string, server: string, namespace?: string): string =>
    JSON.stringify({
      apiVersion: 'v1',
      kind: 'Config',
      clusters: [{ name, cluster: { server } }],
      users: [{ name, user: { token: `secret-token-${name}` } }],
      contexts: [{ name, context: { cluster: name, user: name, ...(namespace ? { namespace } : {}) } }],
      'current-context': name,
    });

  it('loads the --kubeconfig file and reports the context namespace', async () => {
    dir = await mkdtemp(join(tmpdir(), 'kc-'));
    await writeFile(join(dir, 'a'), kubeconfig('a', 'https://a.example:6443', 'team-a'));
    const loaded = loadKubeConfig({ kubeconfig: join(dir, 'a'), env: {}, home: dir });
    expect(loaded.source).toBe('flag');
    expect(loaded.kc.getCurrentCluster()?.server).toBe('https://a.example:6443');
    expect(loaded.namespace).toBe('team-a');
  });

  it('merges several KUBECONFIG files, the first one setting the current context', async () => {
    dir = await mkdtemp(join(tmpdir(), 'kc-'));
    await writeFile(join(dir, 'a'), kubeconfig('a', 'https://a.example'));
    await writeFile(join(dir, 'b'), kubeconfig('b', 'https://b.example'));
    const loaded = loadKubeConfig({
      env: { KUBECONFIG: `${join(dir, 'a')}${delimiter}${join(dir, 'b')}` },
      home: dir,
    });
    expect(loaded.source).toBe('env');
    expect(loaded.kc.getCurrentCluster()?.server).toBe('https://a.example');
    const other = loadKubeConfig({
      env: { KUBECONFIG: `${join(dir, 'a')}${delimiter}${join(dir, 'b')}` },
      home: dir,
      context: 'b',
    });
    expect(other.kc.getCurrentCluster()?.server).toBe('https://b.example');
    expect(() => loadKubeConfig({ kubeconfig: join(dir, 'a'), env: {}, home: dir, context: 'nope' })).toThrow(
      /context "nope" not found/,
    );
  });

  it('uses the in-cluster service account when KUBERNETES_SERVICE_HOST is set, before ~/.kube/config', async () => {
    dir = await mkdtemp(join(tmpdir(), 'kc-'));
    const sa = join(dir, 'sa');
    await mkdir(sa);
    await writeFile(join(sa, 'token'), 'tok');
    await mkdir(join(dir, '.kube'));
    await writeFile(join(dir, '.kube', 'config'), kubeconfig('home', 'https://home.example'));
    const env = { KUBERNETES_SERVICE_HOST: 'fd00::1', KUBERNETES_SERVICE_PORT: '443' };
    const loaded = loadKubeConfig({ env, home: dir, serviceAccountDir: sa });
    expect(loaded.source).toBe('in-cluster');
    expect(loaded.kc.getCurrentCluster()?.server).toBe('https://[fd00::1]:443');
    expect(loaded.kc.getCurrentCluster()?.caFile).toBe(join(sa, 'ca.crt'));
    expect(loadKubeConfig({ env: {}, home: dir, serviceAccountDir: sa }).source).toBe('home');
  });

  it('fails clearly when nothing is configured, and never echoes file content', async () => {
    dir = await mkdtemp(join(tmpdir(), 'kc-'));
    expect(() => loadKubeConfig({ env: {}, home: dir, serviceAccountDir: join(dir, 'none') })).toThrow(
      /no Kubernetes configuration/,
    );
    await writeFile(join(dir, 'bad'), 'users: [ {token: "super-secret-value" ');
    let message = '';
    try {
      loadKubeConfig({ kubeconfig: join(dir, 'bad'), env: {}, home: dir });
    } catch (err) {
      message = (err as Error).message;
    }
    expect(message).toMatch(/cannot load kubeconfig/);
    expect(message).not.toContain('super-secret-value');
  });
});

describe('error helpers', () => {
  it('parse the raw-text body of client-node ApiException into a Status', () => {
    const err = new ApiException(409, 'Conflict', status(409, 'Conflict'), {
      'x-kubernetes-pf-flowschema-uid': 'x',
    });
    expect(statusOf(err)).toMatchObject({ code: 409, reason: 'Conflict', message: 'm409' });
    expect(isConflict(err)).toBe(true);
    expect(isAlreadyExists(err)).toBe(false);
    const exists = new ApiException(409, 'Conflict', status(409, 'AlreadyExists'), {});
    expect(isAlreadyExists(exists)).toBe(true);
    expect(isConflict(exists)).toBe(false);
  });

  it('classify by code when the body is not a Status', () => {
    const err = new ApiException(404, 'Not Found', '<html>404 page not found</html>', {});
    expect(isNotFound(err)).toBe(true);
    expect(statusOf(err)).toMatchObject({ code: 404, reason: 'NotFound' });
    expect(isGone(new ApiException(410, 'Gone', '', {}))).toBe(true);
    expect(isTooManyRequests(new ApiException(429, '', status(429, 'TooManyRequests'), {}))).toBe(true);
  });

  it('handle KubeApiError, watch ERROR Status objects and non-API errors', () => {
    expect(isGone(new KubeApiError(410, { code: 410, reason: 'Expired' }))).toBe(true);
    expect(statusCodeOf(new TypeError('fetch failed'))).toBeUndefined();
    expect(isNotFound(new Error('x'))).toBe(false);
    expect(statusOf(undefined)).toBeUndefined();
    const nodeErr = Object.assign(new Error('connect'), { code: 'ECONNREFUSED' });
    expect(statusOf(nodeErr)).toBeUndefined();
  });

  it('read Retry-After from Status details or the header', () => {
    expect(
      retryAfterSeconds(
        new ApiException(429, '', status(429, 'TooManyRequests', { details: { retryAfterSeconds: 3 } }), {}),
      ),
    ).toBe(3);
    expect(retryAfterSeconds(new ApiException(503, '', '', { 'Retry-After': '7' }))).toBe(7);
    expect(retryAfterSeconds(new ApiException(500, '', '', {}))).toBeUndefined();
  });

  it('describe errors in one line without headers or bodies beyond the Status message', () => {
    const err = new ApiException(403, 'Forbidden', status(403, 'Forbidden'), {
      authorization: 'Bearer abc.def.ghi',
    });
    expect(describeError(err)).toBe('403 Forbidden: m403');
    expect(describeError(new TypeError('fetch failed', { cause: new Error('ECONNRESET') }))).toBe(
      'TypeError: fetch failed (ECONNRESET)',
    );
  });

  it('readJson throws KubeApiError for non-2xx answers', async () => {
    const res = (code: number, text: string) => ({
      status: code,
      headers: { 'retry-after': '2' },
      text: async () => text,
      stream: () => null,
    });
    await expect(readJson(res(200, '{"a":1}'))).resolves.toEqual({ a: 1 });
    const err = await readJson(res(429, status(429, 'TooManyRequests'))).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(KubeApiError);
    expect(isTooManyRequests(err)).toBe(true);
    expect(retryAfterSeconds(err)).toBe(2);
  });
});

describe('resourcePath', () => {
  it('builds core, group, namespaced and cluster-wide paths', () => {
    expect(resourcePath({ version: 'v1', plural: 'pods', namespace: 'ns' })).toBe(
      '/api/v1/namespaces/ns/pods',
    );
    expect(resourcePath({ version: 'v1', plural: 'nodes' })).toBe('/api/v1/nodes');
    expect(resourcePath({ group: 'apps', version: 'v1', plural: 'deployments' })).toBe(
      '/apis/apps/v1/deployments',
    );
    expect(
      resourcePath({ group: 'berth.skaphos.io', version: 'v1alpha1', plural: 'berthleases', namespace: 'x' }),
    ).toBe('/apis/berth.skaphos.io/v1alpha1/namespaces/x/berthleases');
  });
});
