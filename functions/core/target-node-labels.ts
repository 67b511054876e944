import type { Service } from './objects';

/**
 * aws-load-balancer-controller's annotation: only nodes carrying every listed label are targets of
 * the Service's load balancer. The core reads it because it decides each Service's host set.
 */
export const targetNodeLabelsAnnotation =
  'service.beta.kubernetes.io/aws-load-balancer-target-node-labels';

/**
 * Bounds on one Service's selector. Every Service's selector keys reach node sync, which is shared
 * by the whole cluster, so what one Service may ask is capped before it is parsed (issue 32,
 * finding 1). aws-load-balancer-controller has no such cap; selectors in use name one to three labels.
 */
export const nodeSelectorLimits = {
  /** Label pairs in one selector. */
  labels: 10,
  /** Characters of the annotation value: ten long prefixed keys with their values fit. */
  characters: 4096,
} as const;

/** Label key → value that a node must carry, every pair of it. Empty means every node. */
export type NodeLabelSelector = Readonly<Record<string, string>>;

const labelName = /^([A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?)?$/;
const dnsSubdomain = /^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$/;

/** Kubernetes' rule for a label key: an optional DNS-subdomain prefix and a name of ≤ 63. */
function labelKeyProblem(key: string): string | undefined {
  const slash = key.lastIndexOf('/');
  const prefix = slash === -1 ? undefined : key.slice(0, slash);
  const name = slash === -1 ? key : key.slice(slash + 1);
  if (prefix !== undefined && (prefix.length > 253 || !dnsSubdomain.test(prefix))) {
    return `label key "${key}" has an invalid prefix`;
  }
  if (name === '' || name.length > 63 || !labelName.test(name)) {
    return `"${key}" is not a valid label key`;
  }
  return undefined;
}

/**
 * Parses `key1=value1, key2=value2` (aws-load-balancer-controller's format) as a Service's
 * annotation: the selector, or a message saying what is wrong, the size limits included.
 */
export function parseNodeLabelSelector(
  value: string,
): { readonly selector: NodeLabelSelector } | { readonly problem: string } {
  if (value.length > nodeSelectorLimits.characters) {
    return {
      problem: `the selector is ${value.length} characters, over the limit of ${nodeSelectorLimits.characters}`,
    };
  }
  const parsed = parsePairs(value);
  if ('selector' in parsed && Object.keys(parsed.selector).length > nodeSelectorLimits.labels) {
    return {
      problem: `the selector names ${Object.keys(parsed.selector).length} labels, over the limit of ${nodeSelectorLimits.labels}`,
    };
  }
  return parsed;
}

/** A key given twice with different values could never match. */
function parsePairs(
  value: string,
): { readonly selector: NodeLabelSelector } | { readonly problem: string } {
  const selector: Record<string, string> = Object.create(null) as Record<string, string>;
  const pairs = value
    .split(',')
    .map((pair) => pair.trim())
    .filter((pair) => pair !== '');
  if (pairs.length === 0) return { problem: 'expected key=value pairs separated by commas' };
  for (const pair of pairs) {
    const equals = pair.indexOf('=');
    if (equals === -1) return { problem: `"${pair}" is not a key=value pair` };
    const key = pair.slice(0, equals).trim();
    const labelValue = pair.slice(equals + 1).trim();
    const keyProblem = labelKeyProblem(key);
    if (keyProblem !== undefined) return { problem: keyProblem };
    if (labelValue.length > 63 || !labelName.test(labelValue)) {
      return { problem: `"${labelValue}" is not a valid label value` };
    }
    if (key in selector && selector[key] !== labelValue) {
      return { problem: `label ${key} is given two values` };
    }
    selector[key] = labelValue;
  }
  return { selector };
}

/** What the Service's annotation says: no selector, a valid one, or one that cannot be read. */
export type NodeSelectorReading =
  { readonly valid: true; readonly selector: string | undefined } | { readonly valid: false };

/**
 * The Service's selector in one canonical string (`k1=v1,k2=v2`, keys sorted); undefined selects
 * every node. An invalid annotation is reported as such, never read as "every node": the provider
 * refuses the Service with a Warning, and meanwhile its targets must not widen.
 */
export function readNodeSelector(service: Service): NodeSelectorReading {
  const value = service.metadata?.annotations?.[targetNodeLabelsAnnotation];
  if (value === undefined) return { valid: true, selector: undefined };
  const parsed = parseNodeLabelSelector(value);
  if ('problem' in parsed) return { valid: false };
  const selector = Object.keys(parsed.selector)
    .sort()
    .map((key) => `${key}=${parsed.selector[key] ?? ''}`)
    .join(',');
  return { valid: true, selector };
}

/**
 * The canonical string back as a selector. Not held to the size limits: a selector stored before
 * they existed must keep narrowing its Service's targets, never read as every node.
 */
export function selectorFromCanonical(canonical: string): NodeLabelSelector {
  const parsed = parsePairs(canonical);
  return 'problem' in parsed ? {} : parsed.selector;
}

export function selectorKeys(canonical: string | undefined): string[] {
  return canonical === undefined ? [] : Object.keys(selectorFromCanonical(canonical));
}

export function labelsMatch(
  labels: Readonly<Record<string, string>> | undefined,
  selector: NodeLabelSelector,
): boolean {
  return Object.entries(selector).every(([key, value]) => labels?.[key] === value);
}
