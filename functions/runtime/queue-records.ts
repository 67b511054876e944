import type { SQSEvent } from 'aws-lambda';
import { resendAfterReceives } from '../contract/queue-limits';
import { parseWorkMessage, type WorkMessage } from '../contract/work-messages';
import { errorMessage } from '../core/errors';
import type { RuntimeContext } from './context';
import type { WorkQueue } from './ports';

/** An event source mapping's batch as the handlers take it. */
export function queueRecordsOf(event: SQSEvent): QueueRecord[] {
  return event.Records.map((record) => ({
    messageId: record.messageId,
    body: record.body,
    receiptHandle: record.receiptHandle,
    receiveCount: Number(record.attributes.ApproximateReceiveCount || '1'),
  }));
}

/** A received SQS message, as the handler sees it. */
export interface QueueRecord {
  readonly messageId: string;
  readonly body: string;
  readonly receiptHandle: string;
  readonly receiveCount: number;
}

export interface BatchResult {
  readonly batchItemFailures: { readonly itemIdentifier: string }[];
}

/**
 * A message that is not ours goes to the dead-letter queue at once (a retry cannot fix it), or is
 * dropped when there is none; either way it is logged and counted, and the batch goes on. Returns
 * true when it must come back because SQS would not take it (nothing is lost).
 */
export async function deadLetter(record: QueueRecord, problem: string, ctx: RuntimeContext) {
  const fields = { messageId: record.messageId, problem };
  try {
    const kept = await ctx.queue.deadLetter(record.body, problem);
    ctx.log.warn(
      kept ? 'malformed message moved to the DLQ' : 'dropping malformed message',
      fields,
    );
    return false;
  } catch (error) {
    ctx.log.error('could not move a malformed message to the DLQ; it comes back', {
      ...fields,
      error: errorMessage(error),
    });
    return true;
  }
}

/** Makes the key's message come back after `seconds`: a visibility change, or a fresh delayed copy. */
export async function comeBackLater(
  record: QueueRecord,
  message: WorkMessage,
  seconds: number,
  ctx: RuntimeContext,
  /** The queue the record came from. */
  queue: WorkQueue = ctx.queue,
): Promise<string | undefined> {
  // The record is one of the batch's messages for the key, but the pass that must run again may
  // be of another kind (a service sync run for a host-update record, say): returning the record
  // as it is would bring back a sync that does less than the one that failed.
  const received = parseWorkMessage(record.body);
  const sameKind = received.ok && received.message.kind === message.kind;
  if (!sameKind || record.receiveCount >= resendAfterReceives) {
    await queue.send([message], seconds);
    return undefined;
  }
  await queue.changeVisibility(record.receiptHandle, seconds);
  return record.messageId;
}
