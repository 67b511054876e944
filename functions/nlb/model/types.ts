/** The AWS side of one Service's load balancer, desired and observed, as plain data. */

export type Scheme = 'internal' | 'internet-facing';
export type ListenerProtocol = 'TCP' | 'UDP' | 'TCP_UDP' | 'TLS';
export type TargetGroupProtocol = 'TCP' | 'UDP' | 'TCP_UDP' | 'TLS';
export type HealthCheckProtocol = 'TCP' | 'HTTP' | 'HTTPS';
/** What a target group's targets are: EC2 instances on a NodePort, or pod IPs (target-ids.ts). */
export type TargetType = 'instance' | 'ip';
/** The address families of an NLB's frontend (`dualstack-without-public-ipv4` is for ALBs only). */
export type IpAddressType = 'ipv4' | 'dualstack';

export interface HealthCheck {
  readonly protocol: HealthCheckProtocol;
  /** `traffic-port` or a port number as a string, as ELBv2 takes it. */
  readonly port: string;
  /** HTTP(S) only. */
  readonly path?: string | undefined;
  /** HTTP(S) only: the HTTP codes that count as healthy. */
  readonly successCodes?: string | undefined;
  readonly intervalSeconds: number;
  readonly timeoutSeconds: number;
  readonly healthyThreshold: number;
  readonly unhealthyThreshold: number;
}

export type Tags = Readonly<Record<string, string>>;

export interface SubnetRef {
  readonly subnetId: string;
  readonly availabilityZone: string;
  /** Associated IPv6 CIDRs; absent for subnets resolved without them (an ipv4 NLB's). */
  readonly ipv6CidrBlocks?: readonly string[] | undefined;
}

export interface SubnetMapping {
  readonly subnetId: string;
  readonly allocationId?: string | undefined;
  readonly privateIPv4Address?: string | undefined;
  readonly ipv6Address?: string | undefined;
}

/** One inbound security group rule: a protocol and port (or ICMP type/code) open to one peer. */
export interface IngressRule {
  readonly protocol: 'tcp' | 'udp' | 'icmp' | 'icmpv6';
  /** The port, or for ICMP the type. */
  readonly fromPort: number;
  /** The port, or for ICMP the code. */
  readonly toPort: number;
  /** The peer: an IPv4 CIDR, an IPv6 CIDR or a managed prefix list ID (`pl-…`); see peerKind. */
  readonly cidr: string;
}

export type PeerKind = 'ipv4' | 'ipv6' | 'prefix-list';

export function peerKind(peer: string): PeerKind {
  if (peer.startsWith('pl-')) return 'prefix-list';
  return peer.includes(':') ? 'ipv6' : 'ipv4';
}

export interface DesiredTargetGroup {
  /** Stable identity within the Service: the listener's port, e.g. `80` (one target group per listener). */
  readonly key: string;
  readonly name: string;
  readonly protocol: TargetGroupProtocol;
  readonly targetType: TargetType;
  /**
   * The nodePort the instances receive traffic on. For pod targets, which each carry their own
   * port, only a label AWS requires: the numeric targetPort, or 1 for a named one (as ALBC).
   */
  readonly port: number;
  readonly healthCheck: HealthCheck;
  /** Only the attributes we manage; others are left as they are. */
  readonly attributes: Tags;
  readonly tags: Tags;
  /** EC2 instance IDs, or for pod targets `ip:port` (target-ids.ts). */
  readonly targets: readonly string[];
}

export interface DesiredListener {
  readonly port: number;
  readonly protocol: ListenerProtocol;
  readonly targetGroupKey: string;
  readonly certificateArns: readonly string[];
  readonly sslPolicy?: string | undefined;
  /** TLS listeners only; undefined leaves the listener's policy as it is. */
  readonly alpnPolicy?: string | undefined;
  /** Only the listener attributes we manage; others are left as they are. */
  readonly attributes?: Tags | undefined;
}

export interface DesiredSecurityGroup {
  readonly name: string;
  readonly description: string;
  readonly vpcId: string;
  readonly ingress: readonly IngressRule[];
  readonly tags: Tags;
}

export interface DesiredLoadBalancer {
  readonly name: string;
  /**
   * Set when the name comes from the name annotation: no hash of the Service keeps it apart from
   * other load balancers, so a created NLB is checked to be ours before it is recorded.
   */
  readonly nameFromAnnotation?: boolean;
  readonly scheme: Scheme;
  readonly ipAddressType: IpAddressType;
  readonly subnetMappings: readonly SubnetMapping[];
  readonly securityGroup: DesiredSecurityGroup;
  /**
   * The user's frontend groups (security-groups annotation, resolved to IDs): attached instead of
   * `securityGroup`, which is then neither created nor kept. Never changed by us.
   */
  readonly frontendSecurityGroupIds?: readonly string[] | undefined;
  /** The cluster's shared backend security group, which node security groups allow. */
  readonly backendSecurityGroupId?: string | undefined;
  /** Only the load balancer attributes we manage. */
  readonly attributes: Tags;
  readonly tags: Tags;
  readonly listeners: readonly DesiredListener[];
  readonly targetGroups: readonly DesiredTargetGroup[];
}

export interface ObservedTargetGroup {
  readonly arn: string;
  readonly name: string;
  readonly protocol: TargetGroupProtocol;
  /** Undefined is `instance` (what AWS defaults to, and what older fixtures leave out). */
  readonly targetType?: TargetType | undefined;
  readonly port: number;
  readonly healthCheck: HealthCheck;
  readonly tags: Tags;
  /** Only read when we manage some attributes. */
  readonly attributes?: Tags | undefined;
  /** Registered instance IDs (or `ip:port` of pods); undefined when not read. */
  readonly targets?: readonly string[] | undefined;
}

export interface ObservedListener {
  readonly arn: string;
  readonly port: number;
  readonly protocol: ListenerProtocol;
  readonly targetGroupArn?: string | undefined;
  readonly certificateArns: readonly string[];
  readonly sslPolicy?: string | undefined;
  readonly alpnPolicy?: string | undefined;
  /** Only read for listeners whose attributes we manage. */
  readonly attributes?: Tags | undefined;
}

export interface ObservedSecurityGroup {
  readonly id: string;
  readonly name: string;
  readonly ingress: readonly IngressRule[];
  readonly tags: Tags;
}

export interface ObservedLoadBalancer {
  readonly arn: string;
  readonly name: string;
  readonly dnsName: string;
  readonly scheme: Scheme;
  /** From DescribeLoadBalancers (no extra read); undefined is taken as `ipv4`. */
  readonly ipAddressType?: string | undefined;
  readonly subnetIds: readonly string[];
  /** Elastic IP allocations and private addresses pinned per subnet (fixed at creation). */
  readonly pinnedAddresses: readonly SubnetMapping[];
  readonly securityGroupIds: readonly string[];
  readonly tags: Tags;
  /** Only read when we manage some attributes. */
  readonly attributes?: Tags | undefined;
}

/** Everything found for one Service. */
export interface Observed {
  readonly loadBalancer?: ObservedLoadBalancer | undefined;
  readonly listeners: readonly ObservedListener[];
  readonly targetGroups: readonly ObservedTargetGroup[];
  readonly securityGroup?: ObservedSecurityGroup | undefined;
}
