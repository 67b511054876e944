import type {
  DesiredListener,
  DesiredLoadBalancer,
  Observed,
  ObservedListener,
  ObservedSecurityGroup,
  SubnetMapping,
} from '../../functions/nlb/model/types';

/** How the AWS side of a built NLB is to look, where tests of the plan differ. */
export interface ObservedShape {
  /** The NLB's security groups, as DescribeLoadBalancers lists them. */
  readonly securityGroupIds: readonly string[];
  /** The ARN of each target group (listeners point at it); `arn:tg/<key>` by default. */
  readonly targetGroupArn?: (targetGroup: {
    readonly key: string;
    readonly name: string;
  }) => string;
  /** Addresses pinned per subnet; none by default. */
  readonly pinnedAddresses?: readonly SubnetMapping[];
  /** What a listener reports beyond its port, protocol and target group. */
  readonly listener: (
    desired: DesiredListener,
  ) => Pick<ObservedListener, 'certificateArns' | 'sslPolicy' | 'alpnPolicy' | 'attributes'>;
  /** The managed security group as described; the desired one, as created, by default. */
  readonly securityGroup?: ObservedSecurityGroup | undefined;
}

/**
 * What AWS reports for an NLB, its listeners and target groups built exactly from `desired`,
 * shaped by `shape`: the starting point of the plan's unit tests, which then change one thing.
 */
export function observedAsBuilt(desired: DesiredLoadBalancer, shape: ObservedShape): Observed {
  const arnOf = (key: string): string => {
    const name = desired.targetGroups.find((tg) => tg.key === key)?.name ?? '';
    return shape.targetGroupArn?.({ key, name }) ?? `arn:tg/${key}`;
  };
  return {
    loadBalancer: {
      arn: 'arn:lb/1',
      name: desired.name,
      dnsName: 'lb.example',
      scheme: desired.scheme,
      subnetIds: desired.subnetMappings.map((m) => m.subnetId),
      pinnedAddresses: shape.pinnedAddresses ?? [],
      securityGroupIds: shape.securityGroupIds,
      tags: desired.tags,
      attributes: desired.attributes,
    },
    listeners: desired.listeners.map((l) => ({
      arn: `arn:listener/${l.port}`,
      port: l.port,
      protocol: l.protocol,
      targetGroupArn: arnOf(l.targetGroupKey),
      ...shape.listener(l),
    })),
    targetGroups: desired.targetGroups.map((tg) => ({
      arn: arnOf(tg.key),
      name: tg.name,
      protocol: tg.protocol,
      port: tg.port,
      healthCheck: tg.healthCheck,
      tags: tg.tags,
      attributes: tg.attributes,
      targets: tg.targets,
    })),
    securityGroup:
      'securityGroup' in shape
        ? shape.securityGroup
        : {
            id: 'sg-frontend',
            name: desired.securityGroup.name,
            ingress: desired.securityGroup.ingress,
            tags: desired.securityGroup.tags,
          },
  };
}
