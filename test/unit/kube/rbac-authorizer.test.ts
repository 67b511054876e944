import { loadAllYaml } from '@kubernetes/client-node';
import { describe, expect, it } from 'vitest';
import {
  authenticatedGroup,
  mastersGroup,
  RbacAuthorizer,
  requestAttributes,
  serviceAccountUser,
  type RequestAttributes,
  type UserInfo,
} from '../../../functions/local/fake-kube/rbac';

const attributes = (method: string, url: string) => {
  const parsed = new URL(url, 'http://localhost');
  return requestAttributes(method, parsed.pathname, parsed.searchParams);
};

describe('request attributes, as the API server derives them', () => {
  it.each([
    ['GET', '/api/v1/namespaces/default/services/web', 'get', 'services', '', 'default', 'web'],
    ['GET', '/api/v1/namespaces/default/services', 'list', 'services', '', 'default', ''],
    ['GET', '/api/v1/services', 'list', 'services', '', '', ''],
    ['GET', '/api/v1/services?watch=true', 'watch', 'services', '', '', ''],
    ['GET', '/api/v1/nodes?watch=1&resourceVersion=5', 'watch', 'nodes', '', '', ''],
    ['GET', '/api/v1/watch/namespaces/default/services', 'watch', 'services', '', 'default', ''],
    ['GET', '/api/v1/nodes?fieldSelector=metadata.name%3Dn1', 'list', 'nodes', '', '', 'n1'],
    ['POST', '/api/v1/namespaces/default/events', 'create', 'events', '', 'default', ''],
    ['PUT', '/api/v1/nodes/n1', 'update', 'nodes', '', '', 'n1'],
    [
      'PATCH',
      '/api/v1/namespaces/default/services/web/status',
      'patch',
      'services',
      'status',
      'default',
      'web',
    ],
    ['DELETE', '/api/v1/nodes/n1', 'delete', 'nodes', '', '', 'n1'],
    [
      'DELETE',
      '/api/v1/namespaces/default/events',
      'deletecollection',
      'events',
      '',
      'default',
      '',
    ],
    ['GET', '/api/v1/namespaces/default', 'get', 'namespaces', '', 'default', 'default'],
    ['GET', '/apis/apps/v1/namespaces/ns/deployments/d', 'get', 'deployments', '', 'ns', 'd'],
  ])('%s %s is %s of %s/%s in %j named %j', (method, url, verb, resource, sub, ns, name) => {
    const request = attributes(method, url);
    expect(request).toMatchObject({
      isResourceRequest: true,
      verb,
      resource,
      subresource: sub,
      namespace: ns,
      name,
    });
    expect(request.isResourceRequest && request.apiGroup).toBe(
      url.startsWith('/apis/') ? 'apps' : '',
    );
  });

  it.each([
    ['GET', '/version'],
    ['GET', '/api'],
    ['GET', '/api/v1'],
    ['GET', '/apis/apps/v1'],
    ['POST', '/healthz'],
  ])('%s %s is a non-resource request', (method, path) => {
    expect(attributes(method, path)).toEqual({
      isResourceRequest: false,
      verb: method.toLowerCase(),
      path,
    });
  });
});

const manifests = loadAllYaml(`
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata: { name: reader }
rules:
  - apiGroups: ['']
    resources: [services, nodes]
    verbs: [get, list, watch]
  - apiGroups: ['']
    resources: ['*/status']
    verbs: [patch]
  - apiGroups: ['']
    resources: [events]
    resourceNames: [special]
    verbs: ['*']
  - nonResourceURLs: ['/metrics', '/debug/*']
    verbs: [get]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata: { name: reader }
roleRef: { apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: reader }
subjects:
  - { apiGroup: rbac.authorization.k8s.io, kind: Group, name: readers }
  - { kind: ServiceAccount, name: watcher, namespace: tools }
---
apiVersion: rbac.authorization.k8s.io/v1
kind: Role
metadata: { name: editor, namespace: team }
rules:
  - apiGroups: ['', apps]
    resources: [services, deployments]
    verbs: [create, update, delete]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: RoleBinding
metadata: { name: editor, namespace: team }
roleRef: { apiGroup: rbac.authorization.k8s.io, kind: Role, name: editor }
subjects:
  - { apiGroup: rbac.authorization.k8s.io, kind: User, name: alice }
---
apiVersion: rbac.authorization.k8s.io/v1
kind: RoleBinding
metadata: { name: reader-in-team, namespace: team }
roleRef: { apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: reader }
subjects:
  - { kind: ServiceAccount, name: bot }
---
apiVersion: v1
kind: ServiceAccount
metadata: { name: ignored }
`) as unknown[];

const rbac = new RbacAuthorizer(manifests);
const reader: UserInfo = { name: 'reader-1', groups: ['readers', authenticatedGroup] };
const alice: UserInfo = { name: 'alice', groups: [authenticatedGroup] };
const watcher = serviceAccountUser('tools', 'watcher');
const bot = serviceAccountUser('team', 'bot');
const allowed = (user: UserInfo, method: string, url: string) =>
  rbac.authorize(user, attributes(method, url)).allowed;

describe('RbacAuthorizer', () => {
  it('gives a ServiceAccount its user name and groups', () => {
    expect(watcher).toEqual({
      name: 'system:serviceaccount:tools:watcher',
      groups: ['system:serviceaccounts', 'system:serviceaccounts:tools', authenticatedGroup],
    });
  });

  it('grants a ClusterRoleBinding to its Group and ServiceAccount subjects in every namespace and cluster-wide', () => {
    for (const user of [reader, watcher]) {
      expect(allowed(user, 'GET', '/api/v1/services?watch=true')).toBe(true);
      expect(allowed(user, 'GET', '/api/v1/namespaces/x/services/web')).toBe(true);
      expect(allowed(user, 'GET', '/api/v1/nodes')).toBe(true);
    }
    expect(allowed(alice, 'GET', '/api/v1/nodes')).toBe(false);
    expect(allowed(serviceAccountUser('other', 'watcher'), 'GET', '/api/v1/nodes')).toBe(false);
  });

  it('matches verbs exactly or by *, and denies every verb not listed', () => {
    expect(allowed(reader, 'PATCH', '/api/v1/namespaces/x/services/web')).toBe(false);
    expect(allowed(reader, 'DELETE', '/api/v1/nodes/n1')).toBe(false);
    expect(allowed(reader, 'DELETE', '/api/v1/namespaces/x/events/special')).toBe(true);
  });

  it('matches a subresource only by resource/subresource or */subresource, never by the bare resource', () => {
    expect(allowed(reader, 'PATCH', '/api/v1/namespaces/x/services/web/status')).toBe(true);
    expect(allowed(reader, 'PATCH', '/api/v1/nodes/n1/status')).toBe(true);
    expect(allowed(reader, 'GET', '/api/v1/namespaces/x/services/web/status')).toBe(false);
  });

  it('limits a rule with resourceNames to those names (so never to a list or create)', () => {
    expect(allowed(reader, 'GET', '/api/v1/namespaces/x/events/special')).toBe(true);
    expect(allowed(reader, 'GET', '/api/v1/namespaces/x/events/other')).toBe(false);
    expect(allowed(reader, 'POST', '/api/v1/namespaces/x/events')).toBe(false);
    expect(
      allowed(reader, 'GET', '/api/v1/namespaces/x/events?fieldSelector=metadata.name%3Dspecial'),
    ).toBe(true);
  });

  it('grants a RoleBinding only in its namespace, for the API groups its rules name', () => {
    expect(allowed(alice, 'POST', '/api/v1/namespaces/team/services')).toBe(true);
    expect(allowed(alice, 'DELETE', '/apis/apps/v1/namespaces/team/deployments/d')).toBe(true);
    expect(allowed(alice, 'POST', '/api/v1/namespaces/other/services')).toBe(false);
    expect(allowed(alice, 'POST', '/apis/batch/v1/namespaces/team/services')).toBe(false);
    // A ClusterRole bound in a namespace (the subject's namespace defaulting to the binding's).
    expect(allowed(bot, 'GET', '/api/v1/namespaces/team/services/web')).toBe(true);
    expect(allowed(bot, 'GET', '/api/v1/namespaces/other/services/web')).toBe(false);
    expect(allowed(bot, 'GET', '/api/v1/nodes')).toBe(false);
  });

  it('grants non-resource URLs by exact path or prefix*, only through ClusterRoleBindings', () => {
    expect(allowed(reader, 'GET', '/metrics')).toBe(true);
    expect(allowed(reader, 'GET', '/debug/pprof')).toBe(true);
    expect(allowed(reader, 'GET', '/metrics/x')).toBe(false);
    expect(allowed(bot, 'GET', '/metrics')).toBe(false);
  });

  it('has the bootstrap policy: system:masters may do anything, every authenticated user may discover', () => {
    const admin: UserInfo = { name: 'root', groups: [mastersGroup] };
    expect(allowed(admin, 'DELETE', '/apis/apps/v1/namespaces/a/deployments')).toBe(true);
    expect(allowed(admin, 'GET', '/anything')).toBe(true);
    expect(allowed(alice, 'GET', '/api/v1')).toBe(true);
    expect(allowed(alice, 'GET', '/version')).toBe(true);
    expect(allowed({ name: 'anonymous', groups: [] }, 'GET', '/version')).toBe(false);
  });

  it('words a denial as the API server does', () => {
    const message = (user: UserInfo, method: string, url: string) => {
      const decision = rbac.authorize(user, attributes(method, url));
      return decision.allowed ? 'allowed' : decision.message;
    };
    expect(message(watcher, 'PUT', '/api/v1/namespaces/default/services/web/status')).toBe(
      'services "web" is forbidden: User "system:serviceaccount:tools:watcher" cannot update resource "services/status" in API group "" in the namespace "default"',
    );
    expect(message(alice, 'GET', '/api/v1/nodes')).toBe(
      'nodes is forbidden: User "alice" cannot list resource "nodes" in API group "" at the cluster scope',
    );
    expect(message(bot, 'GET', '/apis/apps/v1/namespaces/team/deployments/d')).toBe(
      'deployments.apps "d" is forbidden: User "system:serviceaccount:team:bot" cannot get resource "deployments" in API group "apps" in the namespace "team"',
    );
    expect(message(alice, 'GET', '/metrics')).toBe(
      'forbidden: User "alice" cannot get path "/metrics"',
    );
  });

  it('refuses manifests a cluster would not honour: a binding to an undefined role, a ServiceAccount subject without namespace', () => {
    const binding = (roleRef: object, subjects: object[] = []) => ({
      apiVersion: 'rbac.authorization.k8s.io/v1',
      kind: 'ClusterRoleBinding',
      metadata: { name: 'b' },
      roleRef,
      subjects,
    });
    expect(
      () =>
        new RbacAuthorizer([
          binding({ apiGroup: 'rbac.authorization.k8s.io', kind: 'ClusterRole', name: 'nope' }),
        ]),
    ).toThrow(/refers to ClusterRole nope, which is not defined/);
    expect(
      () =>
        new RbacAuthorizer([
          binding(
            { apiGroup: 'rbac.authorization.k8s.io', kind: 'ClusterRole', name: 'cluster-admin' },
            [{ kind: 'ServiceAccount', name: 'x' }],
          ),
        ]),
    ).toThrow(/needs a namespace/);
  });

  it('denies everything to everyone but the bootstrap subjects when given no manifests', () => {
    const empty = new RbacAuthorizer([]);
    const request: RequestAttributes = attributes('GET', '/api/v1/services');
    expect(empty.authorize(reader, request).allowed).toBe(false);
    expect(empty.authorize({ name: 'x', groups: [mastersGroup] }, request).allowed).toBe(true);
  });
});
