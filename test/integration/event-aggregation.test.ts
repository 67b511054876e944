import { CoreV1Api } from '@kubernetes/client-node';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { events } from '../../functions/core/events';
import { KubeEventRecorder } from '../../functions/kube/event-recorder';
import { KubeApiClient } from '../../functions/kube/kube-api-client';
import { ClusterConnection } from '../../functions/kube/cluster-connection';
import { kubeconfigAccess } from '../../functions/kube/kubeconfig';
import { FakeKubeApiServer } from '../../functions/local/fake-kube';

let server: FakeKubeApiServer;

beforeEach(async () => {
  server = await FakeKubeApiServer.start();
});

afterEach(async () => {
  await server.stop();
});

describe('Event aggregation across instances', () => {
  it('counts every repeat when several recorders bump the same Event at once', async () => {
    const api = server.kubeConfig().makeApiClient(CoreV1Api);
    const client = new KubeApiClient(
      new ClusterConnection(kubeconfigAccess(server.kubeconfigText())),
    );
    const clock = { now: () => new Date('2026-11-30T12:00:00Z') };
    const errors: unknown[] = [];
    const recorders = Array.from(
      { length: 3 },
      () =>
        new KubeEventRecorder(
          () => Promise.resolve(client),
          clock,
          (error) => errors.push(error),
        ),
    );
    const web = { kind: 'Service' as const, namespace: 'default', name: 'web', uid: 'uid-1' };
    await recorders[0]!.record(web, events.syncFailed('throttled'));
    await Promise.all(
      recorders.flatMap((recorder) =>
        [1, 2].map(() => recorder.record(web, events.syncFailed('throttled'))),
      ),
    );
    const list = await api.listNamespacedEvent({ namespace: 'default' });
    expect(errors).toEqual([]);
    expect(list.items).toHaveLength(1);
    expect(list.items[0]?.count).toBe(7);
  });
});
