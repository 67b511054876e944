import { describe, expect, it } from 'vitest';
import { classFinalizer, upstreamFinalizer, type ClaimPolicy } from '../../../functions/core/claim';
import {
  nodeChangeAffectsHosts,
  shouldEnqueueServiceAdd,
  shouldEnqueueServiceDelete,
  shouldEnqueueServiceUpdate,
} from '../../../functions/core/enqueue-filters';
import {
  clusterAutoscalerDeletionTaint,
  excludeFromLoadBalancersLabel,
  seedExcludeBalancerLabel,
  type NodePolicy,
} from '../../../functions/core/node-policy';
import type { Node, Service } from '../../../functions/core/objects';
import { nodeFingerprint, serviceFingerprint } from '../../../functions/forwarder/fingerprints';
import { makeNode, makeService } from '../../support/core-objects';

const claims: readonly ClaimPolicy[] = [
  { loadBalancerClass: 'x.io/nlb', claimClassless: true },
  { loadBalancerClass: 'x.io/nlb', claimClassless: false },
];

/** Every kind of Service the filters distinguish, with the noise the fingerprints must drop. */
const services: readonly Service[] = [
  makeService(),
  makeService({ type: 'ClusterIP' }),
  makeService({ type: 'NodePort' }),
  makeService({ type: 'ClusterIP', annotations: { a: '1' } }),
  makeService({ loadBalancerClass: 'x.io/nlb' }),
  makeService({ loadBalancerClass: 'other.io/lb' }),
  makeService({ annotations: { 'service.beta.kubernetes.io/aws-load-balancer-scheme': 'x' } }),
  makeService({ uid: 'uid-2' }),
  makeService({ finalizers: [upstreamFinalizer] }),
  makeService({ type: 'ClusterIP', finalizers: [upstreamFinalizer] }),
  makeService({ type: 'ClusterIP', finalizers: [classFinalizer] }),
  makeService({ loadBalancerClass: 'x.io/nlb', finalizers: [classFinalizer], deleting: true }),
  makeService({ finalizers: [upstreamFinalizer], deleting: true }),
  makeService({ type: 'ClusterIP', deleting: true }),
  makeService({ ports: [{ name: 'http', protocol: 'UDP', port: 53, nodePort: 30053 }] }),
  makeService({ spec: { type: 'LoadBalancer', loadBalancerSourceRanges: ['10.0.0.0/8'] } }),
  makeService({ spec: { type: 'LoadBalancer', externalTrafficPolicy: 'Local' } }),
  makeService({ spec: { type: 'ClusterIP', externalTrafficPolicy: 'Local' } }),
  makeService({ hostname: 'status-only.example.com' }),
];

const nodes: readonly Node[] = [
  makeNode('a', { instanceId: 'i-0000000000000000a' }),
  makeNode('a', { instanceId: 'i-0000000000000000b' }),
  makeNode('a', { instanceId: 'i-0000000000000000a', ready: 'False' }),
  makeNode('a', { instanceId: 'i-0000000000000000a', ready: 'Unknown' }),
  makeNode('a', { instanceId: 'i-0000000000000000a', conditions: [] }),
  makeNode('a', {
    instanceId: 'i-0000000000000000a',
    conditions: [{ type: 'MemoryPressure', status: 'False' }],
  }),
  makeNode('a', { instanceId: 'i-0000000000000000a', unschedulable: true }),
  makeNode('a', { instanceId: 'i-0000000000000000a', labels: { unrelated: 'x' } }),
  makeNode('a', {
    instanceId: 'i-0000000000000000a',
    labels: { [excludeFromLoadBalancersLabel]: '' },
  }),
  makeNode('a', {
    instanceId: 'i-0000000000000000a',
    labels: { [seedExcludeBalancerLabel]: 'true' },
  }),
  makeNode('a', {
    instanceId: 'i-0000000000000000a',
    taints: [{ key: clusterAutoscalerDeletionTaint, effect: 'NoSchedule' }],
  }),
  makeNode('a', {
    instanceId: 'i-0000000000000000a',
    taints: [{ key: 'dedicated', effect: 'NoSchedule' }],
  }),
  makeNode('a', { instanceId: 'i-0000000000000000a', deleting: true }),
  makeNode('a', { providerID: 'kind://docker/kind/a' }),
];

describe('forwarder fingerprints', () => {
  it('answer every Service filter as the whole objects do, for every pair of versions', () => {
    for (const claim of claims) {
      for (const before of services) {
        const fpBefore = serviceFingerprint(before, claim);
        expect(shouldEnqueueServiceAdd(fpBefore, claim)).toBe(
          shouldEnqueueServiceAdd(before, claim),
        );
        expect(shouldEnqueueServiceDelete(fpBefore, claim)).toBe(
          shouldEnqueueServiceDelete(before, claim),
        );
        for (const after of services) {
          expect(
            shouldEnqueueServiceUpdate(fpBefore, serviceFingerprint(after, claim), claim),
            `${JSON.stringify(before)} -> ${JSON.stringify(after)}`,
          ).toBe(shouldEnqueueServiceUpdate(before, after, claim));
        }
      }
    }
  });

  it('answer the node-membership filter as the whole objects do, for every pair and policy', () => {
    const policies: readonly NodePolicy[] = ['stable', 'seed'];
    for (const policy of policies) {
      for (const before of [undefined, ...nodes]) {
        for (const after of [undefined, ...nodes]) {
          expect(
            nodeChangeAffectsHosts(
              before && nodeFingerprint(before),
              after && nodeFingerprint(after),
              policy,
            ),
            `${policy}: ${JSON.stringify(before)} -> ${JSON.stringify(after)}`,
          ).toBe(nodeChangeAffectsHosts(before, after, policy));
        }
      }
    }
  });

  it('share one object for all Services that are not ours, so they cost no memory each', () => {
    const claim = claims[0] as ClaimPolicy;
    const a = serviceFingerprint(makeService({ name: 'a', type: 'ClusterIP' }), claim);
    const b = serviceFingerprint(makeService({ name: 'b', type: 'NodePort' }), claim);
    expect(a).toBe(b);
    expect(serviceFingerprint(makeService(), claim)).not.toBe(a);
  });

  it('drop node fields no filter reads (labels, images, heartbeats)', () => {
    const node = makeNode('a', { labels: { team: 'x', [excludeFromLoadBalancersLabel]: '' } });
    const fingerprint = nodeFingerprint({
      ...node,
      status: {
        conditions: [
          { type: 'MemoryPressure', status: 'False' },
          { type: 'Ready', status: 'True' },
        ],
      },
    });
    expect(fingerprint.metadata?.labels).toEqual({ [excludeFromLoadBalancersLabel]: '' });
    expect(fingerprint.status?.conditions).toEqual([{ type: 'Ready', status: 'True' }]);
  });
});
