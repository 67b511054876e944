import { errorMessage, failureClassOf } from '../core/errors';
import { backoffSeconds } from '../core/backoff';
import type { RuntimeContext } from './context';
import { parseWorkMessage, type WorkMessage } from '../contract/work-messages';
import { runNodeSync } from './node-sync';
import { comeBackLater, deadLetter, type BatchResult, type QueueRecord } from './queue-records';

type NodeMessage = Extract<WorkMessage, { kind: 'node' }>;
type ReceivedNodeMessage = { readonly record: QueueRecord; readonly message: NodeMessage };

/**
 * One batch from the node queue (the node-sync function's event source): every node message of
 * the batch shares one node-sync pass. Anything else found there (a misrouted Service message)
 * moves to the work queue; a malformed message goes to the dead-letter queue, as on the work queue.
 */
export async function processNodeBatch(
  records: readonly QueueRecord[],
  ctx: RuntimeContext,
): Promise<BatchResult> {
  const failures: string[] = [];
  const nodeMessages: ReceivedNodeMessage[] = [];
  const misrouted: { record: QueueRecord; message: WorkMessage }[] = [];
  for (const record of records) {
    const parsed = parseWorkMessage(record.body);
    if (!parsed.ok) {
      ctx.metrics.count('MalformedMessages');
      if (await deadLetter(record, parsed.problem, ctx)) failures.push(record.messageId);
    } else if (parsed.message.kind === 'node') {
      nodeMessages.push({ record, message: parsed.message });
    } else {
      misrouted.push({ record, message: parsed.message });
    }
  }
  if (misrouted.length > 0) {
    ctx.metrics.count('MisroutedMessages', misrouted.length);
    try {
      await ctx.queue.send(misrouted.map((m) => m.message));
    } catch (error) {
      ctx.log.warn('could not move messages to the work queue; they come back', {
        error: errorMessage(error),
      });
      failures.push(...misrouted.map((m) => m.record.messageId));
    }
  }
  if (nodeMessages.length > 0) failures.push(...(await runNodeMessages(nodeMessages, ctx)));
  return { batchItemFailures: failures.map((itemIdentifier) => ({ itemIdentifier })) };
}

/**
 * Runs node sync for a batch's node messages. A failed pass brings one message back after a
 * backoff that grows with its receives (the others are covered by it; the timer's tick is
 * preferred, so the chain survives); past the resend limit a fresh copy replaces it, so an
 * outage of the Kubernetes API never walks node messages into the DLQ. Returns the message ids
 * to report as failed.
 */
export async function runNodeMessages(
  messages: readonly ReceivedNodeMessage[],
  ctx: RuntimeContext,
): Promise<string[]> {
  try {
    const run = await runNodeSync(
      ctx,
      messages.map((n) => n.message),
    );
    if (run.kind === 'done') return [];
    // Another run holds node sync: the changes (not the timer's tick, whose chain went on) come
    // back when its lease runs out, in case that run died before the pass they asked for.
    const change = messages.find((n) => n.message.chain === undefined);
    if (change === undefined) return [];
    const failed = await comeBackLater(
      change.record,
      change.message,
      run.seconds,
      ctx,
      ctx.nodeQueue,
    ).catch(() => change.record.messageId);
    return failed === undefined ? [] : [failed];
  } catch (error) {
    // Node sync is re-driven by the schedule; a failed pass is reported, not retried hot.
    ctx.log.error('node sync failed', { error: errorMessage(error) });
    ctx.metrics.count('NodeSyncFailures');
    ctx.metrics.count('RetryableFailures', 1, { class: failureClassOf(error) });
    const first = messages.find((n) => n.message.chain !== undefined) ?? messages[0];
    if (first === undefined) return [];
    const delay = backoffSeconds(
      first.record.receiveCount,
      ctx.config.backoffBaseSeconds,
      ctx.config.backoffMaxSeconds,
    );
    const failed = await comeBackLater(
      first.record,
      first.message,
      delay,
      ctx,
      ctx.nodeQueue,
    ).catch(() => first.record.messageId);
    return failed === undefined ? [] : [failed];
  }
}

/**
 * Node messages that reached the work queue (a forwarder of release 0.1, or anything else that
 * sends there) move to the node queue in one send; if SQS refuses, they come back and try again.
 */
export async function moveToNodeQueue(
  messages: readonly ReceivedNodeMessage[],
  ctx: RuntimeContext,
): Promise<string[]> {
  try {
    await ctx.nodeQueue.send(messages.map((m) => m.message));
    ctx.metrics.count('NodeMessagesMoved', messages.length);
    return [];
  } catch (error) {
    ctx.log.warn('could not move node messages to the node queue; they come back', {
      error: errorMessage(error),
    });
    return messages.map((m) => m.record.messageId);
  }
}
