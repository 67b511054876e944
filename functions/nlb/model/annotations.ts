import { clipped, joinProblems, quoted } from '../../core/echo';
import { TerminalError } from '../../core/errors';
import type { Service } from '../../core/objects';
import { annotationSizeProblems } from '../../core/service-limits';
import { parseNodeLabelSelector, targetNodeLabelsAnnotation } from '../../core/target-node-labels';
import { attributeAliases, loadBalancerAttributeRules } from './load-balancer-attributes';
import { isValidElbName } from './naming';
import { tagProblems } from './tag-rules';
import { parseIPv6 } from './ipv6';
import type { HealthCheckProtocol, IpAddressType, Scheme } from './types';

export const awsPrefix = 'service.beta.kubernetes.io/aws-load-balancer-';
const legacySourceRanges = 'service.beta.kubernetes.io/load-balancer-source-ranges';

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

const awsName = (suffix: string) => `${awsPrefix}${suffix}`;

/** An NLB takes at most this many security groups (the backend group counts too). */
export const securityGroupsPerLoadBalancer = 5;

function list(value: string): string[] {
  return value
    .split(',')
    .map((item) => item.trim())
    .filter((item) => item !== '');
}

function integerIn(value: string, min: number, max: number): number | undefined {
  if (!/^\d+$/.test(value.trim())) return undefined;
  const n = Number(value.trim());
  return n >= min && n <= max ? n : undefined;
}

/**
 * `key=value,…` into a Map: user keys never become properties of a plain object, where
 * `__proto__` would vanish and `hasOwnProperty` would find Object.prototype's (issue 19).
 */
function keyValues(value: string): Map<string, string> | string {
  const result = new Map<string, string>();
  for (const pair of list(value)) {
    const index = pair.indexOf('=');
    if (index <= 0) return `${quoted(pair)} is not key=value`;
    result.set(pair.slice(0, index).trim(), pair.slice(index + 1).trim());
  }
  return result;
}

/** A record without a prototype, for options read with plain property lookups downstream. */
function bareRecord(entries: Iterable<readonly [string, string]> = []): Record<string, string> {
  const record = Object.create(null) as Record<string, string>;
  for (const [key, value] of entries) record[key] = value;
  return record;
}

const booleanValue = (value: string): boolean | undefined =>
  value === 'true' ? true : value === 'false' ? false : undefined;

/**
 * Target group attributes users may set, with their value rules: a subset of the keys the ELBv2
 * API reference lists for Network Load Balancer target groups (TargetGroupAttribute). A Map, so
 * a key such as `constructor` or `hasOwnProperty` is simply not found.
 */
/** The ALPN policies ELBv2 accepts on TLS listeners, spelled as the API spells them. */
export const alpnPolicies = [
  'HTTP1Only',
  'HTTP2Only',
  'HTTP2Optional',
  'HTTP2Preferred',
  'None',
] as const;
export type AlpnPolicy = (typeof alpnPolicies)[number];

const isAlpnPolicy = (value: string): value is AlpnPolicy =>
  (alpnPolicies as readonly string[]).includes(value);

/**
 * Listener attributes of Network Load Balancers (ELBv2 API reference, ListenerAttribute), with
 * the listener protocols AWS allows each on: the TCP idle timeout cannot be changed on TLS
 * listeners, and UDP listeners have no attributes.
 */
const listenerAttributeRules = new Map<
  string,
  { readonly valid: (v: string) => boolean; readonly rule: string; readonly protocols: string[] }
>([
  [
    'tcp.idle_timeout.seconds',
    {
      valid: (v) => integerIn(v, 60, 6000) !== undefined,
      rule: 'a whole number of seconds from 60 to 6000',
      protocols: ['TCP'],
    },
  ],
]);

const listenerAttributesPrefix = `${awsPrefix}listener-attributes.`;

/** `<PROTOCOL>-<PORT>` as aws-load-balancer-controller writes it: the listener's protocol, upper case. */
function listenerSuffix(suffix: string): { protocol: string; port: number } | undefined {
  const match = /^(TCP|UDP|TLS|TCP_UDP)-(\d{1,5})$/.exec(suffix);
  const port = match?.[2] === undefined ? undefined : integerIn(match[2], 1, 65535);
  return match?.[1] === undefined || port === undefined ? undefined : { protocol: match[1], port };
}

const targetGroupAttributeRules = new Map<string, (v: string) => boolean>([
  ['preserve_client_ip.enabled', (v) => booleanValue(v) !== undefined],
  ['proxy_protocol_v2.enabled', (v) => booleanValue(v) !== undefined],
  ['deregistration_delay.timeout_seconds', (v) => integerIn(v, 0, 3600) !== undefined],
  ['deregistration_delay.connection_termination.enabled', (v) => booleanValue(v) !== undefined],
  ['stickiness.enabled', (v) => booleanValue(v) !== undefined],
  ['stickiness.type', (v) => v === 'source_ip'],
  [
    'load_balancing.cross_zone.enabled',
    (v) => ['true', 'false', 'use_load_balancer_configuration'].includes(v),
  ],
  // Target group health thresholds; a count goes up to the targets a target group can hold.
  [
    'target_group_health.dns_failover.minimum_healthy_targets.count',
    (v) => v === 'off' || integerIn(v, 1, 1000) !== undefined,
  ],
  [
    'target_group_health.dns_failover.minimum_healthy_targets.percentage',
    (v) => v === 'off' || integerIn(v, 1, 100) !== undefined,
  ],
  [
    'target_group_health.unhealthy_state_routing.minimum_healthy_targets.count',
    (v) => integerIn(v, 1, 1000) !== undefined,
  ],
  [
    'target_group_health.unhealthy_state_routing.minimum_healthy_targets.percentage',
    (v) => v === 'off' || integerIn(v, 1, 100) !== undefined,
  ],
  // Network Load Balancers only: what happens to connections of a target that turns unhealthy.
  [
    'target_health_state.unhealthy.connection_termination.enabled',
    (v) => booleanValue(v) !== undefined,
  ],
  [
    'target_health_state.unhealthy.draining_interval_seconds',
    (v) => integerIn(v, 0, 360000) !== undefined,
  ],
]);

/** Problems with target group attributes as `key=value,…`; empty values allowed where they mean "keep". */
function targetGroupAttributeProblem(
  attributes: ReadonlyMap<string, string>,
  allowEmpty: boolean,
): string | undefined {
  for (const [key, value] of attributes) {
    const rule = targetGroupAttributeRules.get(key);
    if (rule === undefined) return `unsupported attribute ${quoted(key)}`;
    if (!(allowEmpty && value === '') && !rule(value))
      return `invalid value ${quoted(value)} for ${key}`;
  }
  return undefined;
}

const targetGroupAttributesPrefix = `${awsPrefix}target-group-attributes.`;

/**
 * A legacy annotation that sets one load balancer attribute: same value rules, and a terminal
 * error when it disagrees with the attributes annotation (checked when both are known).
 */
function attributeAlias(
  suffix: string,
  description: string,
  compared: AnnotationComparison,
): AnnotationDefinition {
  const name = awsName(suffix);
  const key = attributeAliases.get(name) ?? '';
  const rule = loadBalancerAttributeRules.get(key) ?? (() => false);
  return {
    name,
    values: key.endsWith('.enabled') ? '`true` | `false`' : `as \`${key}\``,
    default: 'AWS default, not reconciled while unset',
    mutability: 'in place',
    description: `${description} Alias of \`${key}\` in the attributes annotation; the two must agree.`,
    compared,
    apply: (value, o) => {
      if (!rule(value))
        return key.endsWith('.enabled') ? 'must be "true" or "false"' : `invalid value for ${key}`;
      o.loadBalancerAttributeAliases ??= new Map();
      o.loadBalancerAttributeAliases.set(key, { annotation: name, value });
      return undefined;
    },
  };
}

export const annotationRegistry: readonly AnnotationDefinition[] = [
  {
    name: awsName('scheme'),
    compared: {
      albc: 'same',
      cloudProviderAws:
        'not supported: cloud-provider-aws reads only the legacy `internal` annotation (default internet-facing)',
    },
    values: '`internal` | `internet-facing`',
    default: 'the deployment default (`internal` unless configured)',
    mutability: 'replaces the load balancer',
    description: 'Whether the NLB gets public or private addresses.',
    apply: (value, o) => {
      if (value !== 'internal' && value !== 'internet-facing') {
        return 'must be "internal" or "internet-facing"';
      }
      o.scheme = value;
      return undefined;
    },
  },
  {
    name: awsName('name'),
    compared: {
      albc: "differs: the name is checked against all of AWS's rules before anything is made, and a name another load balancer holds is refused instead of taken over (its issue 2533); a later change is ignored in both",
      cloudProviderAws: 'not supported: cloud-provider-aws names the NLB from the Service UID',
    },
    values:
      'at most 32 letters, digits and hyphens; no hyphen first or last; not starting with `internal-`',
    default: 'derived: `k8s-<namespace>-<name>-<hash>`',
    mutability: 'at creation only',
    description:
      'Name of the NLB when it is created. A change later is ignored: the NLB keeps its name and DNS name. Ownership is still by tags: a name another load balancer already has stops the sync with a Warning naming its holder, and that load balancer is never changed or deleted. Tenant policy: `loadBalancerNames`.',
    apply: (value, o) => {
      if (!isValidElbName(value)) {
        return 'must be 1 to 32 letters, digits and hyphens, neither starting nor ending with a hyphen, and not starting with "internal-"';
      }
      o.loadBalancerName = value;
      return undefined;
    },
  },
  {
    name: awsName('internal'),
    compared: {
      albc: 'differs: a value other than `true` or `false` is an error there; here anything but `false` means internal',
      cloudProviderAws: 'same',
    },
    values: '`true` | `false`',
    default: 'unset',
    mutability: 'replaces the load balancer',
    description:
      'Legacy form of the scheme annotation: anything but `false` means internal. The scheme annotation wins when both are set.',
    apply: (value, o) => {
      o.scheme ??= value === 'false' ? 'internet-facing' : 'internal';
      return undefined;
    },
  },
  {
    name: awsName('subnets'),
    compared: {
      albc: 'same',
      cloudProviderAws:
        'differs: cloud-provider-aws applies it at creation only; here a change moves the NLB with SetSubnets',
    },
    values: 'comma-separated subnet IDs or Name tags, one per Availability Zone',
    default:
      'discovered by the `kubernetes.io/role/elb` (internet-facing) or `kubernetes.io/role/internal-elb` (internal) tag in the cluster VPC',
    mutability: 'in place',
    description: 'The subnets the NLB is placed in.',
    apply: (value, o) => {
      const subnets = list(value);
      if (subnets.length === 0) return 'must name at least one subnet';
      o.subnets = subnets;
      return undefined;
    },
  },
  {
    name: awsName('healthcheck-protocol'),
    compared: {
      albc: 'differs: for UDP-only ports the default here is HTTP to kube-proxy (TCP on the traffic port there, which a UDP port cannot answer)',
      cloudProviderAws:
        'differs: for UDP-only ports the default here is HTTP to kube-proxy (TCP on the traffic port there, which a UDP port cannot answer)',
    },
    values: '`TCP` | `HTTP` | `HTTPS`',
    default: '`TCP`; `HTTP` for externalTrafficPolicy Local and for UDP-only ports',
    mutability: 'in place',
    description: 'Health check protocol of every target group.',
    apply: (value, o) => {
      const upper = value.toUpperCase();
      if (upper !== 'TCP' && upper !== 'HTTP' && upper !== 'HTTPS')
        return 'must be TCP, HTTP or HTTPS';
      o.healthCheck.protocol = upper;
      return undefined;
    },
  },
  {
    name: awsName('healthcheck-port'),
    compared: {
      albc: "differs: a named Service port is accepted there, only a number or `traffic-port` here; for UDP-only ports the default here is kube-proxy's 10256",
      cloudProviderAws: "differs: for UDP-only ports the default here is kube-proxy's 10256",
    },
    values: '`traffic-port` or a port number',
    default:
      '`traffic-port`; the healthCheckNodePort for externalTrafficPolicy Local; 10256 (kube-proxy) for UDP-only ports',
    mutability: 'in place',
    description: 'Port the health check connects to on each node.',
    apply: (value, o) => {
      if (value !== 'traffic-port' && integerIn(value, 1, 65535) === undefined) {
        return 'must be "traffic-port" or a port number from 1 to 65535';
      }
      o.healthCheck.port = value;
      return undefined;
    },
  },
  {
    name: awsName('healthcheck-path'),
    compared: {
      albc: 'same',
      cloudProviderAws: 'same',
    },
    values: 'a path starting with `/`',
    default: '`/` (`/healthz` for externalTrafficPolicy Local and UDP-only ports)',
    mutability: 'in place',
    description: 'Path of HTTP and HTTPS health checks.',
    apply: (value, o) => {
      if (!value.startsWith('/') || value.length > 1024)
        return 'must start with "/" and be at most 1024 characters';
      o.healthCheck.path = value;
      return undefined;
    },
  },
  {
    name: awsName('healthcheck-interval'),
    compared: {
      albc: 'same',
      cloudProviderAws: 'differs: default 30 s there, and a change replaces the target group',
    },
    values: '5–300 (seconds)',
    default: '10',
    mutability: 'in place',
    description: 'Seconds between health checks.',
    apply: (value, o) => {
      const n = integerIn(value, 5, 300);
      if (n === undefined) return 'must be a whole number of seconds from 5 to 300';
      o.healthCheck.intervalSeconds = n;
      return undefined;
    },
  },
  {
    name: awsName('healthcheck-timeout'),
    compared: {
      albc: 'same',
      cloudProviderAws: 'differs: parsed but never sent to AWS there',
    },
    values: '2–120 (seconds)',
    default: '10 for TCP, 6 for HTTP(S)',
    mutability: 'in place',
    description: 'Seconds before a health check counts as failed.',
    apply: (value, o) => {
      const n = integerIn(value, 2, 120);
      if (n === undefined) return 'must be a whole number of seconds from 2 to 120';
      o.healthCheck.timeoutSeconds = n;
      return undefined;
    },
  },
  {
    name: awsName('healthcheck-healthy-threshold'),
    compared: {
      albc: 'same',
      cloudProviderAws: 'same',
    },
    values: '2–10',
    default: '3 (2 for externalTrafficPolicy Local)',
    mutability: 'in place',
    description: 'Consecutive successes before a target is healthy.',
    apply: (value, o) => {
      const n = integerIn(value, 2, 10);
      if (n === undefined) return 'must be a whole number from 2 to 10';
      o.healthCheck.healthyThreshold = n;
      return undefined;
    },
  },
  {
    name: awsName('healthcheck-unhealthy-threshold'),
    compared: {
      albc: 'same',
      cloudProviderAws: 'differs: sent to AWS there only when the healthy threshold changes too',
    },
    values: '2–10',
    default: '3 (2 for externalTrafficPolicy Local)',
    mutability: 'in place',
    description: 'Consecutive failures before a target is unhealthy.',
    apply: (value, o) => {
      const n = integerIn(value, 2, 10);
      if (n === undefined) return 'must be a whole number from 2 to 10';
      o.healthCheck.unhealthyThreshold = n;
      return undefined;
    },
  },
  {
    name: awsName('healthcheck-success-codes'),
    compared: {
      albc: 'same',
      cloudProviderAws: 'not supported: cloud-provider-aws has no such annotation',
    },
    values: 'HTTP codes, e.g. `200` or `200-399` or `200,204`',
    default: '`200-399`',
    mutability: 'in place',
    description: 'HTTP codes a healthy target answers with (HTTP and HTTPS checks).',
    apply: (value, o) => {
      const ranges = value.split(',').map((part) => part.split('-').map(Number));
      const valid =
        /^[2-5]\d\d(-[2-5]\d\d)?(,[2-5]\d\d(-[2-5]\d\d)?)*$/.test(value) &&
        ranges.every(([low = 0, high = low]) => low <= high);
      if (!valid) return 'must be HTTP codes from 200 to 599, as "200", "200-399" or "200,204"';
      o.healthCheck.successCodes = value;
      return undefined;
    },
  },
  {
    name: awsName('attributes'),
    compared: {
      albc: 'same',
      cloudProviderAws:
        'not supported: cloud-provider-aws has only the cross-zone and access-log annotations',
    },
    values: `\`key=value,...\` with keys ${[...loadBalancerAttributeRules.keys()]
      .map((k) => `\`${k}\``)
      .join(', ')}`,
    default: 'AWS defaults, not reconciled while unset',
    mutability: 'in place',
    description:
      'Load balancer attributes. Only the keys listed are reconciled: a key removed from the list keeps the value it had. With `deletion_protection.enabled=true` deleting the Service (or dropping its LoadBalancer type) stops with a Warning and keeps the NLB and the finalizer until the annotation is removed or set to `false`. `access_logs.s3.enabled=true` needs `access_logs.s3.bucket`. Tenant policy: `accessLogBuckets`, `accessLogPrefixes`, `maxSecondaryIpsPerSubnet`; under `internetFacing: false`, `ipv6.deny_all_igw_traffic=false` on a dualstack NLB counts as internet-facing.',
    apply: (value, o) => {
      const attributes = keyValues(value);
      if (typeof attributes === 'string') return attributes;
      for (const [key, attributeValue] of attributes) {
        const rule = loadBalancerAttributeRules.get(key);
        if (rule === undefined) return `unsupported attribute ${quoted(key)}`;
        if (!rule(attributeValue)) return `invalid value ${quoted(attributeValue)} for ${key}`;
      }
      o.loadBalancerAttributes = attributes;
      return undefined;
    },
  },
  attributeAlias('cross-zone-load-balancing-enabled', 'Load balancing across Availability Zones.', {
    albc: 'same (deprecated there in favour of the attributes annotation)',
    cloudProviderAws:
      "differs: without it cloud-provider-aws forces cross-zone off; here AWS's value is left alone",
  }),
  attributeAlias('access-log-enabled', 'Access logs to S3 (needs a bucket).', {
    albc: 'same (deprecated there in favour of the attributes annotation)',
    cloudProviderAws:
      "differs: without it cloud-provider-aws forces access logs off; here AWS's value is left alone",
  }),
  attributeAlias('access-log-s3-bucket-name', 'S3 bucket of the access logs.', {
    albc: 'same (deprecated there in favour of the attributes annotation)',
    cloudProviderAws: 'same',
  }),
  attributeAlias('access-log-s3-bucket-prefix', 'Prefix of the access logs in their bucket.', {
    albc: 'same (deprecated there in favour of the attributes annotation)',
    cloudProviderAws: 'same',
  }),
  {
    name: awsName('additional-resource-tags'),
    compared: {
      albc: 'same',
      cloudProviderAws:
        'differs: set at creation only there, never reconciled; keys without `=value` are accepted there',
    },
    values:
      "`key=value,key2=value2`: at most 45 tags with the deployment's, keys ≤ 128 and values ≤ 256 characters",
    default: 'none',
    mutability: 'in place',
    description:
      "Extra tags on every resource created for the Service. Ownership keys (`aws:`, `kubernetes.io/`, `elbv2.k8s.aws/`, `service.k8s.aws/`, `ingress.k8s.aws/`, `KubernetesCluster`, this controller's `serverless-service-controller.io/`, in any letter case) are refused.",
    apply: (value, o) => {
      const tags = keyValues(value);
      if (typeof tags === 'string') return tags;
      const problems = tagProblems(tags);
      if (problems.length > 0) return joinProblems(problems);
      o.additionalTags = bareRecord(tags);
      return undefined;
    },
  },
  {
    name: awsName('target-group-attributes'),
    compared: {
      albc: 'differs: keys and values are checked before any AWS call here; `proxy_protocol_v2.enabled` is left as AWS has it while unset, where it is forced to `false` there',
      cloudProviderAws:
        'differs: cloud-provider-aws accepts only `preserve_client_ip.enabled` and `proxy_protocol_v2.enabled`',
    },
    values: `\`key=value,...\` with keys ${[...targetGroupAttributeRules.keys()]
      .map((k) => `\`${k}\``)
      .join(', ')}`,
    default: 'AWS defaults, not reconciled while unset',
    mutability: 'in place',
    description: 'Target group attributes for every target group of the Service.',
    apply: (value, o) => {
      const attributes = keyValues(value);
      if (typeof attributes === 'string') return attributes;
      const problem = targetGroupAttributeProblem(attributes, false);
      if (problem !== undefined) return problem;
      o.targetGroupAttributes = bareRecord([
        ...Object.entries(o.targetGroupAttributes),
        ...attributes,
      ]);
      return undefined;
    },
  },
  {
    name: `${targetGroupAttributesPrefix}<PORT>`,
    namePrefix: targetGroupAttributesPrefix,
    compared: {
      albc: 'same',
      cloudProviderAws: 'not supported: cloud-provider-aws has no per-port target group attributes',
    },
    values: 'as `target-group-attributes`; an empty value keeps the value for all ports',
    default: 'the `target-group-attributes` values',
    mutability: 'in place',
    description:
      'Target group attributes of one Service port, e.g. `…target-group-attributes.443: deregistration_delay.timeout_seconds=120`, laid over `target-group-attributes` for that port. A port the Service does not have is an error.',
    apply: (value, o, name) => {
      const port = integerIn(name.slice(targetGroupAttributesPrefix.length), 1, 65535);
      if (port === undefined) return 'the name must end in a Service port number from 1 to 65535';
      const attributes = keyValues(value);
      if (typeof attributes === 'string') return attributes;
      if (attributes.size === 0) return 'must list at least one key=value';
      const problem = targetGroupAttributeProblem(attributes, true);
      if (problem !== undefined) return problem;
      o.targetGroupAttributesByPort = new Map([
        ...(o.targetGroupAttributesByPort ?? []),
        [port, bareRecord(attributes)],
      ]);
      return undefined;
    },
  },
  {
    name: awsName('proxy-protocol'),
    compared: {
      albc: 'same',
      cloudProviderAws:
        'not supported for NLBs: Classic Load Balancers only there (NLBs use `proxy_protocol_v2.enabled` in the target group attributes)',
    },
    values: '`*`',
    default: 'off',
    mutability: 'in place',
    description: 'Proxy protocol v2 on every target group.',
    apply: (value, o) => {
      if (value !== '*') return 'must be "*"';
      o.proxyProtocol = true;
      return undefined;
    },
  },
  {
    name: awsName('proxy-protocol-per-target-group'),
    compared: {
      albc: 'same',
      cloudProviderAws: 'not supported: cloud-provider-aws has no per-port proxy protocol',
    },
    values: 'comma-separated Service port numbers',
    default: 'unset',
    mutability: 'in place',
    description:
      'Proxy protocol v2 on the target groups of the listed Service ports, and off on all others (over the target-group-attributes annotation). `proxy-protocol: "*"` wins over it. A port the Service does not have is ignored, as in aws-load-balancer-controller.',
    apply: (value, o) => {
      const ports = list(value).map((port) => integerIn(port, 1, 65535));
      if (ports.length === 0 || ports.includes(undefined))
        return 'must be Service port numbers from 1 to 65535, separated by commas';
      o.proxyProtocolPorts = ports.filter((port) => port !== undefined);
      return undefined;
    },
  },
  {
    name: awsName('enable-icmp-for-path-mtu-discovery'),
    compared: {
      albc: 'differs: on by default here; there the ICMP rules are added only with `on`',
      cloudProviderAws:
        'differs: cloud-provider-aws has no annotation and adds the ICMP rule to the node security groups',
    },
    values: '`on` | `off`',
    default: '`on`',
    mutability: 'in place',
    description:
      'Whether the managed security group lets path MTU discovery through from each source range: ICMP "fragmentation needed" (type 3, code 4), and ICMPv6 "packet too big" (type 2) for IPv6 ranges. Without it, clients behind a smaller MTU can hang on large responses, so it is on unless turned off.',
    apply: (value, o) => {
      if (value !== 'on' && value !== 'off') return 'must be "on" or "off"';
      o.pathMtuDiscovery = value === 'on';
      return undefined;
    },
  },
  {
    name: awsName('enable-tcp-udp-listener'),
    compared: {
      albc: 'differs: TCP and UDP on one port become a `TCP_UDP` listener here without it; there only with `true`',
      cloudProviderAws: 'not supported: cloud-provider-aws refuses mixed protocols',
    },
    values: '`true` | `false`',
    default: 'unset',
    mutability: 'n/a',
    description:
      'Accepted for compatibility: TCP and UDP on the same port always become one `TCP_UDP` listener here.',
    apply: (value) => (booleanValue(value) === undefined ? 'must be "true" or "false"' : undefined),
  },
  {
    name: awsName('ssl-cert'),
    compared: {
      albc: 'same',
      cloudProviderAws: 'differs: one certificate only there',
    },
    values: 'comma-separated ACM or IAM certificate ARNs; the first is the default certificate',
    default: 'none (no TLS)',
    mutability: 'in place',
    description: 'Turns the TLS ports into TLS listeners with these certificates.',
    apply: (value, o) => {
      const arns = list(value);
      const bad = arns.find(
        (arn) =>
          !/^arn:aws[a-z-]*:(acm|iam):[a-z0-9-]*:\d{12}:(certificate|server-certificate)\/.+$/.test(
            arn,
          ),
      );
      if (arns.length === 0 || bad !== undefined)
        return `${quoted(bad ?? value)} is not an ACM or IAM certificate ARN`;
      o.certificateArns = arns;
      return undefined;
    },
  },
  {
    name: awsName('ssl-ports'),
    compared: {
      albc: 'differs: `*` matches no port there; here it means every port',
      cloudProviderAws: 'same',
    },
    values: 'comma-separated Service port numbers or names, or `*`',
    default: 'every port, when a certificate is set',
    mutability: 'in place',
    description: 'Which ports get TLS listeners.',
    apply: (value, o) => {
      const ports = list(value);
      if (ports.length === 0) return 'must name at least one port';
      if (!ports.includes('*')) o.sslPorts = ports;
      return undefined;
    },
  },
  {
    name: awsName('ssl-negotiation-policy'),
    compared: {
      albc: 'differs: default `ELBSecurityPolicy-2016-08` there',
      cloudProviderAws: "differs: AWS's default policy there",
    },
    values: 'an ELBv2 security policy name',
    default: 'the deployment default (`ELBSecurityPolicy-TLS13-1-2-2021-06`)',
    mutability: 'in place',
    description: 'TLS security policy of the TLS listeners.',
    apply: (value, o) => {
      if (!/^[A-Za-z0-9-]+$/.test(value)) return 'must be a security policy name';
      o.sslPolicy = value;
      return undefined;
    },
  },
  {
    name: awsName('backend-protocol'),
    compared: {
      albc: 'same',
      cloudProviderAws: 'same (its `http` and `https` values are for Classic Load Balancers)',
    },
    values: '`tcp` | `ssl`',
    default: '`tcp`',
    mutability: 'replaces target groups (make-before-break)',
    description: '`ssl` makes TLS ports re-encrypt to the nodes (TLS target groups).',
    apply: (value, o) => {
      if (value !== 'tcp' && value !== 'ssl') return 'must be "tcp" or "ssl"';
      o.backendProtocol = value;
      return undefined;
    },
  },
  {
    name: awsName('alpn-policy'),
    compared: {
      albc: 'same',
      cloudProviderAws: 'not supported: cloud-provider-aws has no ALPN annotation',
    },
    values: alpnPolicies.map((p) => `\`${p}\``).join(' | '),
    default: 'AWS default (`None`), not reconciled while unset',
    mutability: 'in place',
    description:
      'ALPN policy of the TLS listeners (those the `ssl-ports` annotation selects); other listeners ignore it, as in aws-load-balancer-controller.',
    apply: (value, o) => {
      if (!isAlpnPolicy(value)) return `must be one of ${joinOr(alpnPolicies)}`;
      o.alpnPolicy = value;
      return undefined;
    },
  },
  {
    name: `${listenerAttributesPrefix}<PROTOCOL>-<PORT>`,
    compared: {
      albc: 'same',
      cloudProviderAws: 'not supported: cloud-provider-aws has no listener attributes annotation',
    },
    namePrefix: listenerAttributesPrefix,
    values: `\`key=value,...\` with keys ${[...listenerAttributeRules]
      .map(([key, r]) => `\`${key}\` (${r.rule}; ${r.protocols.join(', ')} listeners)`)
      .join(', ')}`,
    default: 'AWS defaults, not reconciled while unset',
    mutability: 'in place',
    description:
      'Attributes of one listener, named by its protocol (`TCP`, `UDP`, `TLS` or `TCP_UDP`, as the listener has it) and port, e.g. `…listener-attributes.TCP-80: tcp.idle_timeout.seconds=600`. A protocol and port the Service has no listener for is an error.',
    apply: (value, o, name) => {
      const listener = listenerSuffix(name.slice(listenerAttributesPrefix.length));
      if (listener === undefined) {
        return 'the name must end in <PROTOCOL>-<PORT>, with TCP, UDP, TLS or TCP_UDP and a port from 1 to 65535';
      }
      const attributes = keyValues(value);
      if (typeof attributes === 'string') return attributes;
      if (attributes.size === 0) return 'must list at least one key=value';
      for (const [key, attributeValue] of attributes) {
        const rule = listenerAttributeRules.get(key);
        if (rule === undefined) return `unsupported attribute ${quoted(key)}`;
        if (!rule.valid(attributeValue)) {
          return `invalid value ${quoted(attributeValue)} for ${key}: must be ${rule.rule}`;
        }
        if (!rule.protocols.includes(listener.protocol)) {
          return `AWS allows ${key} only on ${rule.protocols.join(', ')} listeners`;
        }
      }
      o.listenerAttributes = new Map([
        ...(o.listenerAttributes ?? []),
        [`${listener.protocol}-${listener.port}`, bareRecord(attributes)],
      ]);
      return undefined;
    },
  },
  {
    name: awsName('eip-allocations'),
    compared: {
      albc: 'same',
      cloudProviderAws: 'same',
    },
    values: 'comma-separated Elastic IP allocation IDs, one per subnet',
    default: 'none (AWS-assigned addresses)',
    mutability: 'at creation only',
    description: 'Static public addresses of an internet-facing NLB.',
    apply: (value, o) => {
      const ids = list(value);
      const bad = ids.find((id) => !/^eipalloc-[0-9a-f]{8,17}$/.test(id));
      if (ids.length === 0 || bad !== undefined)
        return `${quoted(bad ?? value)} is not an Elastic IP allocation ID`;
      o.eipAllocations = ids;
      return undefined;
    },
  },
  {
    name: awsName('private-ipv4-addresses'),
    compared: {
      albc: 'same',
      cloudProviderAws: 'same',
    },
    values: 'comma-separated IPv4 addresses, one per subnet',
    default: 'none (AWS-assigned addresses)',
    mutability: 'at creation only',
    description: 'Static private addresses of an internal NLB.',
    apply: (value, o) => {
      const ips = list(value);
      const bad = ips.find((ip) => parseIPv4(ip) === undefined);
      if (ips.length === 0 || bad !== undefined)
        return `${quoted(bad ?? value)} is not an IPv4 address`;
      o.privateIPv4Addresses = ips;
      return undefined;
    },
  },
  {
    name: awsName('security-groups'),
    values: 'comma-separated security group IDs (`sg-…`) or `Name` tag values, in the cluster VPC',
    default: 'none: a managed security group per NLB',
    mutability: 'in place',
    description:
      "The NLB's frontend security groups, attached instead of the managed one (which is detached and deleted). A name matches the `Name` tag, not the group name, and must match exactly one group in the cluster VPC. A group another owner's tags claim is refused, since its owner could not delete it while the NLB holds it: this controller's (any Service's or cluster's), EKS's (`aws:eks:*`, `eks:*`: the cluster security group), the AWS Load Balancer Controller's (`elbv2.k8s.aws/*`, `ingress.k8s.aws/*`, `service.k8s.aws/*`) and a cluster's (`kubernetes.io/cluster/<name>=owned`, `KubernetesCluster`, Cluster API's). These groups are never changed or deleted by the controller; source ranges and prefix lists are then ignored, as in aws-load-balancer-controller. The NLB also carries the cluster's backend security group when `manage-backend-security-group-rules` is `true`. Tenant policy: `securityGroups` and `securityGroupTags`, matched on the groups the values resolve to, not on the values as written.",
    compared: {
      albc: "differs: a group another owner's tags claim (the EKS cluster security group, another controller's) is refused here and attached there; for the nodes' rules set manage-backend-security-group-rules",
      cloudProviderAws:
        'differs: cloud-provider-aws takes it only with NLBSecurityGroupMode=Managed, and keeps node rules CIDR-based',
    },
    apply: (value, o) => {
      const groups = [...new Set(list(value))];
      if (groups.length === 0) return 'must name at least one security group';
      if (groups.length > securityGroupsPerLoadBalancer)
        return `names ${groups.length} security groups; an NLB takes at most ${securityGroupsPerLoadBalancer}`;
      const bad = groups.find((g) => !/^[\x20-\x7e]{1,255}$/.test(g));
      if (bad !== undefined) return `${quoted(bad)} is not a security group ID or Name tag`;
      o.securityGroups = groups;
      return undefined;
    },
  },
  {
    name: awsName('manage-backend-security-group-rules'),
    values: '`true` | `false`',
    default:
      '`false` with `security-groups`; ignored without it (the managed group always comes with the backend group)',
    mutability: 'in place',
    description:
      "With `security-groups`: `true` attaches the cluster's backend security group beside the user's groups, so the node security groups, which allow that group on the NodePort range (installed once per cluster), let the NLB's traffic and health checks in. `false` attaches only the user's groups: the user makes the node security groups allow them.",
    compared: {
      albc: 'differs: the node security group rules that allow the backend group are made once per cluster at install, not per Service',
      cloudProviderAws: 'not supported: cloud-provider-aws has no backend security group',
    },
    apply: (value, o) => {
      const enabled = booleanValue(value);
      if (enabled === undefined) return 'must be "true" or "false"';
      o.manageBackendSecurityGroupRules = enabled;
      return undefined;
    },
  },
  {
    name: awsName('security-group-prefix-lists'),
    values: 'comma-separated managed prefix list IDs (`pl-…`)',
    default: 'none',
    mutability: 'in place',
    description:
      "Managed prefix lists allowed in on every listener port of the managed security group, beside the source ranges. Without source ranges the default `0.0.0.0/0` is then left out, as in aws-load-balancer-controller. Ignored with `security-groups`. AWS counts each prefix list as its maximum number of entries against the group's rule quota; the controller counts it as one rule per port. Tenant policy: `securityGroupPrefixLists`.",
    compared: {
      albc: 'same',
      cloudProviderAws: 'not supported: cloud-provider-aws has no prefix list annotation',
    },
    apply: (value, o) => {
      const ids = [...new Set(list(value))];
      const bad = ids.find((id) => !/^pl-[0-9a-f]{8,17}$/.test(id));
      if (ids.length === 0 || bad !== undefined)
        return `${quoted(bad ?? value)} is not a managed prefix list ID such as pl-0123456789abcdef0`;
      o.securityGroupPrefixLists = ids.sort();
      return undefined;
    },
  },
  {
    name: awsName('type'),
    compared: {
      albc: 'differs: `nlb-ip` (ip targets) is refused here',
      cloudProviderAws:
        'differs: `external` hands the Service to another controller there, and no annotation means a Classic Load Balancer',
    },
    values: '`nlb` | `external`',
    default: 'unset',
    mutability: 'n/a',
    description:
      'Accepted for compatibility with the other controllers; this controller always makes NLBs.',
    apply: (value) =>
      value === 'nlb' || value === 'external'
        ? undefined
        : 'only "nlb" and "external" are supported (Classic ELB and "nlb-ip" are not)',
  },
  {
    name: targetNodeLabelsAnnotation,
    compared: {
      albc: 'differs: at most 10 labels and 4,096 characters here (node sync is shared by every namespace), none there',
      cloudProviderAws:
        'differs: a key without a value (`key` or `key=`) matches any value of that label there; here `key` alone is an error and `key=` matches only an empty value',
    },
    values: 'comma-separated `key=value` node labels: at most 10, 4,096 characters',
    default: 'every eligible node',
    mutability: 'in place',
    description:
      'Only eligible nodes carrying every listed label become targets of this Service. A value that cannot be read is a terminal Warning, and the targets stay those of the last valid value (never every node). Node changes still cost one RegisterTargets (or DeregisterTargets) per affected target group, and only the Services whose selection changed get a host update.',
    apply: (value) => {
      const parsed = parseNodeLabelSelector(value);
      return 'problem' in parsed ? parsed.problem : undefined;
    },
  },
  {
    name: awsName('nlb-target-type'),
    compared: {
      albc: 'differs: only `instance` here: `ip` targets (Pods through EndpointSlices) are a separate design',
      cloudProviderAws: 'not supported: instance targets only there, with no annotation',
    },
    values: '`instance`',
    default: '`instance`',
    mutability: 'n/a',
    description: 'Accepted for compatibility; only instance targets (NodePorts) are supported.',
    apply: (value) => (value === 'instance' ? undefined : 'only "instance" targets are supported'),
  },
  {
    name: awsName('ip-address-type'),
    values: '`ipv4` | `dualstack`',
    default: '`ipv4`',
    mutability: 'in place',
    description:
      'Whether clients reach the NLB over IPv4 only or over IPv4 and IPv6. `dualstack` needs subnets with an IPv6 CIDR: discovered subnets without one are passed over, named ones are an error. Source ranges may then be IPv6 CIDRs; without ranges the security group allows `0.0.0.0/0` and `::/0`. AWS refuses UDP and TCP_UDP listeners on a dualstack NLB without IPv6 source NAT, which is not supported, so such a Service is an error. Targets are still reached over IPv4 (instance targets).',
    compared: {
      albc: 'same (`dualstack-without-public-ipv4` is for ALBs in both)',
      cloudProviderAws: 'not supported: cloud-provider-aws makes IPv4 NLBs only',
    },
    apply: (value, o) => {
      if (value === 'dualstack-without-public-ipv4')
        return 'only Application Load Balancers support "dualstack-without-public-ipv4"; use "dualstack"';
      if (value !== 'ipv4' && value !== 'dualstack') return 'must be "ipv4" or "dualstack"';
      o.ipAddressType = value;
      return undefined;
    },
  },
  {
    name: awsName('ipv6-addresses'),
    values: "comma-separated IPv6 addresses, one in each subnet's IPv6 CIDR",
    default: 'none (AWS-assigned addresses)',
    mutability: 'at creation only',
    description:
      'Static IPv6 addresses of a dualstack NLB, either scheme. Each is matched to the subnet whose IPv6 CIDR holds it, so the order does not matter; every subnet needs exactly one.',
    compared: {
      albc: 'same',
      cloudProviderAws: 'not supported: cloud-provider-aws makes IPv4 NLBs only',
    },
    apply: (value, o) => {
      const ips = list(value);
      const bad = ips.find((ip) => parseIPv6(ip) === undefined);
      if (ips.length === 0 || bad !== undefined)
        return `${quoted(bad ?? value)} is not an IPv6 address`;
      o.ipv6Addresses = ips;
      return undefined;
    },
  },
  {
    name: legacySourceRanges,
    values: 'comma-separated IPv4 CIDRs, and IPv6 CIDRs on a dualstack NLB',
    default: '`0.0.0.0/0` (and `::/0` on a dualstack NLB)',
    mutability: 'in place',
    description: 'Client CIDRs allowed in when spec.loadBalancerSourceRanges is empty.',
    compared: {
      albc: 'same',
      cloudProviderAws: 'differs: IPv6 CIDRs are accepted only on dualstack NLBs, which it lacks',
    },
    apply: (value, o) => {
      o.sourceRanges = list(value);
      return undefined;
    },
  },
];

const byName = new Map(annotationRegistry.map((definition) => [definition.name, definition]));
const byPrefix = annotationRegistry.filter((definition) => definition.namePrefix !== undefined);

/** The definition of an annotation: by its exact name, or by the prefix of a suffixed one. */
function definitionOf(name: string): AnnotationDefinition | undefined {
  return byName.get(name) ?? byPrefix.find((d) => name.startsWith(d.namePrefix ?? '\0'));
}

function joinOr(items: readonly string[]): string {
  return `${items.slice(0, -1).join(', ')} or ${items.at(-1) ?? ''}`;
}

/**
 * Parses and validates the Service's load balancer annotations. Unknown annotations under the
 * `aws-load-balancer-` prefix are errors too: silently ignoring one the user relies on is worse.
 * Sizes are checked first, so no oversized value is split or parsed. Throws a TerminalError
 * naming every bad annotation and value, each value cut short.
 */
export function parseAnnotations(service: Service): LoadBalancerOptions {
  const annotations = service.metadata?.annotations ?? {};
  const tooLarge = annotationSizeProblems(annotations);
  if (tooLarge.length > 0) throw new TerminalError(tooLarge.join('; '));
  const options: LoadBalancerOptions = {
    healthCheck: {},
    additionalTags: bareRecord(),
    targetGroupAttributes: bareRecord(),
    proxyProtocol: false,
    certificateArns: [],
    backendProtocol: 'tcp',
  };
  const problems: string[] = [];
  // The scheme annotation is applied before the legacy `internal` one so that it wins.
  const names = Object.keys(annotations).sort((a, b) => order(a) - order(b) || a.localeCompare(b));
  for (const name of names) {
    const value = annotations[name] ?? '';
    const definition = definitionOf(name);
    if (definition === undefined) {
      if (name.startsWith(awsPrefix)) {
        problems.push(`annotation ${clipped(name, annotationNameChars)} is not supported`);
      }
      continue;
    }
    const problem = definition.apply(value.trim(), options, name);
    if (problem !== undefined)
      problems.push(`annotation ${name}: invalid value ${quoted(value)}: ${problem}`);
  }
  if (problems.length > 0) throw new TerminalError(joinProblems(problems));
  return options;
}

/** The longest annotation name Kubernetes allows (a 253-character prefix, "/" and 63). */
const annotationNameChars = 317;

function order(name: string): number {
  return name === awsName('scheme') ? 0 : 1;
}

/** The four octets of a dotted IPv4 address, or undefined. */
export function parseIPv4(text: string): number[] | undefined {
  const parts = text.split('.');
  if (parts.length !== 4) return undefined;
  const octets = parts.map((part) => (/^(0|[1-9]\d{0,2})$/.test(part) ? Number(part) : NaN));
  return octets.every((octet) => octet >= 0 && octet <= 255) ? octets : undefined;
}
