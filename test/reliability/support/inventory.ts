import { DescribeSecurityGroupsCommand, EC2Client } from '@aws-sdk/client-ec2';
import {
  DescribeListenersCommand,
  DescribeLoadBalancersCommand,
  DescribeTargetGroupsCommand,
  DescribeTargetHealthCommand,
  ElasticLoadBalancingV2Client,
} from '@aws-sdk/client-elastic-load-balancing-v2';
import type { AwsCluster } from '../../../kit/aws-cluster';

/**
 * Everything in the (private) account that a controller could have made, tagged or not: load
 * balancers with their listeners, target groups with their registered instances, and security
 * groups other than the VPC's default and the cluster's backend group.
 */
export interface Inventory {
  readonly loadBalancers: { name: string; dnsName: string; listeners: string[] }[];
  /** Targets: instance IDs, or `ip:port` of pods. */
  readonly targetGroups: { name: string; port: number; targets: string[]; health: string }[];
  readonly securityGroups: string[];
  /** Inbound rules of those security groups, as `protocol from-to source` lines. */
  readonly ingress: string[];
}

/**
 * The inventory without what differs between two accounts (ARNs, IDs, DNS names): two runs that
 * converged to the same end state have the same shape.
 */
export function shapeOf(found: Inventory): string {
  const tgPort = new Map(found.targetGroups.map((tg) => [tg.name, tg.port]));
  return JSON.stringify({
    loadBalancers: found.loadBalancers
      .map((lb) =>
        lb.listeners.map((l) =>
          l.replace(/->(.*)$/, (_, arn: string) => `->${tgPort.get(arn) ?? '?'}`),
        ),
      )
      .sort(),
    targetGroups: found.targetGroups
      .map((tg) => `${tg.port} ${tg.health} ${tg.targets.length}`)
      .sort(),
    securityGroups: found.securityGroups.length,
    ingress: [...found.ingress].sort(),
  });
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
      // A pod target is its IP on a port of its own.
      targets: (health.TargetHealthDescriptions ?? [])
        .map((d) =>
          tg.TargetType === 'ip'
            ? `${d.Target?.Id ?? ''}:${d.Target?.Port ?? ''}`
            : (d.Target?.Id ?? ''),
        )
        .sort(),
      health: `${tg.HealthCheckProtocol}:${tg.HealthCheckPort} every ${tg.HealthCheckIntervalSeconds}s`,
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
  const ours = sgs.filter(
    (sg) => sg.GroupName !== 'default' && sg.GroupId !== cluster.settings.backendSecurityGroupId,
  );
  const ingress = ours.flatMap((sg) =>
    (sg.IpPermissions ?? []).flatMap((p) =>
      (p.IpRanges ?? []).map((r) => `${p.IpProtocol} ${p.FromPort}-${p.ToPort} ${r.CidrIp}`),
    ),
  );
  return {
    loadBalancers,
    targetGroups,
    securityGroups: ours.map((sg) => sg.GroupId ?? ''),
    ingress,
  };
}

/** Resources beyond what one Service with `ports` listeners should have (0 when all is right). */
export function surplus(found: Inventory, expected: { loadBalancers: number; ports: number }) {
  return (
    Math.max(0, found.loadBalancers.length - expected.loadBalancers) +
    Math.max(0, found.targetGroups.length - expected.ports) +
    Math.max(0, found.securityGroups.length - expected.loadBalancers)
  );
}
