/**
 * The tenant policy: what each namespace may ask of the shared AWS account, decided from the
 * Service, its parsed annotations and configuration alone, before any AWS call. Pure; the lookups it
 * needs (namespace labels, the namespace's other Services) are done by functions/aws/tenant-policy-check.ts.
 */
import { wantsLoadBalancer, type ClaimPolicy } from '../../core/claim';
import { quoted, joinProblems } from '../../core/echo';
import { TerminalError } from '../../core/errors';
import {
  labelSelectorMatches,
  wildcardMatches,
  type LabelSelector,
  type Labels,
} from '../../core/namespace-selector';
import { isBeingDeleted, type Service } from '../../core/objects';
import type { Scheme } from './types';

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
   * Patterns for the security-groups annotation's values as written: group IDs (`sg-0ab*`) or
   * Name tags (`team-a-*`). A name pattern trusts whoever may set Name tags in the VPC.
   */
  readonly securityGroups?: readonly string[] | undefined;
  /** LoadBalancer Services this controller serves in one namespace. */
  readonly maxLoadBalancerServices?: number | undefined;
  /** Listeners (distinct Service port numbers) of one load balancer. */
  readonly maxListeners?: number | undefined;
  /**
   * Subnets named by annotation must carry the scheme's role tag (`kubernetes.io/role/elb` or
   * `kubernetes.io/role/internal-elb`), as discovered ones do. Default true wherever a rule applies.
   */
  readonly requireSubnetRoleTag?: boolean | undefined;
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
  /** The security-groups annotation's IDs and Name tags. */
  readonly securityGroups?: readonly string[] | undefined;
  readonly listeners: number;
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
  const groups = rule.securityGroups;
  if (groups !== undefined) {
    for (const group of request.securityGroups ?? []) {
      if (!groups.some((pattern) => wildcardMatches(pattern, group)))
        problems.push(`security group ${quoted(group)} is not allowed (securityGroups)`);
    }
  }
  return problems;
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
 * How many of the namespace's other LoadBalancer Services of ours come before `service` for the
 * `maxLoadBalancerServices` places: those already served (they have an address), then the older
 * ones (creation time, then name). A deterministic order, so a burst of creations admits exactly
 * the allowed number whatever order the syncs run in.
 */
export function servicesAhead(
  service: Service,
  namespaceServices: readonly Service[],
  claim: ClaimPolicy,
): number {
  const uid = service.metadata?.uid;
  const mine = order(service);
  return namespaceServices.filter(
    (other) =>
      other.metadata?.uid !== uid &&
      wantsLoadBalancer(other, claim) &&
      !isBeingDeleted(other) &&
      ((other.status?.loadBalancer?.ingress?.length ?? 0) > 0 || order(other) < mine),
  ).length;
}

export function servicesViolation(rule: TenantRule, ahead: number, namespace: string) {
  const max = rule.maxLoadBalancerServices;
  if (max === undefined || ahead < max) return undefined;
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
  // A Name tag value: up to 255 printable characters (no commas, which split the annotation).
  securityGroup: /^[\x20-\x2b\x2d-\x7e]{1,255}$/,
} as const;
