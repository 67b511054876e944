/**
 * Issue 32, finding 5: a tenant names, in aws-load-balancer-security-groups, groups that are not
 * its own: the EKS cluster security group, another controller's group, and another team's
 * database group through a Name tag that looks like an ID the policy allows. Each must get a
 * Warning and own nothing in AWS; the groups must stay as they were, held by no load balancer;
 * a Service in another namespace converges beside them.
 */
import {
  CreateSecurityGroupCommand,
  DescribeSecurityGroupsCommand,
  EC2Client,
  type SecurityGroup,
} from '@aws-sdk/client-ec2';
import {
  DescribeLoadBalancersCommand,
  ElasticLoadBalancingV2Client,
} from '@aws-sdk/client-elastic-load-balancing-v2';
import { afterEach, expect, it } from 'vitest';
import { loadBalancerService } from '../support/kube-objects';
import { createRuntimeWorld, type RuntimeWorld } from '../support/runtime-world';
import { recordPending, recordScenario } from './support/summary';
import { createLoadBalancerServices, drainAll, endStateProblems } from './support/world';

let world: RuntimeWorld;

afterEach(async () => {
  await world.stop();
});

const scenario = 'adversarial: foreign security groups';
const attacker = 'team-x';

/**
 * The rule admits the EKS and Load Balancer Controller groups by a tag every group of the
 * account carries, so only the ownership check refuses them; the collision is the policy's.
 */
const everyGroup = { 'example.com/env': 'prod' };
const tenantPolicy = {
  rules: [
    {
      name: 'tenants',
      namespaces: ['team-*'],
      securityGroups: ['sg-0abc*', 'team-x-*'],
      securityGroupTags: ['example.com/env=prod'],
    },
  ],
  default: {},
};

/** What must not change about a group: its rules and its tags. */
const shapeOf = (group: SecurityGroup | undefined) =>
  JSON.stringify({
    ingress: group?.IpPermissions ?? [],
    egress: group?.IpPermissionsEgress ?? [],
    tags: [...(group?.Tags ?? [])].sort((a, b) => (a.Key ?? '').localeCompare(b.Key ?? '')),
  });

it('foreign security groups: each gets a Warning naming the group and owns nothing, the groups are unchanged, and a Service in another namespace converges', async () => {
  recordPending(
    scenario,
    4,
    'Services naming the EKS cluster security group, an AWS Load Balancer Controller group and a Name tag that collides with an allowed ID pattern, and a good Service in another namespace',
  );
  world = await createRuntimeWorld({ tenantPolicy, backoffBaseSeconds: 1, backoffMaxSeconds: 4 });
  const ec2 = world.account.client(EC2Client);
  const group = async (name: string, tags: Record<string, string>) => {
    const created = await ec2.send(
      new CreateSecurityGroupCommand({
        GroupName: `foreign-${name}`,
        Description: 'not the tenant’s',
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
  };
  const cluster = world.aws.settings.clusterName;
  // Tagged as EKS tags the cluster security group it creates.
  const eks = await group(`eks-cluster-sg-${cluster}-1a2b3c`, {
    [`kubernetes.io/cluster/${cluster}`]: 'owned',
    'aws:eks:cluster-name': cluster,
    ...everyGroup,
  });
  // As the AWS Load Balancer Controller tags its shared backend group.
  const lbc = await group(`k8s-traffic-${cluster}-0123456789`, {
    'elbv2.k8s.aws/cluster': cluster,
    'elbv2.k8s.aws/resource': 'backend-sg',
    ...everyGroup,
  });
  // Another team's database group, whose Name tag looks like an ID the rule allows (sg-0abc*).
  const database = await group('sg-0abc-team-b-db', { team: 'b' });
  const foreign = [eks, lbc, database];
  const describe = async () =>
    (
      await ec2.send(
        new DescribeSecurityGroupsCommand({ Filters: [{ Name: 'group-id', Values: foreign }] }),
      )
    ).SecurityGroups ?? [];
  const before = new Map((await describe()).map((g) => [g.GroupId ?? '', shapeOf(g)]));

  const bad: Record<string, { readonly value: string; readonly says: string }> = {
    'eks-cluster-group': {
      value: eks,
      says: `security group "${eks}" (${eks}) is owned by EKS (the cluster security group or a managed node group’s) (tag "aws:eks:cluster-name=${cluster}")`,
    },
    'lbc-group': {
      value: `k8s-traffic-${cluster}-0123456789`,
      says: `(${lbc}) is owned by the AWS Load Balancer Controller (tag "elbv2.k8s.aws/cluster=${cluster}")`,
    },
    'name-collision': {
      value: 'sg-0abc-team-b-db',
      says: `tenant policy (namespace ${attacker}, rule "tenants"): security group "sg-0abc-team-b-db" (${database}) is not allowed (securityGroups, securityGroupTags)`,
    },
  };
  for (const [name, { value }] of Object.entries(bad)) {
    const service = loadBalancerService(name, attacker);
    await world.api.createNamespacedService({
      namespace: attacker,
      body: {
        ...service,
        metadata: {
          ...service.metadata,
          annotations: { 'service.beta.kubernetes.io/aws-load-balancer-security-groups': value },
        },
      },
    });
    await world.send({ v: 1, kind: 'service', key: `${attacker}/${name}` });
  }
  await createLoadBalancerServices(world, ['good']);
  const drained = await drainAll(world);

  const problems: string[] = [];
  let answered = 0;
  const events = (await world.api.listNamespacedEvent({ namespace: attacker })).items;
  for (const [name, { says }] of Object.entries(bad)) {
    const found = events
      .filter((e) => e.involvedObject.name === name && e.type === 'Warning')
      .map((e) => e.message ?? '');
    if (found.some((message) => message.includes(says))) answered++;
    else
      problems.push(
        `${attacker}/${name}: no Warning containing ${says} in ${JSON.stringify(found)}`,
      );
  }
  const owners = new Set(
    (await world.aws.ownedResources()).map((line) => /\((.*)\)$/.exec(line)?.[1] ?? line),
  );
  const extra = [...owners].filter((key) => key !== 'default/good');
  if (extra.length > 0) problems.push(`refused Services own AWS resources: ${extra.join(', ')}`);
  // The foreign groups: as they were, and held by no load balancer.
  for (const found of await describe()) {
    const id = found.GroupId ?? '';
    if (before.get(id) !== shapeOf(found)) problems.push(`group ${id} changed`);
  }
  const loadBalancers =
    (
      await world.account
        .client(ElasticLoadBalancingV2Client)
        .send(new DescribeLoadBalancersCommand({}))
    ).LoadBalancers ?? [];
  const held = loadBalancers
    .flatMap((lb) => lb.SecurityGroups ?? [])
    .filter((id) => foreign.includes(id));
  if (held.length > 0) problems.push(`foreign groups held by a load balancer: ${held.join(', ')}`);

  // The good Service, in another namespace, is served as usual. The end-state check lists every
  // group of the VPC it cannot tie to a Service: the foreign groups are checked above instead.
  const end = await endStateProblems(world, { good: [80, 443] });
  const leftoverPrefix = 'not owned by any live Service: ';
  const notGood = end.problems.flatMap((p) => {
    if (!p.startsWith(leftoverPrefix)) return [p];
    const rest = p
      .slice(leftoverPrefix.length)
      .split(', ')
      .filter((id) => !foreign.includes(id));
    return rest.length > 0 ? [`${leftoverPrefix}${rest.join(', ')}`] : [];
  });
  const runs = Object.keys(bad).length + 1;
  recordScenario({
    scenario,
    runs,
    converged: answered + end.converged,
    leaked: extra.length + held.length,
    lost: runs - answered - end.converged,
    how: `${Object.keys(bad).length} Services in one namespace naming the EKS cluster security group (aws:eks:cluster-name), an AWS Load Balancer Controller group (elbv2.k8s.aws/cluster) by Name tag, both admitted by the rule's securityGroupTags, and another team's group whose Name tag sg-0abc-team-b-db collides with the allowed ID pattern sg-0abc*: each refused with a Warning naming the group and the tag or rule, none owns anything, the 3 groups unchanged and held by no NLB; a Service in another namespace converges`,
  });
  expect(drained).toBe(true);
  expect(problems).toEqual([]);
  expect(notGood).toEqual([]);
  expect(end.converged).toBe(1);
});
