import {
  CoreV1Api,
  makeInformer,
  PatchStrategy,
  setHeaderOptions,
  type Informer,
  type ObjectCache,
  type V1Service,
} from '@kubernetes/client-node';
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { FakeKubeApiServer } from '../../functions/local/fake-kube';
import { loadBalancerService } from '../support/kube-objects';

type ServiceInformer = Informer<V1Service> & ObjectCache<V1Service>;

describe('fake API server with the client-node informer', () => {
  let server: FakeKubeApiServer;
  let api: CoreV1Api;
  let informer: ServiceInformer;
  let seen: string[];
  let errors: unknown[];

  beforeEach(async () => {
    server = await FakeKubeApiServer.start();
    const kc = server.kubeConfig();
    api = kc.makeApiClient(CoreV1Api);
    seen = [];
    errors = [];
    informer = makeInformer(kc, '/api/v1/services', () => api.listServiceForAllNamespaces());
    informer.on('add', (s) => seen.push(`add ${s.metadata?.name} ${annotation(s)}`));
    informer.on('update', (s) => seen.push(`update ${s.metadata?.name} ${annotation(s)}`));
    informer.on('delete', (s) => seen.push(`delete ${s.metadata?.name}`));
    informer.on('error', (e) => errors.push(e));
  });

  afterEach(async () => {
    await informer.stop();
    await server.stop();
  });

  const annotate = (name: string, value: string) =>
    api.patchNamespacedService(
      { name, namespace: 'default', body: { metadata: { annotations: { step: value } } } },
      setHeaderOptions('Content-Type', PatchStrategy.MergePatch),
    );

  it('delivers add, update and delete over a real watch', async () => {
    await api.createNamespacedService({ namespace: 'default', body: loadBalancerService('a') });
    await informer.start();
    await vi.waitFor(() => expect(seen).toEqual(['add a -']));

    await annotate('a', 'one');
    await api.deleteNamespacedService({ name: 'a', namespace: 'default' });

    await vi.waitFor(() => expect(seen).toEqual(['add a -', 'update a one', 'delete a']));
    expect(errors).toEqual([]);
  });

  it('survives a dropped watch without missing an update made during the gap', async () => {
    await api.createNamespacedService({ namespace: 'default', body: loadBalancerService('a') });
    await informer.start();
    await vi.waitFor(() => expect(server.openWatches).toBe(1));

    // The server ends the watch and the update lands before the client can reconnect.
    server.dropWatches();
    server.store.patch('services', 'default', 'a', 'merge', {
      metadata: { annotations: { step: 'gap' } },
    });

    await vi.waitFor(() => expect(seen).toEqual(['add a -', 'update a gap']));
    await vi.waitFor(() => expect(server.openWatches).toBe(1));
    const resumed = server.requests.filter((r) => r.query.get('watch') === 'true');
    expect(resumed.at(-1)?.query.get('resourceVersion')).not.toBe('');
    expect(errors).toEqual([]);
  });

  it('relists after 410 Gone (sent in the stream) and sees the update made during the gap', async () => {
    await api.createNamespacedService({ namespace: 'default', body: loadBalancerService('a') });
    await informer.start();
    await vi.waitFor(() => expect(server.openWatches).toBe(1));

    server.dropWatches();
    server.store.patch('services', 'default', 'a', 'merge', {
      metadata: { annotations: { step: 'gap' } },
    });
    server.compact();

    await vi.waitFor(() => expect(seen).toEqual(['add a -', 'update a gap']));
    const lists = server.requests.filter(
      (r) => r.method === 'GET' && r.query.get('watch') !== 'true',
    );
    expect(lists).toHaveLength(2);
    expect(errors).toEqual([]);
  });

  it('relists after 410 Gone returned as the HTTP status of the watch', async () => {
    await informer.stop();
    await server.stop();
    server = await FakeKubeApiServer.start({ goneAsHttpStatus: true });
    const kc = server.kubeConfig();
    api = kc.makeApiClient(CoreV1Api);
    informer = makeInformer(kc, '/api/v1/services', () => api.listServiceForAllNamespaces());
    informer.on('update', (s) => seen.push(`update ${s.metadata?.name} ${annotation(s)}`));
    informer.on('error', (e) => errors.push(e));
    await api.createNamespacedService({ namespace: 'default', body: loadBalancerService('a') });
    await informer.start();
    await vi.waitFor(() => expect(server.openWatches).toBe(1));

    server.dropWatches();
    server.store.patch('services', 'default', 'a', 'merge', {
      metadata: { annotations: { step: 'gap' } },
    });
    server.compact();

    await vi.waitFor(() => expect(seen).toEqual(['update a gap']));
    expect(server.requests.some((r) => r.status === 410)).toBe(true);
    expect(errors).toEqual([]);
  });

  it('reports an abruptly reset watch as an informer error, and a restart catches up', async () => {
    await api.createNamespacedService({ namespace: 'default', body: loadBalancerService('a') });
    await informer.start();
    await vi.waitFor(() => expect(server.openWatches).toBe(1));

    server.resetWatches();
    await vi.waitFor(() => expect(errors).toHaveLength(1));
    await annotate('a', 'after-reset');
    await informer.start();

    await vi.waitFor(() => expect(seen).toEqual(['add a -', 'update a after-reset']));
  });
});

function annotation(service: V1Service): string {
  return service.metadata?.annotations?.step ?? '-';
}
