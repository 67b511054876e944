/**
 * aws-load-balancer-security-groups, -manage-backend-security-group-rules and
 * -security-group-prefix-lists against moto (issue 20, items 6 and 7). moto implements what these
 * need: DescribeSecurityGroups filters (group-id, vpc-id, tag:Name), SetSecurityGroups on NLBs,
 * prefix lists in security group rules and CreateManagedPrefixList. The AWS rules it does not
 * check are in test/unit/aws/security-group-options.test.ts.
 */
import {
  CreateManagedPrefixListCommand,
  CreateSecurityGroupCommand,
  CreateVpcCommand,
  DescribeSecurityGroupsCommand,
  EC2Client,
} from '@aws-sdk/client-ec2';
import {
  DescribeLoadBalancersCommand,
  ElasticLoadBalancingV2Client,
} from '@aws-sdk/client-elastic-load-balancing-v2';
import { beforeEach, describe, expect, it } from 'vitest';
import { readNlbState, toProviderState } from '../../functions/nlb/nlb-state';
import { TerminalError } from '../../functions/core/errors';
import type { Service } from '../../functions/core/objects';
import type { ProviderState } from '../../functions/sync/ports';
import { makeService } from '../../kit/core-objects';
import { useNlbProviderWorld } from '../support/nlb-provider-world';

const aws = (suffix: string) => `service.beta.kubernetes.io/aws-load-balancer-${suffix}`;

let ec2: EC2Client;

const nlbWorld = useNlbProviderWorld({ checkLeftovers: false });

beforeEach(() => {
  ec2 = nlbWorld.cluster.account.client(EC2Client);
});

const service = (annotations: Record<string, string> = {}): Service =>
  makeService({ uid: 'uid-web', annotations });

const ensure = (svc: Service, state?: ProviderState) =>
  nlbWorld.provider.ensureLoadBalancer(svc, nlbWorld.cluster.hosts, state);

let groupCount = 0;

/** A group of the user's, with a Name tag (group names differ: Name tags need not). */
async function userGroup(
  name: string,
  vpcId = nlbWorld.cluster.vpcId,
  tags: Record<string, string> = {},
): Promise<string> {
  groupCount += 1;
  const created = await ec2.send(
    new CreateSecurityGroupCommand({
      GroupName: `user-group-${groupCount}`,
      Description: 'the user’s own',
      VpcId: vpcId,
      TagSpecifications: [
        {
          ResourceType: 'security-group',
          Tags: Object.entries({ Name: name, ...tags }).map(([Key, Value]) => ({ Key, Value })),
        },
      ],
    }),
  );
  return created.GroupId ?? '';
}

async function loadBalancerGroups(state: ProviderState): Promise<string[]> {
  const found = await nlbWorld.cluster.account.client(ElasticLoadBalancingV2Client).send(
    new DescribeLoadBalancersCommand({
      LoadBalancerArns: [readNlbState(state).loadBalancerArn ?? ''],
    }),
  );
  return [...(found.LoadBalancers?.[0]?.SecurityGroups ?? [])].sort();
}

async function groupExists(id: string): Promise<boolean> {
  const found = await ec2.send(
    new DescribeSecurityGroupsCommand({ Filters: [{ Name: 'group-id', Values: [id] }] }),
  );
  return (found.SecurityGroups ?? []).length > 0;
}

describe('aws-load-balancer-security-groups against moto', () => {
  it('attaches the user groups (by ID and Name tag) instead of a managed one, and never deletes them', async () => {
    const byId = await userGroup('by-id');
    const byName = await userGroup('team-a-lb');
    const svc = service({ [aws('security-groups')]: `${byId}, team-a-lb` });
    const result = await ensure(svc);

    expect(await loadBalancerGroups(result.state)).toEqual([byId, byName].sort());
    expect(await nlbWorld.cluster.ownedResources()).not.toContain('security-group (default/web)');
    expect(readNlbState(result.state).securityGroupId).toBeUndefined();

    // A drift check resolves nothing again and reads no security group.
    nlbWorld.cluster.recorder.reset();
    const again = await ensure(svc, result.state);
    expect(again.changes).toEqual([]);
    expect(nlbWorld.cluster.recorder.count('DescribeSecurityGroups')).toBe(0);

    await nlbWorld.provider.ensureLoadBalancerDeleted(svc, again.state);
    expect(await groupExists(byId)).toBe(true);
    expect(await groupExists(byName)).toBe(true);
    expect(await nlbWorld.cluster.ownedResources()).toEqual([]);
  });

  it('attaches the backend group beside them when manage-backend-security-group-rules is true', async () => {
    const mine = await userGroup('team-a-lb');
    const result = await ensure(
      service({
        [aws('security-groups')]: 'team-a-lb',
        [aws('manage-backend-security-group-rules')]: 'true',
      }),
    );
    expect(await loadBalancerGroups(result.state)).toEqual(
      [mine, nlbWorld.cluster.settings.backendSecurityGroupId ?? ''].sort(),
    );
  });

  it('switches a running NLB from the managed group to the user groups and back', async () => {
    const mine = await userGroup('team-a-lb');
    const first = await ensure(service());
    const managed = readNlbState(first.state).securityGroupId ?? '';
    expect(await loadBalancerGroups(first.state)).toContain(managed);

    const switched = await ensure(service({ [aws('security-groups')]: mine }), first.state);
    expect(await loadBalancerGroups(switched.state)).toEqual([mine]);
    expect(switched.requeueAfterSeconds).toBeUndefined();
    expect(await groupExists(managed)).toBe(false);
    expect(await nlbWorld.cluster.ownedResources()).not.toContain('security-group (default/web)');

    const back = await ensure(service(), switched.state);
    const recreated = readNlbState(back.state).securityGroupId ?? '';
    expect(await loadBalancerGroups(back.state)).toEqual(
      [recreated, nlbWorld.cluster.settings.backendSecurityGroupId ?? ''].sort(),
    );
    expect(await groupExists(mine)).toBe(true);
  });

  it('recovers from a switch between user groups that failed half-way, with state naming only the new ones', async () => {
    const a = await userGroup('team-a-old');
    const b = await userGroup('team-a-new');
    const first = await ensure(service({ [aws('security-groups')]: a }));
    // What a sync that resolved the new annotation and then failed at SetSecurityGroups stores.
    const halfway = {
      ...readNlbState(first.state),
      frontendSecurityGroups: { inputs: b, ids: [b] },
    } as unknown as ProviderState;
    const after = await ensure(service({ [aws('security-groups')]: b }), halfway);
    expect(await loadBalancerGroups(after.state)).toEqual([b]);
    expect(await groupExists(a)).toBe(true);

    // The annotation removed after such a failure: a managed group is created, the user's left alone.
    const removedHalfway = {
      ...readNlbState(first.state),
      frontendSecurityGroups: undefined,
    } as unknown as ProviderState;
    const back = await ensure(service(), removedHalfway);
    const managed = readNlbState(back.state).securityGroupId ?? '';
    expect(managed).not.toBe('');
    expect(await loadBalancerGroups(back.state)).toContain(managed);
    expect(await groupExists(a)).toBe(true);
  });

  it('comes back for a replaced managed group AWS still holds (DependencyViolation), keeping it recorded', async () => {
    const mine = await userGroup('team-a-lb');
    const first = await ensure(service());
    const managed = readNlbState(first.state).securityGroupId ?? '';
    // moto never holds a group after it leaves an NLB; AWS does for a while.
    nlbWorld.cluster.recorder.injectFault({
      operation: 'DeleteSecurityGroup',
      kind: 'error',
      code: 'DependencyViolation',
      times: 1,
    });
    const held = await ensure(service({ [aws('security-groups')]: mine }), first.state);
    expect(held.requeueAfterSeconds).toBe(30);
    expect(readNlbState(held.state).securityGroupId).toBe(managed);
    expect(await loadBalancerGroups(held.state)).toEqual([mine]);

    const later = await ensure(service({ [aws('security-groups')]: mine }), held.state);
    expect(later.requeueAfterSeconds).toBeUndefined();
    expect(later.changes).toEqual(['delete security group']);
    expect(await groupExists(managed)).toBe(false);
  });

  it('refuses an unknown name, an unknown ID and a group of another VPC, creating nothing', async () => {
    const vpc = await ec2.send(new CreateVpcCommand({ CidrBlock: '10.99.0.0/16' }));
    const elsewhere = await userGroup('elsewhere', vpc.Vpc?.VpcId);
    const svc = service({
      [aws('security-groups')]: `no-such-name, sg-0123456789abcdef0, ${elsewhere}`,
    });
    const error = await ensure(svc).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(TerminalError);
    const message = (error as TerminalError).message;
    expect(message).toContain('no security group in');
    expect(message).toContain('"no-such-name"');
    expect(message).toContain('security group sg-0123456789abcdef0 does not exist');
    expect(message).toContain(`security group ${elsewhere} is in ${vpc.Vpc?.VpcId ?? ''}`);
    expect(await nlbWorld.cluster.ownedResources()).toEqual([]);
  });

  it('refuses another Service’s managed group, which that Service could then never delete', async () => {
    const other = await ensure(makeService({ name: 'other', uid: 'uid-other' }));
    const taken = readNlbState(other.state).securityGroupId ?? '';
    const error = await ensure(service({ [aws('security-groups')]: taken })).catch(
      (e: unknown) => e,
    );
    expect(error).toBeInstanceOf(TerminalError);
    expect((error as TerminalError).message).toContain(
      `security group "${taken}" (${taken}) is one this controller manages for a Service`,
    );
    expect(nlbWorld.cluster.recorder.count('CreateLoadBalancer')).toBe(1);
  });

  it('refuses groups other owners’ tags claim (EKS, the AWS Load Balancer Controller, a cluster), from the lookup it already makes', async () => {
    // As EKS tags the cluster security group it creates, and as the AWS Load Balancer
    // Controller and the legacy cloud provider tag theirs.
    const eks = await userGroup('eks-cluster-sg-prod-1a2b3c', undefined, {
      'kubernetes.io/cluster/prod': 'owned',
      'aws:eks:cluster-name': 'prod',
    });
    const lbc = await userGroup('k8s-traffic-prod-0123456789', undefined, {
      'elbv2.k8s.aws/cluster': 'prod',
      'elbv2.k8s.aws/resource': 'backend-sg',
    });
    await userGroup('k8s-elb-a1b2c3', undefined, {
      'kubernetes.io/cluster/prod': 'owned',
      'kubernetes.io/service-name': 'team-b/web',
    });
    nlbWorld.cluster.recorder.reset();
    const error = await ensure(
      service({ [aws('security-groups')]: `${eks}, ${lbc}, k8s-elb-a1b2c3` }),
    ).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(TerminalError);
    const message = (error as TerminalError).message;
    expect(message).toContain(
      `security group "${eks}" (${eks}) is owned by EKS (the cluster security group or a managed node group’s) (tag "aws:eks:cluster-name=prod"); name a group of your own`,
    );
    expect(message).toContain(
      `security group "${lbc}" (${lbc}) is owned by the AWS Load Balancer Controller (tag "elbv2.k8s.aws/cluster=prod")`,
    );
    expect(message).toContain('security group "k8s-elb-a1b2c3" (sg-');
    expect(message).toContain('(tag "kubernetes.io/cluster/prod=owned")');
    // The two lookups that resolve IDs and names, nothing more; nothing created.
    expect(nlbWorld.cluster.recorder.count('DescribeSecurityGroups')).toBe(2);
    expect(nlbWorld.cluster.recorder.count('CreateSecurityGroup')).toBe(0);
    expect(nlbWorld.cluster.recorder.count('CreateLoadBalancer')).toBe(0);
    expect(await nlbWorld.cluster.ownedResources()).toEqual([]);
  });

  it('accepts a group lent to the cluster (kubernetes.io/cluster/<name>=shared)', async () => {
    const lent = await userGroup('platform-lb', undefined, {
      'kubernetes.io/cluster/prod': 'shared',
    });
    const result = await ensure(service({ [aws('security-groups')]: lent }));
    expect(await loadBalancerGroups(result.state)).toEqual([lent]);
    await nlbWorld.provider.ensureLoadBalancerDeleted(service(), result.state);
    expect(await groupExists(lent)).toBe(true);
  });

  it('checks groups resolved by an earlier release once more, then reads nothing again', async () => {
    const eks = await userGroup('eks-cluster-sg-prod-1a2b3c', undefined, {
      'aws:eks:cluster-name': 'prod',
    });
    const mine = await userGroup('team-a-lb');
    const svc = service({ [aws('security-groups')]: mine });
    const first = await ensure(svc);
    // The record an earlier release kept: the annotation's text as inputs, the EKS group in it.
    const record = readNlbState(first.state);
    record.frontendSecurityGroups = { inputs: eks, ids: [eks] };
    const earlier = service({ [aws('security-groups')]: eks });
    const error = await ensure(earlier, toProviderState(record)).catch((e: unknown) => e);
    expect((error as TerminalError).message).toContain('is owned by EKS');
    nlbWorld.cluster.recorder.reset();
    const again = await ensure(svc, first.state);
    expect(again.changes).toEqual([]);
    expect(nlbWorld.cluster.recorder.count('DescribeSecurityGroups')).toBe(0);
    await nlbWorld.provider.ensureLoadBalancerDeleted(svc, again.state);
  });

  it('refuses a Name tag that two groups of the VPC carry', async () => {
    const one = await userGroup('shared');
    const two = await userGroup('shared');
    const error = await ensure(service({ [aws('security-groups')]: 'shared' })).catch(
      (e: unknown) => e,
    );
    expect(error).toBeInstanceOf(TerminalError);
    expect((error as TerminalError).message).toContain(`(${one}, ${two})`);
    expect(await nlbWorld.cluster.ownedResources()).toEqual([]);
  });
});

describe('aws-load-balancer-security-group-prefix-lists against moto', () => {
  async function prefixList(): Promise<string> {
    const created = await ec2.send(
      new CreateManagedPrefixListCommand({
        PrefixListName: 'offices',
        AddressFamily: 'IPv4',
        MaxEntries: 5,
        Entries: [{ Cidr: '192.0.2.0/24' }],
      }),
    );
    return created.PrefixList?.PrefixListId ?? '';
  }

  async function managedRules(state: ProviderState): Promise<string[]> {
    const found = await ec2.send(
      new DescribeSecurityGroupsCommand({ GroupIds: [readNlbState(state).securityGroupId ?? ''] }),
    );
    return (found.SecurityGroups?.[0]?.IpPermissions ?? [])
      .flatMap((p) => [
        ...(p.IpRanges ?? []).map((r) => `${p.IpProtocol}:${p.FromPort}:${r.CidrIp}`),
        ...(p.PrefixListIds ?? []).map((l) => `${p.IpProtocol}:${p.FromPort}:${l.PrefixListId}`),
      ])
      .sort();
  }

  it('allows the prefix list on each listener port next to the source ranges, and takes it away again', async () => {
    const id = await prefixList();
    const withList = makeService({
      uid: 'uid-web',
      annotations: { [aws('security-group-prefix-lists')]: id },
      spec: { loadBalancerSourceRanges: ['10.0.0.0/8'] },
    });
    const first = await ensure(withList);
    expect(await managedRules(first.state)).toEqual(
      [
        `icmp:3:10.0.0.0/8`,
        `tcp:443:10.0.0.0/8`,
        `tcp:443:${id}`,
        `tcp:80:10.0.0.0/8`,
        `tcp:80:${id}`,
      ].sort(),
    );

    const without = makeService({
      uid: 'uid-web',
      spec: { loadBalancerSourceRanges: ['10.0.0.0/8'] },
    });
    const second = await ensure(without, first.state);
    expect(await managedRules(second.state)).toEqual(
      ['icmp:3:10.0.0.0/8', 'tcp:443:10.0.0.0/8', 'tcp:80:10.0.0.0/8'].sort(),
    );
  });

  it('leaves out the 0.0.0.0/0 default when only prefix lists are given', async () => {
    const id = await prefixList();
    const result = await ensure(service({ [aws('security-group-prefix-lists')]: id }));
    expect(await managedRules(result.state)).toEqual([`tcp:443:${id}`, `tcp:80:${id}`]);
  });
});
