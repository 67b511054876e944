import { DescribeSecurityGroupsCommand, EC2Client } from '@aws-sdk/client-ec2';
import {
  DescribeListenersCommand,
  DescribeLoadBalancersCommand,
  DescribeTargetGroupsCommand,
  DescribeTargetHealthCommand,
  ElasticLoadBalancingV2Client,
} from '@aws-sdk/client-elastic-load-balancing-v2';
import type { AwsCluster } from '../../support/aws-cluster';

/**
 * Everything in the (private) account that a controller could have made, tagged or not: load
 * balancers with their listeners, target groups with their registered instances, and security
 * groups other than the VPC's default and the cluster's backend group.
 */
export interface Inventory {
  readonly loadBalancers: { name: string; dnsName: string; listeners: string[] }[];
  readonly targetGroups: { name: string; port: number; targets: string[] }[];
  readonly securityGroups: string[];
}

export async function inventory(cluster: AwsCluster): Promise<Inventory> {
  const elbv2 = cluster.account.client(ElasticLoadBalancingV2Client);
  const ec2 = cluster.account.client(EC2Client);
  const lbs = (await elbv2.send(new DescribeLoadBalancersCommand({}))).LoadBalancers ?? [];
  const loadBalancers = [];
  for (const lb of lbs) {
    const listeners =
      (await elbv2.send(new DescribeListenersCommand({ LoadBalancerArn: lb.LoadBalancerArn })))
        .Listeners ?? [];
    loadBalancers.push({
      name: lb.LoadBalancerName ?? '',
      dnsName: lb.DNSName ?? '',
      listeners: listeners
        .map((l) => `${l.Protocol}:${l.Port}->${l.DefaultActions?.[0]?.TargetGroupArn ?? '?'}`)
        .sort(),
    });
  }
  const groups = (await elbv2.send(new DescribeTargetGroupsCommand({}))).TargetGroups ?? [];
  const targetGroups = [];
  for (const tg of groups) {
    const health = await elbv2.send(
      new DescribeTargetHealthCommand({ TargetGroupArn: tg.TargetGroupArn }),
    );
    targetGroups.push({
      name: tg.TargetGroupArn ?? '',
      port: tg.Port ?? 0,
      targets: (health.TargetHealthDescriptions ?? []).map((d) => d.Target?.Id ?? '').sort(),
    });
  }
  const sgs =
    (
      await ec2.send(
        new DescribeSecurityGroupsCommand({
          Filters: [{ Name: 'vpc-id', Values: [cluster.vpcId] }],
        }),
      )
    ).SecurityGroups ?? [];
  const securityGroups = sgs
    .filter(
      (sg) => sg.GroupName !== 'default' && sg.GroupId !== cluster.settings.backendSecurityGroupId,
    )
    .map((sg) => sg.GroupId ?? '');
  return { loadBalancers, targetGroups, securityGroups };
}

/** Resources beyond what one Service with `ports` listeners should have (0 when all is right). */
export function surplus(found: Inventory, expected: { loadBalancers: number; ports: number }) {
  return (
    Math.max(0, found.loadBalancers.length - expected.loadBalancers) +
    Math.max(0, found.targetGroups.length - expected.ports) +
    Math.max(0, found.securityGroups.length - expected.loadBalancers)
  );
}
