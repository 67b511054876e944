import { describe, expect, it } from 'vitest';
import { RequeueAfterError } from '../../../functions/core/errors';
import {
  RegistrationBudget,
  registrationDeadline,
  registrationNamespace,
  withRegistrationScope,
  TatBudgetStore,
  type TatItem,
} from '../../../functions/aws/registration-budget';
import {
  applyBudgetWrite,
  bookSlot,
  latestBookableTat,
  namespaceLanes,
  slotRule,
  type BudgetWrite,
  type TatUpdate,
} from '../../../functions/core/registration-slots';

const spec = { perSecond: 4, burst: 10 };
const register = slotRule(spec, 'register');
const deregister = slotRule(spec, 'deregister');

/** The item's conditional writes as DynamoDB applies them (atomically, one at a time). */
class MemoryTatItem implements TatItem {
  values: Record<string, number | undefined> = {};
  writes = 0;
  get tat(): number | undefined {
    return this.values.tat;
  }
  set tat(tat: number | undefined) {
    this.values = { ...this.values, tat };
  }
  write(write: BudgetWrite): Promise<TatUpdate> {
    this.writes++;
    const applied = applyBudgetWrite(this.values, write);
    this.values = { ...applied.item };
    return Promise.resolve(applied.update);
  }
}

/** Books `count` slots at `nowMs`, as one caller after another; returns the slot times. */
function slots(count: number, nowMs: number, rule = register, start?: number): number[] {
  let tat = start;
  const at: number[] = [];
  for (let i = 0; i < count; i++) {
    const booking = bookSlot(tat, nowMs, rule);
    if (booking.kind !== 'slot') break;
    at.push(booking.atMs);
    tat = booking.tat;
  }
  return at;
}

describe('registration budget slot arithmetic (GCRA)', () => {
  it('lets a burst through at once from an idle budget, then spaces calls at the rate', () => {
    const at = slots(14, 1000);
    expect(at.slice(0, 10)).toEqual(Array(10).fill(1000));
    expect(at.slice(10)).toEqual([1250, 1500, 1750, 2000]);
  });

  it('never lets more than burst + rate × t calls start within t seconds', () => {
    // Callers arrive every 10 ms for a minute; count the slots in every window.
    let tat: number | undefined;
    const starts: number[] = [];
    for (let now = 0; now < 60_000; now += 10) {
      const booking = bookSlot(tat, now, register);
      if (booking.kind === 'slot') {
        starts.push(booking.atMs);
        tat = booking.tat;
      }
    }
    for (const from of starts) {
      for (const seconds of [0, 1, 5, 20]) {
        const inWindow = starts.filter((s) => s >= from && s <= from + seconds * 1000).length;
        expect(inWindow).toBeLessThanOrEqual(spec.burst + spec.perSecond * seconds);
      }
    }
    expect(starts.length).toBeGreaterThan(spec.perSecond * 60);
  });

  it('does not save up idle time beyond the burst', () => {
    const at = slots(12, 3_600_000, register, 5);
    expect(at.filter((t) => t === 3_600_000)).toHaveLength(10);
  });

  it('refuses a slot past the horizon, saying when it would be within it', () => {
    // 10 s of backlog beyond the burst: 40 slots at 4/s.
    const tat = 1000 + register.toleranceMs + register.horizonMs;
    expect(bookSlot(tat, 1000, register).kind).toBe('slot');
    expect(bookSlot(tat + 250, 1000, register)).toEqual({ kind: 'later', inMs: 250 });
    expect(latestBookableTat(1000, register)).toBe(tat);
  });

  it('lets deregistrations book further ahead than registrations', () => {
    const tat = 1000 + register.toleranceMs + register.horizonMs + 5_000;
    expect(bookSlot(tat, 1000, register).kind).toBe('later');
    expect(bookSlot(tat, 1000, deregister)).toMatchObject({ kind: 'slot', atMs: 1000 + 15_000 });
  });
});

describe('TatBudgetStore (the conditional updates)', () => {
  it('books with one write while it knows the item, two when another instance moved it', async () => {
    const item = new MemoryTatItem();
    const a = new TatBudgetStore(item);
    const b = new TatBudgetStore(item);
    expect(await a.book(0, register)).toMatchObject({ kind: 'slot', atMs: 0 });
    expect(item.writes).toBe(1);
    expect(await a.book(0, register)).toMatchObject({ kind: 'slot', atMs: 0 });
    expect(item.writes).toBe(2);
    // b has never seen the item: its idle update is refused and returns tat, then it advances.
    expect(await b.book(0, register)).toMatchObject({ kind: 'slot', tat: 750 });
    expect(item.writes).toBe(4);
  });

  it('hands out the same slots as the pure arithmetic, across instances', async () => {
    const item = new MemoryTatItem();
    const stores = [new TatBudgetStore(item), new TatBudgetStore(item), new TatBudgetStore(item)];
    const booked: number[] = [];
    for (let i = 0; i < 30; i++) {
      const booking = await stores[i % 3]!.book(0, register);
      if (booking.kind === 'slot') booked.push(booking.atMs);
    }
    expect(booked).toEqual(slots(30, 0));
  });

  it('an idle item restarts from now', async () => {
    const item = new MemoryTatItem();
    item.tat = 100;
    const store = new TatBudgetStore(item);
    expect(await store.book(60_000, register)).toEqual({ kind: 'slot', atMs: 60_000, tat: 60_250 });
  });
});

describe('RegistrationBudget', () => {
  function budgetAt(now: { ms: number }, item = new MemoryTatItem()) {
    const waits: number[] = [];
    const budget = new RegistrationBudget(new TatBudgetStore(item), spec, {
      nowMs: () => now.ms,
      sleep: (ms) => {
        waits.push(ms);
        now.ms += ms;
        return Promise.resolve();
      },
    });
    return { budget, waits, item };
  }

  it('waits for the booked slot', async () => {
    const now = { ms: 0 };
    const { budget, waits } = budgetAt(now);
    for (let i = 0; i < 12; i++) await budget.take('RegisterTargets');
    expect(waits).toEqual([250, 250]);
  });

  it('past the horizon, throws RequeueAfterError with whole seconds instead of booking', async () => {
    const now = { ms: 0 };
    const item = new MemoryTatItem();
    item.tat = latestBookableTat(0, register) + 2_100;
    const { budget, waits } = budgetAt(now, item);
    const error = await budget.take('RegisterTargets').catch((e: unknown) => e);
    expect(error).toBeInstanceOf(RequeueAfterError);
    expect((error as RequeueAfterError).seconds).toBe(3);
    expect(waits).toEqual([]);
    expect(item.tat).toBe(latestBookableTat(0, register) + 2_100);
    // A deregistration still gets in, 12.1 s from now.
    await budget.take('DeregisterTargets');
    expect(waits).toEqual([latestBookableTat(0, register) + 2_100 - register.toleranceMs]);
  });

  it('inside a sync, books no slot past its registration deadline, and says to come back when the lane would take it', async () => {
    const now = { ms: 0 };
    const item = new MemoryTatItem();
    // The next registration slot is 8 s away: within the lane's 10 s horizon.
    item.tat = register.toleranceMs + 8_000;
    const { budget, waits } = budgetAt(now, item);
    const error = await registrationDeadline
      .run(5_000, () => budget.take('RegisterTargets'))
      .catch((e: unknown) => e);
    expect(error).toBeInstanceOf(RequeueAfterError);
    expect((error as RequeueAfterError).seconds).toBe(1);
    expect(waits).toEqual([]);
    expect(item.tat).toBe(register.toleranceMs + 8_000);
    // With time left before the deadline, the same slot is booked and waited for.
    await registrationDeadline.run(9_000, () => budget.take('RegisterTargets'));
    expect(waits).toEqual([8_000]);
  });
  it('a namespace over its share waits behind the others, unbooked, while another namespace books at once', async () => {
    const now = { ms: 0 };
    const item = new MemoryTatItem();
    const hog = namespaceLanes('hog');
    // A namespace with no lane in common with the hog's.
    const quiet = Array.from({ length: 50 }, (_, i) => `quiet-${i}`).find((ns) =>
      namespaceLanes(ns).every((lane) => !hog.includes(lane)),
    )!;
    // The hog made the latest bookings: its latest slot is 3 s ahead.
    const tat = register.toleranceMs + register.intervalMs + 3_000;
    item.values = { tat, [hog[0]]: tat, [hog[1]]: tat };
    const { budget, waits } = budgetAt(now, item);
    await registrationNamespace.run(quiet, () => budget.take('RegisterTargets'));
    expect(waits).toEqual([3_250]);
    // At the same moment, the hog waits until its latest slot is within a second (2 s), then
    // books behind the quiet call (at 3.5 s).
    now.ms = 0;
    await registrationNamespace.run('hog', () => budget.take('RegisterTargets'));
    expect(waits.slice(1)).toEqual([2_000, 1_500]);
    expect(item.writes).toBeLessThanOrEqual(5);
  });

  it('first come, first served without a namespace, or when fairness is off', async () => {
    const hog = namespaceLanes('hog');
    const far = latestBookableTat(0, register) - 500;
    const fill = (item: MemoryTatItem) =>
      (item.values = { tat: far, [hog[0]]: far, [hog[1]]: far });
    for (const perNamespace of [false, true]) {
      const now = { ms: 0 };
      const item = new MemoryTatItem();
      fill(item);
      const waits: number[] = [];
      const budget = new RegistrationBudget(
        new TatBudgetStore(item),
        spec,
        {
          nowMs: () => now.ms,
          sleep: (ms) => {
            waits.push(ms);
            now.ms += ms;
            return Promise.resolve();
          },
        },
        { perNamespace },
      );
      if (perNamespace) await budget.take('RegisterTargets');
      else await registrationNamespace.run('quiet', () => budget.take('RegisterTargets'));
      expect(waits).toEqual([far - register.toleranceMs]);
    }
  });

  it("the key's namespace is the one booking (withRegistrationScope)", async () => {
    const seen: (string | undefined)[] = [];
    const store = {
      book: (_now: number, _rule: unknown, namespace?: string) => {
        seen.push(namespace);
        return Promise.resolve({ kind: 'slot' as const, atMs: 0, tat: 250 });
      },
    };
    const budget = new RegistrationBudget(store, spec, {
      nowMs: () => 0,
      sleep: () => Promise.resolve(),
    });
    await withRegistrationScope('team-a/web', 30_000, () => budget.take('RegisterTargets'));
    await withRegistrationScope('not a key', 30_000, () => budget.take('RegisterTargets'));
    await budget.take('DeregisterTargets');
    expect(seen).toEqual(['team-a', undefined, undefined]);
  });
});
