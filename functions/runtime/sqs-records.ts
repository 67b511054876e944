import type { SQSEvent } from 'aws-lambda';
import type { QueueRecord } from './process-work';

/** An event source mapping's batch as the handlers take it. */
export function queueRecordsOf(event: SQSEvent): QueueRecord[] {
  return event.Records.map((record) => ({
    messageId: record.messageId,
    body: record.body,
    receiptHandle: record.receiptHandle,
    receiveCount: Number(record.attributes.ApproximateReceiveCount || '1'),
  }));
}
