import type { SQSBatchResponse, SQSEvent } from 'aws-lambda';
import { processWorkBatch } from '../runtime/work-batch';
import { runtimeFromEnvironment } from '../wiring/runtime-instance';
import { queueRecordsOf } from '../runtime/queue-records';
import { flushMetrics } from '../wiring/wiring';

/** The work queue's consumer: partial batch responses, never a thrown batch (docs/design.md §3). */
export async function handler(event: SQSEvent): Promise<SQSBatchResponse> {
  try {
    return await processWorkBatch(queueRecordsOf(event), runtimeFromEnvironment());
  } finally {
    flushMetrics();
  }
}
