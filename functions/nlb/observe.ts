import {
  DescribeSecurityGroupsCommand,
  type IpPermission,
  type SecurityGroup,
} from '@aws-sdk/client-ec2';
import {
  DescribeListenerAttributesCommand,
  DescribeListenerCertificatesCommand,
  DescribeListenersCommand,
  DescribeLoadBalancerAttributesCommand,
  DescribeLoadBalancersCommand,
  DescribeTargetGroupAttributesCommand,
  DescribeTargetGroupsCommand,
  DescribeTargetHealthCommand,
  type LoadBalancer,
  type TargetGroup,
} from '@aws-sdk/client-elastic-load-balancing-v2';
import { TerminalError } from '../core/errors';
import type { Service } from '../core/objects';
import { isAwsError, notFoundKind, translateAwsError } from '../aws/aws-errors';
import type { NlbClients } from '../aws/clients';
import { ownershipOf, ownershipTags } from './model/naming';
import type {
  HealthCheck,
  HealthCheckProtocol,
  IngressRule,
  ListenerProtocol,
  Observed,
  ObservedListener,
  ObservedLoadBalancer,
  ObservedSecurityGroup,
  ObservedTargetGroup,
  Tags,
  TargetGroupProtocol,
  TargetType,
} from './model/types';
import { registeredTargetId } from './model/target-ids';
import { notVisibleYet, type NlbState } from './nlb-state';
import { describeElbv2Tags, holderOf, tagsOf } from './ownership';
import { expectBudgetCalls } from '../aws/registration-budget';

export interface ObserveRequest {
  readonly clients: NlbClients;
  readonly clusterName: string;
  readonly service: Service;
  /** The name the NLB should have; looked up when state has no ARN. */
  readonly loadBalancerName: string;
  readonly backendSecurityGroupId?: string | undefined;
  /** The user's groups (security-groups annotation, now or before): never taken for ours. */
  readonly userSecurityGroupIds?: readonly string[] | undefined;
  readonly state: NlbState;
  /** The pass's time (epoch ms): a recorded resource created within the window is not gone yet. */
  readonly now: number;
  readonly readLoadBalancerAttributes: boolean;
  readonly readTargetGroupAttributes: boolean;
  /** Ports of the listeners whose attributes we manage: only these are read. */
  readonly readListenerAttributesOf?: readonly number[] | undefined;
  /**
   * Ports of the TLS listeners whose certificates beyond the default are read (one call each);
   * the others' default certificate comes with DescribeListeners.
   */
  readonly readListenerCertificatesOf?: readonly number[] | undefined;
}

/**
 * Reads what AWS has for one Service, starting from the ARNs in state and falling back to the
 * deterministic name, and checks every resource's ownership tags: a resource with our name but
 * another owner is never returned for modification (terminal error instead). A recorded resource
 * AWS does not show is gone, unless we created it within the consistency window: then it is not
 * visible yet (NotVisibleYetError), so the caller neither forgets nor recreates it.
 */
export async function observe(request: ObserveRequest): Promise<Observed> {
  const { state } = request;
  expectBudgetCalls({ describe: expectedDescribes(request) });
  let lb: LoadBalancer | undefined;
  const groups: TargetGroup[] = [];
  const recordedArn = state.loadBalancerArn;
  if (recordedArn !== undefined) {
    // The recorded NLB and its target groups at once; the groups count only if the NLB is there.
    const [found, attached] = await Promise.all([
      describeLoadBalancer(request, { LoadBalancerArns: [recordedArn] }),
      describeTargetGroupsOf(request, recordedArn).then(
        (tgs) => ({ tgs }),
        (error: unknown) => ({ error }),
      ),
    ]);
    lb = found;
    if (lb === undefined) throwIfNotVisibleYet(request, [recordedArn], 'describe load balancers');
    else if ('error' in attached) throw attached.error;
    else groups.push(...attached.tgs);
  }
  if (lb === undefined) {
    lb = await describeLoadBalancer(request, { Names: [request.loadBalancerName] });
    if (lb?.LoadBalancerArn !== undefined) {
      groups.push(...(await describeTargetGroupsOf(request, lb.LoadBalancerArn)));
    }
  }
  const recorded = Object.values(state.targetGroups ?? {}).map((tg) => tg.arn);
  const unattached = recorded.filter((arn) => !groups.some((g) => g.TargetGroupArn === arn));
  groups.push(...(await describeTargetGroupsByArn(request, unattached)));
  const missing = recorded.filter((arn) => !groups.some((g) => g.TargetGroupArn === arn));
  throwIfNotVisibleYet(request, missing, 'describe target groups');

  const tags = await describeTags(request, [
    ...(lb?.LoadBalancerArn ? [lb.LoadBalancerArn] : []),
    ...groups.map((g) => g.TargetGroupArn ?? ''),
  ]);
  // A resource AWS shows without tags (or whose tags it does not find) is ours but not visible
  // to the tagging side yet, if we created it within the window.
  throwIfNotVisibleYet(
    request,
    [lb?.LoadBalancerArn ?? '', ...groups.map((g) => g.TargetGroupArn ?? '')].filter(
      (arn) => arn !== '' && Object.keys(tags.get(arn) ?? {}).length === 0,
    ),
    'describe tags',
  );
  const refuse = (what: string, name: string, arn: string) =>
    new TerminalError(
      `${what} ${name} (${arn}) is not owned by this Service in cluster ${request.clusterName} (ownership tags ${ownershipTags.cluster} and ${ownershipTags.serviceUid} do not match; it belongs to ${holderOf(tags.get(arn) ?? {})}); refusing to modify or delete it`,
    );
  if (
    lb !== undefined &&
    ownershipOf(tags.get(lb.LoadBalancerArn ?? '') ?? {}, request.clusterName, request.service) !==
      'ours'
  ) {
    throw refuse('load balancer', lb.LoadBalancerName ?? '', lb.LoadBalancerArn ?? '');
  }
  for (const group of groups) {
    if (
      ownershipOf(
        tags.get(group.TargetGroupArn ?? '') ?? {},
        request.clusterName,
        request.service,
      ) !== 'ours'
    ) {
      throw refuse('target group', group.TargetGroupName ?? '', group.TargetGroupArn ?? '');
    }
  }

  // What is left to read depends only on what was read so far: the target groups' targets and
  // attributes, the listeners and the load balancer's attributes, and the recorded security
  // group go side by side (one round trip where they took one each).
  const lbArn = lb?.LoadBalancerArn;
  const [observedGroups, listeners, lbAttributes, recordedGroup] = await Promise.all([
    Promise.all(groups.map((group) => observeTargetGroup(request, group, tags))),
    lbArn === undefined ? Promise.resolve([]) : observeListeners(request, lbArn),
    lbArn !== undefined && request.readLoadBalancerAttributes
      ? loadBalancerAttributes(request, lbArn)
      : Promise.resolve(undefined),
    state.securityGroupId !== undefined
      ? describeSecurityGroup(request, state.securityGroupId, 'refuse')
      : Promise.resolve(undefined),
  ]);

  let observedLb: ObservedLoadBalancer | undefined;
  if (lb !== undefined && lbArn !== undefined) {
    observedLb = {
      arn: lbArn,
      name: lb.LoadBalancerName ?? '',
      dnsName: (lb.DNSName ?? '').toLowerCase(),
      scheme: lb.Scheme ?? 'internal',
      ipAddressType: lb.IpAddressType,
      subnetIds: (lb.AvailabilityZones ?? []).map((z) => z.SubnetId ?? ''),
      // A zone may list its IPv4 and IPv6 addresses as separate entries: merged into one.
      pinnedAddresses: (lb.AvailabilityZones ?? []).flatMap((z) => {
        const entries = z.LoadBalancerAddresses ?? [];
        const allocationId = entries.find((a) => a.AllocationId)?.AllocationId;
        const privateIPv4Address = entries.find((a) => a.PrivateIPv4Address)?.PrivateIPv4Address;
        const ipv6Address = entries.find((a) => a.IPv6Address)?.IPv6Address;
        return allocationId || privateIPv4Address || ipv6Address
          ? [{ subnetId: z.SubnetId ?? '', allocationId, privateIPv4Address, ipv6Address }]
          : [];
      }),
      securityGroupIds: lb.SecurityGroups ?? [],
      tags: tags.get(lbArn) ?? {},
      attributes: lbAttributes,
    };
  }

  let securityGroup: ObservedSecurityGroup | undefined = recordedGroup;
  if (state.securityGroupId === undefined) {
    // Not recorded: the managed group is whichever attached group our tags prove ours. Another
    // attached group is the user's (from a security-groups annotation whose sync failed half-way
    // and left state naming only the new groups): not ours to change, and no reason to stop.
    const candidates = (observedLb?.securityGroupIds ?? []).filter(
      (id) => id !== request.backendSecurityGroupId && !request.userSecurityGroupIds?.includes(id),
    );
    for (const id of candidates) {
      securityGroup = await describeSecurityGroup(request, id, 'skip');
      if (securityGroup !== undefined) break;
    }
  }
  return { loadBalancer: observedLb, listeners, targetGroups: observedGroups, securityGroup };
}

async function observeTargetGroup(
  request: ObserveRequest,
  group: TargetGroup,
  tags: ReadonlyMap<string, Tags>,
): Promise<ObservedTargetGroup> {
  const arn = group.TargetGroupArn ?? '';
  const targetType = group.TargetType === 'ip' ? 'ip' : 'instance';
  const [attributes, targets] = await Promise.all([
    request.readTargetGroupAttributes ? targetGroupAttributes(request, arn) : undefined,
    // Always read: the drift check must see targets removed by hand.
    registeredTargets(request, arn, targetType),
  ]);
  return {
    arn,
    name: group.TargetGroupName ?? '',
    protocol: (group.Protocol ?? 'TCP') as TargetGroupProtocol,
    targetType,
    port: group.Port ?? 0,
    healthCheck: healthCheckOf(group),
    tags: tags.get(arn) ?? {},
    attributes,
    targets,
  };
}

async function observeListeners(request: ObserveRequest, arn: string): Promise<ObservedListener[]> {
  const found = await read(request, 'describe listeners', [arn], () =>
    request.clients.elbv2.send(new DescribeListenersCommand({ LoadBalancerArn: arn })),
  );
  return Promise.all(
    (found.Listeners ?? []).map(async (l): Promise<ObservedListener> => {
      const listenerArn = l.ListenerArn ?? '';
      const protocol = (l.Protocol ?? 'TCP') as ListenerProtocol;
      // DescribeListeners names the default certificate only; the others (SNI) need their own
      // call, one per TLS listener, made only where we manage more than one.
      const [certificateArns, attributes] = await Promise.all([
        protocol === 'TLS' && request.readListenerCertificatesOf?.includes(l.Port ?? 0)
          ? listenerCertificates(request, listenerArn)
          : (l.Certificates ?? []).map((c) => c.CertificateArn ?? ''),
        request.readListenerAttributesOf?.includes(l.Port ?? 0)
          ? listenerAttributes(request, listenerArn)
          : undefined,
      ]);
      return {
        arn: listenerArn,
        port: l.Port ?? 0,
        protocol,
        targetGroupArn: l.DefaultActions?.find((a) => a.Type === 'forward')?.TargetGroupArn,
        certificateArns,
        sslPolicy: l.SslPolicy,
        alpnPolicy: l.AlpnPolicy?.[0],
        attributes,
      };
    }),
  );
}

/** A TLS listener's certificates: the default first, then the others, sorted. */
/**
 * About how many ELBv2 Describe* calls observing takes, from what state records: they book their
 * slots on the fleet's Describe budget in one write. A guess that is short books the rest as they
 * go; one that is long leaves a slot or two unused.
 */
export function expectedDescribes(
  request: Pick<
    ObserveRequest,
    | 'state'
    | 'readTargetGroupAttributes'
    | 'readLoadBalancerAttributes'
    | 'readListenerAttributesOf'
    | 'readListenerCertificatesOf'
  >,
): number {
  const { state } = request;
  const groups = Object.keys(state.targetGroups ?? {}).length;
  // A create's lookup by name, and the tags of the target groups it then creates.
  if (state.loadBalancerArn === undefined && groups === 0) return 2;
  // The NLB, its target groups, their tags and listeners; each group's targets and attributes.
  return (
    4 +
    groups * (request.readTargetGroupAttributes ? 2 : 1) +
    (request.readLoadBalancerAttributes ? 1 : 0) +
    (request.readListenerAttributesOf?.length ?? 0) +
    (request.readListenerCertificatesOf?.length ?? 0)
  );
}

async function listenerCertificates(request: ObserveRequest, arn: string): Promise<string[]> {
  let defaultArn: string | undefined;
  const others: string[] = [];
  let marker: string | undefined;
  do {
    const page = await read(request, 'describe listener certificates', [arn], () =>
      request.clients.elbv2.send(
        new DescribeListenerCertificatesCommand({ ListenerArn: arn, Marker: marker }),
      ),
    );
    for (const certificate of page.Certificates ?? []) {
      if (certificate.IsDefault === true) defaultArn = certificate.CertificateArn;
      else if (certificate.CertificateArn) others.push(certificate.CertificateArn);
    }
    marker = page.NextMarker || undefined;
  } while (marker !== undefined);
  // AWS may list the default a second time, as one of the others: it counts once.
  const rest = others.filter((arn) => arn !== defaultArn).sort();
  return [...(defaultArn !== undefined ? [defaultArn] : []), ...new Set(rest)];
}

/** A read naming `named`: its "not found" for one we created within the window is "not visible yet". */
async function read<T>(
  request: ObserveRequest,
  action: string,
  named: readonly string[],
  send: () => Promise<T>,
): Promise<T> {
  try {
    return await send();
  } catch (error) {
    throw failure(request, named, action, error);
  }
}

function failure(
  request: ObserveRequest,
  named: readonly string[],
  action: string,
  error: unknown,
): Error {
  const kind = notFoundKind(error);
  const stale = kind && notVisibleYet(request.state, named, request.now, action, error);
  return stale || translateAwsError(error, action);
}

function throwIfNotVisibleYet(request: ObserveRequest, ids: readonly string[], action: string) {
  const stale = notVisibleYet(request.state, ids, request.now, action);
  if (stale !== undefined) throw stale;
}

async function describeLoadBalancer(
  request: ObserveRequest,
  query: { LoadBalancerArns?: string[]; Names?: string[] },
): Promise<LoadBalancer | undefined> {
  try {
    const found = await request.clients.elbv2.send(new DescribeLoadBalancersCommand(query));
    return found.LoadBalancers?.[0];
  } catch (error) {
    if (isAwsError(error, 'LoadBalancerNotFound', 'LoadBalancerNotFoundException'))
      return undefined;
    throw translateAwsError(error, 'describe load balancers');
  }
}

async function describeTargetGroupsOf(
  request: ObserveRequest,
  loadBalancerArn: string,
): Promise<TargetGroup[]> {
  try {
    const found = await request.clients.elbv2.send(
      new DescribeTargetGroupsCommand({ LoadBalancerArn: loadBalancerArn }),
    );
    return found.TargetGroups ?? [];
  } catch (error) {
    // Some implementations answer "not found" for a load balancer without target groups.
    if (isAwsError(error, 'TargetGroupNotFound', 'TargetGroupNotFoundException')) return [];
    throw failure(request, [loadBalancerArn], 'describe target groups', error);
  }
}

async function describeTargetGroupsByArn(
  request: ObserveRequest,
  arns: readonly string[],
): Promise<TargetGroup[]> {
  if (arns.length === 0) return [];
  try {
    const found = await request.clients.elbv2.send(
      new DescribeTargetGroupsCommand({ TargetGroupArns: [...arns] }),
    );
    return found.TargetGroups ?? [];
  } catch (error) {
    if (!isAwsError(error, 'TargetGroupNotFound', 'TargetGroupNotFoundException')) {
      throw translateAwsError(error, 'describe target groups');
    }
    // One of them is gone: ask one by one, so the others are still found.
    if (arns.length === 1) return [];
    const each = await Promise.all(arns.map((arn) => describeTargetGroupsByArn(request, [arn])));
    return each.flat();
  }
}

function describeTags(
  request: ObserveRequest,
  arns: readonly string[],
): Promise<Map<string, Tags>> {
  return read(request, 'describe tags', arns, () => describeElbv2Tags(request.clients.elbv2, arns));
}

function registeredTargets(
  request: ObserveRequest,
  arn: string,
  targetType: TargetType,
): Promise<string[]> {
  return registeredTargetIds(
    request.clients.elbv2,
    arn,
    (error, action) => failure(request, [arn], action, error),
    targetType,
  );
}

/** The instances (or pods, `ip:port`) registered in a target group, sorted; draining ones left out. */
export async function registeredTargetIds(
  elbv2: ObserveRequest['clients']['elbv2'],
  arn: string,
  onError: (error: unknown, action: string) => Error = translateAwsError,
  targetType: TargetType = 'instance',
): Promise<string[]> {
  let found;
  try {
    found = await elbv2.send(new DescribeTargetHealthCommand({ TargetGroupArn: arn }));
  } catch (error) {
    throw onError(error, 'describe target health');
  }
  // Draining targets are on their way out already.
  return (found.TargetHealthDescriptions ?? [])
    .filter((d) => d.TargetHealth?.State !== 'draining')
    .map((d) => registeredTargetId(d.Target ?? {}, targetType))
    .filter((id) => id !== '')
    .sort();
}

async function targetGroupAttributes(request: ObserveRequest, arn: string): Promise<Tags> {
  const found = await read(request, 'describe target group attributes', [arn], () =>
    request.clients.elbv2.send(new DescribeTargetGroupAttributesCommand({ TargetGroupArn: arn })),
  );
  return Object.fromEntries((found.Attributes ?? []).map((a) => [a.Key ?? '', a.Value ?? '']));
}

async function listenerAttributes(request: ObserveRequest, arn: string): Promise<Tags> {
  const found = await read(request, 'describe listener attributes', [arn], () =>
    request.clients.elbv2.send(new DescribeListenerAttributesCommand({ ListenerArn: arn })),
  );
  return Object.fromEntries((found.Attributes ?? []).map((a) => [a.Key ?? '', a.Value ?? '']));
}

async function loadBalancerAttributes(request: ObserveRequest, arn: string): Promise<Tags> {
  const found = await read(request, 'describe load balancer attributes', [arn], () =>
    request.clients.elbv2.send(new DescribeLoadBalancerAttributesCommand({ LoadBalancerArn: arn })),
  );
  return Object.fromEntries((found.Attributes ?? []).map((a) => [a.Key ?? '', a.Value ?? '']));
}

async function describeSecurityGroup(
  request: ObserveRequest,
  id: string,
  notOurs: 'refuse' | 'skip',
): Promise<ObservedSecurityGroup | undefined> {
  let group: SecurityGroup | undefined;
  try {
    const found = await request.clients.ec2.send(
      new DescribeSecurityGroupsCommand({ GroupIds: [id] }),
    );
    group = found.SecurityGroups?.[0];
  } catch (error) {
    if (!isAwsError(error, 'InvalidGroup.NotFound', 'InvalidGroupId.NotFound'))
      throw translateAwsError(error, 'describe security groups');
  }
  const tags = tagsOf(group?.Tags);
  // Right after its create, AWS may not find the group, or show it before its tags.
  if (group === undefined || Object.keys(tags).length === 0)
    throwIfNotVisibleYet(request, [id], 'describe security groups');
  if (group === undefined) return undefined;
  if (ownershipOf(tags, request.clusterName, request.service) !== 'ours') {
    if (notOurs === 'skip') return undefined;
    throw new TerminalError(
      `security group ${group.GroupName ?? ''} (${id}) is not owned by this Service in cluster ${request.clusterName}; refusing to modify or delete it`,
    );
  }
  return { id, name: group.GroupName ?? '', ingress: rulesOf(group.IpPermissions ?? []), tags };
}

export function rulesOf(permissions: readonly IpPermission[]): IngressRule[] {
  const rules: IngressRule[] = [];
  for (const permission of permissions) {
    // EC2 may report ICMPv6 by its protocol number.
    const protocol = permission.IpProtocol === '58' ? 'icmpv6' : permission.IpProtocol;
    if (protocol !== 'tcp' && protocol !== 'udp' && protocol !== 'icmp' && protocol !== 'icmpv6')
      continue;
    const peers = [
      ...(permission.IpRanges ?? []).map((range) => range.CidrIp ?? ''),
      ...(permission.Ipv6Ranges ?? []).map((range) => range.CidrIpv6 ?? ''),
      ...(permission.PrefixListIds ?? []).map((list) => list.PrefixListId ?? ''),
    ];
    for (const cidr of peers) {
      rules.push({
        protocol,
        fromPort: permission.FromPort ?? 0,
        toPort: permission.ToPort ?? 0,
        cidr,
      });
    }
  }
  return rules;
}

function healthCheckOf(group: TargetGroup): HealthCheck {
  const protocol = (group.HealthCheckProtocol ?? 'TCP') as HealthCheckProtocol;
  return {
    protocol,
    port: group.HealthCheckPort ?? 'traffic-port',
    path: protocol === 'TCP' ? undefined : group.HealthCheckPath,
    successCodes: protocol === 'TCP' ? undefined : group.Matcher?.HttpCode,
    intervalSeconds: group.HealthCheckIntervalSeconds ?? 0,
    timeoutSeconds: group.HealthCheckTimeoutSeconds ?? 0,
    healthyThreshold: group.HealthyThresholdCount ?? 0,
    unhealthyThreshold: group.UnhealthyThresholdCount ?? 0,
  };
}
