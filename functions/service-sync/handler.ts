import type { SQSBatchResponse, SQSEvent } from 'aws-lambda';
import { processWorkBatch } from '../runtime/process-work';
import { runtimeFromEnvironment } from '../runtime/runtime-instance';
import { queueRecordsOf } from '../runtime/sqs-records';
import { flushMetrics } from '../runtime/wiring';

/** The work queue's consumer: partial batch responses, never a thrown batch (docs/design.md §3). */
export async function handler(event: SQSEvent): Promise<SQSBatchResponse> {
  try {
    return await processWorkBatch(queueRecordsOf(event), runtimeFromEnvironment());
  } finally {
    flushMetrics();
  }
}
