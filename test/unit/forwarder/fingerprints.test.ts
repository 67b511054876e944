import { describe, expect, it } from 'vitest';
import { parseWorkMessage } from '../../../functions/contract/work-messages';
import { nodeChangeReason } from '../../../functions/forwarder/forwarder';
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
import {
  labelsDigestKey,
  nodeFingerprint,
  serviceFingerprint,
} from '../../../functions/forwarder/fingerprints';
import {
  loadBalancerTypeAnnotation,
  nlbTargetTypeAnnotation,
} from '../../../functions/forwarder/endpoint-slices';
import { makeNode, makeService } from '../../../kit/core-objects';

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
  // Pod targets: the fingerprint keeps them beside the digest, which must not change any answer.
  makeService({ annotations: { [nlbTargetTypeAnnotation]: 'ip' } }),
  makeService({ annotations: { [nlbTargetTypeAnnotation]: 'ip', a: '1' } }),
  makeService({ annotations: { [nlbTargetTypeAnnotation]: 'instance' } }),
  makeService({ annotations: { [loadBalancerTypeAnnotation]: 'nlb-ip' } }),
  makeService({ type: 'ClusterIP', annotations: { [nlbTargetTypeAnnotation]: 'ip' } }),
  // Spec changes the filters compare, each beside the variants they must treat as equal or not.
  ...specVariants(),
];

/** Each field needsUpdate compares, in forms it treats as equal (defaults, order) and as different. */
function specVariants(): Service[] {
  const lb = (spec: Service['spec']) => makeService({ spec: { type: 'LoadBalancer', ...spec } });
  return [
    lb({ loadBalancerSourceRanges: [] }),
    lb({ loadBalancerSourceRanges: ['10.0.0.0/8', '192.168.0.0/16'] }),
    lb({ loadBalancerSourceRanges: ['192.168.0.0/16', '10.0.0.0/8'] }),
    lb({ externalIPs: [] }),
    lb({ externalIPs: ['198.51.100.1'] }),
    lb({ externalIPs: ['198.51.100.2'] }),
    lb({ externalIPs: ['198.51.100.1', '198.51.100.2'] }),
    lb({ loadBalancerIP: '' }),
    lb({ loadBalancerIP: '198.51.100.7' }),
    lb({ sessionAffinity: 'ClientIP' }),
    lb({ sessionAffinity: undefined }),
    lb({ externalTrafficPolicy: undefined }),
    lb({ healthCheckNodePort: 0 }),
    lb({ healthCheckNodePort: 32000 }),
    lb({ ipFamilies: ['IPv6'] }),
    lb({ ipFamilies: ['IPv4', 'IPv6'] }),
    lb({ ipFamilies: undefined }),
    lb({ ports: [] }),
    lb({ ports: undefined }),
    lb({ ports: [{ port: 80 }] }),
    lb({ ports: [{ name: '', protocol: 'TCP', port: 80, nodePort: 0, appProtocol: '' }] }),
    lb({ ports: [{ port: 80, appProtocol: 'http' }] }),
    lb({ ports: [{ port: 80, nodePort: 30080 }] }),
    lb({ ports: [{ port: 80 }, { port: 443 }] }),
    lb({ ports: [{ port: 443 }, { port: 80 }] }),
    makeService({ annotations: {} }),
    makeService({ annotations: { a: '1', b: '2' } }),
    makeService({ annotations: { b: '2', a: '1' } }),
    makeService({ annotations: { a: '1', b: '3' } }),
    makeService({ annotations: { a: '1' } }),
    makeService({ uid: '' }),
    makeService({ type: 'ClusterIP', finalizers: [upstreamFinalizer, upstreamFinalizer] }),
  ];
}

/** `count` distinct /32 ranges, as a tenant could list them (85,000 fill Kubernetes' object limit). */
function ranges(count: number): string[] {
  return Array.from(
    { length: count },
    (_, i) => `10.${(i >> 16) & 255}.${(i >> 8) & 255}.${i & 255}/32`,
  );
}

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
  // Any label may select targets (target-node-labels): a changed value must get through.
  makeNode('a', { instanceId: 'i-0000000000000000a', labels: { unrelated: 'y' } }),
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

  it('stay under 1 KiB whatever a Service of ours holds (85,000 ranges, 10,000 ports, a 200 KB annotation)', () => {
    const claim = claims[1] as ClaimPolicy;
    const huge = makeService({
      loadBalancerClass: 'x.io/nlb',
      uid: 'u'.repeat(10_000),
      annotations: { note: 'x'.repeat(200_000) },
      finalizers: Array.from({ length: 10_000 }, () => classFinalizer),
      ports: Array.from({ length: 10_000 }, (_, i) => ({ name: `p${i}`, port: i + 1 })),
      spec: {
        loadBalancerSourceRanges: ranges(85_000),
        externalIPs: ranges(10_000).map((r) => r.replace('/32', '')),
        loadBalancerIP: 'y'.repeat(100_000),
        ipFamilies: Array.from({ length: 10_000 }, () => 'IPv4'),
        sessionAffinity: 'z'.repeat(100_000),
        externalTrafficPolicy: 'w'.repeat(100_000),
      },
    });
    expect(JSON.stringify(huge).length).toBeGreaterThan(1_500_000);
    expect(JSON.stringify(serviceFingerprint(huge, claim)).length).toBeLessThan(1024);
    // A Service of ours whose type or class a tenant made huge (cleanup still pending).
    const odd = makeService({
      type: 't'.repeat(100_000),
      loadBalancerClass: 'c'.repeat(100_000),
      finalizers: [classFinalizer],
    });
    expect(JSON.stringify(serviceFingerprint(odd, claim)).length).toBeLessThan(1024);
  });

  it('are equal for equal source range lists and differ for any change to one', () => {
    const claim = claims[0] as ClaimPolicy;
    const withRanges = (list: string[]) =>
      serviceFingerprint(makeService({ spec: { loadBalancerSourceRanges: list } }), claim);
    const base = withRanges(ranges(85_000));
    expect(withRanges(ranges(85_000))).toEqual(base);
    const lastChanged = ranges(85_000);
    lastChanged[84_999] = '10.255.255.255/32';
    const swapped = ranges(85_000);
    [swapped[0], swapped[1]] = [swapped[1] ?? '', swapped[0] ?? ''];
    for (const changed of [lastChanged, swapped, ranges(84_999), ranges(85_001), []]) {
      expect(withRanges(changed)).not.toEqual(base);
      expect(shouldEnqueueServiceUpdate(base, withRanges(changed), claim)).toBe(true);
    }
  });

  it('share one object for all Services that are not ours, so they cost no memory each', () => {
    const claim = claims[0] as ClaimPolicy;
    const a = serviceFingerprint(makeService({ name: 'a', type: 'ClusterIP' }), claim);
    const b = serviceFingerprint(makeService({ name: 'b', type: 'NodePort' }), claim);
    expect(a).toBe(b);
    expect(serviceFingerprint(makeService(), claim)).not.toBe(a);
  });

  it('drop node fields no filter reads (images, heartbeats), and keep other labels as one digest', () => {
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
    expect(fingerprint.metadata?.labels).toEqual({
      [excludeFromLoadBalancersLabel]: '',
      [labelsDigestKey]: expect.stringMatching(/^[\w-]{22}$/) as unknown,
    });
    expect(fingerprint.status?.conditions).toEqual([{ type: 'Ready', status: 'True' }]);
  });
});

describe('node message reasons', () => {
  it('stay within the message schema for the longest node name Kubernetes allows', () => {
    const name = `${'n'.repeat(61)}.${'a'.repeat(63)}.${'b'.repeat(63)}.${'c'.repeat(63)}`;
    expect(name).toHaveLength(253);
    const message = { v: 1, kind: 'node', reason: nodeChangeReason(name, 'changed') };
    expect(parseWorkMessage(JSON.stringify(message)).ok).toBe(true);
    expect(nodeChangeReason('node-a', 'added')).toBe('node node-a added');
  });
});
