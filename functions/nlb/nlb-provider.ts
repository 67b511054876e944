import { DeleteSecurityGroupCommand } from '@aws-sdk/client-ec2';
import {
  DeleteLoadBalancerCommand,
  DeleteTargetGroupCommand,
  DeregisterTargetsCommand,
  ModifyLoadBalancerAttributesCommand,
  RegisterTargetsCommand,
} from '@aws-sdk/client-elastic-load-balancing-v2';
import type {
  GetResourcesCommand as GetResourcesCommandType,
  ResourceGroupsTaggingAPIClient,
} from '@aws-sdk/client-resource-groups-tagging-api';
import { errorMessage, NotFoundError, RequeueAfterError, TerminalError } from '../core/errors';
import { stableHash, type JsonValue } from '../core/hash';
import type { Host } from '../core/hosts';
import type { LoadBalancerStatus, Service } from '../core/objects';
import type {
  DeleteResult,
  EnsureOptions,
  EnsureResult,
  LoadBalancerProvider,
  LoadBalancerSummary,
  ProviderState,
  UpdateOptions,
  UpdateResult,
} from '../sync/ports';
import {
  isAwsError,
  notFoundKind,
  NotVisibleYetError,
  resourceKindOf,
  translateAwsError,
} from '../aws/aws-errors';
import type { NlbClients } from '../aws/clients';
import { describeChanges, executePlan } from './execute';
import { registerBatch } from './execute-target-groups';
import { parseAnnotations } from './model/annotations';
import { type LoadBalancerOptions } from './model/annotation-types';
import {
  buildDesiredLoadBalancer,
  limits,
  schemeOf,
  stickinessFromAffinity,
  type ProviderSettings,
} from './model/desired';
import { ipAddressTypeOf } from './model/dualstack';
import { attributesAnnotation, wantsDeletionProtection } from '../core/deletion-protection';
import { loadBalancerName, ownershipTags, withNamingVersion } from './model/naming';
import { planChanges } from './model/plan';
import type { DesiredLoadBalancer } from './model/types';
import { observe, registeredTargetIds } from './observe';
import { describeElbv2Tags, describeSecurityGroupTags, sortByOwnership } from './ownership';
import {
  createdWithinWindow,
  namingVersionOf,
  pruneCreated,
  readNlbState,
  recordedResources,
  toProviderState,
  type NlbState,
} from './nlb-state';
import { frontendGroupChecks, resolveFrontendSecurityGroups } from './frontend-security-groups';
import type { SecurityGroupPolicy } from './model/security-group-admission';
import { resolveSubnets } from './subnets';
import type { TenantPolicyEnforcer } from './tenant-policy-check';

/** Bump when the desired model changes meaning, so every checkpoint misses once. */
export const nlbModelVersion = 1;

/** Seconds to wait for a security group or target group AWS still holds after its NLB is gone. */
const stillInUseRetrySeconds = 30;

/**
 * The LoadBalancerProvider for AWS Network Load Balancers with instance targets on the Services'
 * NodePorts: desired model → observed → plan → apply, owned by tags, found by stored ARNs.
 */
export class NlbProvider implements LoadBalancerProvider {
  readonly fingerprint: string;
  /** Epoch ms: dates creates, and tells a resource not visible yet from one that is gone. */
  private readonly now: () => number;

  constructor(
    private readonly clients: NlbClients,
    private readonly settings: ProviderSettings,
    private readonly tenantPolicy?: TenantPolicyEnforcer,
    options: { readonly now?: () => number } = {},
  ) {
    this.now = options.now ?? Date.now;
    this.fingerprint = stableHash({
      model: nlbModelVersion,
      settings: { ...settings, defaultTags: { ...settings.defaultTags } },
      // Absent without a policy, so adding this setting left every checkpoint as it was.
      tenantPolicy: tenantPolicy?.fingerprint,
    });
  }

  getLoadBalancerName(service: Service): string {
    const options = this.optionsOrDefaults(service);
    return (
      options.loadBalancerName ??
      loadBalancerName(this.settings.clusterName, service, schemeOf(options, this.settings))
    );
  }

  async getLoadBalancer(
    service: Service,
    state: ProviderState | undefined,
  ): Promise<{ exists: boolean; status?: LoadBalancerStatus }> {
    const nlbState = readNlbState(state);
    const inventory = await this.inventory(service, nlbState, this.now());
    const exists =
      inventory.loadBalancerArns.length +
        inventory.targetGroupArns.length +
        inventory.securityGroupIds.length +
        inventory.notVisibleYet.length >
      0;
    return {
      exists,
      ...(exists && nlbState.dnsName ? { status: statusOf(nlbState.dnsName) } : {}),
    };
  }

  async ensureLoadBalancer(
    service: Service,
    hosts: readonly Host[],
    state: ProviderState | undefined,
    hooks: EnsureOptions = {},
  ): Promise<EnsureResult> {
    const nlbState = readNlbState(state);
    const now = this.now();
    pruneCreated(nlbState, now);
    const options = parseAnnotations(service);
    const scheme = schemeOf(options, this.settings);
    // Before any AWS call: a Service the tenant policy refuses creates nothing.
    const created = Object.values(recordedResources(nlbState)).some((ids) => ids.length > 0);
    const tenancy = await this.tenantPolicy?.check(service, options, scheme, created);
    const roleTagRequiredBy = tenancy?.subnetRoleTagRequiredBy;
    const ipAddressType = ipAddressTypeOf(options);
    const subnetInputs = JSON.stringify([
      scheme,
      options.subnets ?? null,
      ...(roleTagRequiredBy !== undefined ? ['role tag'] : []),
      // Absent for ipv4, so the subnets stored for existing Services still match.
      ...(ipAddressType === 'dualstack' ? ['dualstack'] : []),
    ]);
    let subnets = nlbState.subnets?.inputs === subnetInputs ? nlbState.subnets.refs : undefined;
    if (subnets === undefined) {
      subnets = await resolveSubnets(
        this.clients.ec2,
        this.settings,
        scheme,
        options.subnets,
        roleTagRequiredBy,
        ipAddressType,
      );
      nlbState.subnets = { inputs: subnetInputs, refs: subnets };
    }
    // The user's groups, as now and as before an annotation change: never taken for ours.
    const userGroups = [...(nlbState.frontendSecurityGroups?.ids ?? [])];
    const frontendSecurityGroupIds = await this.frontendSecurityGroups(
      nlbState,
      options,
      tenancy?.securityGroups,
    );
    userGroups.push(...(frontendSecurityGroupIds ?? []));
    // Pinned before anything is created, so a failed first sync keeps the names it started with.
    nlbState.namingVersion = namingVersionOf(nlbState);
    const desired = withNamingVersion(
      buildDesiredLoadBalancer({
        service,
        hosts,
        settings: this.settings,
        options,
        subnets,
        stickinessFromAffinityApplied: nlbState.stickinessFromAffinity,
        frontendSecurityGroupIds,
      }),
      this.settings.clusterName,
      service,
      nlbState.namingVersion,
    );
    const observed = await observe({
      now,
      clients: this.clients,
      clusterName: this.settings.clusterName,
      service,
      loadBalancerName: desired.name,
      backendSecurityGroupId: this.settings.backendSecurityGroupId,
      userSecurityGroupIds: userGroups,
      state: nlbState,
      readLoadBalancerAttributes: Object.keys(desired.attributes).length > 0,
      readTargetGroupAttributes: desired.targetGroups.some(
        (tg) => Object.keys(tg.attributes).length > 0,
      ),
      readListenerAttributesOf: desired.listeners
        .filter((l) => Object.keys(l.attributes ?? {}).length > 0)
        .map((l) => l.port),
      readListenerCertificatesOf: [
        ...new Set([...sniPorts(desired), ...(nlbState.sniListenerPorts ?? [])]),
      ],
    }).catch((error: unknown) => {
      // Recorded resources AWS does not show yet stay recorded, with when they were created.
      if (error instanceof NotVisibleYetError)
        Object.assign(error, { providerState: toProviderState(nlbState) });
      throw error;
    });
    const plan = planChanges(desired, observed, nlbState.appliedTagKeys ?? []);
    // State follows what was observed: kept resources are recorded, vanished ones forgotten.
    if (observed.loadBalancer !== undefined) {
      nlbState.loadBalancerArn = observed.loadBalancer.arn;
      nlbState.loadBalancerName = observed.loadBalancer.name;
      nlbState.dnsName = observed.loadBalancer.dnsName;
    } else {
      delete nlbState.loadBalancerArn;
      delete nlbState.dnsName;
      delete nlbState.loadBalancerName;
    }
    if (observed.securityGroup !== undefined) nlbState.securityGroupId = observed.securityGroup.id;
    else delete nlbState.securityGroupId;
    nlbState.targetGroups = Object.fromEntries(
      observed.targetGroups.map((tg) => {
        const key = desired.targetGroups.find((d) => d.name === tg.name)?.key ?? `old:${tg.name}`;
        return [key, { arn: tg.arn, name: tg.name, targets: [...(tg.targets ?? [])] }];
      }),
    );
    // Recorded before the change, so a sync that fails half-way still turns it off later.
    const stickyForAffinity = stickinessFromAffinity(service, options);
    if (stickyForAffinity) nlbState.stickinessFromAffinity = true;
    // Before the change too: a listener that had several certificates is read in full until
    // a sync has brought it down to one.
    const sni = sniPorts(desired);
    if (sni.length > 0)
      nlbState.sniListenerPorts = [...new Set([...(nlbState.sniListenerPorts ?? []), ...sni])].sort(
        (a, b) => a - b,
      );
    if (plan.steps.length > 0) await hooks.beforeChanges?.();
    await executePlan({
      clients: this.clients,
      clusterName: this.settings.clusterName,
      service,
      desired,
      plan,
      state: nlbState,
      securityGroupId: observed.securityGroup?.id,
      loadBalancerArn:
        observed.loadBalancer?.scheme === desired.scheme ? observed.loadBalancer.arn : undefined,
      now: this.now,
    });
    nlbState.appliedTagKeys = Object.keys(desired.tags).sort();
    if (!stickyForAffinity) delete nlbState.stickinessFromAffinity;
    if (sni.length > 0) nlbState.sniListenerPorts = sni;
    else delete nlbState.sniListenerPorts;
    // The managed group the user's groups replaced, still held by AWS: come back to delete it.
    const replacedGroupLeft =
      desired.frontendSecurityGroupIds !== undefined && nlbState.securityGroupId !== undefined;
    return {
      status: statusOf(nlbState.dnsName ?? ''),
      state: toProviderState(nlbState),
      ...(replacedGroupLeft
        ? {
            requeueAfterSeconds: stillInUseRetrySeconds,
            requeueReason: 'the replaced managed security group is still in use',
          }
        : {}),
      summary: summaryOf(desired, nlbState),
      instances: uniqueSorted(desired.targetGroups.flatMap((tg) => tg.targets)),
      changes: describeChanges(plan),
    };
  }

  /**
   * Node changes only: registers new instances and deregisters gone ones, from the targets state
   * recorded, in every target group. The only read is one DescribeTags of the recorded groups:
   * state is not proof of ownership, so a group whose tags name another Service or cluster is
   * refused before any write. A group whose targets are not recorded (too many, or an older
   * record) is read with one DescribeTargetHealth; without any recorded group it is a full Ensure.
   */
  async updateLoadBalancer(
    service: Service,
    hosts: readonly Host[],
    state: ProviderState | undefined,
    options: UpdateOptions = {},
  ): Promise<UpdateResult> {
    const nlbState = readNlbState(state);
    const groups = Object.values(nlbState.targetGroups ?? {});
    if (options.readTargets === true) for (const tg of groups) delete tg.targets;
    if (groups.length === 0) {
      const ensured = await this.ensureLoadBalancer(service, hosts, state);
      return { state: ensured.state, instances: ensured.instances, summary: ensured.summary };
    }
    if (hosts.length > limits.targetsPerTargetGroup) {
      throw new TerminalError(
        `${hosts.length} eligible nodes exceed the ${limits.targetsPerTargetGroup} targets a target group can hold`,
      );
    }
    const wanted = uniqueSorted(hosts.map((h) => h.instanceId));
    const wantedIds = new Set(wanted);
    await this.requireOwnedTargetGroups(service, nlbState);
    // Groups too large to record (nlb-state.ts maxRecordedTargets), recorded before targets were,
    // or not to be trusted (readTargets): what is registered comes from AWS, one read per group.
    for (const tg of groups) {
      // A group gone is drift for the full sync (NotFoundError), not a failure to retry as is.
      tg.targets ??= await registeredTargetIds(this.clients.elbv2, tg.arn, (error, action) =>
        isAwsError(error, 'TargetGroupNotFound', 'TargetGroupNotFoundException')
          ? new NotFoundError(`update targets: ${errorMessage(error)}`, { cause: error })
          : translateAwsError(error, action),
      );
    }
    // Removals first (a node that left or may no longer serve matters more than a new one, and
    // the registration budget gives them priority), except where a group would drop to zero
    // targets in between: there the new targets go in first.
    const changes = groups.map((tg) => {
      const current = tg.targets ?? [];
      // Sets: at thousands of nodes a list search per id is millions of comparisons per group.
      const registered = new Set(current);
      const register = wanted.filter((id) => !registered.has(id));
      const deregister = current.filter((id) => !wantedIds.has(id));
      return { tg, register, deregister, keepsTargets: current.length > deregister.length };
    });
    const send = async (
      tg: (typeof groups)[number],
      kind: 'register' | 'deregister',
      ids: readonly string[],
    ) => {
      // In batches, as execute-target-groups.ts registers (a large scale-up in one window would be refused
      // whole), recording each batch as it lands so a failure part-way keeps what was done.
      for (let i = 0; i < ids.length; i += registerBatch) {
        const batch = ids.slice(i, i + registerBatch);
        const input = { TargetGroupArn: tg.arn, Targets: batch.map((Id) => ({ Id })) };
        await this.clients.elbv2.send(
          kind === 'register'
            ? new RegisterTargetsCommand(input)
            : new DeregisterTargetsCommand(input),
        );
        const current = new Set(tg.targets ?? []);
        for (const id of batch) {
          if (kind === 'register') current.add(id);
          else current.delete(id);
        }
        tg.targets = [...current].sort();
      }
    };
    try {
      for (const c of changes) if (c.keepsTargets) await send(c.tg, 'deregister', c.deregister);
      for (const c of changes) await send(c.tg, 'register', c.register);
      for (const c of changes) if (!c.keepsTargets) await send(c.tg, 'deregister', c.deregister);
      for (const c of changes) c.tg.targets = wanted;
    } catch (error) {
      // A target group deleted behind our back: drift, which only a full Ensure repairs. A
      // registration budget booked ahead is not a failure: the key comes back later.
      const translated = isAwsError(error, 'TargetGroupNotFound', 'TargetGroupNotFoundException')
        ? new NotFoundError(`update targets: ${errorMessage(error)}`, { cause: error })
        : error instanceof RequeueAfterError
          ? error
          : translateAwsError(error, 'update targets');
      throw Object.assign(translated, { providerState: toProviderState(nlbState) });
    }
    return { state: toProviderState(nlbState), instances: wanted };
  }

  /**
   * Deletes everything owned for the Service, found by stored ARNs and by ownership tags, in
   * dependency order. Never stops because the NLB is already gone. Groups AWS still holds
   * (ResourceInUse, DependencyViolation) are kept in state and retried after a fixed delay.
   */
  async ensureLoadBalancerDeleted(
    service: Service,
    state: ProviderState | undefined,
  ): Promise<DeleteResult> {
    const nlbState = readNlbState(state);
    const now = this.now();
    const inventory = await this.inventory(service, nlbState, now);
    if (inventory.loadBalancerArns.length > 0 && wantsDeletionProtection(service)) {
      await this.drainKeptTargets(inventory.targetGroupArns, nlbState);
      // Terminal, not retried: only a change to the Service can lift it, and that re-enqueues.
      throw Object.assign(
        new TerminalError(
          `deletion protection: annotation ${attributesAnnotation} sets deletion_protection.enabled=true, so load balancer ${inventory.loadBalancerArns.join(', ')} is kept, with no targets; remove that key or set it to false to let the delete finish`,
        ),
        { providerState: toProviderState(nlbState), keptByDeletionProtection: true },
      );
    }
    const remaining: NlbState = {};
    const kept = new Set<string>();
    const keep = (id: string) => {
      keepRecorded(remaining, nlbState, id);
      kept.add(id);
    };
    // Recorded IDs are kept until a delete is proven: one AWS does not show yet is not gone.
    for (const id of inventory.notVisibleYet) keep(id);
    const deleteOrKeep = async (id: string, send: () => Promise<unknown>) => {
      try {
        await send();
      } catch (error) {
        if (notFoundKind(error) === undefined) throw error;
        if (createdWithinWindow(nlbState, id, now)) keep(id);
      }
    };
    try {
      for (const arn of inventory.loadBalancerArns) {
        await deleteOrKeep(arn, () => this.deleteLoadBalancer(arn));
      }
      for (const arn of inventory.targetGroupArns) {
        try {
          await deleteOrKeep(arn, () =>
            this.clients.elbv2.send(new DeleteTargetGroupCommand({ TargetGroupArn: arn })),
          );
        } catch (error) {
          if (!isAwsError(error, 'ResourceInUse', 'ResourceInUseException')) throw error;
          keep(arn);
        }
      }
      for (const id of inventory.securityGroupIds) {
        try {
          await deleteOrKeep(id, () =>
            this.clients.ec2.send(new DeleteSecurityGroupCommand({ GroupId: id })),
          );
        } catch (error) {
          // The NLB's network interfaces hold the group for minutes after the NLB is deleted.
          if (!isAwsError(error, 'DependencyViolation')) throw error;
          keep(id);
        }
      }
    } catch (error) {
      throw Object.assign(translateAwsError(error, 'delete load balancer resources'), {
        providerState: toProviderState(nlbState),
      });
    }
    const stillThere = kept.size > 0;
    // Kept with what is left, so a Service that wants its LB back keeps the names it had.
    if (stillThere && nlbState.namingVersion !== undefined)
      remaining.namingVersion = nlbState.namingVersion;
    // Remembered past the NLB's deletion, so the pass that finishes a slow delete can name it.
    const deleted =
      inventory.loadBalancerArns.find((arn) => !kept.has(arn)) ?? nlbState.deletedLoadBalancerArn;
    if (stillThere && deleted !== undefined) remaining.deletedLoadBalancerArn = deleted;
    return {
      state: toProviderState(remaining),
      ...(deleted !== undefined ? { loadBalancerId: deleted } : {}),
      ...(stillThere ? { requeueAfterSeconds: stillInUseRetrySeconds } : {}),
    };
  }

  /**
   * A kept NLB's target groups still send to the node ports the Service had. Once it is deleted or
   * no longer a LoadBalancer, Kubernetes frees those ports and may give them to another Service,
   * whose Pods would then get this NLB's traffic: so every target is deregistered before the NLB
   * is kept (issue 32, finding 2). One DescribeTargetHealth per group, and a DeregisterTargets per
   * group that still has targets; a failure is retried as the delete would be.
   */
  private async drainKeptTargets(
    targetGroupArns: readonly string[],
    nlbState: NlbState,
  ): Promise<void> {
    const recorded = Object.values(nlbState.targetGroups ?? {});
    const gone = (error: unknown) =>
      isAwsError(error, 'TargetGroupNotFound', 'TargetGroupNotFoundException');
    try {
      for (const arn of targetGroupArns) {
        // A group already gone has no targets to route anywhere.
        const ids = await registeredTargetIds(
          this.clients.elbv2,
          arn,
          (error) => error as Error,
        ).catch((error: unknown) => {
          if (gone(error)) return [];
          throw error;
        });
        for (let i = 0; i < ids.length; i += registerBatch) {
          const batch = ids.slice(i, i + registerBatch);
          await this.clients.elbv2.send(
            new DeregisterTargetsCommand({
              TargetGroupArn: arn,
              Targets: batch.map((Id) => ({ Id })),
            }),
          );
        }
        for (const tg of recorded) if (tg.arn === arn) tg.targets = [];
      }
    } catch (error) {
      // A registration budget booked ahead is not a failure: the key comes back when it is due.
      const translated =
        error instanceof RequeueAfterError
          ? error
          : translateAwsError(error, 'deregister the kept load balancer targets');
      throw Object.assign(translated, { providerState: toProviderState(nlbState) });
    }
  }

  /**
   * Deletes one NLB. AWS refuses while deletion protection is on (OperationNotPermitted); the
   * Service no longer asks for it here (checked before), so protection an earlier sync set is
   * turned off and the delete tried once more. Costs nothing extra while protection is off.
   */
  private async deleteLoadBalancer(arn: string): Promise<void> {
    const send = () =>
      this.clients.elbv2.send(new DeleteLoadBalancerCommand({ LoadBalancerArn: arn }));
    try {
      await send();
    } catch (error) {
      if (!isAwsError(error, 'OperationNotPermitted', 'OperationNotPermittedException'))
        throw error;
      await this.clients.elbv2.send(
        new ModifyLoadBalancerAttributesCommand({
          LoadBalancerArn: arn,
          Attributes: [{ Key: 'deletion_protection.enabled', Value: 'false' }],
        }),
      );
      await send();
    }
  }

  /**
   * Every Service UID that owns resources of this cluster, with its `namespace/name` tag: what the
   * sweep compares with state and the API to find orphans.
   */
  async ownersInCluster(): Promise<Map<string, string>> {
    const owners = new Map<string, string>();
    for await (const { tags } of this.tagged([], 'list resources by cluster tag')) {
      const uid = tags[ownershipTags.serviceUid];
      if (uid) owners.set(uid, tags[ownershipTags.service] ?? '');
    }
    return owners;
  }

  /**
   * The recorded target groups, checked by their tags before a host update writes to them: one
   * DescribeTags for up to 20 groups. Another owner's group is a terminal error naming it; a group
   * that is gone (or carries no tags at all) is drift, which a full Ensure sorts out.
   */
  private async requireOwnedTargetGroups(service: Service, nlbState: NlbState): Promise<void> {
    const arns = recordedResources(nlbState).targetGroupArns;
    const withState = { providerState: toProviderState(nlbState) };
    let owned;
    try {
      const tags = await describeElbv2Tags(this.clients.elbv2, arns);
      owned = sortByOwnership(arns, tags, this.settings.clusterName, service);
    } catch (error) {
      throw Object.assign(translateAwsError(error, 'read target group tags'), withState);
    }
    if (owned.foreign.length > 0) {
      throw new TerminalError(
        `target group ${owned.foreign.join(', ')} recorded for this Service is not owned by this Service in cluster ${this.settings.clusterName} (ownership tags ${ownershipTags.cluster} and ${ownershipTags.serviceUid} do not match); refusing to change its targets`,
      );
    }
    if (owned.unknown.length > 0) {
      throw Object.assign(
        new NotFoundError(
          `update targets: target group ${owned.unknown.join(', ')} is gone or carries no tags`,
        ),
        withState,
      );
    }
  }

  /**
   * Everything the tagging API finds with this Service's ownership tags, plus the stored ARNs
   * (and those of resources we created, recorded or not yet) whose own tags prove them ours:
   * state alone is never proof (it may have been written by someone else). Recorded resources the
   * tagging API already returned cost nothing more; the others (the tagging API lags behind new
   * resources) one DescribeTags per 20 ARNs and one DescribeSecurityGroups. Of the rest, those we
   * created within the consistency window are not visible yet (`notVisibleYet`, kept); anything
   * else recorded is left alone and forgotten.
   */
  private async inventory(service: Service, nlbState: NlbState, now: number) {
    const found = {
      loadBalancerArns: new Set<string>(),
      targetGroupArns: new Set<string>(),
      securityGroupIds: new Set<string>(),
    };
    const byUid = [{ Key: ownershipTags.serviceUid, Values: [service.metadata?.uid ?? ''] }];
    for await (const { arn } of this.tagged(byUid, 'find resources by tags')) {
      if (arn.includes(':loadbalancer/')) found.loadBalancerArns.add(arn);
      else if (arn.includes(':targetgroup/')) found.targetGroupArns.add(arn);
      else if (arn.includes(':security-group/')) {
        found.securityGroupIds.add(arn.slice(arn.lastIndexOf('/') + 1));
      }
    }
    const recorded = recordedOrCreated(nlbState);
    const uncheckedArns = [...recorded.loadBalancerArns, ...recorded.targetGroupArns].filter(
      (arn) => !found.loadBalancerArns.has(arn) && !found.targetGroupArns.has(arn),
    );
    const uncheckedGroups = recorded.securityGroupIds.filter(
      (id) => !found.securityGroupIds.has(id),
    );
    const unknown: string[] = [];
    try {
      const { clusterName } = this.settings;
      if (uncheckedArns.length > 0) {
        const tags = await describeElbv2Tags(this.clients.elbv2, uncheckedArns);
        const owned = sortByOwnership(uncheckedArns, tags, clusterName, service);
        for (const arn of owned.ours) {
          if (recorded.loadBalancerArns.includes(arn)) found.loadBalancerArns.add(arn);
          else found.targetGroupArns.add(arn);
        }
        unknown.push(...owned.unknown);
      }
      if (uncheckedGroups.length > 0) {
        const tags = await describeSecurityGroupTags(this.clients.ec2, uncheckedGroups);
        const owned = sortByOwnership(uncheckedGroups, tags, clusterName, service);
        for (const id of owned.ours) found.securityGroupIds.add(id);
        unknown.push(...owned.unknown);
      }
    } catch (error) {
      throw translateAwsError(error, 'read tags of recorded resources');
    }
    return {
      loadBalancerArns: [...found.loadBalancerArns],
      targetGroupArns: [...found.targetGroupArns],
      securityGroupIds: [...found.securityGroupIds],
      notVisibleYet: unknown.filter((id) => createdWithinWindow(nlbState, id, now)),
    };
  }

  /** Our NLBs, target groups and security groups carrying the cluster tag (and `filters`), all pages. */
  private tagging:
    | Promise<{
        client: ResourceGroupsTaggingAPIClient;
        GetResourcesCommand: typeof GetResourcesCommandType;
      }>
    | undefined;

  /** The tagging API's client and command, loaded on first use (see NlbClients.tagging). */
  private taggingApi() {
    const given = this.clients.tagging;
    this.tagging ??= Promise.all([
      typeof given === 'function' ? given() : Promise.resolve(given),
      import('@aws-sdk/client-resource-groups-tagging-api'),
    ]).then(([client, m]) => ({ client, GetResourcesCommand: m.GetResourcesCommand }));
    this.tagging.catch(() => (this.tagging = undefined));
    return this.tagging;
  }

  private async *tagged(
    filters: { Key: string; Values: string[] }[],
    action: string,
  ): AsyncGenerator<{ arn: string; tags: Record<string, string> }> {
    let token: string | undefined;
    try {
      do {
        const { client, GetResourcesCommand } = await this.taggingApi();
        const page = await client.send(
          new GetResourcesCommand({
            TagFilters: [
              { Key: ownershipTags.cluster, Values: [this.settings.clusterName] },
              ...filters,
            ],
            ResourceTypeFilters: [
              'elasticloadbalancing:loadbalancer',
              'elasticloadbalancing:targetgroup',
              'ec2:security-group',
            ],
            ...(token ? { PaginationToken: token } : {}),
          }),
        );
        for (const mapping of page.ResourceTagMappingList ?? []) {
          yield {
            arn: mapping.ResourceARN ?? '',
            tags: Object.fromEntries((mapping.Tags ?? []).map((t) => [t.Key ?? '', t.Value ?? ''])),
          };
        }
        token = page.PaginationToken || undefined;
      } while (token !== undefined);
    } catch (error) {
      throw translateAwsError(error, action);
    }
  }

  /**
   * The security-groups annotation as group IDs, resolved and checked (other owners' groups, the
   * tenant policy's restriction) once per annotation value and restriction, kept in state like
   * subnets, so a drift check reads nothing more. The inputs also carry the version of the
   * ownership check, so groups resolved before it existed are looked at once more.
   */
  private async frontendSecurityGroups(
    nlbState: NlbState,
    options: LoadBalancerOptions,
    policy: SecurityGroupPolicy | undefined,
  ): Promise<string[] | undefined> {
    const wanted = options.securityGroups;
    if (wanted === undefined) {
      delete nlbState.frontendSecurityGroups;
      return undefined;
    }
    const restriction = policy === undefined ? null : toJson(policy);
    const inputs = `${wanted.join(',')}#${stableHash([frontendGroupChecks, restriction])}`;
    if (nlbState.frontendSecurityGroups?.inputs === inputs)
      return nlbState.frontendSecurityGroups.ids;
    const ids = await resolveFrontendSecurityGroups(
      this.clients.ec2,
      this.settings.vpcId,
      wanted,
      policy,
    );
    nlbState.frontendSecurityGroups = { inputs, ids };
    return ids;
  }

  /** Annotations for naming only: a bad annotation falls back to defaults here (Ensure reports it). */
  private optionsOrDefaults(service: Service): LoadBalancerOptions {
    try {
      return parseAnnotations(service);
    } catch {
      return parseAnnotations({ metadata: {} });
    }
  }
}

/** What the lifecycle feed says of the NLB after an Ensure. */
function summaryOf(desired: DesiredLoadBalancer, nlbState: NlbState): LoadBalancerSummary {
  const targetGroupArn = (key: string) => nlbState.targetGroups?.[key]?.arn ?? '';
  const listeners = desired.listeners.map((l) => ({
    port: l.port,
    protocol: l.protocol,
    targetGroupId: targetGroupArn(l.targetGroupKey),
  }));
  // Targets are left out: a node change is LoadBalancerHostsUpdated, not a new shape.
  const { targetGroups, ...rest } = desired;
  const shape = stableHash(
    toJson({
      desired: { ...rest, targetGroups: targetGroups.map(({ targets: _, ...tg }) => tg) },
      arn: nlbState.loadBalancerArn ?? '',
      dnsName: nlbState.dnsName ?? '',
      securityGroupId: nlbState.securityGroupId ?? '',
      listeners,
    }),
  );
  return {
    loadBalancerId: nlbState.loadBalancerArn ?? '',
    dnsName: nlbState.dnsName ?? '',
    scheme: desired.scheme,
    listeners,
    ...(nlbState.securityGroupId !== undefined
      ? { securityGroupId: nlbState.securityGroupId }
      : {}),
    shape,
  };
}

/** An instance behind several target groups counts once. */
function uniqueSorted(ids: readonly string[]): string[] {
  return [...new Set(ids)].sort();
}

function toJson(value: unknown): JsonValue {
  return JSON.parse(JSON.stringify(value)) as JsonValue;
}

function statusOf(dnsName: string): LoadBalancerStatus {
  return dnsName === '' ? {} : { ingress: [{ hostname: dnsName }] };
}

/** The recorded resources, and those we created that a failed pass never recorded. */
function recordedOrCreated(nlbState: NlbState) {
  const recorded = recordedResources(nlbState);
  const add = (list: string[], id: string) => {
    if (!list.includes(id)) list.push(id);
  };
  for (const id of Object.keys(nlbState.createdAt ?? {})) {
    const kind = resourceKindOf(id);
    if (kind === 'load balancer') add(recorded.loadBalancerArns, id);
    else if (kind === 'target group') add(recorded.targetGroupArns, id);
    else if (kind === 'security group') add(recorded.securityGroupIds, id);
  }
  return recorded;
}

/** Keeps `id` in the state a delete leaves behind, with its creation time. */
function keepRecorded(remaining: NlbState, from: NlbState, id: string): void {
  const kind = resourceKindOf(id);
  if (kind === 'load balancer') remaining.loadBalancerArn ??= id;
  else if (kind === 'target group')
    remaining.targetGroups = { ...remaining.targetGroups, [id]: { arn: id, name: id } };
  else if (kind === 'security group') remaining.securityGroupId ??= id;
  const at = from.createdAt?.[id];
  if (at !== undefined) remaining.createdAt = { ...remaining.createdAt, [id]: at };
}

/**
 * TLS listeners given more than one certificate. DescribeListeners names a listener's default
 * certificate only; the others need one DescribeListenerCertificates each, so it is read only
 * for these (and for those that had several last time, until they are down to one).
 */
function sniPorts(desired: DesiredLoadBalancer): number[] {
  return desired.listeners
    .filter((l) => l.protocol === 'TLS' && l.certificateArns.length > 1)
    .map((l) => l.port)
    .sort((a, b) => a - b);
}
