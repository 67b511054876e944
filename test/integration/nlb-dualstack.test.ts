import {
  AssociateSubnetCidrBlockCommand,
  AssociateVpcCidrBlockCommand,
  DescribeSecurityGroupsCommand,
  DescribeVpcsCommand,
  EC2Client,
} from '@aws-sdk/client-ec2';
import {
  DescribeLoadBalancersCommand,
  ElasticLoadBalancingV2Client,
  SetIpAddressTypeCommand,
  type CreateLoadBalancerCommandInput,
} from '@aws-sdk/client-elastic-load-balancing-v2';
import type { InitializeHandler, InitializeHandlerArguments, MetadataBearer } from '@smithy/types';
import { beforeEach, describe, expect, it } from 'vitest';
import { NlbProvider } from '../../functions/nlb/nlb-provider';
import { readNlbState } from '../../functions/nlb/nlb-state';
import { RetryableError, TerminalError } from '../../functions/core/errors';
import type { Service } from '../../functions/core/objects';
import type { ProviderState } from '../../functions/sync/ports';
import { createAwsCluster } from '../../kit/aws-cluster';
import { makeService, type ServiceOptions } from '../../kit/core-objects';
import { useNlbProviderWorld } from '../support/nlb-provider-world';
import { createTaggedSubnet } from '../support/subnets';

/*
 * Dualstack NLBs against moto: IpAddressType on CreateLoadBalancer, SetIpAddressType, IPv6 subnet
 * CIDRs and Ipv6Ranges in security groups are implemented there. moto ignores SubnetMappings, so
 * pinned IPv6 addresses are checked on the request sent; the rules AWS enforces and moto does not
 * (UDP on dualstack, the per-family rule quota) are unit-tested in test/unit/aws/dualstack.test.ts.
 */

const aws = (suffix: string) => `service.beta.kubernetes.io/aws-load-balancer-${suffix}`;
const dualstack = { [aws('ip-address-type')]: 'dualstack' };

/** The IPv6 /64 given to each of the cluster's two subnets, in subnet order. */
let subnetIpv6: string[];
let ec2: EC2Client;

const nlbWorld = useNlbProviderWorld({ checkLeftovers: false });

beforeEach(async () => {
  ec2 = nlbWorld.cluster.account.client(EC2Client);
  await ec2.send(
    new AssociateVpcCidrBlockCommand({
      VpcId: nlbWorld.cluster.vpcId,
      AmazonProvidedIpv6CidrBlock: true,
    }),
  );
  const vpc = await ec2.send(new DescribeVpcsCommand({ VpcIds: [nlbWorld.cluster.vpcId] }));
  const block = vpc.Vpcs?.[0]?.Ipv6CidrBlockAssociationSet?.[0]?.Ipv6CidrBlock ?? '';
  // A /56 such as 2400:6500:3360:f00::/56: its first /64s end in 00, 01, ...
  const base = block.replace(/::\/56$/, '').replace(/00$/, '');
  subnetIpv6 = nlbWorld.cluster.subnetIds.map((_, i) => `${base}0${i + 1}::/64`);
  for (const [i, subnetId] of nlbWorld.cluster.subnetIds.entries()) {
    await ec2.send(
      new AssociateSubnetCidrBlockCommand({ SubnetId: subnetId, Ipv6CidrBlock: subnetIpv6[i] }),
    );
  }
  nlbWorld.cluster.recorder.reset();
});

const service = (options: ServiceOptions = {}): Service =>
  makeService({ uid: 'uid-web', ...options });

const ensure = (svc: Service, state?: ProviderState) =>
  nlbWorld.provider.ensureLoadBalancer(svc, nlbWorld.cluster.hosts, state);

const elbv2 = () => nlbWorld.cluster.account.client(ElasticLoadBalancingV2Client);

async function loadBalancerOf(state: ProviderState) {
  const found = await elbv2().send(
    new DescribeLoadBalancersCommand({ LoadBalancerArns: [readNlbState(state).loadBalancerArn!] }),
  );
  return found.LoadBalancers?.[0];
}

/** The security group's rules as `protocol:from:peer`, IPv6 peers included. */
async function rulesOf(state: ProviderState): Promise<string[]> {
  const found = await ec2.send(
    new DescribeSecurityGroupsCommand({ GroupIds: [readNlbState(state).securityGroupId!] }),
  );
  return (found.SecurityGroups?.[0]?.IpPermissions ?? [])
    .flatMap((p) =>
      [
        ...(p.IpRanges ?? []).map((r) => r.CidrIp),
        ...(p.Ipv6Ranges ?? []).map((r) => r.CidrIpv6),
      ].map((peer) => `${p.IpProtocol}:${p.FromPort}:${peer}`),
    )
    .sort();
}

describe('ip-address-type dualstack against moto', () => {
  it('creates a dualstack NLB whose security group lets IPv4 and IPv6 clients in, with ICMPv6 for path MTU', async () => {
    const result = await ensure(service({ annotations: dualstack }));
    expect((await loadBalancerOf(result.state))?.IpAddressType).toBe('dualstack');
    expect(await rulesOf(result.state)).toEqual(
      [
        'icmp:3:0.0.0.0/0',
        'icmpv6:2:::/0',
        'tcp:443:0.0.0.0/0',
        'tcp:443:::/0',
        'tcp:80:0.0.0.0/0',
        'tcp:80:::/0',
      ].sort(),
    );
  });

  it('puts IPv6 source ranges in the security group as IPv6 ranges', async () => {
    const result = await ensure(
      service({
        annotations: dualstack,
        spec: { loadBalancerSourceRanges: ['10.0.0.0/8', '2600:1F18::/32'] },
      }),
    );
    expect(await rulesOf(result.state)).toEqual(
      [
        'icmp:3:10.0.0.0/8',
        'icmpv6:2:2600:1f18::/32',
        'tcp:443:10.0.0.0/8',
        'tcp:443:2600:1f18::/32',
        'tcp:80:10.0.0.0/8',
        'tcp:80:2600:1f18::/32',
      ].sort(),
    );
  });

  it('changes the type of an existing NLB in place with SetIpAddressType, and back', async () => {
    const first = await ensure(service());
    const arn = readNlbState(first.state).loadBalancerArn;
    expect((await loadBalancerOf(first.state))?.IpAddressType).toBe('ipv4');
    nlbWorld.cluster.recorder.reset();

    const dual = await ensure(service({ annotations: dualstack }), first.state);
    expect(readNlbState(dual.state).loadBalancerArn).toBe(arn);
    expect((await loadBalancerOf(dual.state))?.IpAddressType).toBe('dualstack');
    expect(nlbWorld.cluster.recorder.count('SetIpAddressType')).toBe(1);
    expect(nlbWorld.cluster.recorder.count('CreateLoadBalancer')).toBe(0);
    expect(await rulesOf(dual.state)).toContain('tcp:80:::/0');

    const back = await ensure(service(), dual.state);
    expect((await loadBalancerOf(back.state))?.IpAddressType).toBe('ipv4');
    expect(await rulesOf(back.state)).toEqual(
      ['icmp:3:0.0.0.0/0', 'tcp:443:0.0.0.0/0', 'tcp:80:0.0.0.0/0'].sort(),
    );
  });

  it('repairs a type changed by hand from what DescribeLoadBalancers already returns', async () => {
    const first = await ensure(service({ annotations: dualstack }));
    await elbv2().send(
      new SetIpAddressTypeCommand({
        LoadBalancerArn: readNlbState(first.state).loadBalancerArn!,
        IpAddressType: 'ipv4',
      }),
    );
    nlbWorld.cluster.recorder.reset();
    const repaired = await ensure(service({ annotations: dualstack }), first.state);
    expect((await loadBalancerOf(repaired.state))?.IpAddressType).toBe('dualstack');
    const calls = nlbWorld.cluster.recorder.byOperation();
    const reads = Object.entries(calls)
      .filter(([op]) => /\.(Describe|Get)/.test(op))
      .reduce((sum, [, n]) => sum + n, 0);
    expect(reads).toBeLessThanOrEqual(8);
    expect(Object.keys(calls).filter((op) => !/\.(Describe|Get)/.test(op))).toEqual([
      'ElasticLoadBalancingV2.SetIpAddressType',
    ]);
  });

  it('passes over discovered subnets without an IPv6 CIDR, as aws-load-balancer-controller does', async () => {
    const plainSubnet = await createTaggedSubnet(ec2, nlbWorld.cluster.vpcId, '10.0.9.0/24', {
      'kubernetes.io/role/internal-elb': '1',
    });
    const dual = await ensure(service({ annotations: dualstack }));
    const zones = (await loadBalancerOf(dual.state))?.AvailabilityZones ?? [];
    expect(zones.map((z) => z.SubnetId).sort()).toEqual([...nlbWorld.cluster.subnetIds].sort());

    const other = await ensure(service({ name: 'plain', uid: 'uid-plain' }));
    const plainZones = (await loadBalancerOf(other.state))?.AvailabilityZones ?? [];
    expect(plainZones.map((z) => z.SubnetId)).toContain(plainSubnet);
  });

  it('retries, naming the subnets, when no discovered subnet has an IPv6 CIDR', async () => {
    const plain = await createAwsCluster();
    const plainProvider = new NlbProvider(plain.clients, plain.settings);
    const error = await plainProvider
      .ensureLoadBalancer(service({ annotations: dualstack }), plain.hosts, undefined)
      .catch((e: unknown) => e);
    expect(error).toBeInstanceOf(RetryableError);
    expect((error as Error).message).toContain(
      `(${[...plain.subnetIds].sort().join(', ')}) has an IPv6 CIDR`,
    );
    expect(await plain.ownedResources()).toEqual([]);
  });

  it('refuses named subnets without an IPv6 CIDR, naming them, before any write', async () => {
    const plainSubnet = await createTaggedSubnet(ec2, nlbWorld.cluster.vpcId, '10.0.9.0/24', {
      Name: 'no-ipv6',
    });
    const svc = service({
      annotations: {
        ...dualstack,
        [aws('subnets')]: `${nlbWorld.cluster.subnetIds[0]},${plainSubnet}`,
      },
    });
    const error = await ensure(svc).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(TerminalError);
    expect((error as Error).message).toMatch(
      new RegExp(`${plainSubnet} has no IPv6 CIDR.*ip-address-type: dualstack`),
    );
    expect((error as Error).message).not.toContain(nlbWorld.cluster.subnetIds[0]!);
    expect(await nlbWorld.cluster.ownedResources()).toEqual([]);
    expect(
      nlbWorld.cluster.recorder.calls.filter((c) => !/^(Describe|Get)/.test(c.operation)),
    ).toEqual([]);
  });

  it('sends pinned IPv6 addresses as subnet mappings when it creates the NLB', async () => {
    const sent: CreateLoadBalancerCommandInput[] = [];
    nlbWorld.cluster.clients.elbv2.middlewareStack.add(
      (next: InitializeHandler<object, MetadataBearer>) =>
        (args: InitializeHandlerArguments<object>) => {
          if (args.input && 'Scheme' in args.input && 'Type' in args.input)
            sent.push(args.input as CreateLoadBalancerCommandInput);
          return next(args);
        },
      { step: 'initialize', name: 'captureCreateLoadBalancer' },
    );
    // Canonical text (no leading zeros), as the controller sends it and AWS reports it.
    const address = (i: number) =>
      subnetIpv6[i]!.replace('::/64', '::a').replace(/(^|:)0+([0-9a-f])/g, '$1$2');
    await ensure(
      service({
        annotations: { ...dualstack, [aws('ipv6-addresses')]: `${address(1)},${address(0)}` },
      }),
    );
    expect(sent).toHaveLength(1);
    expect(sent[0]?.IpAddressType).toBe('dualstack');
    expect(sent[0]?.SubnetMappings?.map((m) => `${m.SubnetId}=${m.IPv6Address}`).sort()).toEqual(
      nlbWorld.cluster.subnetIds.map((id, i) => `${id}=${address(i)}`).sort(),
    );
  });
});
