import { stableHash } from '../../core/hash';
import type { Service } from '../../core/objects';
import type { Scheme, Tags } from './types';

/** Tag keys that mark what we own (DESIGN §3: ownership by tags). */
export const ownershipTags = {
  cluster: 'serverless-service-controller.io/cluster',
  service: 'serverless-service-controller.io/service',
  serviceUid: 'serverless-service-controller.io/service-uid',
  resource: 'serverless-service-controller.io/resource',
} as const;

export const clusterTagKey = (clusterName: string) => `kubernetes.io/cluster/${clusterName}`;

/** A name segment: lower-case letters, digits and inner hyphens only. */
function segment(text: string, length: number): string {
  return text
    .toLowerCase()
    .replace(/[^a-z0-9-]/g, '')
    .slice(0, length)
    .replace(/^-+|-+$/g, '');
}

function shortHash(parts: readonly (string | number)[]): string {
  return stableHash(parts.map(String)).slice(0, 10);
}

/**
 * ELBv2 names: at most 32 characters, letters, digits and hyphens, no leading or trailing hyphen,
 * not starting with `internal-`. `k8s-<ns:8>-<name:8>-<hash:10>` always fits; the hash covers
 * cluster, namespace, name and UID (and the scheme, so a replacement NLB can coexist with the old).
 */
export function loadBalancerName(clusterName: string, service: Service, scheme: Scheme): string {
  const { namespace = '', name = '', uid = '' } = service.metadata ?? {};
  return elbName(namespace, name, shortHash([clusterName, namespace, name, uid, scheme]));
}

/** Target group names add the fields that force a new target group: service port, protocol and nodePort. */
export function targetGroupName(
  clusterName: string,
  service: Service,
  key: string,
  protocol: string,
  nodePort: number,
): string {
  const { namespace = '', name = '', uid = '' } = service.metadata ?? {};
  return elbName(
    namespace,
    name,
    shortHash([clusterName, namespace, name, uid, key, protocol, nodePort]),
  );
}

export function securityGroupName(clusterName: string, service: Service): string {
  const { namespace = '', name = '', uid = '' } = service.metadata ?? {};
  return `k8s-${segment(namespace, 63)}-${segment(name, 63)}-${shortHash([clusterName, namespace, name, uid])}`;
}

function elbName(namespace: string, name: string, hash: string): string {
  const parts = ['k8s', segment(namespace, 8), segment(name, 8), hash].filter(
    (part) => part !== '',
  );
  return parts.join('-');
}

/** Whether a name is valid for an ELBv2 load balancer or target group. */
export function isValidElbName(name: string): boolean {
  return (
    name.length >= 1 &&
    name.length <= 32 &&
    /^[A-Za-z0-9-]+$/.test(name) &&
    !name.startsWith('-') &&
    !name.endsWith('-') &&
    !name.startsWith('internal-')
  );
}

/** The tags that make a resource ours, plus the user's and the deployment's extra tags. */
export function resourceTags(
  clusterName: string,
  service: Service,
  resource: string,
  extra: Tags,
): Tags {
  const { namespace = '', name = '', uid = '' } = service.metadata ?? {};
  return {
    ...extra,
    [clusterTagKey(clusterName)]: 'owned',
    [ownershipTags.cluster]: clusterName,
    [ownershipTags.service]: `${namespace}/${name}`,
    [ownershipTags.serviceUid]: uid,
    [ownershipTags.resource]: resource,
  };
}

export type Ownership = 'ours' | 'foreign';

/** Ours only when both cluster and Service UID tags match: a name alone is never proof. */
export function ownershipOf(tags: Tags, clusterName: string, service: Service): Ownership {
  return tags[ownershipTags.cluster] === clusterName &&
    tags[ownershipTags.serviceUid] === (service.metadata?.uid ?? '')
    ? 'ours'
    : 'foreign';
}
