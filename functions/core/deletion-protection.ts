import type { Service } from './objects';

/**
 * The NLB attributes annotation (aws-load-balancer-controller's name). Read here, outside the NLB
 * model, because deletion protection decides more than the NLB: the tenant policy counts what it
 * keeps, and a Service list keeps the fact (functions/kube) while dropping the annotations.
 */
export const attributesAnnotation = 'service.beta.kubernetes.io/aws-load-balancer-attributes';

/**
 * Whether the Service asks for deletion protection, read straight from its annotations so that a
 * Service with another invalid annotation is still protected: the delete path must not depend on
 * the whole spec being valid.
 */
export function wantsDeletionProtection(service: Service): boolean {
  const value = service.metadata?.annotations?.[attributesAnnotation];
  if (value === undefined) return false;
  return value
    .split(',')
    .map((pair) => pair.split('=').map((part) => part.trim()))
    .some(([key, v]) => key === 'deletion_protection.enabled' && v === 'true');
}
