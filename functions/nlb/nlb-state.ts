import type { JsonValue } from '../core/hash';
import { NotVisibleYetError, resourceKindOf, type ResourceKind } from '../aws/aws-errors';
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
  /** By key; `targetType` is set for pod targets only (absent: instances, as before it existed). */
  targetGroups?: Record<
    string,
    { arn: string; name: string; targetType?: 'ip'; targets?: string[] }
  >;
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
  /**
   * When we created each resource not yet proven visible (ID or ARN → epoch ms): AWS may answer
   * "not found" for it for a while (`consistencyWindowMs`), which must not be taken for "gone".
   * Dropped when the resource is deleted, when a pass ends done (every call naming it answered),
   * when the window has passed, or when its tags name another owner (a target group or NLB that
   * CreateTargetGroup or CreateLoadBalancer handed back is dated before its tags are read).
   */
  createdAt?: Record<string, number>;
}

/**
 * How long after we create a resource AWS may still answer that it does not exist. EC2 documents
 * eventual consistency for new IDs and says to retry with backoff "up to a few minutes"
 * (https://docs.aws.amazon.com/ec2/latest/devguide/eventual-consistency.html); ELBv2 answers
 * TargetGroupNotFound, LoadBalancerNotFound and ListenerNotFound alike right after a create.
 */
export const consistencyWindowMs = 5 * 60_000;

/** Records a create as it returns; a repeated create (AWS's idempotent answer) keeps the first time. */
export function noteCreated(state: NlbState, id: string | undefined, now: number): void {
  if (id === undefined || id === '') return;
  state.createdAt = { ...state.createdAt, [id]: state.createdAt?.[id] ?? now };
}

export function forgetCreated(state: NlbState, id: string): void {
  if (state.createdAt?.[id] === undefined) return;
  const { [id]: _, ...rest } = state.createdAt;
  if (Object.keys(rest).length > 0) state.createdAt = rest;
  else delete state.createdAt;
}

/** Created by us within the window (either side of it: clocks of two instances differ a little). */
export function createdWithinWindow(state: NlbState, id: string, now: number): boolean {
  const at = state.createdAt?.[id];
  return at !== undefined && Math.abs(now - at) < consistencyWindowMs;
}

/** Forgets creation times past the window: from then on "not found" means gone. */
export function pruneCreated(state: NlbState, now: number): void {
  for (const id of Object.keys(state.createdAt ?? {})) {
    if (!createdWithinWindow(state, id, now)) forgetCreated(state, id);
  }
}

/**
 * The rule for a "not found" answer (or an absence from a read) about `ids`: when one of them is
 * a resource we created within the window, it is not visible yet (a retryable error to throw);
 * otherwise undefined, and the caller takes it for gone as before.
 */
export function notVisibleYet(
  state: NlbState,
  ids: readonly string[],
  now: number,
  action: string,
  cause?: unknown,
): NotVisibleYetError | undefined {
  const recent = [...new Set(ids)].filter((id) => createdWithinWindow(state, id, now));
  if (recent.length === 0) return undefined;
  const what = recent.map((id) => `${resourceKindOf(id) ?? 'resource'} ${id}`).join(', ');
  const seconds = Math.round(
    (now - Math.min(...recent.map((id) => state.createdAt?.[id] ?? now))) / 1000,
  );
  return new NotVisibleYetError(action, `${what} (created ${seconds} s ago)`, { cause });
}

/** The dated resources of `kind`: those an AWS "not found" of that kind may be about. */
export function createdOfKind(state: NlbState, kind: ResourceKind): string[] {
  return Object.keys(state.createdAt ?? {}).filter((id) => resourceKindOf(id) === kind);
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
