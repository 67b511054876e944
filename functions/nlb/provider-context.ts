import type {
  GetResourcesCommand as GetResourcesCommandType,
  ResourceGroupsTaggingAPIClient,
} from '@aws-sdk/client-resource-groups-tagging-api';
import type { LoadBalancerStatus } from '../core/objects';
import type { NlbClients } from '../aws/clients';
import type { ProviderSettings } from './model/desired';
import type { TenantPolicyEnforcer } from './tenant-policy-check';

/** The tagging API's client and command, once loaded (types only: the SDK loads on first use). */
export interface TaggingApi {
  readonly client: ResourceGroupsTaggingAPIClient;
  readonly GetResourcesCommand: typeof GetResourcesCommandType;
}

/**
 * What the provider's operations share, one per NlbProvider (nlb-provider.ts): its clients and
 * settings, the tenant policy, the clock and the tagging API loader. Each operation lives in its
 * own module: ensure-load-balancer.ts, update-targets.ts, delete-load-balancer.ts and
 * tagged-resources.ts.
 */
export interface ProviderContext {
  readonly clients: NlbClients;
  readonly settings: ProviderSettings;
  readonly tenantPolicy?: TenantPolicyEnforcer | undefined;
  /** Epoch ms: dates creates, and tells a resource not visible yet from one that is gone. */
  readonly now: () => number;
  /** The tagging API, loaded on first use (tagged-resources.ts taggingApiLoader). */
  readonly taggingApi: () => Promise<TaggingApi>;
}

/** Seconds to wait for a security group or target group AWS still holds after its NLB is gone. */
export const stillInUseRetrySeconds = 30;

export function statusOf(dnsName: string): LoadBalancerStatus {
  return dnsName === '' ? {} : { ingress: [{ hostname: dnsName }] };
}

/** An instance behind several target groups counts once. */
export function uniqueSorted(ids: readonly string[]): string[] {
  return [...new Set(ids)].sort();
}
