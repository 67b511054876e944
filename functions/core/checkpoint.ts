import type { ClaimPolicy } from './claim';
import { stableHash } from './hash';
import type { Service } from './objects';

/** Bump when the meaning of a checkpoint changes, so every stored one misses once. */
export const checkpointModelVersion = 1;

export interface CheckpointInput {
  readonly service: Service;
  /** The hash of the host set the LB gets (HostSet.hash). */
  readonly hostsHash: string;
  readonly claim: ClaimPolicy;
  /** Everything of the provider's own that decides the desired AWS state (its config, model version). */
  readonly providerFingerprint: string;
}

/**
 * A hash of everything that decides the desired AWS state for a Service. When the stored
 * checkpoint equals it, the last Ensure already produced that state and no cloud call is needed.
 */
export function checkpointFor(input: CheckpointInput): string {
  const { metadata, spec } = input.service;
  return stableHash({
    version: checkpointModelVersion,
    uid: metadata?.uid ?? '',
    annotations: { ...(metadata?.annotations ?? {}) },
    spec: {
      type: spec?.type,
      loadBalancerClass: spec?.loadBalancerClass,
      ports: (spec?.ports ?? []).map((p) => ({
        name: p.name,
        protocol: p.protocol ?? 'TCP',
        port: p.port,
        nodePort: p.nodePort,
        appProtocol: p.appProtocol,
      })),
      loadBalancerSourceRanges: [...(spec?.loadBalancerSourceRanges ?? [])],
      sessionAffinity: spec?.sessionAffinity,
      loadBalancerIP: spec?.loadBalancerIP,
      externalTrafficPolicy: spec?.externalTrafficPolicy,
      healthCheckNodePort: spec?.healthCheckNodePort,
      ipFamilies: [...(spec?.ipFamilies ?? [])],
      allocateLoadBalancerNodePorts: spec?.allocateLoadBalancerNodePorts,
    },
    hosts: input.hostsHash,
    claim: { ...input.claim },
    provider: input.providerFingerprint,
  });
}
