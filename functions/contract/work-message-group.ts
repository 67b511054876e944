import type { WorkMessage } from './work-messages';

/**
 * SQS fair queues (issue 19, finding 7): on a standard queue a MessageGroupId names the tenant a
 * message belongs to. When one group holds a disproportionate share of the consumers, SQS hands
 * out the other groups' messages first, so one namespace's burst no longer delays everyone. On a
 * standard queue the group changes nothing else: no ordering, no one-at-a-time per group.
 *
 * Controller groups contain a colon, which a namespace (a DNS label) cannot, so a namespace named
 * "node" is never mistaken for node sync.
 */
export const controllerGroups = {
  /**
   * All node messages share one group: node sync is single-flight under one lease and coalesces
   * whatever node messages it finds, so many of them are one tenant's worth of work. One group
   * also keeps a storm of node messages (node churn, or anyone able to send) to one noisy tenant.
   */
  node: 'controller:node',
  /** A message every minute or so: alone in its group, it is never held back behind a flood. */
  heartbeat: 'controller:heartbeat',
  /**
   * Lifecycle events waiting for EventBridge: during an outage there is one per sync, so in one
   * group of their own they queue behind the namespaces' work rather than beside it.
   */
  event: 'controller:event',
  /** A key that names no namespace; the handler dead-letters such a message anyway. */
  unkeyed: 'controller:unkeyed',
} as const;

// The namespace half of a `namespace/name` key, as Kubernetes spells namespaces.
const namespaceOfKey = /^([a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?)\//;

/** The fair-queue tenant of a work message: the Service's namespace, or a controller group. */
export function messageGroupOf(message: WorkMessage): string {
  switch (message.kind) {
    case 'node':
    case 'heartbeat':
    case 'event':
      return controllerGroups[message.kind];
    default:
      return namespaceOfKey.exec(message.key)?.[1] ?? controllerGroups.unkeyed;
  }
}
