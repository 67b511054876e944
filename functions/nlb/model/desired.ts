import { joinProblems, quoted } from '../../core/echo';
import { InvariantError, TerminalError } from '../../core/errors';
import type { Host } from '../../core/hosts';
import type { EndpointSliceView } from '../../core/endpoint-targets';
import { loadBalancerPorts, type LoadBalancerPort } from '../../core/lb-ports';
import type { Service } from '../../core/objects';
import { awsPrefix, type LoadBalancerOptions } from './annotation-types';
import { securityGroupsPerLoadBalancer } from './annotation-values';
import {
  dualstackListenerProblems,
  ipAddressTypeOf,
  ipv6AddressesBySubnet,
  pathMtuRule,
  splitByFamily,
} from './dualstack';
import { mergeLoadBalancerAttributes } from './load-balancer-attributes';
import { loadBalancerName, resourceTags, securityGroupName, targetGroupName } from './naming';
import { sourceRanges } from './source-ranges';
import { servingPodIds } from './pod-targets';
import { awsTagLimits, maxExtraTags, ownTagCount } from './tag-rules';
import type {
  DesiredListener,
  DesiredLoadBalancer,
  DesiredTargetGroup,
  HealthCheck,
  IngressRule,
  Scheme,
  SubnetMapping,
  SubnetRef,
  Tags,
  TargetGroupProtocol,
  TargetType,
} from './types';

/** The deployment-wide settings of the NLB provider. */
export interface ProviderSettings {
  readonly clusterName: string;
  readonly vpcId: string;
  /** Shared security group attached to every NLB; node security groups allow it on the NodePort range. */
  readonly backendSecurityGroupId?: string | undefined;
  readonly defaultScheme: Scheme;
  readonly defaultSslPolicy: string;
  readonly defaultTags: Tags;
}

export interface DesiredInput {
  readonly service: Service;
  readonly hosts: readonly Host[];
  readonly settings: ProviderSettings;
  readonly options: LoadBalancerOptions;
  readonly subnets: readonly SubnetRef[];
  /** Whether the last sync turned stickiness on for spec.sessionAffinity (provider state). */
  readonly stickinessFromAffinityApplied?: boolean | undefined;
  /** The security-groups annotation resolved to IDs by the caller (one EC2 read). */
  readonly frontendSecurityGroupIds?: readonly string[] | undefined;
  /** The Service's EndpointSlices: the targets of `nlb-target-type: ip` (unused otherwise). */
  readonly endpointSlices?: readonly EndpointSliceView[] | undefined;
}

/** AWS quotas the model must respect (not adjustable, or adjustable only on request). */
export const limits = {
  targetsPerTargetGroup: 1000,
  inboundRulesPerSecurityGroup: 60,
} as const;

/** kube-proxy's health endpoint: the only thing answering on a node for a UDP-only port. */
const kubeProxyHealthPort = '10256';

export function schemeOf(options: LoadBalancerOptions, settings: ProviderSettings): Scheme {
  return options.scheme ?? settings.defaultScheme;
}

/**
 * The NLB a Service should have: pure, from already-resolved inputs (subnets are looked up by the
 * caller), so it can be tested as a table. Throws a TerminalError naming every problem.
 */
export function buildDesiredLoadBalancer(input: DesiredInput): DesiredLoadBalancer {
  const { service, settings, options } = input;
  const problems: string[] = [];
  const scheme = schemeOf(options, settings);
  const targetType = options.targetType ?? 'instance';
  const ports =
    collect(problems, () => loadBalancerPorts(service, targetType === 'ip' ? 'pods' : 'nodes')) ??
    [];
  const tlsPorts =
    collect(problems, () => tlsPortNumbers(service, options, ports)) ?? new Set<number>();
  const cidrs = clientPeers(input, collect(problems, () => sourceRanges(service, options)) ?? []);
  const prefixLists = options.securityGroups ? [] : (options.securityGroupPrefixLists ?? []);
  const groups = collect(problems, () => securityGroupChoice(input));
  const subnetMappings = collect(problems, () => mappings(input, scheme)) ?? [];
  const loadBalancerAttributes =
    collect(problems, () =>
      mergeLoadBalancerAttributes(
        options.loadBalancerAttributes ?? new Map(),
        options.loadBalancerAttributeAliases ?? new Map(),
      ),
    ) ?? {};
  const instances = [...new Set(input.hosts.map((host) => host.instanceId))].sort();
  if (targetType === 'instance' && instances.length > limits.targetsPerTargetGroup) {
    problems.push(
      `${instances.length} eligible nodes exceed the ${limits.targetsPerTargetGroup} targets a target group can hold; exclude nodes with the node.kubernetes.io/exclude-from-external-load-balancers label (alpha.service-controller.kubernetes.io/exclude-balancer with the seed node policy)`,
    );
  }
  const extraTags = { ...settings.defaultTags, ...options.additionalTags };
  const tagCount = Object.keys(extraTags).length;
  if (tagCount > maxExtraTags) {
    problems.push(
      `the deployment's ${Object.keys(settings.defaultTags).length} default tags and the ${Object.keys(options.additionalTags).length} of annotation service.beta.kubernetes.io/aws-load-balancer-additional-resource-tags make ${tagCount} tags, over the ${maxExtraTags} that fit beside the controller's ${ownTagCount} (AWS allows ${awsTagLimits.tagsPerResource} per resource)`,
    );
  }
  const targetGroups: DesiredTargetGroup[] = [];
  const listeners: DesiredListener[] = [];
  for (const port of ports) {
    const tls = tlsPorts.has(port.port);
    const key = String(port.port);
    const protocol: TargetGroupProtocol = tls
      ? options.backendProtocol === 'ssl'
        ? 'TLS'
        : 'TCP'
      : port.protocol;
    const targets = targetType === 'ip' ? podTargets(input, port, problems) : instances;
    const tgPort =
      targetType === 'instance'
        ? port.nodePort
        : typeof port.targetPort === 'number'
          ? port.targetPort
          : 1;
    targetGroups.push({
      key,
      name: targetGroupName(
        settings.clusterName,
        service,
        key,
        protocol,
        tgPort,
        undefined,
        targetType,
      ),
      protocol,
      targetType,
      port: tgPort,
      healthCheck: healthCheckFor(service, options, protocol, targetType),
      attributes: {
        ...stickinessFor(input, tls || protocol === 'TLS'),
        ...options.targetGroupAttributes,
        ...nonEmpty(options.targetGroupAttributesByPort?.get(port.port)),
        ...(options.proxyProtocolPorts !== undefined
          ? { 'proxy_protocol_v2.enabled': String(options.proxyProtocolPorts.includes(port.port)) }
          : {}),
        ...(options.proxyProtocol ? { 'proxy_protocol_v2.enabled': 'true' } : {}),
      },
      tags: resourceTags(settings.clusterName, service, `target-group:${key}`, extraTags),
      targets,
    });
    const listenerProtocol = tls ? 'TLS' : port.protocol;
    const listenerAttributes = options.listenerAttributes?.get(`${listenerProtocol}-${port.port}`);
    listeners.push({
      port: port.port,
      protocol: listenerProtocol,
      targetGroupKey: key,
      certificateArns: tls ? options.certificateArns : [],
      sslPolicy: tls ? (options.sslPolicy ?? settings.defaultSslPolicy) : undefined,
      alpnPolicy: tls ? options.alpnPolicy : undefined,
      ...(listenerAttributes !== undefined ? { attributes: { ...listenerAttributes } } : {}),
    });
  }
  problems.push(...unknownListenerProblems(options, listeners));
  problems.push(...unknownTargetGroupPortProblems(options, ports));
  problems.push(...dualstackListenerProblems(ipAddressTypeOf(options), listeners));
  // Counted before any rule is built: ranges × listeners can run to millions (issue 19).
  // AWS counts IPv4 and IPv6 rules apart, each against the quota.
  const families = splitByFamily(cidrs);
  for (const [family, ranges] of Object.entries(families)) {
    const lists = family === 'ipv4' ? prefixLists.length : 0;
    const ruleCount =
      ingressRuleCount(listeners, ranges.length) + prefixListRuleCount(listeners, lists);
    if (ruleCount > limits.inboundRulesPerSecurityGroup) {
      const named = families.ipv6.length === 0 ? '' : family === 'ipv6' ? 'IPv6 ' : 'IPv4 ';
      const listed = lists > 0 ? ` and ${lists} prefix lists` : '';
      problems.push(
        `${ranges.length} ${named}source ranges${listed} on ${listeners.length} listeners need ${ruleCount} security group rules, more than the ${limits.inboundRulesPerSecurityGroup} a security group allows; use fewer, wider ranges`,
      );
    }
  }
  if (problems.length > 0) throw new TerminalError(joinProblems(problems));
  const pathMtu = options.pathMtuDiscovery !== false;
  const ingress = [
    ...ingressRules(listeners, cidrs, pathMtu),
    ...prefixListRules(listeners, prefixLists),
  ];
  return {
    name: options.loadBalancerName ?? loadBalancerName(settings.clusterName, service, scheme),
    ...(options.loadBalancerName !== undefined ? { nameFromAnnotation: true } : {}),
    scheme,
    ipAddressType: ipAddressTypeOf(options),
    subnetMappings,
    securityGroup: {
      name: securityGroupName(settings.clusterName, service),
      description: `Frontend of the NLB for Service ${service.metadata?.namespace ?? ''}/${service.metadata?.name ?? ''}`,
      vpcId: settings.vpcId,
      ingress,
      tags: resourceTags(settings.clusterName, service, 'security-group', extraTags),
    },
    ...(groups?.frontend !== undefined ? { frontendSecurityGroupIds: groups.frontend } : {}),
    backendSecurityGroupId: groups?.backend,
    attributes: loadBalancerAttributes,
    tags: resourceTags(settings.clusterName, service, 'load-balancer', extraTags),
    listeners,
    targetGroups,
  };
}

/** The pods behind one listener (pod-targets.ts); more than a target group holds is a problem. */
function podTargets(input: DesiredInput, port: LoadBalancerPort, problems: string[]): string[] {
  const slices = input.endpointSlices;
  if (slices === undefined)
    throw new InvariantError('a Service with ip targets reached the model without its slices');
  const pods = servingPodIds(input.service, port.port, port.protocol, slices);
  if (pods.length > limits.targetsPerTargetGroup)
    problems.push(tooManyPods(port.port, pods.length));
  return pods;
}

/** Why a listener's pods cannot all be targets. */
export function tooManyPods(port: number, count: number): string {
  return `port ${port} has ${count} ready endpoints, more than the ${limits.targetsPerTargetGroup} targets a target group can hold; use instance targets or split the Service`;
}

/**
 * Who the managed group lets in. With the user's groups, nobody: they replace it (and source
 * ranges and prefix lists are ignored, as in ALBC). Prefix lists without any source range leave
 * out the everyone-default, as in ALBC.
 */
function clientPeers(input: DesiredInput, cidrs: string[]): string[] {
  const { service, options } = input;
  if (options.securityGroups !== undefined) return [];
  const rangesGiven =
    (service.spec?.loadBalancerSourceRanges?.length ?? 0) > 0 ||
    (options.sourceRanges?.length ?? 0) > 0;
  return (options.securityGroupPrefixLists?.length ?? 0) > 0 && !rangesGiven ? [] : cidrs;
}

/**
 * The NLB's security groups besides the managed one, as ALBC chooses them: the managed group
 * always comes with the cluster's backend group; the user's groups come with it only when
 * manage-backend-security-group-rules is true (ALBC's default there is false).
 */
function securityGroupChoice(input: DesiredInput): {
  frontend?: readonly string[];
  backend?: string | undefined;
} {
  const { options, settings } = input;
  if (options.securityGroups === undefined) return { backend: settings.backendSecurityGroupId };
  const frontend = input.frontendSecurityGroupIds;
  if (frontend === undefined)
    throw new InvariantError('the security-groups annotation reached the model unresolved');
  const manage = options.manageBackendSecurityGroupRules === true;
  const backend = manage ? settings.backendSecurityGroupId : undefined;
  if (manage && backend === undefined) {
    throw new TerminalError(
      `annotation ${awsPrefix}manage-backend-security-group-rules: "true" needs the cluster's backend security group, and this deployment has none configured; set it to "false" and let the node security groups allow your groups`,
    );
  }
  const ids = [...new Set(frontend)].sort();
  const total = new Set([...ids, ...(backend !== undefined ? [backend] : [])]).size;
  if (total > securityGroupsPerLoadBalancer) {
    throw new TerminalError(
      `annotation ${awsPrefix}security-groups: ${ids.length} groups and the cluster's backend group make ${total}, and an NLB takes at most ${securityGroupsPerLoadBalancer}; name fewer groups or set ${awsPrefix}manage-backend-security-group-rules to "false"`,
    );
  }
  return { frontend: ids, backend };
}

/** The target-group-attributes annotation decides stickiness once it names any stickiness key. */
function annotatesStickiness(options: LoadBalancerOptions): boolean {
  return [
    options.targetGroupAttributes,
    ...(options.targetGroupAttributesByPort?.values() ?? []),
  ].some((attributes) => Object.keys(attributes).some((key) => key.startsWith('stickiness.')));
}

/** The attributes with a value: an empty one in a per-port annotation keeps the common value. */
function nonEmpty(
  attributes: Readonly<Record<string, string>> | undefined,
): Record<string, string> {
  return Object.fromEntries(Object.entries(attributes ?? {}).filter(([, value]) => value !== ''));
}

/** `target-group-attributes.<port>` naming a port the Service does not have: a typo to report. */
function unknownTargetGroupPortProblems(
  options: LoadBalancerOptions,
  ports: readonly { readonly port: number }[],
): string[] {
  const known = ports.map((p) => p.port);
  return [...(options.targetGroupAttributesByPort?.keys() ?? [])]
    .filter((port) => !known.includes(port))
    .map(
      (port) =>
        `annotation service.beta.kubernetes.io/aws-load-balancer-target-group-attributes.${port}: the Service has no port ${port} (its ports: ${known.join(', ') || 'none'})`,
    );
}

/** Whether spec.sessionAffinity asks for stickiness that the annotation leaves to us. */
export function stickinessFromAffinity(service: Service, options: LoadBalancerOptions): boolean {
  return service.spec?.sessionAffinity === 'ClientIP' && !annotatesStickiness(options);
}

/**
 * spec.sessionAffinity ClientIP as NLB source-IP stickiness, as kube-proxy keeps a client on one
 * endpoint. AWS refuses stickiness with TLS listeners, so those ports go without. Once applied,
 * going back to None must turn it off again: the key is reconciled only while we own it.
 */
function stickinessFor(input: DesiredInput, tls: boolean): Record<string, string> {
  if (stickinessFromAffinity(input.service, input.options)) {
    return tls ? {} : { 'stickiness.enabled': 'true', 'stickiness.type': 'source_ip' };
  }
  return input.stickinessFromAffinityApplied === true && !annotatesStickiness(input.options)
    ? { 'stickiness.enabled': 'false' }
    : {};
}

/** Listener attributes are keyed by protocol and port: one the Service lacks would be lost. */
function unknownListenerProblems(
  options: LoadBalancerOptions,
  listeners: readonly DesiredListener[],
): string[] {
  const names = listeners.map((l) => `${l.protocol}-${l.port}`);
  return [...(options.listenerAttributes?.keys() ?? [])]
    .filter((name) => !names.includes(name))
    .map((name) => {
      const [protocol, port] = name.split(/-(?=\d+$)/);
      return `annotation service.beta.kubernetes.io/aws-load-balancer-listener-attributes.${name}: the Service has no ${protocol ?? ''} listener on port ${port ?? ''} (its listeners: ${names.join(', ') || 'none'})`;
    });
}

function collect<T>(problems: string[], build: () => T): T | undefined {
  try {
    return build();
  } catch (error) {
    if (!(error instanceof TerminalError)) throw error;
    problems.push(error.message);
    return undefined;
  }
}

function tlsPortNumbers(
  service: Service,
  options: LoadBalancerOptions,
  ports: readonly LoadBalancerPort[],
): Set<number> {
  const sslPortsName = 'annotation service.beta.kubernetes.io/aws-load-balancer-ssl-ports';
  if (options.certificateArns.length === 0) {
    if (options.sslPorts !== undefined) {
      throw new TerminalError(
        `${sslPortsName} needs a certificate in service.beta.kubernetes.io/aws-load-balancer-ssl-cert`,
      );
    }
    return new Set();
  }
  const selected = new Set<number>();
  const problems: string[] = [];
  const servicePorts = service.spec?.ports ?? [];
  for (const wanted of options.sslPorts ?? ports.map((p) => String(p.port))) {
    const match = servicePorts.find((p) => String(p.port) === wanted || p.name === wanted);
    if (match === undefined)
      problems.push(`${sslPortsName}: ${quoted(wanted)} is not a port of this Service`);
    else selected.add(match.port);
  }
  for (const port of ports) {
    if (selected.has(port.port) && port.protocol !== 'TCP') {
      problems.push(`port ${port.port} is ${port.protocol}: TLS listeners need TCP ports`);
    }
  }
  if (problems.length > 0) throw new TerminalError(joinProblems(problems));
  return selected;
}

function healthCheckFor(
  service: Service,
  options: LoadBalancerOptions,
  protocol: TargetGroupProtocol,
  targetType: TargetType,
): HealthCheck {
  // Pods are checked on their own port, as ALBC does: there is no kube-proxy in the way, and the
  // node's health of a Local Service says nothing of a pod.
  const nodes = targetType === 'instance';
  const local =
    nodes &&
    service.spec?.externalTrafficPolicy === 'Local' &&
    (service.spec.healthCheckNodePort ?? 0) > 0;
  const base: HealthCheck = local
    ? {
        protocol: 'HTTP',
        port: String(service.spec?.healthCheckNodePort),
        path: '/healthz',
        intervalSeconds: 10,
        timeoutSeconds: 6,
        healthyThreshold: 2,
        unhealthyThreshold: 2,
      }
    : protocol === 'UDP' && nodes
      ? {
          protocol: 'HTTP',
          port: kubeProxyHealthPort,
          path: '/healthz',
          intervalSeconds: 10,
          timeoutSeconds: 6,
          healthyThreshold: 2,
          unhealthyThreshold: 2,
        }
      : {
          protocol: 'TCP',
          port: 'traffic-port',
          intervalSeconds: 10,
          timeoutSeconds: 10,
          healthyThreshold: 3,
          unhealthyThreshold: 3,
        };
  const custom = options.healthCheck;
  const checkProtocol = custom.protocol ?? base.protocol;
  const http = checkProtocol !== 'TCP';
  return {
    protocol: checkProtocol,
    port: custom.port ?? base.port,
    path: http ? (custom.path ?? base.path ?? '/') : undefined,
    successCodes: http ? (custom.successCodes ?? '200-399') : undefined,
    intervalSeconds: custom.intervalSeconds ?? base.intervalSeconds,
    timeoutSeconds:
      custom.timeoutSeconds ??
      (custom.protocol === undefined ? base.timeoutSeconds : http ? 6 : 10),
    healthyThreshold: custom.healthyThreshold ?? base.healthyThreshold,
    unhealthyThreshold: custom.unhealthyThreshold ?? base.unhealthyThreshold,
  };
}

function mappings(input: DesiredInput, scheme: Scheme): SubnetMapping[] {
  const { options, subnets } = input;
  const eips = options.eipAllocations;
  const privateIps = options.privateIPv4Addresses;
  const problems: string[] = [];
  const prefix = 'annotation service.beta.kubernetes.io/aws-load-balancer-';
  if (eips !== undefined && scheme !== 'internet-facing') {
    problems.push(`${prefix}eip-allocations needs an internet-facing load balancer`);
  }
  if (privateIps !== undefined && scheme !== 'internal') {
    problems.push(`${prefix}private-ipv4-addresses needs an internal load balancer`);
  }
  for (const [name, values] of [
    ['eip-allocations', eips],
    ['private-ipv4-addresses', privateIps],
  ] as const) {
    if (values !== undefined && values.length !== subnets.length) {
      problems.push(
        `${prefix}${name} lists ${values.length} values for ${subnets.length} subnets; give one per subnet`,
      );
    }
  }
  const ipv6 = collect(problems, () => ipv6AddressesBySubnet(options, subnets));
  if (problems.length > 0) throw new TerminalError(joinProblems(problems));
  return [...subnets]
    .sort((a, b) => a.availabilityZone.localeCompare(b.availabilityZone))
    .map((subnet, i) => {
      const ipv6Address = ipv6?.get(subnet.subnetId);
      return {
        subnetId: subnet.subnetId,
        ...(eips ? { allocationId: eips[i] } : {}),
        ...(privateIps ? { privateIPv4Address: privateIps[i] } : {}),
        ...(ipv6Address !== undefined ? { ipv6Address } : {}),
      };
    });
}

/** The security group protocols a listener needs: TCP_UDP takes two rules per range. */
function ruleProtocols(listener: DesiredListener): ('tcp' | 'udp')[] {
  return listener.protocol === 'UDP'
    ? ['udp']
    : listener.protocol === 'TCP_UDP'
      ? ['tcp', 'udp']
      : ['tcp'];
}

/** How many rules `ingressRules` would make, from the counts alone. */
export function ingressRuleCount(listeners: readonly DesiredListener[], cidrCount: number): number {
  const perRange = listeners.reduce((sum, listener) => sum + ruleProtocols(listener).length, 1);
  return cidrCount * perRange;
}

/** How many rules `prefixListRules` would make: AWS weighs each by its maximum entries. */
function prefixListRuleCount(listeners: readonly DesiredListener[], count: number): number {
  return count * listeners.reduce((sum, listener) => sum + ruleProtocols(listener).length, 0);
}

/** Each prefix list on each listener port; no ICMP rule, as in ALBC, to spare the rule quota. */
function prefixListRules(
  listeners: readonly DesiredListener[],
  prefixLists: readonly string[],
): IngressRule[] {
  return prefixLists.flatMap((cidr) =>
    listeners.flatMap((listener) =>
      ruleProtocols(listener).map((protocol): IngressRule => ({
        protocol,
        fromPort: listener.port,
        toPort: listener.port,
        cidr,
      })),
    ),
  );
}

/**
 * Client access through the NLB's own security group: each listener port to each source range,
 * plus the ICMP (or ICMPv6) rule path MTU discovery needs through the NLB.
 */
function ingressRules(
  listeners: readonly DesiredListener[],
  cidrs: readonly string[],
  pathMtu: boolean,
): IngressRule[] {
  const rules: IngressRule[] = [];
  for (const cidr of cidrs) {
    for (const listener of listeners) {
      for (const protocol of ruleProtocols(listener)) {
        rules.push({ protocol, fromPort: listener.port, toPort: listener.port, cidr });
      }
    }
    if (pathMtu) rules.push(pathMtuRule(cidr));
  }
  return rules;
}
