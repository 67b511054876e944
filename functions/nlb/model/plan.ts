import { TerminalError } from '../../core/errors';
import type {
  DesiredListener,
  DesiredLoadBalancer,
  DesiredSecurityGroup,
  DesiredTargetGroup,
  HealthCheck,
  IngressRule,
  IpAddressType,
  Observed,
  SubnetMapping,
  Tags,
} from './types';

/** Which resource a tagging step is about. */
export type ResourceRef =
  | { readonly type: 'load-balancer' }
  | { readonly type: 'security-group' }
  | { readonly type: 'target-group'; readonly key: string };

/**
 * One AWS call (or one create-and-remember) in the order it must run. Target groups are named by
 * their key; the executor knows the ARN of each kept or created one.
 */
export type Step =
  | { readonly kind: 'deleteLoadBalancer'; readonly arn: string; readonly reason: string }
  | { readonly kind: 'createSecurityGroup'; readonly group: DesiredSecurityGroup }
  | { readonly kind: 'authorizeIngress'; readonly rules: readonly IngressRule[] }
  | { readonly kind: 'revokeIngress'; readonly rules: readonly IngressRule[] }
  /** The managed group, once the user's groups replace it on the NLB. */
  | { readonly kind: 'deleteSecurityGroup'; readonly id: string }
  | { readonly kind: 'createTargetGroup'; readonly targetGroup: DesiredTargetGroup }
  /** CreateTargetGroup returns an existing group of the same name and settings: check it is ours. */
  | { readonly kind: 'verifyCreatedTargetGroups' }
  | { readonly kind: 'modifyTargetGroup'; readonly key: string; readonly healthCheck: HealthCheck }
  | {
      readonly kind: 'modifyTargetGroupAttributes';
      readonly key: string;
      readonly attributes: Tags;
    }
  | { readonly kind: 'registerTargets'; readonly key: string; readonly targets: readonly string[] }
  | {
      readonly kind: 'deregisterTargets';
      readonly key: string;
      readonly targets: readonly string[];
    }
  | { readonly kind: 'createLoadBalancer'; readonly loadBalancer: DesiredLoadBalancer }
  | { readonly kind: 'setSubnets'; readonly subnetMappings: readonly SubnetMapping[] }
  | { readonly kind: 'setSecurityGroups'; readonly securityGroupIds: 'desired' }
  | { readonly kind: 'setIpAddressType'; readonly ipAddressType: IpAddressType }
  | { readonly kind: 'modifyLoadBalancerAttributes'; readonly attributes: Tags }
  | { readonly kind: 'createListener'; readonly listener: DesiredListener }
  | { readonly kind: 'modifyListener'; readonly arn: string; readonly listener: DesiredListener }
  | { readonly kind: 'deleteListener'; readonly arn: string; readonly port: number }
  /** `arn` undefined: the listener this plan creates on `port`. */
  | {
      readonly kind: 'modifyListenerAttributes';
      readonly arn: string | undefined;
      readonly port: number;
      readonly attributes: Tags;
    }
  /** Certificates besides the default (SNI), added to or removed from an existing listener. */
  | {
      readonly kind: 'addListenerCertificates' | 'removeListenerCertificates';
      readonly arn: string;
      readonly port: number;
      readonly certificateArns: readonly string[];
    }
  | { readonly kind: 'deleteTargetGroup'; readonly arn: string; readonly name: string }
  | {
      readonly kind: 'tagResource';
      readonly resource: ResourceRef;
      readonly add: Tags;
      readonly remove: readonly string[];
    };

export interface Plan {
  readonly steps: readonly Step[];
  /** Observed target groups kept as they are, by key: their ARNs seed the executor. */
  readonly keptTargetGroups: Readonly<Record<string, string>>;
}

/**
 * The smallest ordered list of calls that turns what AWS has into what the Service needs. Order
 * keeps traffic flowing: new target groups are filled before listeners point at them (make before
 * break), targets are registered before others are deregistered, and what is no longer needed goes
 * last. A scheme change replaces the NLB (AWS cannot change it in place).
 */
export function planChanges(
  desired: DesiredLoadBalancer,
  observed: Observed,
  /** Tag keys applied by earlier syncs (from provider state): the only ones we may remove. */
  previouslyAppliedTagKeys: readonly string[] = [],
): Plan {
  const applied = new Set(previouslyAppliedTagKeys);
  const early: Step[] = [];
  const creates: Step[] = [];
  const groups: Step[] = [];
  const balancer: Step[] = [];
  const listeners: Step[] = [];
  const cleanup: Step[] = [];
  const tagging: Step[] = [];

  let lb = observed.loadBalancer;
  let existingListeners = observed.listeners;
  if (lb !== undefined && lb.scheme !== desired.scheme) {
    early.push({
      kind: 'deleteLoadBalancer',
      arn: lb.arn,
      reason: `scheme changes from ${lb.scheme} to ${desired.scheme}`,
    });
    lb = undefined;
    existingListeners = [];
  }

  // Security group: create it, or bring its rules in line (new rules first, stale ones last).
  const sg = observed.securityGroup;
  const frontend = desired.frontendSecurityGroupIds;
  if (frontend !== undefined) {
    // The user's groups replace ours: detached by SetSecurityGroups first, then deleted.
    if (sg !== undefined) cleanup.push({ kind: 'deleteSecurityGroup', id: sg.id });
  } else if (sg === undefined) {
    early.push({ kind: 'createSecurityGroup', group: desired.securityGroup });
    if (desired.securityGroup.ingress.length > 0) {
      early.push({ kind: 'authorizeIngress', rules: desired.securityGroup.ingress });
    }
  } else {
    const add = difference(desired.securityGroup.ingress, sg.ingress);
    const remove = difference(sg.ingress, desired.securityGroup.ingress);
    if (add.length > 0) early.push({ kind: 'authorizeIngress', rules: add });
    if (remove.length > 0) cleanup.push({ kind: 'revokeIngress', rules: remove });
    pushTagChanges(
      tagging,
      { type: 'security-group' },
      desired.securityGroup.tags,
      sg.tags,
      applied,
    );
  }

  // Target groups: keep those whose name (protocol, port, nodePort) still matches.
  const keptTargetGroups: Record<string, string> = {};
  const deregistrations: Step[] = [];
  const observedByName = new Map(observed.targetGroups.map((tg) => [tg.name, tg]));
  for (const tg of desired.targetGroups) {
    const found = observedByName.get(tg.name);
    if (found === undefined) {
      creates.push({ kind: 'createTargetGroup', targetGroup: tg });
      if (Object.keys(tg.attributes).length > 0) {
        groups.push({
          kind: 'modifyTargetGroupAttributes',
          key: tg.key,
          attributes: tg.attributes,
        });
      }
      if (tg.targets.length > 0)
        groups.push({ kind: 'registerTargets', key: tg.key, targets: tg.targets });
      continue;
    }
    keptTargetGroups[tg.key] = found.arn;
    if (!sameHealthCheck(tg.healthCheck, found.healthCheck)) {
      groups.push({ kind: 'modifyTargetGroup', key: tg.key, healthCheck: tg.healthCheck });
    }
    const attributes = changedEntries(tg.attributes, found.attributes ?? {});
    if (Object.keys(attributes).length > 0) {
      groups.push({ kind: 'modifyTargetGroupAttributes', key: tg.key, attributes });
    }
    const registered = found.targets ?? [];
    // Sets: at thousands of nodes a list search per id is millions of comparisons per group.
    const registeredIds = new Set(registered);
    const wantedIds = new Set(tg.targets);
    const register = tg.targets.filter((id) => !registeredIds.has(id));
    const deregister = registered.filter((id) => !wantedIds.has(id));
    // Pods that stopped serving (terminating ones among them) leave first, so they drain rather
    // than take new connections, unless the group would be left empty in between. Nodes leave
    // last, once the listeners point where they should.
    const podsLeaveFirst = tg.targetType === 'ip' && registered.length > deregister.length;
    if (deregister.length > 0 && podsLeaveFirst)
      groups.push({ kind: 'deregisterTargets', key: tg.key, targets: deregister });
    if (register.length > 0)
      groups.push({ kind: 'registerTargets', key: tg.key, targets: register });
    if (deregister.length > 0 && !podsLeaveFirst)
      deregistrations.push({ kind: 'deregisterTargets', key: tg.key, targets: deregister });
    pushTagChanges(tagging, { type: 'target-group', key: tg.key }, tg.tags, found.tags, applied);
  }

  // Load balancer: create it, or change what AWS lets us change in place.
  if (lb === undefined) {
    balancer.push({ kind: 'createLoadBalancer', loadBalancer: desired });
    if (Object.keys(desired.attributes).length > 0) {
      balancer.push({ kind: 'modifyLoadBalancerAttributes', attributes: desired.attributes });
    }
  } else {
    const pinned = pinnedAddressesChange(desired, lb.pinnedAddresses);
    if (pinned !== undefined) throw new TerminalError(pinned);
    const wantedSubnets = desired.subnetMappings.map((m) => m.subnetId).sort();
    if (wantedSubnets.join() !== [...lb.subnetIds].sort().join()) {
      balancer.push({ kind: 'setSubnets', subnetMappings: desired.subnetMappings });
    }
    // In place, after any subnet change: dualstack needs the new subnets' IPv6 CIDRs.
    if ((lb.ipAddressType ?? 'ipv4') !== desired.ipAddressType) {
      balancer.push({ kind: 'setIpAddressType', ipAddressType: desired.ipAddressType });
    }
    const wantedGroups = [...(frontend ?? [sg?.id ?? '']), desired.backendSecurityGroupId ?? '']
      .filter(Boolean)
      .sort();
    const groupsUnknown = frontend === undefined && sg === undefined;
    if (groupsUnknown || wantedGroups.join() !== [...lb.securityGroupIds].sort().join()) {
      balancer.push({ kind: 'setSecurityGroups', securityGroupIds: 'desired' });
    }
    const attributes = changedEntries(desired.attributes, lb.attributes ?? {});
    if (Object.keys(attributes).length > 0) {
      balancer.push({ kind: 'modifyLoadBalancerAttributes', attributes });
    }
    pushTagChanges(tagging, { type: 'load-balancer' }, desired.tags, lb.tags, applied);
  }

  // Listeners, by port.
  const desiredTargetGroupArn = (key: string) => keptTargetGroups[key];
  for (const listener of desired.listeners) {
    const found = existingListeners.find((l) => l.port === listener.port);
    if (found === undefined) {
      listeners.push({ kind: 'createListener', listener });
      // CreateListener takes no attributes: they follow on the new listener's ARN.
      if (Object.keys(listener.attributes ?? {}).length > 0) {
        listeners.push({
          kind: 'modifyListenerAttributes',
          arn: undefined,
          port: listener.port,
          attributes: listener.attributes ?? {},
        });
      }
      continue;
    }
    const target = desiredTargetGroupArn(listener.targetGroupKey);
    // The first certificate is the default, set with the listener; the others are a set of
    // their own, changed one by one.
    const [wantedDefault, ...wantedOthers] = listener.certificateArns;
    const [foundDefault, ...foundOthers] = found.certificateArns;
    const same =
      found.protocol === listener.protocol &&
      target !== undefined &&
      found.targetGroupArn === target &&
      foundDefault === wantedDefault &&
      (listener.protocol !== 'TLS' || found.sslPolicy === listener.sslPolicy) &&
      // Only a policy the Service sets is reconciled.
      (listener.alpnPolicy === undefined || found.alpnPolicy === listener.alpnPolicy);
    if (!same) listeners.push({ kind: 'modifyListener', arn: found.arn, listener });
    const attributes = changedEntries(listener.attributes ?? {}, found.attributes ?? {});
    if (Object.keys(attributes).length > 0) {
      listeners.push({
        kind: 'modifyListenerAttributes',
        arn: found.arn,
        port: listener.port,
        attributes,
      });
    }
    const add = wantedOthers.filter((c) => !foundOthers.includes(c));
    const remove = foundOthers.filter((c) => !wantedOthers.includes(c) && c !== wantedDefault);
    const certificates = { arn: found.arn, port: listener.port };
    if (add.length > 0) {
      listeners.push({ kind: 'addListenerCertificates', ...certificates, certificateArns: add });
    }
    if (remove.length > 0) {
      listeners.push({
        kind: 'removeListenerCertificates',
        ...certificates,
        certificateArns: remove,
      });
    }
  }
  for (const found of existingListeners) {
    if (!desired.listeners.some((l) => l.port === found.port)) {
      cleanup.unshift({ kind: 'deleteListener', arn: found.arn, port: found.port });
    }
  }
  const desiredNames = new Set(desired.targetGroups.map((tg) => tg.name));
  for (const tg of observed.targetGroups) {
    if (!desiredNames.has(tg.name))
      cleanup.push({ kind: 'deleteTargetGroup', arn: tg.arn, name: tg.name });
  }

  return {
    steps: [
      ...early,
      ...creates,
      ...(creates.length > 0 ? [{ kind: 'verifyCreatedTargetGroups' } as const] : []),
      ...groups,
      ...balancer,
      ...listeners,
      ...orderCleanup(cleanup),
      ...deregistrations,
      ...tagging,
    ],
    keptTargetGroups,
  };
}

/**
 * Elastic IPs and private addresses are fixed when the NLB is created. A change cannot be applied
 * in place, and replacing the NLB would change its DNS name behind the user's back: say so instead.
 * Only the kinds of address the Service pins are compared: AWS reports the addresses it assigned
 * too (an internal NLB's IPv4, a dualstack NLB's IPv6), and those are not a change.
 */
function pinnedAddressesChange(
  desired: DesiredLoadBalancer,
  observed: readonly SubnetMapping[],
): string | undefined {
  const pins = ['allocationId', 'privateIPv4Address', 'ipv6Address'] as const;
  const pinned = desired.subnetMappings.filter((m) => pins.some((field) => m[field]));
  const pinnedFields = pins.filter((field) => pinned.some((m) => m[field]));
  const key = (m: SubnetMapping) =>
    `${m.subnetId}=${pinnedFields.map((field) => m[field] ?? '').join('/')}`;
  const found = observed.filter((m) => pinnedFields.some((field) => m[field]));
  if (pinned.length === 0 || pinned.map(key).sort().join() === found.map(key).sort().join())
    return undefined;
  return 'annotations service.beta.kubernetes.io/aws-load-balancer-eip-allocations, -private-ipv4-addresses and -ipv6-addresses apply only when the load balancer is created; to change the addresses, delete and re-create the Service';
}

/** Listeners go before the target groups they pointed at; rules are revoked last. */
function orderCleanup(steps: Step[]): Step[] {
  const rank: Partial<Record<Step['kind'], number>> = {
    deleteListener: 0,
    deleteTargetGroup: 1,
    revokeIngress: 2,
    deleteSecurityGroup: 3,
  };
  return [...steps].sort((a, b) => (rank[a.kind] ?? 4) - (rank[b.kind] ?? 4));
}

export function ruleKey(rule: IngressRule): string {
  return `${rule.protocol}:${rule.fromPort}-${rule.toPort}:${rule.cidr}`;
}

function difference(a: readonly IngressRule[], b: readonly IngressRule[]): IngressRule[] {
  const present = new Set(b.map(ruleKey));
  return a.filter((rule) => !present.has(ruleKey(rule)));
}

function changedEntries(desired: Tags, observed: Tags): Record<string, string> {
  const changed: Record<string, string> = {};
  for (const [key, value] of Object.entries(desired)) {
    if (observed[key] !== value) changed[key] = value;
  }
  return changed;
}

function pushTagChanges(
  steps: Step[],
  resource: ResourceRef,
  desired: Tags,
  observed: Tags,
  previouslyApplied: ReadonlySet<string>,
): void {
  const add = changedEntries(desired, observed);
  // Only tags we applied before are removed; tags others put on our resources are left alone.
  const remove = Object.keys(observed).filter(
    (key) => !(key in desired) && previouslyApplied.has(key),
  );
  if (Object.keys(add).length > 0 || remove.length > 0) {
    steps.push({ kind: 'tagResource', resource, add, remove });
  }
}

export function sameHealthCheck(a: HealthCheck, b: HealthCheck): boolean {
  return (
    a.protocol === b.protocol &&
    a.port === b.port &&
    (a.protocol === 'TCP' || (a.path === b.path && a.successCodes === b.successCodes)) &&
    a.intervalSeconds === b.intervalSeconds &&
    a.timeoutSeconds === b.timeoutSeconds &&
    a.healthyThreshold === b.healthyThreshold &&
    a.unhealthyThreshold === b.unhealthyThreshold
  );
}
