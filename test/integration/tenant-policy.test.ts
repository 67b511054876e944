import { CreateSecurityGroupCommand, CreateVpcCommand, EC2Client } from '@aws-sdk/client-ec2';
import { PatchStrategy, setHeaderOptions, type V1Service } from '@kubernetes/client-node';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { loadBalancerService } from '../support/kube-objects';
import { createTaggedSubnet } from '../support/subnets';
import { createRuntimeWorld, type RuntimeWorld } from '../support/runtime-world';

const aws = (suffix: string) => `service.beta.kubernetes.io/aws-load-balancer-${suffix}`;

let world: RuntimeWorld;

beforeEach(async () => {
  world = await createRuntimeWorld({
    // These tests create a few Services at once and drain with a 1 s quiet period: on the change
    // budget (3/s, burst 10), a third create would come back 2 s later for its slots, after the
    // drain. The budget's pacing is tested on its own (deferred-registrations, fleet-budgets).
    changeBudget: { perSecond: 0, burst: 10 },
    tenantPolicy: {
      rules: [
        {
          name: 'tenants',
          namespaces: ['team-*'],
          internetFacing: false,
          certificateArns: ['arn:aws:acm:*:123456789012:certificate/*'],
          maxLoadBalancerServices: 1,
          maxListeners: 2,
          securityGroups: ['team-shared-*', 'sg-0abc*'],
          securityGroupTags: ['example.com/lb-tenant=team'],
        },
        {
          name: 'private',
          namespaceSelector: { matchLabels: { exposure: 'private' } },
          internetFacing: false,
        },
      ],
      default: {},
    },
  });
});

afterEach(async () => {
  await world.stop();
});

async function create(
  namespace: string,
  name: string,
  change: (s: V1Service) => V1Service = (s) => s,
) {
  await world.api.createNamespacedService({
    namespace,
    body: change(loadBalancerService(name, namespace)),
  });
  await world.send({ v: 1, kind: 'service', key: `${namespace}/${name}` });
}

const annotated =
  (annotations: Record<string, string>) =>
  (s: V1Service): V1Service => ({ ...s, metadata: { ...s.metadata, annotations } });

async function warnings(namespace: string, name: string): Promise<string[]> {
  const events = await world.api.listNamespacedEvent({ namespace });
  return events.items
    .filter((e) => e.involvedObject.name === name && e.type === 'Warning')
    .map((e) => e.message ?? '');
}

/** The Services (`namespace/name`) that own anything in AWS, from the ownership tags. */
async function owners(): Promise<string[]> {
  const lines = await world.aws.ownedResources();
  return [...new Set(lines.map((line) => /\((.*)\)$/.exec(line)?.[1] ?? line))].sort();
}

describe('the tenant policy through the runtime (moto + fake API server with the project RBAC)', () => {
  it('refuses what a namespace may not have with a Warning naming the rule, creates nothing for it, and serves the rest', async () => {
    world.kube.store.create('namespaces', '', {
      metadata: { name: 'shop', labels: { exposure: 'private' } },
    });
    await create('team-a', 'public', annotated({ [aws('scheme')]: 'internet-facing' }));
    await create(
      'team-a',
      'foreign-cert',
      annotated({
        [aws('ssl-cert')]: 'arn:aws:acm:us-east-1:999999999999:certificate/abc',
      }),
    );
    await create('team-a', 'many-ports', (s) => ({
      ...s,
      spec: {
        ...s.spec,
        ports: [80, 81, 82].map((port) => ({
          name: `p${port}`,
          port,
          protocol: 'TCP',
          targetPort: port,
        })),
      },
    }));
    await create('shop', 'storefront', annotated({ [aws('scheme')]: 'internet-facing' }));
    await create('elsewhere', 'web', annotated({ [aws('scheme')]: 'internet-facing' }));
    await world.drain();

    expect(await warnings('team-a', 'public')).toEqual([
      'Error syncing load balancer: tenant policy (namespace team-a, rule "tenants"): internet-facing load balancers are not allowed (internetFacing: false)',
    ]);
    expect((await warnings('team-a', 'foreign-cert')).join()).toContain(
      'rule "tenants"): certificate "arn:aws:acm:us-east-1:999999999999:certificate/abc" is not allowed (certificateArns)',
    );
    expect((await warnings('team-a', 'many-ports')).join()).toContain(
      '3 listeners, more than the 2 allowed (maxListeners)',
    );
    expect((await warnings('shop', 'storefront')).join()).toContain(
      'tenant policy (namespace shop, rule "private"): internet-facing load balancers are not allowed',
    );
    expect(await warnings('elsewhere', 'web')).toEqual([]);
    expect(await owners()).toEqual(['elsewhere/web']);
    const served = await world.api.readNamespacedService({ name: 'web', namespace: 'elsewhere' });
    expect(served.status?.loadBalancer?.ingress?.[0]?.hostname).toBeTruthy();
  });

  /** A security group in the cluster VPC with a Name tag and other tags; its ID is moto's. */
  async function group(name: string, tags: Record<string, string> = {}): Promise<string> {
    const created = await world.account.client(EC2Client).send(
      new CreateSecurityGroupCommand({
        GroupName: `group-${name}`,
        Description: 'a group of the VPC',
        VpcId: world.aws.vpcId,
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

  it('matches securityGroups on the resolved groups, not the annotation text, and refuses before anything is created', async () => {
    // Another team's database group, named so that its Name tag looks like an allowed ID.
    const database = await group('sg-0abc-team-b-db');
    world.aws.recorder.reset();
    await create(
      'team-d',
      'collision',
      annotated({ [aws('security-groups')]: 'sg-0abc-team-b-db' }),
    );
    await world.drain();
    expect(await warnings('team-d', 'collision')).toEqual([
      `Error syncing load balancer: tenant policy (namespace team-d, rule "tenants"): security group "sg-0abc-team-b-db" (${database}) is not allowed (securityGroups, securityGroupTags)`,
    ]);
    // The one lookup that resolves the name decides; nothing is created.
    expect(world.aws.recorder.count('DescribeSecurityGroups')).toBe(1);
    expect(world.aws.recorder.count('CreateSecurityGroup')).toBe(0);
    expect(world.aws.recorder.count('CreateLoadBalancer')).toBe(0);
    expect(await owners()).toEqual([]);
  });

  it('admits a group by the Name pattern when named by ID, and a group the platform team tagged', async () => {
    const shared = await group('team-shared-lb');
    await group('made-by-platform', { 'example.com/lb-tenant': 'team' });
    const other = await group('team-b-lb');
    await create('team-e', 'by-id', annotated({ [aws('security-groups')]: shared }));
    await create('team-f', 'tagged', annotated({ [aws('security-groups')]: 'made-by-platform' }));
    await create('team-g', 'other', annotated({ [aws('security-groups')]: other }));
    await world.drain();
    expect(await warnings('team-e', 'by-id')).toEqual([]);
    expect(await warnings('team-f', 'tagged')).toEqual([]);
    expect(await warnings('team-g', 'other')).toEqual([
      `Error syncing load balancer: tenant policy (namespace team-g, rule "tenants"): security group "${other}" (${other}) is not allowed (securityGroups, securityGroupTags)`,
    ]);
    expect(await owners()).toEqual(['team-e/by-id', 'team-f/tagged']);
  });

  it('refuses an EKS-owned group whatever the rule allows', async () => {
    const eks = await group('eks-cluster-sg-prod-1a2b3c', {
      'aws:eks:cluster-name': 'prod',
      'kubernetes.io/cluster/prod': 'owned',
      'example.com/lb-tenant': 'team',
    });
    await create('team-h', 'cluster-group', annotated({ [aws('security-groups')]: eks }));
    await world.drain();
    expect(await warnings('team-h', 'cluster-group')).toEqual([
      `Error syncing load balancer: annotation service.beta.kubernetes.io/aws-load-balancer-security-groups: security group "${eks}" (${eks}) is owned by EKS (the cluster security group or a managed node group’s) (tag "aws:eks:cluster-name=prod"); name a group of your own`,
    ]);
    expect(await owners()).toEqual([]);
  });

  it('admits maxLoadBalancerServices per namespace, oldest first, and counts namespaces apart', async () => {
    await create('team-b', 'first');
    await world.drain();
    await create('team-b', 'second');
    await create('team-c', 'first');
    await world.drain();

    expect(await warnings('team-b', 'first')).toEqual([]);
    expect(await warnings('team-b', 'second')).toEqual([
      'Error syncing load balancer: tenant policy (namespace team-b, rule "tenants"): namespace team-b already has 1 LoadBalancer Services, the most allowed (maxLoadBalancerServices: 1)',
    ]);
    expect(await owners()).toEqual(['team-b/first', 'team-c/first']);
  });

  it('counts a load balancer that deletion protection keeps after its Service turned ClusterIP or was deleted, even once the tenant strips our finalizer', async () => {
    const protectedLb = annotated({ [aws('attributes')]: 'deletion_protection.enabled=true' });
    await create('team-e', 'kept', protectedLb);
    await create('team-f', 'kept', protectedLb);
    await world.drain();
    await world.api.patchNamespacedService(
      { name: 'kept', namespace: 'team-e', body: { spec: { type: 'ClusterIP' } } },
      setHeaderOptions('Content-Type', PatchStrategy.MergePatch),
    );
    await world.api.deleteNamespacedService({ name: 'kept', namespace: 'team-f' });
    for (const namespace of ['team-e', 'team-f'])
      await world.send({ v: 1, kind: 'service', key: `${namespace}/kept` });
    await world.drain();
    // Both NLBs are kept, each with its Warning: the Services hold them through our finalizer.
    for (const namespace of ['team-e', 'team-f'])
      expect((await warnings(namespace, 'kept')).join()).toContain(
        'deletion_protection.enabled=true, so load balancer',
      );
    // The tenant strips our finalizer (its edit role allows it): team-f's Service is gone, team-e's
    // no longer carries it. The state table still lists both kept NLBs.
    for (const namespace of ['team-e', 'team-f']) {
      await world.api.patchNamespacedService(
        { name: 'kept', namespace, body: { metadata: { finalizers: null } } },
        setHeaderOptions('Content-Type', PatchStrategy.MergePatch),
      );
      await world.send({ v: 1, kind: 'service', key: `${namespace}/kept` });
    }
    await world.drain();
    await expect(
      world.api.readNamespacedService({ name: 'kept', namespace: 'team-f' }),
    ).rejects.toMatchObject({ code: 404 });
    expect(await world.runtime.store.keptLoadBalancers('team-e')).toEqual(['team-e/kept']);
    expect(await world.runtime.store.keptLoadBalancers('team-f')).toEqual(['team-f/kept']);

    await create('team-e', 'next');
    await create('team-f', 'next');
    await world.drain();
    for (const namespace of ['team-e', 'team-f'])
      expect(await warnings(namespace, 'next')).toEqual([
        `Error syncing load balancer: tenant policy (namespace ${namespace}, rule "tenants"): namespace ${namespace} already has 1 LoadBalancer Services, the most allowed (maxLoadBalancerServices: 1)`,
      ]);
    expect(await owners()).toEqual(['team-e/kept', 'team-f/kept']);
  });

  it('checks annotated subnets: the cluster VPC and no other cluster always, the role tag under a rule', async () => {
    const ec2 = world.account.client(EC2Client);
    const otherVpc = await ec2.send(new CreateVpcCommand({ CidrBlock: '10.1.0.0/16' }));
    const subnet = (vpcId: string, cidr: string, tags: Record<string, string>) =>
      createTaggedSubnet(ec2, vpcId, cidr, tags);
    const inOtherVpc = await subnet(otherVpc.Vpc?.VpcId ?? '', '10.1.1.0/24', {
      'kubernetes.io/role/internal-elb': '1',
    });
    const otherCluster = await subnet(world.aws.vpcId, '10.0.10.0/24', {
      'kubernetes.io/role/internal-elb': '1',
      'kubernetes.io/cluster/someone-else': 'owned',
    });
    const untagged = await subnet(world.aws.vpcId, '10.0.11.0/24', { Name: 'no-role' });

    await create('elsewhere', 'other-vpc', annotated({ [aws('subnets')]: inOtherVpc }));
    await create('elsewhere', 'other-cluster', annotated({ [aws('subnets')]: otherCluster }));
    // The default rule applies in `elsewhere`: the role tag is required there.
    await create('elsewhere', 'untagged', annotated({ [aws('subnets')]: untagged }));
    await world.drain();

    expect((await warnings('elsewhere', 'other-vpc')).join()).toContain(
      `annotation service.beta.kubernetes.io/aws-load-balancer-subnets: subnet ${inOtherVpc} is in ${otherVpc.Vpc?.VpcId}, not the cluster VPC ${world.aws.vpcId}`,
    );
    expect((await warnings('elsewhere', 'other-cluster')).join()).toContain(
      `subnet ${otherCluster} is tagged for another cluster (kubernetes.io/cluster/someone-else)`,
    );
    expect((await warnings('elsewhere', 'untagged')).join()).toContain(
      `tenant policy (namespace elsewhere, rule "default"): annotation service.beta.kubernetes.io/aws-load-balancer-subnets: ${untagged} not tagged kubernetes.io/role/internal-elb (value "1" or empty), which internal load balancers need (requireSubnetRoleTag)`,
    );
    expect(await owners()).toEqual([]);
  });
});
