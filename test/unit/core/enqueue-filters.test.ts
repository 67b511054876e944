import { describe, expect, it } from 'vitest';
import { classFinalizer, upstreamFinalizer, type ClaimPolicy } from '../../../functions/core/claim';
import {
  nodeChangeAffectsHosts,
  shouldEnqueueServiceAdd,
  shouldEnqueueServiceDelete,
  shouldEnqueueServiceUpdate,
} from '../../../functions/core/enqueue-filters';
import { makeNode, makeService } from '../../../kit/core-objects';

const classless: ClaimPolicy = { loadBalancerClass: 'x.io/nlb', claimClassless: true };
const classMode: ClaimPolicy = { loadBalancerClass: 'x.io/nlb', claimClassless: false };

describe('forwarder filters for Services (S1, S2)', () => {
  it('S1: enqueues an added Service that wants an LB from us', () => {
    expect(shouldEnqueueServiceAdd(makeService(), classless)).toBe(true);
    expect(shouldEnqueueServiceAdd(makeService({ loadBalancerClass: 'x.io/nlb' }), classMode)).toBe(
      true,
    );
  });

  it('S1: skips an added ClusterIP Service, and a class-less LoadBalancer Service in class mode', () => {
    expect(shouldEnqueueServiceAdd(makeService({ type: 'ClusterIP' }), classless)).toBe(false);
    expect(shouldEnqueueServiceAdd(makeService(), classMode)).toBe(false);
  });

  it('S1: skips an added LoadBalancer Service of another class in either mode, even one carrying the built-in finalizer', () => {
    const other = makeService({ loadBalancerClass: 'service.k8s.aws/nlb' });
    expect(shouldEnqueueServiceAdd(other, classless)).toBe(false);
    expect(shouldEnqueueServiceAdd(other, classMode)).toBe(false);
    const otherFinalized = makeService({
      loadBalancerClass: 'service.k8s.aws/nlb',
      finalizers: ['service.k8s.aws/resources'],
      deleting: true,
    });
    expect(shouldEnqueueServiceAdd(otherFinalized, classless)).toBe(false);
    expect(shouldEnqueueServiceAdd(otherFinalized, classMode)).toBe(false);
  });

  it('S1: enqueues an added ClusterIP Service that still carries our finalizer (missed type change)', () => {
    const service = makeService({ type: 'ClusterIP', finalizers: [upstreamFinalizer] });
    expect(shouldEnqueueServiceAdd(service, classless)).toBe(true);
  });

  it('S2: an update with old == new enqueues nothing', () => {
    expect(shouldEnqueueServiceUpdate(makeService(), makeService(), classless)).toBe(false);
  });

  it('S2: an update with old == new still enqueues when cleanup is pending', () => {
    const deleting = makeService({
      deleting: true,
      finalizers: [classFinalizer],
      loadBalancerClass: 'x.io/nlb',
    });
    expect(shouldEnqueueServiceUpdate(deleting, deleting, classMode)).toBe(true);
  });

  it('S2: an update that changes a field that matters enqueues', () => {
    const after = makeService({ annotations: { 'x.io/scheme': 'internal' } });
    expect(shouldEnqueueServiceUpdate(makeService(), after, classless)).toBe(true);
  });

  it('enqueues a deleted Service that was ours, so a hand-removed finalizer cannot leak the NLB', () => {
    expect(shouldEnqueueServiceDelete(makeService(), classless)).toBe(true);
    expect(shouldEnqueueServiceDelete(makeService({ type: 'ClusterIP' }), classless)).toBe(false);
  });
});

describe('node filter', () => {
  it('a new eligible node, or a removed one, changes membership', () => {
    expect(nodeChangeAffectsHosts(undefined, makeNode('a'), 'stable')).toBe(true);
    expect(nodeChangeAffectsHosts(makeNode('a'), undefined, 'stable')).toBe(true);
  });

  it('a node that can never be a target (Fargate) does not', () => {
    const fargate = makeNode('f', {
      providerID: 'aws:///us-east-1a/abc/fargate-ip-10-0-0-1.ec2.internal',
    });
    expect(nodeChangeAffectsHosts(undefined, fargate, 'stable')).toBe(false);
  });

  it('stable policy: readiness and cordoning changes do not; the exclusion label does', () => {
    const node = makeNode('a', { instanceId: 'i-0123456789abcdef0' });
    const unready = makeNode('a', {
      instanceId: 'i-0123456789abcdef0',
      ready: 'False',
      unschedulable: true,
    });
    const excluded = makeNode('a', {
      instanceId: 'i-0123456789abcdef0',
      labels: { 'node.kubernetes.io/exclude-from-external-load-balancers': 'true' },
    });
    expect(nodeChangeAffectsHosts(node, unready, 'stable')).toBe(false);
    expect(nodeChangeAffectsHosts(node, excluded, 'stable')).toBe(true);
  });

  it('seed policy: readiness changes do', () => {
    const node = makeNode('a', { instanceId: 'i-0123456789abcdef0' });
    const unready = makeNode('a', { instanceId: 'i-0123456789abcdef0', ready: 'False' });
    expect(nodeChangeAffectsHosts(node, unready, 'seed')).toBe(true);
  });

  it('a providerID change of an eligible node does', () => {
    const before = makeNode('a', { instanceId: 'i-0123456789abcdef0' });
    const after = makeNode('a', { instanceId: 'i-0fedcba9876543210' });
    expect(nodeChangeAffectsHosts(before, after, 'stable')).toBe(true);
  });
});
