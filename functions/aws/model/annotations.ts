import { clipped, joinProblems, quoted } from '../../core/echo';
import { TerminalError } from '../../core/errors';
import type { Service } from '../../core/objects';
import { annotationSizeProblems } from '../../core/service-limits';
import { attributeAliases, loadBalancerAttributeRules } from './load-balancer-attributes';
import { tagProblems } from './tag-rules';
import type { HealthCheckProtocol, Scheme } from './types';

export const awsPrefix = 'service.beta.kubernetes.io/aws-load-balancer-';
const legacySourceRanges = 'service.beta.kubernetes.io/load-balancer-source-ranges';

/** What the annotations of a Service ask for, parsed and validated. */
export interface LoadBalancerOptions {
  scheme?: Scheme;
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
  proxyProtocol: boolean;
  certificateArns: string[];
  /** Service port numbers or names that get TLS; undefined = every port when a certificate is set. */
  sslPorts?: string[];
  sslPolicy?: string;
  backendProtocol: 'tcp' | 'ssl';
  eipAllocations?: string[];
  privateIPv4Addresses?: string[];
  /** From the legacy annotation; spec.loadBalancerSourceRanges wins when set. */
  sourceRanges?: string[];
  /** ALPN policy of the TLS listeners; undefined leaves AWS's value alone. */
  alpnPolicy?: AlpnPolicy;
  /** Listener attributes by `<PROTOCOL>-<PORT>`; a key absent here is not reconciled. */
  listenerAttributes?: ReadonlyMap<string, Readonly<Record<string, string>>>;
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
}

const awsName = (suffix: string) => `${awsPrefix}${suffix}`;

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
]);

/**
 * A legacy annotation that sets one load balancer attribute: same value rules, and a terminal
 * error when it disagrees with the attributes annotation (checked when both are known).
 */
function attributeAlias(suffix: string, description: string): AnnotationDefinition {
  const name = awsName(suffix);
  const key = attributeAliases.get(name) ?? '';
  const rule = loadBalancerAttributeRules.get(key) ?? (() => false);
  return {
    name,
    values: key.endsWith('.enabled') ? '`true` | `false`' : `as \`${key}\``,
    default: 'AWS default, not reconciled while unset',
    mutability: 'in place',
    description: `${description} Alias of \`${key}\` in the attributes annotation; the two must agree.`,
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
    name: awsName('internal'),
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
    values: `\`key=value,...\` with keys ${[...loadBalancerAttributeRules.keys()]
      .map((k) => `\`${k}\``)
      .join(', ')}`,
    default: 'AWS defaults, not reconciled while unset',
    mutability: 'in place',
    description:
      'Load balancer attributes. Only the keys listed are reconciled: a key removed from the list keeps the value it had. With `deletion_protection.enabled=true` deleting the Service (or dropping its LoadBalancer type) stops with a Warning and keeps the NLB and the finalizer until the annotation is removed or set to `false`. `access_logs.s3.enabled=true` needs `access_logs.s3.bucket`.',
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
  attributeAlias('cross-zone-load-balancing-enabled', 'Load balancing across Availability Zones.'),
  attributeAlias('access-log-enabled', 'Access logs to S3 (needs a bucket).'),
  attributeAlias('access-log-s3-bucket-name', 'S3 bucket of the access logs.'),
  attributeAlias('access-log-s3-bucket-prefix', 'Prefix of the access logs in their bucket.'),
  {
    name: awsName('additional-resource-tags'),
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
    values: `\`key=value,...\` with keys ${[...targetGroupAttributeRules.keys()]
      .map((k) => `\`${k}\``)
      .join(', ')}`,
    default: 'AWS defaults, not reconciled while unset',
    mutability: 'in place',
    description: 'Target group attributes for every target group of the Service.',
    apply: (value, o) => {
      const attributes = keyValues(value);
      if (typeof attributes === 'string') return attributes;
      for (const [key, attributeValue] of attributes) {
        const rule = targetGroupAttributeRules.get(key);
        if (rule === undefined) return `unsupported attribute ${quoted(key)}`;
        if (!rule(attributeValue)) return `invalid value ${quoted(attributeValue)} for ${key}`;
      }
      o.targetGroupAttributes = bareRecord([
        ...Object.entries(o.targetGroupAttributes),
        ...attributes,
      ]);
      return undefined;
    },
  },
  {
    name: awsName('proxy-protocol'),
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
    name: awsName('ssl-cert'),
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
    name: awsName('type'),
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
    name: awsName('nlb-target-type'),
    values: '`instance`',
    default: '`instance`',
    mutability: 'n/a',
    description: 'Accepted for compatibility; only instance targets (NodePorts) are supported.',
    apply: (value) => (value === 'instance' ? undefined : 'only "instance" targets are supported'),
  },
  {
    name: awsName('ip-address-type'),
    values: '`ipv4`',
    default: '`ipv4`',
    mutability: 'n/a',
    description: 'Accepted for compatibility; only IPv4 NLBs are supported.',
    apply: (value) => (value === 'ipv4' ? undefined : 'only "ipv4" is supported'),
  },
  {
    name: legacySourceRanges,
    values: 'comma-separated IPv4 CIDRs',
    default: '`0.0.0.0/0`',
    mutability: 'in place',
    description: 'Client CIDRs allowed in when spec.loadBalancerSourceRanges is empty.',
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
