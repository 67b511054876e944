/**
 * The propagation simulation's model of SQS fair queues (bench/sim/fake-runtime.ts) and the
 * scenario it exists for: one Service in a quiet namespace behind a 500-Service burst in another
 * (issue 19, finding 7). Both run on virtual time, so they are exact and take no real waiting.
 */
import { describe, expect, it } from 'vitest';
import { SqsWorkQueue } from '../../../functions/queue/sqs-work-queue';
import type { WorkMessage } from '../../../functions/contract/work-messages';
import { simulateNamespaceBurst } from '../../../bench/scenarios/propagation-bursts';
import { FakeQueue } from '../../../bench/sim/fake-runtime';
import { VirtualClock } from '../../../bench/sim/virtual-clock';

const service = (key: string): WorkMessage => ({ v: 1, kind: 'service', key });
const keyOf = (body: string) => (JSON.parse(body) as { key?: string }).key;

/** 100 burst messages, 50 of them taken by consumers, then one quiet message arrives. */
async function quietBehindBurst(fair: boolean): Promise<(string | undefined)[]> {
  const clock = new VirtualClock();
  const queue = new FakeQueue(clock, 0, 360, { fair });
  const sqs = new SqsWorkQueue(queue.asSqsClient(), 'https://sqs.example/work');
  return clock.run(
    (async () => {
      await sqs.send(Array.from({ length: 100 }, (_, i) => service(`burst/svc-${i}`)));
      for (let i = 0; i < 5; i++) queue.receive(10);
      await clock.sleep(1000);
      await sqs.send([service('quiet/web')]);
      return queue.receive(10).map((r) => keyOf(r.body));
    })(),
    60_000,
  );
}

describe('fair-queue model', () => {
  it('hands a quiet group its message first once another group holds most of the consumers', async () => {
    const batch = await quietBehindBurst(true);
    expect(batch[0]).toBe('quiet/web');
    expect(batch.slice(1)).toEqual(Array.from({ length: 9 }, (_, i) => `burst/svc-${50 + i}`));
  });

  it('without fair queues the quiet message waits behind the burst', async () => {
    const batch = await quietBehindBurst(false);
    expect(batch).not.toContain('quiet/web');
  });

  it('a newly busy group goes first while it is quiet, then while it has fewer in flight than the noisy one', async () => {
    const clock = new VirtualClock();
    const queue = new FakeQueue(clock, 0, 360, { fair: true });
    const sqs = new SqsWorkQueue(queue.asSqsClient(), 'https://sqs.example/work');
    const keys = await clock.run(
      (async () => {
        await sqs.send(Array.from({ length: 100 }, (_, i) => service(`a/svc-${i}`)));
        for (let i = 0; i < 6; i++) queue.receive(10);
        await sqs.send(Array.from({ length: 100 }, (_, i) => service(`b/svc-${i}`)));
        // b is quiet up to 30 in flight, then noisy too, but with fewer in flight than a (60).
        return Array.from({ length: 5 }, () => queue.receive(10).map((r) => keyOf(r.body))).flat();
      })(),
      60_000,
    );
    expect(keys).toEqual(Array.from({ length: 50 }, (_, i) => `b/svc-${i}`));
  });
});

describe('propagation: one Service in a quiet namespace behind a 500-Service burst in another', () => {
  it('with fair queues the quiet Service is not delayed behind the burst, and the burst still converges', async () => {
    const fair = await simulateNamespaceBurst({ fair: true });
    const unfair = await simulateNamespaceBurst({ fair: false });
    expect(fair.burstConverged).toBe(500);
    expect(unfair.burstConverged).toBe(500);
    // Without fairness the quiet change waits behind the burst's messages in the queue (those
    // coming back for their registration slots are out of the way: issue 37).
    expect(unfair.quietMs).toBeGreaterThan(15_000);
    // With it, the quiet change waits for a consumer to finish its batch, not for the burst.
    expect(fair.quietMs).toBeLessThan(unfair.quietMs / 4);
    expect(fair.quietMs).toBeLessThan(30_000);
    expect(fair.noisyGroupsPeak).toBeGreaterThanOrEqual(1);
  }, 60_000);
});
