import { finalizerFor, type ClaimPolicy } from '../core/claim';
import { stableHash } from '../core/hash';
import {
  clusterAutoscalerDeletionTaint,
  excludeFromLoadBalancersLabel,
  masterRoleLabel,
  seedExcludeBalancerLabel,
} from '../core/node-policy';
import { isBeingDeleted, type Node, type Service } from '../core/objects';

/**
 * The forwarder keeps, per object, only what the enqueue filters read: a compact projection that
 * the core's predicates accept as a Service or a Node. Annotations shrink to one hash (the filters
 * only ask whether they changed), finalizers to ours, node labels and taints to the ones a policy
 * reads. Whole objects are never held.
 */
export function serviceFingerprint(service: Service, claim: ClaimPolicy): Service {
  const { metadata, spec } = service;
  const ours = finalizerFor(claim);
  const annotations = metadata?.annotations ?? {};
  return {
    metadata: {
      uid: metadata?.uid,
      ...(Object.keys(annotations).length > 0
        ? { annotations: { '#': stableHash({ ...annotations }) } }
        : {}),
      ...(metadata?.finalizers?.includes(ours) ? { finalizers: [ours] } : {}),
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
      taints: node.spec?.taints
        ?.filter((t) => t.key === clusterAutoscalerDeletionTaint)
        .map((t) => ({ key: t.key, effect: t.effect })),
    },
    // The seed policy needs to know whether there are conditions at all, and Ready's status.
    status: {
      conditions:
        conditionCount === 0
          ? []
          : ready
            ? [{ type: 'Ready', status: ready.status }]
            : [{ type: 'Other', status: 'Unknown' }],
    },
  };
}
