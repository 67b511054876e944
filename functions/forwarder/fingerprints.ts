import { createHash } from 'node:crypto';
import { ourFinalizersOn, wantsLoadBalancer, type ClaimPolicy } from '../core/claim';
import {
  clusterAutoscalerDeletionTaint,
  excludeFromLoadBalancersLabel,
  masterRoleLabel,
  seedExcludeBalancerLabel,
} from '../core/node-policy';
import { isBeingDeleted, type Node, type Service, type Taint } from '../core/objects';
import { asksForIpTargets, nlbTargetTypeAnnotation } from './endpoint-slices';

const notOurs: Service = Object.freeze({ metadata: Object.freeze({}), spec: Object.freeze({}) });

/**
 * The forwarder keeps, per object, only what the enqueue filters read: a compact projection that
 * the core's predicates accept as a Service or a Node. Whole objects are never held, and a
 * Service's projection has a fixed size whatever the Service holds: one tenant's Services filled
 * to Kubernetes' object limit (85,000 source ranges, ~1.5 MB each) must not cost the forwarder,
 * which serves every namespace, more than any other Service.
 *
 * What the filters read:
 * - whether the Service wants a load balancer from us (type, class), our finalizers, deletion:
 *   kept, reduced to what those predicates can tell apart;
 * - every field `needsUpdate` compares (annotations, source ranges, ports, external IPs, ...):
 *   the forwarder only asks whether any changed, so they become one digest, held where
 *   `needsUpdate` compares it as an annotation;
 * - whether it asks for pod targets, which decides whether its EndpointSlices are watched
 *   (endpoint-slices.ts): kept as a target type of `ip` beside the digest. It changes only with
 *   the annotations, so with the digest, and `needsUpdate` answers as before.
 */
export function serviceFingerprint(service: Service, claim: ClaimPolicy): Service {
  const ours = ourFinalizersOn(service, claim);
  // Most Services in a cluster are not ours and never will be until their type or class changes;
  // every filter answers the same for all of them, so they share one object instead of each
  // holding a projection (about half the forwarder's heap on a 10,000-Service cluster).
  if (!wantsLoadBalancer(service, claim) && ours.length === 0) return notOurs;
  const lbClass = service.spec?.loadBalancerClass;
  return {
    metadata: {
      annotations: {
        '#': loadBalancerInputsDigest(service),
        ...(asksForIpTargets(service) ? { [nlbTargetTypeAnnotation]: 'ip' } : {}),
      },
      // The filters ask only whether one of ours is there; a list of copies says no more.
      ...(ours.length > 0 ? { finalizers: [...new Set(ours)] } : {}),
      ...(isBeingDeleted(service) ? { deletionTimestamp: 'set' } : {}),
    },
    spec: {
      type: service.spec?.type === 'LoadBalancer' ? 'LoadBalancer' : 'other',
      // Only "none", "ours" and "another" matter; another class never equals ours with a suffix.
      loadBalancerClass:
        lbClass === undefined || lbClass === '' || lbClass === claim.loadBalancerClass
          ? lbClass
          : `${claim.loadBalancerClass}#other`,
    },
  };
}

/**
 * A digest of every field `needsUpdate` compares, normalised as it compares them (absent lists
 * and maps are empty, port defaults filled in, annotation order ignored, only the number of IP
 * families), so two versions get the same digest exactly when it finds no change. SHA-256,
 * because a tenant chooses these inputs: a weaker hash would let one craft a change the
 * forwarder does not see. The canonical text is built, hashed and dropped at once.
 */
function loadBalancerInputsDigest(service: Service): string {
  const spec = service.spec ?? {};
  const annotations = service.metadata?.annotations ?? {};
  const inputs = [
    service.metadata?.uid ?? '',
    spec.loadBalancerSourceRanges ?? [],
    (spec.ports ?? []).map((p) => [
      p.name ?? '',
      p.protocol ?? 'TCP',
      p.port,
      p.nodePort ?? 0,
      p.appProtocol ?? '',
    ]),
    spec.sessionAffinity ?? '',
    spec.loadBalancerIP ?? '',
    spec.externalIPs ?? [],
    Object.keys(annotations)
      .sort()
      .map((key) => [key, annotations[key]]),
    spec.externalTrafficPolicy ?? '',
    spec.healthCheckNodePort ?? 0,
    spec.ipFamilies?.length ?? 0,
  ];
  // 128 bits: collisions would take 2^64 tries.
  return createHash('sha256').update(JSON.stringify(inputs)).digest('base64url').slice(0, 22);
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

/**
 * Stands for every label of the node in its fingerprint: Services may choose targets by any label
 * (target-node-labels), so a relabelled node must reach node sync, yet the forwarder keeps one
 * short digest per node rather than all its labels.
 */
export const labelsDigestKey = 'serverless-service-controller.io/labels-digest';

function labelsDigest(labels: Readonly<Record<string, string>>): string {
  const sorted = Object.keys(labels)
    .sort()
    .map((key) => [key, labels[key]]);
  return createHash('sha256').update(JSON.stringify(sorted)).digest('base64url').slice(0, 22);
}

export function nodeFingerprint(node: Node): Node {
  const labels = node.metadata?.labels ?? {};
  const kept: Record<string, string> = Object.fromEntries(
    policyLabels.filter((l) => l in labels).map((l) => [l, labels[l] ?? '']),
  );
  if (Object.keys(labels).length > 0) kept[labelsDigestKey] = labelsDigest(labels);
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
