import type { LoadBalancerStatus, Service } from '../core/objects';
import type { ProviderState } from '../sync/ports';
import { resourceKindOf, translateAwsError } from '../aws/aws-errors';
import type { NlbClients } from '../aws/clients';
import { ownershipTags } from './model/naming';
import { describeElbv2Tags, describeSecurityGroupTags, sortByOwnership } from './ownership';
import { createdWithinWindow, readNlbState, recordedResources, type NlbState } from './nlb-state';
import { statusOf, type ProviderContext, type TaggingApi } from './provider-context';

// What the provider finds by ownership tags (the Resource Groups Tagging API) and by the IDs it
// recorded: whether a Service still has anything (getLoadBalancer), what a delete deletes
// (inventory), and every owner in the cluster for the sweep (ownersInCluster).

/** The port's getLoadBalancer (sync/ports.ts), from the inventory: not only the NLB counts. */
export async function getLoadBalancer(
  ctx: ProviderContext,
  service: Service,
  state: ProviderState | undefined,
): Promise<{ exists: boolean; status?: LoadBalancerStatus }> {
  const nlbState = readNlbState(state);
  const found = await inventory(ctx, service, nlbState, ctx.now());
  const exists =
    found.loadBalancerArns.length +
      found.targetGroupArns.length +
      found.securityGroupIds.length +
      found.notVisibleYet.length >
    0;
  return {
    exists,
    ...(exists && nlbState.dnsName ? { status: statusOf(nlbState.dnsName) } : {}),
  };
}

/**
 * Every Service UID that owns resources of this cluster, with its `namespace/name` tag: what the
 * sweep compares with state and the API to find orphans.
 */
export async function ownersInCluster(ctx: ProviderContext): Promise<Map<string, string>> {
  const owners = new Map<string, string>();
  for await (const { tags } of tagged(ctx, [], 'list resources by cluster tag')) {
    const uid = tags[ownershipTags.serviceUid];
    if (uid) owners.set(uid, tags[ownershipTags.service] ?? '');
  }
  return owners;
}

/**
 * Everything the tagging API finds with this Service's ownership tags, plus the stored ARNs
 * (and those of resources we created, recorded or not yet) whose own tags prove them ours:
 * state alone is never proof (it may have been written by someone else). Recorded resources the
 * tagging API already returned cost nothing more; the others (the tagging API lags behind new
 * resources) one DescribeTags per 20 ARNs and one DescribeSecurityGroups. Of the rest, those we
 * created within the consistency window are not visible yet (`notVisibleYet`, kept); anything
 * else recorded is left alone and forgotten.
 */
export async function inventory(
  ctx: ProviderContext,
  service: Service,
  nlbState: NlbState,
  now: number,
) {
  const found = {
    loadBalancerArns: new Set<string>(),
    targetGroupArns: new Set<string>(),
    securityGroupIds: new Set<string>(),
  };
  const byUid = [{ Key: ownershipTags.serviceUid, Values: [service.metadata?.uid ?? ''] }];
  for await (const { arn } of tagged(ctx, byUid, 'find resources by tags')) {
    if (arn.includes(':loadbalancer/')) found.loadBalancerArns.add(arn);
    else if (arn.includes(':targetgroup/')) found.targetGroupArns.add(arn);
    else if (arn.includes(':security-group/')) {
      found.securityGroupIds.add(arn.slice(arn.lastIndexOf('/') + 1));
    }
  }
  const recorded = recordedOrCreated(nlbState);
  const uncheckedArns = [...recorded.loadBalancerArns, ...recorded.targetGroupArns].filter(
    (arn) => !found.loadBalancerArns.has(arn) && !found.targetGroupArns.has(arn),
  );
  const uncheckedGroups = recorded.securityGroupIds.filter((id) => !found.securityGroupIds.has(id));
  const unknown: string[] = [];
  try {
    const { clusterName } = ctx.settings;
    if (uncheckedArns.length > 0) {
      const tags = await describeElbv2Tags(ctx.clients.elbv2, uncheckedArns);
      const owned = sortByOwnership(uncheckedArns, tags, clusterName, service);
      for (const arn of owned.ours) {
        if (recorded.loadBalancerArns.includes(arn)) found.loadBalancerArns.add(arn);
        else found.targetGroupArns.add(arn);
      }
      unknown.push(...owned.unknown);
    }
    if (uncheckedGroups.length > 0) {
      const tags = await describeSecurityGroupTags(ctx.clients.ec2, uncheckedGroups);
      const owned = sortByOwnership(uncheckedGroups, tags, clusterName, service);
      for (const id of owned.ours) found.securityGroupIds.add(id);
      unknown.push(...owned.unknown);
    }
  } catch (error) {
    throw translateAwsError(error, 'read tags of recorded resources');
  }
  return {
    loadBalancerArns: [...found.loadBalancerArns],
    targetGroupArns: [...found.targetGroupArns],
    securityGroupIds: [...found.securityGroupIds],
    notVisibleYet: unknown.filter((id) => createdWithinWindow(nlbState, id, now)),
  };
}

/** The recorded resources, and those we created that a failed pass never recorded. */
function recordedOrCreated(nlbState: NlbState) {
  const recorded = recordedResources(nlbState);
  const add = (list: string[], id: string) => {
    if (!list.includes(id)) list.push(id);
  };
  for (const id of Object.keys(nlbState.createdAt ?? {})) {
    const kind = resourceKindOf(id);
    if (kind === 'load balancer') add(recorded.loadBalancerArns, id);
    else if (kind === 'target group') add(recorded.targetGroupArns, id);
    else if (kind === 'security group') add(recorded.securityGroupIds, id);
  }
  return recorded;
}

/**
 * The tagging API's client and command, loaded on first use (see NlbClients.tagging): one loader
 * per provider. The SDK is imported here, not at the top, so a cold start does not load it.
 */
export function taggingApiLoader(clients: NlbClients): () => Promise<TaggingApi> {
  let tagging: Promise<TaggingApi> | undefined;
  return () => {
    const given = clients.tagging;
    tagging ??= Promise.all([
      typeof given === 'function' ? given() : Promise.resolve(given),
      import('@aws-sdk/client-resource-groups-tagging-api'),
    ]).then(([client, m]) => ({ client, GetResourcesCommand: m.GetResourcesCommand }));
    tagging.catch(() => (tagging = undefined));
    return tagging;
  };
}

/** Our NLBs, target groups and security groups carrying the cluster tag (and `filters`), all pages. */
async function* tagged(
  ctx: ProviderContext,
  filters: { Key: string; Values: string[] }[],
  action: string,
): AsyncGenerator<{ arn: string; tags: Record<string, string> }> {
  let token: string | undefined;
  try {
    do {
      const { client, GetResourcesCommand } = await ctx.taggingApi();
      const page = await client.send(
        new GetResourcesCommand({
          TagFilters: [
            { Key: ownershipTags.cluster, Values: [ctx.settings.clusterName] },
            ...filters,
          ],
          ResourceTypeFilters: [
            'elasticloadbalancing:loadbalancer',
            'elasticloadbalancing:targetgroup',
            'ec2:security-group',
          ],
          ...(token ? { PaginationToken: token } : {}),
        }),
      );
      for (const mapping of page.ResourceTagMappingList ?? []) {
        yield {
          arn: mapping.ResourceARN ?? '',
          tags: Object.fromEntries((mapping.Tags ?? []).map((t) => [t.Key ?? '', t.Value ?? ''])),
        };
      }
      token = page.PaginationToken || undefined;
    } while (token !== undefined);
  } catch (error) {
    throw translateAwsError(error, action);
  }
}
