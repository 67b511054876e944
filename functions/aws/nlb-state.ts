import type { JsonValue } from '../core/hash';
import { currentNamingVersion, type NamingVersion } from './model/naming';
import type { SubnetRef } from './model/types';
import type { ProviderState } from '../sync/ports';

/** What the NLB provider remembers for one Service between calls (stored by the state table). */
export interface NlbState {
  loadBalancerArn?: string;
  loadBalancerName?: string;
  dnsName?: string;
  securityGroupId?: string;
  /** Resolved subnets, with the inputs they were resolved from (scheme and subnets annotation). */
  subnets?: { readonly inputs: string; readonly refs: SubnetRef[] };
  targetGroups?: Record<string, { arn: string; name: string; targets?: string[] }>;
  /** The security-groups annotation resolved to IDs, with the value it was resolved from. */
  frontendSecurityGroups?: { readonly inputs: string; readonly ids: string[] };
  /** The NLB already deleted while other resources are still being deleted (for the lifecycle feed). */
  deletedLoadBalancerArn?: string;
  /** Tag keys applied by earlier syncs: the only ones a sync may remove again. */
  appliedTagKeys?: string[];
  /** TLS listener ports given several certificates: their extra certificates are read in full. */
  sniListenerPorts?: number[];
  /** Stickiness turned on for spec.sessionAffinity ClientIP: turned off again when affinity goes. */
  stickinessFromAffinity?: boolean;
  /** How this Service's resources are named (model/naming.ts); absent before versions existed. */
  namingVersion?: NamingVersion;
}

/**
 * The naming version a Service stays on: the recorded one; version 1 for a state written before
 * versions existed that records resources (they carry version 1 names); the current version for
 * a Service with nothing yet.
 */
export function namingVersionOf(state: NlbState): NamingVersion {
  if (state.namingVersion === 1 || state.namingVersion === 2) return state.namingVersion;
  const recorded = recordedResources(state);
  const hasResources =
    state.loadBalancerName !== undefined ||
    state.deletedLoadBalancerArn !== undefined ||
    recorded.loadBalancerArns.length +
      recorded.targetGroupArns.length +
      recorded.securityGroupIds.length >
      0;
  return hasResources ? 1 : currentNamingVersion;
}

export function readNlbState(state: ProviderState | undefined): NlbState {
  // Provider state is JSON we wrote ourselves; a copy keeps the caller's object untouched.
  return state === undefined ? {} : structuredClone(state);
}

/**
 * Target lists longer than this are not recorded: at 5,000 nodes one list is ~110 KB, so a
 * Service's item would cost over 100 write units per write and, with four ports, pass DynamoDB's
 * 400 KB item limit. A host update reads such a group's targets from AWS instead (one
 * DescribeTargetHealth, on the Describe bucket, not the registration one).
 */
export const maxRecordedTargets = 500;

export function toProviderState(state: NlbState): ProviderState {
  const copy = JSON.parse(JSON.stringify(state)) as NlbState;
  for (const tg of Object.values(copy.targetGroups ?? {})) {
    if ((tg.targets?.length ?? 0) > maxRecordedTargets) delete tg.targets;
  }
  return copy as { [key: string]: JsonValue };
}

/** Every ARN or ID recorded, for deletion. */
export function recordedResources(state: NlbState): {
  loadBalancerArns: string[];
  targetGroupArns: string[];
  securityGroupIds: string[];
} {
  return {
    loadBalancerArns: state.loadBalancerArn ? [state.loadBalancerArn] : [],
    targetGroupArns: Object.values(state.targetGroups ?? {}).map((tg) => tg.arn),
    securityGroupIds: state.securityGroupId ? [state.securityGroupId] : [],
  };
}
