import type { WorkQueue } from '../runtime/ports';
import type { WorkMessage } from '../contract/work-messages';

/**
 * The forwarder's send: node messages to the node queue (the node-sync function's own, so a Service
 * backlog never delays them), everything else to the work queue. Without a node queue (release 0.1
 * configurations, local mode) both go to the work queue. If one of the two sends fails the
 * publisher sends the whole batch again: a repeated node message costs at most a coalesced pass.
 */
export function sendByKind(
  work: WorkQueue,
  nodes: WorkQueue | undefined,
): (messages: readonly WorkMessage[]) => Promise<void> {
  if (nodes === undefined) return (messages) => work.send(messages);
  return async (messages) => {
    const nodeMessages = messages.filter((m) => m.kind === 'node');
    const others = messages.filter((m) => m.kind !== 'node');
    await Promise.all([
      others.length > 0 ? work.send(others) : undefined,
      nodeMessages.length > 0 ? nodes.send(nodeMessages) : undefined,
    ]);
  };
}
