/** Event reasons and messages as the seed emits them (S3, S7–S11, S17). */
export const EventType = { Normal: 'Normal', Warning: 'Warning' } as const;
export type EventType = (typeof EventType)[keyof typeof EventType];

export interface ControllerEvent {
  readonly type: EventType;
  readonly reason: string;
  readonly message: string;
}

/** How many node names an UpdateLoadBalancerFailed message lists (upstream caps it too: #120317). */
const maxNamesInMessage = 20;

export const events = {
  ensuring: normal('EnsuringLoadBalancer', 'Ensuring load balancer'),
  ensured: normal('EnsuredLoadBalancer', 'Ensured load balancer'),
  deleting: normal('DeletingLoadBalancer', 'Deleting load balancer'),
  deleted: normal('DeletedLoadBalancer', 'Deleted load balancer'),
  updated: normal('UpdatedLoadBalancer', 'Updated load balancer with new hosts'),
  unavailable: warning('UnAvailableLoadBalancer', 'There are no available nodes for LoadBalancer'),
  syncFailed: (detail: string) =>
    warning('SyncLoadBalancerFailed', `Error syncing load balancer: ${detail}`),
  deleteFailed: (detail: string) =>
    warning('DeleteLoadBalancerFailed', `Error deleting load balancer: ${detail}`),
  updateFailed: (hostNames: readonly string[], detail: string) =>
    warning(
      'UpdateLoadBalancerFailed',
      `Error updating load balancer with new hosts ${formatNames(hostNames)}: ${detail}`,
    ),
  nodeNotEligible: (detail: string) => warning('NodeNotEligibleForLoadBalancer', detail),
  /** A drift check found AWS changed behind our back and put it right. */
  repaired: (changes: readonly string[]) =>
    warning('RepairedLoadBalancer', `Repaired load balancer drift: ${formatList(changes)}`),
  /** The load balancer had to be created again: its address changed, and whoever uses it must know. */
  recreated: (oldName: string, newName: string) =>
    warning(
      'RecreatedLoadBalancer',
      `Load balancer recreated: its DNS name changed from ${oldName} to ${newName}; update anything that still points at ${oldName}`,
    ),
} as const;

function normal(reason: string, message: string): ControllerEvent {
  return { type: EventType.Normal, reason, message };
}

function warning(reason: string, message: string): ControllerEvent {
  return { type: EventType.Warning, reason, message };
}

function formatList(items: readonly string[]): string {
  const shown = items.slice(0, maxNamesInMessage);
  const more = items.length - shown.length;
  return `${shown.join(', ')}${more > 0 ? ` and ${more} more` : ''}`;
}

function formatNames(names: readonly string[]): string {
  const shown = [...names].sort().slice(0, maxNamesInMessage);
  const more = names.length - shown.length;
  return `[${shown.join(' ')}${more > 0 ? ` and ${more} more` : ''}]`;
}

/** Go's `%v` for a string slice, so the seed's messages read the same: `[a b]`. */
export function goList(values: readonly string[] | undefined): string {
  return `[${(values ?? []).join(' ')}]`;
}
