import { afterEach, describe, expect, it } from 'vitest';
import type { ControllerConfig } from '../../functions/contract/controller-config';
import { nodeSyncLeasePk as nodeSyncLease } from '../../functions/state/table-layout';
import { processWorkBatch } from '../../functions/runtime/work-batch';
import type { WorkMessage } from '../../functions/contract/work-messages';
import { createRuntimeWorld, targetsOf, type RuntimeWorld } from '../support/runtime-world';

let world: RuntimeWorld;

async function start(overrides: Partial<ControllerConfig> = {}) {
  world = await createRuntimeWorld(overrides);
}

afterEach(async () => {
  await world.stop();
});

const targetsOfService = (name: string) => targetsOf(world, `default/${name}`);

const nothing = { visible: 0, inFlight: 0, delayed: 0 };

describe(
  'node messages on their own queue, consumed by the node-sync function (moto + fake API server)',
  { timeout: 90_000 },
  () => {
    it('takes a node change to the NLB in one hop: node sync runs the host update itself, nothing on the work queue', async () => {
      await start();
      await world.createService('web');
      const added = await world.addNode();
      world.aws.recorder.reset();
      await world.sendToNodeQueue({ v: 1, kind: 'node', reason: 'node added' });

      const { records, result } = await world.handleNodesOnce(1);
      expect(records).toHaveLength(1);
      expect(result.batchItemFailures).toEqual([]);
      for (const group of await targetsOfService('web')) expect(group).toContain(added.instanceId);
      expect(world.aws.recorder.count('RegisterTargets')).toBe(2);
      expect(world.metrics.get('DirectHostUpdates')).toBe(1);
      expect(await world.queueDepth('work')).toEqual(nothing);
    });

    it('is not held up by a Service backlog on the work queue', async () => {
      await start();
      await world.createService('web');
      // A burst of creates nobody has consumed yet.
      for (let i = 0; i < 30; i++) {
        await world.send({ v: 1, kind: 'service', key: `burst/svc-${i}` });
      }
      const added = await world.addNode();
      await world.sendToNodeQueue({ v: 1, kind: 'node', reason: 'node added' });
      await world.handleNodesOnce(1);
      for (const group of await targetsOfService('web')) expect(group).toContain(added.instanceId);
      expect((await world.queueDepth('work')).visible).toBe(30);
    });

    it('sends host updates to the work queue when the change touches more Services than directHostUpdates', async () => {
      await start({ directHostUpdates: 1 });
      await world.createService('one');
      await world.createService('two');
      const added = await world.addNode();
      await world.sendToNodeQueue({ v: 1, kind: 'node', reason: 'node added' });
      await world.handleNodesOnce(1);
      expect(world.metrics.get('DirectHostUpdates')).toBe(0);
      expect((await world.queueDepth('work')).visible).toBe(2);
      const records = await world.receive(1);
      expect(records.map((r) => (JSON.parse(r.body) as WorkMessage).kind)).toEqual([
        'hosts',
        'hosts',
      ]);
      await world.handle(records);
      await world.drain();
      for (const name of ['one', 'two']) {
        for (const group of await targetsOfService(name)) expect(group).toContain(added.instanceId);
      }
    });

    it("paces a large fan-out's host updates at the registration budget's rate, per message, in one request", async () => {
      // One registration a second, no burst: update k's two registrations are due at 2k s.
      await start({ directHostUpdates: 1, registrationBudget: { perSecond: 1, burst: 1 } });
      for (const name of ['a', 'b', 'c']) await world.createService(name);
      // Creates sent back for their registration slots come back and finish first.
      await world.drain();
      await world.addNode();
      await world.sendToNodeQueue({ v: 1, kind: 'node', reason: 'node added' });
      world.aws.recorder.reset();
      await world.handleNodesOnce(1);
      // Three delays (0, 2 and 4 s), one SendMessageBatch.
      expect(world.aws.recorder.count('SendMessageBatch')).toBe(1);
      // The first at once; the last, due 4 s after the send, is still held back by SQS.
      const depth = await world.queueDepth('work');
      expect(depth.visible + depth.delayed).toBe(3);
      expect(depth.visible).toBeGreaterThanOrEqual(1);
      expect(depth.delayed).toBeGreaterThanOrEqual(1);
      const records = await world.receive(1);
      expect(records.map((r) => (JSON.parse(r.body) as WorkMessage).kind)).toContain('hosts');
    });

    it('moves a node message found on the work queue (a forwarder of release 0.1) to the node queue without running node sync there', async () => {
      await start();
      await world.send({ v: 1, kind: 'node', reason: 'node added' });
      const records = await world.receive(1);
      // The work queue's handler alone, as the service-sync function runs it.
      const result = await processWorkBatch(records, world.runtime);
      expect(result.batchItemFailures).toEqual([]);
      expect(world.metrics.get('NodeMessagesMoved')).toBe(1);
      expect(await world.runtime.store.getItem(nodeSyncLease)).toBeUndefined();
      const moved = await world.receiveNodes(1);
      expect(moved.map((r) => JSON.parse(r.body) as WorkMessage)).toEqual([
        { v: 1, kind: 'node', reason: 'node added' },
      ]);
    });

    it('moves a Service message found on the node queue to the work queue, and a malformed one to the dead-letter queue', async () => {
      await start();
      await world.sendToNodeQueue({ v: 1, kind: 'service', key: 'default/web' });
      await world.sendToNodeQueue('{"not":"ours"}');
      const records = [...(await world.receiveNodes(1)), ...(await world.receiveNodes(1))];
      expect(records).toHaveLength(2);
      const result = await world.handleNodes(records);
      expect(result.batchItemFailures).toEqual([]);
      expect(world.metrics.get('MisroutedMessages')).toBe(1);
      expect(world.metrics.get('MalformedMessages')).toBe(1);
      const work = (await world.receive(1)).map((r) => JSON.parse(r.body) as WorkMessage);
      expect(work).toEqual([{ v: 1, kind: 'service', key: 'default/web' }]);
      expect((await world.deadLetters()).map((d) => d.body)).toEqual(['{"not":"ours"}']);
      expect(await world.queueDepth('nodes')).toEqual(nothing);
    });

    it('brings a failed node-sync message back on the node queue after its backoff', async () => {
      await start();
      await world.sendToNodeQueue({ v: 1, kind: 'node', reason: 'node added' });
      world.kube.failNextRequests(100, 500, { path: /\/nodes/ });
      const { records, result } = await world.handleNodesOnce(1);
      expect(result.batchItemFailures).toEqual([{ itemIdentifier: records[0]!.messageId }]);
      // Hidden on the node queue for its backoff, not resent to the work queue.
      expect(await world.queueDepth('nodes')).toMatchObject({ inFlight: 1 });
      expect(await world.queueDepth('work')).toEqual(nothing);
    });
  },
);
