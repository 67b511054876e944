import { describe, expect, it } from 'vitest';
import type { ClaimPolicy } from '../../../functions/core/claim';
import { needsUpdate, portsEqualForLB } from '../../../functions/core/needs-update';
import type { Service } from '../../../functions/core/objects';
import { makeService, type ServiceOptions } from '../../../kit/core-objects';

const claim: ClaimPolicy = { loadBalancerClass: 'x.io/nlb', claimClassless: true };

function diff(before: ServiceOptions, after: ServiceOptions) {
  return needsUpdate(makeService(before), makeService(after), claim);
}

describe('needsUpdate', () => {
  it('reports nothing when old and new are the same', () => {
    expect(diff({}, {})).toEqual([]);
  });

  it('reports nothing when neither version wants a load balancer', () => {
    expect(diff({ type: 'ClusterIP' }, { type: 'NodePort' })).toEqual([]);
  });

  it('reports the wants-LB flip with the seed’s Type event', () => {
    expect(diff({ type: 'ClusterIP' }, {})).toEqual([
      {
        field: 'type',
        event: { type: 'Normal', reason: 'Type', message: 'ClusterIP -> LoadBalancer' },
      },
    ]);
  });

  it.each<
    [string, Service['spec'], Service['spec'], string, string | undefined, string | undefined]
  >([
    [
      'source ranges',
      {},
      { loadBalancerSourceRanges: ['10.0.0.0/8', '192.168.0.0/16'] },
      'loadBalancerSourceRanges',
      'LoadBalancerSourceRanges',
      '[] -> [10.0.0.0/8 192.168.0.0/16]',
    ],
    [
      'sessionAffinity',
      {},
      { sessionAffinity: 'ClientIP' },
      'sessionAffinity',
      undefined,
      undefined,
    ],
    [
      'loadBalancerIP',
      {},
      { loadBalancerIP: '1.2.3.4' },
      'loadBalancerIP',
      'LoadbalancerIP',
      ' -> 1.2.3.4',
    ],
    [
      'externalIPs count',
      { externalIPs: ['1.1.1.1'] },
      { externalIPs: ['1.1.1.1', '2.2.2.2'] },
      'externalIPs',
      'ExternalIP',
      'Count: 1 -> 2',
    ],
    [
      'externalIPs element',
      { externalIPs: ['1.1.1.1', '2.2.2.2'] },
      { externalIPs: ['1.1.1.1', '3.3.3.3'] },
      'externalIPs',
      'ExternalIP',
      'Added: 3.3.3.3',
    ],
    [
      'externalTrafficPolicy',
      {},
      { externalTrafficPolicy: 'Local' },
      'externalTrafficPolicy',
      'ExternalTrafficPolicy',
      'Cluster -> Local',
    ],
    [
      'healthCheckNodePort',
      {},
      { healthCheckNodePort: 32000 },
      'healthCheckNodePort',
      'HealthCheckNodePort',
      '0 -> 32000',
    ],
    ['ipFamilies length', {}, { ipFamilies: ['IPv4', 'IPv6'] }, 'ipFamilies', undefined, undefined],
  ])('reports a change of %s', (_name, before, after, field, reason, message) => {
    const changes = diff({ spec: before }, { spec: after });
    expect(changes.map((c) => c.field)).toEqual([field]);
    expect(changes[0]?.event?.reason).toBe(reason);
    expect(changes[0]?.event?.message).toBe(message);
    if (reason !== undefined) expect(changes[0]?.event?.type).toBe('Normal');
  });

  it('reports port changes (name, protocol, port, nodePort, appProtocol) without an event', () => {
    const base = [{ name: 'http', protocol: 'TCP', port: 80, nodePort: 30080 }];
    for (const changed of [
      [{ ...base[0]!, name: 'web' }],
      [{ ...base[0]!, protocol: 'UDP' }],
      [{ ...base[0]!, port: 8080 }],
      [{ ...base[0]!, nodePort: 30081 }],
      [{ ...base[0]!, appProtocol: 'http' }],
      [...base, { name: 'dns', protocol: 'UDP', port: 53, nodePort: 30053 }],
    ]) {
      expect(diff({ ports: base }, { ports: changed })).toEqual([{ field: 'ports' }]);
    }
  });

  it('reports annotation and UID changes (UID with the seed’s event)', () => {
    expect(diff({}, { annotations: { a: 'b' } })).toEqual([{ field: 'annotations' }]);
    expect(diff({ uid: 'one' }, { uid: 'two' })).toEqual([
      { field: 'uid', event: { type: 'Normal', reason: 'UID', message: 'one -> two' } },
    ]);
  });

  it('reports every differing field, one change each, instead of stopping at the first', () => {
    const changes = diff(
      {},
      {
        annotations: { a: 'b' },
        spec: { loadBalancerSourceRanges: ['10.0.0.0/8'], externalTrafficPolicy: 'Local' },
      },
    );
    expect(changes.map((c) => c.field)).toEqual([
      'loadBalancerSourceRanges',
      'annotations',
      'externalTrafficPolicy',
    ]);
  });

  it('does not count a mixed-protocol Service as changed when nothing changed (seed quirk not ported)', () => {
    const mixed = {
      ports: [
        { name: 'dns-tcp', protocol: 'TCP', port: 53, nodePort: 30053 },
        { name: 'dns-udp', protocol: 'UDP', port: 53, nodePort: 30053 },
      ],
    };
    expect(diff(mixed, mixed)).toEqual([]);
  });

  it('ignores fields that cannot change the LB: labels, finalizers, status, resourceVersion', () => {
    const before = makeService({ finalizers: ['a/b'], hostname: 'x' });
    const after = {
      ...makeService({}),
      metadata: { ...makeService({}).metadata, labels: { a: 'b' }, resourceVersion: '200' },
    };
    expect(needsUpdate(before, after, claim)).toEqual([]);
  });
});

describe('portsEqualForLB', () => {
  it('treats an unset protocol as TCP, as the API server defaults it', () => {
    expect(
      portsEqualForLB([{ port: 80, nodePort: 1 }], [{ port: 80, nodePort: 1, protocol: 'TCP' }]),
    ).toBe(true);
  });

  it('is order-sensitive', () => {
    const a = { port: 80, nodePort: 1 };
    const b = { port: 81, nodePort: 2 };
    expect(portsEqualForLB([a, b], [b, a])).toBe(false);
  });
});
