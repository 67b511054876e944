/**
 * ELBv2 in the bench's fake AWS account (fake-aws.ts, which holds EC2 and the tagging API): load
 * balancers, listeners and target groups, with the AWS semantics the NLB provider depends on.
 * Tags on every resource; a target group belongs to a load balancer through the listeners that
 * forward to it (DescribeTargetGroups `LoadBalancerArns`); DeleteTargetGroup refused
 * (ResourceInUse) while a listener uses the group; a create of an existing name handed the
 * existing resource when its settings are the same and refused (Duplicate*) when not; a lookup
 * naming a resource that is not there failing (LoadBalancerNotFound, TargetGroupNotFound, ...),
 * except DeleteLoadBalancer, which the ELBv2 API reference says succeeds for one already gone.
 * Eventual consistency is not modelled: every call sees every change at once, as with moto.
 */
import { ownershipTags } from '../../functions/nlb/model/naming';

type Input = Record<string, unknown>;
type Tag = { Key?: string; Value?: string };
type Handler = (input: Input) => unknown;

const region = 'us-east-1';
const accountId = '123456789012';
const elbArn = `arn:aws:elasticloadbalancing:${region}:${accountId}`;

/** A target group: seeded by a simulation (addTargetGroup) or made by CreateTargetGroup. */
export interface FakeTargetGroup {
  readonly arn: string;
  readonly serviceKey: string;
  readonly serviceUid: string;
  /** A seeded group's load balancer, which only its ARN stands for; created groups: none. */
  readonly loadBalancerArn?: string | undefined;
  /** Absent: `instance`, AWS's default. */
  readonly targetType?: 'ip' | undefined;
  /** The group's port: what an `ip` target without a Port of its own is registered on. */
  readonly port?: number | undefined;
  /** Instance IDs; `ip:port` in an `ip` group. */
  readonly targets: Set<string>;
  readonly tags: Map<string, string>;
  /** What CreateTargetGroup was given; absent for seeded groups, described as before. */
  readonly created?: CreatedTargetGroup | undefined;
}

export interface CreatedTargetGroup {
  readonly name: string;
  readonly protocol: string;
  readonly vpcId: string;
  /** The HealthCheck* fields and Matcher, as DescribeTargetGroups returns them. */
  readonly healthCheck: Record<string, unknown>;
  readonly attributes: Map<string, string>;
}

export interface FakeLoadBalancer {
  readonly arn: string;
  readonly name: string;
  readonly dnsName: string;
  readonly scheme: string;
  readonly vpcId: string;
  zones: { SubnetId: string; ZoneName: string; LoadBalancerAddresses: object[] }[];
  securityGroups: string[];
  ipAddressType: string;
  readonly tags: Map<string, string>;
  readonly attributes: Map<string, string>;
}

export interface FakeListener {
  readonly arn: string;
  readonly loadBalancerArn: string;
  fields: Input;
  /** The default first. */
  certificates: string[];
  readonly tags: Map<string, string>;
  readonly attributes: Map<string, string>;
}

/** What the load balancers see of EC2 (FakeEc2 in fake-aws.ts): subnets and security groups. */
export interface FakeNetwork {
  readonly subnets: ReadonlyMap<string, { readonly id: string; vpcId: string; zone: string }>;
  readonly securityGroups: ReadonlyMap<string, object>;
}

/** Shaped like the SDK's ServiceException, so the provider classifies it by its code. */
export function awsError(code: string, message: string): Error {
  return Object.assign(new Error(message), {
    name: code,
    $fault: 'client',
    $metadata: { httpStatusCode: 400 },
  });
}

/** The "not found" code of an ELBv2 ARN's kind. */
function elbNotFound(arn: string): Error {
  const kind = arn.includes(':listener/')
    ? 'Listener'
    : arn.includes(':loadbalancer/')
      ? 'LoadBalancer'
      : 'TargetGroup';
  return awsError(`${kind}NotFound`, `${kind} '${arn}' not found`);
}

export function tagMap(tags: unknown): Map<string, string> {
  return new Map(((tags ?? []) as Tag[]).map((t) => [t.Key ?? '', t.Value ?? '']));
}

export function tagList(tags: ReadonlyMap<string, string>): { Key: string; Value: string }[] {
  return [...tags].map(([Key, Value]) => ({ Key, Value }));
}

function attributeList(attributes: ReadonlyMap<string, string>) {
  return { Attributes: [...attributes].map(([Key, Value]) => ({ Key, Value })) };
}

function merge(attributes: Map<string, string>, input: Input) {
  for (const { Key, Value } of (input.Attributes ?? []) as Tag[])
    attributes.set(Key ?? '', Value ?? '');
  return attributeList(attributes);
}

/** A list of strings from an input, empty when it has none. */
export function strings(value: unknown): string[] {
  return (value ?? []) as string[];
}

/** A list of strings from an input, if it has one. */
function given(value: unknown): string[] | undefined {
  return value as string[] | undefined;
}

/** The resources of the given names, in their order; an unknown one fails the call, as in AWS. */
function named<T>(all: T[], names: unknown, nameOf: (item: T) => string | undefined, code: string) {
  return given(names)?.map(
    (name) =>
      all.find((item) => nameOf(item) === name) ?? fail(awsError(code, `'[${name}]' not found`)),
  );
}

function fail(error: Error): never {
  throw error;
}

/** The VPCs are those of the seeded subnets. */
export function knownVpc(network: FakeNetwork, vpcId: unknown, code: string): string {
  const id = String(vpcId);
  if (![...network.subnets.values()].some((s) => s.vpcId === id))
    throw awsError(code, `The vpc ID '${id}' does not exist`);
  return id;
}

/** An NLB's attributes before any change (the ELBv2 API reference's defaults). */
const loadBalancerDefaults = {
  'deletion_protection.enabled': 'false',
  'load_balancing.cross_zone.enabled': 'false',
  'access_logs.s3.enabled': 'false',
  'access_logs.s3.bucket': '',
  'access_logs.s3.prefix': '',
  'dns_record.client_routing_policy': 'any_availability_zone',
};

const targetGroupDefaults = {
  'deregistration_delay.timeout_seconds': '300',
  'deregistration_delay.connection_termination.enabled': 'false',
  'stickiness.enabled': 'false',
  'stickiness.type': 'source_ip',
  'proxy_protocol_v2.enabled': 'false',
  'load_balancing.cross_zone.enabled': 'use_load_balancer_configuration',
};

const listenerDefaults = { 'tcp.idle_timeout.seconds': '350' };

/** An NLB target group's health check when CreateTargetGroup names none. */
const healthCheckDefaults = {
  HealthCheckEnabled: true,
  HealthCheckProtocol: 'TCP',
  HealthCheckPort: 'traffic-port',
  HealthCheckIntervalSeconds: 30,
  HealthCheckTimeoutSeconds: 10,
  HealthyThresholdCount: 5,
  UnhealthyThresholdCount: 2,
};
const healthCheckFields = [...Object.keys(healthCheckDefaults), 'HealthCheckPath', 'Matcher'];

function healthCheckOf(input: Input): Record<string, unknown> {
  return Object.fromEntries(
    healthCheckFields.filter((f) => input[f] !== undefined).map((f) => [f, input[f]]),
  );
}

/** ELBv2's load balancers, listeners and target groups. */
export class FakeElbv2 {
  readonly targetGroups = new Map<string, FakeTargetGroup>();
  readonly loadBalancers = new Map<string, FakeLoadBalancer>();
  readonly listeners = new Map<string, FakeListener>();
  private serial = 0;
  private readonly handlers: Record<string, Handler> = this.elbv2Handlers();

  constructor(private readonly network: FakeNetwork) {}

  /** The answer to one call, or undefined when this model has no such operation. */
  handler(operation: string): Handler | undefined {
    return this.handlers[operation];
  }

  /** The load balancer that has a security group, if one has (EC2's DependencyViolation). */
  holderOf(groupId: string): FakeLoadBalancer | undefined {
    return [...this.loadBalancers.values()].find((lb) => lb.securityGroups.includes(groupId));
  }

  /** Every load balancer a target group serves: a seeded group's own, and its listeners'. */
  loadBalancerArnsOf(tg: FakeTargetGroup): string[] {
    const arns = (this.listenersByGroup().get(tg.arn) ?? []).map((l) => l.loadBalancerArn);
    return [...new Set([...(tg.loadBalancerArn ? [tg.loadBalancerArn] : []), ...arns])];
  }

  /**
   * The listeners forwarding to each target group, indexed until a listener changes: a scan of
   * every listener per group made a 1,000-Service simulation quadratic (hours of wall time).
   */
  private listenersByGroup(): Map<string, FakeListener[]> {
    if (this.forwardIndex === undefined) {
      this.forwardIndex = new Map();
      for (const l of this.listeners.values()) {
        for (const arn of new Set(this.forwardsTo(l)))
          this.forwardIndex.set(arn, [...(this.forwardIndex.get(arn) ?? []), l]);
      }
    }
    return this.forwardIndex;
  }

  private forwardIndex: Map<string, FakeListener[]> | undefined;

  describeTargetGroup(tg: FakeTargetGroup): Input {
    const made = tg.created;
    return {
      TargetGroupArn: tg.arn,
      ...(made && {
        TargetGroupName: made.name,
        Protocol: made.protocol,
        VpcId: made.vpcId,
        ...made.healthCheck,
      }),
      TargetType: tg.targetType ?? 'instance',
      ...(tg.port !== undefined ? { Port: tg.port } : {}),
      LoadBalancerArns: this.loadBalancerArnsOf(tg),
    };
  }

  private hex(length: number): string {
    return (++this.serial).toString(16).padStart(length, '0');
  }

  private elbv2Handlers(): Record<string, Handler> {
    return {
      CreateLoadBalancer: (i) => this.createLoadBalancer(i),
      DescribeLoadBalancers: (i) => this.describeLoadBalancers(i),
      DeleteLoadBalancer: (i) => this.deleteLoadBalancer(String(i.LoadBalancerArn)),
      DescribeLoadBalancerAttributes: (i) =>
        attributeList(this.loadBalancer(i.LoadBalancerArn).attributes),
      ModifyLoadBalancerAttributes: (i) =>
        merge(this.loadBalancer(i.LoadBalancerArn).attributes, i),
      SetSubnets: (i) => {
        const lb = this.loadBalancer(i.LoadBalancerArn);
        lb.zones = this.zonesOf(i);
        return { AvailabilityZones: lb.zones, IpAddressType: lb.ipAddressType };
      },
      SetSecurityGroups: (i) => {
        this.loadBalancer(i.LoadBalancerArn).securityGroups = this.existingGroups(i.SecurityGroups);
        return { SecurityGroupIds: strings(i.SecurityGroups) };
      },
      SetIpAddressType: (i) => {
        this.loadBalancer(i.LoadBalancerArn).ipAddressType = String(i.IpAddressType);
        return { IpAddressType: i.IpAddressType };
      },
      CreateTargetGroup: (i) => this.createTargetGroup(i),
      DescribeTargetGroups: (i) => this.describeTargetGroups(i),
      ModifyTargetGroup: (i) => {
        const tg = this.targetGroup(i.TargetGroupArn);
        if (tg.created !== undefined) Object.assign(tg.created.healthCheck, healthCheckOf(i));
        return { TargetGroups: [this.describeTargetGroup(tg)] };
      },
      DescribeTargetGroupAttributes: (i) =>
        attributeList(this.targetGroupAttributes(this.targetGroup(i.TargetGroupArn))),
      ModifyTargetGroupAttributes: (i) =>
        merge(this.targetGroupAttributes(this.targetGroup(i.TargetGroupArn)), i),
      DeleteTargetGroup: (i) => this.deleteTargetGroup(this.targetGroup(i.TargetGroupArn)),
      CreateListener: (i) => this.createListener(i),
      DescribeListeners: (i) => this.describeListeners(i),
      ModifyListener: (i) => {
        const listener = this.listener(i.ListenerArn);
        this.checkForwards(i, listener.loadBalancerArn);
        const { ListenerArn: _, Certificates, ...fields } = i;
        // Only what the call names changes, as in AWS.
        for (const [key, value] of Object.entries(fields))
          if (value !== undefined) listener.fields[key] = value;
        this.forwardIndex = undefined;
        const [first] = (Certificates ?? []) as { CertificateArn?: string }[];
        if (first?.CertificateArn) listener.certificates[0] = first.CertificateArn;
        return { Listeners: [this.describeListener(listener)] };
      },
      DeleteListener: (i) => {
        this.listeners.delete(this.listener(i.ListenerArn).arn);
        this.forwardIndex = undefined;
        return {};
      },
      DescribeListenerAttributes: (i) => attributeList(this.listener(i.ListenerArn).attributes),
      ModifyListenerAttributes: (i) => merge(this.listener(i.ListenerArn).attributes, i),
      DescribeListenerCertificates: (i) => ({
        Certificates: this.listener(i.ListenerArn).certificates.map((CertificateArn, n) => ({
          CertificateArn,
          IsDefault: n === 0,
        })),
      }),
      AddListenerCertificates: (i) => this.changeCertificates(i, 'add'),
      RemoveListenerCertificates: (i) => this.changeCertificates(i, 'remove'),
      DescribeTags: (i) => ({
        TagDescriptions: strings(i.ResourceArns).map((arn) => ({
          ResourceArn: arn,
          Tags: tagList(this.elbTags(arn)),
        })),
      }),
      AddTags: (i) => this.changeElbTags(i, 'add'),
      RemoveTags: (i) => this.changeElbTags(i, 'remove'),
    };
  }

  // ELBv2 load balancers.

  private createLoadBalancer(input: Input) {
    const name = String(input.Name);
    const scheme = (input.Scheme as string | undefined) ?? 'internet-facing';
    const existing = [...this.loadBalancers.values()].find((lb) => lb.name === name);
    if (existing !== undefined) {
      // AWS hands back the one of the same name and settings, and refuses other settings.
      if (existing.scheme !== scheme)
        throw awsError('DuplicateLoadBalancerName', `A load balancer named ${name} exists`);
      return { LoadBalancers: [this.describeLoadBalancer(existing)] };
    }
    const zones = this.zonesOf(input);
    const id = this.hex(16);
    const lb: FakeLoadBalancer = {
      arn: `${elbArn}:loadbalancer/net/${name}/${id}`,
      name,
      dnsName: `${name}-${id}.elb.${region}.amazonaws.com`,
      scheme,
      vpcId: this.network.subnets.get(zones[0]?.SubnetId ?? '')?.vpcId ?? '',
      zones,
      securityGroups: this.existingGroups(input.SecurityGroups),
      ipAddressType: (input.IpAddressType as string | undefined) ?? 'ipv4',
      tags: tagMap(input.Tags),
      attributes: new Map(Object.entries(loadBalancerDefaults)),
    };
    this.loadBalancers.set(lb.arn, lb);
    return { LoadBalancers: [this.describeLoadBalancer(lb)] };
  }

  /** By ARNs or names (any unknown one fails the call, as in AWS), or all of them. */
  private describeLoadBalancers(input: Input) {
    const all = [...this.loadBalancers.values()];
    const found =
      given(input.LoadBalancerArns)?.map((arn) => this.loadBalancer(arn)) ??
      named(all, input.Names, (lb) => lb.name, 'LoadBalancerNotFound') ??
      all;
    return { LoadBalancers: found.map((lb) => this.describeLoadBalancer(lb)) };
  }

  private describeLoadBalancer(lb: FakeLoadBalancer): Input {
    return {
      LoadBalancerArn: lb.arn,
      DNSName: lb.dnsName,
      CanonicalHostedZoneId: 'Z26RNL4JYFTOTI',
      LoadBalancerName: lb.name,
      Scheme: lb.scheme,
      VpcId: lb.vpcId,
      State: { Code: 'active' },
      Type: 'network',
      AvailabilityZones: lb.zones.map((z) => ({ ...z })),
      SecurityGroups: [...lb.securityGroups],
      IpAddressType: lb.ipAddressType,
    };
  }

  /** Its listeners go with it; one already gone is no error (the ELBv2 API reference). */
  private deleteLoadBalancer(arn: string) {
    const lb = this.loadBalancers.get(arn);
    if (lb === undefined) return {};
    if (lb.attributes.get('deletion_protection.enabled') === 'true')
      throw awsError('OperationNotPermitted', `Load balancer '${arn}' has deletion protection`);
    for (const l of this.listeners.values())
      if (l.loadBalancerArn === arn) this.listeners.delete(l.arn);
    this.forwardIndex = undefined;
    this.loadBalancers.delete(arn);
    return {};
  }

  /** Subnets (or subnet mappings, with their pinned addresses): existing, one per zone. */
  private zonesOf(input: Input): FakeLoadBalancer['zones'] {
    const mappings = (input.SubnetMappings ??
      strings(input.Subnets).map((SubnetId) => ({ SubnetId }))) as Input[];
    const zones = mappings.map(({ SubnetId, ...addresses }) => {
      const subnet = this.network.subnets.get(String(SubnetId));
      if (subnet === undefined)
        throw awsError('SubnetNotFound', `The subnet ID '${String(SubnetId)}' is not valid`);
      const pinned = Object.values(addresses).some((v) => v !== undefined);
      return {
        SubnetId: subnet.id,
        ZoneName: subnet.zone,
        LoadBalancerAddresses: pinned ? [addresses] : [],
      };
    });
    if (new Set(zones.map((z) => z.ZoneName)).size !== zones.length)
      throw awsError('InvalidConfigurationRequest', 'at most one subnet per Availability Zone');
    return zones;
  }

  private existingGroups(ids: unknown): string[] {
    for (const id of strings(ids)) {
      if (!this.network.securityGroups.has(id))
        throw awsError('InvalidSecurityGroup', `Security group '${id}' does not exist`);
    }
    return [...strings(ids)];
  }

  private loadBalancer(arn: unknown): FakeLoadBalancer {
    return this.loadBalancers.get(String(arn)) ?? fail(elbNotFound(String(arn)));
  }

  // ELBv2 target groups.

  private createTargetGroup(input: Input) {
    const name = String(input.Name);
    const created: CreatedTargetGroup = {
      name,
      protocol: String(input.Protocol),
      vpcId: knownVpc(this.network, input.VpcId, 'ValidationError'),
      healthCheck: { ...healthCheckDefaults, ...healthCheckOf(input) },
      attributes: new Map(Object.entries(targetGroupDefaults)),
    };
    const targetType = input.TargetType === 'ip' ? ('ip' as const) : undefined;
    const port = input.Port as number | undefined;
    const existing = [...this.targetGroups.values()].find((tg) => tg.created?.name === name);
    if (existing !== undefined) {
      const same = (tg: FakeTargetGroup) =>
        JSON.stringify([tg.created?.protocol, tg.created?.vpcId, tg.port, tg.targetType]) ===
          JSON.stringify([created.protocol, created.vpcId, port, targetType]) &&
        Object.entries(created.healthCheck).every(([k, v]) => tg.created?.healthCheck[k] === v);
      // Created again with the same settings: AWS answers with the one it has.
      if (!same(existing))
        throw awsError('DuplicateTargetGroupName', `A target group named '${name}' exists`);
      return { TargetGroups: [this.describeTargetGroup(existing)] };
    }
    const tags = tagMap(input.Tags);
    const tg: FakeTargetGroup = {
      arn: `${elbArn}:targetgroup/${name}/${this.hex(16)}`,
      serviceKey: tags.get(ownershipTags.service) ?? '',
      serviceUid: tags.get(ownershipTags.serviceUid) ?? '',
      targetType,
      port,
      targets: new Set(),
      tags,
      created,
    };
    this.targetGroups.set(tg.arn, tg);
    return { TargetGroups: [this.describeTargetGroup(tg)] };
  }

  /** By ARNs or names (one unknown fails the call, as in AWS), or by load balancer; one page. */
  private describeTargetGroups(input: Input) {
    const all = [...this.targetGroups.values()];
    const lbArn = input.LoadBalancerArn as string | undefined;
    if (lbArn !== undefined && !all.some((tg) => tg.loadBalancerArn === lbArn))
      this.loadBalancer(lbArn);
    const groups =
      given(input.TargetGroupArns)?.map((arn) => this.targetGroup(arn)) ??
      named(all, input.Names, (tg) => tg.created?.name, 'TargetGroupNotFound') ??
      all.filter((tg) => lbArn === undefined || this.loadBalancerArnsOf(tg).includes(lbArn));
    return { TargetGroups: groups.map((tg) => this.describeTargetGroup(tg)) };
  }

  private deleteTargetGroup(tg: FakeTargetGroup) {
    if ((this.listenersByGroup().get(tg.arn)?.length ?? 0) > 0)
      throw awsError('ResourceInUse', `Target group '${tg.arn}' is currently in use by a listener`);
    this.targetGroups.delete(tg.arn);
    return {};
  }

  private targetGroupAttributes(tg: FakeTargetGroup): Map<string, string> {
    return tg.created?.attributes ?? new Map(Object.entries(targetGroupDefaults));
  }

  targetGroup(arn: unknown): FakeTargetGroup {
    return this.targetGroups.get(String(arn)) ?? fail(elbNotFound(String(arn)));
  }

  // ELBv2 listeners.

  private createListener(input: Input) {
    const lb = this.loadBalancer(input.LoadBalancerArn);
    this.checkForwards(input, lb.arn);
    const { LoadBalancerArn: _, Certificates, Tags, ...fields } = input;
    const existing = [...this.listeners.values()].find(
      (l) => l.loadBalancerArn === lb.arn && l.fields.Port === input.Port,
    );
    if (existing !== undefined) {
      if (JSON.stringify(existing.fields) !== JSON.stringify(fields))
        throw awsError('DuplicateListener', `A listener on port ${String(input.Port)} exists`);
      return { Listeners: [this.describeListener(existing)] };
    }
    const listener: FakeListener = {
      arn: `${elbArn}:listener/net/${lb.name}/${lb.arn.slice(-16)}/${this.hex(16)}`,
      loadBalancerArn: lb.arn,
      fields,
      certificates: ((Certificates ?? []) as { CertificateArn?: string }[]).map(
        (c) => c.CertificateArn ?? '',
      ),
      tags: tagMap(Tags),
      attributes: new Map(Object.entries(listenerDefaults)),
    };
    this.listeners.set(listener.arn, listener);
    this.forwardIndex = undefined;
    return { Listeners: [this.describeListener(listener)] };
  }

  /** The groups must exist, and an NLB's group serves one load balancer only. */
  private checkForwards(input: Input, lbArn: string): void {
    for (const arn of this.forwardsTo({ fields: input })) {
      const others = this.loadBalancerArnsOf(this.targetGroup(arn)).filter((a) => a !== lbArn);
      if (others.length > 0)
        throw awsError('TargetGroupAssociationLimit', `'${arn}' serves another load balancer`);
    }
  }

  private describeListeners(input: Input) {
    const arns = input.ListenerArns as string[] | undefined;
    const lbArn = input.LoadBalancerArn as string | undefined;
    if (lbArn !== undefined) this.loadBalancer(lbArn);
    const found =
      arns?.map((arn) => this.listener(arn)) ??
      [...this.listeners.values()].filter((l) => l.loadBalancerArn === lbArn);
    return { Listeners: found.map((l) => this.describeListener(l)) };
  }

  private describeListener(l: FakeListener): Input {
    const [first] = l.certificates;
    return {
      ListenerArn: l.arn,
      LoadBalancerArn: l.loadBalancerArn,
      ...structuredClone(l.fields),
      ...(first !== undefined ? { Certificates: [{ CertificateArn: first }] } : {}),
    };
  }

  private forwardsTo(listener: { fields: Input }): string[] {
    return ((listener.fields.DefaultActions ?? []) as Input[])
      .filter((a) => a.Type === 'forward')
      .flatMap((a) => [
        ...strings(a.TargetGroupArn ? [a.TargetGroupArn] : []),
        ...(((a.ForwardConfig as Input | undefined)?.TargetGroups as Input[] | undefined)?.map(
          (t) => String(t.TargetGroupArn),
        ) ?? []),
      ]);
  }

  private changeCertificates(input: Input, change: 'add' | 'remove') {
    const listener = this.listener(input.ListenerArn);
    const given = ((input.Certificates ?? []) as { CertificateArn?: string }[]).map(
      (c) => c.CertificateArn ?? '',
    );
    const [first, ...rest] = listener.certificates;
    const others =
      change === 'add'
        ? [...new Set([...rest, ...given])]
        : rest.filter((arn) => !given.includes(arn));
    listener.certificates = [...(first !== undefined ? [first] : []), ...others];
    return change === 'add'
      ? { Certificates: given.map((CertificateArn) => ({ CertificateArn })) }
      : {};
  }

  private listener(arn: unknown): FakeListener {
    return this.listeners.get(String(arn)) ?? fail(elbNotFound(String(arn)));
  }

  // ELBv2 tags.

  /** A seeded group's load balancer exists only as its ARN: it answers with the group's tags. */
  private elbTags(arn: string): Map<string, string> {
    const resource =
      this.loadBalancers.get(arn) ??
      this.targetGroups.get(arn) ??
      this.listeners.get(arn) ??
      [...this.targetGroups.values()].find((tg) => tg.loadBalancerArn === arn);
    return resource?.tags ?? fail(elbNotFound(arn));
  }

  private changeElbTags(input: Input, change: 'add' | 'remove') {
    const all = strings(input.ResourceArns).map((arn) => this.elbTags(arn));
    for (const tags of all) {
      if (change === 'add') {
        for (const [key, value] of tagMap(input.Tags)) tags.set(key, value);
        if (tags.size > 50) throw awsError('TooManyTags', 'over 50 tags');
      } else for (const key of strings(input.TagKeys)) tags.delete(key);
    }
    return {};
  }
}
