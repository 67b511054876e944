import type { ClaimPolicy } from '../core/claim';
import { stableHash, type JsonValue } from '../core/hash';
import type { Labels } from '../core/namespace-selector';
import type { Service } from '../core/objects';
import type { NamespaceDirectory } from '../sync/ports';
import type { LoadBalancerOptions } from './model/annotations';
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

/** What the rest of an Ensure must still enforce once the policy has allowed the Service. */
export interface TenantDecision {
  /**
   * Set when annotated subnets must carry the scheme's role tag: the rule's name, for the
   * Warning (only DescribeSubnets can tell, so resolveSubnets checks it).
   */
  readonly subnetRoleTagRequiredBy?: string | undefined;
}

/**
 * Applies the tenant policy to one Ensure, before any AWS call: throws a TerminalError naming the
 * rule and every violation. Kubernetes is read only when the policy needs it: the namespace's
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
      securityGroups: options.securityGroups,
      listeners: listenerCount(service),
    });
    // Counting costs a list of the namespace's Services: only for a load balancer not created yet.
    if (problems.length === 0 && !created && applied.rule.maxLoadBalancerServices !== undefined) {
      const others = await this.namespaces.listServices(namespace);
      const problem = servicesViolation(
        applied.rule,
        servicesAhead(service, others, this.claim),
        namespace,
      );
      if (problem !== undefined) problems.push(problem);
    }
    if (problems.length > 0) throw tenantPolicyError(applied, problems);
    return applied.rule.requireSubnetRoleTag === false
      ? {}
      : { subnetRoleTagRequiredBy: applied.prefix };
  }

  private async namespaceLabels(namespace: string): Promise<Labels> {
    const cached = this.labels.get(namespace);
    if (cached !== undefined && this.now() - cached.at < labelsTtlMs) return cached.labels;
    const labels = await this.namespaces.namespaceLabels(namespace);
    this.labels.set(namespace, { labels, at: this.now() });
    return labels;
  }
}
