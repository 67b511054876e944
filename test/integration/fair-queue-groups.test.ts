/**
 * Fair queues (issue 19, finding 7): every work message carries a MessageGroupId, so SQS can tell
 * one namespace's flood from another namespace's single change. Checked against moto, which keeps
 * MessageGroupId on a standard queue and returns it on receive (MessageSystemAttributeNames), but
 * does not reorder deliveries: the fairness itself is modelled and measured in bench/sim.
 */
import {
  CreateQueueCommand,
  DeleteMessageCommand,
  GetQueueAttributesCommand,
  ReceiveMessageCommand,
  SQSClient,
  type Message,
} from '@aws-sdk/client-sqs';
import { CoreV1Api } from '@kubernetes/client-node';
import { beforeEach, describe, expect, it, vi } from 'vitest';
import { callerRoleOption, type CallerRole } from '../../functions/aws/caller-role';
import { SqsWorkQueue } from '../../functions/queue/sqs-work-queue';
import { Forwarder } from '../../functions/forwarder/forwarder';
import { Publisher } from '../../functions/forwarder/publisher';
import { FakeKubeApiServer } from '../../functions/local/fake-kube';
import { loadProjectRbac } from '../../functions/local/project-rbac';
import type { WorkMessage } from '../../functions/contract/work-messages';
import { AwsCallRecorder } from '../../kit/aws-calls';
import { loadBalancerService, readyNode } from '../support/kube-objects';
import { MotoAccount } from '../../kit/moto';

let sqs: SQSClient;
/** Clients built as the functions (whose resends go through SqsWorkQueue) and the forwarder build theirs. */
let functionsSqs: SQSClient;
let forwarderSqs: SQSClient;
let queueUrl: string;
let recorder: AwsCallRecorder;

beforeEach(async () => {
  recorder = new AwsCallRecorder();
  const account = new MotoAccount();
  sqs = recorder.attach(account.client(SQSClient, { maxAttempts: 1 }));
  const as = (role: CallerRole) =>
    recorder.attach(account.client(SQSClient, { maxAttempts: 1, ...callerRoleOption(role) }));
  functionsSqs = as('functions');
  forwarderSqs = as('forwarder');
  queueUrl = (await sqs.send(new CreateQueueCommand({ QueueName: 'work' }))).QueueUrl ?? '';
});

/** Every visible message, deleted as read, with the group SQS kept for it. */
async function receiveAll(url = queueUrl): Promise<Message[]> {
  const all: Message[] = [];
  for (;;) {
    const page = await sqs.send(
      new ReceiveMessageCommand({
        QueueUrl: url,
        MaxNumberOfMessages: 10,
        WaitTimeSeconds: 0,
        MessageSystemAttributeNames: ['MessageGroupId'],
      }),
    );
    const messages = page.Messages ?? [];
    if (messages.length === 0) return all;
    for (const m of messages) {
      all.push(m);
      await sqs.send(new DeleteMessageCommand({ QueueUrl: url, ReceiptHandle: m.ReceiptHandle }));
    }
  }
}

const groupsByBody = (messages: readonly Message[]) =>
  Object.fromEntries(messages.map((m) => [m.Body ?? '', m.Attributes?.MessageGroupId]));

/** A lifecycle event EventBridge did not take, named by its id in the state table. */
const lifecycleEvent: WorkMessage = {
  v: 1,
  kind: 'event',
  id: '6f1c2d3e-4b5a-4c6d-8e7f-8091a2b3c4d5',
};

describe('SqsWorkQueue.send and MessageGroupId (moto: received with MessageSystemAttributeNames)', () => {
  it("groups Service work by the Service's namespace and controller messages by kind", async () => {
    const messages: WorkMessage[] = [
      { v: 1, kind: 'service', key: 'team-a/web' },
      { v: 1, kind: 'hosts', key: 'team-a/api' },
      { v: 1, kind: 'resync', key: 'team-b/web' },
      { v: 1, kind: 'node', reason: 'node added' },
      { v: 1, kind: 'heartbeat', sendFailures: 0, pending: 0 },
      lifecycleEvent,
      // A namespace may be called "node": it must not share the node messages' group.
      { v: 1, kind: 'service', key: 'node/web' },
    ];
    await new SqsWorkQueue(functionsSqs, queueUrl).send(messages);
    const groups = groupsByBody(await receiveAll());
    expect(Object.values(groups)).toHaveLength(messages.length);
    expect(messages.map((m) => groups[JSON.stringify(m)])).toEqual([
      'team-a',
      'team-a',
      'team-b',
      'controller:node',
      'controller:heartbeat',
      'controller:event',
      'node',
    ]);
  });

  it('keeps delays with a group: a delayed message stays invisible, then arrives with its group', async () => {
    const queue = new SqsWorkQueue(functionsSqs, queueUrl);
    await queue.send([{ v: 1, kind: 'service', key: 'team-a/later' }], 2);
    await queue.send([{ v: 1, kind: 'service', key: 'team-b/now' }]);
    expect(Object.values(groupsByBody(await receiveAll()))).toEqual(['team-b']);
    await new Promise((resolve) => setTimeout(resolve, 2200));
    expect(Object.values(groupsByBody(await receiveAll()))).toEqual(['team-a']);
  });

  it('keeps dead-letter redrive with a group: past maxReceiveCount the message moves to the DLQ', async () => {
    const dlqUrl =
      (await sqs.send(new CreateQueueCommand({ QueueName: 'work-dlq' }))).QueueUrl ?? '';
    const dlqArn = (
      await sqs.send(
        new GetQueueAttributesCommand({ QueueUrl: dlqUrl, AttributeNames: ['QueueArn'] }),
      )
    ).Attributes?.QueueArn;
    const redriven =
      (
        await sqs.send(
          new CreateQueueCommand({
            QueueName: 'work-redrive',
            Attributes: {
              VisibilityTimeout: '0',
              RedrivePolicy: JSON.stringify({ deadLetterTargetArn: dlqArn, maxReceiveCount: 1 }),
            },
          }),
        )
      ).QueueUrl ?? '';
    await new SqsWorkQueue(functionsSqs, redriven).send([
      { v: 1, kind: 'service', key: 'team-a/poison' },
    ]);
    const receive = () =>
      sqs.send(new ReceiveMessageCommand({ QueueUrl: redriven, MaxNumberOfMessages: 10 }));
    // Received once and not deleted: the next receive finds it over the limit and moves it.
    expect((await receive()).Messages).toHaveLength(1);
    expect((await receive()).Messages ?? []).toHaveLength(0);
    const parked = await receiveAll(dlqUrl);
    expect(parked.map((m) => m.Body)).toEqual([
      JSON.stringify({ v: 1, kind: 'service', key: 'team-a/poison' }),
    ]);
  });
});

describe("the forwarder's publisher", () => {
  it('sends a quiet namespace in the first batch even behind a burst from another namespace', async () => {
    const queue = new SqsWorkQueue(forwarderSqs, queueUrl);
    const batches: WorkMessage[][] = [];
    const publisher = new Publisher(
      async (messages) => {
        batches.push(messages);
        await queue.send(messages);
      },
      { capacity: 1000, maxBackoffMs: 100, sleep: (ms) => new Promise((r) => setTimeout(r, ms)) },
    );
    for (let i = 0; i < 50; i++) {
      await publisher.enqueue({ v: 1, kind: 'service', key: `burst/svc-${i}` });
    }
    await publisher.enqueue({ v: 1, kind: 'service', key: 'quiet/web' });
    await publisher.enqueue({ v: 1, kind: 'node', reason: 'node added' });
    publisher.start();
    expect(await publisher.stop(10_000)).toBe(0);

    const first = batches[0]?.map((m) => ('key' in m ? m.key : m.kind));
    expect(first).toContain('quiet/web');
    expect(first).toContain('node');
    // Nothing lost, nothing twice, and each namespace's own messages keep their order.
    const sent = batches.flat().map((m) => ('key' in m ? m.key : m.kind));
    expect(sent).toHaveLength(52);
    expect(new Set(sent).size).toBe(52);
    const burst = sent.filter((k) => k.startsWith('burst/'));
    expect(burst).toEqual(Array.from({ length: 50 }, (_, i) => `burst/svc-${i}`));
    const groups = groupsByBody(await receiveAll());
    expect(groups[JSON.stringify({ v: 1, kind: 'service', key: 'quiet/web' })]).toBe('quiet');
    expect(groups[JSON.stringify({ v: 1, kind: 'service', key: 'burst/svc-7' })]).toBe('burst');
  });

  it('the real forwarder sends each namespace as its own group, nodes in one group', async () => {
    const rbac = loadProjectRbac();
    const kube = await FakeKubeApiServer.start({ rbac: rbac.authorizer });
    const api = kube.kubeConfig().makeApiClient(CoreV1Api);
    const forwarder = new Forwarder({
      kubeConfig: kube.kubeConfig({ as: rbac.forwarder }),
      claim: { loadBalancerClass: 'serverless-service-controller.io/nlb', claimClassless: true },
      nodePolicy: 'stable',
      send: (messages) => new SqsWorkQueue(forwarderSqs, queueUrl).send(messages),
      sleep: (ms) => new Promise((resolve) => setTimeout(resolve, Math.min(ms, 200))),
    });
    try {
      forwarder.start();
      await vi.waitFor(() => expect(forwarder.ready).toBe(true));
      await api.createNamespacedService({
        namespace: 'team-a',
        body: loadBalancerService('web', 'team-a'),
      });
      await api.createNamespacedService({
        namespace: 'team-b',
        body: loadBalancerService('web', 'team-b'),
      });
      await api.createNode({ body: readyNode('node-1') });
      const groups: Record<string, string | undefined> = {};
      await vi.waitFor(async () => {
        Object.assign(groups, groupsByBody(await receiveAll()));
        expect(Object.keys(groups).filter((b) => !b.includes('heartbeat'))).toHaveLength(3);
      });
      const of = (kind: string, key?: string) =>
        Object.entries(groups).find(([body]) => {
          const m = JSON.parse(body) as { kind: string; key?: string };
          return m.kind === kind && m.key === key;
        })?.[1];
      expect(of('service', 'team-a/web')).toBe('team-a');
      expect(of('service', 'team-b/web')).toBe('team-b');
      expect(of('node')).toBe('controller:node');
      expect(of('heartbeat')).toBe('controller:heartbeat');
    } finally {
      await forwarder.stop(1000);
      await kube.stop();
    }
    expect(kube.denials.map((d) => d.message)).toEqual([]);
  });
});
