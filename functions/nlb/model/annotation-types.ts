import type { HealthCheckProtocol, IpAddressType, Scheme, TargetType } from './types';

export const awsPrefix = 'service.beta.kubernetes.io/aws-load-balancer-';

/** The ALPN policies ELBv2 accepts on TLS listeners, spelled as the API spells them. */
export const alpnPolicies = [
  'HTTP1Only',
  'HTTP2Only',
  'HTTP2Optional',
  'HTTP2Preferred',
  'None',
] as const;
export type AlpnPolicy = (typeof alpnPolicies)[number];

/** What the annotations of a Service ask for, parsed and validated. */
export interface LoadBalancerOptions {
  scheme?: Scheme;
  /** The NLB's name from the name annotation, used when it is created. */
  loadBalancerName?: string;
  subnets?: string[];
  healthCheck: {
    protocol?: HealthCheckProtocol;
    port?: string;
    path?: string;
    intervalSeconds?: number;
    timeoutSeconds?: number;
    healthyThreshold?: number;
    unhealthyThreshold?: number;
    successCodes?: string;
  };
  /** From the attributes annotation: the only load balancer attributes reconciled, with the aliases. */
  loadBalancerAttributes?: Map<string, string>;
  /** From the legacy one-attribute annotations, by attribute key. */
  loadBalancerAttributeAliases?: Map<string, { annotation: string; value: string }>;
  /** Without a prototype, so no user key can reach Object.prototype. */
  additionalTags: Record<string, string>;
  /** Without a prototype, so no user key can reach Object.prototype. */
  targetGroupAttributes: Record<string, string>;
  /**
   * From `target-group-attributes.<port>`, by Service port: laid over the common ones on that
   * port's target group. An empty value keeps the common value, as in aws-load-balancer-controller.
   */
  targetGroupAttributesByPort?: ReadonlyMap<number, Readonly<Record<string, string>>>;
  proxyProtocol: boolean;
  /** Service ports whose target groups get proxy protocol v2, all others having it off. */
  proxyProtocolPorts?: number[];
  certificateArns: string[];
  /** Service port numbers or names that get TLS; undefined = every port when a certificate is set. */
  sslPorts?: string[];
  sslPolicy?: string;
  backendProtocol: 'tcp' | 'ssl';
  eipAllocations?: string[];
  privateIPv4Addresses?: string[];
  /** From the nlb-target-type annotation; undefined is `instance`. */
  targetType?: TargetType;
  /** From the ip-address-type annotation; undefined is `ipv4`. */
  ipAddressType?: IpAddressType;
  ipv6Addresses?: string[];
  /** From the legacy annotation; spec.loadBalancerSourceRanges wins when set. */
  sourceRanges?: string[];
  /** The path MTU discovery ICMP rules for each source range; undefined means on. */
  pathMtuDiscovery?: boolean;
  /** ALPN policy of the TLS listeners; undefined leaves AWS's value alone. */
  alpnPolicy?: AlpnPolicy;
  /** Listener attributes by `<PROTOCOL>-<PORT>`; a key absent here is not reconciled. */
  listenerAttributes?: ReadonlyMap<string, Readonly<Record<string, string>>>;
  /** Frontend security groups (IDs or Name tags) attached instead of the managed one. */
  securityGroups?: string[];
  /** Whether the NLB carries the cluster's backend group with the user's frontend groups. */
  manageBackendSecurityGroupRules?: boolean;
  /** Managed prefix lists allowed in on the listener ports of the managed security group. */
  securityGroupPrefixLists?: string[];
}

export type Mutability =
  | 'in place'
  | 'replaces the load balancer'
  | 'replaces target groups (make-before-break)'
  | 'at creation only'
  | 'n/a';

/** One supported annotation: the registry drives validation and the user documentation. */
export interface AnnotationDefinition {
  readonly name: string;
  readonly values: string;
  readonly default: string;
  readonly mutability: Mutability;
  readonly description: string;
  /** Applies the value to the options; returns an error message when the value is invalid. */
  readonly apply: (value: string, options: LoadBalancerOptions, name: string) => string | undefined;
  /** Set when the name ends in a part the user chooses: every annotation under this prefix. */
  readonly namePrefix?: string;
  /**
   * The same annotation in the other controllers, each a short phrase: `same`, `differs: <how>`
   * or `not supported: <why>` (rendered as columns of docs/annotations.md).
   */
  readonly compared: AnnotationComparison;
}

/** How an annotation compares with aws-load-balancer-controller's and cloud-provider-aws's. */
export interface AnnotationComparison {
  readonly albc: string;
  readonly cloudProviderAws: string;
}
