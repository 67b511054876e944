import type { ClaimPolicy } from '../core/claim';
import { stableHash, type JsonValue } from '../core/hash';
import type { Labels } from '../core/namespace-selector';
import type { Service } from '../core/objects';
import type { NamespaceDirectory } from '../sync/ports';
import type { LoadBalancerOptions } from './model/annotation-types';
import {
  restrictsSecurityGroups,
  type SecurityGroupPolicy,
} from './model/security-group-admission';
import {
  listenerCount,
  policyViolations,
  ruleFor,
  servicesAhead,
  servicesViolation,
  tenantPolicyError,
  usesNamespaceLabels,
  type TenantPolicy,
} from './model/tenant-policy';
import type { Scheme } from './model/types';

/** How long a function instance trusts a namespace's labels: a sweep over one namespace reads them once. */
const labelsTtlMs = 30_000;

/** The namespace's load balancers kept by deletion protection, by Service key (state table). */
export interface KeptLoadBalancers {
  keptLoadBalancers(namespace: string): Promise<readonly string[]>;
}

/** What the rest of an Ensure must still enforce once the policy has allowed the Service. */
export interface TenantDecision {
  /**
   * Set when annotated subnets must carry the scheme's role tag: the rule's name, for the
   * Warning (only DescribeSubnets can tell, so resolveSubnets checks it).
   */
  readonly subnetRoleTagRequiredBy?: string | undefined;
  /**
   * Set when the rule restricts security groups (`securityGroups`, `securityGroupTags`): checked
   * on the groups the security-groups annotation resolves to, with the lookup that resolves them
   * (an ID or Name tag as written says nothing of which group it is).
   */
  readonly securityGroups?: SecurityGroupPolicy | undefined;
}

/**
 * Applies the tenant policy to one Ensure, before any AWS call: throws a TerminalError naming the
 * rule and every violation (security groups excepted: see TenantDecision.securityGroups). Kubernetes is read only when the policy needs it: the namespace's
 * labels when a rule has a selector, its Services when a maximum applies to a load balancer not
 * yet created.
 */
export class TenantPolicyEnforcer {
  /** Part of the provider's fingerprint: a policy change re-checks every Service once. */
  readonly fingerprint: string;
  private readonly labels = new Map<string, { readonly labels: Labels; readonly at: number }>();

  constructor(
    private readonly policy: TenantPolicy,
    private readonly claim: ClaimPolicy,
    private readonly namespaces: NamespaceDirectory,
    /** The state table's list of kept NLBs: counted even once their Service objects are gone. */
    private readonly kept: KeptLoadBalancers = { keptLoadBalancers: () => Promise.resolve([]) },
    private readonly now: () => number = Date.now,
  ) {
    this.fingerprint = stableHash(JSON.parse(JSON.stringify(policy)) as JsonValue);
  }

  async check(
    service: Service,
    options: LoadBalancerOptions,
    scheme: Scheme,
    created: boolean,
  ): Promise<TenantDecision> {
    const namespace = service.metadata?.namespace ?? '';
    const labels = usesNamespaceLabels(this.policy)
      ? await this.namespaceLabels(namespace)
      : undefined;
    const applied = ruleFor(this.policy, namespace, labels);
    if (applied === undefined) return {};
    const problems = policyViolations(applied.rule, {
      namespace,
      scheme,
      certificateArns: options.certificateArns,
      eipAllocations: options.eipAllocations,
      listeners: listenerCount(service),
      ipAddressType: options.ipAddressType,
      loadBalancerAttributes: attributeValues(options),
      securityGroupPrefixLists: options.securityGroupPrefixLists,
      loadBalancerName: options.loadBalancerName,
    });
    // Counting costs a list of the namespace's Services: only for a load balancer not created yet.
    // A maximum of 0 refuses without counting.
    const max = applied.rule.maxLoadBalancerServices;
    if (problems.length === 0 && !created && max !== undefined) {
      const ahead =
        max === 0
          ? 0
          : servicesAhead(
              service,
              await this.namespaces.listServices(namespace),
              this.claim,
              await this.kept.keptLoadBalancers(namespace),
            );
      const problem = servicesViolation(applied.rule, ahead, namespace);
      if (problem !== undefined) problems.push(problem);
    }
    if (problems.length > 0) throw tenantPolicyError(applied, problems);
    const { securityGroups, securityGroupTags } = applied.rule;
    return {
      ...(applied.rule.requireSubnetRoleTag === false
        ? {}
        : { subnetRoleTagRequiredBy: applied.prefix }),
      ...(restrictsSecurityGroups(applied.rule)
        ? { securityGroups: { prefix: applied.prefix, securityGroups, securityGroupTags } }
        : {}),
    };
  }

  private async namespaceLabels(namespace: string): Promise<Labels> {
    const cached = this.labels.get(namespace);
    if (cached !== undefined && this.now() - cached.at < labelsTtlMs) return cached.labels;
    const labels = await this.namespaces.namespaceLabels(namespace);
    this.labels.set(namespace, { labels, at: this.now() });
    return labels;
  }
}

/**
 * Every value the Service gives each load balancer attribute: the attributes annotation and the
 * legacy one-attribute annotations (access-log bucket and prefix), so neither spelling escapes.
 */
function attributeValues(options: LoadBalancerOptions): Map<string, string[]> {
  const values = new Map<string, string[]>();
  const add = (key: string, value: string) => values.set(key, [...(values.get(key) ?? []), value]);
  for (const [key, value] of options.loadBalancerAttributes ?? []) add(key, value);
  for (const [key, { value }] of options.loadBalancerAttributeAliases ?? []) {
    if (!(values.get(key) ?? []).includes(value)) add(key, value);
  }
  return values;
}
