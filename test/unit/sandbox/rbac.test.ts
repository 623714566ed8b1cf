import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import {
  type AuthorizationAttributes,
  authorize,
  defaultRbacObjects,
  forbiddenError,
  goQuote,
  type PolicyRule,
  rbacObjectsFrom,
  ruleAllows,
} from '../../../src/sandbox/rbac.ts';
import type { KubeObject, UserInfo } from '../../../src/sandbox/types.ts';

const RBAC = 'rbac.authorization.k8s.io';

const user = (username: string, groups: string[] = []): UserInfo => ({ username, groups });

function attrs(overrides: Partial<AuthorizationAttributes> = {}): AuthorizationAttributes {
  return {
    user: user('alice'),
    verb: 'get',
    apiGroup: '',
    resource: 'pods',
    subresource: '',
    namespace: 'ns1',
    name: 'p1',
    resourceRequest: true,
    path: '',
    ...overrides,
  };
}

const nonResource = (path: string, verb = 'get', u = user('alice')): AuthorizationAttributes =>
  attrs({ user: u, verb, path, resourceRequest: false, resource: '', namespace: '', name: '' });

const role = (namespace: string, name: string, rules: PolicyRule[]): KubeObject => ({
  apiVersion: `${RBAC}/v1`,
  kind: 'Role',
  metadata: { name, namespace },
  rules,
});

const clusterRole = (
  name: string,
  rules: PolicyRule[],
  extra: Partial<KubeObject> = {},
  labels?: Record<string, string>,
) => ({
  apiVersion: `${RBAC}/v1`,
  kind: 'ClusterRole',
  metadata: { name, ...(labels ? { labels } : {}) },
  rules,
  ...extra,
});

type SubjectSpec = { kind: string; name: string; namespace?: string };

const roleBinding = (
  namespace: string,
  name: string,
  ref: { kind: string; name: string },
  subjects: SubjectSpec[],
): KubeObject => ({
  apiVersion: `${RBAC}/v1`,
  kind: 'RoleBinding',
  metadata: { name, namespace },
  roleRef: { apiGroup: RBAC, ...ref },
  subjects,
});

const clusterRoleBinding = (
  name: string,
  ref: { kind: string; name: string },
  subjects: SubjectSpec[],
): KubeObject => ({
  apiVersion: `${RBAC}/v1`,
  kind: 'ClusterRoleBinding',
  metadata: { name },
  roleRef: { apiGroup: RBAC, ...ref },
  subjects,
});

/** One ClusterRole with the rules, bound cluster-wide to alice. */
const grant = (...rules: PolicyRule[]) =>
  rbacObjectsFrom([
    clusterRole('r', rules),
    clusterRoleBinding('b', { kind: 'ClusterRole', name: 'r' }, [{ kind: 'User', name: 'alice' }]),
  ]);

describe('authorize: privileged group and defaults', () => {
  it('allows system:masters without any RBAC object', () => {
    const empty = rbacObjectsFrom([]);
    expect(authorize(attrs({ user: user('root', ['system:masters']) }), empty).allowed).toBe(true);
    expect(authorize(attrs({ user: user('root', ['other']) }), empty)).toEqual({
      allowed: false,
      reason: '',
    });
  });

  it('bootstrap policy: discovery and self-review for authenticated users, health for everyone', () => {
    const { clusterRoles, clusterRoleBindings } = defaultRbacObjects();
    const rbac = rbacObjectsFrom([...clusterRoles, ...clusterRoleBindings]);
    const authed = user('bob', ['system:authenticated']);
    const anon = user('system:anonymous', ['system:unauthenticated']);
    expect(authorize(nonResource('/version', 'get', authed), rbac).allowed).toBe(true);
    expect(authorize(nonResource('/apis/apps/v1', 'get', authed), rbac).allowed).toBe(true);
    expect(authorize(nonResource('/openapi/v3', 'get', authed), rbac).allowed).toBe(true);
    expect(authorize(nonResource('/version', 'post', authed), rbac).allowed).toBe(false);
    const ssar = attrs({
      user: authed,
      verb: 'create',
      apiGroup: 'authorization.k8s.io',
      resource: 'selfsubjectaccessreviews',
      namespace: '',
      name: '',
    });
    expect(authorize(ssar, rbac).allowed).toBe(true);
    expect(authorize(attrs({ user: authed, verb: 'list', name: '' }), rbac).allowed).toBe(false);
    expect(authorize(nonResource('/healthz', 'get', anon), rbac).allowed).toBe(true);
    expect(authorize(nonResource('/apis', 'get', anon), rbac).allowed).toBe(false);
  });

  it('cluster-admin grants every resource and non-resource request to whoever it is bound to', () => {
    const { clusterRoles } = defaultRbacObjects();
    const rbac = rbacObjectsFrom([
      ...clusterRoles,
      clusterRoleBinding('root', { kind: 'ClusterRole', name: 'cluster-admin' }, [
        { kind: 'User', name: 'alice' },
      ]),
    ]);
    expect(
      authorize(attrs({ verb: 'escalate', apiGroup: RBAC, resource: 'clusterroles', namespace: '' }), rbac)
        .allowed,
    ).toBe(true);
    expect(authorize(nonResource('/metrics'), rbac).allowed).toBe(true);
    expect(authorize(attrs({ user: user('bob') }), rbac).allowed).toBe(false);
  });
});

describe('rule forms', () => {
  it.each<[string, PolicyRule, Partial<AuthorizationAttributes>, boolean]>([
    ['exact verb', { verbs: ['get'], apiGroups: [''], resources: ['pods'] }, {}, true],
    ['other verb', { verbs: ['list'], apiGroups: [''], resources: ['pods'] }, {}, false],
    ['verb *', { verbs: ['*'], apiGroups: [''], resources: ['pods'] }, { verb: 'impersonate' }, true],
    ['group mismatch', { verbs: ['get'], apiGroups: ['apps'], resources: ['pods'] }, {}, false],
    [
      'group *',
      { verbs: ['get'], apiGroups: ['*'], resources: ['deployments'] },
      { apiGroup: 'apps', resource: 'deployments' },
      true,
    ],
    ['no apiGroups', { verbs: ['get'], resources: ['pods'] }, {}, false],
    ['resource *', { verbs: ['get'], apiGroups: [''], resources: ['*'] }, { resource: 'secrets' }, true],
    [
      'resource * covers subresources',
      { verbs: ['get'], apiGroups: [''], resources: ['*'] },
      { subresource: 'log' },
      true,
    ],
    [
      'parent does not cover subresource',
      { verbs: ['get'], apiGroups: [''], resources: ['pods'] },
      { subresource: 'status' },
      false,
    ],
    [
      'resource/subresource',
      { verbs: ['patch'], apiGroups: [''], resources: ['pods/status'] },
      { verb: 'patch', subresource: 'status' },
      true,
    ],
    [
      'subresource does not cover parent',
      { verbs: ['get'], apiGroups: [''], resources: ['pods/status'] },
      {},
      false,
    ],
    [
      '*/subresource',
      { verbs: ['update'], apiGroups: ['*'], resources: ['*/scale'] },
      { verb: 'update', apiGroup: 'apps', resource: 'deployments', subresource: 'scale' },
      true,
    ],
    [
      '*/subresource other sub',
      { verbs: ['update'], apiGroups: ['*'], resources: ['*/scale'] },
      { verb: 'update', subresource: 'status' },
      false,
    ],
    ['*/subresource without sub', { verbs: ['get'], apiGroups: ['*'], resources: ['*/status'] }, {}, false],
    [
      'resourceNames hit',
      { verbs: ['get'], apiGroups: [''], resources: ['pods'], resourceNames: ['p1'] },
      {},
      true,
    ],
    [
      'resourceNames miss',
      { verbs: ['get'], apiGroups: [''], resources: ['pods'], resourceNames: ['p2'] },
      {},
      false,
    ],
    [
      'resourceNames vs list',
      { verbs: ['list'], apiGroups: [''], resources: ['pods'], resourceNames: ['p1'] },
      { verb: 'list', name: '' },
      false,
    ],
    [
      'resourceNames vs watch',
      { verbs: ['watch'], apiGroups: [''], resources: ['pods'], resourceNames: ['p1'] },
      { verb: 'watch', name: '' },
      false,
    ],
    [
      'resourceNames vs create',
      { verbs: ['create'], apiGroups: [''], resources: ['pods'], resourceNames: ['p1'] },
      { verb: 'create', name: '' },
      false,
    ],
    [
      'resource rule vs non-resource request',
      { verbs: ['*'], apiGroups: ['*'], resources: ['*'] },
      { resourceRequest: false, path: '/healthz' },
      false,
    ],
  ])('%s', (_label, rule, overrides, allowed) => {
    expect(ruleAllows(attrs(overrides), rule)).toBe(allowed);
    expect(authorize(attrs(overrides), grant(rule)).allowed).toBe(allowed);
  });

  it.each<[string, string[], string, boolean]>([
    ['exact path', ['/healthz'], '/healthz', true],
    ['exact path only', ['/healthz'], '/healthz/etcd', false],
    ['prefix *', ['/healthz/*'], '/healthz/etcd', true],
    ['prefix * needs the slash', ['/healthz/*'], '/healthz', false],
    ['*', ['*'], '/anything/at/all', true],
    ['other path', ['/version'], '/metrics', false],
  ])('nonResourceURLs %s', (_label, urls, path, allowed) => {
    expect(authorize(nonResource(path), grant({ verbs: ['get'], nonResourceURLs: urls })).allowed).toBe(
      allowed,
    );
  });

  it('a non-resource rule grants no resource request', () => {
    expect(authorize(attrs(), grant({ verbs: ['*'], nonResourceURLs: ['*'] })).allowed).toBe(false);
  });

  it('property: a rule with resourceNames never allows a request without a name', () => {
    fc.assert(
      fc.property(
        fc.constantFrom('list', 'watch', 'create', 'deletecollection'),
        fc.array(fc.string({ minLength: 1 }), { minLength: 1, maxLength: 4 }),
        (verb, names) => {
          const rule = { verbs: ['*'], apiGroups: ['*'], resources: ['*'], resourceNames: names };
          return !ruleAllows(attrs({ verb, name: '' }), rule);
        },
      ),
    );
  });

  it('property: */* rule allows every resource request, whatever verb, group, resource or name', () => {
    const token = fc.stringMatching(/^[a-z]{0,8}$/);
    fc.assert(
      fc.property(
        token,
        token,
        token,
        token,
        token,
        token,
        (verb, apiGroup, resource, subresource, namespace, name) => {
          const rule = { verbs: ['*'], apiGroups: ['*'], resources: ['*'] };
          return ruleAllows(attrs({ verb, apiGroup, resource, subresource, namespace, name }), rule);
        },
      ),
    );
  });
});

describe('subjects', () => {
  const readPods = clusterRole('read-pods', [{ verbs: ['get'], apiGroups: [''], resources: ['pods'] }]);
  const bindTo = (subjects: SubjectSpec[]) =>
    rbacObjectsFrom([
      readPods,
      clusterRoleBinding('b', { kind: 'ClusterRole', name: 'read-pods' }, subjects),
    ]);

  it('User matches the username only', () => {
    expect(authorize(attrs(), bindTo([{ kind: 'User', name: 'alice' }])).allowed).toBe(true);
    expect(
      authorize(attrs({ user: user('bob', ['alice']) }), bindTo([{ kind: 'User', name: 'alice' }])).allowed,
    ).toBe(false);
  });

  it('Group matches any of the groups', () => {
    const rbac = bindTo([{ kind: 'Group', name: 'devs' }]);
    expect(authorize(attrs({ user: user('bob', ['x', 'devs']) }), rbac).allowed).toBe(true);
    expect(authorize(attrs({ user: user('devs') }), rbac).allowed).toBe(false);
  });

  it('ServiceAccount matches system:serviceaccount:<ns>:<name>', () => {
    const rbac = bindTo([{ kind: 'ServiceAccount', name: 'op', namespace: 'berth' }]);
    expect(authorize(attrs({ user: user('system:serviceaccount:berth:op') }), rbac).allowed).toBe(true);
    expect(authorize(attrs({ user: user('system:serviceaccount:other:op') }), rbac).allowed).toBe(false);
    expect(authorize(attrs({ user: user('op') }), rbac).allowed).toBe(false);
  });

  it('a ServiceAccount without namespace means the RoleBinding namespace, and nothing in a ClusterRoleBinding', () => {
    const sa = user('system:serviceaccount:ns1:op');
    const inRoleBinding = rbacObjectsFrom([
      readPods,
      roleBinding('ns1', 'rb', { kind: 'ClusterRole', name: 'read-pods' }, [
        { kind: 'ServiceAccount', name: 'op' },
      ]),
    ]);
    expect(authorize(attrs({ user: sa }), inRoleBinding).allowed).toBe(true);
    expect(authorize(attrs({ user: sa }), bindTo([{ kind: 'ServiceAccount', name: 'op' }])).allowed).toBe(
      false,
    );
  });

  it('unknown subject kinds match nobody', () => {
    expect(authorize(attrs(), bindTo([{ kind: 'Robot', name: 'alice' }])).allowed).toBe(false);
  });
});

describe('bindings', () => {
  const podReader = [{ verbs: ['get', 'list'], apiGroups: [''], resources: ['pods'] }];

  it('a RoleBinding to a ClusterRole grants its rules only in the binding namespace', () => {
    const rbac = rbacObjectsFrom([
      clusterRole('pod-reader', podReader),
      roleBinding('ns1', 'rb', { kind: 'ClusterRole', name: 'pod-reader' }, [
        { kind: 'User', name: 'alice' },
      ]),
    ]);
    expect(authorize(attrs({ namespace: 'ns1' }), rbac).allowed).toBe(true);
    expect(authorize(attrs({ namespace: 'ns2' }), rbac).allowed).toBe(false);
    // All-namespaces list is a cluster-scope request.
    expect(authorize(attrs({ verb: 'list', namespace: '', name: '' }), rbac).allowed).toBe(false);
  });

  it('never consults RoleBindings for a cluster-scope request (a lister given "" lists every namespace)', () => {
    const asked: string[] = [];
    const base = rbacObjectsFrom([
      clusterRole('pod-reader', podReader),
      roleBinding('ns1', 'rb', { kind: 'ClusterRole', name: 'pod-reader' }, [
        { kind: 'User', name: 'alice' },
      ]),
    ]);
    const allNamespaces = {
      ...base,
      roleBindings: (namespace: string) => {
        asked.push(namespace);
        return base.roleBindings('ns1');
      },
    };
    expect(authorize(attrs({ verb: 'list', namespace: '', name: '' }), allNamespaces).allowed).toBe(false);
    expect(asked).toEqual([]);
    expect(authorize(attrs({ namespace: 'ns1' }), allNamespaces).allowed).toBe(true);
    expect(asked).toEqual(['ns1']);
  });

  it('a RoleBinding to a Role uses the Role of the same namespace', () => {
    const rbac = rbacObjectsFrom([
      role('ns1', 'reader', podReader),
      role('ns2', 'reader', [{ verbs: ['*'], apiGroups: ['*'], resources: ['*'] }]),
      roleBinding('ns1', 'rb', { kind: 'Role', name: 'reader' }, [{ kind: 'User', name: 'alice' }]),
    ]);
    expect(authorize(attrs(), rbac).allowed).toBe(true);
    expect(authorize(attrs({ verb: 'delete' }), rbac).allowed).toBe(false);
    expect(authorize(attrs({ namespace: 'ns2' }), rbac).allowed).toBe(false);
  });

  it('a ClusterRoleBinding grants across namespaces and at the cluster scope', () => {
    const rbac = rbacObjectsFrom([
      clusterRole('pod-reader', podReader),
      clusterRoleBinding('crb', { kind: 'ClusterRole', name: 'pod-reader' }, [
        { kind: 'User', name: 'alice' },
      ]),
    ]);
    expect(authorize(attrs({ namespace: 'anything' }), rbac).allowed).toBe(true);
    expect(authorize(attrs({ verb: 'list', namespace: '', name: '' }), rbac).allowed).toBe(true);
  });

  it('allow reasons name the binding, role and subject as kube logs them', () => {
    const rbac = rbacObjectsFrom([
      role('ns1', 'reader', podReader),
      clusterRole('pod-reader', podReader),
      roleBinding('ns1', 'rb', { kind: 'Role', name: 'reader' }, [{ kind: 'ServiceAccount', name: 'op' }]),
      clusterRoleBinding('crb', { kind: 'ClusterRole', name: 'pod-reader' }, [
        { kind: 'Group', name: 'devs' },
      ]),
    ]);
    expect(authorize(attrs({ user: user('system:serviceaccount:ns1:op') }), rbac).reason).toBe(
      'RBAC: allowed by RoleBinding "rb/ns1" of Role "reader" to ServiceAccount "op/ns1"',
    );
    expect(authorize(attrs({ user: user('bob', ['devs']) }), rbac).reason).toBe(
      'RBAC: allowed by ClusterRoleBinding "crb" of ClusterRole "pod-reader" to Group "devs"',
    );
  });

  it('unresolvable role references become the RBAC reason, de-duplicated', () => {
    const alice = [{ kind: 'User', name: 'alice' }];
    const one = rbacObjectsFrom([clusterRoleBinding('crb', { kind: 'ClusterRole', name: 'missing' }, alice)]);
    expect(authorize(attrs(), one)).toEqual({
      allowed: false,
      reason: 'RBAC: clusterrole.rbac.authorization.k8s.io "missing" not found',
    });
    const several = rbacObjectsFrom([
      clusterRoleBinding('a', { kind: 'ClusterRole', name: 'missing' }, alice),
      clusterRoleBinding('b', { kind: 'ClusterRole', name: 'missing' }, alice),
      // A ClusterRoleBinding cannot reference a Role: it resolves in no namespace.
      clusterRoleBinding('c', { kind: 'Role', name: 'reader' }, alice),
      roleBinding('ns1', 'd', { kind: 'Role', name: 'gone' }, alice),
    ]);
    expect(authorize(attrs(), several).reason).toBe(
      'RBAC: [clusterrole.rbac.authorization.k8s.io "missing" not found, role.rbac.authorization.k8s.io "reader" not found, role.rbac.authorization.k8s.io "gone" not found]',
    );
  });

  it('bindings whose subjects do not apply are not resolved', () => {
    const rbac = rbacObjectsFrom([
      clusterRoleBinding('crb', { kind: 'ClusterRole', name: 'missing' }, [{ kind: 'User', name: 'bob' }]),
    ]);
    expect(authorize(attrs(), rbac)).toEqual({ allowed: false, reason: '' });
  });
});

describe('ClusterRole aggregation', () => {
  const aggregateTo = (label: string) => ({
    aggregationRule: { clusterRoleSelectors: [{ matchLabels: { [label]: 'true' } }] },
  });
  const bindAlice = (roleName: string) =>
    clusterRoleBinding('b', { kind: 'ClusterRole', name: roleName }, [{ kind: 'User', name: 'alice' }]);

  it('grants the union of the rules of the ClusterRoles the selectors match, at authorization time', () => {
    const objects: KubeObject[] = [
      clusterRole('monitoring', [], aggregateTo('example.com/aggregate-to-monitoring')),
      clusterRole(
        'pods',
        [{ verbs: ['get'], apiGroups: [''], resources: ['pods'] }],
        {},
        { 'example.com/aggregate-to-monitoring': 'true' },
      ),
      clusterRole(
        'nodes',
        [{ verbs: ['list'], apiGroups: [''], resources: ['nodes'] }],
        {},
        { 'example.com/aggregate-to-monitoring': 'true' },
      ),
      clusterRole(
        'secrets',
        [{ verbs: ['get'], apiGroups: [''], resources: ['secrets'] }],
        {},
        { other: 'true' },
      ),
      bindAlice('monitoring'),
    ];
    const rbac = rbacObjectsFrom(objects);
    expect(authorize(attrs(), rbac).allowed).toBe(true);
    expect(authorize(attrs({ verb: 'list', resource: 'nodes', namespace: '', name: '' }), rbac).allowed).toBe(
      true,
    );
    expect(authorize(attrs({ resource: 'secrets' }), rbac).allowed).toBe(false);

    // Relabelling a source role takes its rules away immediately.
    const pods = objects[1] as KubeObject;
    pods.metadata.labels = {};
    expect(authorize(attrs(), rbac).allowed).toBe(false);
  });

  it("replaces the aggregated role's own rules, as the aggregation controller does", () => {
    const rbac = rbacObjectsFrom([
      clusterRole('agg', [{ verbs: ['*'], apiGroups: ['*'], resources: ['*'] }], aggregateTo('x')),
      bindAlice('agg'),
    ]);
    expect(authorize(attrs(), rbac).allowed).toBe(false);
  });

  it('follows nested aggregation, tolerates cycles and supports matchExpressions', () => {
    const rbac = rbacObjectsFrom([
      clusterRole('admin', [], aggregateTo('to-admin'), { 'to-loop': 'true' }),
      clusterRole(
        'edit',
        [],
        {
          aggregationRule: {
            clusterRoleSelectors: [{ matchExpressions: [{ key: 'to-edit', operator: 'Exists' }] }],
          },
        },
        { 'to-admin': 'true' },
      ),
      clusterRole(
        'edit-rules',
        [{ verbs: ['update'], apiGroups: ['apps'], resources: ['deployments'] }],
        {},
        { 'to-edit': 'yes' },
      ),
      // A cycle back to admin must not hang.
      clusterRole('loop', [], aggregateTo('to-loop'), { 'to-admin': 'true', 'to-loop': 'true' }),
      clusterRole(
        'broken',
        [],
        {
          aggregationRule: {
            clusterRoleSelectors: [{ matchExpressions: [{ key: 'k', operator: 'Bogus' }] }],
          },
        },
        { 'to-admin': 'true' },
      ),
      bindAlice('admin'),
    ]);
    expect(
      authorize(attrs({ verb: 'update', apiGroup: 'apps', resource: 'deployments' }), rbac).allowed,
    ).toBe(true);
    expect(
      authorize(attrs({ verb: 'delete', apiGroup: 'apps', resource: 'deployments' }), rbac).allowed,
    ).toBe(false);
  });
});

describe('forbiddenError', () => {
  it('namespaced request with a name', () => {
    const err = forbiddenError(attrs({ user: user('u'), namespace: 'ns', name: 'x' }));
    expect(err.code).toBe(403);
    expect(err.reason).toBe('Forbidden');
    expect(err.message).toBe(
      'pods "x" is forbidden: User "u" cannot get resource "pods" in API group "" in the namespace "ns"',
    );
    expect(err.details).toEqual({ name: 'x', kind: 'pods' });
    expect(err.toStatus()).toEqual({
      kind: 'Status',
      apiVersion: 'v1',
      metadata: {},
      status: 'Failure',
      message:
        'pods "x" is forbidden: User "u" cannot get resource "pods" in API group "" in the namespace "ns"',
      reason: 'Forbidden',
      details: { name: 'x', kind: 'pods' },
      code: 403,
    });
  });

  it('cluster-scoped, grouped and subresource requests', () => {
    expect(
      forbiddenError(attrs({ user: user('u'), resource: 'nodes', namespace: '', name: 'n1' })).message,
    ).toBe(
      'nodes "n1" is forbidden: User "u" cannot get resource "nodes" in API group "" at the cluster scope',
    );
    const scale = forbiddenError(
      attrs({
        user: user('u'),
        verb: 'update',
        apiGroup: 'apps',
        resource: 'deployments',
        subresource: 'scale',
        name: 'web',
      }),
    );
    expect(scale.message).toBe(
      'deployments.apps "web" is forbidden: User "u" cannot update resource "deployments/scale" in API group "apps" in the namespace "ns1"',
    );
    expect(scale.details).toEqual({ name: 'web', group: 'apps', kind: 'deployments' });
    expect(
      forbiddenError(attrs({ user: user('u'), verb: 'patch', subresource: 'status', name: 'p' })).message,
    ).toBe(
      'pods "p" is forbidden: User "u" cannot patch resource "pods/status" in API group "" in the namespace "ns1"',
    );
  });

  it('list without a name', () => {
    const err = forbiddenError(
      attrs({ user: user('system:serviceaccount:ns:sa'), verb: 'list', namespace: 'ns', name: '' }),
    );
    expect(err.message).toBe(
      'pods is forbidden: User "system:serviceaccount:ns:sa" cannot list resource "pods" in API group "" in the namespace "ns"',
    );
    expect(err.details).toEqual({ kind: 'pods' });
    expect(
      forbiddenError(
        attrs({
          user: user('u'),
          verb: 'watch',
          apiGroup: 'berth.skaphos.io',
          resource: 'berthleases',
          namespace: '',
          name: '',
        }),
      ).message,
    ).toBe(
      'berthleases.berth.skaphos.io is forbidden: User "u" cannot watch resource "berthleases" in API group "berth.skaphos.io" at the cluster scope',
    );
  });

  it('non-resource request', () => {
    const err = forbiddenError(nonResource('/foo', 'get', user('u')));
    expect(err.message).toBe('forbidden: User "u" cannot get path "/foo"');
    expect(err.details).toEqual({});
  });

  it('appends the authorizer reason and escapes HTML-like text as the apiserver does', () => {
    const err = forbiddenError(
      attrs({ user: user('u'), name: 'x' }),
      'RBAC: clusterrole.rbac.authorization.k8s.io "gone" not found',
    );
    expect(err.message).toBe(
      'pods "x" is forbidden: User "u" cannot get resource "pods" in API group "" in the namespace "ns1": RBAC: clusterrole.rbac.authorization.k8s.io "gone" not found',
    );
    expect(forbiddenError(nonResource('/a', 'get', user('<b>&'))).message).toBe(
      'forbidden: User "&lt;b&gt;&amp;" cannot get path "/a"',
    );
  });

  it('quotes like Go %q', () => {
    expect(goQuote('a"b\\c\nd\te\x01é')).toBe('"a\\"b\\\\c\\nd\\te\\x01é"');
    expect(
      forbiddenError(attrs({ user: user('u'), name: 'we"ird' })).message.startsWith(
        'pods "we\\"ird" is forbidden',
      ),
    ).toBe(true);
  });
});
