import type {
  V1ClusterRole,
  V1ClusterRoleBinding,
  V1PolicyRule,
  V1Role,
  V1RoleBinding,
  RbacV1Subject,
} from '@kubernetes/client-node';

/** Who a request is from, as an authenticator tells the authorizer. */
export interface UserInfo {
  readonly name: string;
  readonly groups: readonly string[];
}

export const authenticatedGroup = 'system:authenticated';
/** Kubernetes binds this group to cluster-admin: its members may do anything. */
export const mastersGroup = 'system:masters';

/** The identity Kubernetes gives a ServiceAccount's tokens. */
export function serviceAccountUser(namespace: string, name: string): UserInfo {
  return {
    name: `system:serviceaccount:${namespace}:${name}`,
    groups: ['system:serviceaccounts', `system:serviceaccounts:${namespace}`, authenticatedGroup],
  };
}

/** What the API server's request-info filter makes of a request, for the authorizer. */
export type RequestAttributes =
  | {
      readonly isResourceRequest: true;
      readonly verb: string;
      readonly apiGroup: string;
      readonly resource: string;
      readonly subresource: string;
      /** '' for a cluster-scoped request. */
      readonly namespace: string;
      /** '' for a collection. */
      readonly name: string;
      readonly path: string;
    }
  | { readonly isResourceRequest: false; readonly verb: string; readonly path: string };

const truthy = new Set(['1', 't', 'T', 'TRUE', 'true', 'True']);

/**
 * Request attributes as Kubernetes derives them (apiserver's RequestInfoFactory): `/api/v1/…` and
 * `/apis/<group>/<version>/…` are resource requests, anything shorter or elsewhere a non-resource
 * one; GET of a collection is list or, with `watch`, watch; DELETE of a collection is
 * deletecollection; a `/watch/` path prefix is watch; a list narrowed to one name by
 * `fieldSelector=metadata.name=…` carries that name (so resourceNames rules apply).
 */
export function requestAttributes(
  method: string,
  pathname: string,
  query: URLSearchParams,
): RequestAttributes {
  const nonResource: RequestAttributes = {
    isResourceRequest: false,
    verb: method.toLowerCase(),
    path: pathname,
  };
  let parts = pathname.split('/').filter(Boolean).map(decodeURIComponent);
  if (parts.length < 3 || (parts[0] !== 'api' && parts[0] !== 'apis')) return nonResource;
  let apiGroup = '';
  if (parts[0] === 'apis') {
    if (parts.length < 4) return nonResource;
    apiGroup = parts[1] ?? '';
    parts = parts.slice(3);
  } else {
    parts = parts.slice(2);
  }
  let verb: string;
  if (parts[0] === 'watch' || parts[0] === 'proxy') {
    verb = parts[0];
    parts = parts.slice(1);
  } else {
    const byMethod: Record<string, string> = {
      POST: 'create',
      GET: 'get',
      HEAD: 'get',
      PUT: 'update',
      PATCH: 'patch',
      DELETE: 'delete',
    };
    verb = byMethod[method.toUpperCase()] ?? '';
  }
  let namespace = '';
  if (parts[0] === 'namespaces' && parts.length > 1) {
    namespace = parts[1] ?? '';
    // `namespaces/<ns>/status` and `/finalize` are the Namespace's own subresources.
    if (parts.length > 2 && parts[2] !== 'status' && parts[2] !== 'finalize')
      parts = parts.slice(2);
  }
  const [resource = '', partName = '', partSubresource = ''] = parts;
  let name = partName;
  const subresource = verb === 'proxy' ? '' : partSubresource;
  if (name === '' && verb === 'get') {
    verb = truthy.has(query.get('watch') ?? '') ? 'watch' : 'list';
    name = exactName(query.get('fieldSelector')) ?? '';
  }
  if (name === '' && verb === 'delete') verb = 'deletecollection';
  return {
    isResourceRequest: true,
    verb,
    apiGroup,
    resource,
    subresource,
    namespace,
    name,
    path: pathname,
  };
}

function exactName(fieldSelector: string | null): string | undefined {
  for (const term of (fieldSelector ?? '').split(',')) {
    const match = /^metadata\.name(?:==|=)(.+)$/.exec(term.trim());
    if (match) return match[1];
  }
  return undefined;
}

export type Decision = { readonly allowed: true } | { readonly allowed: false; message: string };

export type RbacObject = V1ClusterRole | V1ClusterRoleBinding | V1Role | V1RoleBinding;

/** Is `object` one of the four RBAC kinds (by kind and API group)? */
export function isRbacObject(object: unknown): object is RbacObject {
  if (typeof object !== 'object' || object === null) return false;
  const { apiVersion, kind } = object as { apiVersion?: unknown; kind?: unknown };
  return (
    apiVersion === 'rbac.authorization.k8s.io/v1' &&
    (kind === 'ClusterRole' ||
      kind === 'ClusterRoleBinding' ||
      kind === 'Role' ||
      kind === 'RoleBinding')
  );
}

/**
 * The part of Kubernetes' bootstrap policy a client of this project meets: cluster-admin for
 * system:masters (the fake server's admin) and discovery for every authenticated user.
 */
const bootstrapPolicy: RbacObject[] = [
  {
    apiVersion: 'rbac.authorization.k8s.io/v1',
    kind: 'ClusterRole',
    metadata: { name: 'cluster-admin' },
    rules: [
      { apiGroups: ['*'], resources: ['*'], verbs: ['*'] },
      { nonResourceURLs: ['*'], verbs: ['*'] },
    ],
  },
  {
    apiVersion: 'rbac.authorization.k8s.io/v1',
    kind: 'ClusterRoleBinding',
    metadata: { name: 'cluster-admin' },
    roleRef: { apiGroup: 'rbac.authorization.k8s.io', kind: 'ClusterRole', name: 'cluster-admin' },
    subjects: [{ apiGroup: 'rbac.authorization.k8s.io', kind: 'Group', name: mastersGroup }],
  },
  {
    apiVersion: 'rbac.authorization.k8s.io/v1',
    kind: 'ClusterRole',
    metadata: { name: 'system:discovery' },
    rules: [
      {
        nonResourceURLs: [
          '/api',
          '/api/*',
          '/apis',
          '/apis/*',
          '/openapi',
          '/openapi/*',
          '/version',
          '/version/',
        ],
        verbs: ['get'],
      },
    ],
  },
  {
    apiVersion: 'rbac.authorization.k8s.io/v1',
    kind: 'ClusterRoleBinding',
    metadata: { name: 'system:discovery' },
    roleRef: {
      apiGroup: 'rbac.authorization.k8s.io',
      kind: 'ClusterRole',
      name: 'system:discovery',
    },
    subjects: [{ apiGroup: 'rbac.authorization.k8s.io', kind: 'Group', name: authenticatedGroup }],
  },
];

/**
 * Kubernetes RBAC over a fixed set of Roles, ClusterRoles and their bindings (plus the bootstrap
 * policy above), deciding as the API server's RBAC authorizer does: a request is allowed when a
 * rule of a role bound to the user (by User, Group or ServiceAccount subject) matches its verb,
 * API group, resource (`*`, `<resource>`, `<resource>/<subresource>`, or `*` before
 * `/<subresource>`) and name (resourceNames), or its path for a non-resource request.
 * ClusterRoleBindings grant everywhere; RoleBindings only in their namespace. Anything not allowed
 * is denied.
 */
export class RbacAuthorizer {
  private readonly clusterRoles = new Map<string, V1PolicyRule[]>();
  private readonly roles = new Map<string, V1PolicyRule[]>();
  private readonly clusterBindings: V1ClusterRoleBinding[] = [];
  private readonly bindings: V1RoleBinding[] = [];

  /** `objects` may hold other kinds too; they are ignored. */
  constructor(objects: readonly unknown[], options: { bootstrapPolicy?: boolean } = {}) {
    const all = [...(options.bootstrapPolicy === false ? [] : bootstrapPolicy), ...objects];
    for (const object of all.filter(isRbacObject)) {
      const name = object.metadata?.name ?? '';
      const namespace = object.metadata?.namespace ?? '';
      switch (object.kind) {
        case 'ClusterRole': {
          const role = object as V1ClusterRole;
          // Aggregated roles get their rules from a controller that is not simulated here.
          if (role.aggregationRule !== undefined) {
            throw new Error(`ClusterRole ${name}: aggregationRule is not supported`);
          }
          this.clusterRoles.set(name, role.rules ?? []);
          break;
        }
        case 'Role':
          this.requireNamespace(object.kind, name, namespace);
          this.roles.set(`${namespace}/${name}`, (object as V1Role).rules ?? []);
          break;
        case 'ClusterRoleBinding':
          this.clusterBindings.push(object as V1ClusterRoleBinding);
          break;
        case 'RoleBinding':
          this.requireNamespace(object.kind, name, namespace);
          this.bindings.push(object as V1RoleBinding);
          break;
      }
    }
    // A binding to a role nobody defined grants nothing in a cluster, silently: here it is a
    // manifest bug, so say so at once.
    for (const binding of this.clusterBindings) {
      const ref = binding.roleRef;
      if (ref.kind !== 'ClusterRole' || !this.clusterRoles.has(ref.name)) {
        throw new Error(
          `ClusterRoleBinding ${binding.metadata?.name ?? ''} refers to ${ref.kind} ${ref.name}, which is not defined`,
        );
      }
      for (const subject of binding.subjects ?? []) {
        if (subject.kind === 'ServiceAccount' && !subject.namespace) {
          throw new Error(
            `ClusterRoleBinding ${binding.metadata?.name ?? ''}: ServiceAccount subject ${subject.name} needs a namespace`,
          );
        }
      }
    }
    for (const binding of this.bindings) {
      if (this.rulesOf(binding) === undefined) {
        throw new Error(
          `RoleBinding ${binding.metadata?.namespace ?? ''}/${binding.metadata?.name ?? ''} refers to ${binding.roleRef.kind} ${binding.roleRef.name}, which is not defined`,
        );
      }
    }
  }

  authorize(user: UserInfo, request: RequestAttributes): Decision {
    const applicable: V1PolicyRule[] = [];
    for (const binding of this.clusterBindings) {
      if (binding.subjects?.some((s) => appliesTo(s, user, ''))) {
        applicable.push(...(this.clusterRoles.get(binding.roleRef.name) ?? []));
      }
    }
    if (request.isResourceRequest && request.namespace !== '') {
      for (const binding of this.bindings) {
        const namespace = binding.metadata?.namespace ?? '';
        if (namespace !== request.namespace) continue;
        if (binding.subjects?.some((s) => appliesTo(s, user, namespace))) {
          applicable.push(...(this.rulesOf(binding) ?? []));
        }
      }
    }
    if (applicable.some((rule) => ruleAllows(rule, request))) return { allowed: true };
    return { allowed: false, message: forbiddenMessage(user, request) };
  }

  private rulesOf(binding: V1RoleBinding): V1PolicyRule[] | undefined {
    const ref = binding.roleRef;
    if (ref.kind === 'ClusterRole') return this.clusterRoles.get(ref.name);
    if (ref.kind === 'Role')
      return this.roles.get(`${binding.metadata?.namespace ?? ''}/${ref.name}`);
    return undefined;
  }

  private requireNamespace(kind: string, name: string, namespace: string): void {
    if (namespace === '') throw new Error(`${kind} ${name} has no namespace`);
  }
}

function appliesTo(subject: RbacV1Subject, user: UserInfo, bindingNamespace: string): boolean {
  switch (subject.kind) {
    case 'User':
      return subject.name === user.name;
    case 'Group':
      return user.groups.includes(subject.name);
    case 'ServiceAccount': {
      const namespace = subject.namespace || bindingNamespace;
      return namespace !== '' && serviceAccountUser(namespace, subject.name).name === user.name;
    }
    default:
      return false;
  }
}

function ruleAllows(rule: V1PolicyRule, request: RequestAttributes): boolean {
  if (!rule.verbs.includes('*') && !rule.verbs.includes(request.verb)) return false;
  if (!request.isResourceRequest) {
    return (rule.nonResourceURLs ?? []).some(
      (url) =>
        url === '*' ||
        url === request.path ||
        (url.endsWith('*') && request.path.startsWith(url.slice(0, -1))),
    );
  }
  const groups = rule.apiGroups ?? [];
  if (!groups.includes('*') && !groups.includes(request.apiGroup)) return false;
  const combined =
    request.subresource === '' ? request.resource : `${request.resource}/${request.subresource}`;
  const resourceMatches = (rule.resources ?? []).some(
    (resource) =>
      resource === '*' ||
      resource === combined ||
      (request.subresource !== '' && resource === `*/${request.subresource}`),
  );
  if (!resourceMatches) return false;
  const names = rule.resourceNames ?? [];
  return names.length === 0 || names.includes(request.name);
}

/** The message of the API server's 403, word for word. */
function forbiddenMessage(user: UserInfo, request: RequestAttributes): string {
  if (!request.isResourceRequest) {
    return `forbidden: User "${user.name}" cannot ${request.verb} path "${request.path}"`;
  }
  const combined =
    request.subresource === '' ? request.resource : `${request.resource}/${request.subresource}`;
  const scope =
    request.namespace === '' ? 'at the cluster scope' : `in the namespace "${request.namespace}"`;
  const reason = `User "${user.name}" cannot ${request.verb} resource "${combined}" in API group "${request.apiGroup}" ${scope}`;
  const qualified =
    request.apiGroup === '' ? request.resource : `${request.resource}.${request.apiGroup}`;
  return request.name === ''
    ? `${qualified} is forbidden: ${reason}`
    : `${qualified} "${request.name}" is forbidden: ${reason}`;
}
