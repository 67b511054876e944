import {
  AuthorizeSecurityGroupIngressCommand,
  CreateSecurityGroupCommand,
  CreateTagsCommand,
  DeleteSecurityGroupCommand,
  DeleteTagsCommand,
  DescribeSecurityGroupsCommand,
  RevokeSecurityGroupIngressCommand,
  type IpPermission,
} from '@aws-sdk/client-ec2';
import {
  AddListenerCertificatesCommand,
  AddTagsCommand,
  CreateListenerCommand,
  CreateLoadBalancerCommand,
  CreateTargetGroupCommand,
  DeleteListenerCommand,
  DeleteLoadBalancerCommand,
  DeleteTargetGroupCommand,
  DeregisterTargetsCommand,
  DescribeLoadBalancersCommand,
  DescribeTargetGroupsCommand,
  ModifyListenerAttributesCommand,
  ModifyListenerCommand,
  ModifyLoadBalancerAttributesCommand,
  ModifyTargetGroupAttributesCommand,
  ModifyTargetGroupCommand,
  RegisterTargetsCommand,
  RemoveListenerCertificatesCommand,
  RemoveTagsCommand,
  SetIpAddressTypeCommand,
  SetSecurityGroupsCommand,
  SetSubnetsCommand,
  type Action,
  type LoadBalancer,
  type ProtocolEnum,
} from '@aws-sdk/client-elastic-load-balancing-v2';
import { InvariantError, RequeueAfterError, TerminalError } from '../core/errors';
import type { Service } from '../core/objects';
import { isAwsError, notFoundKind, NotVisibleYetError, translateAwsError } from '../aws/aws-errors';
import type { NlbClients } from '../aws/clients';
import type { Plan, ResourceRef, Step } from './model/plan';
import { ownershipOf, resourceTags } from './model/naming';
import {
  peerKind,
  type DesiredListener,
  type DesiredLoadBalancer,
  type DesiredTargetGroup,
  type HealthCheck,
  type IngressRule,
  type Tags,
} from './model/types';
import { describeElbv2Tags, holderOf, sortByOwnership, tagsOf } from './ownership';
import {
  createdOfKind,
  createdWithinWindow,
  forgetCreated,
  noteCreated,
  notVisibleYet,
  toProviderState,
  type NlbState,
} from './nlb-state';

export interface ExecuteRequest {
  readonly clients: NlbClients;
  readonly clusterName: string;
  readonly service: Service;
  readonly desired: DesiredLoadBalancer;
  readonly plan: Plan;
  /** Mutated as resources are created and deleted, so a failure can report what exists. */
  readonly state: NlbState;
  /** IDs known from observation. */
  readonly securityGroupId?: string | undefined;
  readonly loadBalancerArn?: string | undefined;
  /** The clock (epoch ms) that dates each create in `state.createdAt`; Date.now by default. */
  readonly now?: (() => number) | undefined;
}

/** AWS accepts at most this many targets per RegisterTargets call (the anchors batch by 200). */
export const registerBatch = 200;

/**
 * Runs a plan, recording every ARN in state as it goes, with the time of each create. A failure
 * is translated into the error taxonomy and carries the state reached (`providerState`), so
 * nothing created is forgotten. A target group from CreateTargetGroup is recorded only once its
 * tags show it is ours; until then only its creation time is, dropped if its tags name another
 * owner (a delete reads the tags before it acts on one).
 */
export async function executePlan(request: ExecuteRequest): Promise<void> {
  const run = new PlanRun(request);
  for (const step of request.plan.steps) {
    try {
      await run.apply(step);
    } catch (error) {
      const translated =
        error instanceof TerminalError ||
        error instanceof InvariantError ||
        error instanceof RequeueAfterError ||
        error instanceof NotVisibleYetError
          ? error
          : (notVisibleYetAnswer(request, step, error) ??
            translateAwsError(error, describeStep(step)));
      await run.settleUncheckedTargetGroups();
      throw Object.assign(translated, { providerState: toProviderState(request.state) });
    }
  }
  run.settleCreated();
}

interface CreatedTargetGroup {
  readonly key: string;
  readonly arn: string;
  readonly name: string;
}

class PlanRun {
  private readonly targetGroupArns: Record<string, string>;
  /**
   * Created (or handed back) but not yet checked: CreateTargetGroup returns an existing group of
   * the same name and settings, whoever owns it, so its ARN stays out of state until its tags
   * prove it is ours.
   */
  private uncheckedTargetGroups: CreatedTargetGroup[] = [];
  private securityGroupId: string | undefined;
  private loadBalancerArn: string | undefined;
  /** Listeners created in this run, by port: their attributes follow on these ARNs. */
  private readonly createdListenerArns = new Map<number, string>();
  /** Resources a delete answered "not found" for within the window: kept, not proven gone. */
  private readonly unproven = new Set<string>();

  constructor(private readonly request: ExecuteRequest) {
    this.targetGroupArns = { ...request.plan.keptTargetGroups };
    this.securityGroupId = request.securityGroupId;
    this.loadBalancerArn = request.loadBalancerArn;
  }

  private now(): number {
    return (this.request.now ?? Date.now)();
  }

  private get elbv2() {
    return this.request.clients.elbv2;
  }

  private get ec2() {
    return this.request.clients.ec2;
  }

  async apply(step: Step): Promise<void> {
    const { state, desired } = this.request;
    switch (step.kind) {
      case 'deleteLoadBalancer':
        await this.elbv2.send(new DeleteLoadBalancerCommand({ LoadBalancerArn: step.arn }));
        this.loadBalancerArn = undefined;
        delete state.loadBalancerArn;
        delete state.dnsName;
        delete state.loadBalancerName;
        forgetCreated(state, step.arn);
        return;
      case 'createSecurityGroup':
        this.securityGroupId = await this.createSecurityGroup();
        state.securityGroupId = this.securityGroupId;
        noteCreated(state, this.securityGroupId, this.now());
        return;
      case 'authorizeIngress':
        await this.authorize(step.rules);
        return;
      case 'revokeIngress':
        await this.ec2.send(
          new RevokeSecurityGroupIngressCommand({
            GroupId: this.requireSecurityGroup(),
            IpPermissions: permissionsOf(step.rules),
          }),
        );
        return;
      case 'deleteSecurityGroup':
        await this.deleteReplacedSecurityGroup(step.id);
        return;
      case 'createTargetGroup': {
        const tg = step.targetGroup;
        const arn = await this.createTargetGroup(tg, desired.securityGroup.vpcId);
        if (arn === undefined)
          throw new InvariantError(`CreateTargetGroup ${tg.name} returned no ARN`);
        // Dated now, recorded once its tags prove it ours: a group AWS does not show in full yet
        // is still found by a delete right after (nlb-provider.ts inventory).
        noteCreated(state, arn, this.now());
        this.targetGroupArns[tg.key] = arn;
        this.uncheckedTargetGroups.push({ key: tg.key, arn, name: tg.name });
        return;
      }
      case 'verifyCreatedTargetGroups':
        await this.verifyCreatedTargetGroups();
        return;
      case 'modifyTargetGroup':
        await this.elbv2.send(
          new ModifyTargetGroupCommand({
            TargetGroupArn: this.targetGroupArn(step.key),
            ...healthCheckFields(step.healthCheck),
          }),
        );
        return;
      case 'modifyTargetGroupAttributes':
        await this.elbv2.send(
          new ModifyTargetGroupAttributesCommand({
            TargetGroupArn: this.targetGroupArn(step.key),
            Attributes: Object.entries(step.attributes).map(([Key, Value]) => ({ Key, Value })),
          }),
        );
        return;
      case 'registerTargets':
      case 'deregisterTargets': {
        const arn = this.targetGroupArn(step.key);
        for (let i = 0; i < step.targets.length; i += registerBatch) {
          const Targets = step.targets.slice(i, i + registerBatch).map((Id) => ({ Id }));
          await this.elbv2.send(
            step.kind === 'registerTargets'
              ? new RegisterTargetsCommand({ TargetGroupArn: arn, Targets })
              : new DeregisterTargetsCommand({ TargetGroupArn: arn, Targets }),
          );
        }
        const record = state.targetGroups?.[step.key];
        if (record !== undefined) {
          const current = new Set(record.targets ?? []);
          for (const id of step.targets) {
            if (step.kind === 'registerTargets') current.add(id);
            else current.delete(id);
          }
          record.targets = [...current].sort();
        }
        return;
      }
      case 'createLoadBalancer': {
        const lb = step.loadBalancer;
        const withAddresses = lb.subnetMappings.some(
          (m) => m.allocationId || m.privateIPv4Address || m.ipv6Address,
        );
        const created = await this.createLoadBalancer(
          lb.name,
          new CreateLoadBalancerCommand({
            Name: lb.name,
            Type: 'network',
            Scheme: lb.scheme,
            IpAddressType: lb.ipAddressType,
            // Plain subnets unless addresses are pinned: the same thing for AWS, and emulators
            // ignore subnet mappings.
            ...(withAddresses
              ? {
                  SubnetMappings: lb.subnetMappings.map((m) => ({
                    SubnetId: m.subnetId,
                    AllocationId: m.allocationId,
                    PrivateIPv4Address: m.privateIPv4Address,
                    IPv6Address: m.ipv6Address,
                  })),
                }
              : { Subnets: lb.subnetMappings.map((m) => m.subnetId) }),
            SecurityGroups: this.securityGroupIds(),
            Tags: tagList(lb.tags),
          }),
        );
        const made = created.LoadBalancers?.[0];
        if (made?.LoadBalancerArn === undefined) {
          throw new InvariantError(`CreateLoadBalancer ${lb.name} returned no ARN`);
        }
        noteCreated(state, made.LoadBalancerArn, this.now());
        if (lb.nameFromAnnotation === true) await this.requireOwnLoadBalancer(lb.name, made, true);
        this.loadBalancerArn = made.LoadBalancerArn;
        state.loadBalancerArn = made.LoadBalancerArn;
        state.loadBalancerName = lb.name;
        state.dnsName = (made.DNSName ?? '').toLowerCase();
        return;
      }
      case 'setSubnets':
        await this.elbv2.send(
          new SetSubnetsCommand({
            LoadBalancerArn: this.requireLoadBalancer(),
            SubnetMappings: step.subnetMappings.map((m) => ({
              SubnetId: m.subnetId,
              AllocationId: m.allocationId,
              PrivateIPv4Address: m.privateIPv4Address,
              IPv6Address: m.ipv6Address,
            })),
          }),
        );
        return;
      case 'setIpAddressType':
        await this.elbv2.send(
          new SetIpAddressTypeCommand({
            LoadBalancerArn: this.requireLoadBalancer(),
            IpAddressType: step.ipAddressType,
          }),
        );
        return;
      case 'setSecurityGroups':
        await this.elbv2.send(
          new SetSecurityGroupsCommand({
            LoadBalancerArn: this.requireLoadBalancer(),
            SecurityGroups: this.securityGroupIds(),
          }),
        );
        return;
      case 'modifyLoadBalancerAttributes':
        await this.elbv2.send(
          new ModifyLoadBalancerAttributesCommand({
            LoadBalancerArn: this.requireLoadBalancer(),
            Attributes: Object.entries(step.attributes).map(([Key, Value]) => ({ Key, Value })),
          }),
        );
        return;
      case 'createListener': {
        const listener = step.listener;
        const created = await this.elbv2.send(
          new CreateListenerCommand({
            LoadBalancerArn: this.requireLoadBalancer(),
            ...this.listenerFields(listener),
            // Ownership tags on listeners too, so IAM can limit listener changes to ours.
            Tags: tagList(
              resourceTags(
                this.request.clusterName,
                this.request.service,
                `listener:${listener.port}`,
                {},
              ),
            ),
          }),
        );
        const arn = created.Listeners?.[0]?.ListenerArn;
        noteCreated(state, arn, this.now());
        if (arn !== undefined) this.createdListenerArns.set(listener.port, arn);
        await this.addExtraCertificates(arn, listener);
        return;
      }
      case 'modifyListenerAttributes': {
        const arn = step.arn ?? this.createdListenerArns.get(step.port);
        if (arn === undefined)
          throw new InvariantError(`no listener on port ${step.port} for its attributes`);
        await this.elbv2.send(
          new ModifyListenerAttributesCommand({
            ListenerArn: arn,
            Attributes: Object.entries(step.attributes).map(([Key, Value]) => ({ Key, Value })),
          }),
        );
        return;
      }
      case 'modifyListener':
        await this.elbv2.send(
          new ModifyListenerCommand({
            ListenerArn: step.arn,
            ...this.listenerFields(step.listener),
          }),
        );
        return;
      case 'addListenerCertificates':
        await this.elbv2.send(
          new AddListenerCertificatesCommand({
            ListenerArn: step.arn,
            Certificates: step.certificateArns.map((CertificateArn) => ({ CertificateArn })),
          }),
        );
        return;
      case 'removeListenerCertificates':
        await this.elbv2.send(
          new RemoveListenerCertificatesCommand({
            ListenerArn: step.arn,
            Certificates: step.certificateArns.map((CertificateArn) => ({ CertificateArn })),
          }),
        );
        return;
      case 'deleteListener':
        await this.elbv2.send(new DeleteListenerCommand({ ListenerArn: step.arn }));
        return;
      case 'deleteTargetGroup':
        await this.elbv2.send(new DeleteTargetGroupCommand({ TargetGroupArn: step.arn }));
        for (const [key, tg] of Object.entries(state.targetGroups ?? {})) {
          if (tg.arn === step.arn) delete state.targetGroups?.[key];
        }
        forgetCreated(state, step.arn);
        return;
      case 'tagResource':
        await this.tag(step.resource, step.add, step.remove);
        return;
    }
  }

  private async createSecurityGroup(): Promise<string> {
    const group = this.request.desired.securityGroup;
    try {
      const created = await this.ec2.send(
        new CreateSecurityGroupCommand({
          GroupName: group.name,
          Description: group.description,
          VpcId: group.vpcId,
          TagSpecifications: [{ ResourceType: 'security-group', Tags: tagList(group.tags) }],
        }),
      );
      if (created.GroupId === undefined)
        throw new InvariantError(`CreateSecurityGroup ${group.name} returned no ID`);
      return created.GroupId;
    } catch (error) {
      if (!isAwsError(error, 'InvalidGroup.Duplicate')) throw error;
      // Left behind by an earlier attempt whose result was lost: adopt it only if it is ours.
      const found = await this.ec2.send(
        new DescribeSecurityGroupsCommand({
          Filters: [
            { Name: 'group-name', Values: [group.name] },
            { Name: 'vpc-id', Values: [group.vpcId] },
          ],
        }),
      );
      const existing = found.SecurityGroups?.[0];
      const tags = tagsOf(existing?.Tags);
      // A group created moments ago may be missing from the lookup, or shown without its tags
      // (eventual consistency): only tags naming another owner prove it is not ours.
      if (existing?.GroupId === undefined || Object.keys(tags).length === 0) {
        throw new NotVisibleYetError(
          `create security group ${group.name}`,
          `the group of that name AWS says exists`,
          { cause: error },
        );
      }
      if (ownershipOf(tags, this.request.clusterName, this.request.service) !== 'ours') {
        throw new TerminalError(
          `security group ${group.name} already exists in ${group.vpcId} and is not owned by this Service; refusing to use it`,
        );
      }
      return existing.GroupId;
    }
  }

  private async authorize(rules: readonly IngressRule[]): Promise<void> {
    const GroupId = this.requireSecurityGroup();
    try {
      await this.ec2.send(
        new AuthorizeSecurityGroupIngressCommand({ GroupId, IpPermissions: permissionsOf(rules) }),
      );
    } catch (error) {
      if (!isAwsError(error, 'InvalidPermission.Duplicate')) throw error;
      // Some rules exist already (an adopted group): add the rest one by one.
      for (const rule of rules) {
        try {
          await this.ec2.send(
            new AuthorizeSecurityGroupIngressCommand({
              GroupId,
              IpPermissions: permissionsOf([rule]),
            }),
          );
        } catch (inner) {
          if (!isAwsError(inner, 'InvalidPermission.Duplicate')) throw inner;
        }
      }
    }
  }

  /**
   * CreateTargetGroup hands back an existing group of the same name and settings. With other
   * settings it refuses (DuplicateTargetGroupName): a group an earlier attempt created, whose answer
   * was lost, before the Service's health check changed. That one is found by name and brought to
   * the desired health check; verifyCreatedTargetGroups then adopts it only if it is ours.
   */
  private async createTargetGroup(
    tg: DesiredTargetGroup,
    vpcId: string,
  ): Promise<string | undefined> {
    try {
      const created = await this.elbv2.send(
        new CreateTargetGroupCommand({
          Name: tg.name,
          Protocol: tg.protocol,
          Port: tg.port,
          VpcId: vpcId,
          TargetType: 'instance',
          ...healthCheckFields(tg.healthCheck),
          Tags: tagList(tg.tags),
        }),
      );
      return created.TargetGroups?.[0]?.TargetGroupArn;
    } catch (error) {
      if (!isAwsError(error, 'DuplicateTargetGroupName', 'DuplicateTargetGroupNameException'))
        throw error;
      const arn = await this.targetGroupNamed(tg.name);
      // Created moments ago and not in the lookup yet (eventual consistency): not someone else's.
      if (arn === undefined) {
        throw new NotVisibleYetError(
          `create target group ${tg.name}`,
          'the target group of that name AWS says exists',
          { cause: error },
        );
      }
      await this.verifyOwnership(tg.name, arn);
      await this.elbv2.send(
        new ModifyTargetGroupCommand({ TargetGroupArn: arn, ...healthCheckFields(tg.healthCheck) }),
      );
      return arn;
    }
  }

  /** The ARN of the target group of that name, if AWS shows one. */
  private async targetGroupNamed(name: string): Promise<string | undefined> {
    try {
      const found = await this.elbv2.send(new DescribeTargetGroupsCommand({ Names: [name] }));
      return found.TargetGroups?.[0]?.TargetGroupArn;
    } catch (error) {
      if (isAwsError(error, 'TargetGroupNotFound', 'TargetGroupNotFoundException'))
        return undefined;
      throw error;
    }
  }

  /**
   * One DescribeTags for every group created so far; ours are recorded, a foreign one refused. A
   * group without tags (or whose tags AWS does not find) is one just created that AWS does not
   * show in full yet: only dated (a delete right after still finds it), and the pass retried.
   */
  private async verifyCreatedTargetGroups(): Promise<void> {
    const created = this.uncheckedTargetGroups;
    if (created.length === 0) return;
    this.uncheckedTargetGroups = [];
    const owned = await this.ownedOf(created.map((tg) => tg.arn));
    for (const tg of created) {
      if (owned.ours.includes(tg.arn)) this.record(tg);
      else delete this.targetGroupArns[tg.key];
    }
    for (const arn of owned.foreign) this.disown(arn);
    const refused = created.find((tg) => owned.foreign.includes(tg.arn));
    if (refused !== undefined) throw refusal(refused.name, refused.arn);
    if (owned.unknown.length > 0) {
      throw new NotVisibleYetError(
        'verify created target groups',
        `the tags of target group ${owned.unknown.join(', ')}`,
      );
    }
  }

  /**
   * After a failure: records the created groups whose tags say they are ours, and forgets the
   * rest. When even that read fails, none is recorded; ours carry our tags from their creation,
   * so a later delete still finds them by tags.
   */
  async settleUncheckedTargetGroups(): Promise<void> {
    const created = this.uncheckedTargetGroups;
    if (created.length === 0) return;
    this.uncheckedTargetGroups = [];
    try {
      const owned = await this.ownedOf(created.map((tg) => tg.arn));
      for (const tg of created) if (owned.ours.includes(tg.arn)) this.record(tg);
      for (const arn of owned.foreign) this.disown(arn);
    } catch {
      // The original failure is the one to report.
    }
  }

  /**
   * After a plan that ran to the end, every resource recorded has answered a call naming it (the
   * observation before, or a step since): AWS shows it, so from then on a "not found" for it
   * means gone (deleted by hand, say). Only a group kept by an unproven delete keeps its date.
   */
  settleCreated(): void {
    const { state } = this.request;
    for (const id of Object.keys(state.createdAt ?? {})) {
      if (!this.unproven.has(id)) forgetCreated(state, id);
    }
  }

  private record(tg: CreatedTargetGroup): void {
    const { state } = this.request;
    state.targetGroups = {
      ...state.targetGroups,
      [tg.key]: { arn: tg.arn, name: tg.name, targets: [] },
    };
  }

  /** A resource whose tags prove it someone else's: nothing of it stays in state. */
  private disown(arn: string): void {
    forgetCreated(this.request.state, arn);
  }

  private async ownedOf(arns: readonly string[]) {
    const tags = await describeElbv2Tags(this.elbv2, arns);
    return sortByOwnership(arns, tags, this.request.clusterName, this.request.service);
  }

  /**
   * CreateLoadBalancer hands back an existing NLB of the same name and settings; with other
   * settings it refuses (DuplicateLoadBalancerName). Our lookup by name found none before the
   * create, so the holder is one an earlier attempt made that AWS does not show yet (retried: the
   * next pass finds it by name), unless its tags, once shown, name another owner.
   */
  private async createLoadBalancer(name: string, command: CreateLoadBalancerCommand) {
    try {
      return await this.elbv2.send(command);
    } catch (error) {
      if (!isAwsError(error, 'DuplicateLoadBalancerName', 'DuplicateLoadBalancerNameException'))
        throw error;
      const holder = await this.loadBalancerNamed(name);
      if (holder !== undefined) await this.requireOwnLoadBalancer(name, holder, false);
      throw new NotVisibleYetError(
        `create load balancer ${name}`,
        'the load balancer of that name AWS says exists',
        { cause: error },
      );
    }
  }

  private async loadBalancerNamed(name: string): Promise<LoadBalancer | undefined> {
    try {
      const found = await this.elbv2.send(new DescribeLoadBalancersCommand({ Names: [name] }));
      return found.LoadBalancers?.[0];
    } catch (error) {
      if (isAwsError(error, 'LoadBalancerNotFound', 'LoadBalancerNotFoundException'))
        return undefined;
      throw error;
    }
  }

  /**
   * CreateLoadBalancer hands back an existing NLB of the same name and settings, whoever owns it.
   * A derived name carries a hash of the Service; a name from the annotation does not, so its
   * answer is checked by tags before anything of it is recorded or changed (one read). An NLB
   * without tags yet is one just created: retried, not refused.
   */
  private async requireOwnLoadBalancer(
    name: string,
    made: LoadBalancer,
    fromAnnotation: boolean,
  ): Promise<void> {
    const arn = made.LoadBalancerArn ?? '';
    const tags = (await describeElbv2Tags(this.elbv2, [arn])).get(arn) ?? {};
    if (ownershipOf(tags, this.request.clusterName, this.request.service) === 'ours') return;
    if (Object.keys(tags).length === 0)
      throw new NotVisibleYetError(`create load balancer ${name}`, `the tags of ${arn}`);
    this.disown(arn);
    const annotation = fromAnnotation
      ? ' (annotation service.beta.kubernetes.io/aws-load-balancer-name)'
      : '';
    throw new TerminalError(
      `load balancer name ${name}${annotation} is already taken by ${arn}, which belongs to ${holderOf(tags)}; refusing to use it${fromAnnotation ? ': choose another name' : ''}`,
    );
  }

  /**
   * Before a group found by name is changed: refused if its tags name another owner; retried
   * while AWS shows it without tags (just created).
   */
  private async verifyOwnership(name: string, arn: string): Promise<void> {
    const owned = await this.ownedOf([arn]);
    if (owned.ours.includes(arn)) return;
    if (owned.foreign.includes(arn)) {
      this.disown(arn);
      throw refusal(name, arn);
    }
    throw new NotVisibleYetError(`create target group ${name}`, `the tags of ${arn}`);
  }

  private async tag(resource: ResourceRef, add: Tags, remove: readonly string[]): Promise<void> {
    if (resource.type === 'security-group') {
      const id = this.requireSecurityGroup();
      if (Object.keys(add).length > 0)
        await this.ec2.send(new CreateTagsCommand({ Resources: [id], Tags: tagList(add) }));
      if (remove.length > 0) {
        await this.ec2.send(
          new DeleteTagsCommand({ Resources: [id], Tags: remove.map((Key) => ({ Key })) }),
        );
      }
      return;
    }
    const arn =
      resource.type === 'load-balancer'
        ? this.requireLoadBalancer()
        : this.targetGroupArn(resource.key);
    if (Object.keys(add).length > 0)
      await this.elbv2.send(new AddTagsCommand({ ResourceArns: [arn], Tags: tagList(add) }));
    if (remove.length > 0)
      await this.elbv2.send(new RemoveTagsCommand({ ResourceArns: [arn], TagKeys: [...remove] }));
  }

  private listenerFields(listener: DesiredListener) {
    const action: Action = {
      Type: 'forward',
      TargetGroupArn: this.targetGroupArn(listener.targetGroupKey),
    };
    const [defaultCertificate] = listener.certificateArns;
    return {
      Port: listener.port,
      Protocol: listener.protocol as ProtocolEnum,
      DefaultActions: [action],
      ...(defaultCertificate ? { Certificates: [{ CertificateArn: defaultCertificate }] } : {}),
      ...(listener.sslPolicy ? { SslPolicy: listener.sslPolicy } : {}),
      ...(listener.alpnPolicy ? { AlpnPolicy: [listener.alpnPolicy] } : {}),
    };
  }

  private async addExtraCertificates(
    arn: string | undefined,
    listener: DesiredListener,
  ): Promise<void> {
    const extra = listener.certificateArns.slice(1);
    if (arn === undefined || extra.length === 0) return;
    await this.elbv2.send(
      new AddListenerCertificatesCommand({
        ListenerArn: arn,
        Certificates: extra.map((CertificateArn) => ({ CertificateArn })),
      }),
    );
  }

  private securityGroupIds(): string[] {
    const { backendSecurityGroupId: backend, frontendSecurityGroupIds: frontend } =
      this.request.desired;
    return [...(frontend ?? [this.requireSecurityGroup()]), ...(backend ? [backend] : [])];
  }

  /**
   * The managed group the user's groups replaced. AWS may hold it for a while after it leaves the
   * NLB (DependencyViolation): it then stays recorded, and the provider comes back for it.
   */
  private async deleteReplacedSecurityGroup(id: string): Promise<void> {
    const { state } = this.request;
    try {
      await this.ec2.send(new DeleteSecurityGroupCommand({ GroupId: id }));
    } catch (error) {
      if (isAwsError(error, 'DependencyViolation')) return;
      if (!isAwsError(error, 'InvalidGroup.NotFound', 'InvalidGroupId.NotFound')) throw error;
      // Not proven deleted while it may just not be visible yet: kept, and come back for.
      if (createdWithinWindow(state, id, this.now())) {
        this.unproven.add(id);
        return;
      }
    }
    if (state.securityGroupId === id) delete state.securityGroupId;
    if (this.securityGroupId === id) this.securityGroupId = undefined;
    forgetCreated(state, id);
  }

  private targetGroupArn(key: string): string {
    const arn = this.targetGroupArns[key];
    if (arn === undefined) throw new InvariantError(`no target group for ${key} in the plan`);
    return arn;
  }

  private requireSecurityGroup(): string {
    if (this.securityGroupId === undefined)
      throw new InvariantError('the plan needs a security group before it has one');
    return this.securityGroupId;
  }

  private requireLoadBalancer(): string {
    if (this.loadBalancerArn === undefined)
      throw new InvariantError('the plan needs a load balancer before it has one');
    return this.loadBalancerArn;
  }
}

/**
 * A step's "not found" while we have created a resource of that kind within the window: not
 * visible yet. A delete names one resource, which must be the one; the other steps name only
 * what this plan works with, so any of that kind we just made is the one AWS does not show.
 */
function notVisibleYetAnswer(
  request: ExecuteRequest,
  step: Step,
  error: unknown,
): NotVisibleYetError | undefined {
  const kind = notFoundKind(error);
  if (kind === undefined) return undefined;
  const named =
    step.kind === 'deleteLoadBalancer' ||
    step.kind === 'deleteTargetGroup' ||
    step.kind === 'deleteListener'
      ? [step.arn]
      : step.kind === 'deleteSecurityGroup'
        ? [step.id]
        : createdOfKind(request.state, kind);
  const now = (request.now ?? Date.now)();
  return notVisibleYet(request.state, named, now, describeStep(step), error);
}

/** AWS handed back someone else's target group of our name: nothing of it is recorded or changed. */
function refusal(name: string, arn: string): TerminalError {
  return new TerminalError(
    `target group ${name} (${arn}) already exists with our name and is not owned by this Service; refusing to use it`,
  );
}

export function permissionsOf(rules: readonly IngressRule[]): IpPermission[] {
  const grouped = new Map<string, IpPermission>();
  for (const rule of rules) {
    const key = `${rule.protocol}:${rule.fromPort}:${rule.toPort}`;
    const permission = grouped.get(key) ?? {
      IpProtocol: rule.protocol,
      FromPort: rule.fromPort,
      ToPort: rule.toPort,
    };
    addPeer(permission, rule.cidr);
    grouped.set(key, permission);
  }
  return [...grouped.values()];
}

/** Puts a rule's peer in the list EC2 keeps it in: IPv4 range, IPv6 range or prefix list. */
function addPeer(permission: IpPermission, peer: string): void {
  switch (peerKind(peer)) {
    case 'prefix-list':
      (permission.PrefixListIds ??= []).push({ PrefixListId: peer });
      return;
    case 'ipv6':
      (permission.Ipv6Ranges ??= []).push({ CidrIpv6: peer });
      return;
    case 'ipv4':
      (permission.IpRanges ??= []).push({ CidrIp: peer });
  }
}

export function tagList(tags: Tags): { Key: string; Value: string }[] {
  return Object.entries(tags).map(([Key, Value]) => ({ Key, Value }));
}

function healthCheckFields(check: HealthCheck) {
  const http = check.protocol !== 'TCP';
  return {
    HealthCheckEnabled: true,
    HealthCheckProtocol: check.protocol,
    HealthCheckPort: check.port,
    HealthCheckIntervalSeconds: check.intervalSeconds,
    HealthCheckTimeoutSeconds: check.timeoutSeconds,
    HealthyThresholdCount: check.healthyThreshold,
    UnhealthyThresholdCount: check.unhealthyThreshold,
    ...(http ? { HealthCheckPath: check.path, Matcher: { HttpCode: check.successCodes } } : {}),
  };
}

/** What a plan changes, in words a user reads in an event: one entry per step. */
export function describeChanges(plan: Plan): string[] {
  return plan.steps.filter((s) => s.kind !== 'verifyCreatedTargetGroups').map(describeStep);
}

function describeStep(step: Step): string {
  switch (step.kind) {
    case 'deleteListener':
      return `delete listener on port ${step.port}`;
    case 'addListenerCertificates':
    case 'removeListenerCertificates':
      return `${step.kind === 'addListenerCertificates' ? 'add' : 'remove'} ${step.certificateArns.length} certificates on port ${step.port}`;
    case 'modifyListener':
      return `modify listener ${step.listener.protocol}:${step.listener.port}`;
    case 'modifyListenerAttributes':
      return `modify listener attributes on port ${step.port}`;
    case 'deleteTargetGroup':
      return `delete target group ${step.name}`;
    case 'modifyTargetGroup':
      return `modify health check for port ${step.key}`;
    case 'modifyTargetGroupAttributes':
      return `modify target group attributes for port ${step.key}`;
    case 'tagResource':
      return `tag ${step.resource.type}${step.resource.type === 'target-group' ? ` for port ${step.resource.key}` : ''}`;
    case 'createTargetGroup':
      return `create target group ${step.targetGroup.name}`;
    case 'createLoadBalancer':
      return `create load balancer ${step.loadBalancer.name}`;
    case 'setIpAddressType':
      return `set IP address type to ${step.ipAddressType}`;
    case 'createListener':
      return `create listener ${step.listener.protocol}:${step.listener.port}`;
    case 'registerTargets':
    case 'deregisterTargets':
      return `${step.kind === 'registerTargets' ? 'register' : 'deregister'} ${step.targets.length} targets for port ${step.key}`;
    default:
      return step.kind.replace(/([A-Z])/g, ' $1').toLowerCase();
  }
}
