import { stableHash } from './hash';
import { labelsMatch, selectorFromCanonical } from './target-node-labels';

/** A node the load balancer can send traffic to: an EC2 instance registered by instance ID. */
export interface Host {
  readonly name: string;
  readonly providerID: string;
  readonly instanceId: string;
  /**
   * Only the labels some Service selects its targets by (see EligibleHosts.labelKeys), so the
   * stored set does not carry every node's labels.
   */
  readonly labels?: Readonly<Record<string, string>> | undefined;
}

/** The eligible hosts, sorted by name, with a hash that changes when any name or providerID does. */
export interface HostSet {
  readonly hosts: readonly Host[];
  readonly hash: string;
}

export function hostSetOf(hosts: readonly Host[]): HostSet {
  const sorted = [...hosts].sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0));
  return {
    hosts: sorted,
    hash: stableHash(sorted.map((host) => [host.name, host.providerID])),
  };
}

/** One Service's hosts, with the selector they were chosen by (undefined: every eligible host). */
export interface ServiceHostSet extends HostSet {
  readonly nodeSelector?: string | undefined;
}

/**
 * The hosts of one Service: those matching its target-node-labels selector (canonical form), or
 * all of them. The hash covers names and providerIDs only, so a Service without a selector keeps
 * the hash of the whole set.
 */
export function hostsSelectedBy(set: HostSet, selector: string | undefined): ServiceHostSet {
  if (selector === undefined) return { hosts: set.hosts, hash: set.hash };
  const wanted = selectorFromCanonical(selector);
  return {
    ...hostSetOf(set.hosts.filter((host) => labelsMatch(host.labels, wanted))),
    nodeSelector: selector,
  };
}

/** Same names with the same providerIDs (upstream compares name → providerID too, #120492). */
export function hostSetsEqual(a: HostSet, b: HostSet): boolean {
  return a.hash === b.hash;
}

const instanceIdPattern = /^i-(?:[0-9a-f]{8}|[0-9a-f]{17})$/;

/**
 * The EC2 instance ID in an AWS providerID (`aws:///us-east-1a/i-0123456789abcdef0`), or undefined
 * for nodes that are not EC2 instances (Fargate's `.../fargate-ip-...`, hybrid nodes, other clouds).
 */
export function instanceIdFromProviderID(providerID: string | undefined): string | undefined {
  if (providerID === undefined || !providerID.startsWith('aws://')) return undefined;
  const last = providerID.slice('aws://'.length).split('/').filter(Boolean).at(-1);
  return last !== undefined && instanceIdPattern.test(last) ? last : undefined;
}
