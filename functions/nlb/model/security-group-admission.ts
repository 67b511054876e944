/**
 * Which of the groups the security-groups annotation resolves to a tenant may attach (issue 32,
 * finding 5). Decided on the resolved groups, their IDs and tags as DescribeSecurityGroups gave
 * them, never on the annotation's text: a Name tag can be anything, `sg-0abc-team-b-db` included.
 * Pure; functions/nlb/frontend-security-groups.ts makes the one lookup and applies both checks.
 */
import { quoted } from '../../core/echo';
import { wildcardMatches } from '../../core/namespace-selector';
import { ownershipTags } from './naming';
import type { TenantRule } from './tenant-policy';

/** A group the annotation named, as AWS described it. */
export interface ResolvedSecurityGroup {
  /** The annotation's value: a group ID or a Name tag. */
  readonly value: string;
  readonly id: string;
  /** Every tag of the group, key to value. */
  readonly tags: ReadonlyMap<string, string>;
}

/** How an owner marks its groups: a key (lower case) and, for some, the value that means "owned". */
interface OwnerMark {
  readonly matches: (key: string, value: string) => boolean;
  /** Completes "security group X (sg-…) …". */
  readonly says: string;
}

const prefixed =
  (...prefixes: string[]) =>
  (key: string) =>
    prefixes.some((prefix) => key.startsWith(prefix));

/**
 * Tags that say a group belongs to someone else: attached to our NLB, it could no longer be
 * deleted by its owner (AWS refuses while a load balancer holds it). Keys are compared in lower
 * case, as IAM compares them in conditions; checked in this order, the first match is named.
 */
const ownerMarks: readonly OwnerMark[] = [
  {
    matches: (key) => key === ownershipTags.serviceUid,
    says: 'is one this controller manages for a Service',
  },
  {
    matches: prefixed('serverless-service-controller.io/'),
    says: 'carries this controller’s ownership tags (another cluster’s or Service’s)',
  },
  {
    // aws:eks:cluster-name: the cluster security group EKS creates (it also carries
    // kubernetes.io/cluster/<name>=owned); eks:*: groups EKS creates for managed node groups.
    matches: prefixed('aws:eks:', 'eks:'),
    says: 'is owned by EKS (the cluster security group or a managed node group’s)',
  },
  {
    matches: prefixed('elbv2.k8s.aws/', 'ingress.k8s.aws/', 'service.k8s.aws/'),
    says: 'is owned by the AWS Load Balancer Controller',
  },
  {
    // The legacy cloud provider's load balancer groups, EKS's cluster security group, and what
    // eksctl, kops and similar create for a cluster. `shared` marks a group lent to a cluster.
    matches: (key, value) => key.startsWith('kubernetes.io/cluster/') && value === 'owned',
    says: 'is owned by a Kubernetes cluster (EKS, the legacy cloud provider or the cluster’s installer)',
  },
  {
    matches: (key) => key === 'kubernetescluster',
    says: 'is owned by a Kubernetes cluster (the legacy cloud provider’s tag)',
  },
  {
    matches: (key, value) =>
      key.startsWith('sigs.k8s.io/cluster-api-provider-aws/cluster/') && value === 'owned',
    says: 'is owned by Cluster API Provider AWS',
  },
];

/**
 * Why a group is not the tenant's to attach: "is owned by … (tag "k=v")", or undefined for a
 * group no controller or EKS claims. Applies with or without a tenant policy.
 */
export function foreignOwnership(tags: ReadonlyMap<string, string>): string | undefined {
  for (const mark of ownerMarks) {
    for (const [key, value] of tags) {
      if (mark.matches(key.toLowerCase(), value.toLowerCase()))
        return `${mark.says} (tag ${quoted(`${key}=${value}`)})`;
    }
  }
  return undefined;
}

/** The part of a rule that restricts security groups. */
export type SecurityGroupRestriction = Pick<TenantRule, 'securityGroups' | 'securityGroupTags'>;

/**
 * The restriction of the rule that applies to a Service, carried from the tenant policy check to
 * where the groups are resolved; `prefix` names the namespace and rule in the Warning.
 */
export interface SecurityGroupPolicy extends SecurityGroupRestriction {
  readonly prefix: string;
}

/** Whether a rule restricts security groups at all (either key given). */
export function restrictsSecurityGroups(rule: SecurityGroupRestriction): boolean {
  return rule.securityGroups !== undefined || rule.securityGroupTags !== undefined;
}

/**
 * A `securityGroups` pattern: one starting with `sg-` matches the resolved group ID, any other
 * the resolved group's Name tag (a group without one matches no Name pattern).
 */
export function securityGroupPatternMatches(
  pattern: string,
  group: ResolvedSecurityGroup,
): boolean {
  if (pattern.startsWith('sg-')) return wildcardMatches(pattern, group.id);
  const name = group.tags.get('Name');
  return name !== undefined && wildcardMatches(pattern, name);
}

/**
 * A `securityGroupTags` entry, `key=value`: the group carries the key (exactly, split at the first
 * `=`) with a value the value pattern matches (`*` for any run of characters).
 */
export function securityGroupTagMatches(entry: string, group: ResolvedSecurityGroup): boolean {
  const at = entry.indexOf('=');
  if (at < 0) return false;
  const value = group.tags.get(entry.slice(0, at));
  return value !== undefined && wildcardMatches(entry.slice(at + 1), value);
}

/**
 * Every group the rule does not admit, each naming the annotation's value, the resolved ID and the
 * rule keys; empty when the rule restricts nothing. A group is admitted when any `securityGroups`
 * pattern or any `securityGroupTags` entry matches it.
 */
export function securityGroupViolations(
  rule: SecurityGroupRestriction,
  groups: readonly ResolvedSecurityGroup[],
): string[] {
  if (!restrictsSecurityGroups(rule)) return [];
  const keys = [
    ...(rule.securityGroups !== undefined ? ['securityGroups'] : []),
    ...(rule.securityGroupTags !== undefined ? ['securityGroupTags'] : []),
  ].join(', ');
  return groups
    .filter(
      (group) =>
        !(rule.securityGroups ?? []).some((p) => securityGroupPatternMatches(p, group)) &&
        !(rule.securityGroupTags ?? []).some((e) => securityGroupTagMatches(e, group)),
    )
    .map((group) => `security group ${quoted(group.value)} (${group.id}) is not allowed (${keys})`);
}
