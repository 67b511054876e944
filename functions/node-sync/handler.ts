import type { SQSBatchResponse, SQSEvent } from 'aws-lambda';
import { processNodeBatch } from '../runtime/node-messages';
import { scheduleTick } from '../runtime/node-sync';
import { runtimeFromEnvironment } from '../wiring/runtime-instance';
import { queueRecordsOf } from '../runtime/queue-records';
import { flushMetrics } from '../wiring/wiring';

/** What EventBridge's scheduled rule sends; only its shape matters here. */
interface ScheduledEvent {
  readonly source?: string;
  readonly 'detail-type'?: string;
}

function isQueueBatch(event: SQSEvent | ScheduledEvent | undefined): event is SQSEvent {
  return Array.isArray((event as Partial<SQSEvent> | undefined)?.Records);
}

/**
 * Two triggers: the node queue (node changes, the timer chain's ticks), answered with a partial
 * batch response, and the one-minute schedule, which only restarts a chain that has gone quiet
 * (see runtime/node-sync.ts).
 */
export async function handler(
  event?: SQSEvent | ScheduledEvent,
): Promise<SQSBatchResponse | { chain: string }> {
  try {
    const runtime = runtimeFromEnvironment();
    if (!isQueueBatch(event)) return { chain: await scheduleTick(runtime) };
    return await processNodeBatch(queueRecordsOf(event), runtime);
  } finally {
    flushMetrics();
  }
}
