import { DynamoDBClient, ScanCommand, type AttributeValue } from '@aws-sdk/client-dynamodb';
import { DescribeSubnetsCommand } from '@aws-sdk/client-ec2';
import {
  DescribeLoadBalancersCommand,
  DescribeTargetHealthCommand,
} from '@aws-sdk/client-elastic-load-balancing-v2';
import {
  CreateQueueCommand,
  DeleteMessageCommand,
  ReceiveMessageCommand,
} from '@aws-sdk/client-sqs';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { readNlbState } from '../../functions/nlb/nlb-state';
import type { WiredRuntime } from '../../functions/wiring/wiring';
import { parseWorkMessage } from '../../functions/contract/work-messages';
import { processNodeBatch } from '../../functions/runtime/node-messages';
import { processWorkBatch } from '../../functions/runtime/work-batch';
import { type BatchResult, type QueueRecord } from '../../functions/runtime/queue-records';
import { runSweep } from '../../functions/runtime/sweep';
import { createRuntime } from '../../functions/wiring/wiring';
import {
  loadRelease01State,
  release01Messages,
  release01State,
  release01SubnetsByZone,
} from '../fixtures/release-0.1/load-fixtures';
import { createEventFeed, type EventFeed } from '../support/event-feed';
import { loadBalancerService } from '../support/kube-objects';
import {
  createRuntimeWorld,
  RecordingLog,
  RecordingMetrics,
  type RuntimeWorld,
} from '../support/runtime-world';

/**
 * Upgrading from release 0.1 (docs/upgrades.md): the state table 0.1 wrote and the messages 0.1
 * had in flight, from test/fixtures/release-0.1 (made by running 0.1's code), meet the current
 * functions, deployed as the stack deploys them: with a node queue of their own.
 */

/** The lease and failure bookkeeping 0.1 kept on a Service's item; the current release does not. */
const release01LeaseAttributes = [
  'leaseOwner',
  'leaseUntil',
  'fence',
  'dirty',
  'failures',
  'failingSince',
  'lastPassAt',
];
const services = ['web', 'api', 'flaky'] as const;

let world: RuntimeWorld;
let feed: EventFeed;
let upgraded: Upgraded;

describe('release 0.1 messages', () => {
  it('every 0.1 message body, of every kind, parses with the current schema', () => {
    const messages = release01Messages();
    const kinds = new Set<string>();
    for (const { body } of messages) {
      const parsed = parseWorkMessage(body);
      expect(parsed, body).toMatchObject({ ok: true });
      if (parsed.ok) kinds.add(parsed.message.kind);
    }
    expect([...kinds].sort()).toEqual(['event', 'heartbeat', 'hosts', 'node', 'resync', 'service']);
  });
});

describe('upgrading from release 0.1: functions first, the 0.1 forwarder still running', () => {
  beforeEach(async () => {
    world = await createRuntimeWorld({ lifecycleEvents: { busName: 'platform' } });
    feed = await createEventFeed(world.account, 'platform');
    upgraded = await upgradedFunctions(world);
  });

  afterEach(async () => {
    await world.stop();
  });

  it(
    'the 0.1 table and the 0.1 messages in flight converge: NLBs, targets, status, current items',
    { timeout: 240_000 },
    async () => {
      await startFromRelease01();
      // First, while the 0.1 worker's lease on api is surely live (30 s from the load): a message
      // for api finds the key busy and nothing is written for it...
      const forApi = release01Messages().find((m) => m.body.includes('"key":"default/api"'));
      await world.send(forApi?.body ?? '');
      await upgraded.drain();
      const api = await item('svc#default/api');
      expect(api?.leaseOwner?.S).toBe('release-0.1-running-worker');
      expect(await nlbOf('default/api')).toBeUndefined();
      // ...and its holder was asked to run once more, as a 0.1 worker would have asked it (S5).
      expect(api?.dirty?.BOOL).toBe(true);

      for (const { body } of release01Messages()) await world.send(body);
      await upgraded.drain();

      // The 0.1 node messages reached node sync through the node queue: the host set is this
      // cluster's now, and the stored event 0.1 could not publish was published.
      expect(upgraded.metrics.get('NodeMessagesMoved')).toBeGreaterThan(0);
      expect(await storedHostIds()).toEqual(world.aws.hosts.map((h) => h.instanceId).sort());
      // The resyncs of 0.1's last sweep still name a pass the table records: full syncs.
      expect(upgraded.metrics.get('UnverifiedResyncs')).toBe(0);
      const events = await feed.read();
      const pendingId = release01Pending();
      expect(events.map((e) => e.detail.eventId)).toContain(pendingId);
      expect(await item(`evt#${pendingId}`)).toBeUndefined();

      // When the 0.1 lease has run out, the current sweep re-drives what is left.
      await untilPast(Number(api?.leaseUntil?.N ?? 0));
      await runSweep(upgraded.runtime);
      await upgraded.drain();

      for (const name of services) await expectConverged(`default/${name}`);
      for (const found of await itemsStartingWith('svc#')) {
        const pk = found.pk?.S ?? '';
        for (const attribute of release01LeaseAttributes) {
          expect(found[attribute], `${pk} ${attribute}`).toBeUndefined();
        }
        // 0.1's key with failures and no Service: no record is brought back for it.
        if (pk === 'svc#default/broken') {
          expect(found.rec).toBeUndefined();
          expect(found.recz).toBeUndefined();
        }
        // Every record left is in the current format: compressed, 0.1's JSON gone.
        if (found.uid !== undefined) {
          expect(found.rec, pk).toBeUndefined();
          expect(found.recz?.B, pk).toBeDefined();
        }
      }
      const meta = await item('hosts#meta');
      for (const chunk of await itemsStartingWith('hosts#chunk#')) {
        expect(chunk.pk?.S?.startsWith(`hosts#chunk#${meta?.chunkKey?.S}#`)).toBe(true);
      }
      expect(await world.deadLetters()).toEqual([]);
      expect(upgraded.metrics.get('MalformedMessages')).toBe(0);
      // Messages that found a key busy (api's, under the 0.1 lease) wait out a lease and come
      // back; once they have run, nothing is left.
      const settled = Date.now() + 2 * 30_000;
      let depth = await world.queueDepth();
      while (depth.visible + depth.inFlight > 0 && Date.now() < settled) {
        await upgraded.drain();
        await new Promise((resolve) => setTimeout(resolve, 1_000));
        depth = await world.queueDepth();
      }
      expect({ visible: depth.visible, inFlight: depth.inFlight }).toEqual({
        visible: 0,
        inFlight: 0,
      });
      for (const name of services) await expectConverged(`default/${name}`);
    },
  );

  it(
    'a node message a 0.1 forwarder sends to the work queue after the upgrade is not lost',
    { timeout: 240_000 },
    async () => {
      await startFromRelease01();
      for (const { body } of release01Messages()) await world.send(body);
      await upgraded.drain();

      // The mixed state: the node queue exists, the forwarder is 0.1's and knows only the work queue.
      const joined = await world.addNode();
      const forwarderBody = release01Messages().find(
        (m) => m.from === 'forwarder' && m.body.includes('"kind":"node"'),
      )?.body;
      expect(forwarderBody).toBeDefined();
      await world.send(forwarderBody ?? '');
      const moved = upgraded.metrics.get('NodeMessagesMoved');
      await upgraded.drain();
      expect(upgraded.metrics.get('NodeMessagesMoved')).toBe(moved + 1);
      // api is still held by the 0.1 worker's lease (see above); the two others follow the node.
      for (const name of ['web', 'flaky']) {
        const targets = await targetsOf(`default/${name}`);
        for (const ids of targets) expect(ids).toContain(joined.instanceId);
      }
    },
  );
});

/** The Services 0.1 served, in the API server, and 0.1's table with their UIDs and subnets. */
async function startFromRelease01() {
  const fixture = release01State();
  expect(fixture.clusterName).toBe(world.config.clusterName);
  const ids = new Map<string, string>();
  for (const name of services) {
    const created = await world.api.createNamespacedService({
      namespace: 'default',
      body: loadBalancerService(name),
    });
    const old = fixture.items.find((i) => i.pk?.S === `svc#default/${name}`)?.uid?.S;
    if (old !== undefined && created.metadata?.uid !== undefined)
      ids.set(old, created.metadata.uid);
  }
  const subnets = await world.aws.testClients.ec2.send(
    new DescribeSubnetsCommand({ SubnetIds: [...world.aws.subnetIds] }),
  );
  for (const [zone, old] of release01SubnetsByZone(fixture)) {
    const now = subnets.Subnets?.find((s) => s.AvailabilityZone === zone)?.SubnetId;
    expect(now, zone).toBeDefined();
    ids.set(old, now ?? '');
  }
  await loadRelease01State(world.account.client(DynamoDBClient), world.config.tableName, ids);
}

function release01Pending(): string {
  const pk = release01State().items.find((i) => i.pk?.S?.startsWith('evt#'))?.pk?.S ?? '';
  return pk.slice('evt#'.length);
}

async function expectConverged(key: string) {
  const lb = await nlbOf(key);
  expect(lb?.State?.Code, key).toBe('active');
  const [namespace = '', name = ''] = key.split('/');
  const service = await world.api.readNamespacedService({ name, namespace });
  expect(service.status?.loadBalancer?.ingress?.[0]?.hostname, key).toBe(
    lb?.DNSName?.toLowerCase(),
  );
  const nodes = world.aws.hosts.map((h) => h.instanceId).sort();
  const targets = await targetsOf(key);
  expect(targets.length, key).toBe(2);
  for (const ids of targets) expect(ids, key).toEqual(nodes);
}

async function nlbOf(key: string) {
  const arn = readNlbState(
    (await upgraded.runtime.store.getService(key))?.provider,
  ).loadBalancerArn;
  if (arn === undefined) return undefined;
  const found = await world.aws.testClients.elbv2
    .send(new DescribeLoadBalancersCommand({ LoadBalancerArns: [arn] }))
    .catch(() => undefined);
  return found?.LoadBalancers?.[0];
}

async function targetsOf(key: string): Promise<string[][]> {
  const state = readNlbState((await upgraded.runtime.store.getService(key))?.provider);
  const result = [];
  for (const group of Object.values(state.targetGroups ?? {})) {
    const health = await world.aws.testClients.elbv2.send(
      new DescribeTargetHealthCommand({ TargetGroupArn: group.arn }),
    );
    result.push((health.TargetHealthDescriptions ?? []).map((d) => d.Target?.Id ?? '').sort());
  }
  return result;
}

async function itemsStartingWith(prefix: string): Promise<Record<string, AttributeValue>[]> {
  const found = [];
  let start: Record<string, AttributeValue> | undefined;
  do {
    const page = await world.account.client(DynamoDBClient).send(
      new ScanCommand({
        TableName: world.config.tableName,
        ConsistentRead: true,
        ...(start ? { ExclusiveStartKey: start } : {}),
      }),
    );
    found.push(...(page.Items ?? []).filter((i) => i.pk?.S?.startsWith(prefix)));
    start = page.LastEvaluatedKey;
  } while (start !== undefined);
  return found;
}

/** The instance IDs of the eligible host set the table holds now. */
async function storedHostIds(): Promise<string[]> {
  const meta = await item('hosts#meta');
  const ids = [];
  for (let i = 0; i < Number(meta?.chunks?.N ?? 0); i++) {
    const chunk = await item(`hosts#chunk#${meta?.chunkKey?.S}#${i}`);
    const hosts = JSON.parse(chunk?.hosts?.S ?? '[]') as { instanceId: string }[];
    ids.push(...hosts.map((h) => h.instanceId));
  }
  return ids.sort();
}

async function item(pk: string) {
  return (await itemsStartingWith(pk)).find((i) => i.pk?.S === pk);
}

async function untilPast(epochMs: number) {
  const wait = epochMs - Date.now() + 200;
  if (wait > 0) await new Promise((resolve) => setTimeout(resolve, wait));
}

interface Upgraded {
  readonly runtime: WiredRuntime;
  readonly metrics: RecordingMetrics;
  /** Handles the work queue and the node queue, as their event source mappings do, until both stay empty. */
  drain(): Promise<void>;
}

/**
 * The current functions as the stack deploys them: the world's configuration plus a node queue
 * (`nodeQueueUrl`), the node-sync function consuming it with processNodeBatch.
 */
async function upgradedFunctions(w: RuntimeWorld): Promise<Upgraded> {
  // Named after the work queue, as the IAM evaluation of recorded calls expects a node queue.
  const nodeQueueUrl =
    (await w.sqs.send(new CreateQueueCommand({ QueueName: 'work-node' }))).QueueUrl ?? '';
  const metrics = new RecordingMetrics();
  const log = new RecordingLog();
  const runtime = createRuntime(
    { ...w.config, nodeQueueUrl },
    {
      credentials: w.account.config.credentials,
      maxAttempts: 2,
      log,
      metrics,
      adaptClient: (client) => w.aws.recorder.attach(w.account.bind(client)),
    },
  );
  const handleOnce = async (
    queueUrl: string,
    process: (records: QueueRecord[], ctx: WiredRuntime) => Promise<BatchResult>,
  ) => {
    const received = await w.sqs.send(
      new ReceiveMessageCommand({
        QueueUrl: queueUrl,
        MaxNumberOfMessages: 10,
        WaitTimeSeconds: 1,
        MessageSystemAttributeNames: ['ApproximateReceiveCount'],
      }),
    );
    const records = (received.Messages ?? []).map((m) => ({
      messageId: m.MessageId ?? '',
      body: m.Body ?? '',
      receiptHandle: m.ReceiptHandle ?? '',
      receiveCount: Number(m.Attributes?.ApproximateReceiveCount ?? '1'),
    }));
    if (records.length === 0) return 0;
    const result = await process(records, runtime);
    const failed = new Set(result.batchItemFailures.map((f) => f.itemIdentifier));
    for (const record of records) {
      if (failed.has(record.messageId)) continue;
      await w.sqs.send(
        new DeleteMessageCommand({ QueueUrl: queueUrl, ReceiptHandle: record.receiptHandle }),
      );
    }
    return records.length;
  };
  return {
    runtime,
    metrics,
    drain: async () => {
      for (let round = 0; round < 60; round++) {
        const work = await handleOnce(w.config.queueUrl, processWorkBatch);
        const nodes = await handleOnce(nodeQueueUrl, processNodeBatch);
        if (work + nodes === 0) return;
      }
      throw new Error('the work and node queues did not drain in 60 rounds');
    },
  };
}
