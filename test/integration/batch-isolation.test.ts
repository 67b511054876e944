import { ChangeMessageVisibilityCommand } from '@aws-sdk/client-sqs';
import { afterEach, expect, it } from 'vitest';
import type { RuntimeContext } from '../../functions/runtime/context';
import { processWorkBatch } from '../../functions/runtime/work-batch';
import { type QueueRecord } from '../../functions/runtime/queue-records';
import type { KubernetesApi } from '../../functions/sync/ports';
import { loadBalancerService } from '../support/kube-objects';
import { createRuntimeWorld, type RuntimeWorld } from '../support/runtime-world';

let world: RuntimeWorld;

afterEach(async () => {
  await world.stop();
});

async function until(condition: () => Promise<boolean>, timeoutMs = 20_000): Promise<boolean> {
  const deadline = Date.now() + timeoutMs;
  while (Date.now() < deadline) {
    if (await condition()) return true;
    await new Promise((resolve) => setTimeout(resolve, 200));
  }
  return false;
}

/** Receives until `count` records are in hand (moto may split them over receives). */
async function receiveAll(count: number): Promise<QueueRecord[]> {
  const records: QueueRecord[] = [];
  for (let i = 0; i < 20 && records.length < count; i++) records.push(...(await world.receive(1)));
  return records;
}

it(
  'a batch deletes each message once its work is done: an instance that dies on one key later in the batch returns only that key (issue 32, finding 7)',
  { timeout: 90_000 },
  async () => {
    world = await createRuntimeWorld({}, { nodeQueue: true });
    for (const name of ['good', 'doomed']) {
      await world.api.createNamespacedService({
        namespace: 'default',
        body: loadBalancerService(name),
      });
    }
    await world.send({ v: 1, kind: 'service', key: 'default/good' });
    await world.send({ v: 1, kind: 'service', key: 'default/doomed' });
    await world.send({ v: 1, kind: 'heartbeat', sendFailures: 0, pending: 0 });
    const records = await receiveAll(3);
    expect(records).toHaveLength(3);

    // The doomed key's sync never ends (as a pass running the instance out of memory would not):
    // its read of the Service hangs until the test lets it fail.
    let kill: (error: Error) => void = () => undefined;
    const hung = new Promise<never>((_, reject) => (kill = reject));
    const kube: KubernetesApi = world.runtime.syncDeps.kube;
    const dying: RuntimeContext = {
      ...world.runtime,
      syncDeps: {
        ...world.runtime.syncDeps,
        kube: {
          getService: (namespace, name) =>
            name === 'doomed' ? hung : kube.getService(namespace, name),
          addFinalizer: (service, finalizer) => kube.addFinalizer(service, finalizer),
          removeFinalizer: (service, finalizer) => kube.removeFinalizer(service, finalizer),
          patchServiceStatus: (service, status) => kube.patchServiceStatus(service, status),
          listNodes: () => kube.listNodes(),
          listEndpointSlices: (namespace, name) => kube.listEndpointSlices(namespace, name),
        },
      },
    };
    const deletesBefore = world.aws.recorder.count('DeleteMessageBatch', 'SQS');
    const batch = processWorkBatch(records, dying);

    // The good Service converges while the doomed one hangs: its message and the heartbeat leave
    // the queue then, not when the batch returns.
    const left = await until(async () => (await world.queueDepth()).inFlight === 1);
    expect(left).toBe(true);
    expect(await world.queueDepth()).toEqual({ visible: 0, inFlight: 1, delayed: 0 });
    // One DeleteMessageBatch per unit of work that ended while another still ran.
    expect(world.aws.recorder.count('DeleteMessageBatch', 'SQS') - deletesBefore).toBe(2);

    // The instance dies: the event source mapping never hears back, so nothing else is deleted,
    // and when the visibility timeout runs out (made immediate here) only the doomed key returns.
    const doomed = records.find((r) => r.body.includes('default/doomed'));
    await world.sqs.send(
      new ChangeMessageVisibilityCommand({
        QueueUrl: world.config.queueUrl,
        ReceiptHandle: doomed?.receiptHandle ?? '',
        VisibilityTimeout: 0,
      }),
    );
    const back = await receiveAll(1);
    expect(back.map((r) => JSON.parse(r.body) as unknown)).toEqual([
      { v: 1, kind: 'service', key: 'default/doomed' },
    ]);
    expect(back[0]?.receiveCount).toBe(2);
    expect(await world.receive(1)).toEqual([]);

    // Let the abandoned batch end, then run the returned message as a fresh instance would.
    kill(new Error('the instance was killed'));
    await batch;
    await world.handle(back);
    await world.drain();
    for (const name of ['good', 'doomed']) {
      const service = await world.api.readNamespacedService({ name, namespace: 'default' });
      expect(service.status?.loadBalancer?.ingress?.length).toBe(1);
    }
  },
);

it('a batch of one key makes no extra SQS call: the event source mapping deletes it', async () => {
  world = await createRuntimeWorld();
  await world.api.createNamespacedService({
    namespace: 'default',
    body: loadBalancerService('web'),
  });
  await world.send({ v: 1, kind: 'service', key: 'default/web' });
  const before = world.aws.recorder.count('DeleteMessageBatch', 'SQS');
  const { records, result } = await world.handleOnce(1);
  expect(records).toHaveLength(1);
  expect(result.batchItemFailures).toEqual([]);
  expect(world.aws.recorder.count('DeleteMessageBatch', 'SQS') - before).toBe(0);
});
