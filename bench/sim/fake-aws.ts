/**
 * An in-memory ELBv2 / EC2 / tagging API on virtual time, with a fixed latency per call and AWS's
 * account-level token buckets, and the client side as one Lambda instance sees it: the
 * controller's per-process limiter and the SDK's adaptive retries. It serves the NLB provider's
 * full paths, with the calls and answers it gets from moto: the targets of a node or endpoint
 * change (RegisterTargets, DeregisterTargets, DescribeTargetHealth), an Ensure from nothing, its
 * drift check and updates, and the delete. ELBv2's load balancers, listeners and target groups
 * are in fake-aws-resources.ts; EC2's subnets (seeded with `addSubnets`) and security groups, and
 * the tagging API over both, are here. Any other command fails loudly. A target group of
 * TargetType `ip` (pod targets, issue 36) holds `ip:port`, as the NLB model names a pod target:
 * each target's `Port`, or the group's when it has none.
 */
import type { EC2Client } from '@aws-sdk/client-ec2';
import type { ElasticLoadBalancingV2Client } from '@aws-sdk/client-elastic-load-balancing-v2';
import type { ResourceGroupsTaggingAPIClient } from '@aws-sdk/client-resource-groups-tagging-api';
import {
  attachBudgets,
  budgetForCall,
  type Elbv2Budgets,
  type NlbClients,
} from '../../functions/aws/clients';
import { markSendsCounted, noteSent } from '../../functions/aws/registration-budget';
import { clusterTagKey, ownershipTags } from '../../functions/nlb/model/naming';
import { ProcessRateLimiter } from '../../functions/aws/process-limiter';
import { awsRateLimits, bucketFor, TokenBucket, type BucketName } from './aws-limits';
import {
  awsError,
  FakeElbv2,
  knownVpc,
  strings,
  tagList,
  tagMap,
  type FakeNetwork,
  type FakeTargetGroup,
} from './fake-aws-resources';
import type { VirtualClock } from './virtual-clock';

export type { FakeTargetGroup } from './fake-aws-resources';

type ServiceName = 'elbv2' | 'ec2' | 'tagging';
type Input = Record<string, unknown>;
type Tag = { Key?: string; Value?: string };

/** A target group a simulation starts with, serving a load balancer only its ARN stands for. */
export interface SeededTargetGroup {
  readonly arn: string;
  readonly serviceKey: string;
  readonly serviceUid: string;
  readonly loadBalancerArn: string;
  readonly targetType?: 'ip' | undefined;
  readonly port?: number | undefined;
  readonly targets: Iterable<string>;
}

export interface AwsCallStats {
  attempts: number;
  throttled: number;
  readonly byOperation: Record<string, number>;
  readonly throttledByOperation: Record<string, number>;
}

const registration = /^(Register|Deregister)Targets$/;

function operationOf(command: object): string {
  return command.constructor.name.replace(/Command$/, '');
}

function inputOf(command: object): Record<string, unknown> {
  return ((command as { input?: unknown }).input ?? {}) as Record<string, unknown>;
}

/** Shaped like the SDK's ServiceException, so translateAwsError classifies it as AWS would. */
function throttlingError(service: ServiceName): Error {
  const error = new Error('Rate exceeded');
  error.name = service === 'ec2' ? 'RequestLimitExceeded' : 'Throttling';
  return Object.assign(error, { $fault: 'client', $metadata: { httpStatusCode: 400 } });
}

/** A target as the group keeps it: an instance by its ID, a pod by `ip:port`. */
function targetKey(tg: FakeTargetGroup, target: { Id?: string; Port?: number }): string {
  const id = target.Id ?? '';
  if (tg.targetType !== 'ip') return id;
  const port = target.Port ?? tg.port;
  if (port === undefined)
    throw awsError('ValidationError', `target ${id} has no port and ${tg.arn} none either`);
  return `${id}:${port}`;
}

/** A kept target as DescribeTargetHealth names it: `ip` groups with its Port. */
function describedTarget(tg: FakeTargetGroup, key: string): { Id: string; Port?: number } {
  if (tg.targetType !== 'ip') return { Id: key };
  const colon = key.lastIndexOf(':');
  return { Id: key.slice(0, colon), Port: Number(key.slice(colon + 1)) };
}

function isThrottling(error: unknown): boolean {
  return (
    error instanceof Error && (error.name === 'Throttling' || error.name === 'RequestLimitExceeded')
  );
}

export interface FakeSubnet {
  readonly id: string;
  readonly vpcId: string;
  readonly zone: string;
  readonly cidr: string;
  readonly tags: Map<string, string>;
}

export interface FakeSecurityGroup {
  readonly id: string;
  readonly name: string;
  readonly description: string;
  readonly vpcId: string;
  /** One rule per peer, by `protocol:from:to:list:peer`. */
  readonly ingress: Map<string, IngressRule>;
  readonly tags: Map<string, string>;
}

/** One peer of a security group rule, in the list EC2 keeps it in. */
export interface IngressRule {
  readonly protocol: string;
  readonly from: number | undefined;
  readonly to: number | undefined;
  readonly list: 'IpRanges' | 'Ipv6Ranges' | 'PrefixListIds' | 'UserIdGroupPairs';
  readonly peer: string;
}

function securityGroupArn(id: string): string {
  return `arn:aws:ec2:us-east-1:123456789012:security-group/${id}`;
}

/** The field naming a rule's peer in each of EC2's lists. */
const peerFields = {
  IpRanges: 'CidrIp',
  Ipv6Ranges: 'CidrIpv6',
  PrefixListIds: 'PrefixListId',
  UserIdGroupPairs: 'GroupId',
} as const;
const peerLists = Object.keys(peerFields) as IngressRule['list'][];

/** EC2 names protocols by keyword, except ICMPv6, which it reports by number. */
function ec2Protocol(protocol: unknown): string {
  const name = typeof protocol === 'string' ? protocol.toLowerCase() : '-1';
  return (
    ({ '6': 'tcp', '17': 'udp', '1': 'icmp', icmpv6: '58' } as Record<string, string>)[name] ?? name
  );
}

function rulesOf(permissions: unknown): IngressRule[] {
  return ((permissions ?? []) as Input[]).flatMap((p) =>
    peerLists.flatMap((list) =>
      ((p[list] ?? []) as Record<string, string>[]).map((entry) => ({
        protocol: ec2Protocol(p.IpProtocol),
        from: p.FromPort as number | undefined,
        to: p.ToPort as number | undefined,
        list,
        peer: entry[peerFields[list]] ?? '',
      })),
    ),
  );
}

const ruleKey = (r: IngressRule) => `${r.protocol}:${r.from}:${r.to}:${r.list}:${r.peer}`;

/** Rules as DescribeSecurityGroups groups them: one permission per protocol and port range. */
function permissionsOf(rules: Iterable<IngressRule>): Input[] {
  const grouped = new Map<string, Input>();
  for (const rule of rules) {
    const key = `${rule.protocol}:${rule.from}:${rule.to}`;
    const permission = grouped.get(key) ?? {
      IpProtocol: rule.protocol,
      FromPort: rule.from,
      ToPort: rule.to,
      ...Object.fromEntries(peerLists.map((list) => [list, []])),
    };
    (permission[rule.list] as object[]).push({ [peerFields[rule.list]]: rule.peer });
    grouped.set(key, permission);
  }
  return [...grouped.values()];
}

/** EC2's Filters: every filter matches (any of its values); `tag:K` and `tag-key` on the tags. */
function matches(filters: unknown, fields: Record<string, string>, tags: Map<string, string>) {
  return ((filters ?? []) as { Name?: string; Values?: string[] }[]).every(({ Name, Values }) => {
    const name = Name ?? '';
    const values = Values ?? [];
    if (name === 'tag-key') return values.some((v) => tags.has(v));
    if (name.startsWith('tag:')) {
      const tag = tags.get(name.slice(4));
      return tag !== undefined && values.includes(tag);
    }
    const field = fields[name];
    if (field === undefined) throw awsError('InvalidParameterValue', `unknown filter ${name}`);
    return values.includes(field);
  });
}

/**
 * EC2 as the NLB provider uses it: the cluster VPC's subnets (seeded) and the NLBs' security
 * groups, with their rules and tags. DeleteSecurityGroup is refused (DependencyViolation) while a
 * load balancer has the group; AWS also holds it for a while after the load balancer is gone,
 * which moto does not, nor this model.
 */
export class FakeEc2 implements FakeNetwork {
  readonly subnets = new Map<string, FakeSubnet>();
  readonly securityGroups = new Map<string, FakeSecurityGroup>();
  private serial = 0;
  readonly handlers: Readonly<Record<string, (input: Input) => unknown>> = {
    DescribeSubnets: (i) => this.describeSubnets(i),
    CreateSecurityGroup: (i) => this.createSecurityGroup(i),
    DescribeSecurityGroups: (i) => this.describeSecurityGroups(i),
    AuthorizeSecurityGroupIngress: (i) => this.authorize(i),
    RevokeSecurityGroupIngress: (i) => this.revoke(i),
    DeleteSecurityGroup: (i) => this.deleteSecurityGroup(this.securityGroup(i.GroupId)),
    CreateTags: (i) => this.changeTags(i, 'add'),
    DeleteTags: (i) => this.changeTags(i, 'remove'),
  };

  constructor(private readonly holderOf: (groupId: string) => { name: string } | undefined) {}

  addSubnets(vpcId: string, zones: readonly string[], tags: Record<string, string>): string[] {
    return zones.map((zone) => {
      const id = `subnet-${this.hex()}`;
      const cidr = `10.0.${this.subnets.size + 1}.0/24`;
      this.subnets.set(id, { id, vpcId, zone, cidr, tags: new Map(Object.entries(tags)) });
      return id;
    });
  }

  private describeSubnets(input: Input) {
    const ids = input.SubnetIds as string[] | undefined;
    const missing = ids?.find((id) => !this.subnets.has(id));
    if (missing !== undefined)
      throw awsError('InvalidSubnetID.NotFound', `The subnet ID '${missing}' does not exist`);
    const fields = (s: FakeSubnet) => ({
      'vpc-id': s.vpcId,
      'subnet-id': s.id,
      'availability-zone': s.zone,
    });
    const found = [...this.subnets.values()].filter(
      (s) => (ids === undefined || ids.includes(s.id)) && matches(input.Filters, fields(s), s.tags),
    );
    return {
      Subnets: found.map((s) => ({
        SubnetId: s.id,
        VpcId: s.vpcId,
        AvailabilityZone: s.zone,
        CidrBlock: s.cidr,
        State: 'available',
        Ipv6CidrBlockAssociationSet: [],
        Tags: tagList(s.tags),
      })),
    };
  }

  private createSecurityGroup(input: Input) {
    const name = String(input.GroupName);
    const vpcId = knownVpc(this, input.VpcId, 'InvalidVpcID.NotFound');
    if ([...this.securityGroups.values()].some((g) => g.name === name && g.vpcId === vpcId))
      throw awsError('InvalidGroup.Duplicate', `The security group '${name}' already exists`);
    const specs = (input.TagSpecifications ?? []) as { ResourceType?: string; Tags?: Tag[] }[];
    const group: FakeSecurityGroup = {
      id: `sg-${this.hex()}`,
      name,
      description: typeof input.Description === 'string' ? input.Description : '',
      vpcId,
      ingress: new Map(),
      tags: tagMap(specs.filter((s) => s.ResourceType === 'security-group').flatMap((s) => s.Tags)),
    };
    this.securityGroups.set(group.id, group);
    return { GroupId: group.id, SecurityGroupArn: securityGroupArn(group.id) };
  }

  /** By GroupIds (one unknown fails the call) and Filters. */
  private describeSecurityGroups(input: Input) {
    const ids = (input.GroupIds as string[] | undefined) ?? [...this.securityGroups.keys()];
    const fields = (g: FakeSecurityGroup) => ({
      'group-id': g.id,
      'group-name': g.name,
      'vpc-id': g.vpcId,
    });
    const found = ids
      .map((id) => this.securityGroup(id))
      .filter((g) => matches(input.Filters, fields(g), g.tags));
    return {
      SecurityGroups: found.map((g) => ({
        GroupId: g.id,
        GroupName: g.name,
        Description: g.description,
        VpcId: g.vpcId,
        OwnerId: '123456789012',
        SecurityGroupArn: securityGroupArn(g.id),
        IpPermissions: permissionsOf(g.ingress.values()),
        // EC2's default outbound rule, on every new group.
        IpPermissionsEgress: [{ IpProtocol: '-1', IpRanges: [{ CidrIp: '0.0.0.0/0' }] }],
        Tags: tagList(g.tags),
      })),
    };
  }

  /** Every rule is new, or nothing is added (InvalidPermission.Duplicate), as in EC2. */
  private authorize(input: Input) {
    const group = this.securityGroup(input.GroupId);
    const rules = rulesOf(input.IpPermissions);
    const present = rules.find((r) => group.ingress.has(ruleKey(r)));
    if (present !== undefined)
      throw awsError('InvalidPermission.Duplicate', `the rule ${ruleKey(present)} already exists`);
    for (const rule of rules) group.ingress.set(ruleKey(rule), rule);
    return { Return: true, SecurityGroupRules: rules.map((r) => ({ GroupId: group.id, ...r })) };
  }

  /** Rules that are not there are named back, not refused (a VPC group's answer). */
  private revoke(input: Input) {
    const group = this.securityGroup(input.GroupId);
    const unknown = rulesOf(input.IpPermissions).filter((r) => !group.ingress.delete(ruleKey(r)));
    return {
      Return: true,
      ...(unknown.length > 0 && { UnknownIpPermissions: permissionsOf(unknown) }),
    };
  }

  private deleteSecurityGroup(group: FakeSecurityGroup) {
    const holder = this.holderOf(group.id);
    if (holder !== undefined)
      throw awsError(
        'DependencyViolation',
        `resource ${group.id} has a dependent object (${holder.name})`,
      );
    this.securityGroups.delete(group.id);
    return {};
  }

  private changeTags(input: Input, change: 'add' | 'remove') {
    for (const id of strings(input.Resources)) {
      const tags = (this.subnets.get(id) ?? this.securityGroup(id)).tags;
      for (const { Key = '', Value } of (input.Tags ?? []) as Tag[]) {
        if (change === 'add') tags.set(Key, Value ?? '');
        // DeleteTags with a value removes the tag only while it has that value.
        else if (Value === undefined || tags.get(Key) === Value) tags.delete(Key);
      }
    }
    return {};
  }

  private securityGroup(id: unknown): FakeSecurityGroup {
    const group = this.securityGroups.get(String(id));
    if (group === undefined)
      throw awsError('InvalidGroup.NotFound', `The security group '${String(id)}' does not exist`);
    return group;
  }

  private hex(): string {
    return (++this.serial).toString(16).padStart(17, '0');
  }
}

/** What the tagging API finds: every resource with tags (a seeded group's load balancer too). */
function taggedResources(elbv2: FakeElbv2, ec2: FakeEc2) {
  const elb = (type: string, items: Iterable<{ arn: string; tags: Map<string, string> }>) =>
    [...items].map(({ arn, tags }) => ({ arn, type: `elasticloadbalancing:${type}`, tags }));
  const seeded = new Map(
    [...elbv2.targetGroups.values()]
      .filter((tg) => tg.loadBalancerArn && !elbv2.loadBalancers.has(tg.loadBalancerArn))
      .map((tg) => [tg.loadBalancerArn ?? '', { arn: tg.loadBalancerArn ?? '', tags: tg.tags }]),
  );
  return [
    ...elb('loadbalancer', [...elbv2.loadBalancers.values(), ...seeded.values()]),
    ...elb('targetgroup', elbv2.targetGroups.values()),
    ...elb('listener', elbv2.listeners.values()),
    ...[...ec2.securityGroups.values()].map((g) => ({
      arn: securityGroupArn(g.id),
      type: 'ec2:security-group',
      tags: g.tags,
    })),
  ].filter((r) => r.tags.size > 0);
}

/**
 * GetResources: the tagged resources whose tags meet all TagFilters (one without values: the key
 * alone) and whose type is among ResourceTypeFilters (`service` or `service:type`); one page.
 */
function getResources(elbv2: FakeElbv2, ec2: FakeEc2, input: Input) {
  const filters = (input.TagFilters ?? []) as { Key?: string; Values?: string[] }[];
  const types = strings(input.ResourceTypeFilters);
  const found = taggedResources(elbv2, ec2).filter(
    ({ type, tags }) =>
      (types.length === 0 || types.some((t) => t === type || t === type.split(':')[0])) &&
      filters.every(({ Key, Values }) => {
        const value = tags.get(Key ?? '');
        return value !== undefined && (!Values?.length || Values.includes(value));
      }),
  );
  return {
    ResourceTagMappingList: found.map(({ arn, tags }) => ({
      ResourceARN: arn,
      Tags: tagList(tags),
    })),
    PaginationToken: '',
  };
}

function fullBuckets(clock: VirtualClock): Record<BucketName, TokenBucket> {
  return {
    elbv2Registration: new TokenBucket(awsRateLimits.elbv2Registration, clock),
    elbv2Describe: new TokenBucket(awsRateLimits.elbv2Describe, clock),
    elbv2Other: new TokenBucket(awsRateLimits.elbv2Other, clock),
    ec2Describe: new TokenBucket(awsRateLimits.ec2Describe, clock),
    ec2Mutating: new TokenBucket(awsRateLimits.ec2Mutating, clock),
  };
}

/** The AWS side: one account and Region. */
export class FakeAwsAccount {
  /** EC2's subnets and security groups. */
  readonly ec2: FakeEc2;
  /** ELBv2's load balancers, listeners and the target groups below; the tagging API. */
  readonly elbv2: FakeElbv2;
  /** Every target group, seeded or created (the same map as `elbv2.targetGroups`). */
  readonly targetGroups: Map<string, FakeTargetGroup>;
  readonly stats: AwsCallStats = {
    attempts: 0,
    throttled: 0,
    byOperation: {},
    throttledByOperation: {},
  };
  /** Called after every successful target change. */
  onTargetsChanged: ((tg: FakeTargetGroup) => void) | undefined;
  private buckets: Record<BucketName, TokenBucket>;
  /** Serve without AWS's buckets (a simulation's setup, before its clock starts). */
  unlimited = false;

  constructor(
    private readonly clock: VirtualClock,
    readonly latencyMs: number,
    /** The cluster the ownership tags name (the simulated controller's `clusterName`). */
    readonly clusterName = 'bench',
  ) {
    this.buckets = fullBuckets(clock);
    this.ec2 = new FakeEc2((groupId) => this.elbv2.holderOf(groupId));
    this.elbv2 = new FakeElbv2(this.ec2);
    this.targetGroups = this.elbv2.targetGroups;
  }

  /**
   * Forgets the calls counted so far and fills AWS's buckets again: for a simulation whose setup
   * ran on the clock before it was rewound to 0.
   */
  restart(): void {
    this.buckets = fullBuckets(this.clock);
    this.stats.attempts = 0;
    this.stats.throttled = 0;
    for (const counts of [this.stats.byOperation, this.stats.throttledByOperation]) {
      for (const operation of Object.keys(counts)) delete counts[operation];
    }
  }

  /** A target group with the ownership tags of `serviceKey` in this account's cluster. */
  addTargetGroup(tg: SeededTargetGroup): void {
    const tags = new Map([
      [ownershipTags.cluster, this.clusterName],
      [ownershipTags.service, tg.serviceKey],
      [ownershipTags.serviceUid, tg.serviceUid],
    ]);
    this.targetGroups.set(tg.arn, { ...tg, targets: new Set(tg.targets), tags });
  }

  /**
   * Subnets in `vpcId` (which they make known), one per zone, tagged as a cluster's VPC has them
   * (functions/local/aws-resources.ts): for both NLB roles and shared with this account's cluster,
   * unless `tags` says otherwise. Returns their IDs.
   */
  addSubnets(
    vpcId: string,
    options: { zones?: readonly string[]; tags?: Record<string, string> } = {},
  ): string[] {
    const tags = options.tags ?? {
      'kubernetes.io/role/elb': '1',
      'kubernetes.io/role/internal-elb': '1',
      [clusterTagKey(this.clusterName)]: 'shared',
    };
    return this.ec2.addSubnets(vpcId, options.zones ?? ['us-east-1a', 'us-east-1b'], tags);
  }

  /** One HTTP attempt: served, or refused with a throttling error when its bucket is empty. */
  async attempt(service: ServiceName, command: object): Promise<unknown> {
    const operation = operationOf(command);
    this.stats.attempts++;
    this.stats.byOperation[operation] = (this.stats.byOperation[operation] ?? 0) + 1;
    const allowed =
      service === 'tagging' ||
      this.unlimited ||
      this.buckets[bucketFor(service, operation)].tryTake();
    await this.clock.sleep(this.latencyMs);
    if (!allowed) {
      this.stats.throttled++;
      this.stats.throttledByOperation[operation] =
        (this.stats.throttledByOperation[operation] ?? 0) + 1;
      throw throttlingError(service);
    }
    return this.serve(service, operation, inputOf(command));
  }

  /**
   * A call by a client that never sees a throttling error: it waits until its bucket has a token
   * (the seed model: an optimistic stand-in for the SDK retries and cross-request backoff of
   * cloud-provider-aws).
   */
  async patientCall(service: 'elbv2' | 'ec2', operation: string): Promise<void> {
    const bucket = this.buckets[bucketFor(service, operation)];
    this.stats.attempts++;
    this.stats.byOperation[operation] = (this.stats.byOperation[operation] ?? 0) + 1;
    while (!bucket.tryTake()) await this.clock.sleep(Math.max(1, bucket.waitMs()));
    await this.clock.sleep(this.latencyMs);
  }

  private serve(service: ServiceName, operation: string, input: Input): unknown {
    if (service === 'elbv2' && registration.test(operation)) {
      const tg = this.elbv2.targetGroup(input.TargetGroupArn);
      const targets = (input.Targets ?? []) as { Id?: string; Port?: number }[];
      const ids = targets.map((t) => targetKey(tg, t));
      for (const id of ids) {
        if (operation === 'RegisterTargets') tg.targets.add(id);
        else tg.targets.delete(id);
      }
      this.onTargetsChanged?.(tg);
      return {};
    }
    if (service === 'elbv2' && operation === 'DescribeTargetHealth') {
      // A host update after a failed pass reads what is registered instead of the record.
      const tg = this.elbv2.targetGroup(input.TargetGroupArn);
      // Targets of a group no load balancer uses yet are `unused`, as AWS reports them.
      const inUse = this.elbv2.loadBalancerArnsOf(tg).length > 0;
      return {
        TargetHealthDescriptions: [...tg.targets].map((key) => ({
          Target: describedTarget(tg, key),
          TargetHealth: inUse
            ? { State: 'healthy' }
            : { State: 'unused', Reason: 'Target.NotInUse' },
        })),
      };
    }
    if (service === 'tagging' && operation === 'GetResources')
      return getResources(this.elbv2, this.ec2, input);
    const handler =
      service === 'ec2'
        ? this.ec2.handlers[operation]
        : service === 'elbv2'
          ? this.elbv2.handler(operation)
          : undefined;
    if (handler === undefined) throw new Error(`bench fake AWS: ${operation} is not implemented`);
    return handler(input);
  }
}

export interface ClientStats {
  /** SDK retries after a throttling error: none since issue 37 (throttling goes back to SQS). */
  retries: number;
  /** Calls throttled by AWS and handed back to the queue (a RequeueAfterError, not a failure). */
  exhausted: number;
  /** Virtual ms calls slept on this instance's limiter (each sleep within the bound). */
  limiterWaitMs: number;
}

/**
 * The NLB provider's clients inside one Lambda instance, as createRuntime wires them: every ELBv2
 * attempt passes the per-process limiter (functions/aws/process-limiter.ts, the real class on
 * virtual time) or, for registrations, the shared budget when there is one; a call either limit
 * would hold past the bound ends with RequeueAfterError. The SDK retry strategy
 * (functions/aws/bounded-retry.ts) does not retry throttling: the throttled call fails, and the
 * provider turns it into a requeue.
 */
export class FakeAwsClients {
  readonly stats: ClientStats = { retries: 0, exhausted: 0, limiterWaitMs: 0 };
  private readonly limiter: ProcessRateLimiter;

  constructor(
    private readonly account: FakeAwsAccount,
    clock: VirtualClock,
    /** Kept for the scenarios' seeding; the retry strategy draws no jitter on throttling. */
    _random: () => number,
    /** The fleet's budgets, as addRateLimits is given them; none: per-process only. */
    private readonly budgets: Elbv2Budgets = {},
  ) {
    this.limiter = new ProcessRateLimiter({
      nowMs: () => clock.now().getTime(),
      sleep: (ms) => {
        this.stats.limiterWaitMs += ms;
        return clock.sleep(ms);
      },
    });
  }

  /** As the provider wants them; only `send` is ever called. */
  asNlbClients(): NlbClients {
    const client = (service: ServiceName) => ({
      send: (command: object) => this.send(service, command),
    });
    const elbv2 = client('elbv2');
    attachBudgets(elbv2, this.budgets);
    // As addRateLimits and countSentChanges: every request that may change AWS is counted.
    const ec2 = client('ec2');
    markSendsCounted(elbv2);
    markSendsCounted(ec2);
    return {
      elbv2: elbv2 as unknown as ElasticLoadBalancingV2Client,
      ec2: ec2 as unknown as EC2Client,
      tagging: client('tagging') as unknown as ResourceGroupsTaggingAPIClient,
    };
  }

  private async send(service: ServiceName, command: object): Promise<unknown> {
    const operation = operationOf(command);
    // As addRateLimits: a call books a slot on the fleet's budget for it, if there is one, or
    // passes the per-process limiter; a RequeueAfterError from either ends the call, unretried.
    const budget = service === 'elbv2' ? budgetForCall(this.budgets, operation) : undefined;
    if (budget !== undefined) await budget.take(operation);
    else if (service === 'elbv2') await this.limiter.take(operation);
    if (service !== 'tagging') noteSent(operation);
    try {
      return await this.account.attempt(service, command);
    } catch (error) {
      if (isThrottling(error)) this.stats.exhausted++;
      throw error;
    }
  }
}
