import { needsCleanup, ourFinalizersOn, wantsLoadBalancer, type ClaimPolicy } from './claim';
import { needsUpdate } from './needs-update';
import { evaluateNode, type NodePolicy } from './node-policy';
import { canonicalJson } from './hash';
import type { Node, Service } from './objects';

/** S1: an added Service is work only if it wants an LB from us or has our cleanup pending. */
export function shouldEnqueueServiceAdd(service: Service, claim: ClaimPolicy): boolean {
  return wantsLoadBalancer(service, claim) || needsCleanup(service, claim);
}

/** S2: an update is work only if a field that matters changed or cleanup is pending. */
export function shouldEnqueueServiceUpdate(
  oldService: Service,
  newService: Service,
  claim: ClaimPolicy,
): boolean {
  return needsUpdate(oldService, newService, claim).length > 0 || needsCleanup(newService, claim);
}

/**
 * A deleted Service is work if it was ours: normally our finalizer holds it until cleanup, but a
 * finalizer removed by hand would otherwise leak the NLB. The sync finds it gone and deletes from state (S7).
 */
export function shouldEnqueueServiceDelete(service: Service, claim: ClaimPolicy): boolean {
  return wantsLoadBalancer(service, claim) || ourFinalizersOn(service, claim).length > 0;
}

/**
 * Whether a Node add (old undefined), update or delete (new undefined) can change the eligible host
 * set: eligibility flipped, or an eligible node's providerID or labels changed (Services may
 * choose their targets by label: aws-load-balancer-target-node-labels).
 */
export function nodeChangeAffectsHosts(
  oldNode: Node | undefined,
  newNode: Node | undefined,
  policy: NodePolicy,
): boolean {
  const before = oldNode === undefined ? undefined : evaluateNode(oldNode, policy);
  const after = newNode === undefined ? undefined : evaluateNode(newNode, policy);
  const wasEligible = before?.eligible === true;
  const isEligible = after?.eligible === true;
  if (wasEligible !== isEligible) return true;
  if (before?.eligible === true && after?.eligible === true) {
    return (
      before.host.providerID !== after.host.providerID ||
      before.host.name !== after.host.name ||
      canonicalJson(oldNode?.metadata?.labels ?? {}) !==
        canonicalJson(newNode?.metadata?.labels ?? {})
    );
  }
  return false;
}
