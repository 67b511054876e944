import {
  ChangeMessageVisibilityCommand,
  SendMessageBatchCommand,
  type SQSClient,
} from '@aws-sdk/client-sqs';
import { RetryableError } from '../core/errors';
import type { WorkMessage } from '../runtime/messages';

/** The work queue as the runtime needs it. */
export interface WorkQueue {
  /** Sends messages (batched by 10); a message SQS did not accept is retried, then reported. */
  send(messages: readonly WorkMessage[], delaySeconds?: number): Promise<void>;
  /** Makes a received message visible again after `seconds` (the backoff of S6). */
  changeVisibility(receiptHandle: string, seconds: number): Promise<void>;
}

export class SqsWorkQueue implements WorkQueue {
  constructor(
    private readonly sqs: SQSClient,
    private readonly queueUrl: string,
  ) {}

  async send(messages: readonly WorkMessage[], delaySeconds = 0): Promise<void> {
    for (let i = 0; i < messages.length; i += 10) {
      let pending = messages.slice(i, i + 10).map((message, n) => ({
        Id: String(n),
        MessageBody: JSON.stringify(message),
        DelaySeconds: Math.min(900, Math.max(0, Math.round(delaySeconds))),
      }));
      for (let attempt = 0; pending.length > 0; attempt++) {
        const result = await this.sqs.send(
          new SendMessageBatchCommand({ QueueUrl: this.queueUrl, Entries: pending }),
        );
        const failed = new Set((result.Failed ?? []).map((f) => f.Id));
        pending = pending.filter((entry) => failed.has(entry.Id));
        if (pending.length > 0 && attempt >= 2) {
          throw new RetryableError(
            `SQS did not accept ${pending.length} messages: ${(result.Failed ?? []).map((f) => f.Message).join('; ')}`,
          );
        }
      }
    }
  }

  async changeVisibility(receiptHandle: string, seconds: number): Promise<void> {
    await this.sqs.send(
      new ChangeMessageVisibilityCommand({
        QueueUrl: this.queueUrl,
        ReceiptHandle: receiptHandle,
        VisibilityTimeout: Math.min(43200, Math.max(0, Math.round(seconds))),
      }),
    );
  }
}
