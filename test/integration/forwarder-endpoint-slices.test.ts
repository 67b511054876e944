/**
 * The forwarder's EndpointSlice watch (issue 36): a Service whose NLB targets pods
 * (`nlb-target-type: ip`) gets a `targets` message when its slices change in a way its target
 * groups would see, and nothing else does. Run against the fake API server over HTTP, the
 * forwarder as its ServiceAccount under the project's RBAC (infra/k8s), which must let it list
 * and watch EndpointSlices: any refusal fails the test.
 */
import {
  CoreV1Api,
  PatchStrategy,
  setHeaderOptions,
  type V1Service,
} from '@kubernetes/client-node';
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { parseWorkMessage, type WorkMessage } from '../../functions/contract/work-messages';
import { Forwarder } from '../../functions/forwarder/forwarder';
import { FakeKubeApiServer } from '../../functions/local/fake-kube';
import { loadProjectRbac } from '../../functions/local/project-rbac';
import { awsAnnotation, loadBalancerService } from '../support/kube-objects';

const claim = { loadBalancerClass: 'serverless-service-controller.io/nlb', claimClassless: true };
const rbac = loadProjectRbac();
const merge = setHeaderOptions('Content-Type', PatchStrategy.MergePatch);
const slicesPath = '/apis/discovery.k8s.io/v1/endpointslices';

let kube: FakeKubeApiServer;
let api: CoreV1Api;
let forwarder: Forwarder;
/** Everything but heartbeats, as `kind key` lines, in the order sent. */
const forwarded: string[] = [];

function ipService(name: string): V1Service {
  const service = loadBalancerService(name);
  return {
    ...service,
    metadata: { ...service.metadata, annotations: { [awsAnnotation('nlb-target-type')]: 'ip' } },
  };
}

interface Endpoint {
  readonly ip: string;
  readonly ready: boolean;
  readonly zone?: string;
}

/** An EndpointSlice as the EndpointSlice controller writes it: pods, zones, nodes, conditions. */
function slice(name: string, service: string, endpoints: readonly Endpoint[]) {
  return {
    metadata: {
      name,
      namespace: 'default',
      labels: {
        'kubernetes.io/service-name': service,
        'endpointslice.kubernetes.io/managed-by': 'endpointslice-controller.k8s.io',
      } as Record<string, string>,
    },
    addressType: 'IPv4',
    ports: [
      { name: 'http', port: 8080, protocol: 'TCP' },
      { name: 'https', port: 8443, protocol: 'TCP' },
    ],
    endpoints: endpoints.map(({ ip, ready, zone }) => ({
      addresses: [ip],
      conditions: { ready, serving: ready, terminating: false },
      nodeName: 'ip-10-0-1-1.ec2.internal',
      zone: zone ?? 'us-east-1a',
      targetRef: { kind: 'Pod', namespace: 'default', name: `${service}-${ip}` },
    })),
  };
}

function putSlice(body: ReturnType<typeof slice>) {
  const { name } = body.metadata;
  if (kube.store.has('endpointslices', 'default', name))
    kube.store.update('endpointslices', 'default', name, body);
  else kube.store.create('endpointslices', 'default', body);
}

/** Waits until `line` is forwarded, then returns (and forgets) everything forwarded so far. */
async function until(line: string): Promise<string[]> {
  await vi.waitFor(() => expect(forwarded).toContain(line), { timeout: 10_000, interval: 20 });
  return forwarded.splice(0);
}

let markerEndpoints = 0;
/**
 * Changes the marker Service's slice and waits for its message. Slice events are handled in
 * order, so every earlier slice event has been handled by then: what was not sent, never will be.
 */
async function afterEarlierSliceEvents(): Promise<string[]> {
  markerEndpoints++;
  putSlice(
    slice(
      'marker-1',
      'marker',
      Array.from({ length: markerEndpoints }, (_, i) => ({ ip: `10.0.9.${i + 1}`, ready: true })),
    ),
  );
  const lines = await until('targets default/marker');
  return lines.filter((line) => line !== 'targets default/marker');
}

/** Starts the forwarder and the marker; returns what it forwarded besides the marker's. */
async function startForwarder(): Promise<string[]> {
  forwarder = new Forwarder({
    kubeConfig: kube.kubeConfig({ as: rbac.forwarder }),
    claim,
    nodePolicy: 'stable',
    // eslint-disable-next-line @typescript-eslint/require-await -- the queue's shape
    send: async (messages) => {
      for (const m of messages) {
        // Whatever it sends, the functions must accept.
        expect(parseWorkMessage(JSON.stringify(m)).ok, JSON.stringify(m)).toBe(true);
        if (m.kind !== 'heartbeat') forwarded.push(`${m.kind} ${keyOf(m)}`);
      }
    },
    sleep: (ms) => new Promise((resolve) => setTimeout(resolve, Math.min(ms, 50))),
  });
  forwarder.start();
  await vi.waitFor(() => expect(forwarder.ready).toBe(true));
  // The marker: an ip-mode Service whose slice is kept, for afterEarlierSliceEvents.
  await api.createNamespacedService({ namespace: 'default', body: ipService('marker') });
  const initial = await until('service default/marker');
  markerEndpoints = 0;
  initial.push(...(await afterEarlierSliceEvents()));
  return initial.filter((line) => !line.endsWith(' default/marker'));
}

function keyOf(message: WorkMessage): string {
  return 'key' in message ? message.key : '';
}

beforeEach(async () => {
  forwarded.length = 0;
  kube = await FakeKubeApiServer.start({ rbac: rbac.authorizer });
  api = kube.kubeConfig().makeApiClient(CoreV1Api);
});

afterEach(async () => {
  await forwarder?.stop(1000);
  await kube.stop();
  // A call outside the forwarder's ClusterRole fails the test that made it.
  expect(kube.denials.map((d) => d.message)).toEqual([]);
});

describe('the forwarder, for a Service in ip mode', () => {
  it('lists and watches EndpointSlices of every namespace under its ClusterRole, by the service-name label', async () => {
    await startForwarder();
    // Services, Nodes and EndpointSlices; a watch is recorded once it ends.
    await vi.waitFor(() => expect(kube.openWatches).toBe(3));
    kube.dropWatches();
    await vi.waitFor(() =>
      expect(
        kube.requests.filter((r) => r.path === slicesPath && r.query.get('watch') === 'true'),
      ).not.toHaveLength(0),
    );
    const requests = kube.requests.filter((r) => r.path === slicesPath);
    expect(requests.map((r) => [r.user, r.status, r.query.get('watch') ?? 'list'])).toEqual(
      expect.arrayContaining([
        [rbac.forwarder.name, 200, 'list'],
        [rbac.forwarder.name, 200, 'true'],
      ]),
    );
    expect(requests.map((r) => r.query.get('labelSelector'))).toEqual(
      requests.map(() => 'kubernetes.io/service-name'),
    );
    expect(forwarder.failingWatches).toBe(0);
  });

  it('sends one targets message when a slice is added, and one when it gains a ready endpoint', async () => {
    await startForwarder();
    await api.createNamespacedService({ namespace: 'default', body: ipService('web') });
    await until('service default/web');
    putSlice(slice('web-1', 'web', [{ ip: '10.0.1.5', ready: false }]));
    expect(await until('targets default/web')).toEqual(['targets default/web']);
    putSlice(
      slice('web-1', 'web', [
        { ip: '10.0.1.5', ready: false },
        { ip: '10.0.1.6', ready: true },
      ]),
    );
    expect(await until('targets default/web')).toEqual(['targets default/web']);
    expect(await afterEarlierSliceEvents()).toEqual([]);
    // A pod becoming ready is a change too.
    putSlice(
      slice('web-1', 'web', [
        { ip: '10.0.1.5', ready: true },
        { ip: '10.0.1.6', ready: true },
      ]),
    );
    expect(await until('targets default/web')).toEqual(['targets default/web']);
  });

  it('sends nothing for a slice change no target group sees: labels, zones, hints, node names', async () => {
    await startForwarder();
    await api.createNamespacedService({ namespace: 'default', body: ipService('web') });
    await until('service default/web');
    putSlice(slice('web-1', 'web', [{ ip: '10.0.1.5', ready: true }]));
    await until('targets default/web');
    const filtered = forwarder.filtered;
    const moved = slice('web-1', 'web', [{ ip: '10.0.1.5', ready: true, zone: 'us-east-1b' }]);
    putSlice({
      ...moved,
      metadata: { ...moved.metadata, labels: { ...moved.metadata.labels, team: 'shop' } },
      endpoints: moved.endpoints.map((e) => ({
        ...e,
        nodeName: 'ip-10-0-2-2.ec2.internal',
        hints: { forZones: [{ name: 'us-east-1b' }] },
      })),
    });
    kube.store.patch('endpointslices', 'default', 'web-1', 'merge', {
      metadata: { annotations: { 'endpoints.kubernetes.io/last-change-trigger-time': 'now' } },
    });
    expect(await afterEarlierSliceEvents()).toEqual([]);
    expect(forwarder.filtered).toBeGreaterThanOrEqual(filtered + 2);
  });

  it('sends one targets message when a slice is deleted, and forgets it', async () => {
    await startForwarder();
    await api.createNamespacedService({ namespace: 'default', body: ipService('web') });
    await until('service default/web');
    putSlice(slice('web-1', 'web', [{ ip: '10.0.1.5', ready: true }]));
    putSlice(slice('web-2', 'web', [{ ip: '10.0.1.6', ready: true }]));
    await vi.waitFor(() => expect(forwarder.slices.size).toBe(3));
    await until('targets default/web');
    kube.store.delete('endpointslices', 'default', 'web-2');
    expect(await until('targets default/web')).toEqual(['targets default/web']);
    expect(forwarder.slices.size).toBe(2);
  });

  it('forgets the slices of a Service that leaves ip mode or is deleted, and picks them up when it is back', async () => {
    await startForwarder();
    await api.createNamespacedService({ namespace: 'default', body: ipService('web') });
    await api.createNamespacedService({ namespace: 'default', body: ipService('api') });
    await until('service default/api');
    for (const name of ['web-1', 'web-2'])
      putSlice(slice(name, 'web', [{ ip: '10.0.1.5', ready: true }]));
    putSlice(slice('api-1', 'api', [{ ip: '10.0.2.5', ready: true }]));
    await vi.waitFor(() => expect(forwarder.slices.size).toBe(4));
    expect(forwarder.sliceStore.services).toBe(3);
    await afterEarlierSliceEvents();

    await api.patchNamespacedService(
      {
        name: 'web',
        namespace: 'default',
        body: { metadata: { annotations: { [awsAnnotation('nlb-target-type')]: 'instance' } } },
      },
      merge,
    );
    expect(await until('service default/web')).toEqual(['service default/web']);
    await vi.waitFor(() => expect(forwarder.slices.size).toBe(2));
    expect(forwarder.sliceStore.services).toBe(2);
    // Its endpoints are no longer work.
    putSlice(slice('web-1', 'web', [{ ip: '10.0.1.7', ready: true }]));
    expect(await afterEarlierSliceEvents()).toEqual([]);
    expect(forwarder.slices.size).toBe(2);

    await api.deleteNamespacedService({ name: 'api', namespace: 'default' });
    await until('service default/api');
    await vi.waitFor(() => expect(forwarder.slices.size).toBe(1));

    // Back in ip mode: the full sync of its `service` message reads the slices; from then on
    // every change is sent again, a slice not seen since counting as new.
    await api.patchNamespacedService(
      {
        name: 'web',
        namespace: 'default',
        body: { metadata: { annotations: { [awsAnnotation('nlb-target-type')]: 'ip' } } },
      },
      merge,
    );
    await until('service default/web');
    putSlice(slice('web-2', 'web', [{ ip: '10.0.1.8', ready: true }]));
    expect(await until('targets default/web')).toEqual(['targets default/web']);
    expect(forwarder.slices.size).toBe(2);
  });
});

describe('the forwarder, for other slices', () => {
  it('sends nothing and keeps nothing for the slices of a Service not in ip mode, or of none', async () => {
    await startForwarder();
    await api.createNamespacedService({ namespace: 'default', body: loadBalancerService('nodes') });
    await api.createNamespacedService({
      namespace: 'default',
      body: { metadata: { name: 'internal' }, spec: { ports: [{ port: 80 }] } },
    });
    await until('service default/nodes');
    const ignored = ['nodes', 'internal', 'missing'];
    for (const service of ignored)
      putSlice(slice(`${service}-1`, service, [{ ip: '10.0.3.5', ready: true }]));
    const unnamed = slice('unnamed-1', 'x', [{ ip: '10.0.3.6', ready: true }]);
    putSlice({ ...unnamed, metadata: { ...unnamed.metadata, labels: { app: 'x' } } });
    for (const service of ignored)
      putSlice(slice(`${service}-1`, service, [{ ip: '10.0.3.7', ready: false }]));
    for (const service of ignored) kube.store.delete('endpointslices', 'default', `${service}-1`);
    expect(await afterEarlierSliceEvents()).toEqual([]);
    // The marker's slice alone is kept.
    expect(forwarder.slices.size).toBe(1);
    expect(forwarder.sliceStore.services).toBe(1);
  });

  it('covers a slice seen before its Service: the Service’s message, then every change', async () => {
    await startForwarder();
    putSlice(slice('later-1', 'later', [{ ip: '10.0.4.5', ready: true }]));
    expect(await afterEarlierSliceEvents()).toEqual([]);
    expect(forwarder.slices.size).toBe(1);
    await api.createNamespacedService({ namespace: 'default', body: ipService('later') });
    expect(await until('service default/later')).toEqual(['service default/later']);
    putSlice(slice('later-1', 'later', [{ ip: '10.0.4.6', ready: true }]));
    expect(await until('targets default/later')).toEqual(['targets default/later']);
  });

  it('keeps the slices of ip-mode Services found at start, listed after their Services', async () => {
    for (const name of ['a', 'b']) {
      kube.store.create('services', 'default', ipService(name) as never);
      putSlice(slice(`${name}-1`, name, [{ ip: '10.0.5.5', ready: true }]));
    }
    const lines = await startForwarder();
    // Each Service once, and its slice's targets message unless that service message stood for
    // it (still pending when the slice was listed).
    for (const name of ['a', 'b']) {
      expect(lines).toContain(`service default/${name}`);
      expect(lines.filter((l) => l.endsWith(`default/${name}`)).length).toBeLessThanOrEqual(2);
    }
    expect(forwarder.slices.size).toBe(3);
    // So a change no target group sees is not sent, and one it sees is.
    const same = slice('a-1', 'a', [{ ip: '10.0.5.5', ready: true, zone: 'us-east-1c' }]);
    putSlice(same);
    expect(await afterEarlierSliceEvents()).toEqual([]);
    putSlice(slice('a-1', 'a', [{ ip: '10.0.5.6', ready: true }]));
    expect(await until('targets default/a')).toEqual(['targets default/a']);
  });
});
