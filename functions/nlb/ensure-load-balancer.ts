import { stableHash, type JsonValue } from '../core/hash';
import type { Host } from '../core/hosts';
import type { Service } from '../core/objects';
import type {
  EnsureOptions,
  EnsureResult,
  LoadBalancerSummary,
  ProviderState,
} from '../sync/ports';
import { NotVisibleYetError } from '../aws/aws-errors';
import { describeChanges, executePlan } from './execute';
import { parseAnnotations } from './model/annotations';
import { type LoadBalancerOptions } from './model/annotation-types';
import { buildDesiredLoadBalancer, schemeOf, stickinessFromAffinity } from './model/desired';
import { ipAddressTypeOf } from './model/dualstack';
import { withNamingVersion } from './model/naming';
import { planChanges, type Plan } from './model/plan';
import type { DesiredLoadBalancer, DesiredTargetGroup, Observed, SubnetRef } from './model/types';
import { expectedDescribes, observe } from './observe';
import { budgetSlotsDue, prebookBudgetCalls } from '../aws/registration-budget';
import {
  namingVersionOf,
  pruneCreated,
  readNlbState,
  recordedResources,
  toProviderState,
  type NlbState,
} from './nlb-state';
import { frontendGroupChecks, resolveFrontendSecurityGroups } from './frontend-security-groups';
import type { SecurityGroupPolicy } from './model/security-group-admission';
import {
  statusOf,
  stillInUseRetrySeconds,
  uniqueSorted,
  type ProviderContext,
} from './provider-context';
import { resolveSubnets } from './subnets';

// The provider's Ensure, as aws-load-balancer-controller builds a model, deploys it and reports:
// the inputs resolved (tenant policy, subnets, the user's security groups), the desired model
// built, AWS observed, the observation folded into state, the plan executed, the result.

/** What an Ensure resolves before it builds the desired model. */
interface EnsureInputs {
  readonly options: LoadBalancerOptions;
  readonly subnets: SubnetRef[];
  /** Every group the user has given, now or before: observe never takes these for ours. */
  readonly userGroups: string[];
  readonly frontendSecurityGroupIds: string[] | undefined;
}

export async function ensureLoadBalancer(
  ctx: ProviderContext,
  service: Service,
  hosts: readonly Host[],
  state: ProviderState | undefined,
  hooks: EnsureOptions,
): Promise<EnsureResult> {
  const nlbState = readNlbState(state);
  const now = ctx.now();
  pruneCreated(nlbState, now);
  const creating = nlbState.loadBalancerArn === undefined;
  // The reads' slots on the Describe budget are booked while the inputs are resolved (EC2).
  prebookBudgetCalls(ctx.clients.elbv2, {
    describe: expectedDescribes({
      state: nlbState,
      readTargetGroupAttributes: false,
      readLoadBalancerAttributes: false,
    }),
    ...(creating ? { change: expectedCreateChanges(service) } : {}),
  });
  // A create waits for its changes' booking before it spends a call: a pass that must come back
  // for them has asked EC2 nothing (its subnets, its security group's create), which a restore's
  // crowd of passes would otherwise ask again on every return, throttled on EC2's buckets; and
  // the security groups' creates (EC2's mutating bucket, 5/s) go at the change budget's pace.
  if (creating) await budgetSlotsDue(ctx.clients.elbv2, 'change');
  const inputs = await resolveInputs(ctx, service, nlbState);
  const desired = desiredModel(ctx, service, hosts, nlbState, inputs, hooks.endpointSlices);
  const observed = await observeFor(ctx, now, service, desired, nlbState, inputs.userGroups);
  const plan = planChanges(desired, observed, nlbState.appliedTagKeys ?? []);
  foldObserved(nlbState, desired, observed);
  await applyPlan(ctx, service, inputs.options, desired, observed, plan, nlbState, hooks);
  return resultOf(desired, plan, nlbState);
}

/**
 * The annotations, the tenant policy's decision, the subnets and the user's security groups:
 * everything the desired model needs besides the Service and its hosts. Records the subnets and
 * the user's groups in `nlbState` as it goes, so a pass that fails later keeps them.
 */
async function resolveInputs(
  ctx: ProviderContext,
  service: Service,
  nlbState: NlbState,
): Promise<EnsureInputs> {
  const options = parseAnnotations(service);
  const scheme = schemeOf(options, ctx.settings);
  // Before any AWS call: a Service the tenant policy refuses creates nothing.
  const created = Object.values(recordedResources(nlbState)).some((ids) => ids.length > 0);
  const tenancy = await ctx.tenantPolicy?.check(service, options, scheme, created);
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
      ctx.clients.ec2,
      ctx.settings,
      scheme,
      options.subnets,
      roleTagRequiredBy,
      ipAddressType,
    );
    nlbState.subnets = { inputs: subnetInputs, refs: subnets };
  }
  // The user's groups, as now and as before an annotation change: never taken for ours.
  const userGroups = [...(nlbState.frontendSecurityGroups?.ids ?? [])];
  const frontendSecurityGroupIds = await frontendSecurityGroups(
    ctx,
    nlbState,
    options,
    tenancy?.securityGroups,
  );
  userGroups.push(...(frontendSecurityGroupIds ?? []));
  return { options, subnets, userGroups, frontendSecurityGroupIds };
}

/**
 * The desired NLB, under the naming version the Service's resources were (or will be) made with;
 * pins that version in `nlbState`.
 */
function desiredModel(
  ctx: ProviderContext,
  service: Service,
  hosts: readonly Host[],
  nlbState: NlbState,
  { options, subnets, frontendSecurityGroupIds }: EnsureInputs,
  endpointSlices: EnsureOptions['endpointSlices'],
): DesiredLoadBalancer {
  // Pinned before anything is created, so a failed first sync keeps the names it started with.
  nlbState.namingVersion = namingVersionOf(nlbState);
  return withNamingVersion(
    buildDesiredLoadBalancer({
      service,
      hosts,
      settings: ctx.settings,
      options,
      subnets,
      stickinessFromAffinityApplied: nlbState.stickinessFromAffinity,
      frontendSecurityGroupIds,
      endpointSlices,
    }),
    ctx.settings.clusterName,
    service,
    nlbState.namingVersion,
  );
}

/** What AWS has for the Service, reading only the attributes and certificates `desired` manages. */
async function observeFor(
  ctx: ProviderContext,
  now: number,
  service: Service,
  desired: DesiredLoadBalancer,
  nlbState: NlbState,
  userGroups: string[],
): Promise<Observed> {
  return observe({
    now,
    clients: ctx.clients,
    clusterName: ctx.settings.clusterName,
    service,
    loadBalancerName: desired.name,
    backendSecurityGroupId: ctx.settings.backendSecurityGroupId,
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
}

/** State follows what was observed: kept resources are recorded, vanished ones forgotten. */
function foldObserved(nlbState: NlbState, desired: DesiredLoadBalancer, observed: Observed): void {
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
      const pods = tg.targetType === 'ip' ? { targetType: 'ip' as const } : {};
      return [key, { arn: tg.arn, name: tg.name, ...pods, targets: [...(tg.targets ?? [])] }];
    }),
  );
}

/**
 * Runs the plan (the hook first, when it changes anything), with what must outlive a failure
 * half-way recorded before it and what it settled recorded after.
 */
async function applyPlan(
  ctx: ProviderContext,
  service: Service,
  options: LoadBalancerOptions,
  desired: DesiredLoadBalancer,
  observed: Observed,
  plan: Plan,
  nlbState: NlbState,
  hooks: EnsureOptions,
): Promise<void> {
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
    clients: ctx.clients,
    clusterName: ctx.settings.clusterName,
    service,
    desired,
    plan,
    state: nlbState,
    securityGroupId: observed.securityGroup?.id,
    loadBalancerArn:
      observed.loadBalancer?.scheme === desired.scheme ? observed.loadBalancer.arn : undefined,
    now: ctx.now,
  });
  nlbState.appliedTagKeys = Object.keys(desired.tags).sort();
  if (!stickyForAffinity) delete nlbState.stickinessFromAffinity;
  if (sni.length > 0) nlbState.sniListenerPorts = sni;
  else delete nlbState.sniListenerPorts;
}

/** What the Ensure returns: status, state, the requeue a replaced group asks for, the summary. */
function resultOf(desired: DesiredLoadBalancer, plan: Plan, nlbState: NlbState): EnsureResult {
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
    // Nodes only: pods come and go with every rollout, which the lifecycle feed does not announce.
    instances: uniqueSorted(
      desired.targetGroups.filter((tg) => tg.targetType === 'instance').flatMap((tg) => tg.targets),
    ),
    changes: describeChanges(plan),
  };
}

/**
 * The security-groups annotation as group IDs, resolved and checked (other owners' groups, the
 * tenant policy's restriction) once per annotation value and restriction, kept in state like
 * subnets, so a drift check reads nothing more. The inputs also carry the version of the
 * ownership check, so groups resolved before it existed are looked at once more.
 */
async function frontendSecurityGroups(
  ctx: ProviderContext,
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
    ctx.clients.ec2,
    ctx.settings.vpcId,
    wanted,
    policy,
  );
  nlbState.frontendSecurityGroups = { inputs, ids };
  return ids;
}

/** What the lifecycle feed says of the NLB after an Ensure. */
function summaryOf(desired: DesiredLoadBalancer, nlbState: NlbState): LoadBalancerSummary {
  const targetGroupArn = (key: string) => nlbState.targetGroups?.[key]?.arn ?? '';
  const listeners = desired.listeners.map((l) => ({
    port: l.port,
    protocol: l.protocol,
    targetGroupId: targetGroupArn(l.targetGroupKey),
  }));
  // Targets are left out: a node change is LoadBalancerHostsUpdated, not a new shape. So is the
  // target type `instance`, which the model did not name before ip targets: the shapes already
  // announced stay the same.
  const { targetGroups, ...rest } = desired;
  const shapeOf = ({ targets: _, targetType, ...tg }: DesiredTargetGroup) =>
    targetType === 'instance' ? tg : { ...tg, targetType };
  const shape = stableHash(
    toJson({
      desired: { ...rest, targetGroups: targetGroups.map(shapeOf) },
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

function toJson(value: unknown): JsonValue {
  return JSON.parse(JSON.stringify(value)) as JsonValue;
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

/**
 * The ELBv2 changes a create makes, from the Service alone: the NLB, and a target group and a
 * listener per port. A guess: the plan's own count books whatever more it needs.
 */
export function expectedCreateChanges(service: Service): number {
  return 1 + 2 * (service.spec?.ports?.length ?? 1);
}
