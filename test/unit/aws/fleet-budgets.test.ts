import { describe, expect, it } from 'vitest';
import { memoryBudget, MemoryTatItem } from '../../support/memory-budget';
import { budgetForCall, type Elbv2Budgets } from '../../../functions/aws/clients';
import {
  beginPass,
  expectBudgetCalls,
  pacedByRegistrations,
  RegistrationBudget,
  TatBudgetStore,
  withRegistrationScope,
} from '../../../functions/aws/registration-budget';
import { RequeueAfterError } from '../../../functions/core/errors';
import {
  activeNamespaces,
  blockTimes,
  budgetLaneOf,
  dropDueSlots,
  inTurnsByNamespace,
  nextTicket,
  pacedByKeptSlots,
  pacedDelaySeconds,
  parseKeptSlots,
  slotRule,
  useKeptSlot,
  slotWaitBoundMs,
  type KeptSlot,
  type RegistrationBudgetSpec,
} from '../../../functions/core/registration-slots';

/**
 * Issue 37, item 3: ELBv2's Describe* and change buckets are the account's, so every instance
 * books its calls of them on one budget each, as registrations do; a pass books its calls of a
 * lane in one write and, when they are too far off, keeps them and comes back.
 */

function budgetOf(spec: RegistrationBudgetSpec, now: { ms: number }, name: string) {
  return memoryBudget(spec, now, { name });
}

/** The Describe and change budgets as defaults (`defaultDescribeBudget`, `defaultChangeBudget`). */
const describeSpec = { perSecond: 10, burst: 20 };
const changeSpec = { perSecond: 3, burst: 10 };

describe('which budget an ELBv2 call books on', () => {
  const now = { ms: 0 };
  const budgets: Elbv2Budgets = {
    registration: budgetOf({ perSecond: 4, burst: 10 }, now, 'registration').budget,
    describe: budgetOf(describeSpec, now, 'describe').budget,
    change: budgetOf(changeSpec, now, 'change').budget,
  };

  it('puts every operation in its lane', () => {
    expect(budgetLaneOf('RegisterTargets')).toBe('register');
    expect(budgetLaneOf('DeregisterTargets')).toBe('deregister');
    expect(budgetLaneOf('DescribeTargetHealth')).toBe('describe');
    for (const op of ['CreateLoadBalancer', 'ModifyTargetGroup', 'DeleteListener', 'AddTags'])
      expect(budgetLaneOf(op)).toBe('change');
  });

  it("registrations always; Describe* and changes only in a key's sync, where a slot can be kept", async () => {
    expect(budgetForCall(budgets, 'RegisterTargets')).toBe(budgets.registration);
    expect(budgetForCall(budgets, 'DescribeTags')).toBeUndefined();
    expect(budgetForCall(budgets, 'CreateLoadBalancer')).toBeUndefined();
    await withRegistrationScope('team-a/web', () => {
      expect(budgetForCall(budgets, 'DescribeTags')).toBe(budgets.describe);
      expect(budgetForCall(budgets, 'CreateLoadBalancer')).toBe(budgets.change);
      return Promise.resolve();
    });
  });

  it("a host update's reads ride on its registration booking, and only while it runs", async () => {
    await withRegistrationScope('team-a/web', async () => {
      await pacedByRegistrations(() => {
        expect(budgetForCall(budgets, 'DescribeTags')).toBeUndefined();
        expect(budgetForCall(budgets, 'RegisterTargets')).toBe(budgets.registration);
        return Promise.resolve();
      });
      expect(budgetForCall(budgets, 'DescribeTags')).toBe(budgets.describe);
    });
  });
});

describe('the Describe and change budgets', () => {
  it("a pass's expected calls of a lane book with one write, side-by-side calls included", async () => {
    const now = { ms: 0 };
    const { budget, item, waits } = budgetOf(describeSpec, now, 'ELBv2 Describe budget');
    await withRegistrationScope('team-a/web', async () => {
      expectBudgetCalls({ describe: 6 });
      // Observe reads some groups at once: they wait for the one booking and share its slots.
      await Promise.all([
        budget.take('DescribeLoadBalancers'),
        budget.take('DescribeTargetHealth'),
        budget.take('DescribeTargetHealth'),
      ]);
      for (let i = 0; i < 3; i++) await budget.take('DescribeListeners');
    });
    expect(item.writes).toBe(1);
    expect(waits).toEqual([]);
    // A second pass books anew.
    await withRegistrationScope('team-b/api', () => budget.take('DescribeTags'));
    expect(item.writes).toBe(2);
  });

  it('change slots too far off are booked as one block, kept for the key, and the pass ends before any change', async () => {
    const now = { ms: 0 };
    const { budget, item, waits } = budgetOf(changeSpec, now, 'ELBv2 change budget');
    const rule = slotRule(changeSpec, 'change');
    // Other instances booked the budget 4 s ahead.
    item.values = { tat: rule.toleranceMs + 4_000 };
    let kept: KeptSlot[] = [];
    const error = await withRegistrationScope('team-a/web', (scope) => {
      kept = scope.kept;
      expectBudgetCalls({ change: 5 });
      return budget.take('CreateTargetGroup');
    }).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(RequeueAfterError);
    expect((error as Error).message).toMatch(/ELBv2 change budget.*kept for this Service/);
    // Back when the block is due: SQS delays are whole seconds, never more than 250 ms early.
    expect((error as RequeueAfterError).seconds).toBe(4);
    // One booking: a second write only because this instance had not seen the item yet.
    const writes = item.writes;
    expect(writes).toBeLessThanOrEqual(2);
    expect(item.values.tat).toBe(rule.toleranceMs + 4_000 + 5 * rule.intervalMs);
    // Five slots, 333 ms apart on the budget, used together from the first one's time: a
    // create's calls go in one pass, never one pass each.
    expect(kept).toEqual(Array.from({ length: 5 }, () => ({ lane: 'change', atMs: 4_000 })));
    expect(parseKeptSlots(JSON.parse(JSON.stringify(kept)))).toEqual(kept);
    expect(waits).toEqual([]);

    // The key's next pass, when the block is due: five calls, no write, no wait past the bound.
    now.ms = 3_900;
    await withRegistrationScope('team-a/web', async (scope) => {
      scope.kept.push(...kept);
      expectBudgetCalls({ change: 5 });
      for (const op of ['CreateTargetGroup', 'CreateTargetGroup', 'CreateLoadBalancer'])
        await budget.take(op);
      await budget.take('CreateListener');
      await budget.take('CreateListener');
      expect(scope.kept).toEqual([]);
    });
    expect(item.writes).toBe(writes);
    expect(waits.every((ms) => ms <= slotWaitBoundMs)).toBe(true);
  });

  it("a block is at most the budget's burst: AWS's bucket keeps as many tokens spare", async () => {
    const now = { ms: 0 };
    const { budget, item } = budgetOf(changeSpec, now, 'ELBv2 change budget');
    await withRegistrationScope('team-a/web', async (scope) => {
      expectBudgetCalls({ change: 20 });
      await budget.take('CreateListener');
      expect(scope.kept).toHaveLength(changeSpec.burst - 1);
    });
    expect(item.writes).toBe(1);
  });

  it('never sleeps past the bound, whatever the load: three instances on each budget', async () => {
    for (const spec of [describeSpec, changeSpec]) {
      const now = { ms: 0 };
      const item = new MemoryTatItem();
      const waits: number[] = [];
      const instances = Array.from(
        { length: 3 },
        () =>
          new RegistrationBudget(new TatBudgetStore(item), spec, {
            nowMs: () => now.ms,
            sleep: (ms) => {
              waits.push(ms);
              now.ms += ms;
              return Promise.resolve();
            },
          }),
      );
      let deferred = 0;
      for (let i = 0; i < 60; i++) {
        const op = spec === describeSpec ? 'DescribeTags' : 'ModifyTargetGroup';
        await withRegistrationScope(`team-${i % 4}/svc-${i}`, () => {
          expectBudgetCalls({ describe: 3, change: 3 });
          return instances[i % 3]!.take(op);
        }).catch((e: unknown) => {
          if (!(e instanceof RequeueAfterError)) throw e;
          deferred++;
        });
        now.ms += 37;
      }
      expect(deferred).toBeGreaterThan(0);
      expect(Math.max(...waits)).toBeLessThanOrEqual(slotWaitBoundMs);
    }
  });

  it('a pass that ran to its end keeps only the slots still ahead (a guess of its reads left the rest)', () => {
    const kept: KeptSlot[] = [
      { lane: 'describe', atMs: 900 },
      { lane: 'change', atMs: 1_000 },
      { lane: 'register', atMs: 1_400 },
    ];
    dropDueSlots(kept, 1_000);
    expect(kept).toEqual([{ lane: 'register', atMs: 1_400 }]);
  });
});

describe("node sync's host updates, paced at the registration budget's rate", () => {
  it('the first within the burst at once, then two registrations per update at 4/s; at most 900 s', () => {
    const spec = { perSecond: 4, burst: 10 };
    const delays = pacedDelaySeconds(12, spec, 2, 1);
    // Updates 0–2 at once: the burst less one second of the rate; then one every half second,
    // rounded up.
    expect(delays).toEqual([0, 0, 0, 1, 1, 2, 2, 3, 3, 4, 4, 5]);
    // Never more than the budget offers: update k's registrations are due by its arrival.
    delays.forEach((seconds, k) => expect(seconds * 4 + 9).toBeGreaterThanOrEqual(k * 2));
    expect(Math.max(...pacedDelaySeconds(10_000, spec))).toBe(900);
  });

  it('arrivals one batching window apart, booking together, still fit what the budget offers', () => {
    const spec = { perSecond: 4, burst: 10 };
    const delays = pacedDelaySeconds(200, spec, 2, 1);
    for (let second = 0; second <= Math.max(...delays); second++) {
      // A batch opened at `second` takes what arrives until a second later.
      const batched = delays.filter((d) => d <= second + 1).length;
      expect(batched * 2).toBeLessThanOrEqual(spec.burst + spec.perSecond * second);
    }
    // Without the margin the first batch already holds more than the burst.
    const unmerged = pacedDelaySeconds(200, spec, 2, 0);
    expect(unmerged.filter((d) => d <= 1).length * 2).toBeGreaterThan(spec.burst);
  });

  it("takes the namespaces in turns, each one's Services spread over the whole span", () => {
    expect(inTurnsByNamespace(['a/1', 'a/2', 'a/3', 'b/1', 'c/1', 'c/2'])).toEqual([
      'a/1',
      'b/1',
      'c/1',
      'a/2',
      'c/2',
      'a/3',
    ]);
  });
});

describe('a pass that comes back for its turn or its slots (200 creates in 20 namespaces)', () => {
  it('a namespace held back keeps its turn; back for it, the pass books at once and its reads need no slots', async () => {
    const now = { ms: 0 };
    const { budget, item } = budgetOf(changeSpec, now, 'ELBv2 change budget');
    const rule = slotRule(changeSpec, 'change');
    // Namespace hog holds 10 s of slots ahead: its next booking waits its turn.
    for (const name of ['a', 'b', 'd']) {
      await withRegistrationScope(`hog/${name}`, async () => {
        expectBudgetCalls({ change: 10 });
        await budget.take('CreateTargetGroup').catch(() => undefined);
      });
    }
    let kept: KeptSlot[] = [];
    const error = await withRegistrationScope('hog/c', (scope) => {
      kept = scope.kept;
      expectBudgetCalls({ change: 5 });
      return budget.take('CreateTargetGroup');
    }).catch((e: unknown) => e);
    expect((error as Error).message).toMatch(/holds its share/);
    expect(kept).toHaveLength(1);
    expect(kept[0]).toMatchObject({ lane: 'change', turn: true });
    // Stored with the lease and read back, the turn paces the pass's reads.
    const stored = parseKeptSlots(JSON.parse(JSON.stringify(kept)));
    expect(stored).toEqual(kept);
    expect(pacedByKeptSlots(stored)).toBe(true);
    expect(pacedByKeptSlots([{ lane: 'describe', atMs: 1 }])).toBe(false);
    // A registration slot paces the reads; a registration turn does not: the pass may come back
    // for turn after turn, and its reads book on the Describe budget each time.
    expect(pacedByKeptSlots([{ lane: 'register', atMs: 1 }])).toBe(true);
    expect(pacedByKeptSlots([{ lane: 'register', atMs: 1, turn: true }])).toBe(false);
    expect(pacedByKeptSlots([{ lane: 'deregister', atMs: 1, turn: true }])).toBe(false);
    // Back at its turn: the marker goes, a booking is made (a turn is not a slot).
    now.ms = kept[0]!.atMs;
    const writes = item.writes;
    await withRegistrationScope('hog/c', async (scope) => {
      scope.kept.push(...stored);
      expectBudgetCalls({ change: 5 });
      await budget.take('CreateTargetGroup').catch(() => undefined);
      expect(scope.kept.some((slot) => slot.turn === true)).toBe(false);
    });
    expect(item.writes).toBeGreaterThan(writes);
    expect(rule.intervalMs).toBeGreaterThan(slotWaitBoundMs);
  });
});

describe('a pass whose reads come back (50 updates against moto, issue 37)', () => {
  it('slots booked together are one block: side-by-side reads never send the pass back for a slot a few intervals on', async () => {
    const now = { ms: 10_000 };
    const { budget, item, waits } = budgetOf(describeSpec, now, 'ELBv2 Describe budget');
    const rule = slotRule(describeSpec, 'describe');
    // The budget's burst is spent: eight slots now are 100 ms apart, the last 700 ms off.
    item.values = { tat: now.ms + rule.toleranceMs };
    await withRegistrationScope('team-a/web', async () => {
      expectBudgetCalls({ describe: 8 });
      await Promise.all(Array.from({ length: 8 }, () => budget.take('DescribeTargetHealth')));
    });
    expect(item.writes).toBeLessThanOrEqual(2);
    expect(waits).toEqual([]);
    expect(blockTimes([5, 1, 3, 7, 9], 2, 'first')).toEqual([1, 1, 5, 5, 9]);
    expect(blockTimes([5, 1, 3, 7, 9], 2, 'last')).toEqual([3, 3, 7, 7, 9]);
  });

  it('sent back for one more read, a pass keeps slots for every read it repeats, due together', async () => {
    const now = { ms: 10_000 };
    // First come, first served, as createRuntime wires the Describe budget.
    const { budget, item, waits } = memoryBudget(describeSpec, now, {
      name: 'ELBv2 Describe budget',
      perNamespace: false,
    });
    let kept: KeptSlot[] = [];
    const error = await withRegistrationScope('team-a/web', async (scope) => {
      kept = scope.kept;
      beginPass(scope, now.ms);
      // The guess was three reads; the pass makes four, and the budget fills meanwhile.
      expectBudgetCalls({ describe: 3 });
      for (let i = 0; i < 3; i++) await budget.take('DescribeTargetGroups');
      item.values = { ...item.values, tat: now.ms + 5_000 };
      await budget.take('DescribeListeners');
    }).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(RequeueAfterError);
    // The fourth read's slot and three more for the reads it repeats, one block.
    expect(kept).toHaveLength(4);
    const at = kept[0]!.atMs;
    expect(kept.every((slot) => slot.lane === 'describe' && slot.atMs === at)).toBe(true);
    expect(at).toBeGreaterThan(now.ms + slotWaitBoundMs);

    // Back when they are due, the pass's four reads go without a write of their own.
    now.ms = at - 100;
    const writes = item.writes;
    await withRegistrationScope('team-a/web', async (scope) => {
      scope.kept.push(...kept);
      beginPass(scope, now.ms);
      expectBudgetCalls({ describe: 3 });
      await Promise.all([
        budget.take('DescribeTargetGroups'),
        budget.take('DescribeTargetGroups'),
        budget.take('DescribeTargetGroups'),
      ]);
      await budget.take('DescribeListeners');
      expect(scope.kept).toEqual([]);
    });
    expect(item.writes).toBe(writes);
    expect(Math.max(0, ...waits)).toBeLessThanOrEqual(slotWaitBoundMs);
  });

  it('a kept slot fresh when the pass began serves it, however long its first reads took', async () => {
    // A delete's inventory takes a few seconds against a loaded backend before its first change.
    const slots = (): KeptSlot[] => [{ lane: 'change', atMs: 1_000 }];
    expect(useKeptSlot(slots(), 'change', 4_500, 900)).toEqual({ kind: 'use', atMs: 1_000 });
    // Judged by the call alone it would be stale, booked again behind everyone.
    expect(useKeptSlot(slots(), 'change', 4_500)).toEqual({ kind: 'none' });
    // Stale at the pass's start already: given up.
    expect(useKeptSlot(slots(), 'change', 4_500, 3_100)).toEqual({ kind: 'none' });

    const now = { ms: 1_000 };
    const { budget, item } = budgetOf(changeSpec, now, 'ELBv2 change budget');
    await withRegistrationScope('team-a/web', async (scope) => {
      scope.kept.push(...slots(), { lane: 'change', atMs: 1_000 });
      beginPass(scope, now.ms);
      now.ms += 3_000;
      await budget.take('DeleteLoadBalancer');
      await budget.take('DeleteTargetGroup');
    });
    expect(item.writes).toBe(0);
  });
});

describe("a namespace's line on a shared budget (200 creates in 20 namespaces)", () => {
  it('spaces its callers at its share of the rate, not one call apart: half the namespaces booking', () => {
    const rule = slotRule(changeSpec, 'change');
    // Two namespaces have slots ahead (one lane in each row each); n20's horizon has passed.
    const item = { tat: 9_000, n1: 5_000, n3: 6_000, n17: 5_000, n20: 100, n21: 7_000 };
    expect(activeNamespaces(item, 1_000)).toBe(2);
    expect(activeNamespaces({ tat: 9_000 }, 1_000)).toBe(1);
    // A create's five calls: 1,667 ms of the budget alone; with 4 namespaces, twice that.
    expect(nextTicket(undefined, 2_000, 5, rule).end).toBeCloseTo(2_000 + 5 * rule.intervalMs);
    expect(nextTicket(undefined, 2_000, 5, rule, 4 / 2).end).toBeCloseTo(
      2_000 + 10 * rule.intervalMs,
    );
    // Behind a line that ends later, the turn is the line's end.
    expect(nextTicket(8_000, 2_000, 5, rule, 2).turnAtMs).toBe(8_000);
  });
});
