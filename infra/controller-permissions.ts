import type { Stack } from 'aws-cdk-lib';
import { Effect, PolicyStatement } from 'aws-cdk-lib/aws-iam';
import { ownershipTags } from '../functions/nlb/model/naming';

export interface ControllerPermissionsProps {
  readonly clusterName: string;
  /** The cluster VPC: security groups are created only there. */
  readonly vpcId: string;
}

/**
 * What the service-sync function may do to ELBv2 and EC2: create only resources that carry this
 * cluster's ownership tag, and change or delete only resources that already carry it. The condition
 * keys are the ones AWS documents for these services: `aws:RequestTag/<key>` on create,
 * `elasticloadbalancing:CreateAction` / `ec2:CreateAction` for tags applied by a create call,
 * `aws:ResourceTag/<key>` on existing resources, `aws:TagKeys` to keep the ownership tags fixed.
 * test/iam/ evaluates every AWS call the tests record against them with a policy simulator, and
 * checks each key against AWS's service authorization reference.
 */
export function controllerPermissions(
  stack: Stack,
  props: ControllerPermissionsProps,
): PolicyStatement[] {
  const ours = { [`aws:ResourceTag/${ownershipTags.cluster}`]: props.clusterName };
  const requestsOurs = { [`aws:RequestTag/${ownershipTags.cluster}`]: props.clusterName };
  const elb = (resource: string) => stack.formatArn({ service: 'elasticloadbalancing', resource });
  const ec2 = (resource: string) => stack.formatArn({ service: 'ec2', resource });
  // Target groups are all named `k8s-…` (functions/nlb/model/naming.ts). NLBs are too, unless the
  // Service names one (aws-load-balancer-name): for them the ownership tag conditions below are
  // the only guard, as they are for security groups.
  const loadBalancers = elb('loadbalancer/net/*');
  const targetGroups = elb('targetgroup/k8s-*');
  const securityGroups = ec2('security-group/*');
  // Listeners are created with the ownership tags too (functions/nlb/execute-listeners.ts).
  const listeners = elb('listener/net/*/*');
  const notOwnershipKeys = { 'aws:TagKeys': Object.values(ownershipTags) };

  return [
    new PolicyStatement({
      sid: 'ReadLoadBalancersAndNetwork',
      effect: Effect.ALLOW,
      actions: [
        'elasticloadbalancing:DescribeLoadBalancers',
        'elasticloadbalancing:DescribeLoadBalancerAttributes',
        'elasticloadbalancing:DescribeListeners',
        'elasticloadbalancing:DescribeListenerCertificates',
        'elasticloadbalancing:DescribeListenerAttributes',
        'elasticloadbalancing:DescribeTargetGroups',
        'elasticloadbalancing:DescribeTargetGroupAttributes',
        'elasticloadbalancing:DescribeTargetHealth',
        'elasticloadbalancing:DescribeTags',
        'ec2:DescribeSecurityGroups',
        'ec2:DescribeSubnets',
        'tag:GetResources',
      ],
      // Describe and tag:GetResources calls support no resource-level permissions in IAM.
      resources: ['*'],
    }),
    new PolicyStatement({
      sid: 'CreateOwnedLoadBalancers',
      effect: Effect.ALLOW,
      actions: [
        'elasticloadbalancing:CreateLoadBalancer',
        'elasticloadbalancing:CreateTargetGroup',
      ],
      resources: [loadBalancers, targetGroups],
      conditions: { StringEquals: requestsOurs },
    }),
    new PolicyStatement({
      sid: 'TagOnCreate',
      effect: Effect.ALLOW,
      actions: ['elasticloadbalancing:AddTags'],
      resources: [loadBalancers, targetGroups, listeners],
      conditions: {
        StringEquals: {
          'elasticloadbalancing:CreateAction': [
            'CreateLoadBalancer',
            'CreateTargetGroup',
            'CreateListener',
          ],
          ...requestsOurs,
        },
      },
    }),
    new PolicyStatement({
      sid: 'ChangeOwnedLoadBalancers',
      effect: Effect.ALLOW,
      actions: [
        'elasticloadbalancing:CreateListener',
        'elasticloadbalancing:DeleteLoadBalancer',
        'elasticloadbalancing:ModifyLoadBalancerAttributes',
        'elasticloadbalancing:SetSecurityGroups',
        'elasticloadbalancing:SetSubnets',
        'elasticloadbalancing:SetIpAddressType',
        'elasticloadbalancing:DeleteTargetGroup',
        'elasticloadbalancing:ModifyTargetGroup',
        'elasticloadbalancing:ModifyTargetGroupAttributes',
        'elasticloadbalancing:RegisterTargets',
        'elasticloadbalancing:DeregisterTargets',
        'elasticloadbalancing:ModifyListener',
        'elasticloadbalancing:ModifyListenerAttributes',
        'elasticloadbalancing:DeleteListener',
        'elasticloadbalancing:AddListenerCertificates',
        'elasticloadbalancing:RemoveListenerCertificates',
      ],
      resources: [loadBalancers, targetGroups, listeners],
      conditions: { StringEquals: ours },
    }),
    new PolicyStatement({
      sid: 'RetagOwnedLoadBalancers',
      effect: Effect.ALLOW,
      actions: ['elasticloadbalancing:AddTags', 'elasticloadbalancing:RemoveTags'],
      resources: [loadBalancers, targetGroups, listeners],
      // The ownership tags themselves can be neither changed nor removed.
      conditions: { StringEquals: ours, 'ForAllValues:StringNotEquals': notOwnershipKeys },
    }),
    new PolicyStatement({
      sid: 'CreateOwnedSecurityGroups',
      effect: Effect.ALLOW,
      actions: ['ec2:CreateSecurityGroup'],
      resources: [securityGroups],
      conditions: { StringEquals: requestsOurs },
    }),
    new PolicyStatement({
      sid: 'CreateSecurityGroupsInClusterVpc',
      effect: Effect.ALLOW,
      actions: ['ec2:CreateSecurityGroup'],
      resources: [ec2(`vpc/${props.vpcId}`)],
    }),
    new PolicyStatement({
      sid: 'TagSecurityGroupsOnCreate',
      effect: Effect.ALLOW,
      actions: ['ec2:CreateTags'],
      resources: [securityGroups],
      conditions: { StringEquals: { 'ec2:CreateAction': 'CreateSecurityGroup', ...requestsOurs } },
    }),
    new PolicyStatement({
      sid: 'ChangeOwnedSecurityGroups',
      effect: Effect.ALLOW,
      actions: [
        'ec2:AuthorizeSecurityGroupIngress',
        'ec2:RevokeSecurityGroupIngress',
        'ec2:DeleteSecurityGroup',
      ],
      resources: [securityGroups],
      conditions: { StringEquals: ours },
    }),
    new PolicyStatement({
      // An account that has never had a load balancer gets ELB's service-linked role with its
      // first CreateLoadBalancer, which needs this grant; for that one service only.
      sid: 'CreateElbServiceLinkedRole',
      effect: Effect.ALLOW,
      actions: ['iam:CreateServiceLinkedRole'],
      resources: [
        stack.formatArn({
          service: 'iam',
          region: '',
          resource:
            'role/aws-service-role/elasticloadbalancing.amazonaws.com/AWSServiceRoleForElasticLoadBalancing',
        }),
      ],
      conditions: { StringEquals: { 'iam:AWSServiceName': 'elasticloadbalancing.amazonaws.com' } },
    }),
    new PolicyStatement({
      sid: 'RetagOwnedSecurityGroups',
      effect: Effect.ALLOW,
      actions: ['ec2:CreateTags', 'ec2:DeleteTags'],
      resources: [securityGroups],
      conditions: { StringEquals: ours, 'ForAllValues:StringNotEquals': notOwnershipKeys },
    }),
  ];
}
