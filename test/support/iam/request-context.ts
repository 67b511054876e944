import type {
  AuthorizeSecurityGroupIngressCommandInput,
  CreateSecurityGroupCommandInput,
  CreateSecurityGroupCommandOutput,
  CreateTagsCommandInput,
  DeleteTagsCommandInput,
  Tag as Ec2Tag,
} from '@aws-sdk/client-ec2';
import type {
  AddTagsCommandInput,
  CreateListenerCommandInput,
  CreateListenerCommandOutput,
  CreateLoadBalancerCommandInput,
  CreateLoadBalancerCommandOutput,
  CreateTargetGroupCommandInput,
  CreateTargetGroupCommandOutput,
  ModifyListenerCommandInput,
  RemoveTagsCommandInput,
  SetSecurityGroupsCommandInput,
  SetSubnetsCommandInput,
  Tag as ElbTag,
} from '@aws-sdk/client-elastic-load-balancing-v2';
import type { PutEventsCommandInput } from '@aws-sdk/client-eventbridge';
import { actionExists, arnOf, isWildcardOnly } from './reference';

/**
 * The IAM request context of an AWS SDK call: which actions on which resources AWS authorizes for
 * it, with the condition keys the request implies, including what AWS authorizes on our behalf
 * (tags applied by a create call, ELB's service-linked role). Pure apart from `AwsState`, which
 * says what the resources looked like when the call was made.
 */

export type ContextValue = string | readonly string[];
export type RequestContext = Readonly<Record<string, ContextValue>>;
export type Tags = Readonly<Record<string, string>>;

export interface Authorization {
  /** As IAM names it: `elasticloadbalancing:CreateTargetGroup`. */
  readonly action: string;
  /** In the reference's ARN format for the action's resource type, or `*`. */
  readonly resource: string;
  readonly context: RequestContext;
  /** Set when AWS authorizes this on our behalf, for this operation of the call. */
  readonly impliedBy?: string;
  /**
   * The resource was gone when the call was made (deleted by hand, or by an earlier attempt whose
   * answer was lost): AWS has no tags of it to match, and the code expects a not-found answer.
   * `context` then carries the tags it last had, if it was seen, so the evaluation says whether the
   * call was one the policy allows on the resource it was meant for.
   */
  readonly gone?: 'tags it last had' | 'tags never seen';
  /** For a VPC: the clusters whose subnets it holds (`kubernetes.io/cluster/<name>` tags). */
  readonly vpcClusters?: readonly string[];
}

export interface SdkCall {
  /** The client's name without `Client`: `ElasticLoadBalancingV2`, `EC2`, `SQS`, … */
  readonly service: string;
  /** The command's name without `Command`. */
  readonly operation: string;
  readonly input: unknown;
  readonly account: string;
  readonly region: string;
}

export interface ExistingResource {
  readonly exists: boolean;
  /** When it no longer exists: the tags it last had, if it was seen. */
  readonly tags: Tags;
  readonly tagsKnown: boolean;
}

/** What the request context needs from AWS at call time, before the call changes anything. */
export interface AwsState {
  /** A load balancer, target group or listener, by its ARN. */
  elbResource(arn: string): Promise<ExistingResource>;
  /** `network`, `application`, `gateway`, or undefined when it cannot be known. */
  loadBalancerType(arn: string): Promise<string | undefined>;
  rememberLoadBalancerType(arn: string, type: string): void;
  /** A resource the call created (an ARN, or a security group's ID), with its tags. */
  rememberTags(resource: string, tags: Tags): void;
  /** Whether the account has a load balancer yet: ELB's service-linked role comes with the first. */
  hasLoadBalancers(): Promise<boolean>;
  securityGroup(id: string): Promise<ExistingResource & { readonly vpcId?: string | undefined }>;
  vpc(
    id: string,
  ): Promise<
    ExistingResource & { readonly tenancy?: string | undefined; readonly clusters: string[] }
  >;
}

/** An SDK call this module cannot express as IAM authorizations yet. */
export class UnmappedCallError extends Error {
  override readonly name = 'UnmappedCallError';
}

/** Reads the state a call needs before it runs; `finish` completes it with the call's answer. */
export interface PendingCall {
  finish(output: unknown): Promise<Authorization[]>;
}

const servicePrefixes: Readonly<Record<string, string>> = {
  ElasticLoadBalancingV2: 'elasticloadbalancing',
  EC2: 'ec2',
  ResourceGroupsTaggingAPI: 'tag',
  SQS: 'sqs',
  DynamoDB: 'dynamodb',
  EventBridge: 'events',
  EKS: 'eks',
  SecretsManager: 'secretsmanager',
};

/** Operations authorized as another action (the service authorization reference's API table). */
const sqsActions: Readonly<Record<string, string>> = {
  SendMessageBatch: 'SendMessage',
  DeleteMessageBatch: 'DeleteMessage',
  ChangeMessageVisibilityBatch: 'ChangeMessageVisibility',
};

export async function describeCall(call: SdkCall, state: AwsState): Promise<PendingCall> {
  const prefix = servicePrefixes[call.service];
  if (prefix === undefined) throw new UnmappedCallError(`no IAM prefix for ${call.service}`);
  switch (prefix) {
    case 'elasticloadbalancing':
      return elbv2(call, state);
    case 'ec2':
      return ec2(call, state);
    case 'sqs':
      return ready(await sqs(call));
    case 'dynamodb':
      return ready(await dynamodb(call));
    case 'events':
      return ready(await events(call));
    case 'eks':
      if (call.operation === 'DescribeCluster') {
        const { name } = call.input as { name?: string };
        const resource = await arnOf('eks', 'cluster', {
          ...where(call),
          ClusterName: name ?? '',
        });
        return ready([{ action: 'eks:DescribeCluster', resource, context: {} }]);
      }
  }
  return ready(await wildcardOnly(`${prefix}:${call.operation}`, call));
}

function gone(resource: ExistingResource): Pick<Authorization, 'gone'> {
  if (resource.exists) return {};
  return { gone: resource.tagsKnown ? 'tags it last had' : 'tags never seen' };
}

function ready(authorizations: Authorization[]): PendingCall {
  return { finish: () => Promise.resolve(authorizations) };
}

function where(call: SdkCall): { Region: string; Account: string } {
  return { Region: call.region, Account: call.account };
}

/** Describe* and the like: no resource-level permissions, so `*`. */
async function wildcardOnly(action: string, call: SdkCall): Promise<Authorization[]> {
  if (!(await actionExists(action)) || !(await isWildcardOnly(action))) {
    throw new UnmappedCallError(`no request context for ${call.service}.${call.operation}`);
  }
  const context: RequestContext = action.startsWith('ec2:') ? { 'ec2:Region': call.region } : {};
  return [{ action, resource: '*', context }];
}

function tagRecord(tags: readonly (ElbTag | Ec2Tag)[] | undefined): Tags {
  return Object.fromEntries((tags ?? []).map((t) => [t.Key ?? '', t.Value ?? '']));
}

function requestTags(tags: Tags): RequestContext {
  const keys = Object.keys(tags).sort();
  if (keys.length === 0) return {};
  return {
    ...Object.fromEntries(keys.map((k) => [`aws:RequestTag/${k}`, tags[k] ?? ''])),
    'aws:TagKeys': keys,
  };
}

/** The resource's tags as both the global key and the service's own alias of it. */
function resourceTags(tags: Tags, service: 'elasticloadbalancing' | 'ec2'): RequestContext {
  return Object.fromEntries(
    Object.entries(tags).flatMap(([k, v]) => [
      [`aws:ResourceTag/${k}`, v],
      [`${service}:ResourceTag/${k}`, v],
    ]),
  );
}

function list(values: readonly (string | undefined)[] | undefined): readonly string[] {
  return [
    ...new Set((values ?? []).filter((v): v is string => v !== undefined && v !== '')),
  ].sort();
}

function withList(key: string, values: readonly string[]): RequestContext {
  return values.length > 0 ? { [key]: values } : {};
}

function withValue(key: string, value: string | undefined): RequestContext {
  return value !== undefined && value !== '' ? { [key]: value } : {};
}

// ---------------------------------------------------------------------------------------------
// Elastic Load Balancing V2

const typeSegments: Readonly<Record<string, string>> = {
  network: 'net',
  application: 'app',
  gateway: 'gwy',
};

/** `loadbalancer/<type>/<name>/<id>` or `listener/<type>/<name>/<id>/<id>` → the load balancer's ARN. */
function loadBalancerArnOf(arn: string): string | undefined {
  const match =
    /^(arn:[^:]*:elasticloadbalancing:[^:]*:[^:]*:)(loadbalancer|listener)\/([^/]+)\/([^/]+)\/([^/]+)/.exec(
      arn,
    );
  return match ? `${match[1]}loadbalancer/${match[3]}/${match[4]}/${match[5]}` : undefined;
}

/**
 * The ARN as AWS spells it. The emulator names every load balancer (and its listeners)
 * `…/app/…` whatever its type; AWS names a network load balancer's `…/net/…`, which is what a
 * policy sees.
 */
async function iamElbArn(arn: string, state: AwsState): Promise<string> {
  const loadBalancer = loadBalancerArnOf(arn);
  if (loadBalancer === undefined) return arn;
  const segment = typeSegments[(await state.loadBalancerType(loadBalancer)) ?? ''];
  return segment === undefined
    ? arn
    : arn.replace(/:(loadbalancer|listener)\/[^/]+\//, `:$1/${segment}/`);
}

function elbAction(operation: string): string {
  return `elasticloadbalancing:${operation}`;
}

/** Tags given to a create call are applied with a second authorization (the `CreateAction` key). */
function tagOnCreate(
  action: string,
  resource: string,
  tags: Tags,
  createActionKey: string,
  operation: string,
): Authorization[] {
  if (Object.keys(tags).length === 0) return [];
  return [
    {
      action,
      resource,
      context: { ...requestTags(tags), [createActionKey]: operation },
      impliedBy: operation,
    },
  ];
}

/** The ARN field that names the resource of an existing-resource ELBv2 operation. */
const elbResourceFields: Readonly<Record<string, string>> = {
  DeleteLoadBalancer: 'LoadBalancerArn',
  ModifyLoadBalancerAttributes: 'LoadBalancerArn',
  SetSecurityGroups: 'LoadBalancerArn',
  SetSubnets: 'LoadBalancerArn',
  SetIpAddressType: 'LoadBalancerArn',
  DeleteTargetGroup: 'TargetGroupArn',
  ModifyTargetGroup: 'TargetGroupArn',
  ModifyTargetGroupAttributes: 'TargetGroupArn',
  RegisterTargets: 'TargetGroupArn',
  DeregisterTargets: 'TargetGroupArn',
  ModifyListener: 'ListenerArn',
  ModifyListenerAttributes: 'ListenerArn',
  DeleteListener: 'ListenerArn',
  AddListenerCertificates: 'ListenerArn',
  RemoveListenerCertificates: 'ListenerArn',
};

async function elbv2(call: SdkCall, state: AwsState): Promise<PendingCall> {
  const action = elbAction(call.operation);
  switch (call.operation) {
    case 'CreateLoadBalancer':
      return createLoadBalancer(call, state);
    case 'CreateTargetGroup': {
      const input = call.input as CreateTargetGroupCommandInput;
      const tags = tagRecord(input.Tags);
      return {
        finish: async (output) => {
          const made = (output as CreateTargetGroupCommandOutput | undefined)?.TargetGroups?.[0];
          if (made?.TargetGroupArn !== undefined) state.rememberTags(made.TargetGroupArn, tags);
          const arn =
            made?.TargetGroupArn ??
            (await arnOf('elasticloadbalancing', 'targetgroup', {
              ...where(call),
              TargetGroupName: input.Name ?? '',
              TargetGroupId: 'unknown',
            }));
          return [
            { action, resource: arn, context: requestTags(tags) },
            ...tagOnCreate(
              elbAction('AddTags'),
              arn,
              tags,
              'elasticloadbalancing:CreateAction',
              call.operation,
            ),
          ];
        },
      };
    }
    case 'CreateListener': {
      const input = call.input as CreateListenerCommandInput;
      const tags = tagRecord(input.Tags);
      const loadBalancer = await state.elbResource(input.LoadBalancerArn ?? '');
      const resource = await iamElbArn(input.LoadBalancerArn ?? '', state);
      const context = {
        ...resourceTags(loadBalancer.tags, 'elasticloadbalancing'),
        ...requestTags(tags),
        ...withValue('elasticloadbalancing:ListenerProtocol', input.Protocol),
        ...withValue('elasticloadbalancing:SecurityPolicy', input.SslPolicy),
      };
      return {
        finish: async (output) => {
          const made = (output as CreateListenerCommandOutput | undefined)?.Listeners?.[0];
          if (made?.ListenerArn !== undefined) state.rememberTags(made.ListenerArn, tags);
          const listener = made?.ListenerArn
            ? await iamElbArn(made.ListenerArn, state)
            : `${resource.replace(':loadbalancer/', ':listener/')}/unknown`;
          return [
            { action, resource, context, ...gone(loadBalancer) },
            ...tagOnCreate(
              elbAction('AddTags'),
              listener,
              tags,
              'elasticloadbalancing:CreateAction',
              call.operation,
            ),
          ];
        },
      };
    }
    case 'AddTags':
    case 'RemoveTags': {
      const input = call.input as AddTagsCommandInput | RemoveTagsCommandInput;
      const change =
        'TagKeys' in input
          ? withList('aws:TagKeys', list(input.TagKeys))
          : requestTags(tagRecord(input.Tags));
      const authorizations = await Promise.all(
        (input.ResourceArns ?? []).map((arn) => existing(action, arn, change, state)),
      );
      return ready(authorizations);
    }
  }
  const field = elbResourceFields[call.operation];
  if (field !== undefined) {
    const arn = (call.input as Record<string, unknown>)[field];
    if (typeof arn !== 'string') {
      throw new UnmappedCallError(`${call.operation} without ${field}`);
    }
    return ready([await existing(action, arn, elbRequestKeys(call), state)]);
  }
  return ready(await wildcardOnly(action, call));
}

/** Keys a change to an existing load balancer or listener carries about what it asks for. */
function elbRequestKeys(call: SdkCall): RequestContext {
  switch (call.operation) {
    case 'SetSubnets': {
      const input = call.input as SetSubnetsCommandInput;
      return withList(
        'elasticloadbalancing:Subnet',
        list([...(input.Subnets ?? []), ...(input.SubnetMappings ?? []).map((m) => m.SubnetId)]),
      );
    }
    case 'SetSecurityGroups':
      return withList(
        'elasticloadbalancing:SecurityGroup',
        list((call.input as SetSecurityGroupsCommandInput).SecurityGroups),
      );
    case 'ModifyListener': {
      const input = call.input as ModifyListenerCommandInput;
      return {
        ...withValue('elasticloadbalancing:ListenerProtocol', input.Protocol),
        ...withValue('elasticloadbalancing:SecurityPolicy', input.SslPolicy),
      };
    }
    default:
      return {};
  }
}

async function existing(
  action: string,
  arn: string,
  request: RequestContext,
  state: AwsState,
): Promise<Authorization> {
  const found = await state.elbResource(arn);
  return {
    action,
    resource: await iamElbArn(arn, state),
    context: { ...resourceTags(found.tags, 'elasticloadbalancing'), ...request },
    ...gone(found),
  };
}

async function createLoadBalancer(call: SdkCall, state: AwsState): Promise<PendingCall> {
  const input = call.input as CreateLoadBalancerCommandInput;
  const type = input.Type ?? 'application';
  const tags = tagRecord(input.Tags);
  // AWS makes the account's ELB service-linked role with its first load balancer, as the caller.
  const first = !(await state.hasLoadBalancers());
  const context = {
    ...requestTags(tags),
    ...withValue('elasticloadbalancing:Scheme', input.Scheme),
    ...withList(
      'elasticloadbalancing:Subnet',
      list([...(input.Subnets ?? []), ...(input.SubnetMappings ?? []).map((m) => m.SubnetId)]),
    ),
    ...withList('elasticloadbalancing:SecurityGroup', list(input.SecurityGroups)),
  };
  return {
    finish: async (output) => {
      const made = (output as CreateLoadBalancerCommandOutput | undefined)?.LoadBalancers?.[0];
      if (made?.LoadBalancerArn !== undefined) {
        state.rememberLoadBalancerType(made.LoadBalancerArn, type);
        state.rememberTags(made.LoadBalancerArn, tags);
      }
      const arn =
        made?.LoadBalancerArn !== undefined
          ? await iamElbArn(made.LoadBalancerArn, state)
          : await arnOf('elasticloadbalancing', `loadbalancer/${typeSegments[type] ?? 'app'}/`, {
              ...where(call),
              LoadBalancerName: input.Name ?? '',
              LoadBalancerId: 'unknown',
            });
      const serviceLinkedRole: Authorization[] = first
        ? [
            {
              action: 'iam:CreateServiceLinkedRole',
              resource: await arnOf('iam', 'role', {
                Account: call.account,
                RoleNameWithPath:
                  'aws-service-role/elasticloadbalancing.amazonaws.com/AWSServiceRoleForElasticLoadBalancing',
              }),
              context: { 'iam:AWSServiceName': 'elasticloadbalancing.amazonaws.com' },
              impliedBy: call.operation,
            },
          ]
        : [];
      return [
        ...serviceLinkedRole,
        { action: elbAction(call.operation), resource: arn, context },
        ...tagOnCreate(
          elbAction('AddTags'),
          arn,
          tags,
          'elasticloadbalancing:CreateAction',
          call.operation,
        ),
      ];
    },
  };
}

// ---------------------------------------------------------------------------------------------
// EC2

async function securityGroupAuthorization(
  action: string,
  call: SdkCall,
  id: string,
  request: RequestContext,
  state: AwsState,
): Promise<Authorization> {
  const group = await state.securityGroup(id);
  const vpc: RequestContext =
    group.vpcId !== undefined
      ? { 'ec2:Vpc': await arnOf('ec2', 'vpc', { ...where(call), VpcId: group.vpcId }) }
      : {};
  return {
    action,
    resource: await arnOf('ec2', 'security-group', { ...where(call), SecurityGroupId: id }),
    context: {
      ...resourceTags(group.tags, 'ec2'),
      'ec2:SecurityGroupID': id,
      ...vpc,
      'ec2:Region': call.region,
      ...request,
    },
    ...gone(group),
  };
}

async function vpcAuthorization(
  action: string,
  call: SdkCall,
  id: string,
  request: RequestContext,
  state: AwsState,
): Promise<Authorization> {
  const vpc = await state.vpc(id);
  return {
    action,
    resource: await arnOf('ec2', 'vpc', { ...where(call), VpcId: id }),
    context: {
      ...resourceTags(vpc.tags, 'ec2'),
      'ec2:VpcID': id,
      ...withValue('ec2:Tenancy', vpc.tenancy),
      'ec2:Region': call.region,
      ...request,
    },
    vpcClusters: vpc.clusters,
    ...gone(vpc),
  };
}

async function ec2(call: SdkCall, state: AwsState): Promise<PendingCall> {
  const action = `ec2:${call.operation}`;
  switch (call.operation) {
    case 'CreateSecurityGroup': {
      const input = call.input as CreateSecurityGroupCommandInput;
      const tags = tagRecord(
        (input.TagSpecifications ?? [])
          .filter((s) => s.ResourceType === 'security-group')
          .flatMap((s) => s.Tags ?? []),
      );
      if (input.VpcId === undefined) {
        throw new UnmappedCallError('CreateSecurityGroup in the default VPC');
      }
      const inVpc = await vpcAuthorization(action, call, input.VpcId, {}, state);
      return {
        finish: async (output) => {
          const id = (output as CreateSecurityGroupCommandOutput | undefined)?.GroupId;
          if (id !== undefined) state.rememberTags(id, tags);
          const group = await arnOf('ec2', 'security-group', {
            ...where(call),
            SecurityGroupId: id ?? 'unknown',
          });
          return [
            {
              action,
              resource: group,
              context: {
                ...requestTags(tags),
                ...withValue('ec2:SecurityGroupID', id),
                'ec2:Region': call.region,
              },
            },
            inVpc,
            ...tagOnCreate('ec2:CreateTags', group, tags, 'ec2:CreateAction', call.operation).map(
              (a) => ({ ...a, context: { ...a.context, 'ec2:Region': call.region } }),
            ),
          ];
        },
      };
    }
    case 'AuthorizeSecurityGroupIngress':
    case 'RevokeSecurityGroupIngress':
    case 'AuthorizeSecurityGroupEgress':
    case 'RevokeSecurityGroupEgress':
    case 'DeleteSecurityGroup': {
      const { GroupId } = call.input as AuthorizeSecurityGroupIngressCommandInput;
      if (GroupId === undefined) throw new UnmappedCallError(`${call.operation} by group name`);
      return ready([await securityGroupAuthorization(action, call, GroupId, {}, state)]);
    }
    case 'CreateTags':
    case 'DeleteTags': {
      const input = call.input as CreateTagsCommandInput | DeleteTagsCommandInput;
      const request =
        call.operation === 'CreateTags'
          ? requestTags(tagRecord(input.Tags))
          : withList('aws:TagKeys', list((input.Tags ?? []).map((t) => t.Key)));
      const authorizations = await Promise.all(
        (input.Resources ?? []).map((id) => {
          if (id.startsWith('sg-')) {
            return securityGroupAuthorization(action, call, id, request, state);
          }
          if (id.startsWith('vpc-')) return vpcAuthorization(action, call, id, request, state);
          throw new UnmappedCallError(`${call.operation} on ${id}`);
        }),
      );
      return ready(authorizations);
    }
  }
  return ready(await wildcardOnly(action, call));
}

// ---------------------------------------------------------------------------------------------
// SQS, DynamoDB, EventBridge: resource by name, no tag conditions in our policies.

async function sqs(call: SdkCall): Promise<Authorization[]> {
  const action = `sqs:${sqsActions[call.operation] ?? call.operation}`;
  const input = call.input as { QueueUrl?: string; QueueName?: string };
  let account = call.account;
  let name = input.QueueName;
  if (input.QueueUrl !== undefined) {
    // https://sqs.<region>.amazonaws.com/<account>/<name>, and the emulator's likewise.
    const [, owner, queue] = new URL(input.QueueUrl).pathname.split('/');
    account = owner ?? account;
    name = queue;
  }
  if (name === undefined) return wildcardOnly(action, call);
  if (!(await actionExists(action))) throw new UnmappedCallError(`no IAM action ${action}`);
  const resource = await arnOf('sqs', 'queue', {
    ...where(call),
    Account: account,
    QueueName: name,
  });
  return [{ action, resource, context: {} }];
}

interface DynamoItem {
  readonly TableName?: string;
}

const transactItemActions: Readonly<Record<string, string>> = {
  Put: 'PutItem',
  Update: 'UpdateItem',
  Delete: 'DeleteItem',
  ConditionCheck: 'ConditionCheckItem',
  Get: 'GetItem',
};

async function dynamodb(call: SdkCall): Promise<Authorization[]> {
  const table = (name: string) => arnOf('dynamodb', 'table', { ...where(call), TableName: name });
  const input = call.input as {
    TableName?: string;
    TransactItems?: Record<string, DynamoItem | undefined>[];
    RequestItems?: Record<string, unknown>;
    ReturnValues?: string;
    Select?: string;
  };
  if (input.TransactItems !== undefined) {
    // Each item is authorized as its own action (there is no dynamodb:TransactWriteItems).
    return Promise.all(
      input.TransactItems.map(async (item) => {
        const [kind, detail] = Object.entries(item).find(([, v]) => v !== undefined) ?? [];
        const itemAction = transactItemActions[kind ?? ''];
        if (itemAction === undefined || detail?.TableName === undefined) {
          throw new UnmappedCallError(`${call.operation} item ${kind ?? '?'}`);
        }
        return {
          action: `dynamodb:${itemAction}`,
          resource: await table(detail.TableName),
          context: { 'dynamodb:EnclosingOperation': call.operation },
        };
      }),
    );
  }
  const action = `dynamodb:${call.operation}`;
  if (!(await actionExists(action))) throw new UnmappedCallError(`no IAM action ${action}`);
  const names =
    input.RequestItems !== undefined
      ? Object.keys(input.RequestItems)
      : input.TableName !== undefined
        ? [input.TableName]
        : [];
  if (names.length === 0) return wildcardOnly(action, call);
  const context = {
    ...withValue('dynamodb:ReturnValues', input.ReturnValues),
    ...withValue('dynamodb:Select', input.Select),
  };
  return Promise.all(
    names.sort().map(async (n) => ({ action, resource: await table(n), context })),
  );
}

async function events(call: SdkCall): Promise<Authorization[]> {
  if (call.operation !== 'PutEvents') return wildcardOnly(`events:${call.operation}`, call);
  const entries = (call.input as PutEventsCommandInput).Entries ?? [];
  const buses = new Map<string, NonNullable<PutEventsCommandInput['Entries']>>();
  for (const entry of entries) {
    const bus = entry.EventBusName ?? 'default';
    buses.set(bus, [...(buses.get(bus) ?? []), entry]);
  }
  return Promise.all(
    [...buses.entries()].sort().map(async ([bus, onBus]) => ({
      action: 'events:PutEvents',
      resource: bus.startsWith('arn:')
        ? bus
        : await arnOf('events', 'event-bus', { ...where(call), EventBusName: bus }),
      context: {
        ...withList('events:source', list(onBus.map((e) => e.Source))),
        ...withList('events:detail-type', list(onBus.map((e) => e.DetailType))),
      },
    })),
  );
}
