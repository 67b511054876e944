import { events, type ControllerEvent } from './events';
import { stableHash } from './hash';
import { hostSetOf, hostsSelectedBy, type Host, type HostSet } from './hosts';
import type { ServiceKey } from './keys';
import { evaluateNode, type NodePolicy } from './node-policy';
import { nodeReference, type Node, type ObjectReference } from './objects';
import { selectorKeys } from './target-node-labels';

/** The eligible host set as node sync stores it, with the nodes already warned about. */
export interface EligibleHosts extends HostSet {
  readonly warnedNodes: readonly string[];
  /**
   * The label keys Services select targets by; each host carries just these labels. A set
   * without them (stored before the annotation was supported) tracks none.
   */
  readonly labelKeys?: readonly string[] | undefined;
  /** Hash of the tracked labels of every host: a relabelled node changes it, not `hash`. */
  readonly labelsHash?: string | undefined;
}

/** What node sync needs to know of each Service it may update. */
export interface ServiceHostsState {
  readonly key: ServiceKey;
  /** Hash of the hosts last synced to the Service's LB; undefined while it has never been ensured. */
  readonly hostsHash?: string | undefined;
  /** The Service's target-node-labels selector in canonical form; undefined selects every node. */
  readonly nodeSelector?: string | undefined;
  /**
   * Its last sync failed and its retry is not due yet (a sync that reads the host set afresh):
   * node sync leaves it to that retry, so a failing Service keeps its backoff.
   */
  readonly retryScheduled?: boolean | undefined;
}

export interface NodeSyncPlan {
  readonly eligible: EligibleHosts;
  /** Whether the set differs from the stored one (names, providerIDs or warned nodes). */
  readonly changed: boolean;
  /** Warnings for nodes newly found unusable as targets; repeated only after they recover and fail again. */
  readonly warnings: readonly {
    readonly object: ObjectReference;
    readonly event: ControllerEvent;
  }[];
  /** Services whose LB has other hosts than they select from the eligible set: each gets a host update (key only). */
  readonly servicesToUpdate: readonly ServiceKey[];
}

/**
 * Decides the eligible host set and which Services need a host update (S16). Services are compared
 * one by one with the hosts their LB last got, not with one global set, so a failed or slower
 * update is never hidden by a later comparison (upstream's slow-node-sync race, #121090).
 */
export function planNodeSync(
  nodes: readonly Node[],
  policy: NodePolicy,
  previous: EligibleHosts | undefined,
  services: readonly ServiceHostsState[],
  /** Label keys to track beyond those the Services select by (a new Service's, before it is stored). */
  extraLabelKeys: readonly string[] = [],
): NodeSyncPlan {
  const selected = new Set([
    ...services.flatMap((s) => selectorKeys(s.nodeSelector)),
    ...extraLabelKeys,
  ]);
  // Each host carries, in memory, every label some Service selects by: the comparisons below
  // stay exact whatever is stored.
  const hosts: Host[] = [];
  const warnedNodes: string[] = [];
  const warnings: { object: ObjectReference; event: ControllerEvent }[] = [];
  const alreadyWarned = new Set(previous?.warnedNodes ?? []);
  for (const node of nodes) {
    const verdict = evaluateNode(node, policy);
    if (verdict.eligible) {
      hosts.push(withSelectedLabels(verdict.host, node, selected));
    } else if (verdict.warn) {
      const name = node.metadata?.name ?? '';
      warnedNodes.push(name);
      if (!alreadyWarned.has(name)) {
        warnings.push({
          object: nodeReference(node),
          event: events.nodeNotEligible(verdict.reason),
        });
      }
    }
  }
  const labelKeys = storedLabelKeys(hosts);
  const stored = hostSetOf(hosts.map((host) => onlyLabels(host, labelKeys)));
  const eligible: EligibleHosts = {
    ...stored,
    warnedNodes: warnedNodes.sort(),
    ...(labelKeys.length > 0
      ? { labelKeys, labelsHash: stableHash(stored.hosts.map((h) => h.labels ?? {})) }
      : {}),
  };
  const changed =
    previous === undefined ||
    previous.hash !== eligible.hash ||
    previous.labelsHash !== eligible.labelsHash ||
    (previous.labelKeys ?? []).join('\n') !== labelKeys.join('\n') ||
    previous.warnedNodes.join('\n') !== eligible.warnedNodes.join('\n');
  // Services sharing a selector share one filtered set (and its hash).
  const bySelector = new Map<string | undefined, string>();
  const everyLabel = hostSetOf(hosts);
  const hashFor = (selector: string | undefined): string => {
    let hash = bySelector.get(selector);
    if (hash === undefined) {
      hash = hostsSelectedBy(everyLabel, selector).hash;
      bySelector.set(selector, hash);
    }
    return hash;
  };
  const servicesToUpdate = services
    .filter(
      (s) =>
        s.retryScheduled !== true &&
        s.hostsHash !== undefined &&
        s.hostsHash !== hashFor(s.nodeSelector),
    )
    .map((s) => s.key)
    .sort();
  return { eligible, changed, warnings, servicesToUpdate };
}

/**
 * Bounds on the label keys the stored host set tracks. The set lives in one shared DynamoDB item
 * (400 KB), so what it tracks must not grow with what tenants write in their selectors (issue 32,
 * finding 1): only keys some eligible node carries are stored, which the cluster's operators
 * decide, and at most this many. A Service whose key is not stored has its hosts worked out from a
 * Node list at its own syncs (`hostsForService`), so a missing key costs that Service, nobody else.
 */
export const trackedLabelLimits = { keys: 256, characters: 16_384 } as const;

/** The selected keys that some host carries, sorted, within trackedLabelLimits. */
function storedLabelKeys(hosts: readonly Host[]): string[] {
  const carried = new Set<string>();
  for (const host of hosts) for (const key of Object.keys(host.labels ?? {})) carried.add(key);
  const keys: string[] = [];
  let characters = 0;
  for (const key of [...carried].sort()) {
    if (keys.length === trackedLabelLimits.keys) break;
    if (characters + key.length > trackedLabelLimits.characters) continue;
    keys.push(key);
    characters += key.length;
  }
  return keys;
}

function withSelectedLabels(host: Host, node: Node, selected: ReadonlySet<string>): Host {
  if (selected.size === 0) return host;
  const labels: Record<string, string> = {};
  // The node's labels are few and the operators'; the selected keys may be many and the tenants'.
  for (const [key, value] of Object.entries(node.metadata?.labels ?? {})) {
    if (selected.has(key)) labels[key] = value;
  }
  return Object.keys(labels).length > 0 ? { ...host, labels } : host;
}

function onlyLabels(host: Host, keys: readonly string[]): Host {
  if (host.labels === undefined) return host;
  const labels: Record<string, string> = {};
  for (const key of keys) {
    const value = host.labels[key];
    if (value !== undefined) labels[key] = value;
  }
  const bare = { name: host.name, providerID: host.providerID, instanceId: host.instanceId };
  return Object.keys(labels).length > 0 ? { ...bare, labels } : bare;
}
