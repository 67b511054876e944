import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { classFinalizer } from '../../functions/core/claim';
import { RetryableError } from '../../functions/core/errors';
import { ClusterConnection } from '../../functions/kube/cluster-connection';
import { KubeApiClient } from '../../functions/kube/kube-api-client';
import { kubeconfigAccess } from '../../functions/kube/kubeconfig';
import { HttpKubernetesApi, servicePageSize } from '../../functions/kube/kubernetes-api';
import { FakeKubeApiServer } from '../../functions/local/fake-kube';

let server: FakeKubeApiServer;
let kube: HttpKubernetesApi;

beforeEach(async () => {
  server = await FakeKubeApiServer.start();
  const client = new KubeApiClient(
    new ClusterConnection(kubeconfigAccess(server.kubeconfigText())),
  );
  kube = new HttpKubernetesApi(() => Promise.resolve(client));
});

afterEach(async () => {
  await server.stop();
});

/** A ClusterIP Service a tenant filled up: `bytes` of annotation, ranges and foreign finalizers. */
function hugeClusterIp(namespace: string, name: string, bytes: number) {
  return {
    metadata: {
      name,
      namespace,
      annotations: { 'example.com/filler': 'x'.repeat(bytes) },
      finalizers: ['example.com/keep', classFinalizer],
    },
    spec: {
      type: 'ClusterIP',
      ports: [{ name: 'http', protocol: 'TCP', port: 80, targetPort: 8080 }],
      loadBalancerSourceRanges: Array.from(
        { length: 500 },
        (_, i) => `10.0.${i >> 8}.${i & 255}/32`,
      ),
    },
  };
}

describe('HttpKubernetesApi.listServices (issue 32, finding 7)', () => {
  it(`reads a namespace's Services in pages of ${servicePageSize}, following the continue token`, async () => {
    for (let i = 0; i < 120; i++) {
      server.store.create('services', 'tenant', hugeClusterIp('tenant', `s-${i}`, 1_000));
    }
    server.store.create('services', 'other', hugeClusterIp('other', 'elsewhere', 10));
    const services = await kube.listServices('tenant');
    expect(services).toHaveLength(120);
    expect(new Set(services.map((s) => s.metadata.name)).size).toBe(120);
    expect(services.every((s) => s.metadata.namespace === 'tenant')).toBe(true);
    const lists = server.requests.filter(
      (r) => r.method === 'GET' && r.path === '/api/v1/namespaces/tenant/services',
    );
    expect(lists.map((r) => r.query.get('limit'))).toEqual(['50', '50', '50']);
    expect(lists.map((r) => r.query.has('continue'))).toEqual([false, true, true]);
  });

  it('keeps a summary of each Service, never its annotations, ranges or ports', async () => {
    const bytes = 200_000;
    for (let i = 0; i < 5; i++) {
      server.store.create('services', 'tenant', hugeClusterIp('tenant', `huge-${i}`, bytes));
    }
    const lbService = {
      metadata: { name: 'lb', namespace: 'tenant' },
      spec: {
        type: 'LoadBalancer',
        loadBalancerClass: 'serverless-service-controller.io/nlb',
        ports: [{ port: 80 }],
      },
    };
    server.store.create('services', 'tenant', lbService);
    server.store.update(
      'services',
      'tenant',
      'lb',
      {
        ...lbService,
        status: {
          loadBalancer: {
            ingress: Array.from({ length: 20 }, (_, i) => ({
              hostname: `lb-${i}.elb.amazonaws.com`,
              ports: [{ port: 80, protocol: 'TCP', error: 'e'.repeat(1000) }],
            })),
          },
        },
      },
      'status',
    );
    const services = await kube.listServices('tenant');
    expect(services).toHaveLength(6);
    // Kept: a few hundred bytes per Service, whatever it holds (each is over 200 KB here).
    for (const service of services) expect(JSON.stringify(service).length).toBeLessThan(1_000);
    const huge = services.find((s) => s.metadata.name === 'huge-0');
    expect(huge).toEqual({
      metadata: {
        name: 'huge-0',
        namespace: 'tenant',
        uid: expect.any(String) as unknown,
        creationTimestamp: expect.any(String) as unknown,
        finalizers: [classFinalizer],
      },
      spec: { type: 'ClusterIP' },
    });
    const lb = services.find((s) => s.metadata.name === 'lb');
    expect(lb?.spec).toEqual({
      type: 'LoadBalancer',
      loadBalancerClass: 'serverless-service-controller.io/nlb',
    });
    expect(lb?.status?.loadBalancer?.ingress).toEqual(
      [0, 1, 2, 3].map((i) => ({ hostname: `lb-${i}.elb.amazonaws.com` })),
    );
  });

  it('reports a throttled list as a RetryableError', async () => {
    server.failNextRequests(1, 429, { path: /\/services$/ });
    const error = await kube.listServices('tenant').catch((e: unknown) => e);
    expect(error).toBeInstanceOf(RetryableError);
    expect((error as Error).message).toBe('list services in tenant: 429 injected failure (429)');
  });
});
