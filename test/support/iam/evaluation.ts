import { ownershipTags } from '../../../functions/nlb/model/naming';
import type { Identity } from './call-log';
import {
  evaluate,
  policiesOf,
  principalArn,
  resolvePolicies,
  synthContext,
  type Deployment,
  type Evaluation,
  type PolicyDocument,
  type Synthesised,
} from './policy';
import { canonicalAction } from './reference';
import {
  describeCall,
  type Authorization,
  type AwsState,
  type SdkCall,
  type Tags,
} from './request-context';

/** The principals whose calls are evaluated, and the role each one's policies are attached to. */
export const roles = { functions: 'FunctionsRole', forwarder: 'ForwarderRole' } as const;
export type Principal = keyof typeof roles;

export function isPrincipal(identity: Identity): identity is Principal {
  return identity === 'functions' || identity === 'forwarder';
}

/**
 * Which deployment of the stack a request is made in: its account and Region, and the stack's
 * resources bound to the test world's. The test worlds make one queue, one dead-letter queue
 * (named `<queue>-dlq`, as functions/local does), one table and one bus each, so the stack's are
 * those the request names; the stack's vpcId is the VPC whose subnets carry the cluster's tag.
 */
export function deploymentFor(
  authorization: Authorization,
  account: string,
  region: string,
): Deployment {
  const [, , service = '', , , ...rest] = authorization.resource.split(':');
  const name = rest.join(':');
  const deployment: Deployment = {
    account,
    region,
    // No test world's VPC: only the cluster's is bound below, so a call in another is denied.
    vpcId: 'vpc-00000000000000000',
    workQueue: 'work',
    deadLetterQueue: 'work-dlq',
    table: 'state',
    eventBus: `${synthContext.clusterName}-service-controller`,
  };
  switch (service) {
    case 'sqs':
      return name.endsWith('-dlq')
        ? { ...deployment, deadLetterQueue: name }
        : { ...deployment, workQueue: name };
    case 'dynamodb':
      return { ...deployment, table: name.replace(/^table\//, '').split('/')[0] ?? '' };
    case 'events':
      return { ...deployment, eventBus: name.replace(/^event-bus\//, '') };
    case 'ec2':
      return name.startsWith('vpc/') &&
        authorization.vpcClusters?.includes(synthContext.clusterName) === true
        ? { ...deployment, vpcId: name.slice('vpc/'.length) }
        : deployment;
    default:
      return deployment;
  }
}

/** Evaluates authorizations against a principal's synthesised policies, resolving them per deployment. */
export class PolicyEvaluator {
  private readonly policies: Record<Principal, PolicyDocument[]>;
  private readonly resolved = new Map<string, PolicyDocument[]>();
  private readonly results = new Map<string, Promise<Evaluation>>();

  constructor(private readonly synthesised: Synthesised) {
    this.policies = {
      functions: policiesOf(synthesised, roles.functions),
      forwarder: policiesOf(synthesised, roles.forwarder),
    };
    for (const [principal, policies] of Object.entries(this.policies)) {
      if (policies.length === 0) throw new Error(`no policies attached to the ${principal} role`);
    }
    // Managed policies attached by ARN (AWS's own) are not in the template to evaluate.
    for (const [id, resource] of Object.entries(synthesised.resources)) {
      const attached = resource.Properties?.ManagedPolicyArns;
      if (
        resource.Type === 'AWS::IAM::Role' &&
        Object.values(roles).some((role) => id.startsWith(role)) &&
        Array.isArray(attached) &&
        attached.length > 0
      ) {
        throw new Error(`${id} has managed policies the evaluation cannot see`);
      }
    }
  }

  evaluate(
    principal: Principal,
    authorization: Authorization,
    deployment: Deployment,
  ): Promise<Evaluation> {
    const key = JSON.stringify([principal, authorization, deployment]);
    let result = this.results.get(key);
    if (result === undefined) {
      result = evaluate(
        authorization,
        this.policiesFor(principal, deployment),
        principalArn(deployment.account, roles[principal]),
        deployment.account,
      );
      this.results.set(key, result);
    }
    return result;
  }

  private policiesFor(principal: Principal, deployment: Deployment): PolicyDocument[] {
    const key = JSON.stringify([principal, deployment]);
    let policies = this.resolved.get(key);
    if (policies === undefined) {
      policies = resolvePolicies(this.policies[principal], this.synthesised, deployment);
      this.resolved.set(key, policies);
    }
    return policies;
  }
}

// ---------------------------------------------------------------------------------------------
// Requests that must be denied.

export const negativeAccount = '123456789012';
const region = 'us-east-1';
const clusterVpc = 'vpc-0c1a5e7c1a5e7c1a5';
const foreignVpc = 'vpc-0f0e1f0e1f0e1f0e1';

/** Where the negative cases are made: fixed, not bound to what each request names. */
export const negativeDeployment: Deployment = {
  account: negativeAccount,
  region,
  vpcId: clusterVpc,
  workQueue: 'work',
  deadLetterQueue: 'work-dlq',
  table: 'state',
  eventBus: `${synthContext.clusterName}-service-controller`,
};
const elbArn = (resource: string) =>
  `arn:aws:elasticloadbalancing:${region}:${negativeAccount}:${resource}`;

const ours: Tags = {
  [ownershipTags.cluster]: synthContext.clusterName,
  [ownershipTags.service]: 'default/web',
  [ownershipTags.serviceUid]: 'uid-web',
  [ownershipTags.resource]: 'load-balancer',
};
const otherCluster: Tags = { ...ours, [ownershipTags.cluster]: 'other-cluster' };

// As the emulator names them (…/app/…): the request context spells a network one …/net/….
const ourLb = elbArn('loadbalancer/app/k8s-default-web-0a1b2c3d4e/1111111111111111');
const foreignLb = elbArn('loadbalancer/app/k8s-default-web-9f8e7d6c5b/2222222222222222');
const ourTg = elbArn('targetgroup/k8s-default-web-80-0a1b2c3d/3333333333333333');
const untaggedTg = elbArn('targetgroup/k8s-default-web-80-9f8e7d6c/4444444444444444');
const foreignListener = elbArn(
  'listener/app/k8s-default-web-9f8e7d6c5b/2222222222222222/5555555555555555',
);
const ourGroup = 'sg-0a0a0a0a0a0a0a0a0';
const foreignGroup = 'sg-0f0f0f0f0f0f0f0f0';

/** AWS as the negative cases see it: our resources, another cluster's, and untagged ones. */
const fixedState: AwsState = {
  elbResource: (arn) =>
    Promise.resolve({
      exists: true,
      tags: arn === ourLb || arn === ourTg ? ours : arn === untaggedTg ? {} : otherCluster,
      tagsKnown: true,
    }),
  loadBalancerType: () => Promise.resolve('network'),
  rememberLoadBalancerType: () => undefined,
  rememberTags: () => undefined,
  hasLoadBalancers: () => Promise.resolve(true),
  securityGroup: (id) =>
    Promise.resolve({
      exists: true,
      tags: id === ourGroup ? ours : { Name: 'eks-cluster-sg-other' },
      tagsKnown: true,
      vpcId: clusterVpc,
    }),
  vpc: (id) =>
    Promise.resolve({
      exists: true,
      tags: {},
      tagsKnown: true,
      tenancy: 'default',
      clusters: id === clusterVpc ? [synthContext.clusterName] : ['other-cluster'],
    }),
};

export interface NegativeCase {
  readonly name: string;
  readonly principal: Principal;
  /** The call is denied when any one of these is. */
  readonly authorizations: readonly Authorization[];
}

async function sdk(service: string, operation: string, input: unknown, output?: unknown) {
  const call: SdkCall = { service, operation, input, account: negativeAccount, region };
  return (await describeCall(call, fixedState)).finish(output);
}

function direct(action: string, resource: string, context: Authorization['context'] = {}) {
  return [{ action, resource, context }];
}

const tagList = (tags: Tags) => Object.entries(tags).map(([Key, Value]) => ({ Key, Value }));

const functions = async (
  name: string,
  authorizations: Promise<Authorization[]>,
): Promise<NegativeCase> => ({
  name,
  principal: 'functions',
  authorizations: await authorizations,
});

const forwarder = async (
  name: string,
  authorizations: Authorization[] | Promise<Authorization[]>,
): Promise<NegativeCase> => ({
  name,
  principal: 'forwarder',
  authorizations: await authorizations,
});

export async function negativeCases(): Promise<NegativeCase[]> {
  const queue = (name: string) => `arn:aws:sqs:${region}:${negativeAccount}:${name}`;
  const createLb = (name: string, tags: Tags) =>
    sdk(
      'ElasticLoadBalancingV2',
      'CreateLoadBalancer',
      { Name: name, Type: 'network', Scheme: 'internal', Tags: tagList(tags) },
      { LoadBalancers: [{ LoadBalancerArn: elbArn(`loadbalancer/app/${name}/6666666666666666`) }] },
    );
  return Promise.all([
    // Another cluster's NLB, an untagged target group, a foreign listener and security group.
    functions(
      "another cluster's NLB: DeleteLoadBalancer",
      sdk('ElasticLoadBalancingV2', 'DeleteLoadBalancer', { LoadBalancerArn: foreignLb }),
    ),
    functions(
      "another cluster's NLB: ModifyLoadBalancerAttributes",
      sdk('ElasticLoadBalancingV2', 'ModifyLoadBalancerAttributes', {
        LoadBalancerArn: foreignLb,
        Attributes: [],
      }),
    ),
    functions(
      "another cluster's NLB: SetSecurityGroups",
      sdk('ElasticLoadBalancingV2', 'SetSecurityGroups', {
        LoadBalancerArn: foreignLb,
        SecurityGroups: [ourGroup],
      }),
    ),
    functions(
      "another cluster's NLB: SetIpAddressType",
      sdk('ElasticLoadBalancingV2', 'SetIpAddressType', {
        LoadBalancerArn: foreignLb,
        IpAddressType: 'dualstack',
      }),
    ),
    functions(
      "another cluster's NLB: CreateListener on it",
      sdk('ElasticLoadBalancingV2', 'CreateListener', {
        LoadBalancerArn: foreignLb,
        Protocol: 'TCP',
        Port: 80,
        Tags: tagList(ours),
      }),
    ),
    functions(
      "another cluster's NLB: AddTags (a tag of its own)",
      sdk('ElasticLoadBalancingV2', 'AddTags', {
        ResourceArns: [foreignLb],
        Tags: [{ Key: 'team', Value: 'payments' }],
      }),
    ),
    functions(
      "another cluster's listener: DeleteListener",
      sdk('ElasticLoadBalancingV2', 'DeleteListener', { ListenerArn: foreignListener }),
    ),
    functions(
      'an untagged target group: RegisterTargets',
      sdk('ElasticLoadBalancingV2', 'RegisterTargets', {
        TargetGroupArn: untaggedTg,
        Targets: [{ Id: 'i-0123456789abcdef0' }],
      }),
    ),
    functions(
      'an untagged target group: ModifyTargetGroup',
      sdk('ElasticLoadBalancingV2', 'ModifyTargetGroup', { TargetGroupArn: untaggedTg }),
    ),
    functions(
      'an untagged target group: DeleteTargetGroup',
      sdk('ElasticLoadBalancingV2', 'DeleteTargetGroup', { TargetGroupArn: untaggedTg }),
    ),
    functions(
      'a foreign security group: AuthorizeSecurityGroupIngress',
      sdk('EC2', 'AuthorizeSecurityGroupIngress', { GroupId: foreignGroup }),
    ),
    functions(
      'a foreign security group: RevokeSecurityGroupIngress',
      sdk('EC2', 'RevokeSecurityGroupIngress', { GroupId: foreignGroup }),
    ),
    functions(
      'a foreign security group: DeleteSecurityGroup',
      sdk('EC2', 'DeleteSecurityGroup', { GroupId: foreignGroup }),
    ),
    functions(
      'a foreign security group: CreateTags',
      sdk('EC2', 'CreateTags', { Resources: [foreignGroup], Tags: [{ Key: 'a', Value: 'b' }] }),
    ),
    // Our own resources: the ownership tags can be neither changed nor removed.
    functions(
      'our NLB: AddTags moving it to another cluster',
      sdk('ElasticLoadBalancingV2', 'AddTags', {
        ResourceArns: [ourLb],
        Tags: [{ Key: ownershipTags.cluster, Value: 'other-cluster' }],
      }),
    ),
    functions(
      'our NLB: RemoveTags of the cluster tag',
      sdk('ElasticLoadBalancingV2', 'RemoveTags', {
        ResourceArns: [ourLb],
        TagKeys: [ownershipTags.cluster],
      }),
    ),
    functions(
      'our target group: AddTags giving it another Service UID',
      sdk('ElasticLoadBalancingV2', 'AddTags', {
        ResourceArns: [ourTg],
        Tags: [{ Key: ownershipTags.serviceUid, Value: 'uid-other' }],
      }),
    ),
    functions(
      'our security group: CreateTags moving it to another cluster',
      sdk('EC2', 'CreateTags', {
        Resources: [ourGroup],
        Tags: [{ Key: ownershipTags.cluster, Value: 'other-cluster' }],
      }),
    ),
    functions(
      'our security group: DeleteTags of the Service tag',
      sdk('EC2', 'DeleteTags', { Resources: [ourGroup], Tags: [{ Key: ownershipTags.service }] }),
    ),
    // Creating without the ownership tags, for another cluster, or outside our names and VPC.
    functions('CreateLoadBalancer without tags', createLb('k8s-default-web-0a1b2c3d4e', {})),
    functions(
      'CreateLoadBalancer tagged for another cluster',
      createLb('k8s-default-web-0a1b2c3d4e', otherCluster),
    ),
    // A name of the Service's choosing (aws-load-balancer-name) is allowed with our tags only.
    functions('CreateLoadBalancer with its own name, untagged', createLb('prod-web', {})),
    functions(
      'CreateTargetGroup without the cluster tag',
      sdk(
        'ElasticLoadBalancingV2',
        'CreateTargetGroup',
        { Name: 'k8s-default-web-80-0a1b2c3d', Tags: [{ Key: 'team', Value: 'payments' }] },
        { TargetGroups: [{ TargetGroupArn: ourTg }] },
      ),
    ),
    functions(
      'CreateListener whose tags name another cluster',
      sdk(
        'ElasticLoadBalancingV2',
        'CreateListener',
        { LoadBalancerArn: ourLb, Protocol: 'TCP', Port: 80, Tags: tagList(otherCluster) },
        { Listeners: [{ ListenerArn: `${ourLb.replace(':loadbalancer/', ':listener/')}/7777` }] },
      ),
    ),
    functions(
      'CreateSecurityGroup without tags',
      sdk(
        'EC2',
        'CreateSecurityGroup',
        { GroupName: 'k8s-elb-web', Description: 'web', VpcId: clusterVpc },
        { GroupId: ourGroup },
      ),
    ),
    functions(
      'CreateSecurityGroup in a VPC not the cluster’s',
      sdk(
        'EC2',
        'CreateSecurityGroup',
        {
          GroupName: 'k8s-elb-web',
          Description: 'web',
          VpcId: foreignVpc,
          TagSpecifications: [{ ResourceType: 'security-group', Tags: tagList(ours) }],
        },
        { GroupId: ourGroup },
      ),
    ),
    // Actions the code never calls.
    functions(
      'iam:CreateRole',
      Promise.resolve(direct('iam:CreateRole', `arn:aws:iam::${negativeAccount}:role/admin`)),
    ),
    functions(
      'iam:CreateServiceLinkedRole for another service',
      Promise.resolve(
        direct(
          'iam:CreateServiceLinkedRole',
          `arn:aws:iam::${negativeAccount}:role/aws-service-role/autoscaling.amazonaws.com/AWSServiceRoleForAutoScaling`,
          { 'iam:AWSServiceName': 'autoscaling.amazonaws.com' },
        ),
      ),
    ),
    functions(
      'ec2:TerminateInstances',
      Promise.resolve(
        direct(
          'ec2:TerminateInstances',
          `arn:aws:ec2:${region}:${negativeAccount}:instance/i-0123456789abcdef0`,
        ),
      ),
    ),
    functions(
      'ec2:RunInstances',
      Promise.resolve(
        direct(
          'ec2:RunInstances',
          `arn:aws:ec2:${region}:${negativeAccount}:instance/i-0123456789abcdef0`,
        ),
      ),
    ),
    functions(
      'sqs:DeleteQueue (the work queue)',
      Promise.resolve(direct('sqs:DeleteQueue', queue('work'))),
    ),
    functions(
      'sqs:PurgeQueue (the work queue)',
      Promise.resolve(direct('sqs:PurgeQueue', queue('work'))),
    ),
    functions(
      'sqs:ReceiveMessage (the dead-letter queue)',
      Promise.resolve(direct('sqs:ReceiveMessage', queue('work-dlq'))),
    ),
    functions(
      'dynamodb:DeleteTable (the state table)',
      Promise.resolve(
        direct('dynamodb:DeleteTable', `arn:aws:dynamodb:${region}:${negativeAccount}:table/state`),
      ),
    ),
    functions(
      'events:PutEvents to another bus',
      Promise.resolve(
        direct('events:PutEvents', `arn:aws:events:${region}:${negativeAccount}:event-bus/default`),
      ),
    ),
    forwarder(
      'forwarder: sqs:ReceiveMessage (the work queue)',
      direct('sqs:ReceiveMessage', queue('work')),
    ),
    forwarder(
      'forwarder: sqs:SendMessage to the dead-letter queue',
      direct('sqs:SendMessage', queue('work-dlq')),
    ),
    forwarder(
      'forwarder: sqs:DeleteMessage (the work queue)',
      direct('sqs:DeleteMessage', queue('work')),
    ),
    forwarder(
      'forwarder: elasticloadbalancing:DeleteLoadBalancer (our NLB)',
      await sdk('ElasticLoadBalancingV2', 'DeleteLoadBalancer', {
        LoadBalancerArn: ourLb,
      }),
    ),
  ]);
}

/**
 * The same requests on our own resources, which must be allowed: the denials above then come from
 * the tags, names and VPCs they change, not from how the requests are built.
 */
export async function positiveControls(): Promise<NegativeCase[]> {
  const ourListener = `${ourLb.replace(':loadbalancer/', ':listener/')}/7777777777777777`;
  const queue = (name: string) => `arn:aws:sqs:${region}:${negativeAccount}:${name}`;
  return Promise.all([
    functions(
      'our NLB: DeleteLoadBalancer',
      sdk('ElasticLoadBalancingV2', 'DeleteLoadBalancer', { LoadBalancerArn: ourLb }),
    ),
    functions(
      'our NLB: SetSecurityGroups, SetSubnets, SetIpAddressType, ModifyLoadBalancerAttributes',
      Promise.all([
        sdk('ElasticLoadBalancingV2', 'SetSecurityGroups', {
          LoadBalancerArn: ourLb,
          SecurityGroups: [ourGroup],
        }),
        sdk('ElasticLoadBalancingV2', 'SetIpAddressType', {
          LoadBalancerArn: ourLb,
          IpAddressType: 'dualstack',
        }),
        sdk('ElasticLoadBalancingV2', 'SetSubnets', {
          LoadBalancerArn: ourLb,
          Subnets: ['subnet-0123456789abcdef0'],
        }),
        sdk('ElasticLoadBalancingV2', 'ModifyLoadBalancerAttributes', {
          LoadBalancerArn: ourLb,
          Attributes: [],
        }),
      ]).then((all) => all.flat()),
    ),
    functions(
      'our NLB: CreateListener with our tags',
      sdk(
        'ElasticLoadBalancingV2',
        'CreateListener',
        { LoadBalancerArn: ourLb, Protocol: 'TCP', Port: 80, Tags: tagList(ours) },
        { Listeners: [{ ListenerArn: ourListener }] },
      ),
    ),
    functions(
      'our NLB: AddTags and RemoveTags of a tag of its own',
      Promise.all([
        sdk('ElasticLoadBalancingV2', 'AddTags', {
          ResourceArns: [ourLb],
          Tags: [{ Key: 'team', Value: 'payments' }],
        }),
        sdk('ElasticLoadBalancingV2', 'RemoveTags', { ResourceArns: [ourLb], TagKeys: ['team'] }),
      ]).then((all) => all.flat()),
    ),
    functions(
      'our target group: RegisterTargets, DeleteTargetGroup',
      Promise.all([
        sdk('ElasticLoadBalancingV2', 'RegisterTargets', {
          TargetGroupArn: ourTg,
          Targets: [{ Id: 'i-0123456789abcdef0' }],
        }),
        sdk('ElasticLoadBalancingV2', 'DeleteTargetGroup', { TargetGroupArn: ourTg }),
      ]).then((all) => all.flat()),
    ),
    functions(
      'our security group: ingress, tags of its own, delete',
      Promise.all([
        sdk('EC2', 'AuthorizeSecurityGroupIngress', { GroupId: ourGroup }),
        sdk('EC2', 'RevokeSecurityGroupIngress', { GroupId: ourGroup }),
        sdk('EC2', 'CreateTags', { Resources: [ourGroup], Tags: [{ Key: 'a', Value: 'b' }] }),
        sdk('EC2', 'DeleteTags', { Resources: [ourGroup], Tags: [{ Key: 'a' }] }),
        sdk('EC2', 'DeleteSecurityGroup', { GroupId: ourGroup }),
      ]).then((all) => all.flat()),
    ),
    functions(
      'CreateLoadBalancer, CreateTargetGroup with our tags',
      Promise.all([
        sdk(
          'ElasticLoadBalancingV2',
          'CreateLoadBalancer',
          { Name: 'k8s-default-web-0a1b2c3d4e', Type: 'network', Tags: tagList(ours) },
          { LoadBalancers: [{ LoadBalancerArn: ourLb }] },
        ),
        sdk(
          'ElasticLoadBalancingV2',
          'CreateTargetGroup',
          { Name: 'k8s-default-web-80-0a1b2c3d', Tags: tagList(ours) },
          { TargetGroups: [{ TargetGroupArn: ourTg }] },
        ),
      ]).then((all) => all.flat()),
    ),
    functions(
      'CreateSecurityGroup in the cluster VPC with our tags',
      sdk(
        'EC2',
        'CreateSecurityGroup',
        {
          GroupName: 'k8s-elb-web',
          Description: 'web',
          VpcId: clusterVpc,
          TagSpecifications: [{ ResourceType: 'security-group', Tags: tagList(ours) }],
        },
        { GroupId: ourGroup },
      ),
    ),
    functions(
      'the queues, the table and the bus of the stack',
      Promise.all([
        sdk('SQS', 'SendMessageBatch', {
          QueueUrl: `https://sqs.${region}.amazonaws.com/${negativeAccount}/work`,
        }),
        sdk('SQS', 'SendMessage', {
          QueueUrl: `https://sqs.${region}.amazonaws.com/${negativeAccount}/work-dlq`,
        }),
        sdk('DynamoDB', 'TransactWriteItems', {
          TransactItems: [{ Put: { TableName: 'state' } }, { Update: { TableName: 'state' } }],
        }),
        sdk('EventBridge', 'PutEvents', {
          Entries: [{ EventBusName: negativeDeployment.eventBus, Source: 'x', DetailType: 'y' }],
        }),
      ]).then((all) => all.flat()),
    ),
    forwarder(
      'forwarder: sqs:SendMessage to the work queue',
      direct('sqs:SendMessage', queue('work')),
    ),
  ]);
}

export interface CaseResult {
  readonly name: string;
  readonly principal: Principal;
  readonly decision: string;
  /** The authorization that denied it, or every one when all were allowed. */
  readonly deciding: string;
}

export async function evaluateCase(
  evaluator: PolicyEvaluator,
  c: NegativeCase,
): Promise<CaseResult> {
  const evaluated = await Promise.all(
    c.authorizations.map(async (a) => ({
      a,
      e: await evaluator.evaluate(c.principal, a, negativeDeployment),
    })),
  );
  const denied = evaluated.filter(({ e }) => e.decision !== 'Allowed');
  const shown = denied.length > 0 ? denied : evaluated;
  const deciding = (
    await Promise.all(
      shown.map(async ({ a, e }) => `${await canonicalAction(a.action)} on ${e.resourceType}`),
    )
  ).join('; ');
  return {
    name: c.name,
    principal: c.principal,
    decision: denied.length > 0 ? denied.map(({ e }) => e.decision).join(', ') : 'Allowed',
    deciding,
  };
}
