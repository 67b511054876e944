/**
 * Issue 31's runtime findings, each against moto and the fake API server: what a failure part-way
 * through a host update, a node-sync run or a batch leaves behind must still be run, once, by
 * a pass that reads what it needs afresh.
 */
import { randomUUID } from 'node:crypto';
import { ChangeMessageVisibilityCommand } from '@aws-sdk/client-sqs';
import {
  DeleteListenerCommand,
  DeleteTargetGroupCommand,
  DescribeListenersCommand,
} from '@aws-sdk/client-elastic-load-balancing-v2';
import { afterEach, describe, expect, it } from 'vitest';
import { serviceLeasePk } from '../../functions/state/table-layout';
import { readNlbState } from '../../functions/nlb/nlb-state';
import type { ControllerConfig } from '../../functions/contract/controller-config';
import type { WorkQueue } from '../../functions/runtime/ports';
import type { RuntimeContext } from '../../functions/runtime/context';
import type { WorkMessage } from '../../functions/contract/work-messages';
import { processNodeBatch } from '../../functions/runtime/node-messages';
import { nodeSyncLeasePk as nodeSyncLease } from '../../functions/state/table-layout';
import { processWorkBatch } from '../../functions/runtime/work-batch';
import { runSweep } from '../../functions/runtime/sweep';
import { missFirst } from '../../kit/seeded-random';
import { createRuntimeWorld, targetsOf, type RuntimeWorld } from '../support/runtime-world';

let world: RuntimeWorld;

async function start(overrides: Partial<ControllerConfig> = {}) {
  world = await createRuntimeWorld(overrides);
}

afterEach(async () => {
  await world.stop();
});

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/** The queue, but its first send fails as SQS does when it is unavailable. */
function refusingOneSend(queue: WorkQueue): WorkQueue {
  let refuse = true;
  return {
    send: (messages, delay) => {
      if (!refuse) return queue.send(messages, delay);
      refuse = false;
      return Promise.reject(new Error('SQS is unavailable'));
    },
    changeVisibility: (receipt, seconds) => queue.changeVisibility(receipt, seconds),
    deadLetter: (body, problem) => queue.deadLetter(body, problem),
    acknowledge: (receipts) => queue.acknowledge(receipts),
  };
}

describe('recovery after failures part-way (issue 31)', { timeout: 90_000 }, () => {
  it('a host update that failed after one RegisterTargets landed is retried reading the registered targets from AWS: a node that came and went is not left behind', async () => {
    await start();
    await world.createService();
    const before = (await targetsOf(world, 'default/web')).map((ids) => [...ids].sort());
    const added = await world.addNode();
    // The first group's registration lands; the second's fails on both of the SDK's attempts.
    world.aws.recorder.injectFault({
      operation: 'RegisterTargets',
      kind: 'server-error',
      times: 2,
      probability: 0.5,
      random: missFirst(1),
    });
    await world.sendToNodeQueue({ v: 1, kind: 'node', reason: 'node added' });
    await world.handleNodesOnce(1);
    const halfDone = await targetsOf(world, 'default/web');
    expect(halfDone.filter((ids) => ids.includes(added.instanceId))).toHaveLength(1);

    // The node leaves again before the retry: the host set is back to what the record says.
    world.kube.store.delete('nodes', '', added.name);
    await world.sendToNodeQueue({ v: 1, kind: 'node', reason: 'node removed' });
    await sleep(world.config.backoffBaseSeconds * 1000);
    await world.drain();
    expect((await targetsOf(world, 'default/web')).map((ids) => [...ids].sort())).toEqual(before);
    expect(world.metrics.get('HostUpdatesFromAws')).toBe(1);
  });

  it('a host update that reads targets from AWS (unverified lease) and finds a target group deleted by hand has the full sync recreate it, with no UpdateLoadBalancerFailed', async () => {
    await start();
    await world.createService();
    const record = await world.runtime.store.getService('default/web');
    const state = readNlbState(record?.provider);
    const group = Object.values(state.targetGroups ?? {})[0]!;
    const elbv2 = world.aws.testClients.elbv2;
    const listeners = await elbv2.send(
      new DescribeListenersCommand({ LoadBalancerArn: state.loadBalancerArn }),
    );
    const listener = listeners.Listeners?.find(
      (l) => l.DefaultActions?.[0]?.TargetGroupArn === group.arn,
    );
    await elbv2.send(new DeleteListenerCommand({ ListenerArn: listener?.ListenerArn }));
    await elbv2.send(new DeleteTargetGroupCommand({ TargetGroupArn: group.arn }));
    // A holder died: the next host update reads what AWS has registered.
    await world.runtime.store.acquire(serviceLeasePk('default/web'), 'dead-worker', -1);
    const added = await world.addNode();
    await world.sendToNodeQueue({ v: 1, kind: 'node', reason: 'node added' });
    await world.drain();
    expect(world.metrics.get('HostUpdatesFromAws')).toBe(1);
    const groups = await targetsOf(world, 'default/web');
    expect(groups).toHaveLength(2);
    for (const ids of groups) expect(ids).toContain(added.instanceId);
    const events = await world.api.listNamespacedEvent({ namespace: 'default' });
    expect(events.items.filter((e) => e.reason === 'UpdateLoadBalancerFailed')).toEqual([]);
  });

  it('a host update that keeps failing keeps its backoff: node-sync passes meanwhile neither run it again nor queue more messages for it', async () => {
    // A backoff far longer than the four passes take, however loaded the machine.
    await start({ backoffBaseSeconds: 60 });
    await world.createService();
    await world.addNode();
    world.aws.recorder.reset();
    world.aws.recorder.injectFault({
      operation: 'RegisterTargets',
      kind: 'error',
      code: 'AccessDenied',
    });
    for (let pass = 0; pass < 4; pass++) {
      await world.sendToNodeQueue({ v: 1, kind: 'node', reason: `node sync ${pass}` });
      await world.handleNodesOnce(1);
    }
    // The first pass's: its two target groups are changed side by side, so both were tried.
    expect(world.aws.recorder.count('RegisterTargets')).toBe(2);
    const depth = await world.queueDepth('work');
    expect(depth.visible + depth.inFlight + depth.delayed).toBe(1);
  });

  it('a failed direct host update whose retry message SQS refused is taken again by node sync once its retry is overdue', async () => {
    await start();
    await world.createService();
    const added = await world.addNode();
    world.aws.recorder.injectFault({
      operation: 'RegisterTargets',
      kind: 'error',
      code: 'AccessDenied',
      times: 1,
    });
    const ctx: RuntimeContext = { ...world.runtime, queue: refusingOneSend(world.runtime.queue) };
    await world.sendToNodeQueue({ v: 1, kind: 'node', reason: 'node added' });
    const records = await world.receiveNodes(1);
    expect((await processNodeBatch(records, ctx)).batchItemFailures).toHaveLength(1);
    expect((await world.queueDepth('work')).delayed).toBe(0);
    // The retry was due a backoff step later; nothing brings it but node sync.
    await sleep(world.config.backoffBaseSeconds * 1000 + 500);
    await world.sendToNodeQueue({ v: 1, kind: 'node', reason: 'node sync' });
    await world.drain();
    for (const ids of await targetsOf(world, 'default/web'))
      expect(ids).toContain(added.instanceId);
  });

  it('node sync gives its direct host updates one deadline for the whole run: past it, they go to the work queue', async () => {
    await start();
    await world.createService();
    await world.addNode();
    // A run whose Node list took longer than the registration deadline (a slow API server).
    let offset = 0;
    const base = world.runtime.syncDeps;
    const ctx: RuntimeContext = {
      ...world.runtime,
      syncDeps: {
        ...base,
        clock: { now: () => new Date(Date.now() + offset) },
        kube: {
          ...base.kube,
          getService: (namespace, name) => base.kube.getService(namespace, name),
          addFinalizer: (s, f) => base.kube.addFinalizer(s, f),
          removeFinalizer: (s, f) => base.kube.removeFinalizer(s, f),
          patchServiceStatus: (s, st) => base.kube.patchServiceStatus(s, st),
          listNodes: async () => {
            const nodes = await base.kube.listNodes();
            offset += 31_000;
            return nodes;
          },
        },
      },
    };
    await world.sendToNodeQueue({ v: 1, kind: 'node', reason: 'node added' });
    const records = await world.receiveNodes(1);
    expect((await processNodeBatch(records, ctx)).batchItemFailures).toEqual([]);
    expect(world.metrics.get('DirectHostUpdates')).toBe(0);
    const queued = await world.receive(1);
    expect(queued.map((r) => (JSON.parse(r.body) as WorkMessage).kind)).toEqual(['hosts']);
  });

  it('a sweep resync that finds the key busy comes back as that resync, and checks AWS when it runs', async () => {
    await start();
    await world.createService();
    const holder = await world.runtime.store.acquire(serviceLeasePk('default/web'), 'holder', 30);
    if (!holder.acquired) throw new Error('expected the lease');
    await runSweep(world.runtime);
    const records = await world.receive(1);
    expect(records.map((r) => (JSON.parse(r.body) as WorkMessage).kind)).toEqual(['resync']);
    const result = await processWorkBatch(records, world.runtime);
    expect(result.batchItemFailures.map((f) => f.itemIdentifier)).toEqual([records[0]?.messageId]);
    // The holder ends cleanly: its dirty pass is an ordinary sync, which trusts the checkpoint.
    const store = world.runtime.store;
    expect((await store.finish(holder.lease, 'reset', 30)).kind).toBe('again');
    expect((await store.finish(holder.lease, 'reset', 30)).kind).toBe('released');
    await world.sqs.send(
      new ChangeMessageVisibilityCommand({
        QueueUrl: world.config.queueUrl,
        ReceiptHandle: records[0]?.receiptHandle,
        VisibilityTimeout: 0,
      }),
    );
    world.aws.recorder.reset();
    await world.drain();
    expect(world.aws.recorder.count('DescribeLoadBalancers')).toBeGreaterThan(0);
    expect(world.metrics.get('UnverifiedResyncs')).toBe(0);
  });

  it('resync messages come back, not downgraded, when the sweep pass ids cannot be read', async () => {
    await start();
    await world.createService();
    const store = world.runtime.store;
    const failing = new Proxy(store, {
      get(target, property, receiver) {
        if (property === 'sweepBook') {
          return () => Promise.reject(new Error('DynamoDB is unavailable'));
        }
        const value: unknown = Reflect.get(target, property, receiver);
        return typeof value === 'function' ? (value as () => unknown).bind(target) : value;
      },
    });
    const syncs = world.metrics.get('Syncs{outcome=done,kind=service}');
    await world.send({ v: 1, kind: 'resync', key: 'default/web', pass: randomUUID() });
    const records = await world.receive(1);
    const result = await processWorkBatch(records, { ...world.runtime, store: failing });
    expect(result.batchItemFailures.map((f) => f.itemIdentifier)).toEqual([records[0]?.messageId]);
    expect(world.metrics.get('UnverifiedResyncs')).toBe(0);
    expect(world.metrics.get('Syncs{outcome=done,kind=service}')).toBe(syncs);
  });

  it('a node change folded into a later pass is not dropped when sending that pass fails: the claim is given back and the retry sends it', async () => {
    await start({ nodeSyncMinIntervalSeconds: 30 });
    await world.createService();
    await world.sendToNodeQueue({ v: 1, kind: 'node', reason: 'first' });
    await world.handleNodesOnce(1);
    const ctx: RuntimeContext = {
      ...world.runtime,
      nodeQueue: refusingOneSend(world.runtime.nodeQueue),
    };
    await world.sendToNodeQueue({ v: 1, kind: 'node', reason: 'second' });
    const records = await world.receiveNodes(1);
    expect((await processNodeBatch(records, ctx)).batchItemFailures).toHaveLength(1);
    expect((await world.runtime.store.getItem(nodeSyncLease))?.coalescedUntil).toBeUndefined();
    // The failed message's retry, handled again: now the folded pass is on its way.
    await processNodeBatch(records, ctx);
    expect((await world.queueDepth('nodes')).delayed).toBe(1);
  });
});
