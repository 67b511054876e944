import { describe, expect, it } from 'vitest';
import { memoryBudget, MemoryTatItem } from '../../support/memory-budget';
import { RequeueAfterError } from '../../../functions/core/errors';
import {
  RegistrationBudget,
  withRegistrationScope,
  TatBudgetStore,
} from '../../../functions/aws/registration-budget';
import {
  bookedSlotTimes,
  bookSlot,
  namespaceTicketAttribute,
  secondsUntilSlot,
  keptSlotGraceMs,
  latestBookableTat,
  latestLaneHorizon,
  parseKeptSlots,
  slotWaitBoundMs,
  useKeptSlot,
  type KeptSlot,
  namespaceLanes,
  namespaceFingerprint,
  fingerprintAttribute,
  slotRule,
} from '../../../functions/core/registration-slots';

const spec = { perSecond: 4, burst: 10 };

/** A namespace's two lanes as its booking leaves them: at `tat`, with its fingerprint. */
function lanesWrittenBy(namespace: string, tat: number): Record<string, number> {
  const values: Record<string, number> = {};
  for (const lane of namespaceLanes(namespace)) {
    values[lane] = tat;
    values[fingerprintAttribute(lane)] = namespaceFingerprint(namespace);
  }
  return values;
}
const register = slotRule(spec, 'register');
const deregister = slotRule(spec, 'deregister');

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

  it('bookings side by side on a busy item it has not seen pay one refused write, not one each', async () => {
    const item = new MemoryTatItem();
    // Another instance's backlog: slots 2 s ahead.
    item.tat = 2_000 + register.toleranceMs;
    const store = new TatBudgetStore(item);
    const bookings = await Promise.all(Array.from({ length: 6 }, () => store.book(0, register)));
    expect(bookings.map((b) => b.kind === 'slot' && b.atMs)).toEqual([
      2_000, 2_250, 2_500, 2_750, 3_000, 3_250,
    ]);
    // The first guessed an idle item and was refused; the others waited for its answer.
    expect(item.writes).toBe(7);
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
    expect(await store.book(60_000, register)).toMatchObject({
      kind: 'slot',
      atMs: 60_000,
      tat: 60_250,
    });
  });

  it('books several consecutive slots with one write, judged by the first', async () => {
    const item = new MemoryTatItem();
    // 8 of the burst's 10 slots are used: two more go at once, the third one interval later.
    item.tat = register.toleranceMs - register.intervalMs;
    const store = new TatBudgetStore(item);
    expect(await store.book(0, register, undefined, 3)).toEqual({
      kind: 'slot',
      atMs: 0,
      tat: register.toleranceMs + 2 * register.intervalMs,
      slots: [0, 0, 250],
    });
    // The store had not seen the item: its idle write was refused, then one write booked all three.
    expect(item.writes).toBe(2);
    expect(bookedSlotTimes(1_000, 2, 0, register)).toEqual([0, 0]);
  });
});

describe('RegistrationBudget', () => {
  function budgetAt(now: { ms: number }, item = new MemoryTatItem(), perNamespace = true) {
    return memoryBudget(spec, now, { item, perNamespace });
  }

  /** Runs `take` in a key's scope; returns the scope (its kept slots) and the error, if any. */
  async function takeFor(key: string, budget: RegistrationBudget, operation = 'RegisterTargets') {
    let kept: KeptSlot[] = [];
    const error = await withRegistrationScope(key, (scope) => {
      kept = scope.kept;
      return budget.take(operation);
    }).then(
      () => undefined,
      (e: unknown) => e,
    );
    return { kept, error };
  }

  it('waits for a slot within the bound, and never longer', async () => {
    const now = { ms: 0 };
    const { budget, waits } = budgetAt(now);
    for (let i = 0; i < 12; i++) await budget.take('RegisterTargets');
    expect(waits).toEqual([250, 250]);
    expect(slotWaitBoundMs).toBe(250);
  });

  it('a slot further off than the bound is booked and kept for the key, and the pass ends requeue-after', async () => {
    const now = { ms: 0 };
    const item = new MemoryTatItem();
    // The next slot is 3.1 s away.
    item.tat = register.toleranceMs + 3_100;
    const { budget, waits } = budgetAt(now, item);
    const { kept, error } = await takeFor('team-a/web', budget);
    expect(error).toBeInstanceOf(RequeueAfterError);
    // Visible again 3 s later (SQS delays are whole seconds): never more than 250 ms early,
    // which would cost another round trip; at most the batching window late.
    expect((error as RequeueAfterError).seconds).toBe(3);
    expect(secondsUntilSlot(3_100, 0)).toBe(3);
    expect((error as RequeueAfterError).message).toMatch(/kept for this Service/);
    expect(kept).toEqual([{ lane: 'register', atMs: 3_100 }]);
    expect(waits).toEqual([]);
    // Booked: the next caller books behind it.
    expect(item.tat).toBe(register.toleranceMs + 3_350);
    expect(item.writes).toBe(2);
  });

  it("the key's next pass uses its kept slot without booking again: early, it goes back; due, it waits at most the bound; late, it goes at once", async () => {
    const now = { ms: 2_000 };
    const item = new MemoryTatItem();
    item.tat = register.toleranceMs + 3_350;
    const { budget, waits } = budgetAt(now, item);
    const kept: KeptSlot[] = [{ lane: 'register', atMs: 3_100 }];
    const pass = () =>
      withRegistrationScope('team-a/web', (scope) => {
        scope.kept.push(...kept.splice(0));
        return budget.take('RegisterTargets').finally(() => kept.push(...scope.kept));
      });
    // 1.1 s early: back in a second, the slot still kept.
    const early = await pass().catch((e: unknown) => e);
    expect((early as RequeueAfterError).seconds).toBe(1);
    expect(kept).toEqual([{ lane: 'register', atMs: 3_100 }]);
    // 150 ms before it: waits for it, and it is used up.
    now.ms = 2_950;
    await pass();
    expect(waits).toEqual([150]);
    expect(kept).toEqual([]);
    // A slot 1.5 s late (the batching window, a slow invoke) still goes, at once.
    kept.push({ lane: 'register', atMs: 1_600 });
    await pass();
    expect(waits).toEqual([150]);
    expect(kept).toEqual([]);
    // None of this wrote to the budget item.
    expect(item.writes).toBe(0);
    expect(item.tat).toBe(register.toleranceMs + 3_350);
  });

  it('a kept slot older than the grace is given up and a new one booked', async () => {
    const now = { ms: 10_000 };
    const { budget, item } = budgetAt(now);
    await withRegistrationScope('team-a/web', async (scope) => {
      scope.kept.push({ lane: 'register', atMs: 10_000 - keptSlotGraceMs - 1 });
      await budget.take('RegisterTargets');
      expect(scope.kept).toEqual([]);
    });
    expect(item.writes).toBe(1);
  });

  it('a kept slot serves its own lane only', () => {
    const kept: KeptSlot[] = [
      { lane: 'deregister', atMs: 1_000 },
      { lane: 'register', atMs: 5_000 },
      { lane: 'register', atMs: 1_100 },
    ];
    expect(useKeptSlot(kept, 'register', 1_000)).toEqual({ kind: 'use', atMs: 1_100 });
    expect(useKeptSlot(kept, 'register', 1_000)).toEqual({ kind: 'early', atMs: 5_000 });
    expect(useKeptSlot(kept, 'deregister', 1_000)).toEqual({ kind: 'use', atMs: 1_000 });
    expect(useKeptSlot(kept, 'deregister', 1_000)).toEqual({ kind: 'none' });
    expect(
      parseKeptSlots([
        { lane: 'register', atMs: 5 },
        { lane: 'x', atMs: 1 },
        'junk',
        { lane: 'deregister', atMs: 'soon' },
      ]),
    ).toEqual([{ lane: 'register', atMs: 5 }]);
    expect(parseKeptSlots(undefined)).toEqual([]);
  });

  it('past the horizon, throws RequeueAfterError with whole seconds, booking and keeping nothing', async () => {
    const now = { ms: 0 };
    const item = new MemoryTatItem();
    item.tat = latestBookableTat(0, register) + 2_100;
    const { budget, waits } = budgetAt(now, item);
    const { kept, error } = await takeFor('team-a/web', budget);
    expect(error).toBeInstanceOf(RequeueAfterError);
    expect((error as RequeueAfterError).seconds).toBe(3);
    expect(kept).toEqual([]);
    expect(waits).toEqual([]);
    expect(item.tat).toBe(latestBookableTat(0, register) + 2_100);
    // A deregistration still gets in: its slot, 12.1 s from now, is booked and kept.
    const dereg = await takeFor('team-a/web', budget, 'DeregisterTargets');
    const atMs = latestBookableTat(0, register) + 2_100 - register.toleranceMs;
    expect(dereg.kept).toEqual([{ lane: 'deregister', atMs }]);
    expect((dereg.error as RequeueAfterError).seconds).toBe(Math.ceil((atMs - 250) / 1000));
    expect(waits).toEqual([]);
  });

  it('never sleeps past the bound, whatever the traffic: three instances, two namespaces, both lanes', async () => {
    const now = { ms: 0 };
    const item = new MemoryTatItem();
    // Callers are concurrent: one's sleep does not hold the others back.
    const waits: number[] = [];
    const instances = [0, 1, 2].map(
      () =>
        new RegistrationBudget(new TatBudgetStore(item), spec, {
          nowMs: () => now.ms,
          sleep: (ms) => {
            waits.push(ms);
            return Promise.resolve();
          },
        }),
    );
    let seed = 7;
    const random = () => (seed = (seed * 1103515245 + 12345) % 2 ** 31) / 2 ** 31;
    const kept = new Map<string, KeptSlot[]>();
    let deferred = 0;
    let used = 0;
    for (let i = 0; i < 600; i++) {
      now.ms += Math.floor(random() * 120);
      const key = `${random() < 0.7 ? 'busy' : 'quiet'}/svc-${Math.floor(random() * 40)}`;
      const budget = instances[i % 3]!;
      const operation = random() < 0.3 ? 'DeregisterTargets' : 'RegisterTargets';
      await withRegistrationScope(key, async (scope) => {
        scope.kept.push(...(kept.get(key) ?? []));
        await budget.take(operation).then(
          () => used++,
          (e: unknown) => {
            expect(e).toBeInstanceOf(RequeueAfterError);
            deferred++;
          },
        );
        kept.set(key, [...scope.kept]);
      });
    }
    expect(Math.max(...waits)).toBeLessThanOrEqual(slotWaitBoundMs);
    // The traffic is well over 4/s: some calls waited, some went back to the queue.
    expect(waits.length).toBeGreaterThan(0);
    expect(deferred).toBeGreaterThan(0);
    expect(used).toBeGreaterThan(0);
  });

  it('a namespace over its share comes back when its turn is due, unbooked, while another namespace books', async () => {
    const now = { ms: 0 };
    const item = new MemoryTatItem();
    const hog = namespaceLanes('hog');
    // A namespace with no lane in common with the hog's.
    const quiet = Array.from({ length: 50 }, (_, i) => `quiet-${i}`).find((ns) =>
      namespaceLanes(ns).every((lane) => !hog.includes(lane)),
    )!;
    // The hog made the latest bookings: its latest slot is 3 s ahead.
    const tat = register.toleranceMs + register.intervalMs + 3_000;
    item.values = { tat, ...lanesWrittenBy('hog', tat) };
    const { budget, waits } = budgetAt(now, item);
    const q = await takeFor(`${quiet}/web`, budget);
    expect(q.kept).toEqual([{ lane: 'register', atMs: 3_250 }]);
    // The hog's turn comes when its latest slot is within a second (2 s): no slot is booked,
    // but a ticket on the hog's line (a second write), so its callers come back one by one.
    const writes = item.writes;
    const h = await takeFor('hog/web', budget);
    expect((h.error as RequeueAfterError).seconds).toBe(2);
    expect((h.error as RequeueAfterError).message).toMatch(/holds its share/);
    // No slot kept, only the turn it comes back for (its reads are not held back on the way).
    expect(h.kept).toEqual([{ lane: 'register', atMs: 2_000, turn: true }]);
    expect(item.writes).toBe(writes + 2);
    expect(item.values[namespaceTicketAttribute('hog')]).toBe(2_000 + register.intervalMs);
    // The hog's next caller queues behind it: its turn one call later.
    const second = await takeFor('hog/api', budget);
    expect((second.error as RequeueAfterError).seconds).toBe(3);
    expect(item.values[namespaceTicketAttribute('hog')]).toBe(2_000 + 2 * register.intervalMs);
    // Back at its turn, the first books behind the quiet call (at 3.5 s), and keeps that slot.
    now.ms = 2_000;
    const again = await takeFor('hog/web', budget);
    expect(again.kept).toEqual([{ lane: 'register', atMs: 3_500 }]);
    expect(waits).toEqual([]);
  });

  it('a namespace whose lanes other namespaces wrote last is not held back by them; one that wrote them is', async () => {
    const now = { ms: 0 };
    const item = new MemoryTatItem();
    const [row0, row1] = namespaceLanes('quiet');
    // Two busy namespaces, one sharing each of quiet's lanes, booked 3 s ahead.
    const sharing = (lane: string) =>
      Array.from({ length: 500 }, (_, i) => `burst-${i}`).find((ns) =>
        namespaceLanes(ns).includes(lane),
      )!;
    const tat = register.toleranceMs + register.intervalMs + 3_000;
    // Past a share ahead, within two.
    const lane = latestLaneHorizon(0, register) + register.shareMs / 2;
    item.values = {
      tat,
      ...lanesWrittenBy(sharing(row0), lane),
      ...lanesWrittenBy(sharing(row1), lane),
    };
    const { budget } = budgetAt(now, item);
    // Both of quiet's lanes are past the share, but they say little of quiet: it books.
    const quiet = await takeFor('quiet/web', budget);
    expect(quiet.kept).toEqual([{ lane: 'register', atMs: 3_250 }]);
    expect(item.values[fingerprintAttribute(row0)]).toBe(namespaceFingerprint('quiet'));
    // Its lanes are its own now: its next booking is held back by its share.
    const next = await takeFor('quiet/api', budget);
    expect((next.error as RequeueAfterError).message).toMatch(/holds its share/);
    // Lanes others wrote more than two shares ahead hold a namespace back all the same: one over
    // its share whose lanes were written since gains at most a share.
    const far = latestLaneHorizon(0, register) + register.shareMs + 1_000;
    const other = new MemoryTatItem();
    other.values = {
      tat,
      ...lanesWrittenBy(sharing(row0), far),
      ...lanesWrittenBy(sharing(row1), far),
    };
    const held = await takeFor('quiet/web', budgetAt({ ms: 0 }, other).budget);
    expect((held.error as RequeueAfterError).message).toMatch(/holds its share/);
  });

  it('first come, first served without a namespace, or when fairness is off', async () => {
    const hog = namespaceLanes('hog');
    const far = latestBookableTat(0, register) - 500;
    for (const perNamespace of [false, true]) {
      const now = { ms: 0 };
      const item = new MemoryTatItem();
      item.values = { tat: far, [hog[0]]: far, [hog[1]]: far };
      const { budget } = budgetAt(now, item, perNamespace);
      // Fairness off: the hog's own key books at once; on: a call outside any key's sync.
      const { kept, error } = perNamespace
        ? await budget.take('RegisterTargets').then(
            () => ({ kept: [], error: undefined }),
            (e: unknown) => ({ kept: [], error: e }),
          )
        : await takeFor('hog/web', budget);
      expect(error).toBeInstanceOf(RequeueAfterError);
      if (!perNamespace)
        expect(kept).toEqual([{ lane: 'register', atMs: far - register.toleranceMs }]);
      expect(item.tat).toBe(far + register.intervalMs);
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
    await withRegistrationScope('team-a/web', () => budget.take('RegisterTargets'));
    await withRegistrationScope('not a key', () => budget.take('RegisterTargets'));
    await budget.take('DeregisterTargets');
    expect(seen).toEqual(['team-a', undefined, undefined]);
  });
});
