import { clipped, joinProblems, quoted } from '../../core/echo';
import { TerminalError } from '../../core/errors';
import type { Service } from '../../core/objects';
import { annotationSizeProblems } from '../../core/service-limits';
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
  crossZone?: boolean;
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
  readonly apply: (value: string, options: LoadBalancerOptions) => string | undefined;
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
    name: awsName('cross-zone-load-balancing-enabled'),
    values: '`true` | `false`',
    default: 'AWS default (off), not reconciled while unset',
    mutability: 'in place',
    description: 'Load balancing across Availability Zones.',
    apply: (value, o) => {
      const b = booleanValue(value);
      if (b === undefined) return 'must be "true" or "false"';
      o.crossZone = b;
      return undefined;
    },
  },
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
    const definition = byName.get(name);
    if (definition === undefined) {
      if (name.startsWith(awsPrefix)) {
        problems.push(`annotation ${clipped(name, annotationNameChars)} is not supported`);
      }
      continue;
    }
    const problem = definition.apply(value.trim(), options);
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
