import { describe, expect, it } from 'vitest';
import {
  classFinalizer,
  defaultClaimPolicy,
  finalizerFor,
  needsCleanup,
  ourFinalizersOn,
  upstreamFinalizer,
  wantsLoadBalancer,
  type ClaimPolicy,
} from '../../../functions/core/claim';
import { makeService } from '../../../kit/core-objects';

const ourClass = defaultClaimPolicy.loadBalancerClass;
const classMode: ClaimPolicy = { loadBalancerClass: ourClass, claimClassless: false };
const classlessMode: ClaimPolicy = { loadBalancerClass: ourClass, claimClassless: true };

describe('wantsLoadBalancer (LoadBalancerClass rule)', () => {
  it.each([
    ['class-less LoadBalancer, class mode', classMode, {}, false],
    ['class-less LoadBalancer, class-less mode', classlessMode, {}, true],
    ['our class, class mode', classMode, { loadBalancerClass: ourClass }, true],
    ['our class, class-less mode', classlessMode, { loadBalancerClass: ourClass }, true],
    ['another class, class mode', classMode, { loadBalancerClass: 'service.k8s.aws/nlb' }, false],
    ['another class, class-less mode', classlessMode, { loadBalancerClass: 'other.io/lb' }, false],
    [
      'ClusterIP with our class',
      classMode,
      { type: 'ClusterIP', loadBalancerClass: ourClass },
      false,
    ],
    ['NodePort, class-less mode', classlessMode, { type: 'NodePort' }, false],
  ])('%s → %s', (_name, claim, options, expected) => {
    expect(wantsLoadBalancer(makeService(options), claim)).toBe(expected);
  });
});

describe('finalizerFor', () => {
  it('uses the upstream finalizer only when claiming class-less Services', () => {
    expect(finalizerFor(classlessMode)).toBe('service.kubernetes.io/load-balancer-cleanup');
  });

  it('uses our own domain-prefixed finalizer when claiming a class', () => {
    expect(finalizerFor(classMode)).toBe(classFinalizer);
    expect(classFinalizer).not.toBe(upstreamFinalizer);
    expect(classFinalizer).toMatch(/^[a-z0-9.-]+\.[a-z]+\/load-balancer-cleanup$/);
  });
});

describe('needsCleanup', () => {
  it('is true when our finalizer is present and the Service is being deleted', () => {
    const service = makeService({
      loadBalancerClass: ourClass,
      finalizers: [classFinalizer],
      deleting: true,
    });
    expect(needsCleanup(service, classMode)).toBe(true);
  });

  it('is true when a type change to ClusterIP was missed (finalizer still there, no deletion)', () => {
    const service = makeService({ type: 'ClusterIP', finalizers: [upstreamFinalizer] });
    expect(needsCleanup(service, classlessMode)).toBe(true);
  });

  it('is false without our finalizer, even while deleting', () => {
    expect(needsCleanup(makeService({ deleting: true }), classlessMode)).toBe(false);
  });

  it('ignores the other mode’s finalizer: in class mode the upstream finalizer is not ours', () => {
    const builtIn = makeService({ deleting: true, finalizers: [upstreamFinalizer] });
    expect(needsCleanup(builtIn, classMode)).toBe(false);
  });

  it('is false for a Service we still serve and that is not being deleted', () => {
    const service = makeService({ loadBalancerClass: ourClass, finalizers: [classFinalizer] });
    expect(needsCleanup(service, classMode)).toBe(false);
  });
});

describe('ourFinalizersOn (finalizers left by a claimClassless switch)', () => {
  const both = [upstreamFinalizer, 'example.com/hold', classFinalizer];
  it.each([
    [
      'our class, class mode',
      classMode,
      { loadBalancerClass: ourClass },
      [upstreamFinalizer, classFinalizer],
    ],
    [
      'our class, class-less mode',
      classlessMode,
      { loadBalancerClass: ourClass },
      [upstreamFinalizer, classFinalizer],
    ],
    ['class-less, class-less mode', classlessMode, {}, [upstreamFinalizer, classFinalizer]],
    [
      'class-less, class mode: upstream’s is the built-in controller’s',
      classMode,
      {},
      [classFinalizer],
    ],
    [
      'another class, class mode',
      classMode,
      { loadBalancerClass: 'service.k8s.aws/nlb' },
      [classFinalizer],
    ],
  ])('%s', (_name, claim, options, expected) => {
    expect(ourFinalizersOn(makeService({ ...options, finalizers: both }), claim)).toEqual(expected);
  });

  it('makes cleanup pending in class mode for a Service of our class carrying only upstream’s finalizer', () => {
    const service = makeService({
      loadBalancerClass: ourClass,
      finalizers: [upstreamFinalizer],
      deleting: true,
    });
    expect(needsCleanup(service, classMode)).toBe(true);
  });
});
