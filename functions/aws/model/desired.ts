import { joinProblems, quoted } from '../../core/echo';
import { TerminalError } from '../../core/errors';
import type { Host } from '../../core/hosts';
import { loadBalancerPorts, type LoadBalancerPort } from '../../core/lb-ports';
import type { Service } from '../../core/objects';
import type { LoadBalancerOptions } from './annotations';
import { mergeLoadBalancerAttributes } from './load-balancer-attributes';
import { loadBalancerName, resourceTags, securityGroupName, targetGroupName } from './naming';
import { sourceRanges } from './source-ranges';
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
  const ports = collect(problems, () => loadBalancerPorts(service)) ?? [];
  const tlsPorts =
    collect(problems, () => tlsPortNumbers(service, options, ports)) ?? new Set<number>();
  const cidrs = collect(problems, () => sourceRanges(service, options)) ?? [];
  const subnetMappings = collect(problems, () => mappings(input, scheme)) ?? [];
  const loadBalancerAttributes =
    collect(problems, () =>
      mergeLoadBalancerAttributes(
        options.loadBalancerAttributes ?? new Map(),
        options.loadBalancerAttributeAliases ?? new Map(),
      ),
    ) ?? {};
  const targets = [...new Set(input.hosts.map((host) => host.instanceId))].sort();
  if (targets.length > limits.targetsPerTargetGroup) {
    problems.push(
      `${targets.length} eligible nodes exceed the ${limits.targetsPerTargetGroup} targets a target group can hold; exclude nodes with the node.kubernetes.io/exclude-from-external-load-balancers label (alpha.service-controller.kubernetes.io/exclude-balancer with the seed node policy)`,
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
    targetGroups.push({
      key,
      name: targetGroupName(settings.clusterName, service, key, protocol, port.nodePort),
      protocol,
      port: port.nodePort,
      healthCheck: healthCheckFor(service, options, protocol),
      attributes: {
        ...stickinessFor(input, tls || protocol === 'TLS'),
        ...options.targetGroupAttributes,
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
  // Counted before any rule is built: ranges × listeners can run to millions (issue 19).
  const ruleCount = ingressRuleCount(listeners, cidrs.length);
  if (ruleCount > limits.inboundRulesPerSecurityGroup) {
    problems.push(
      `${cidrs.length} source ranges on ${listeners.length} listeners need ${ruleCount} security group rules, more than the ${limits.inboundRulesPerSecurityGroup} a security group allows; use fewer, wider ranges`,
    );
  }
  if (problems.length > 0) throw new TerminalError(joinProblems(problems));
  const ingress = ingressRules(listeners, cidrs);
  return {
    name: loadBalancerName(settings.clusterName, service, scheme),
    scheme,
    subnetMappings,
    securityGroup: {
      name: securityGroupName(settings.clusterName, service),
      description: `Frontend of the NLB for Service ${service.metadata?.namespace ?? ''}/${service.metadata?.name ?? ''}`,
      vpcId: settings.vpcId,
      ingress,
      tags: resourceTags(settings.clusterName, service, 'security-group', extraTags),
    },
    backendSecurityGroupId: settings.backendSecurityGroupId,
    attributes: loadBalancerAttributes,
    tags: resourceTags(settings.clusterName, service, 'load-balancer', extraTags),
    listeners,
    targetGroups,
  };
}

/** The target-group-attributes annotation decides stickiness once it names any stickiness key. */
function annotatesStickiness(options: LoadBalancerOptions): boolean {
  return Object.keys(options.targetGroupAttributes).some((key) => key.startsWith('stickiness.'));
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
): HealthCheck {
  const local =
    service.spec?.externalTrafficPolicy === 'Local' && (service.spec.healthCheckNodePort ?? 0) > 0;
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
    : protocol === 'UDP'
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
  if (problems.length > 0) throw new TerminalError(joinProblems(problems));
  return [...subnets]
    .sort((a, b) => a.availabilityZone.localeCompare(b.availabilityZone))
    .map((subnet, i) => ({
      subnetId: subnet.subnetId,
      ...(eips ? { allocationId: eips[i] } : {}),
      ...(privateIps ? { privateIPv4Address: privateIps[i] } : {}),
    }));
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

/**
 * Client access through the NLB's own security group: each listener port to each source range,
 * plus ICMP "fragmentation needed" so path MTU discovery works through the NLB.
 */
function ingressRules(
  listeners: readonly DesiredListener[],
  cidrs: readonly string[],
): IngressRule[] {
  const rules: IngressRule[] = [];
  for (const cidr of cidrs) {
    for (const listener of listeners) {
      for (const protocol of ruleProtocols(listener)) {
        rules.push({ protocol, fromPort: listener.port, toPort: listener.port, cidr });
      }
    }
    rules.push({ protocol: 'icmp', fromPort: 3, toPort: 4, cidr });
  }
  return rules;
}
