import { describe, expect, it } from 'vitest';
import { classFinalizer, upstreamFinalizer, type ClaimPolicy } from '../../../functions/core/claim';
import type { Service } from '../../../functions/core/objects';
import {
  asksForIpTargets,
  inIpMode,
  loadBalancerTypeAnnotation,
  nlbTargetTypeAnnotation,
  serviceKeyOfSlice,
  servicesToSync,
  sliceDigest,
  SliceStore,
  type EndpointSliceObject,
} from '../../../functions/forwarder/endpoint-slices';
import { serviceFingerprint } from '../../../functions/forwarder/fingerprints';
import { makeService } from '../../../kit/core-objects';

const claims: readonly ClaimPolicy[] = [
  { loadBalancerClass: 'x.io/nlb', claimClassless: true },
  { loadBalancerClass: 'x.io/nlb', claimClassless: false },
];

const ip = { [nlbTargetTypeAnnotation]: 'ip' };

/** Services in and out of ip mode, by each of the conditions that decide it. */
const services: readonly Service[] = [
  makeService(),
  makeService({ annotations: ip }),
  makeService({ annotations: { [nlbTargetTypeAnnotation]: 'instance' } }),
  makeService({ annotations: { [nlbTargetTypeAnnotation]: 'IP' } }),
  makeService({ annotations: { [nlbTargetTypeAnnotation]: ' ip' } }),
  makeService({ annotations: { [loadBalancerTypeAnnotation]: 'nlb-ip' } }),
  makeService({ annotations: { [loadBalancerTypeAnnotation]: 'nlb' } }),
  makeService({
    annotations: { [loadBalancerTypeAnnotation]: 'nlb-ip', [nlbTargetTypeAnnotation]: 'instance' },
  }),
  makeService({ annotations: { ...ip, [loadBalancerTypeAnnotation]: 'nlb-ip' } }),
  makeService({ annotations: ip, loadBalancerClass: 'x.io/nlb' }),
  makeService({ annotations: ip, loadBalancerClass: 'other.io/lb' }),
  makeService({ annotations: ip, type: 'ClusterIP' }),
  makeService({ annotations: ip, type: 'ClusterIP', finalizers: [classFinalizer] }),
  makeService({ annotations: ip, type: 'ClusterIP', finalizers: [upstreamFinalizer] }),
  makeService({ annotations: ip, deleting: true, finalizers: [upstreamFinalizer] }),
];

function slice(overrides: Partial<EndpointSliceObject> = {}): EndpointSliceObject {
  return {
    metadata: {
      name: 'web-abcde',
      namespace: 'shop',
      resourceVersion: '7',
      labels: {
        'kubernetes.io/service-name': 'web',
        'endpointslice.kubernetes.io/managed-by': 'x',
      },
    },
    addressType: 'IPv4',
    ports: [{ name: 'http', port: 8080, protocol: 'TCP' }],
    endpoints: [
      {
        addresses: ['10.0.1.5'],
        conditions: { ready: true, serving: true, terminating: false },
        targetRef: { kind: 'Pod' },
      },
      {
        addresses: ['10.0.1.6'],
        conditions: { ready: false, serving: false, terminating: false },
        targetRef: { kind: 'Pod' },
      },
    ],
    ...overrides,
  };
}

describe('ip mode', () => {
  it('is read the same from a Service and from its fingerprint, for every claim', () => {
    for (const claim of claims) {
      for (const service of services) {
        expect(inIpMode(serviceFingerprint(service, claim), claim), JSON.stringify(service)).toBe(
          inIpMode(service, claim),
        );
      }
    }
  });

  it('asks for `ip` exactly, or the legacy `type: nlb-ip`, as the provider reads them', () => {
    expect(services.map((s) => asksForIpTargets(s))).toEqual([
      false,
      true,
      false,
      false,
      false,
      true,
      false,
      // A conflicting pair: the provider takes it for pod targets, and its Ensure reports it.
      true,
      true,
      true,
      true,
      true,
      true,
      true,
      true,
    ]);
  });

  it('needs a load balancer from us, or our finalizer still on the Service', () => {
    const claim = claims[1] as ClaimPolicy;
    // Of our class, or with our own finalizer; upstream's is not ours on a class-less Service.
    expect(services.flatMap((s, i) => (inIpMode(s, claim) ? [i] : []))).toEqual([9, 12]);
    expect(services.flatMap((s, i) => (inIpMode(s, claims[0] as ClaimPolicy) ? [i] : []))).toEqual([
      1, 5, 7, 8, 9, 12, 13, 14,
    ]);
    expect(inIpMode(makeService({ annotations: ip, loadBalancerClass: 'x.io/nlb' }), claim)).toBe(
      true,
    );
    expect(inIpMode(makeService({ annotations: ip }), claim)).toBe(false);
    expect(
      inIpMode(
        makeService({ annotations: ip, type: 'ClusterIP', finalizers: [classFinalizer] }),
        claim,
      ),
    ).toBe(true);
  });
});

describe('slice fingerprints', () => {
  it('name the Service of the slice’s label in the slice’s namespace, or none', () => {
    expect(serviceKeyOfSlice(slice())).toBe('shop/web');
    expect(
      serviceKeyOfSlice(slice({ metadata: { name: 'x', namespace: 'shop' } })),
    ).toBeUndefined();
    expect(
      serviceKeyOfSlice(
        slice({
          metadata: { name: 'x', namespace: 'shop', labels: { 'kubernetes.io/service-name': '' } },
        }),
      ),
    ).toBeUndefined();
  });

  it('ignore what cannot change a target: labels, zones, hints, node names, order, versions', () => {
    const base = sliceDigest(slice());
    expect(base).toMatch(/^[\w-]{22}$/);
    const endpoints = slice().endpoints ?? [];
    const same: EndpointSliceObject[] = [
      slice({ metadata: { name: 'web-abcde', namespace: 'shop', resourceVersion: '8' } }),
      slice({
        endpoints: endpoints.map((e) => ({
          ...e,
          zone: 'us-east-1a',
          nodeName: 'ip-10-0-1-1',
          hints: { forZones: [{ name: 'us-east-1a' }] },
          targetRef: { kind: 'Pod', name: 'web-1', namespace: 'shop', uid: 'u' },
        })),
      }),
      slice({ endpoints: [...endpoints].reverse() }),
      // A second address is never a target; a not-ready endpoint that is not terminating neither.
      slice({
        endpoints: endpoints.map((e) => ({
          ...e,
          addresses: [...(e.addresses ?? []), '10.9.9.9'],
        })),
      }),
      slice({ endpoints: endpoints.slice(0, 1) }),
      slice({
        endpoints: [
          ...endpoints,
          { addresses: ['10.0.1.7'], conditions: { ready: true }, targetRef: { kind: 'Node' } },
        ],
      }),
      slice({ endpoints: endpoints.map((e, i) => (i === 0 ? { ...e, conditions: {} } : e)) }),
    ];
    for (const s of same) expect(sliceDigest(s), JSON.stringify(s)).toBe(base);
  });

  it('change with anything a target group reads', () => {
    const base = sliceDigest(slice());
    const endpoints = slice().endpoints ?? [];
    const changed: EndpointSliceObject[] = [
      slice({ addressType: 'IPv6' }),
      slice({ ports: [{ name: 'http', port: 8081, protocol: 'TCP' }] }),
      slice({ ports: [{ name: 'http', port: 8080, protocol: 'UDP' }] }),
      slice({ ports: [{ name: 'web', port: 8080, protocol: 'TCP' }] }),
      slice({ endpoints: [] }),
      slice({ endpoints: null }),
      slice({ endpoints: endpoints.map((e) => ({ ...e, conditions: { ready: true } })) }),
      slice({
        endpoints: endpoints.map((e, i) =>
          i === 0 ? { ...e, conditions: { ready: false, terminating: true } } : e,
        ),
      }),
      slice({
        endpoints: endpoints.map((e, i) => (i === 0 ? { ...e, addresses: ['10.0.1.8'] } : e)),
      }),
    ];
    const digests = changed.map((s) => sliceDigest(s));
    for (const digest of digests) expect(digest).not.toBe(base);
    // An empty slice and one whose endpoints are null (as the API serves an empty one) are one.
    expect(digests[4]).toBe(digests[5]);
  });

  it('send the Service whose digest changed, both Services of a moved slice, and none for no change', () => {
    const a = { service: 'shop/a', digest: 'd1' };
    expect(servicesToSync(undefined, a)).toEqual(['shop/a']);
    expect(servicesToSync(a, undefined)).toEqual(['shop/a']);
    expect(servicesToSync(a, { ...a })).toEqual([]);
    expect(servicesToSync(a, { ...a, digest: 'd2' })).toEqual(['shop/a']);
    expect(servicesToSync(a, { service: 'shop/b', digest: 'd1' })).toEqual(['shop/a', 'shop/b']);
    expect(servicesToSync(undefined, undefined)).toEqual([]);
  });
});

describe('SliceStore', () => {
  it('keeps slices by key and by Service, and forgets a Service’s slices at once', () => {
    const store = new SliceStore();
    store.set('shop/a-1', { service: 'shop/a', digest: '1' });
    store.set('shop/a-2', { service: 'shop/a', digest: '2' });
    store.set('shop/b-1', { service: 'shop/b', digest: '3' });
    expect([store.size, store.services]).toEqual([3, 2]);
    // A slice relabelled to another Service moves with it.
    store.set('shop/a-2', { service: 'shop/b', digest: '2' });
    expect(store.forgetService('shop/a')).toBe(1);
    expect([...store.keys()].sort()).toEqual(['shop/a-2', 'shop/b-1']);
    expect(store.get('shop/a-1')).toBeUndefined();
    store.delete('shop/b-1');
    store.delete('shop/missing');
    expect([store.size, store.services]).toEqual([1, 1]);
    expect(store.forgetService('shop/b')).toBe(1);
    expect(store.forgetService('shop/b')).toBe(0);
    expect([store.size, store.services]).toEqual([0, 0]);
  });
});
