import {
  ApiException,
  CoreV1Api,
  DiscoveryV1Api,
  KubeConfig,
  PatchStrategy,
  setHeaderOptions,
  Watch,
  type V1Service,
} from '@kubernetes/client-node';
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { FakeKubeApiServer, type UserInfo } from '../../functions/local/fake-kube';
import { loadProjectRbac } from '../../functions/local/project-rbac';
import { loadBalancerService, readyNode } from '../support/kube-objects';

let server: FakeKubeApiServer;
let api: CoreV1Api;

beforeEach(async () => {
  server = await FakeKubeApiServer.start({ bookmarkIntervalMs: 50 });
  api = server.kubeConfig().makeApiClient(CoreV1Api);
});

afterEach(async () => {
  await server.stop();
});

const merge = setHeaderOptions('Content-Type', PatchStrategy.MergePatch);
const strategic = setHeaderOptions('Content-Type', PatchStrategy.StrategicMergePatch);
const jsonPatch = setHeaderOptions('Content-Type', PatchStrategy.JsonPatch);

async function createService(name: string, namespace = 'default'): Promise<V1Service> {
  return api.createNamespacedService({ namespace, body: loadBalancerService(name, namespace) });
}

async function apiError(promise: Promise<unknown>): Promise<ApiException<unknown>> {
  const error = await promise.then(
    () => undefined,
    (e: unknown) => e,
  );
  if (!(error instanceof ApiException))
    throw new Error(`expected an ApiException, got ${String(error)}`);
  return error;
}

function statusOf(error: ApiException<unknown>): Record<string, unknown> {
  return (typeof error.body === 'string' ? JSON.parse(error.body) : error.body) as Record<
    string,
    unknown
  >;
}

describe('objects and resourceVersions', () => {
  it('assigns monotonically increasing resourceVersions across kinds and writes', async () => {
    const a = await createService('a');
    const node = await api.createNode({ body: readyNode('n1') });
    const b = await createService('b', 'other');
    const patched = await api.patchNamespacedService(
      { name: 'a', namespace: 'default', body: { metadata: { labels: { x: 'y' } } } },
      merge,
    );
    const versions = [a, node, b, patched].map((o) => Number(o.metadata?.resourceVersion));
    expect(versions).toEqual([...versions].sort((x, y) => x - y));
    expect(new Set(versions).size).toBe(4);
  });

  it('defaults a LoadBalancer Service like the API server: nodePorts, clusterIP, traffic policy', async () => {
    const created = await createService('a');
    expect(created.spec?.clusterIP).toMatch(/^10\.96\./);
    expect(created.spec?.externalTrafficPolicy).toBe('Cluster');
    const nodePorts = created.spec?.ports?.map((p) => p.nodePort) ?? [];
    expect(nodePorts).toHaveLength(2);
    for (const port of nodePorts) expect(port).toBeGreaterThanOrEqual(30000);
    expect(new Set(nodePorts).size).toBe(2);
    expect(created.status).toEqual({});
  });

  it('keeps the resourceVersion when a write changes nothing', async () => {
    const created = await createService('a');
    const again = await api.patchNamespacedService(
      { name: 'a', namespace: 'default', body: { spec: { type: 'LoadBalancer' } } },
      merge,
    );
    expect(again.metadata?.resourceVersion).toBe(created.metadata?.resourceVersion);
  });

  it('returns 404 NotFound in the Status shape for a missing object', async () => {
    const error = await apiError(api.readNamespacedService({ name: 'nope', namespace: 'default' }));
    expect(error.code).toBe(404);
    expect(statusOf(error)).toMatchObject({
      kind: 'Status',
      status: 'Failure',
      reason: 'NotFound',
      code: 404,
    });
  });

  it('returns 409 AlreadyExists for a duplicate create and 409 Conflict for a stale update', async () => {
    const created = await createService('a');
    const duplicate = await apiError(createService('a'));
    expect(duplicate.code).toBe(409);
    expect(statusOf(duplicate)).toMatchObject({ reason: 'AlreadyExists' });

    await api.patchNamespacedService(
      { name: 'a', namespace: 'default', body: { metadata: { labels: { bump: '1' } } } },
      merge,
    );
    const stale = await apiError(
      api.replaceNamespacedService({ name: 'a', namespace: 'default', body: created }),
    );
    expect(stale.code).toBe(409);
    expect(statusOf(stale)).toMatchObject({ reason: 'Conflict', code: 409 });
  });

  it('replaces an object with PUT when the resourceVersion is current', async () => {
    const created = await createService('a');
    const body = structuredClone(created);
    body.metadata = { ...body.metadata, labels: { replaced: 'yes' } };
    const replaced = await api.replaceNamespacedService({ name: 'a', namespace: 'default', body });
    expect(replaced.metadata?.labels).toEqual({ replaced: 'yes' });
    expect(replaced.metadata?.uid).toBe(created.metadata?.uid);
  });
});

describe('lists', () => {
  it('paginates with limit and continue on one consistent snapshot', async () => {
    for (const name of ['a', 'b', 'c', 'd', 'e']) await createService(name);

    const first = await api.listServiceForAllNamespaces({ limit: 2 });
    await createService('f'); // made between pages: not part of this list
    const second = await api.listServiceForAllNamespaces({
      limit: 2,
      _continue: first.metadata?._continue,
    });
    const third = await api.listServiceForAllNamespaces({
      limit: 2,
      _continue: second.metadata?._continue,
    });

    expect(first.items.map((s) => s.metadata?.name)).toEqual(['a', 'b']);
    expect(first.metadata?.remainingItemCount).toBe(3);
    expect(second.items.map((s) => s.metadata?.name)).toEqual(['c', 'd']);
    expect(third.items.map((s) => s.metadata?.name)).toEqual(['e']);
    expect(third.metadata?._continue).toBeUndefined();
    expect(new Set([first, second, third].map((l) => l.metadata?.resourceVersion)).size).toBe(1);
  });

  it('answers an expired continue token with 410 Gone', async () => {
    for (const name of ['a', 'b', 'c']) await createService(name);
    const first = await api.listServiceForAllNamespaces({ limit: 1 });
    server.compact();
    const error = await apiError(
      api.listServiceForAllNamespaces({ limit: 1, _continue: first.metadata?._continue }),
    );
    expect(error.code).toBe(410);
    expect(statusOf(error)).toMatchObject({ reason: 'Expired' });
  });

  it('lists namespaced and cluster-wide, and filters by label selector', async () => {
    await createService('a', 'one');
    await createService('b', 'two');
    await api.patchNamespacedService(
      { name: 'b', namespace: 'two', body: { metadata: { labels: { tier: 'web' } } } },
      merge,
    );
    const inOne = await api.listNamespacedService({ namespace: 'one' });
    const all = await api.listServiceForAllNamespaces();
    const web = await api.listServiceForAllNamespaces({ labelSelector: 'tier=web' });
    expect(inOne.items.map((s) => s.metadata?.name)).toEqual(['a']);
    expect(all.items.map((s) => s.metadata?.name)).toEqual(['a', 'b']);
    expect(web.items.map((s) => s.metadata?.name)).toEqual(['b']);
  });
});

describe('watches', () => {
  interface Seen {
    type: string;
    name: string | undefined;
    resourceVersion: string | undefined;
  }

  async function watch(path: string, params: Record<string, string | undefined>) {
    const events: Seen[] = [];
    let done: unknown = 'open';
    const request = await new Watch(server.kubeConfig()).watch(
      path,
      params,
      (type, object: V1Service) =>
        events.push({
          type,
          name: object.metadata?.name,
          resourceVersion: object.metadata?.resourceVersion,
        }),
      (err: unknown) => {
        done = err ?? null;
      },
    );
    return { events, request, done: () => done };
  }

  it('resumes from a resourceVersion with only the later events', async () => {
    const a = await createService('a');
    await createService('b');
    const w = await watch('/api/v1/namespaces/default/services', {
      resourceVersion: a.metadata?.resourceVersion,
    });
    await vi.waitFor(() => expect(w.events.map((e) => `${e.type} ${e.name}`)).toEqual(['ADDED b']));
    w.request.abort();
  });

  it.each([['0'], [undefined]])(
    'starts with synthetic ADDED events for resourceVersion=%s',
    async (resourceVersion) => {
      await createService('a');
      await createService('b');
      const w = await watch('/api/v1/services', { resourceVersion });
      await vi.waitFor(() =>
        expect(w.events.map((e) => `${e.type} ${e.name}`)).toEqual(['ADDED a', 'ADDED b']),
      );
      await api.deleteNamespacedService({ name: 'a', namespace: 'default' });
      await vi.waitFor(() => expect(w.events.at(-1)).toMatchObject({ type: 'DELETED', name: 'a' }));
      w.request.abort();
    },
  );

  it('sends an in-stream 410 ERROR for a compacted resourceVersion', async () => {
    const a = await createService('a');
    await createService('b');
    server.compact();
    const w = await watch('/api/v1/services', { resourceVersion: a.metadata?.resourceVersion });
    await vi.waitFor(() => expect(w.done()).toBeNull());
    expect(w.events.map((e) => e.type)).toEqual(['ERROR']);
  });

  it('closes the watch from the server side after timeoutSeconds', async () => {
    const w = await watch('/api/v1/services', { resourceVersion: '0', timeoutSeconds: '1' });
    await vi.waitFor(() => expect(w.done()).toBeNull(), { timeout: 3000 });
  });

  it('sends bookmarks only when asked', async () => {
    const a = await createService('a');
    const plain = await watch('/api/v1/services', { resourceVersion: a.metadata?.resourceVersion });
    const bookmarked = await watch('/api/v1/services', {
      resourceVersion: a.metadata?.resourceVersion,
      allowWatchBookmarks: 'true',
    });
    server.sendBookmarks();
    await vi.waitFor(() =>
      expect(bookmarked.events.filter((e) => e.type === 'BOOKMARK').length).toBeGreaterThan(1),
    );
    expect(bookmarked.events[0]?.resourceVersion).toBe(String(server.store.currentRevision));
    expect(plain.events).toEqual([]);
    plain.request.abort();
    bookmarked.request.abort();
  });
});

describe('watches with a selector', () => {
  it('see an object ADDED when it comes to match and DELETED when it stops, as the API server filters', async () => {
    const events: string[] = [];
    const watch = await new Watch(server.kubeConfig()).watch(
      '/api/v1/namespaces/default/services',
      { labelSelector: 'team=a' },
      (type: string, object: { metadata?: { name?: string } }) =>
        events.push(`${type} ${object.metadata?.name ?? ''}`),
      () => undefined,
    );
    await createService('web');
    const label = (team: string) =>
      api.patchNamespacedService(
        { name: 'web', namespace: 'default', body: { metadata: { labels: { team } } } },
        merge,
      );
    await label('a');
    await label('b');
    await label('a');
    await vi.waitFor(() => expect(events).toEqual(['ADDED web', 'DELETED web', 'ADDED web']));
    watch.abort();
  });
});

describe('finalizers and deletion', () => {
  it('keeps an object with finalizers, sets deletionTimestamp, and removes it with the last finalizer', async () => {
    await createService('a');
    await api.patchNamespacedService(
      {
        name: 'a',
        namespace: 'default',
        body: {
          metadata: { finalizers: ['service.kubernetes.io/load-balancer-cleanup', 'other/keep'] },
        },
      },
      merge,
    );
    await api.deleteNamespacedService({ name: 'a', namespace: 'default' });
    const terminating = await api.readNamespacedService({ name: 'a', namespace: 'default' });
    expect(terminating.metadata?.deletionTimestamp).toBeDefined();

    await api.patchNamespacedService(
      { name: 'a', namespace: 'default', body: [{ op: 'remove', path: '/metadata/finalizers/0' }] },
      jsonPatch,
    );
    const stillThere = await api.readNamespacedService({ name: 'a', namespace: 'default' });
    expect(stillThere.metadata?.finalizers).toEqual(['other/keep']);

    await api.patchNamespacedService(
      { name: 'a', namespace: 'default', body: { metadata: { finalizers: null } } },
      merge,
    );
    const gone = await apiError(api.readNamespacedService({ name: 'a', namespace: 'default' }));
    expect(gone.code).toBe(404);
  });

  it('deletes an object without finalizers at once', async () => {
    await createService('a');
    await api.deleteNamespacedService({ name: 'a', namespace: 'default' });
    const gone = await apiError(api.readNamespacedService({ name: 'a', namespace: 'default' }));
    expect(gone.code).toBe(404);
  });
});

describe('patches', () => {
  it('merge-patch merges maps, replaces lists and deletes with null', async () => {
    await createService('a');
    await api.patchNamespacedService(
      {
        name: 'a',
        namespace: 'default',
        body: { metadata: { annotations: { one: '1', two: '2' } } },
      },
      merge,
    );
    const patched = await api.patchNamespacedService(
      {
        name: 'a',
        namespace: 'default',
        body: {
          metadata: { annotations: { one: null } },
          spec: { ports: [{ name: 'only', port: 8080, protocol: 'UDP' }] },
        },
      },
      merge,
    );
    expect(patched.metadata?.annotations).toEqual({ two: '2' });
    expect(patched.spec?.ports?.map((p) => p.port)).toEqual([8080]);
  });

  it('strategic-merge-patch unions finalizers, merges ports by port and honours $deleteFromPrimitiveList', async () => {
    await createService('a');
    await api.patchNamespacedService(
      { name: 'a', namespace: 'default', body: { metadata: { finalizers: ['x/one'] } } },
      strategic,
    );
    const added = await api.patchNamespacedService(
      {
        name: 'a',
        namespace: 'default',
        body: {
          metadata: { finalizers: ['x/two'] },
          spec: {
            ports: [
              { port: 443, name: 'tls' },
              { port: 53, protocol: 'UDP', name: 'dns' },
            ],
          },
        },
      },
      strategic,
    );
    expect(added.metadata?.finalizers).toEqual(['x/one', 'x/two']);
    expect(added.spec?.ports?.map((p) => `${p.name}:${p.port}`)).toEqual([
      'http:80',
      'tls:443',
      'dns:53',
    ]);

    const removed = await api.patchNamespacedService(
      {
        name: 'a',
        namespace: 'default',
        body: {
          metadata: { '$deleteFromPrimitiveList/finalizers': ['x/one'] },
          spec: { ports: [{ port: 53, $patch: 'delete' }] },
        },
      },
      strategic,
    );
    expect(removed.metadata?.finalizers).toEqual(['x/two']);
    expect(removed.spec?.ports?.map((p) => p.port)).toEqual([80, 443]);
  });

  it('JSON-patch applies operations and rejects a failed test op with 422', async () => {
    await createService('a');
    const patched = await api.patchNamespacedService(
      {
        name: 'a',
        namespace: 'default',
        body: [
          { op: 'add', path: '/metadata/annotations', value: { a: 'b' } },
          { op: 'replace', path: '/spec/ports/0/port', value: 8080 },
        ],
      },
      jsonPatch,
    );
    expect(patched.metadata?.annotations).toEqual({ a: 'b' });
    expect(patched.spec?.ports?.[0]?.port).toBe(8080);

    const failed = await apiError(
      api.patchNamespacedService(
        {
          name: 'a',
          namespace: 'default',
          body: [{ op: 'test', path: '/spec/type', value: 'NodePort' }],
        },
        jsonPatch,
      ),
    );
    expect(failed.code).toBe(422);
  });

  it('honours a resourceVersion in a patch as a precondition', async () => {
    await createService('a');
    const error = await apiError(
      api.patchNamespacedService(
        {
          name: 'a',
          namespace: 'default',
          body: { metadata: { resourceVersion: '1', labels: { a: 'b' } } },
        },
        merge,
      ),
    );
    expect(error.code).toBe(409);
  });
});

describe('status subresource', () => {
  const ingress = { loadBalancer: { ingress: [{ hostname: 'lb-1.elb.amazonaws.com' }] } };

  it('status writes change only status', async () => {
    await createService('a');
    const patched = await api.patchNamespacedServiceStatus(
      { name: 'a', namespace: 'default', body: { status: ingress, spec: { type: 'ClusterIP' } } },
      merge,
    );
    expect(patched.status).toEqual(ingress);
    expect(patched.spec?.type).toBe('LoadBalancer');
  });

  it('writes to the main resource leave status alone', async () => {
    await createService('a');
    await api.patchNamespacedServiceStatus(
      { name: 'a', namespace: 'default', body: { status: ingress } },
      merge,
    );
    const patched = await api.patchNamespacedService(
      {
        name: 'a',
        namespace: 'default',
        body: { status: { loadBalancer: {} }, metadata: { labels: { a: 'b' } } },
      },
      merge,
    );
    expect(patched.status).toEqual(ingress);
    expect(patched.metadata?.labels).toEqual({ a: 'b' });
  });

  it('keeps a registering Node status and patches Node status through its subresource', async () => {
    const node = await api.createNode({ body: readyNode('n1') });
    expect(node.status?.conditions?.[0]?.type).toBe('Ready');
    const patched = await api.patchNodeStatus(
      { name: 'n1', body: { status: { conditions: [{ type: 'Ready', status: 'False' }] } } },
      strategic,
    );
    expect(patched.status?.conditions).toEqual([{ type: 'Ready', status: 'False' }]);
    expect((await api.listNode()).items.map((n) => n.metadata?.name)).toEqual(['n1']);
  });
});

describe('events', () => {
  it('creates Events (with generateName) and lists them per namespace and cluster-wide', async () => {
    await api.createNamespacedEvent({
      namespace: 'default',
      body: {
        metadata: { generateName: 'a.' },
        involvedObject: { kind: 'Service', namespace: 'default', name: 'a' },
        reason: 'EnsuringLoadBalancer',
        message: 'Ensuring load balancer',
        type: 'Normal',
        source: { component: 'service-controller' },
        count: 1,
      },
    });
    const named = await api.listNamespacedEvent({ namespace: 'default' });
    const all = await api.listEventForAllNamespaces();
    expect(named.items).toHaveLength(1);
    expect(named.items[0]?.metadata?.name).toMatch(/^a\./);
    expect(all.items[0]?.reason).toBe('EnsuringLoadBalancer');

    const name = named.items[0]?.metadata?.name ?? '';
    const bumped = await api.patchNamespacedEvent(
      { name, namespace: 'default', body: { count: 2 } },
      strategic,
    );
    expect(bumped.count).toBe(2);
  });
});

describe('EndpointSlices (discovery.k8s.io/v1)', () => {
  const slice = (name: string, service: string, ips: string[], ready = true) => ({
    metadata: { name, namespace: 'default', labels: { 'kubernetes.io/service-name': service } },
    addressType: 'IPv4',
    ports: [{ name: 'http', port: 8080, protocol: 'TCP' }],
    endpoints: ips.map((ip) => ({
      addresses: [ip],
      conditions: { ready },
      targetRef: { kind: 'Pod', namespace: 'default', name: `pod-${ip}` },
    })),
  });

  it('are served under their group: created, listed by the service-name label, watched', async () => {
    const discovery = server.kubeConfig().makeApiClient(DiscoveryV1Api);
    const created = await discovery.createNamespacedEndpointSlice({
      namespace: 'default',
      body: slice('web-abc', 'web', ['10.0.1.5', '10.0.1.6']),
    });
    expect(created.apiVersion).toBe('discovery.k8s.io/v1');
    expect(created.endpoints?.map((e) => e.addresses[0])).toEqual(['10.0.1.5', '10.0.1.6']);
    await discovery.createNamespacedEndpointSlice({
      namespace: 'default',
      body: slice('other-xyz', 'other', ['10.0.2.5']),
    });
    const listed = await discovery.listNamespacedEndpointSlice({
      namespace: 'default',
      labelSelector: 'kubernetes.io/service-name=web',
    });
    expect(listed.apiVersion).toBe('discovery.k8s.io/v1');
    expect(listed.items.map((s) => s.metadata?.name)).toEqual(['web-abc']);
    const events: string[] = [];
    const watch = await new Watch(server.kubeConfig()).watch(
      '/apis/discovery.k8s.io/v1/namespaces/default/endpointslices',
      {
        labelSelector: 'kubernetes.io/service-name=web',
        resourceVersion: listed.metadata?.resourceVersion,
      },
      (type: string, object: { endpoints?: { addresses: string[] }[] }) =>
        events.push(`${type} ${object.endpoints?.length ?? 0}`),
      () => undefined,
    );
    await discovery.replaceNamespacedEndpointSlice({
      name: 'web-abc',
      namespace: 'default',
      body: { ...created, endpoints: created.endpoints?.slice(0, 1) ?? [] },
    });
    await discovery.deleteNamespacedEndpointSlice({ name: 'other-xyz', namespace: 'default' });
    await vi.waitFor(() => expect(events).toEqual(['MODIFIED 1']));
    watch.abort();
  });

  it('are not found under the core path, and core kinds not under the group', async () => {
    const found = await fetch(`${server.url}/api/v1/namespaces/default/endpointslices`, {
      headers: { authorization: 'Bearer fake-token' },
    });
    expect(found.status).toBe(404);
    const wrong = await fetch(
      `${server.url}/apis/discovery.k8s.io/v1/namespaces/default/services`,
      {
        headers: { authorization: 'Bearer fake-token' },
      },
    );
    expect(wrong.status).toBe(404);
  });
});

describe('fault hooks and configuration', () => {
  it('fails the next N matching requests with 429 or 500, then recovers', async () => {
    server.failNextRequests(1, 429, { method: 'GET' });
    server.failNextRequests(1, 500, { path: /\/services$/ });
    const throttled = await apiError(api.listServiceForAllNamespaces());
    expect(throttled.code).toBe(429);
    expect(throttled.headers['retry-after']).toBe('1');
    const failed = await apiError(api.listServiceForAllNamespaces());
    expect(failed.code).toBe(500);
    await expect(api.listServiceForAllNamespaces()).resolves.toMatchObject({ items: [] });
  });

  it('adds latency to every request while set', async () => {
    server.setLatency(150);
    const started = performance.now();
    await api.listServiceForAllNamespaces();
    expect(performance.now() - started).toBeGreaterThanOrEqual(140);
  });

  it('generates a kubeconfig that client-node loads and uses', async () => {
    const kc = new KubeConfig();
    kc.loadFromString(server.kubeconfigText());
    expect(kc.getCurrentCluster()?.server).toBe(server.url);
    const fromFile = kc.makeApiClient(CoreV1Api);
    await expect(fromFile.listNode()).resolves.toMatchObject({ items: [] });
  });

  it('rejects a wrong bearer token with 401 when a token is required', async () => {
    const guarded = await FakeKubeApiServer.start({ token: 'secret' });
    try {
      const wrong = new KubeConfig();
      wrong.loadFromString(guarded.kubeconfigText().replace('secret', 'wrong'));
      const rejected = await apiError(wrong.makeApiClient(CoreV1Api).listNode());
      expect(rejected.code).toBe(401);
      await expect(guarded.kubeConfig().makeApiClient(CoreV1Api).listNode()).resolves.toMatchObject(
        {
          items: [],
        },
      );
    } finally {
      await guarded.stop();
    }
  });
});

describe('RBAC (the rbac option, with the manifests of infra/k8s)', () => {
  const project = loadProjectRbac();
  let guarded: FakeKubeApiServer;
  const as = (user: UserInfo) => guarded.kubeConfig({ as: user }).makeApiClient(CoreV1Api);

  beforeEach(async () => {
    guarded = await FakeKubeApiServer.start({ rbac: project.authorizer });
  });

  afterEach(async () => {
    await guarded.stop();
  });

  it('serves what a role grants, to the user its token authenticates as', async () => {
    const admin = guarded.kubeConfig().makeApiClient(CoreV1Api);
    await admin.createNamespacedService({ namespace: 'default', body: loadBalancerService('web') });
    await expect(
      as(project.functions).readNamespacedService({ name: 'web', namespace: 'default' }),
    ).resolves.toMatchObject({ metadata: { name: 'web' } });
    await expect(as(project.forwarder).listServiceForAllNamespaces()).resolves.toMatchObject({
      items: [{ metadata: { name: 'web' } }],
    });
    expect(guarded.requests.map((r) => r.user)).toEqual([
      'admin',
      project.functions.name,
      project.forwarder.name,
    ]);
    expect(guarded.denials).toEqual([]);
  });

  it('answers a call outside the rules with the API server’s 403 Status and records it', async () => {
    guarded.store.create('nodes', '', readyNode('n1') as never);
    const refused = await apiError(as(project.functions).deleteNode({ name: 'n1' }));
    expect(refused.code).toBe(403);
    const message = `nodes "n1" is forbidden: User "${project.functions.name}" cannot delete resource "nodes" in API group "" at the cluster scope`;
    expect(statusOf(refused)).toEqual({
      apiVersion: 'v1',
      kind: 'Status',
      metadata: {},
      status: 'Failure',
      message,
      reason: 'Forbidden',
      details: { name: 'n1', kind: 'nodes' },
      code: 403,
    });
    expect(guarded.store.get('nodes', '', 'n1')).toBeDefined();
    const watch = await fetch(`${guarded.url}/api/v1/services?watch=true`, {
      headers: { Authorization: `Bearer ${guarded.tokenFor(project.functions)}` },
    });
    expect(watch.status).toBe(403);
    expect(guarded.denials.map((d) => [d.user, d.request.verb, d.message])).toEqual([
      [project.functions.name, 'delete', message],
      [
        project.functions.name,
        'watch',
        `services is forbidden: User "${project.functions.name}" cannot watch resource "services" in API group "" at the cluster scope`,
      ],
    ]);
  });

  it('lets the admin (system:masters) do anything, and refuses an unknown token with 401', async () => {
    const admin = guarded.kubeConfig().makeApiClient(CoreV1Api);
    await admin.createNode({ body: readyNode('n1') });
    await admin.deleteNode({ name: 'n1' });
    const stranger = await fetch(`${guarded.url}/api/v1/nodes`, {
      headers: { Authorization: 'Bearer not-a-token-it-minted' },
    });
    expect(stranger.status).toBe(401);
    expect(guarded.denials).toEqual([]);
  });
});
