import { CreateVpcCommand, EC2Client } from '@aws-sdk/client-ec2';
import type { V1Service } from '@kubernetes/client-node';
import { afterEach, expect, it } from 'vitest';
import { annotated, awsAnnotation, loadBalancerService } from '../support/kube-objects';
import { createTaggedSubnet } from '../support/subnets';
import { createRuntimeWorld, type RuntimeWorld } from '../support/runtime-world';
import { recordPending, recordScenario } from './support/summary';
import { createLoadBalancerServices, drainAll, endStateProblems } from './support/world';

let world: RuntimeWorld;

afterEach(async () => {
  await world.stop();
});

const aws = awsAnnotation;

/** LoadBalancer Services a `team-*` namespace may have. */
const teamMaximum = 2;

const tenantPolicy = {
  rules: [
    {
      name: 'tenants',
      namespaces: ['team-*'],
      internetFacing: false,
      certificateArns: ['arn:aws:acm:*:123456789012:certificate/*'],
      maxLoadBalancerServices: teamMaximum,
      maxListeners: 2,
    },
    {
      name: 'public',
      namespaceSelector: { matchLabels: { exposure: 'public' } },
      eipAllocations: ['eipalloc-0aaa*'],
    },
  ],
  default: {},
};

interface BadCase {
  readonly namespace: string;
  readonly change: (s: V1Service) => V1Service;
  readonly says: RegExp;
}

it('tenant policy violations: each gets a Warning naming the rule and nothing in AWS, while a Service in another namespace converges', async () => {
  const burst = ['b0', 'b1', 'b2', 'b3', 'b4'];
  const refusedOfBurst = burst.length - teamMaximum;
  recordPending(
    'adversarial: tenant policy violations',
    7 + refusedOfBurst + 1,
    'Services breaking each tenant-policy rule and the always-on subnet checks, a burst over maxLoadBalancerServices, and a good Service in another namespace',
  );
  world = await createRuntimeWorld({ tenantPolicy, backoffBaseSeconds: 1, backoffMaxSeconds: 4 });
  world.kube.store.create('namespaces', '', {
    metadata: { name: 'web-public', labels: { exposure: 'public' } },
  });
  const ec2 = world.account.client(EC2Client);
  const otherVpc = (await ec2.send(new CreateVpcCommand({ CidrBlock: '10.9.0.0/16' }))).Vpc?.VpcId;
  const subnet = (vpcId: string, cidr: string, tags: Record<string, string>) =>
    createTaggedSubnet(ec2, vpcId, cidr, tags);
  const foreignVpcSubnet = await subnet(otherVpc ?? '', '10.9.1.0/24', {
    'kubernetes.io/role/internal-elb': '1',
  });
  const otherClusterSubnet = await subnet(world.aws.vpcId, '10.0.20.0/24', {
    'kubernetes.io/role/internal-elb': '1',
    'kubernetes.io/cluster/another-cluster': 'owned',
  });
  const noRoleSubnet = await subnet(world.aws.vpcId, '10.0.21.0/24', { Name: 'no-role' });

  const bad: Record<string, BadCase> = {
    'internet-facing': {
      namespace: 'team-a',
      change: annotated({ [aws('scheme')]: 'internet-facing' }),
      says: /^Error syncing load balancer: tenant policy \(namespace team-a, rule "tenants"\): internet-facing load balancers are not allowed/,
    },
    'foreign-certificate': {
      namespace: 'team-a',
      change: annotated({
        [aws('ssl-cert')]:
          'arn:aws:acm:us-east-1:999999999999:certificate/a:123456789012:certificate/b',
      }),
      says: /rule "tenants"\): certificate .* is not allowed \(certificateArns\)/,
    },
    'many-listeners': {
      namespace: 'team-a',
      change: (s) => ({
        ...s,
        spec: {
          ...s.spec,
          ports: [80, 81, 82].map((port) => ({ name: `p${port}`, port, targetPort: port })),
        },
      }),
      says: /rule "tenants"\): 3 listeners, more than the 2 allowed \(maxListeners\)/,
    },
    'foreign-eip': {
      namespace: 'web-public',
      change: annotated({
        [aws('scheme')]: 'internet-facing',
        [aws('eip-allocations')]: 'eipalloc-0bbb1111,eipalloc-0bbb2222',
      }),
      says: /rule "public"\): Elastic IP allocation "eipalloc-0bbb1111" is not allowed/,
    },
    'other-vpc-subnet': {
      namespace: 'platform',
      change: annotated({ [aws('subnets')]: foreignVpcSubnet }),
      says: new RegExp(`subnet ${foreignVpcSubnet} is in ${otherVpc}, not the cluster VPC`),
    },
    'other-cluster-subnet': {
      namespace: 'platform',
      change: annotated({ [aws('subnets')]: otherClusterSubnet }),
      says: /is tagged for another cluster \(kubernetes\.io\/cluster\/another-cluster\)/,
    },
    'no-role-subnet': {
      namespace: 'platform',
      change: annotated({ [aws('subnets')]: noRoleSubnet }),
      says: /rule "default"\): .* not tagged kubernetes\.io\/role\/internal-elb .*\(requireSubnetRoleTag\)/,
    },
  };
  for (const [name, { namespace, change }] of Object.entries(bad)) {
    await world.api.createNamespacedService({
      namespace,
      body: change(loadBalancerService(name, namespace)),
    });
    await world.send({ v: 1, kind: 'service', key: `${namespace}/${name}` });
  }
  // One namespace creates more LoadBalancer Services at once than it may have.
  for (const name of burst) {
    await world.api.createNamespacedService({
      namespace: 'team-b',
      body: loadBalancerService(name, 'team-b'),
    });
    await world.send({ v: 1, kind: 'service', key: `team-b/${name}` });
  }
  await createLoadBalancerServices(world, ['good']);
  const drained = await drainAll(world);

  const problems: string[] = [];
  let answered = 0;
  const warningsOf = async (namespace: string, name: string) =>
    (await world.api.listNamespacedEvent({ namespace })).items
      .filter((e) => e.involvedObject.name === name && e.type === 'Warning')
      .map((e) => e.message ?? '');
  for (const [name, { namespace, says }] of Object.entries(bad)) {
    const found = await warningsOf(namespace, name);
    if (found.some((message) => says.test(message))) answered++;
    else
      problems.push(
        `${namespace}/${name}: no Warning matching ${String(says)} in ${JSON.stringify(found)}`,
      );
  }
  const refused: string[] = [];
  for (const name of burst) {
    const found = await warningsOf('team-b', name);
    if (found.some((m) => /maxLoadBalancerServices: 2/.test(m))) refused.push(name);
  }
  if (refused.length === refusedOfBurst) answered += refusedOfBurst;
  else problems.push(`team-b burst: ${refused.length} refused, ${refusedOfBurst} expected`);

  const owners = new Set(
    (await world.aws.ownedResources()).map((line) => /\((.*)\)$/.exec(line)?.[1] ?? line),
  );
  const admitted = burst.filter((name) => !refused.includes(name));
  // Only the good Service and the burst's admitted ones may own anything in the account.
  const expectedOwners = ['default/good', ...admitted.map((name) => `team-b/${name}`)].sort();
  const extra = [...owners].filter((key) => !expectedOwners.includes(key));
  if (extra.length > 0) problems.push(`refused Services own AWS resources: ${extra.join(', ')}`);
  const missing = expectedOwners.filter((key) => !owners.has(key));
  if (missing.length > 0) problems.push(`admitted Services own nothing: ${missing.join(', ')}`);
  // The good Service, in another namespace, is served as usual. The end-state check knows the
  // default namespace only, so it lists the admitted team-b resources as unowned: those are
  // checked by their ownership tags above instead.
  const end = await endStateProblems(world, { good: [80, 443] });
  const notGood = end.problems.filter((p) => !p.startsWith('not owned by any live Service'));
  const runs = Object.keys(bad).length + refusedOfBurst + 1;
  const leaked = extra.length;
  recordScenario({
    scenario: 'adversarial: tenant policy violations',
    runs,
    converged: answered + end.converged,
    leaked,
    lost: runs - answered - end.converged,
    how: `${Object.keys(bad).length} Services breaking a rule (internet-facing, another account's certificate, 3 listeners over 2, a disallowed Elastic IP in a namespace chosen by label, subnets in another VPC, of another cluster, without the role tag) and a burst of ${burst.length} in one namespace over maxLoadBalancerServices 2: each refused with a Warning naming the rule, none owns anything in AWS; 2 of the burst and a Service in another namespace converge`,
  });
  expect(drained).toBe(true);
  expect(problems).toEqual([]);
  expect(notGood).toEqual([]);
  expect(end.converged).toBe(1);
});
