/**
 * The tenant policy: what each namespace may ask of the shared AWS account, decided from the
 * Service, its parsed annotations and configuration alone, before any AWS call. Pure; the lookups it
 * needs (namespace labels, the namespace's other Services) are done by functions/nlb/tenant-policy-check.ts.
 */
import { needsCleanup, wantsLoadBalancer, type ClaimPolicy } from '../../core/claim';
import { quoted, joinProblems } from '../../core/echo';
import { TerminalError } from '../../core/errors';
import {
  labelSelectorMatches,
  wildcardMatches,
  type LabelSelector,
  type Labels,
} from '../../core/namespace-selector';
import { isBeingDeleted, type Service } from '../../core/objects';
import { wantsDeletionProtection } from '../../core/deletion-protection';
import type { IpAddressType, Scheme } from './types';

/**
 * One rule. It applies to a namespace that matches every selector it gives (`namespaces` and
 * `namespaceSelector`); each restriction it leaves out allows anything.
 */
export interface TenantRule {
  /** Shown in Warnings, so a tenant can tell the operator which rule refused them. */
  readonly name?: string | undefined;
  /** Namespace names; `*` matches any run of characters (`team-*`). */
  readonly namespaces?: readonly string[] | undefined;
  readonly namespaceSelector?: LabelSelector | undefined;
  /** false: only internal load balancers. */
  readonly internetFacing?: boolean | undefined;
  /** Certificate ARN patterns; `*` matches within one `:`-separated field of the ARN. */
  readonly certificateArns?: readonly string[] | undefined;
  /** Elastic IP allocation ID patterns (`eipalloc-…`, `*` allowed). */
  readonly eipAllocations?: readonly string[] | undefined;
  /**
   * Patterns the groups the security-groups annotation resolves to must match: one starting with
   * `sg-` the group ID (`sg-0ab*`), any other the group's Name tag (`team-a-*`), whether the
   * annotation named the group by ID or by Name tag. A Name pattern trusts whoever may set Name
   * tags in the VPC. Checked where the groups are resolved (functions/nlb/frontend-security-groups.ts).
   */
  readonly securityGroups?: readonly string[] | undefined;
  /**
   * `key=value` tags (`*` in the value) that also admit a resolved group: one match is enough.
   * With `securityGroups`, a group either admits is allowed; either key alone restricts.
   */
  readonly securityGroupTags?: readonly string[] | undefined;
  /**
   * Services of one namespace that hold, or wait for, a load balancer of this controller: the
   * LoadBalancer Services of its class, and every Service still carrying its finalizer (a load
   * balancer kept by deletion protection after a type change or a delete). 0: none at all.
   */
  readonly maxLoadBalancerServices?: number | undefined;
  /** Listeners (distinct Service port numbers) of one load balancer. */
  readonly maxListeners?: number | undefined;
  /**
   * Subnets named by annotation must carry the scheme's role tag (`kubernetes.io/role/elb` or
   * `kubernetes.io/role/internal-elb`), as discovered ones do. Default true wherever a rule applies.
   */
  readonly requireSubnetRoleTag?: boolean | undefined;
  /** Patterns the security-group-prefix-lists IDs must match (`pl-0ab*`); `[]`: none. */
  readonly securityGroupPrefixLists?: readonly string[] | undefined;
  /**
   * Patterns the access-log bucket (`access_logs.s3.bucket`, or its legacy annotation) must
   * match; `{namespace}` stands for the Service's namespace. `[]`: no access logs to any bucket.
   */
  readonly accessLogBuckets?: readonly string[] | undefined;
  /**
   * Patterns the access-log prefix must match, `""` when none is given with a bucket (the root
   * of the bucket); `{namespace}` stands for the Service's namespace.
   */
  readonly accessLogPrefixes?: readonly string[] | undefined;
  /**
   * Patterns the name annotation's value must match; `{namespace}` stands for the Service's
   * namespace. `[]`: derived names only. Names left to the controller are always allowed.
   */
  readonly loadBalancerNames?: readonly string[] | undefined;
  /** The most `secondary_ips.auto_assigned.per_subnet` may ask for (0–7). */
  readonly maxSecondaryIpsPerSubnet?: number | undefined;
}

/** Rules in order: the first that matches a namespace applies, else `default`, else none. */
export interface TenantPolicy {
  readonly rules: readonly TenantRule[];
  readonly default?: TenantRule | undefined;
}

/** The rule that applies to a namespace, and how to name it to a tenant. */
export interface AppliedRule {
  readonly rule: TenantRule;
  /** `tenant policy (namespace team-a, rule "tenants")`: the start of every violation message. */
  readonly prefix: string;
}

/** What the policy asks of the Service: its namespace and the load balancer it wants. */
export interface TenantRequest {
  readonly namespace: string;
  readonly scheme: Scheme;
  readonly certificateArns: readonly string[];
  readonly eipAllocations?: readonly string[] | undefined;
  readonly listeners: number;
  /** From the ip-address-type annotation; undefined is `ipv4`. */
  readonly ipAddressType?: IpAddressType | undefined;
  /**
   * Every value the Service gives each load balancer attribute, from the attributes annotation
   * and the legacy one-attribute annotations (two that disagree are refused later anyway).
   */
  readonly loadBalancerAttributes?: ReadonlyMap<string, readonly string[]> | undefined;
  /** The security-group-prefix-lists annotation's IDs. */
  readonly securityGroupPrefixLists?: readonly string[] | undefined;
  /** The name annotation's value: undefined when the controller derives the name. */
  readonly loadBalancerName?: string | undefined;
}

/** Whether a rule needs the namespace's labels to decide (a selector): a Kubernetes read. */
export function usesNamespaceLabels(policy: TenantPolicy): boolean {
  return policy.rules.some((rule) => rule.namespaceSelector !== undefined);
}

/** First match wins, so an operator reads the rules top-down as a firewall's. */
export function ruleFor(
  policy: TenantPolicy,
  namespace: string,
  labels: Labels = {},
): AppliedRule | undefined {
  const index = policy.rules.findIndex((rule) => ruleMatches(rule, namespace, labels));
  const rule = index >= 0 ? policy.rules[index] : policy.default;
  if (rule === undefined) return undefined;
  const label = rule.name ?? (index >= 0 ? `rules[${index}]` : 'default');
  return { rule, prefix: `tenant policy (namespace ${namespace}, rule "${label}")` };
}

export function ruleMatches(rule: TenantRule, namespace: string, labels: Labels): boolean {
  if (rule.namespaces === undefined && rule.namespaceSelector === undefined) return false;
  if (rule.namespaces !== undefined && !rule.namespaces.some((p) => wildcardMatches(p, namespace)))
    return false;
  return (
    rule.namespaceSelector === undefined || labelSelectorMatches(rule.namespaceSelector, labels)
  );
}

/** Every restriction the request breaks, each naming the rule field; empty when it is allowed. */
export function policyViolations(rule: TenantRule, request: TenantRequest): string[] {
  const problems: string[] = [];
  if (rule.internetFacing === false && request.scheme === 'internet-facing') {
    problems.push('internet-facing load balancers are not allowed (internetFacing: false)');
  } else if (rule.internetFacing === false && ipv6ThroughInternetGateway(request)) {
    problems.push(
      'an internal dualstack load balancer with ipv6.deny_all_igw_traffic=false is reachable from the internet over IPv6 through an internet gateway, so it counts as internet-facing, which is not allowed (internetFacing: false)',
    );
  }
  if (rule.maxListeners !== undefined && request.listeners > rule.maxListeners) {
    problems.push(
      `${request.listeners} listeners, more than the ${rule.maxListeners} allowed (maxListeners)`,
    );
  }
  const certificates = rule.certificateArns;
  if (certificates !== undefined) {
    for (const arn of request.certificateArns) {
      if (!certificates.some((pattern) => arnPatternMatches(pattern, arn)))
        problems.push(`certificate ${quoted(arn)} is not allowed (certificateArns)`);
    }
  }
  const eips = rule.eipAllocations;
  if (eips !== undefined) {
    for (const id of request.eipAllocations ?? []) {
      if (!eips.some((pattern) => wildcardMatches(pattern, id)))
        problems.push(`Elastic IP allocation ${quoted(id)} is not allowed (eipAllocations)`);
    }
  }
  // securityGroups and securityGroupTags: on the resolved groups, not the annotation's text
  // (model/security-group-admission.ts, applied by functions/nlb/frontend-security-groups.ts).
  problems.push(...extraViolations(rule, request));
  return problems;
}

/** Prefix lists, access logs, names and secondary IPs (issue 32, finding 6). */
function extraViolations(rule: TenantRule, request: TenantRequest): string[] {
  const problems: string[] = [];
  const allowed = (patterns: readonly string[], value: string) =>
    patterns.some((pattern) => wildcardMatches(withNamespace(pattern, request.namespace), value));
  const prefixLists = rule.securityGroupPrefixLists;
  if (prefixLists !== undefined) {
    for (const id of request.securityGroupPrefixLists ?? []) {
      if (!allowed(prefixLists, id))
        problems.push(`prefix list ${quoted(id)} is not allowed (securityGroupPrefixLists)`);
    }
  }
  const attributes = request.loadBalancerAttributes ?? new Map<string, readonly string[]>();
  const buckets = attributes.get('access_logs.s3.bucket') ?? [];
  if (rule.accessLogBuckets !== undefined) {
    for (const bucket of buckets) {
      if (!allowed(rule.accessLogBuckets, bucket))
        problems.push(`access log bucket ${quoted(bucket)} is not allowed (accessLogBuckets)`);
    }
  }
  if (rule.accessLogPrefixes !== undefined) {
    const given = attributes.get('access_logs.s3.prefix') ?? [];
    const logging =
      buckets.length > 0 || attributes.get('access_logs.s3.enabled')?.includes('true');
    // A bucket without a prefix: the logs go to the root of the bucket, outside every namespace's prefix.
    const prefixes = given.length > 0 ? given : logging === true ? [''] : [];
    for (const prefix of prefixes) {
      if (!allowed(rule.accessLogPrefixes, prefix))
        problems.push(
          prefix === ''
            ? 'access log prefix "" (none: the root of the bucket) is not allowed (accessLogPrefixes)'
            : `access log prefix ${quoted(prefix)} is not allowed (accessLogPrefixes)`,
        );
    }
  }
  const name = request.loadBalancerName;
  if (rule.loadBalancerNames !== undefined && name !== undefined) {
    if (!allowed(rule.loadBalancerNames, name))
      problems.push(`load balancer name ${quoted(name)} is not allowed (loadBalancerNames)`);
  }
  const maxSecondary = rule.maxSecondaryIpsPerSubnet;
  if (maxSecondary !== undefined) {
    for (const value of attributes.get('secondary_ips.auto_assigned.per_subnet') ?? []) {
      const count = Number(value);
      if (Number.isInteger(count) && count > maxSecondary)
        problems.push(
          `${count} secondary IP addresses per subnet, more than the ${maxSecondary} allowed (maxSecondaryIpsPerSubnet)`,
        );
    }
  }
  return problems;
}

/**
 * Whether an internal load balancer still takes IPv6 traffic from an internet gateway: dualstack
 * with `ipv6.deny_all_igw_traffic=false`. Unset, AWS makes it `true` on internal load balancers
 * (ELBv2 API reference, LoadBalancerAttribute), so only an explicit `false` opens it.
 */
export function ipv6ThroughInternetGateway(request: TenantRequest): boolean {
  return (
    request.ipAddressType === 'dualstack' &&
    (request.loadBalancerAttributes?.get('ipv6.deny_all_igw_traffic') ?? []).includes('false')
  );
}

/** `{namespace}` in a pattern stands for the Service's namespace (a DNS label: no `*` in it). */
export function withNamespace(pattern: string, namespace: string): string {
  return pattern.split('{namespace}').join(namespace);
}

/**
 * An ARN against a pattern field by field, `*` never crossing a `:`: a tenant cannot satisfy
 * `arn:aws:acm:*:123456789012:certificate/*` with another account's ARN that merely contains
 * `:123456789012:certificate/` further on.
 */
export function arnPatternMatches(pattern: string, arn: string): boolean {
  const wanted = pattern.split(':');
  const fields = arn.split(':');
  return (
    wanted.length === fields.length &&
    wanted.every((field, i) => wildcardMatches(field, fields[i] ?? ''))
  );
}

/** The load balancer's listeners: one per Service port number (TCP and UDP on one port merge). */
export function listenerCount(service: Service): number {
  return new Set((service.spec?.ports ?? []).map((port) => port.port)).size;
}

/**
 * How many of the namespace's other Services come before `service` for the
 * `maxLoadBalancerServices` places. First every load balancer deletion protection keeps: those the
 * state table lists as kept (`kept`, by key: counted even when the Service is gone or its finalizer
 * was stripped), and Services still carrying our finalizer under deletion protection while being
 * deleted or no longer a LoadBalancer of ours (not marked yet). Then, among LoadBalancer Services of
 * ours not being deleted, those already served (they have an address) and the older ones (creation
 * time, then name). A deterministic order, so a burst of creations admits exactly the allowed number
 * whatever order the syncs run in. A Service being deleted without protection does not count: its
 * NLB is on its way out, and a replacement must not be refused for it.
 */
export function servicesAhead(
  service: Service,
  namespaceServices: readonly Service[],
  claim: ClaimPolicy,
  kept: readonly string[] = [],
): number {
  const uid = service.metadata?.uid;
  const keyOf = (s: Service) => `${s.metadata?.namespace ?? ''}/${s.metadata?.name ?? ''}`;
  const self = keyOf(service);
  const keptKeys = new Set(kept.filter((key) => key !== self));
  const mine = order(service);
  const listed = namespaceServices.filter((other) => {
    if (other.metadata?.uid === uid) return false;
    if (keptKeys.has(keyOf(other))) return false;
    // Converted or being deleted under deletion protection: its load balancer stays (issue 32).
    if (needsCleanup(other, claim)) return wantsDeletionProtection(other);
    return (
      wantsLoadBalancer(other, claim) &&
      !isBeingDeleted(other) &&
      ((other.status?.loadBalancer?.ingress?.length ?? 0) > 0 || order(other) < mine)
    );
  }).length;
  return listed + keptKeys.size;
}

export function servicesViolation(rule: TenantRule, ahead: number, namespace: string) {
  const max = rule.maxLoadBalancerServices;
  if (max === undefined || (ahead < max && max > 0)) return undefined;
  if (max === 0)
    return `LoadBalancer Services are not allowed in namespace ${namespace} (maxLoadBalancerServices: 0)`;
  return `namespace ${namespace} already has ${ahead} LoadBalancer Services, the most allowed (maxLoadBalancerServices: ${max})`;
}

export function tenantPolicyError(
  applied: AppliedRule,
  problems: readonly string[],
): TerminalError {
  return new TerminalError(`${applied.prefix}: ${joinProblems(problems)}`);
}

/** Creation time then name, as one sortable string (RFC 3339 times sort as text). */
function order(service: Service): string {
  const created = service.metadata?.creationTimestamp;
  // The API server writes whole seconds; a Date prints milliseconds, which would sort differently.
  const time =
    created instanceof Date ? created.toISOString().replace(/\.\d{3}Z$/, 'Z') : (created ?? '');
  return `${time}\u0000${service.metadata?.name ?? ''}`;
}

/** Pattern syntax, checked when the configuration is read. */
export const patternSyntax = {
  namespace: /^[a-z0-9*]([a-z0-9*-]{0,61}[a-z0-9*])?$/,
  certificateArn:
    /^arn:(aws[a-z-]*|\*):(acm|iam|\*):[a-z0-9*-]*:(\d{12}|\*|):[A-Za-z0-9*/_+=.,@-]+$/,
  eipAllocation: /^eipalloc-[0-9a-f*]{1,17}$/,
  // A group ID pattern (`sg-` then hex or `*`: it matches the ID), or a Name tag pattern: up to 255
  // printable characters not starting with `sg-` (no commas, which split the annotation).
  securityGroup: /^(?:sg-[0-9a-f*]{1,17}|(?!sg-)[\x20-\x2b\x2d-\x7e]{1,255})$/,
  // key=value: a tag key (no "=") and a value pattern, printable, at most AWS's 128 and 256.
  securityGroupTag: /^[\x20-\x3c\x3e-\x7e]{1,128}=[\x20-\x7e]{0,256}$/,
  prefixList: /^pl-[0-9a-f*]{1,17}$/,
  // S3 bucket characters, `*` and `{namespace}`.
  accessLogBucket: /^(?:[a-z0-9.*-]|\{namespace\}){1,255}$/,
  // What the prefix attribute accepts (no commas, which split the annotation); "" is the root.
  accessLogPrefix: /^[\x20-\x2b\x2d-\x7e]{0,1024}$/,
  // Load balancer name characters, `*` and `{namespace}`.
  loadBalancerName: /^(?:[A-Za-z0-9*-]|\{namespace\}){1,255}$/,
} as const;
