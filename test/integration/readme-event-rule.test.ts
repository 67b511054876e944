import { readFileSync } from 'node:fs';
import {
  EventBridgeClient,
  PutEventsCommand,
  PutRuleCommand,
  PutTargetsCommand,
} from '@aws-sdk/client-eventbridge';
import {
  CreateQueueCommand,
  GetQueueAttributesCommand,
  ReceiveMessageCommand,
  SQSClient,
} from '@aws-sdk/client-sqs';
import { describe, expect, it } from 'vitest';
import { MotoAccount } from '../../kit/moto';

const marker = '<!-- example-rule: tested by test/integration/readme-event-rule.test.ts -->';

/** The rule pattern the README shows, as written there. */
function readmePattern(): Record<string, unknown> {
  const readme = readFileSync('README.md', 'utf8');
  const after = readme.slice(readme.indexOf(marker) + marker.length);
  const block = /```json\n([\s\S]*?)\n```/.exec(after)?.[1];
  if (readme.indexOf(marker) < 0 || block === undefined)
    throw new Error('README example rule not found');
  return JSON.parse(block) as Record<string, unknown>;
}

/** An example event from docs/events/examples, moved to cluster `my-cluster`. */
function example(type: string) {
  const event = JSON.parse(readFileSync(`docs/events/examples/${type}.json`, 'utf8')) as {
    source: string;
    'detail-type': string;
    detail: Record<string, unknown>;
  };
  return {
    Source: event.source,
    DetailType: event['detail-type'],
    Detail: JSON.stringify({ ...event.detail, cluster: 'my-cluster' }),
    EventBusName: 'default',
  };
}

describe("the README's example rule (moto)", () => {
  it('matches LoadBalancerEnsured of the cluster and nothing else', async () => {
    const account = new MotoAccount();
    const events = account.client(EventBridgeClient);
    const sqs = account.client(SQSClient);
    const queueUrl = (await sqs.send(new CreateQueueCommand({ QueueName: 'topic' }))).QueueUrl;
    const queueArn = (
      await sqs.send(
        new GetQueueAttributesCommand({ QueueUrl: queueUrl, AttributeNames: ['QueueArn'] }),
      )
    ).Attributes?.QueueArn;
    await events.send(
      new PutRuleCommand({
        Name: 'lb-ensured',
        EventBusName: 'default',
        EventPattern: JSON.stringify(readmePattern()),
      }),
    );
    await events.send(
      new PutTargetsCommand({
        Rule: 'lb-ensured',
        EventBusName: 'default',
        Targets: [{ Id: 'q', Arn: queueArn }],
      }),
    );
    const otherCluster = { ...example('LoadBalancerEnsured') };
    otherCluster.Detail = JSON.stringify({ ...JSON.parse(otherCluster.Detail), cluster: 'other' });
    await events.send(
      new PutEventsCommand({
        Entries: [
          example('LoadBalancerEnsured'),
          example('LoadBalancerHostsUpdated'),
          example('LoadBalancerDeleted'),
          otherCluster,
        ],
      }),
    );
    const received = await sqs.send(
      new ReceiveMessageCommand({
        QueueUrl: queueUrl,
        MaxNumberOfMessages: 10,
        WaitTimeSeconds: 1,
      }),
    );
    const delivered = (received.Messages ?? []).map(
      (m) => JSON.parse(m.Body ?? '{}') as { 'detail-type': string; detail: { cluster: string } },
    );
    expect(delivered.map((e) => `${e['detail-type']} ${e.detail.cluster}`)).toEqual([
      'LoadBalancerEnsured my-cluster',
    ]);
  });
});
