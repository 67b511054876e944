import { isBeingDeleted, type Service } from './objects';

/** The upstream finalizer; ours only when we serve class-less Services as the built-in controller would. */
export const upstreamFinalizer = 'service.kubernetes.io/load-balancer-cleanup';
/** Our own finalizer, used when we claim a LoadBalancerClass, so we never touch the built-in one's. */
export const classFinalizer = 'serverless-service-controller.io/load-balancer-cleanup';
/** The class the deployment claims by default. */
export const defaultLoadBalancerClass = 'serverless-service-controller.io/nlb';

/** Which Services are ours: one configuration for the forwarder and the functions alike. */
export interface ClaimPolicy {
  /** Services whose `spec.loadBalancerClass` equals this are ours. */
  readonly loadBalancerClass: string;
  /** Also serve Services without a class (seed behaviour; off on EKS, where the built-in controller does). */
  readonly claimClassless: boolean;
}

export const defaultClaimPolicy: ClaimPolicy = {
  loadBalancerClass: defaultLoadBalancerClass,
  claimClassless: false,
};

/** The finalizer we add: the mode's own. */
export function finalizerFor(claim: ClaimPolicy): string {
  return claim.claimClassless ? upstreamFinalizer : classFinalizer;
}

/**
 * Every finalizer of ours the Service carries, whichever mode added it (claimClassless may have
 * been switched since). Ours is always the domain-prefixed one; upstream's only where we serve
 * class-less Services, or on a Service of our class: the built-in controller ignores Services
 * with a class and, finding its finalizer on one, releases it at once.
 */
export function ourFinalizersOn(service: Service, claim: ClaimPolicy): string[] {
  const upstreamIsOurs =
    claim.claimClassless || service.spec?.loadBalancerClass === claim.loadBalancerClass;
  return (service.metadata?.finalizers ?? []).filter(
    (f) => f === classFinalizer || (f === upstreamFinalizer && upstreamIsOurs),
  );
}

export function wantsLoadBalancer(service: Service, claim: ClaimPolicy): boolean {
  if (service.spec?.type !== 'LoadBalancer') return false;
  const lbClass = service.spec.loadBalancerClass;
  if (lbClass === undefined || lbClass === '') return claim.claimClassless;
  return lbClass === claim.loadBalancerClass;
}

export function hasFinalizer(service: Service, finalizer: string): boolean {
  return service.metadata?.finalizers?.includes(finalizer) ?? false;
}

/**
 * A finalizer of ours is present and the Service is going away or no longer wants an LB from us. The
 * seed looked only at deletion and leaked an NLB when a type change was missed while the watcher
 * was down (S1).
 */
export function needsCleanup(service: Service, claim: ClaimPolicy): boolean {
  if (ourFinalizersOn(service, claim).length === 0) return false;
  return isBeingDeleted(service) || !wantsLoadBalancer(service, claim);
}
