/**
 * The cost simulation of issue 37 (bench/scenarios/cost-sim.ts) and its meter
 * (bench/sim/meter.ts): virtual time, so call counts and bills are exact.
 */
import { describe, expect, it } from 'vitest';
import { createFloorMs, layoutFloor, simulateLifecycle } from '../../../bench/scenarios/cost-sim';
import { LambdaMeter } from '../../../bench/sim/meter';
import { VirtualClock } from '../../../bench/sim/virtual-clock';
import { createCalls } from '../../support/nlb-call-rows';

describe('the Lambda meter', () => {
  it('bills handler time and counts the time with no call in flight as waiting', async () => {
    const clock = new VirtualClock();
    const meter = new LambdaMeter(clock);
    await clock.run(
      meter.invoke(async () => {
        await meter.call(() => clock.sleep(50));
        await clock.sleep(150);
        // A sync call (ELBv2, Kubernetes) beside a state call: 50 ms of sync time, not 100.
        await Promise.all([
          meter.call(() => clock.sleep(50), 'sync'),
          meter.call(() => clock.sleep(50)),
        ]);
      }),
      10_000,
    );
    expect(meter.totals).toEqual({ invocations: 1, billedMs: 250, waitingMs: 150, syncMs: 50 });
    expect(meter.waitingShare).toBeCloseTo(0.6);
    expect(meter.gbSeconds).toBeCloseTo(0.125);
  });
});

describe('one Service’s life, billed on the virtual clock', () => {
  it('creates, follows a node, updates and deletes with the calls the provider makes against moto, and no waiting', async () => {
    const bills = await simulateLifecycle(1, 'today');
    expect(bills.map((b) => b.phase)).toEqual(['create', 'node change', 'update', 'delete']);
    const [create, node, update, remove] = bills;
    expect(create!.byOperation).toEqual(createCalls);
    expect(node!.byOperation).toEqual({ DescribeTags: 1, RegisterTargets: 2 });
    expect(update!.byOperation.ModifyTargetGroup).toBe(2);
    expect(remove!.byOperation.DeleteLoadBalancer).toBe(1);
    for (const bill of bills) {
      expect(bill.waitingShare).toBe(0);
      expect(bill.throttled).toBe(0);
      expect(bill.perMillion).toBeGreaterThan(0);
    }
    // One queue hop and a handful of 50 ms calls: the node reaches the NLB within half a second
    // of the forwarder's send (the phase starts 50 ms earlier, at the watch event).
    expect(node!.p50Ms).toBeLessThanOrEqual(600);
  });

  it('prices release 0.1’s layout in the same run: its lease writes cost the record item’s size', async () => {
    const [now, old] = await Promise.all([
      simulateLifecycle(1, 'today'),
      simulateLifecycle(1, 'release 0.1'),
    ]);
    const update = (bills: typeof now) => bills.find((b) => b.phase === 'update')!;
    expect(update(old).wru).toBeGreaterThan(update(now).wru);
  });

  it('the layout floor: the sync calls, one item taken and written per key, one batch per 10 events', async () => {
    const floor = layoutFloor('update', 50, 2_000, 512);
    // 5 batches: 2 s of sync calls and 2 state calls of 50 ms each.
    expect(floor).toEqual({ invocations: 5, gbSeconds: 1.25, sqsRequests: 15, wru: 100, rru: 0 });
    // A node change is one message, one invocation.
    expect(layoutFloor('node change', 50, 0, 512).invocations).toBe(1);
    // Both layouts make the same sync calls, so a single event's floor is the same in both, and
    // below what either costs.
    const [now, old] = await Promise.all([
      simulateLifecycle(1, 'today'),
      simulateLifecycle(1, 'release 0.1'),
    ]);
    now.forEach((bill, i) => {
      expect(bill.floorPerMillion).toBeCloseTo(old[i]!.floorPerMillion, 6);
      expect(bill.floorPerMillion).toBeLessThan(bill.perMillion);
      expect(bill.floorPerMillion).toBeLessThan(old[i]!.perMillion);
    });
  });

  it("a restore's floor is the slowest of AWS's buckets for the calls the creates make", () => {
    // Five mutating ELBv2 calls a create: (5,000 − 20) / 3 per second.
    const floor = createFloorMs(
      { CreateTargetGroup: 2, CreateLoadBalancer: 1, CreateListener: 2 },
      1000,
    );
    expect(floor.bucket).toBe('elbv2Other');
    expect(floor.ms).toBeCloseTo(((5000 - 20) / 3) * 1000);
  });
});
