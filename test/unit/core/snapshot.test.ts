import { describe, expect, it } from 'vitest';
import { sameSnapshot, serviceSnapshot } from '../../../functions/core/snapshot';

describe('serviceSnapshot', () => {
  const service = {
    metadata: {
      name: 'web',
      namespace: 'team-a',
      uid: 'u1',
      resourceVersion: '7',
      annotations: {
        'service.beta.kubernetes.io/aws-load-balancer-scheme': 'internet-facing',
        'serverless-service-controller.io/resync': '1',
        'kubectl.kubernetes.io/last-applied-configuration': 'x'.repeat(200_000),
        'example.com/owner': 'team-a',
      },
    },
    spec: { type: 'LoadBalancer', ports: [{ port: 80, protocol: 'TCP' }] },
    status: { loadBalancer: {} },
  };

  it("keeps the load balancer's annotations and drops the rest (kubectl's may be 256 KiB)", () => {
    const snapshot = serviceSnapshot(service);
    expect(snapshot.metadata?.annotations).toEqual({
      'service.beta.kubernetes.io/aws-load-balancer-scheme': 'internet-facing',
      'serverless-service-controller.io/resync': '1',
    });
    expect(JSON.stringify(snapshot).length).toBeLessThan(1000);
    expect(snapshot).not.toHaveProperty('status');
  });

  it('is unchanged by a change to annotations no load balancer reads', () => {
    const other = {
      ...service,
      metadata: {
        ...service.metadata,
        annotations: { ...service.metadata.annotations, 'example.com/owner': 'team-b' },
      },
    };
    expect(sameSnapshot(serviceSnapshot(service), serviceSnapshot(other))).toBe(true);
  });

  it('has no annotations field when none is ours', () => {
    const snapshot = serviceSnapshot({
      metadata: { name: 'a', annotations: { 'example.com/x': 'y' } },
    });
    expect(snapshot.metadata).not.toHaveProperty('annotations');
  });
});
