import {
  ChangeMessageVisibilityCommand,
  DeleteMessageBatchCommand,
  SendMessageBatchCommand,
  SendMessageCommand,
  type SQSClient,
} from '@aws-sdk/client-sqs';
import { RetryableError } from '../core/errors';
import type { WorkMessage } from '../contract/work-messages';
import { messageGroupOf } from '../contract/work-message-group';

import type { WorkQueue } from '../runtime/ports';

/** SendMessageBatch requests a send keeps in flight at once. */
const sendsInFlight = 8;

export class SqsWorkQueue implements WorkQueue {
  constructor(
    private readonly sqs: SQSClient,
    private readonly queueUrl: string,
    private readonly deadLetterQueueUrl?: string,
  ) {}

  async send(
    messages: readonly WorkMessage[],
    delaySeconds: number | readonly number[] = 0,
  ): Promise<void> {
    const delayOf = (index: number) =>
      typeof delaySeconds === 'number' ? delaySeconds : (delaySeconds[index] ?? 0);
    const chunks: { message: WorkMessage; delay: number }[][] = [];
    for (let i = 0; i < messages.length; i += 10) {
      chunks.push(
        messages.slice(i, i + 10).map((message, n) => ({ message, delay: delayOf(i + n) })),
      );
    }
    // A node change's fan-out is hundreds of messages: requests side by side, a few at a time,
    // rather than one round trip after another in the function's billed time.
    for (let i = 0; i < chunks.length; i += sendsInFlight) {
      await Promise.all(chunks.slice(i, i + sendsInFlight).map((chunk) => this.sendChunk(chunk)));
    }
  }

  private async sendChunk(
    chunk: readonly { message: WorkMessage; delay: number }[],
  ): Promise<void> {
    let pending = chunk.map(({ message, delay }, n) => ({
      Id: String(n),
      MessageBody: JSON.stringify(message),
      // The queue stays a standard queue: on one, a group only tells SQS whose work this is.
      MessageGroupId: messageGroupOf(message),
      DelaySeconds: Math.min(900, Math.max(0, Math.round(delay))),
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

  async deadLetter(body: string, problem: string): Promise<boolean> {
    if (this.deadLetterQueueUrl === undefined) return false;
    await this.sqs.send(
      new SendMessageCommand({
        QueueUrl: this.deadLetterQueueUrl,
        MessageBody: body,
        MessageAttributes: {
          problem: { DataType: 'String', StringValue: problem.slice(0, 1024) },
        },
      }),
    );
    return true;
  }

  async acknowledge(receiptHandles: readonly string[]): Promise<void> {
    for (let i = 0; i < receiptHandles.length; i += 10) {
      const entries = receiptHandles
        .slice(i, i + 10)
        .map((handle, n) => ({ Id: String(n), ReceiptHandle: handle }));
      const result = await this.sqs.send(
        new DeleteMessageBatchCommand({ QueueUrl: this.queueUrl, Entries: entries }),
      );
      if ((result.Failed ?? []).length > 0) {
        throw new Error(
          `SQS did not delete ${result.Failed?.length ?? 0} messages: ${(result.Failed ?? []).map((f) => f.Message).join('; ')}`,
        );
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
