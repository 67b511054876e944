import type { IpPermission } from '@aws-sdk/client-ec2';
import { describe, expect, it } from 'vitest';
import { permissionsOf } from '../../../functions/nlb/execute-security-groups';
import { parseAnnotations } from '../../../functions/nlb/model/annotations';
import { buildDesiredLoadBalancer } from '../../../functions/nlb/model/desired';
import { planChanges } from '../../../functions/nlb/model/plan';
import { sourceRanges } from '../../../functions/nlb/model/source-ranges';
import type {
  DesiredLoadBalancer,
  Observed,
  ObservedLoadBalancer,
  SubnetRef,
} from '../../../functions/nlb/model/types';
import { rulesOf } from '../../../functions/nlb/observe';
import { TerminalError } from '../../../functions/core/errors';
import type { ServicePort } from '../../../functions/core/objects';
import { makeService, type ServiceOptions } from '../../../kit/core-objects';
import { testProviderSettings } from '../../support/nlb-settings';

/*
 * Dualstack NLBs (issue 20, item 3), tested on the model and plan. moto accepts IpAddressType and
 * SetIpAddressType (test/integration/nlb-dualstack.test.ts) but ignores SubnetMappings, so
 * IPv6Address pinning and the AWS rules below (no UDP on a dualstack NLB without IPv6 source NAT,
 * no `dualstack-without-public-ipv4` on NLBs, the per-family rule quota) are covered here only.
 */

const aws = (suffix: string) => `service.beta.kubernetes.io/aws-load-balancer-${suffix}`;
const dualstack = { [aws('ip-address-type')]: 'dualstack' };

const subnets: readonly SubnetRef[] = [
  {
    subnetId: 'subnet-b',
    availabilityZone: 'us-east-1b',
    ipv6CidrBlocks: ['2600:1f18:1:2::/64'],
  },
  {
    subnetId: 'subnet-a',
    availabilityZone: 'us-east-1a',
    ipv6CidrBlocks: ['2600:1f18:1:1::/64'],
  },
];

function build(options: ServiceOptions = {}, refs: readonly SubnetRef[] = subnets) {
  const service = makeService(options);
  return buildDesiredLoadBalancer({
    service,
    hosts: [],
    settings: testProviderSettings,
    options: parseAnnotations(service),
    subnets: refs,
  });
}

function problemOf(action: () => unknown): string {
  try {
    action();
  } catch (error) {
    expect(error).toBeInstanceOf(TerminalError);
    return (error as Error).message;
  }
  throw new Error('expected a TerminalError');
}

describe('annotation aws-load-balancer-ip-address-type', () => {
  it('accepts ipv4 (the default) and dualstack', () => {
    const plain = makeService();
    expect(parseAnnotations(plain).ipAddressType).toBeUndefined();
    expect(build().ipAddressType).toBe('ipv4');
    expect(
      parseAnnotations(makeService({ annotations: { [aws('ip-address-type')]: 'ipv4' } }))
        .ipAddressType,
    ).toBe('ipv4');
    expect(build({ annotations: dualstack }).ipAddressType).toBe('dualstack');
  });

  it('refuses dualstack-without-public-ipv4, which only Application Load Balancers have', () => {
    const service = makeService({
      annotations: { [aws('ip-address-type')]: 'dualstack-without-public-ipv4' },
    });
    expect(problemOf(() => parseAnnotations(service))).toMatch(
      /ip-address-type: invalid value "dualstack-without-public-ipv4": .*Application Load Balancers/,
    );
  });

  it('refuses UDP and TCP_UDP listeners on a dualstack NLB (AWS needs IPv6 source NAT for them)', () => {
    const ports: ServicePort[] = [
      { name: 'dns', protocol: 'UDP', port: 53, nodePort: 30053 },
      { name: 'web', protocol: 'TCP', port: 80, nodePort: 30080 },
    ];
    expect(problemOf(() => build({ annotations: dualstack, ports }))).toMatch(
      /dualstack.*UDP.*port 53/,
    );
    expect(build({ ports }).listeners).toHaveLength(2);
  });
});

describe('annotation aws-load-balancer-ipv6-addresses', () => {
  const pinned = (value: string, extra: Record<string, string> = dualstack) => ({
    annotations: { ...extra, [aws('ipv6-addresses')]: value },
  });

  it('pins one address per subnet, matched to the subnet whose IPv6 CIDR holds it', () => {
    const desired = build(pinned('2600:1f18:1:2::10, 2600:1f18:1:1::20'));
    expect(desired.subnetMappings).toEqual([
      { subnetId: 'subnet-a', ipv6Address: '2600:1f18:1:1::20' },
      { subnetId: 'subnet-b', ipv6Address: '2600:1f18:1:2::10' },
    ]);
  });

  it('refuses values that are not IPv6 addresses', () => {
    for (const bad of ['10.0.0.1', '2600:1f18::1::2', '2600:1f18:1:1::/64', 'g::1']) {
      expect(problemOf(() => build(pinned(bad)))).toMatch(/is not an IPv6 address/);
    }
  });

  it('needs a dualstack NLB', () => {
    expect(problemOf(() => build(pinned('2600:1f18:1:1::20,2600:1f18:1:2::10', {})))).toMatch(
      /ipv6-addresses needs .*ip-address-type: dualstack/,
    );
  });

  it('needs one address per subnet', () => {
    expect(problemOf(() => build(pinned('2600:1f18:1:1::20')))).toMatch(
      /ipv6-addresses lists 1 values for 2 subnets/,
    );
  });

  it('refuses an address outside every subnet, naming the subnet left without one', () => {
    expect(problemOf(() => build(pinned('2600:1f18:1:1::20,2600:1f18:9:9::1')))).toMatch(
      /2600:1f18:9:9::1 is in none .*subnet-b/,
    );
    expect(problemOf(() => build(pinned('2600:1f18:1:1::20,2600:1f18:1:1::21')))).toMatch(
      /subnet-a.*2 addresses|subnet-b has none/,
    );
  });
});

describe('source ranges of a dualstack NLB', () => {
  const ranges = (
    spec: readonly string[] | undefined,
    annotations: Record<string, string> = {},
  ) => {
    const service = makeService({
      annotations,
      ...(spec === undefined ? {} : { spec: { loadBalancerSourceRanges: spec } }),
    });
    return sourceRanges(service, parseAnnotations(service));
  };

  it('defaults to everyone over IPv4 and IPv6', () => {
    expect(ranges(undefined, dualstack)).toEqual(['0.0.0.0/0', '::/0']);
    expect(ranges(undefined)).toEqual(['0.0.0.0/0']);
  });

  it('takes IPv6 CIDRs, in any letter case and compressed form, as canonical lower case', () => {
    expect(ranges(['2600:1F18:0000::/40', '10.0.0.0/8'], dualstack)).toEqual([
      '10.0.0.0/8',
      '2600:1f18::/40',
    ]);
    expect(
      ranges([], {
        ...dualstack,
        'service.beta.kubernetes.io/load-balancer-source-ranges': '::/0',
      }),
    ).toEqual(['::/0']);
  });

  it('refuses an IPv6 CIDR with host bits set, suggesting the network', () => {
    expect(problemOf(() => ranges(['2600:1f18::1/64'], dualstack))).toMatch(
      /"2600:1f18::1\/64" has host bits set; did you mean 2600:1f18::\/64\?/,
    );
  });

  it('refuses malformed IPv6 CIDRs', () => {
    for (const bad of ['2600:1f18::/129', '2600:1f18::', '2600:::1/64', '2600:1f18::/064']) {
      expect(problemOf(() => ranges([bad], dualstack))).toMatch(/is not an IPv6 CIDR/);
    }
  });

  it('refuses IPv6 CIDRs on an IPv4 NLB, saying how to allow them', () => {
    expect(problemOf(() => ranges(['2600:1f18::/40']))).toMatch(
      /"2600:1f18::\/40" is an IPv6 range: .*ip-address-type: dualstack/,
    );
  });
});

describe('security group of a dualstack NLB', () => {
  it('opens each listener to IPv6 ranges and adds ICMPv6 packet-too-big for path MTU discovery', () => {
    const desired = build({ annotations: dualstack });
    expect(desired.securityGroup.ingress).toEqual(
      expect.arrayContaining([
        { protocol: 'tcp', fromPort: 80, toPort: 80, cidr: '::/0' },
        { protocol: 'tcp', fromPort: 443, toPort: 443, cidr: '::/0' },
        { protocol: 'icmpv6', fromPort: 2, toPort: 0, cidr: '::/0' },
        { protocol: 'icmp', fromPort: 3, toPort: 4, cidr: '0.0.0.0/0' },
      ]),
    );
    expect(desired.securityGroup.ingress).toHaveLength(6);
    expect(desired.securityGroup.ingress.filter((r) => r.cidr === '::/0')).not.toContainEqual(
      expect.objectContaining({ protocol: 'icmp' }),
    );
  });

  it('counts IPv4 and IPv6 rules apart against the 60-rule quota, as AWS does', () => {
    // 2 listeners + ICMP = 3 rules per range: 20 ranges of each family make 60 and 60.
    const v4 = Array.from({ length: 20 }, (_, i) => `10.${i}.0.0/16`);
    const v6 = Array.from({ length: 20 }, (_, i) => `2600:1f18:${i.toString(16)}::/48`);
    const fits = build({
      annotations: dualstack,
      spec: { loadBalancerSourceRanges: [...v4, ...v6] },
    });
    expect(fits.securityGroup.ingress).toHaveLength(120);
    const over = [...v4, ...v6, '2600:1f18:ff::/48'];
    expect(
      problemOf(() => build({ annotations: dualstack, spec: { loadBalancerSourceRanges: over } })),
    ).toMatch(/21 IPv6 source ranges on 2 listeners need 63 security group rules/);
  });

  it('sends ICMPv6 rules as Ipv6Ranges and reads them back, whether EC2 says icmpv6 or 58', () => {
    const rule = { protocol: 'icmpv6', fromPort: 2, toPort: 0, cidr: '::/0' } as const;
    expect(permissionsOf([rule])).toEqual([
      { IpProtocol: 'icmpv6', FromPort: 2, ToPort: 0, Ipv6Ranges: [{ CidrIpv6: '::/0' }] },
    ]);
    const described = (IpProtocol: string): IpPermission[] => [
      { IpProtocol, FromPort: 2, ToPort: 0, Ipv6Ranges: [{ CidrIpv6: '::/0' }] },
    ];
    expect(rulesOf(described('icmpv6'))).toEqual([rule]);
    expect(rulesOf(described('58'))).toEqual([rule]);
  });
});

describe('planning the IP address type', () => {
  function observedFor(desired: DesiredLoadBalancer, lb: Partial<ObservedLoadBalancer>): Observed {
    return {
      loadBalancer: {
        arn: 'arn:lb',
        name: desired.name,
        dnsName: 'lb.example',
        scheme: desired.scheme,
        subnetIds: desired.subnetMappings.map((m) => m.subnetId),
        pinnedAddresses: [],
        securityGroupIds: ['sg-1', testProviderSettings.backendSecurityGroupId ?? ''].filter(
          Boolean,
        ),
        tags: desired.tags,
        ...lb,
      },
      listeners: [],
      targetGroups: [],
      securityGroup: { id: 'sg-1', name: 'sg', ingress: desired.securityGroup.ingress, tags: {} },
    };
  }
  const kinds = (desired: DesiredLoadBalancer, observed: Observed) =>
    planChanges(desired, observed)
      .steps.map((s) => s.kind)
      .filter((k) => k === 'setIpAddressType' || k === 'deleteLoadBalancer');

  it('creates the NLB with its IP address type', () => {
    const desired = build({ annotations: dualstack });
    const plan = planChanges(desired, { listeners: [], targetGroups: [] });
    const create = plan.steps.find((s) => s.kind === 'createLoadBalancer');
    expect(create?.kind === 'createLoadBalancer' && create.loadBalancer.ipAddressType).toBe(
      'dualstack',
    );
  });

  it('changes the type of an existing NLB in place, either way, and only when it differs', () => {
    const toDual = build({ annotations: dualstack });
    expect(kinds(toDual, observedFor(toDual, { ipAddressType: 'ipv4' }))).toEqual([
      'setIpAddressType',
    ]);
    expect(
      planChanges(toDual, observedFor(toDual, { ipAddressType: 'ipv4' })).steps,
    ).toContainEqual({ kind: 'setIpAddressType', ipAddressType: 'dualstack' });
    const toV4 = build();
    expect(kinds(toV4, observedFor(toV4, { ipAddressType: 'dualstack' }))).toEqual([
      'setIpAddressType',
    ]);
    expect(kinds(toDual, observedFor(toDual, { ipAddressType: 'dualstack' }))).toEqual([]);
  });

  it('refuses to change pinned IPv6 addresses of an existing NLB, and ignores addresses it does not pin', () => {
    const desired = build({
      annotations: { ...dualstack, [aws('ipv6-addresses')]: '2600:1f18:1:1::20,2600:1f18:1:2::10' },
    });
    const a = { subnetId: 'subnet-a', privateIPv4Address: '10.0.1.5' };
    const b = {
      subnetId: 'subnet-b',
      privateIPv4Address: '10.0.2.5',
      ipv6Address: '2600:1f18:1:2::10',
    };
    const assigned = [{ ...a, ipv6Address: '2600:1f18:1:1::20' }, b];
    const same = observedFor(desired, { ipAddressType: 'dualstack', pinnedAddresses: assigned });
    expect(() => planChanges(desired, same)).not.toThrow();
    const other = observedFor(desired, {
      ipAddressType: 'dualstack',
      pinnedAddresses: [{ ...a, ipv6Address: '2600:1f18:1:1::99' }, b],
    });
    expect(problemOf(() => planChanges(desired, other))).toMatch(
      /ipv6-addresses apply only when the load balancer is created/,
    );
  });
});
