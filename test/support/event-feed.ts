import {
  CreateEventBusCommand,
  EventBridgeClient,
  PutRuleCommand,
  PutTargetsCommand,
} from '@aws-sdk/client-eventbridge';
import {
  CreateQueueCommand,
  DeleteMessageCommand,
  GetQueueAttributesCommand,
  ReceiveMessageCommand,
  SQSClient,
} from '@aws-sdk/client-sqs';
import { eventSource } from '../../functions/contract/lifecycle-events';
import type { MotoAccount } from '../../kit/moto';

/** An event as a rule target receives it: the EventBridge envelope around our detail. */
export interface DeliveredEvent {
  readonly 'detail-type': string;
  readonly source: string;
  readonly time: string;
  readonly detail: Record<string, unknown>;
}

/**
 * What a consumer sees: a bus in the moto account with a rule that sends every controller event
 * to an SQS queue, as a platform team would wire a Lambda or SNS topic. `read` drains the queue.
 */
export interface EventFeed {
  readonly busName: string;
  read(): Promise<DeliveredEvent[]>;
}

export async function createEventFeed(account: MotoAccount, busName: string): Promise<EventFeed> {
  const events = account.client(EventBridgeClient);
  const sqs = account.client(SQSClient);
  const queueUrl =
    (await sqs.send(new CreateQueueCommand({ QueueName: `feed-${busName}` }))).QueueUrl ?? '';
  const queueArn = (
    await sqs.send(
      new GetQueueAttributesCommand({ QueueUrl: queueUrl, AttributeNames: ['QueueArn'] }),
    )
  ).Attributes?.QueueArn;
  if (busName !== 'default') await events.send(new CreateEventBusCommand({ Name: busName }));
  await events.send(
    new PutRuleCommand({
      Name: 'controller-events',
      EventBusName: busName,
      EventPattern: JSON.stringify({ source: [eventSource] }),
    }),
  );
  await events.send(
    new PutTargetsCommand({
      Rule: 'controller-events',
      EventBusName: busName,
      Targets: [{ Id: 'queue', Arn: queueArn }],
    }),
  );
  return {
    busName,
    read: async () => {
      const received: DeliveredEvent[] = [];
      for (let round = 0; round < 20; round++) {
        const batch = await sqs.send(
          new ReceiveMessageCommand({ QueueUrl: queueUrl, MaxNumberOfMessages: 10 }),
        );
        const messages = batch.Messages ?? [];
        if (messages.length === 0) break;
        for (const m of messages) {
          received.push(JSON.parse(m.Body ?? '{}') as DeliveredEvent);
          await sqs.send(
            new DeleteMessageCommand({ QueueUrl: queueUrl, ReceiptHandle: m.ReceiptHandle }),
          );
        }
      }
      return received;
    },
  };
}
