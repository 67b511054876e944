import { events, type ControllerEvent } from './events';
import { hostSetOf, type Host, type HostSet } from './hosts';
import type { ServiceKey } from './keys';
import { evaluateNode, type NodePolicy } from './node-policy';
import { nodeReference, type Node, type ObjectReference } from './objects';

/** The eligible host set as node sync stores it, with the nodes already warned about. */
export interface EligibleHosts extends HostSet {
  readonly warnedNodes: readonly string[];
}

/** What node sync needs to know of each Service it may update. */
export interface ServiceHostsState {
  readonly key: ServiceKey;
  /** Hash of the hosts last synced to the Service's LB; undefined while it has never been ensured. */
  readonly hostsHash?: string | undefined;
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
  /** Services whose LB has other hosts than the eligible set: each gets a host update (key only). */
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
): NodeSyncPlan {
  const hosts: Host[] = [];
  const warnedNodes: string[] = [];
  const warnings: { object: ObjectReference; event: ControllerEvent }[] = [];
  const alreadyWarned = new Set(previous?.warnedNodes ?? []);
  for (const node of nodes) {
    const verdict = evaluateNode(node, policy);
    if (verdict.eligible) {
      hosts.push(verdict.host);
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
  const set = hostSetOf(hosts);
  const eligible: EligibleHosts = { ...set, warnedNodes: warnedNodes.sort() };
  const changed =
    previous === undefined ||
    previous.hash !== eligible.hash ||
    previous.warnedNodes.join('\n') !== eligible.warnedNodes.join('\n');
  const servicesToUpdate = services
    .filter((s) => s.hostsHash !== undefined && s.hostsHash !== eligible.hash)
    .map((s) => s.key)
    .sort();
  return { eligible, changed, warnings, servicesToUpdate };
}
