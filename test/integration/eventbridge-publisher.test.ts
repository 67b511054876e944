import { EventBridgeClient } from '@aws-sdk/client-eventbridge';
import { beforeEach, describe, expect, it } from 'vitest';
import { EventBridgePublisher } from '../../functions/queue/eventbridge-publisher';
import {
  eventSource,
  lifecycleEventProblem,
  type LifecycleEvent,
} from '../../functions/contract/lifecycle-events';
import { AwsCallRecorder } from '../../kit/aws-calls';
import { createEventFeed, type EventFeed } from '../support/event-feed';
import { MotoAccount } from '../../kit/moto';
import { callerRoleOption } from '../../functions/aws/caller-role';

const common = {
  schemaVersion: 1 as const,
  eventId: 'e-1',
  occurredAt: '2026-11-30T12:00:00.000Z',
  cluster: 'test',
  correlationId: 'c-1',
};
const ref = (name: string) => ({ ...common, namespace: 'default', name, uid: `uid-${name}` });

/** One of each kind, and more than one PutEvents call's worth. */
function events(count: number): LifecycleEvent[] {
  return Array.from({ length: count }, (_, i): LifecycleEvent => {
    switch (i % 5) {
      case 0:
        return {
          detailType: 'LoadBalancerEnsured',
          detail: {
            ...ref(`svc-${i}`),
            dnsName: `k8s-${i}.elb.us-east-1.amazonaws.com`,
            scheme: 'internal',
            listeners: [{ port: 80, protocol: 'TCP', targetGroupArn: 'arn:tg' }],
            loadBalancerArn: 'arn:lb',
          },
        };
      case 1:
        return {
          detailType: 'LoadBalancerHostsUpdated',
          detail: { ...ref(`svc-${i}`), added: ['i-0abc'], removed: [] },
        };
      case 2:
        return { detailType: 'LoadBalancerDeleted', detail: { ...ref(`svc-${i}`) } };
      case 3:
        return {
          detailType: 'LoadBalancerSyncFailed',
          detail: { ...ref(`svc-${i}`), reason: 'throttled', terminal: false, retryInSeconds: 5 },
        };
      default:
        return {
          detailType: 'NodeSetChanged',
          detail: { ...common, added: [], removed: ['i-0def'], eligibleHosts: 2 },
        };
    }
  });
}

let recorder: AwsCallRecorder;
let client: EventBridgeClient;
let feed: EventFeed;

beforeEach(async () => {
  const account = new MotoAccount();
  recorder = new AwsCallRecorder();
  // One SDK attempt, so the publisher's own retry is what is tested.
  client = recorder.attach(
    account.client(EventBridgeClient, { maxAttempts: 1, ...callerRoleOption('functions') }),
  );
  feed = await createEventFeed(account, 'controller');
});

const readBack = () => feed.read();

describe('EventBridgePublisher against moto', () => {
  it('publishes in PutEvents calls of ten, and a rule delivers every event, each valid against its schema', async () => {
    const report = await new EventBridgePublisher(client, { busName: 'controller' }).publish(
      events(12),
    );
    expect(report).toEqual({ published: 12, rejected: [], invalid: [] });
    expect(recorder.count('PutEvents')).toBe(2);
    const delivered = await readBack();
    expect(delivered).toHaveLength(12);
    for (const event of delivered) {
      expect(event.source).toBe(eventSource);
      // The envelope's time is when it happened (a retried event keeps it), to the second.
      expect(event.time).toBe('2026-11-30T12:00:00Z');
      expect(
        lifecycleEventProblem({ detailType: event['detail-type'], detail: event.detail }),
      ).toBeUndefined();
    }
  });

  it('retries a failed call and still delivers everything once', async () => {
    recorder.injectFault({ operation: 'PutEvents', kind: 'server-error', times: 1 });
    const report = await new EventBridgePublisher(client, {
      busName: 'controller',
      sleep: () => Promise.resolve(),
    }).publish(events(3));
    expect(report).toEqual({ published: 3, rejected: [], invalid: [] });
    expect(await readBack()).toHaveLength(3);
  });

  it('reports what it could not publish after every attempt, without throwing', async () => {
    recorder.injectFault({ operation: 'PutEvents', kind: 'server-error' });
    const failures: number[] = [];
    const events4 = events(4);
    const report = await new EventBridgePublisher(client, {
      busName: 'controller',
      attempts: 3,
      sleep: () => Promise.resolve(),
      onFailure: (failed) => failures.push(failed),
    }).publish(events4);
    expect(report).toEqual({ published: 0, rejected: events4, invalid: [] });
    expect(failures).toEqual([4]);
    expect(recorder.count('PutEvents')).toBe(3);
  });

  it('retries only the entries PutEvents rejected (stubbed: no emulator rejects single entries)', async () => {
    const calls: number[] = [];
    const stub = {
      send: (command: { input: { Entries?: unknown[] } }) => {
        const entries = command.input.Entries ?? [];
        calls.push(entries.length);
        // The first call rejects the second entry with a throttling code, as AWS can.
        return Promise.resolve({
          FailedEntryCount: calls.length === 1 ? 1 : 0,
          Entries: entries.map((_, i) =>
            calls.length === 1 && i === 1
              ? { ErrorCode: 'ThrottlingException' }
              : { EventId: `e${i}` },
          ),
        });
      },
    } as unknown as EventBridgeClient;
    const report = await new EventBridgePublisher(stub, {
      busName: 'controller',
      sleep: () => Promise.resolve(),
    }).publish(events(3));
    expect(report).toEqual({ published: 3, rejected: [], invalid: [] });
    expect(calls).toEqual([3, 1]);
  });

  it('hands back an entry EventBridge calls invalid at once, without retrying it (stubbed, as above)', async () => {
    const calls: number[] = [];
    const stub = {
      send: (command: { input: { Entries?: unknown[] } }) => {
        const entries = command.input.Entries ?? [];
        calls.push(entries.length);
        return Promise.resolve({
          FailedEntryCount: 1,
          Entries: entries.map((_, i) =>
            i === 0 ? { ErrorCode: 'MalformedDetail' } : { EventId: `e${i}` },
          ),
        });
      },
    } as unknown as EventBridgeClient;
    const sent = events(2);
    const report = await new EventBridgePublisher(stub, {
      busName: 'controller',
      sleep: () => Promise.resolve(),
    }).publish(sent);
    expect(report).toEqual({ published: 1, rejected: [], invalid: [sent[0]] });
    expect(calls).toEqual([2]);
  });
});
