import { Stack, Token, Validations } from 'aws-cdk-lib';
import type { IConstruct } from 'constructs';

/** An ARN as cdk-nag spells it in a finding: unresolved parts as `<AWS::…>`, known ones literally. */
function nagArn(stack: Stack, service: string, resource: string): string {
  const part = (value: string, pseudo: string) => (Token.isUnresolved(value) ? pseudo : value);
  return [
    'Resource::arn',
    part(stack.partition, '<AWS::Partition>'),
    service,
    part(stack.region, '<AWS::Region>'),
    part(stack.account, '<AWS::AccountId>'),
    resource,
  ].join(':');
}

/**
 * The cdk-nag findings the design accepts, each with its reason, acknowledged finding by finding on
 * the functions' role only (never a rule as a whole): a new wildcard anywhere else still fails synth.
 */
export function acknowledgeFunctionRoleWildcards(functionsRole: IConstruct): void {
  const stack = Stack.of(functionsRole);
  const arn = (service: string, resource: string) => nagArn(stack, service, resource);
  Validations.of(functionsRole).acknowledge(
    {
      id: 'AwsSolutions-IAM5[Resource::*]',
      reason:
        'Only the Describe* calls of ELBv2 and EC2, tag:GetResources and (with functions in a VPC) the Lambda network-interface calls, none of which IAM can scope to resources.',
    },
    {
      id: `AwsSolutions-IAM5[${arn('elasticloadbalancing', 'loadbalancer/net/*')}]`,
      reason:
        'NLBs are created with generated names or the name a Service asks for; every statement on them requires the cluster ownership tag (aws:RequestTag on create, aws:ResourceTag after).',
    },
    {
      id: `AwsSolutions-IAM5[${arn('elasticloadbalancing', 'targetgroup/k8s-*')}]`,
      reason:
        'Target groups are created with generated names; every statement on them requires the cluster ownership tag (aws:RequestTag on create, aws:ResourceTag after).',
    },
    {
      id: `AwsSolutions-IAM5[${arn('elasticloadbalancing', 'listener/net/*/*')}]`,
      reason:
        'Listeners are created with generated IDs; every statement on them requires the cluster ownership tag (aws:RequestTag on create, aws:ResourceTag after).',
    },
    {
      id: `AwsSolutions-IAM5[${arn('ec2', 'security-group/*')}]`,
      reason:
        'Security group IDs are assigned by EC2 at creation; creation requires the cluster ownership tag (aws:RequestTag) and every change requires it on the group (aws:ResourceTag).',
    },
  );
}

/**
 * CDK's own function behind AwsCustomResource, which reads the cluster security group once per
 * deploy (eks:DescribeCluster on this cluster only): its findings are CDK's choices, accepted here.
 */
export function acknowledgeLookupFunction(provider: IConstruct): void {
  Validations.of(provider).acknowledge({
    id: 'AwsSolutions-IAM4[Policy::arn:<AWS::Partition>:iam::aws:policy/service-role/AWSLambdaBasicExecutionRole]',
    reason:
      'The role CDK gives its AwsCustomResource function: logs only; the one call it makes is eks:DescribeCluster on this cluster, granted separately.',
  });
}
