import { canonicalJson, stableHash } from '../../core/hash';
import type { Service } from '../../core/objects';
import { Sha256 } from '@aws-crypto/sha256-js';
import type { DesiredLoadBalancer, Scheme, Tags, TargetType } from './types';

/** Tag keys that mark what we own (docs/design.md §3: ownership by tags). */
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

/**
 * How names are hashed. 1: the first 40 bits of a fast non-cryptographic hash (cyrb53), which a
 * tenant could steer into another Service's names. 2: SHA-256, 10 base-36 digits (about 52
 * bits). A Service keeps the version its resources were created with (recorded in provider
 * state), so an upgrade renames nothing.
 */
export type NamingVersion = 1 | 2;
export const currentNamingVersion: NamingVersion = 2;

const base36Digits = 10;
const base36Range = 36n ** BigInt(base36Digits);

function shortHash(parts: readonly (string | number)[], version: NamingVersion): string {
  const text = parts.map(String);
  if (version === 1) return stableHash(text).slice(0, 10);
  // The pure-JS digest: the model may not reach Node's crypto, and Web Crypto's is asynchronous.
  const hash = new Sha256();
  hash.update(canonicalJson(text));
  const digest = hash.digestSync();
  let value = 0n;
  for (const byte of digest.subarray(0, 8)) value = (value << 8n) | BigInt(byte);
  // 64 bits folded into 36^10: the bias (under 1 in 5,000) is of no use to anyone.
  return (value % base36Range).toString(36).padStart(base36Digits, '0');
}

/**
 * ELBv2 names: at most 32 characters, letters, digits and hyphens, no leading or trailing hyphen,
 * not starting with `internal-`. `k8s-<ns:8>-<name:8>-<hash:10>` always fits; the hash covers
 * cluster, namespace, name and UID (and the scheme, so a replacement NLB can coexist with the old).
 */
export function loadBalancerName(
  clusterName: string,
  service: Service,
  scheme: Scheme,
  version: NamingVersion = currentNamingVersion,
): string {
  const { namespace = '', name = '', uid = '' } = service.metadata ?? {};
  return elbName(namespace, name, shortHash([clusterName, namespace, name, uid, scheme], version));
}

/** Target group names add the fields that force a new target group: service port, protocol and nodePort. */
export function targetGroupName(
  clusterName: string,
  service: Service,
  key: string,
  protocol: string,
  nodePort: number,
  version: NamingVersion = currentNamingVersion,
  targetType: TargetType = 'instance',
): string {
  const { namespace = '', name = '', uid = '' } = service.metadata ?? {};
  // A target type cannot change in place, so it makes a new name (make-before-break); a pod
  // group's port is only a label, so a new targetPort keeps the group.
  const inputs =
    targetType === 'ip'
      ? [clusterName, namespace, name, uid, key, protocol, 'ip']
      : [clusterName, namespace, name, uid, key, protocol, nodePort];
  return elbName(namespace, name, shortHash(inputs, version));
}

export function securityGroupName(
  clusterName: string,
  service: Service,
  version: NamingVersion = currentNamingVersion,
): string {
  const { namespace = '', name = '', uid = '' } = service.metadata ?? {};
  return `k8s-${segment(namespace, 63)}-${segment(name, 63)}-${shortHash([clusterName, namespace, name, uid], version)}`;
}

/**
 * The desired model with the names of an older naming version: a Service whose resources were
 * made with it keeps finding and extending them under the same names. The model is built with the
 * current version; only names change here.
 */
export function withNamingVersion(
  desired: DesiredLoadBalancer,
  clusterName: string,
  service: Service,
  version: NamingVersion,
): DesiredLoadBalancer {
  if (version === currentNamingVersion) return desired;
  return {
    ...desired,
    name:
      desired.nameFromAnnotation === true
        ? desired.name
        : loadBalancerName(clusterName, service, desired.scheme, version),
    securityGroup: {
      ...desired.securityGroup,
      name: securityGroupName(clusterName, service, version),
    },
    targetGroups: desired.targetGroups.map((tg) => ({
      ...tg,
      // An instance target group's port is the Service port's nodePort.
      name: targetGroupName(
        clusterName,
        service,
        tg.key,
        tg.protocol,
        tg.port,
        version,
        tg.targetType,
      ),
    })),
  };
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
