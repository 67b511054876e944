import { DescribeSecurityGroupsCommand, type EC2Client } from '@aws-sdk/client-ec2';
import {
  DescribeTagsCommand,
  type ElasticLoadBalancingV2Client,
} from '@aws-sdk/client-elastic-load-balancing-v2';
import type { Service } from '../core/objects';
import { isAwsError } from '../aws/aws-errors';
import { ownershipOf, ownershipTags } from './model/naming';
import type { Tags } from './model/types';

/** DescribeTags takes at most this many ARNs per call. */
const describeTagsLimit = 20;

/**
 * The tags of ELBv2 resources (load balancers, target groups, listeners, in any mix), one call
 * per 20 ARNs. AWS refuses the whole call when one ARN is gone (LoadBalancerNotFound,
 * TargetGroupNotFound); the call is then repeated one ARN at a time, so the others are still
 * answered. A resource that is gone is absent from the result.
 */
export async function describeElbv2Tags(
  elbv2: ElasticLoadBalancingV2Client,
  arns: readonly string[],
): Promise<Map<string, Tags>> {
  const result = new Map<string, Tags>();
  const unique = [...new Set(arns)].filter((arn) => arn !== '');
  for (let i = 0; i < unique.length; i += describeTagsLimit) {
    for (const [arn, tags] of await describeChunk(elbv2, unique.slice(i, i + describeTagsLimit))) {
      result.set(arn, tags);
    }
  }
  return result;
}

async function describeChunk(
  elbv2: ElasticLoadBalancingV2Client,
  arns: readonly string[],
): Promise<Map<string, Tags>> {
  try {
    const found = await elbv2.send(new DescribeTagsCommand({ ResourceArns: [...arns] }));
    return new Map(
      (found.TagDescriptions ?? []).map((d) => [d.ResourceArn ?? '', tagsOf(d.Tags)] as const),
    );
  } catch (error) {
    if (!isGone(error)) throw error;
    if (arns.length === 1) return new Map();
    const each = new Map<string, Tags>();
    for (const arn of arns) {
      for (const [key, tags] of await describeChunk(elbv2, [arn])) each.set(key, tags);
    }
    return each;
  }
}

function isGone(error: unknown): boolean {
  return isAwsError(
    error,
    'LoadBalancerNotFound',
    'LoadBalancerNotFoundException',
    'TargetGroupNotFound',
    'TargetGroupNotFoundException',
    'ListenerNotFound',
    'ListenerNotFoundException',
  );
}

/** The tags of security groups, in one call; a group that is gone is absent from the result. */
export async function describeSecurityGroupTags(
  ec2: EC2Client,
  ids: readonly string[],
): Promise<Map<string, Tags>> {
  const unique = [...new Set(ids)].filter((id) => id !== '');
  if (unique.length === 0) return new Map();
  try {
    const found = await ec2.send(new DescribeSecurityGroupsCommand({ GroupIds: unique }));
    return new Map(
      (found.SecurityGroups ?? []).map((g) => [g.GroupId ?? '', tagsOf(g.Tags)] as const),
    );
  } catch (error) {
    if (
      !isAwsError(
        error,
        'InvalidGroup.NotFound',
        'InvalidGroupId.NotFound',
        'InvalidGroupId.Malformed',
      )
    )
      throw error;
    if (unique.length === 1) return new Map();
    const each = new Map<string, Tags>();
    for (const id of unique) {
      for (const [key, tags] of await describeSecurityGroupTags(ec2, [id])) each.set(key, tags);
    }
    return each;
  }
}

/** Resources sorted by what their tags say about the Service. */
export interface OwnershipReport {
  readonly ours: readonly string[];
  /** Tagged, but for another Service or cluster (or by someone else entirely). */
  readonly foreign: readonly string[];
  /** Gone, or carrying no tags at all (emulators answer that way for a resource that is gone). */
  readonly unknown: readonly string[];
}

/** Sorts `ids` by the tags read for them (`tags`), against the Service's ownership tags. */
export function sortByOwnership(
  ids: readonly string[],
  tags: ReadonlyMap<string, Tags>,
  clusterName: string,
  service: Service,
): OwnershipReport {
  const ours: string[] = [];
  const foreign: string[] = [];
  const unknown: string[] = [];
  for (const id of new Set(ids)) {
    const found = tags.get(id);
    if (found === undefined || Object.keys(found).length === 0) unknown.push(id);
    else if (ownershipOf(found, clusterName, service) === 'ours') ours.push(id);
    else foreign.push(id);
  }
  return { ours, foreign, unknown };
}

export function tagsOf(
  tags: readonly { Key?: string | undefined; Value?: string | undefined }[] | undefined,
): Tags {
  return Object.fromEntries((tags ?? []).map((t) => [t.Key ?? '', t.Value ?? '']));
}

/**
 * Who a resource that is not ours belongs to, as its tags tell: put in a refusal so the user
 * knows which Service or controller already holds a name.
 */
export function holderOf(tags: Tags): string {
  const service = tags[ownershipTags.service];
  if (service !== undefined) {
    const cluster = tags[ownershipTags.cluster] ?? '?';
    const uid = tags[ownershipTags.serviceUid] ?? '?';
    return `this controller's Service ${service} (UID ${uid}) in cluster ${cluster}`;
  }
  const albcStack = tags['service.k8s.aws/stack'];
  if (albcStack !== undefined) return `aws-load-balancer-controller's Service ${albcStack}`;
  const cloudProvider = tags['kubernetes.io/service-name'];
  if (cloudProvider !== undefined) return `cloud-provider-aws's Service ${cloudProvider}`;
  return 'an owner without ownership tags of any Kubernetes controller';
}
