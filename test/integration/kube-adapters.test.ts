import { randomUUID } from 'node:crypto';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import {
  CreateSecretCommand,
  PutSecretValueCommand,
  SecretsManagerClient,
} from '@aws-sdk/client-secrets-manager';
import {
  CoreV1Api,
  PatchStrategy,
  setHeaderOptions,
  type V1Node,
  type V1Service,
} from '@kubernetes/client-node';
import { CreateClusterCommand, EKSClient } from '@aws-sdk/client-eks';
import { afterEach, beforeEach, describe, expect, inject, it, vi } from 'vitest';
import { parseConfig, type ControllerConfig } from '../../functions/contract/controller-config';
import { classFinalizer, upstreamFinalizer } from '../../functions/core/claim';
import {
  NotFoundError,
  RetryableError,
  TerminalError,
  type ControllerError,
} from '../../functions/core/errors';
import { events, type ControllerEvent } from '../../functions/core/events';
import type { ObjectReference } from '../../functions/core/objects';
import { clusterAccess, kubernetesConnector } from '../../functions/kube/connect';
import { eventSourceComponent, KubeEventRecorder } from '../../functions/kube/event-recorder';
import { ClusterConnection } from '../../functions/kube/cluster-connection';
import { KubeApiClient, KubeApiError } from '../../functions/kube/kube-api-client';
import { kubeconfigAccess } from '../../functions/kube/kubeconfig';
import { HttpKubernetesApi, translateKubeError } from '../../functions/kube/kubernetes-api';
import { FakeKubeApiServer } from '../../functions/local/fake-kube';
import { loadProjectRbac } from '../../functions/local/project-rbac';
import { loadBalancerService } from '../support/kube-objects';
import { ManualClock } from '../../kit/manual-clock';

const t0 = Date.parse('2025-03-01T12:00:00.000Z');

let server: FakeKubeApiServer;
/** The test's own view of the cluster, through client-node. */
let api: CoreV1Api;

/** The functions' client, configured from the server's kubeconfig as the runtime's is. */
function functionsClient(of: FakeKubeApiServer): KubeApiClient {
  return new KubeApiClient(new ClusterConnection(kubeconfigAccess(of.kubeconfigText())));
}

async function nodeNames(client: KubeApiClient): Promise<(string | undefined)[]> {
  const list = await client.request<{ items: V1Node[] }>({ method: 'GET', path: '/api/v1/nodes' });
  return list.items.map((n) => n.metadata?.name);
}

beforeEach(async () => {
  server = await FakeKubeApiServer.start();
  api = server.kubeConfig().makeApiClient(CoreV1Api);
});

afterEach(async () => {
  await server.stop();
});

async function createService(name: string, finalizers?: string[]): Promise<V1Service> {
  const body = loadBalancerService(name);
  if (finalizers !== undefined) body.metadata = { ...body.metadata, finalizers };
  return api.createNamespacedService({ namespace: 'default', body });
}

function seedNodes(count: number): void {
  for (let i = 0; i < count; i++) {
    server.store.create('nodes', '', {
      metadata: { name: `node-${String(i).padStart(4, '0')}` },
      spec: { providerID: `aws:///us-east-1a/i-${i.toString(16).padStart(17, '0')}` },
      status: { conditions: [{ type: 'Ready', status: 'True' }] },
    });
  }
}

async function thrown(promise: Promise<unknown>): Promise<unknown> {
  return promise.then(
    () => {
      throw new Error('expected a rejection');
    },
    (error: unknown) => error,
  );
}

describe('HttpKubernetesApi', () => {
  let kube: HttpKubernetesApi;

  beforeEach(() => {
    const client = functionsClient(server);
    kube = new HttpKubernetesApi(() => Promise.resolve(client));
  });

  describe('getService', () => {
    it('returns the live Service', async () => {
      const created = await createService('web');
      const read = await kube.getService('default', 'web');
      expect(read?.metadata?.uid).toBe(created.metadata?.uid);
      expect(read?.spec?.ports?.map((p) => p.port)).toEqual([80, 443]);
    });

    it('returns undefined when the Service does not exist (404)', async () => {
      expect(await kube.getService('default', 'missing')).toBeUndefined();
      expect(server.requests.map((r) => `${r.method} ${r.path} ${r.status}`)).toEqual([
        'GET /api/v1/namespaces/default/services/missing 404',
      ]);
    });

    it('reports a 500 as a RetryableError naming the Service', async () => {
      await createService('web');
      server.failNextRequests(1, 500);
      const error = await thrown(kube.getService('default', 'web'));
      expect(error).toBeInstanceOf(RetryableError);
      expect((error as Error).message).toBe('read service default/web: 500 injected failure (500)');
    });
  });

  describe('finalizers', () => {
    it('adds a finalizer with a strategic-merge patch, keeping the other finalizers', async () => {
      const service = await createService('web', ['other.io/keep']);
      await kube.addFinalizer(service, upstreamFinalizer);
      const read = await api.readNamespacedService({ name: 'web', namespace: 'default' });
      expect(read.metadata?.finalizers).toEqual(['other.io/keep', upstreamFinalizer]);
      const patches = server.requests.filter((r) => r.method === 'PATCH');
      expect(patches.map((r) => `${r.path} ${r.contentType}`)).toEqual([
        '/api/v1/namespaces/default/services/web application/strategic-merge-patch+json',
      ]);
    });

    it('adds a finalizer only once when asked twice, leaving the resourceVersion alone', async () => {
      const service = await createService('web');
      await kube.addFinalizer(service, upstreamFinalizer);
      const first = await api.readNamespacedService({ name: 'web', namespace: 'default' });
      await kube.addFinalizer(service, upstreamFinalizer);
      const second = await api.readNamespacedService({ name: 'web', namespace: 'default' });
      expect(second.metadata?.finalizers).toEqual([upstreamFinalizer]);
      expect(second.metadata?.resourceVersion).toBe(first.metadata?.resourceVersion);
    });

    it('adds to a finalizer list changed since the Service was read (no stale read-modify-write)', async () => {
      const stale = await createService('web');
      await api.patchNamespacedService(
        {
          name: 'web',
          namespace: 'default',
          body: { metadata: { finalizers: ['late.io/one'] } },
        },
        setHeaderOptions('Content-Type', PatchStrategy.MergePatch),
      );
      await kube.addFinalizer(stale, classFinalizer);
      const read = await api.readNamespacedService({ name: 'web', namespace: 'default' });
      expect(read.metadata?.finalizers).toEqual(['late.io/one', classFinalizer]);
    });

    it('removes one finalizer and keeps the others', async () => {
      const service = await createService('web', ['other.io/keep', upstreamFinalizer, 'x.io/z']);
      await kube.removeFinalizer(service, upstreamFinalizer);
      const read = await api.readNamespacedService({ name: 'web', namespace: 'default' });
      expect(read.metadata?.finalizers).toEqual(['other.io/keep', 'x.io/z']);
    });

    it('removes a finalizer that is not there without error or change', async () => {
      const service = await createService('web', ['other.io/keep']);
      await kube.removeFinalizer(service, upstreamFinalizer);
      const read = await api.readNamespacedService({ name: 'web', namespace: 'default' });
      expect(read.metadata?.finalizers).toEqual(['other.io/keep']);
      expect(read.metadata?.resourceVersion).toBe(service.metadata?.resourceVersion);
    });

    it('lets a Service being deleted go when its last finalizer is removed', async () => {
      const service = await createService('web', [upstreamFinalizer]);
      await api.deleteNamespacedService({ name: 'web', namespace: 'default' });
      await kube.removeFinalizer(service, upstreamFinalizer);
      expect(await kube.getService('default', 'web')).toBeUndefined();
    });

    it('reports a finalizer change on a missing Service as NotFoundError', async () => {
      const error = await thrown(kube.addFinalizer(loadBalancerService('gone'), upstreamFinalizer));
      expect(error).toBeInstanceOf(NotFoundError);
      expect((error as Error).message).toBe(
        'add finalizer on service default/gone: 404 services "gone" not found',
      );
    });
  });

  describe('patchServiceStatus', () => {
    const hostname = 'k8s-default-web-0123456789.elb.us-east-1.amazonaws.com';

    it('writes the ingress through the status subresource and leaves the spec alone', async () => {
      const service = await createService('web');
      await kube.patchServiceStatus(service, { ingress: [{ hostname }] });
      const read = await api.readNamespacedService({ name: 'web', namespace: 'default' });
      expect(read.status?.loadBalancer?.ingress).toEqual([{ hostname }]);
      expect(read.spec?.type).toBe('LoadBalancer');
      const patches = server.requests.filter((r) => r.method === 'PATCH');
      expect(patches.map((r) => r.path)).toEqual([
        '/api/v1/namespaces/default/services/web/status',
      ]);
    });

    it('replaces an old ingress rather than merging into it', async () => {
      const service = await createService('web');
      await kube.patchServiceStatus(service, { ingress: [{ hostname }, { ip: '10.0.0.1' }] });
      await kube.patchServiceStatus(service, { ingress: [{ hostname: 'new.example.com' }] });
      const read = await api.readNamespacedService({ name: 'web', namespace: 'default' });
      expect(read.status?.loadBalancer?.ingress).toEqual([{ hostname: 'new.example.com' }]);
    });

    it('clears the ingress when given an empty status', async () => {
      const service = await createService('web');
      await kube.patchServiceStatus(service, { ingress: [{ hostname }] });
      await kube.patchServiceStatus(service, {});
      const read = await api.readNamespacedService({ name: 'web', namespace: 'default' });
      expect(read.status?.loadBalancer?.ingress).toBeUndefined();
      expect(read.status).toEqual({ loadBalancer: {} });
    });

    it('reports a missing Service as NotFoundError', async () => {
      const error = await thrown(
        kube.patchServiceStatus(loadBalancerService('gone'), { ingress: [{ hostname }] }),
      );
      expect(error).toBeInstanceOf(NotFoundError);
    });
  });

  describe('listNodes', () => {
    it('lists every node in pages of 500, following the continue token', async () => {
      seedNodes(1203);
      const nodes = await kube.listNodes();
      expect(nodes).toHaveLength(1203);
      expect(nodes[0]?.metadata?.name).toBe('node-0000');
      expect(nodes.at(-1)?.metadata?.name).toBe('node-1202');
      expect(new Set(nodes.map((n) => n.metadata?.name)).size).toBe(1203);
      const lists = server.requests.filter((r) => r.method === 'GET' && r.path === '/api/v1/nodes');
      expect(lists.map((r) => r.query.get('limit'))).toEqual(['500', '500', '500']);
      expect(lists.map((r) => r.query.has('continue'))).toEqual([false, true, true]);
    });

    it('makes one request when the nodes fit in a page', async () => {
      seedNodes(3);
      expect((await kube.listNodes()).map((n) => n.metadata?.name)).toEqual([
        'node-0000',
        'node-0001',
        'node-0002',
      ]);
      expect(server.requests.filter((r) => r.path === '/api/v1/nodes')).toHaveLength(1);
    });

    it('reports a throttled list as a RetryableError', async () => {
      seedNodes(3);
      server.failNextRequests(1, 429, { path: /\/nodes$/ });
      const error = await thrown(kube.listNodes());
      expect(error).toBeInstanceOf(RetryableError);
      expect((error as Error).message).toBe('list nodes: 429 injected failure (429)');
    });
  });

  describe('error mapping', () => {
    it.each([
      [404, 'NotFoundError', 'retryable', NotFoundError],
      [422, 'TerminalError', 'terminal', TerminalError],
      [400, 'TerminalError', 'terminal', TerminalError],
      [409, 'RetryableError', 'retryable', RetryableError],
      [429, 'RetryableError', 'retryable', RetryableError],
      [500, 'RetryableError', 'retryable', RetryableError],
    ] as const)('maps an API %i to %s, kind %s', async (status, _name, kind, ErrorClass) => {
      const service = await createService('web');
      server.failNextRequests(1, status, { method: 'PATCH' });
      const error = await thrown(kube.patchServiceStatus(service, {}));
      expect(error).toBeInstanceOf(ErrorClass);
      expect((error as ControllerError).kind).toBe(kind);
      expect((error as Error).message).toBe(
        `patch status of service default/web: ${status} injected failure (${status})`,
      );
      expect((error as Error).cause).toBeInstanceOf(KubeApiError);
    });

    it('maps an error that is not an API answer (connection refused) to RetryableError', async () => {
      const stopped = await FakeKubeApiServer.start();
      const client = functionsClient(stopped);
      const unreachable = new HttpKubernetesApi(() => Promise.resolve(client));
      await stopped.stop();
      const error = await thrown(unreachable.patchServiceStatus(loadBalancerService('web'), {}));
      expect(error).toBeInstanceOf(RetryableError);
      expect((error as Error).cause).not.toBeInstanceOf(KubeApiError);
      expect((error as Error).message).toMatch(/^patch status of service default\/web: .+/);
    });

    it('uses a Status body given as text, and the raw text when it is not JSON', () => {
      const json = new KubeApiError(403, '{"message":"services is forbidden"}', 'Forbidden');
      const text = new KubeApiError(502, 'upstream connect error', 'Bad Gateway');
      expect(translateKubeError(json, 'read').message).toBe('read: 403 services is forbidden');
      expect(translateKubeError(text, 'read').message).toBe('read: 502 upstream connect error');
    });
  });
});

describe('KubeEventRecorder', () => {
  const web: ObjectReference = {
    kind: 'Service',
    namespace: 'default',
    name: 'web',
    uid: 'uid-web',
  };
  let clock: ManualClock;
  let errors: { error: unknown; event: ControllerEvent }[];
  let recorder: KubeEventRecorder;

  beforeEach(() => {
    clock = new ManualClock(t0);
    errors = [];
    const client = functionsClient(server);
    recorder = new KubeEventRecorder(
      () => Promise.resolve(client),
      clock,
      (error, event) => errors.push({ error, event }),
    );
  });

  async function storedEvents(namespace = 'default') {
    return (await api.listNamespacedEvent({ namespace })).items;
  }

  it('creates an Event from the service-controller about the object, counted once', async () => {
    await recorder.record(web, events.ensuring);
    const [event, ...others] = await storedEvents();
    expect(others).toEqual([]);
    expect(event).toMatchObject({
      type: 'Normal',
      reason: 'EnsuringLoadBalancer',
      message: 'Ensuring load balancer',
      count: 1,
      source: { component: 'service-controller' },
      reportingComponent: eventSourceComponent,
      involvedObject: {
        apiVersion: 'v1',
        kind: 'Service',
        namespace: 'default',
        name: 'web',
        uid: 'uid-web',
      },
    });
    expect(event?.metadata?.name).toMatch(/^web\.[0-9a-f]{16}$/);
    expect(event?.firstTimestamp?.toISOString()).toBe('2025-03-01T12:00:00.000Z');
    expect(event?.lastTimestamp?.toISOString()).toBe('2025-03-01T12:00:00.000Z');
    expect(errors).toEqual([]);
  });

  it('bumps count and lastTimestamp of the same Event when the same event repeats', async () => {
    await recorder.record(web, events.syncFailed('throttled'));
    clock.advance(60);
    await recorder.record(web, events.syncFailed('throttled'));
    clock.advance(60);
    await recorder.record(web, events.syncFailed('throttled'));
    const stored = await storedEvents();
    expect(stored).toHaveLength(1);
    expect(stored[0]?.count).toBe(3);
    expect(stored[0]?.firstTimestamp?.toISOString()).toBe('2025-03-01T12:00:00.000Z');
    expect(stored[0]?.lastTimestamp?.toISOString()).toBe('2025-03-01T12:02:00.000Z');
  });

  it('creates another Event when the message differs', async () => {
    await recorder.record(web, events.syncFailed('throttled'));
    await recorder.record(web, events.syncFailed('subnet not found'));
    const stored = await storedEvents();
    expect(stored.map((e) => `${e.message} x${e.count}`).sort()).toEqual([
      'Error syncing load balancer: subnet not found x1',
      'Error syncing load balancer: throttled x1',
    ]);
  });

  it('creates another Event for another object with the same reason and message', async () => {
    await recorder.record(web, events.ensured);
    await recorder.record({ ...web, name: 'api', uid: 'uid-api' }, events.ensured);
    const stored = await storedEvents();
    expect(stored.map((e) => `${e.involvedObject.name} x${e.count}`).sort()).toEqual([
      'api x1',
      'web x1',
    ]);
  });

  it('records Node events in the default namespace without a namespace on the Node', async () => {
    await recorder.record(
      { kind: 'Node', name: 'node-1', uid: 'uid-node-1' },
      events.nodeNotEligible('Node node-1 has no EC2 instance ID in its providerID'),
    );
    const [event] = await storedEvents('default');
    expect(event?.metadata?.namespace).toBe('default');
    expect(event?.type).toBe('Warning');
    expect(event?.involvedObject).toEqual({
      apiVersion: 'v1',
      kind: 'Node',
      name: 'node-1',
      uid: 'uid-node-1',
    });
  });

  it('reports a failed write to onError, does not throw, and stores nothing', async () => {
    server.failNextRequests(1, 500, { method: 'POST' });
    await expect(recorder.record(web, events.ensuring)).resolves.toBeUndefined();
    expect(errors).toHaveLength(1);
    expect(errors[0]?.event).toBe(events.ensuring);
    expect(errors[0]?.error).toBeInstanceOf(KubeApiError);
    expect((errors[0]?.error as KubeApiError).code).toBe(500);
    expect(await storedEvents()).toEqual([]);
  });

  it('reports a failure while bumping a repeat to onError and keeps the stored count', async () => {
    await recorder.record(web, events.ensuring);
    server.failNextRequests(1, 500, { method: 'PATCH' });
    await recorder.record(web, events.ensuring);
    expect(errors.map((e) => (e.error as KubeApiError).code)).toEqual([500]);
    expect((await storedEvents())[0]?.count).toBe(1);
  });

  it('reports an API client that cannot be made to onError without throwing', async () => {
    const unavailable = new KubeEventRecorder(
      () => Promise.reject(new Error('kubeconfig secret unreadable')),
      clock,
      (error, event) => errors.push({ error, event }),
    );
    await expect(unavailable.record(web, events.deleting)).resolves.toBeUndefined();
    expect(errors.map((e) => (e.error as Error).message)).toEqual(['kubeconfig secret unreadable']);
  });
});

describe("the functions' calls under the project's ClusterRole", () => {
  it('makes every call of HttpKubernetesApi and KubeEventRecorder without a denial', async () => {
    const rbac = loadProjectRbac();
    const guarded = await FakeKubeApiServer.start({ rbac: rbac.authorizer });
    try {
      const admin = guarded.kubeConfig().makeApiClient(CoreV1Api);
      const service = await admin.createNamespacedService({
        namespace: 'default',
        body: loadBalancerService('web'),
      });
      const client = new KubeApiClient(
        new ClusterConnection(kubeconfigAccess(guarded.kubeconfigText({ as: rbac.functions }))),
      );
      const kube = new HttpKubernetesApi(() => Promise.resolve(client));
      const errors: unknown[] = [];
      const recorder = new KubeEventRecorder(
        () => Promise.resolve(client),
        new ManualClock(t0),
        (error) => errors.push(error),
      );
      await kube.getService('default', 'web');
      await kube.addFinalizer(service, upstreamFinalizer);
      await kube.removeFinalizer(service, upstreamFinalizer);
      await kube.patchServiceStatus(service, { ingress: [{ hostname: 'nlb.example.com' }] });
      await kube.listNodes();
      await kube.listServices('default');
      await kube.namespaceLabels('default');
      await recorder.record({ kind: 'Service', namespace: 'default', name: 'web' }, events.ensured);
      await recorder.record({ kind: 'Service', namespace: 'default', name: 'web' }, events.ensured);
      expect(errors).toEqual([]);
      expect(guarded.denials).toEqual([]);
      const calls = guarded.requests.filter(
        (r) => r.method !== 'POST' || r.path.endsWith('/events'),
      );
      expect(new Set(calls.slice(1).map((r) => r.method))).toEqual(
        new Set(['GET', 'PATCH', 'POST']),
      );
    } finally {
      await guarded.stop();
    }
  });
});

describe('kubernetesConnector', () => {
  const endpoint = inject('awsEndpoint');
  const clock = new ManualClock(t0);
  let dir: string;

  beforeEach(() => {
    dir = mkdtempSync(join(tmpdir(), 'kube-adapters-'));
    clock.ms = t0;
  });

  afterEach(() => {
    rmSync(dir, { recursive: true, force: true });
    vi.unstubAllEnvs();
  });

  function config(kubernetes: unknown): ControllerConfig {
    return parseConfig({
      clusterName: 'test',
      region: 'us-east-1',
      queueUrl: 'http://127.0.0.1:1/000000000000/work',
      tableName: 'state',
      aws: { vpcId: 'vpc-0123456789abcdef0', endpoints: { secretsManager: endpoint } },
      kubernetes,
    });
  }

  /**
   * The connector builds its own SecretsManagerClient, which carries no moto account header: the
   * secret lives in moto's default account, under a name unique to the test. Its credentials come
   * from the default chain, so fake ones are put in the environment for the test only.
   */
  async function kubeconfigSecret(
    text: string,
  ): Promise<{ arn: string; update(text: string): Promise<void> }> {
    vi.stubEnv('AWS_ACCESS_KEY_ID', 'testing');
    vi.stubEnv('AWS_SECRET_ACCESS_KEY', 'testing');
    vi.stubEnv('AWS_SESSION_TOKEN', undefined);
    const secrets = new SecretsManagerClient({
      endpoint,
      region: 'us-east-1',
      credentials: { accessKeyId: 'testing', secretAccessKey: 'testing' },
    });
    const created = await secrets.send(
      new CreateSecretCommand({ Name: `kubeconfig-${randomUUID()}`, SecretString: text }),
    );
    const arn = created.ARN ?? '';
    return {
      arn,
      update: async (next) => {
        await secrets.send(new PutSecretValueCommand({ SecretId: arn, SecretString: next }));
      },
    };
  }

  it('eks mode without endpoint and CA: reads both with eks:DescribeCluster', async () => {
    vi.stubEnv('AWS_ACCESS_KEY_ID', 'testing');
    vi.stubEnv('AWS_SECRET_ACCESS_KEY', 'testing');
    const name = `c-${randomUUID().slice(0, 8)}`;
    const eks = new EKSClient({
      endpoint,
      region: 'us-east-1',
      credentials: { accessKeyId: 'testing', secretAccessKey: 'testing' },
    });
    const created = await eks.send(
      new CreateClusterCommand({
        name,
        roleArn: 'arn:aws:iam::123456789012:role/eks',
        resourcesVpcConfig: { subnetIds: [] },
      }),
    );
    const settings = { mode: 'eks' as const, clusterName: name };
    const withEks = parseConfig({
      ...config(settings),
      aws: { vpcId: 'vpc-0123456789abcdef0', endpoints: { eks: endpoint } },
    });
    const access = await clusterAccess(withEks, settings);
    expect(access.endpoint).toBe(created.cluster?.endpoint);
    expect(access.caData).toBe(created.cluster?.certificateAuthority?.data);
    expect(access.endpoint).toMatch(/^https:\/\//);
    await expect(clusterAccess(withEks, { ...settings, clusterName: 'missing' })).rejects.toThrow(
      /missing|not found/i,
    );
  });

  it('kubeconfig mode: talks to the cluster in the file and reuses one client', async () => {
    seedNodes(2);
    const path = join(dir, 'kubeconfig');
    writeFileSync(path, server.kubeconfigText());
    const connect = kubernetesConnector(config({ mode: 'kubeconfig', path }), clock);
    const first = await connect();
    expect(await nodeNames(first)).toEqual(['node-0000', 'node-0001']);
    expect(await connect()).toBe(first);
  });

  it('kubeconfig mode: a missing file fails the first connection, naming the file', async () => {
    const path = join(dir, 'does-not-exist');
    const connect = kubernetesConnector(config({ mode: 'kubeconfig', path }), clock);
    await expect(connect()).rejects.toThrow(/ENOENT.*does-not-exist/);
    await expect(connect()).rejects.toThrow(/ENOENT/);
  });

  /** The fake API server speaks plain HTTP: secret mode accepts it only when told to. */
  const plainHttpAllowed = { allowInsecureConnection: true };
  const quietLog = { warn: () => undefined };

  it('secret mode: reads the kubeconfig from Secrets Manager and talks to that cluster', async () => {
    seedNodes(1);
    const secret = await kubeconfigSecret(server.kubeconfigText());
    const connect = kubernetesConnector(
      config({ mode: 'secret', secretArn: secret.arn, ...plainHttpAllowed }),
      clock,
      { log: quietLog },
    );
    expect(await nodeNames(await connect())).toEqual(['node-0000']);
  });

  it('secret mode: a plain-HTTP server is refused before any request carries the token', async () => {
    const guarded = await FakeKubeApiServer.start({ token: 'cleartext-token' });
    try {
      const secret = await kubeconfigSecret(guarded.kubeconfigText());
      const kube = new HttpKubernetesApi(
        kubernetesConnector(config({ mode: 'secret', secretArn: secret.arn }), clock),
      );
      const error = await kube.listNodes().catch((e: unknown) => e);
      expect(error).toBeInstanceOf(RetryableError);
      const message = (error as Error).message;
      expect(message).toContain(`secret ${secret.arn} is refused`);
      expect(message).toMatch(/http:\/\/127\.0\.0\.1:\d+ is plain HTTP/);
      expect(message).toContain('kubernetesAllowInsecureConnection');
      expect(message).not.toContain('cleartext-token');
      expect(guarded.requests).toEqual([]);
    } finally {
      await guarded.stop();
    }
  });

  it('secret mode: insecure-skip-tls-verify is refused, naming the setting that accepts it', async () => {
    const secret = await kubeconfigSecret(
      JSON.stringify({
        apiVersion: 'v1',
        clusters: [
          { name: 'c', cluster: { server: server.url, 'insecure-skip-tls-verify': true } },
        ],
        users: [{ name: 'u', user: { token: 'some-token' } }],
        contexts: [{ name: 'x', context: { cluster: 'c', user: 'u' } }],
        'current-context': 'x',
      }).replace('"http://', '"https://'),
    );
    const connect = kubernetesConnector(config({ mode: 'secret', secretArn: secret.arn }), clock);
    const error = await connect().catch((e: unknown) => e);
    expect(error).toBeInstanceOf(RetryableError);
    expect((error as Error).message).toMatch(
      /is refused: insecure-skip-tls-verify is set: the server's certificate would not be checked/,
    );
    expect(server.requests).toEqual([]);
  });

  it('secret mode with allowInsecureConnection: plain HTTP works, and a Warning is logged', async () => {
    seedNodes(1);
    const secret = await kubeconfigSecret(server.kubeconfigText());
    const warnings: { message: string; fields?: Record<string, unknown> }[] = [];
    const connect = kubernetesConnector(
      config({ mode: 'secret', secretArn: secret.arn, ...plainHttpAllowed }),
      clock,
      { log: { warn: (message, fields) => warnings.push({ message, fields }) } },
    );
    expect(await nodeNames(await connect())).toEqual(['node-0000']);
    expect(warnings).toEqual([
      {
        message: 'insecure Kubernetes API connection accepted (allowInsecureConnection)',
        fields: {
          secretArn: secret.arn,
          server: expect.stringMatching(/^http:\/\/127\.0\.0\.1:/) as unknown,
          problems: [expect.stringContaining('is plain HTTP') as unknown],
        },
      },
    ]);
  });

  it('secret mode: keeps the kubeconfig for five minutes, then reads the secret again', async () => {
    const other = await FakeKubeApiServer.start();
    try {
      const secret = await kubeconfigSecret(server.kubeconfigText());
      const connect = kubernetesConnector(
        config({ mode: 'secret', secretArn: secret.arn, ...plainHttpAllowed }),
        clock,
        { log: quietLog },
      );
      const first = await connect();
      await secret.update(other.kubeconfigText());

      clock.advance(5 * 60);
      const cached = await connect();
      expect(cached).toBe(first);
      await nodeNames(cached);
      expect(other.requests).toEqual([]);

      clock.ms += 1;
      const reread = await connect();
      expect(reread).not.toBe(first);
      await nodeNames(reread);
      expect(other.requests.map((r) => `${r.method} ${r.path}`)).toEqual(['GET /api/v1/nodes']);
    } finally {
      await other.stop();
    }
  });

  it('secret mode: a secret that does not exist fails the connection', async () => {
    const secret = await kubeconfigSecret(server.kubeconfigText());
    const missing = `${secret.arn.replace(/:secret:.*$/, ':secret:')}missing-${randomUUID()}`;
    const connect = kubernetesConnector(config({ mode: 'secret', secretArn: missing }), clock);
    await expect(connect()).rejects.toMatchObject({ name: 'ResourceNotFoundException' });
  });
});
