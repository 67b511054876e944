import { clipped } from './echo';
import type { Service } from './objects';

/**
 * Size limits on what a Service may ask of its load balancer, checked from counts and lengths
 * before anything is parsed or built: a Service the API server accepts can hold ~85K source ranges
 * or a 200 KB annotation, and building rules or messages from those costs every tenant sharing the
 * functions (issue 19). Each limit sits well above what an NLB can use, so no working Service is
 * refused by it; the AWS quotas themselves are checked later by the NLB model.
 */
export const serviceLimits = {
  /**
   * Source ranges (spec or legacy annotation). Each range needs a security group rule per listener
   * protocol plus one for ICMP; a security group holds 60 inbound rules by default and at most
   * 1,000 with a raised quota, so more than 1,000 ranges can never be served.
   */
  sourceRanges: 1000,
  /** Service ports: 50 listeners (the NLB quota), each at most one TCP and one UDP port (TCP_UDP). */
  servicePorts: 100,
  /**
   * Characters of one load balancer annotation value. The longest legitimate ones: 45 tags of
   * 128 + 256 characters (~17,400), or 1,000 legacy source ranges (~19,000).
   */
  annotationValueChars: 32_768,
  /** Characters of all `service.beta.kubernetes.io/` annotations together, names included. */
  loadBalancerAnnotationChars: 65_536,
} as const;

/** The longest annotation name Kubernetes allows: a 253-character prefix, "/" and 63 characters. */
const annotationNameChars = 317;

/** Where the annotations load balancer controllers read live; others (kubectl's) are not ours. */
export const loadBalancerAnnotationPrefix = 'service.beta.kubernetes.io/';

export const legacySourceRangesAnnotation =
  'service.beta.kubernetes.io/load-balancer-source-ranges';

/** How many comma-separated, non-empty items a list annotation holds, without splitting it. */
export function listItemCount(value: string): number {
  let count = 0;
  let inItem = false;
  for (let i = 0; i < value.length; i++) {
    const c = value.charCodeAt(i);
    if (c === 44 /* , */) inItem = false;
    else if (!inItem && c !== 32 && c !== 9 && c !== 10 && c !== 13) {
      inItem = true;
      count++;
    }
  }
  return count;
}

/** `what has N entries, over the limit of L`, or nothing. */
export function countProblem(what: string, count: number, limit: number): string | undefined {
  return count > limit ? `${what} has ${count} entries, over the limit of ${limit}` : undefined;
}

/** Problems with the size of the load balancer annotations: each value, then all together. */
export function annotationSizeProblems(
  annotations: Readonly<Record<string, string>> | undefined,
): string[] {
  const problems: string[] = [];
  let total = 0;
  for (const [name, value] of Object.entries(annotations ?? {})) {
    if (!name.startsWith(loadBalancerAnnotationPrefix)) continue;
    total += name.length + value.length;
    if (value.length > serviceLimits.annotationValueChars) {
      problems.push(
        `annotation ${clipped(name, annotationNameChars)} is ${value.length} characters, over the limit of ${serviceLimits.annotationValueChars}`,
      );
    }
  }
  // A single oversized value already says what to fix; the total would only repeat it.
  if (problems.length === 0 && total > serviceLimits.loadBalancerAnnotationChars) {
    problems.push(
      `the ${loadBalancerAnnotationPrefix} annotations hold ${total} characters, over the limit of ${serviceLimits.loadBalancerAnnotationChars}`,
    );
  }
  return problems;
}

/**
 * Everything over a size limit, from counts and lengths alone. Runs before any other validation,
 * which then only sees Services of bounded size.
 */
export function sizeProblems(service: Service): string[] {
  const spec = service.spec ?? {};
  const annotations = service.metadata?.annotations;
  const problems = annotationSizeProblems(annotations);
  const specRanges = spec.loadBalancerSourceRanges ?? [];
  const legacy = annotations?.[legacySourceRangesAnnotation];
  const rangeProblem =
    specRanges.length > 0
      ? countProblem('spec.loadBalancerSourceRanges', specRanges.length, serviceLimits.sourceRanges)
      : legacy !== undefined && legacy.length <= serviceLimits.annotationValueChars
        ? countProblem(
            `annotation ${legacySourceRangesAnnotation}`,
            listItemCount(legacy),
            serviceLimits.sourceRanges,
          )
        : undefined;
  if (rangeProblem !== undefined) problems.push(rangeProblem);
  const portProblem = countProblem(
    'spec.ports',
    (spec.ports ?? []).length,
    serviceLimits.servicePorts,
  );
  if (portProblem !== undefined) problems.push(portProblem);
  return problems;
}
