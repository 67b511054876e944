import { instanceIdFromProviderID, type Host } from './hosts';
import { isBeingDeleted, type Node } from './objects';

/**
 * `stable` (default) follows upstream since KEP-3458: readiness and cordoning do not move nodes in
 * and out of load balancers, the NLB health check does. `seed` is the v1.15 predicate (S15).
 */
export type NodePolicy = 'stable' | 'seed';

export const excludeFromLoadBalancersLabel =
  'node.kubernetes.io/exclude-from-external-load-balancers';
export const seedExcludeBalancerLabel = 'alpha.service-controller.kubernetes.io/exclude-balancer';
export const masterRoleLabel = 'node-role.kubernetes.io/master';
export const clusterAutoscalerDeletionTaint = 'ToBeDeletedByClusterAutoscaler';

export type NodeVerdict =
  | { readonly eligible: true; readonly host: Host }
  | {
      readonly eligible: false;
      readonly reason: string;
      /** True when the user should hear about it (a Warning), not just a quiet exclusion. */
      readonly warn: boolean;
    };

export function evaluateNode(node: Node, policy: NodePolicy): NodeVerdict {
  const excluded = policy === 'seed' ? seedExclusion(node) : stableExclusion(node);
  if (excluded !== undefined) return { eligible: false, reason: excluded, warn: false };
  const providerID = node.spec?.providerID ?? '';
  const instanceId = instanceIdFromProviderID(providerID);
  if (instanceId === undefined) {
    return {
      eligible: false,
      warn: true,
      reason: `node ${node.metadata?.name ?? ''} has no EC2 instance in its providerID "${providerID}" (Fargate, hybrid or not yet initialised) and cannot be a Network Load Balancer target`,
    };
  }
  return { eligible: true, host: { name: node.metadata?.name ?? '', providerID, instanceId } };
}

export function isEligibleNode(node: Node, policy: NodePolicy): boolean {
  return evaluateNode(node, policy).eligible;
}

function stableExclusion(node: Node): string | undefined {
  if (isBeingDeleted(node)) return 'node is being deleted';
  const label = node.metadata?.labels?.[excludeFromLoadBalancersLabel];
  if (label !== undefined && !isGoFalse(label)) {
    return `node is labelled ${excludeFromLoadBalancersLabel}=${label}`;
  }
  if (node.spec?.taints?.some((taint) => taint.key === clusterAutoscalerDeletionTaint)) {
    return 'node is being removed by the cluster autoscaler';
  }
  return undefined;
}

/**
 * The seed's predicate, with the ServiceNodeExclusion gate treated as on. A node with conditions
 * but no Ready condition is kept, as the seed kept it.
 */
function seedExclusion(node: Node): string | undefined {
  if (node.spec?.unschedulable === true) return 'node is unschedulable';
  const labels = node.metadata?.labels ?? {};
  if (masterRoleLabel in labels) return `node is labelled ${masterRoleLabel}`;
  if (seedExcludeBalancerLabel in labels) return `node is labelled ${seedExcludeBalancerLabel}`;
  const conditions = node.status?.conditions ?? [];
  if (conditions.length === 0) return 'node has no conditions';
  if (conditions.some((c) => c.type === 'Ready' && c.status !== 'True')) return 'node is not Ready';
  return undefined;
}

/**
 * The label's value is read as Go's strconv.ParseBool, as upstream reads it (#131085): false-like
 * values keep the node; true-like, empty and unparseable values exclude it.
 */
function isGoFalse(value: string): boolean {
  return ['0', 'f', 'F', 'false', 'FALSE', 'False'].includes(value);
}
