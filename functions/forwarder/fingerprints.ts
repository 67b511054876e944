import { ourFinalizersOn, wantsLoadBalancer, type ClaimPolicy } from '../core/claim';
import { stableHash } from '../core/hash';
import {
  clusterAutoscalerDeletionTaint,
  excludeFromLoadBalancersLabel,
  masterRoleLabel,
  seedExcludeBalancerLabel,
} from '../core/node-policy';
import { isBeingDeleted, type Node, type Service, type Taint } from '../core/objects';

const notOurs: Service = Object.freeze({ metadata: Object.freeze({}), spec: Object.freeze({}) });

/**
 * The forwarder keeps, per object, only what the enqueue filters read: a compact projection that
 * the core's predicates accept as a Service or a Node. Annotations shrink to one hash (the filters
 * only ask whether they changed), finalizers to ours, node labels and taints to the ones a policy
 * reads. Whole objects are never held.
 */
export function serviceFingerprint(service: Service, claim: ClaimPolicy): Service {
  const { metadata, spec } = service;
  const ours = ourFinalizersOn(service, claim);
  // Most Services in a cluster are not ours and never will be until their type or class changes;
  // every filter answers the same for all of them, so they share one object instead of each
  // holding a projection (about half the forwarder's heap on a 10,000-Service cluster).
  if (!wantsLoadBalancer(service, claim) && ours.length === 0) return notOurs;
  const annotations = metadata?.annotations ?? {};
  return {
    metadata: {
      uid: metadata?.uid,
      ...(Object.keys(annotations).length > 0
        ? { annotations: { '#': stableHash({ ...annotations }) } }
        : {}),
      ...(ours.length > 0 ? { finalizers: ours } : {}),
      ...(isBeingDeleted(service) ? { deletionTimestamp: 'set' } : {}),
    },
    spec: {
      type: spec?.type,
      loadBalancerClass: spec?.loadBalancerClass,
      ports: spec?.ports?.map((p) => ({
        name: p.name,
        protocol: p.protocol,
        port: p.port,
        nodePort: p.nodePort,
        appProtocol: p.appProtocol,
      })),
      loadBalancerSourceRanges: spec?.loadBalancerSourceRanges,
      sessionAffinity: spec?.sessionAffinity,
      loadBalancerIP: spec?.loadBalancerIP,
      externalIPs: spec?.externalIPs,
      externalTrafficPolicy: spec?.externalTrafficPolicy,
      healthCheckNodePort: spec?.healthCheckNodePort,
      ipFamilies: spec?.ipFamilies,
    },
  };
}

// Shared, frozen condition lists: thousands of nodes report one of a handful of Ready states.
const noConditions = Object.freeze([]);
const otherConditions = Object.freeze([Object.freeze({ type: 'Other', status: 'Unknown' })]);
const readyByStatus = new Map<string, readonly { type: string; status: string }[]>();
function readyConditions(status: string | undefined): readonly { type: string; status: string }[] {
  const key = status ?? '';
  let shared = readyByStatus.get(key);
  if (shared === undefined) {
    shared = Object.freeze([Object.freeze({ type: 'Ready', status: key })]);
    // Ready's status is one of True/False/Unknown; the bound only guards against odd values.
    if (readyByStatus.size < 16) readyByStatus.set(key, shared);
  }
  return shared;
}

function deletionTaints(taints: readonly Taint[] | undefined): Taint[] | undefined {
  const kept = taints?.filter((t) => t.key === clusterAutoscalerDeletionTaint);
  return kept === undefined || kept.length === 0
    ? undefined
    : kept.map((t) => ({ key: t.key, effect: t.effect }));
}

const policyLabels = [excludeFromLoadBalancersLabel, masterRoleLabel, seedExcludeBalancerLabel];

export function nodeFingerprint(node: Node): Node {
  const labels = node.metadata?.labels ?? {};
  const kept = Object.fromEntries(
    policyLabels.filter((l) => l in labels).map((l) => [l, labels[l] ?? '']),
  );
  const ready = node.status?.conditions?.find((c) => c.type === 'Ready');
  const conditionCount = node.status?.conditions?.length ?? 0;
  return {
    metadata: {
      name: node.metadata?.name,
      ...(Object.keys(kept).length > 0 ? { labels: kept } : {}),
      ...(isBeingDeleted(node) ? { deletionTimestamp: 'set' } : {}),
    },
    spec: {
      providerID: node.spec?.providerID,
      unschedulable: node.spec?.unschedulable,
      taints: deletionTaints(node.spec?.taints),
    },
    // The seed policy needs to know whether there are conditions at all, and Ready's status.
    status: {
      conditions:
        conditionCount === 0
          ? noConditions
          : ready
            ? readyConditions(ready.status)
            : otherConditions,
    },
  };
}
