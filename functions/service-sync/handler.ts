import type { SQSBatchResponse, SQSEvent } from 'aws-lambda';
import { processWorkBatch } from '../runtime/process-work';
import { runtimeFromEnvironment } from '../runtime/runtime-instance';
import { flushMetrics } from '../runtime/wiring';

/** The work queue's consumer: partial batch responses, never a thrown batch (docs/design.md §3). */
export async function handler(event: SQSEvent): Promise<SQSBatchResponse> {
  try {
    return await processWorkBatch(
      event.Records.map((record) => ({
        messageId: record.messageId,
        body: record.body,
        receiptHandle: record.receiptHandle,
        receiveCount: Number(record.attributes.ApproximateReceiveCount || '1'),
      })),
      runtimeFromEnvironment(),
    );
  } finally {
    flushMetrics();
  }
}
