import { DescribeSecurityGroupsCommand } from '@aws-sdk/client-ec2';
import {
  CreateTargetGroupCommand,
  DescribeListenersCommand,
  DescribeLoadBalancersCommand,
  DescribeTargetGroupsCommand,
  DescribeTargetHealthCommand,
  RegisterTargetsCommand,
} from '@aws-sdk/client-elastic-load-balancing-v2';
import type { V1Service } from '@kubernetes/client-node';
import { afterEach, expect, it } from 'vitest';
import { servicePk } from '../../functions/state/table-layout';
import { ownershipTags } from '../../functions/nlb/model/naming';
import { readNlbState, type NlbState } from '../../functions/nlb/nlb-state';
import { loadBalancerService } from '../support/kube-objects';
import { createRuntimeWorld, type RuntimeWorld } from '../support/runtime-world';
import { inventory } from './support/inventory';
import { recordPending, recordScenario } from './support/summary';
import { drainAll } from './support/world';

let world: RuntimeWorld;

afterEach(async () => {
  await world.stop();
});

const scenario = 'adversarial: foreign resources in state';
const how =
  "one Service's DynamoDB item pointed at another namespace's NLB, security group and target group and at another cluster's target group; a node added, a full sync, then the Service deleted; a Service in a third namespace beside it";

/** What another owner's resources look like from outside: any write by the tampered sync shows. */
async function shapeOf(world: RuntimeWorld, state: NlbState, otherClusterGroup: string) {
  const elbv2 = world.aws.testClients.elbv2;
  const groups = Object.values(state.targetGroups ?? {}).map((tg) => tg.arn);
  const lb = await elbv2.send(
    new DescribeLoadBalancersCommand({ LoadBalancerArns: [state.loadBalancerArn ?? ''] }),
  );
  const listeners = await elbv2.send(
    new DescribeListenersCommand({ LoadBalancerArn: state.loadBalancerArn }),
  );
  const described = await elbv2.send(
    new DescribeTargetGroupsCommand({ TargetGroupArns: [...groups, otherClusterGroup] }),
  );
  const targets: Record<string, string[]> = {};
  for (const arn of [...groups, otherClusterGroup]) {
    const health = await elbv2.send(new DescribeTargetHealthCommand({ TargetGroupArn: arn }));
    targets[arn] = (health.TargetHealthDescriptions ?? []).map((d) => d.Target?.Id ?? '').sort();
  }
  const sg = await world.aws.testClients.ec2.send(
    new DescribeSecurityGroupsCommand({ GroupIds: [state.securityGroupId ?? ''] }),
  );
  return {
    loadBalancers: (lb.LoadBalancers ?? []).map((l) => `${l.LoadBalancerName} ${l.Scheme}`),
    listeners: (listeners.Listeners ?? [])
      .map((l) => `${l.Protocol}:${l.Port}->${l.DefaultActions?.[0]?.TargetGroupArn}`)
      .sort(),
    healthChecks: (described.TargetGroups ?? [])
      .map((g) => `${g.TargetGroupArn} ${g.HealthCheckIntervalSeconds}`)
      .sort(),
    targets,
    ingress: (sg.SecurityGroups?.[0]?.IpPermissions ?? [])
      .flatMap((p) => (p.IpRanges ?? []).map((r) => `${p.IpProtocol}:${p.FromPort}:${r.CidrIp}`))
      .sort(),
  };
}

async function createService(world: RuntimeWorld, body: V1Service): Promise<void> {
  const namespace = body.metadata?.namespace ?? '';
  await world.api.createNamespacedService({ namespace, body });
  await world.send({ v: 1, kind: 'service', key: `${namespace}/${body.metadata?.name ?? ''}` });
}

it('foreign resources in state: a tampered Service writes nothing to another owner, says so, and deletes only its own; the other namespaces converge', async () => {
  recordPending(scenario, 5, how);
  world = await createRuntimeWorld({ backoffBaseSeconds: 1, backoffMaxSeconds: 4 });
  const victim = loadBalancerService('victim', 'team-a');
  // Different health check and source ranges: had its syncs written to the victim's resources,
  // the victim's target groups and security group would show them.
  const base = loadBalancerService('tampered', 'team-b');
  const tampered: V1Service = {
    ...base,
    metadata: {
      ...base.metadata,
      annotations: { 'service.beta.kubernetes.io/aws-load-balancer-healthcheck-interval': '20' },
    },
    spec: { ...base.spec, loadBalancerSourceRanges: ['10.1.0.0/16'] },
  };
  const bystander = loadBalancerService('bystander', 'team-c');
  for (const service of [victim, tampered, bystander]) await createService(world, service);
  expect(await drainAll(world)).toBe(true);

  const victimState = readNlbState(
    (await world.runtime.store.getService('team-a/victim'))?.provider,
  );
  const elbv2 = world.aws.testClients.elbv2;
  const hosts = world.aws.hosts.map((h) => h.instanceId).sort();
  // Another cluster's target group in the same account, holding one of the nodes.
  const otherCluster = await elbv2.send(
    new CreateTargetGroupCommand({
      Name: 'k8s-elsewhere-group',
      Protocol: 'TCP',
      Port: 31000,
      VpcId: world.aws.vpcId,
      TargetType: 'instance',
      Tags: [{ Key: ownershipTags.cluster, Value: 'another-cluster' }],
    }),
  );
  const otherClusterGroup = otherCluster.TargetGroups?.[0]?.TargetGroupArn ?? '';
  await elbv2.send(
    new RegisterTargetsCommand({
      TargetGroupArn: otherClusterGroup,
      Targets: [{ Id: hosts[0]! }],
    }),
  );
  const before = await shapeOf(world, victimState, otherClusterGroup);

  // Whoever can write the table points the tampered Service's item at the others' resources.
  const key = 'team-b/tampered';
  const record = await world.runtime.store.getService(key);
  const own = readNlbState(record?.provider);
  const forged: NlbState = {
    ...own,
    loadBalancerArn: victimState.loadBalancerArn,
    securityGroupId: victimState.securityGroupId,
    targetGroups: {
      '80': { ...victimState.targetGroups!['80']!, targets: hosts },
      '443': { arn: otherClusterGroup, name: 'k8s-elsewhere-group', targets: [hosts[0]!] },
    },
  };
  await world.runtime.store.setAttributes(servicePk(key), {
    rec: JSON.stringify({ ...record, provider: forged }),
  });

  // 1. A node joins: every Service gets a host update (the forged one would register the node
  //    in both foreign groups). 2. A full sync of the tampered Service.
  const added = await world.addNode();
  await world.send({ v: 1, kind: 'node', reason: 'node added' });
  expect(await drainAll(world)).toBe(true);
  await world.send({ v: 1, kind: 'resync', key, reason: 'test' });
  expect(await drainAll(world)).toBe(true);
  const afterSyncs = await shapeOf(world, victimState, otherClusterGroup);

  // 3. The tampered Service is deleted.
  await world.api.deleteNamespacedService({ name: 'tampered', namespace: 'team-b' });
  await world.send({ v: 1, kind: 'service', key });
  expect(await drainAll(world)).toBe(true);
  const afterDelete = await shapeOf(world, victimState, otherClusterGroup);

  const problems: string[] = [];
  let converged = 0;
  const check = (ok: boolean, problem: string) => {
    if (ok) converged++;
    else problems.push(problem);
  };
  // The victim's own host update added the node to its groups; nothing else changed.
  const expected = {
    ...before,
    targets: Object.fromEntries(
      Object.entries(before.targets).map(([arn, ids]) => [
        arn,
        arn === otherClusterGroup ? ids : [...ids, added.instanceId].sort(),
      ]),
    ),
  };
  const events = await world.api.listNamespacedEvent({ namespace: 'team-b' });
  const warnings = events.items
    .filter((e) => e.type === 'Warning' && /not owned by this Service/.test(e.message ?? ''))
    .map((e) => `${e.reason}: ${e.message}`);
  check(
    JSON.stringify(afterSyncs) === JSON.stringify(expected) &&
      warnings.some(
        (w) => w.startsWith('UpdateLoadBalancerFailed') && w.includes(otherClusterGroup),
      ) &&
      warnings.some((w) => w.startsWith('SyncLoadBalancerFailed')),
    `host update and full sync: ${JSON.stringify({ afterSyncs, expected, warnings })}`,
  );
  const gone = await world.api
    .readNamespacedService({ name: 'tampered', namespace: 'team-b' })
    .then(
      () => false,
      () => true,
    );
  check(
    JSON.stringify(afterDelete) === JSON.stringify(expected) && gone,
    `delete: ${JSON.stringify({ afterDelete, expected, gone })}`,
  );
  check(
    (await world.runtime.store.getService(key)) === undefined,
    'the tampered Service still has state after its delete',
  );

  // The victim and the bystander: one NLB each, every node a target, nothing else in the account.
  const found = await inventory(world.aws);
  const nodes = [...hosts, added.instanceId].sort();
  const owned = new Set<string>([otherClusterGroup]);
  for (const name of ['team-a/victim', 'team-c/bystander']) {
    const state = readNlbState((await world.runtime.store.getService(name))?.provider);
    const groups = Object.values(state.targetGroups ?? {});
    const healthy =
      state.loadBalancerArn !== undefined &&
      groups.length === 2 &&
      groups.every(
        (g) =>
          JSON.stringify(found.targetGroups.find((t) => t.name === g.arn)?.targets) ===
          JSON.stringify(nodes),
      );
    for (const g of groups) owned.add(g.arn);
    if (state.securityGroupId) owned.add(state.securityGroupId);
    const lb = found.loadBalancers.find((l) => l.dnsName === state.dnsName);
    if (lb) owned.add(lb.dnsName);
    check(healthy && lb !== undefined, `${name} did not converge: ${JSON.stringify(state)}`);
  }
  const leftovers = [
    ...found.loadBalancers.filter((l) => !owned.has(l.dnsName)).map((l) => l.name),
    ...found.targetGroups.filter((t) => !owned.has(t.name)).map((t) => t.name),
    ...found.securityGroups.filter((id) => !owned.has(id)),
  ];
  if (leftovers.length > 0) problems.push(`left over: ${leftovers.join(', ')}`);

  recordScenario({
    scenario,
    runs: 5,
    converged,
    leaked: leftovers.length,
    lost: 5 - converged,
    how: `${how}: the foreign groups kept their targets and health checks, the NLB its listeners, the security group its rules; the tampered Service got UpdateLoadBalancerFailed and SyncLoadBalancerFailed Warnings naming them, and its delete removed only its own resources`,
  });
  expect(problems).toEqual([]);
});
