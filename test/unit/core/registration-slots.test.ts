import { describe, expect, it } from 'vitest';
import {
  applyBudgetWrite,
  bookFairSlot,
  bookSlot,
  budgetWrite,
  laneAttributes,
  latestLaneHorizon,
  namespaceLanes,
  namespaceFingerprint,
  fingerprintAttribute,
  itemValues,
  slotRule,
  type BudgetItemAttributes,
  type SlotRule,
} from '../../../functions/core/registration-slots';

const spec = { perSecond: 4, burst: 10 };
const register = slotRule(spec, 'register');

/**
 * The shared item in memory, booked the way the store books it: the write this instance would
 * send, then, when refused, the rule on the item that refused it.
 */
class Item {
  values: BudgetItemAttributes = {};
  book(namespace: string | undefined, nowMs: number, rule: SlotRule = register) {
    const lanes = namespace === undefined ? [] : namespaceLanes(namespace);
    const fp = namespace === undefined ? undefined : namespaceFingerprint(namespace);
    for (;;) {
      const applied = applyBudgetWrite(
        this.values,
        budgetWrite(this.values.tat, nowMs, rule, lanes, 1, fp),
      );
      this.values = applied.item;
      if (applied.update.booked) {
        const base = applied.update.tat - rule.intervalMs;
        return { kind: 'slot' as const, atMs: Math.max(nowMs, base - rule.toleranceMs) };
      }
      const booking = bookFairSlot(itemValues(this.values, lanes, fp, rule), nowMs, rule);
      if (booking.kind !== 'slot') return booking;
    }
  }
}

/** Namespaces whose lanes differ from `others`' in both rows (no shared lane at all). */
function apart(count: number, others: readonly string[] = []): string[] {
  const taken = new Set(others.flatMap((ns) => namespaceLanes(ns)));
  const found: string[] = [];
  for (let i = 0; found.length < count; i++) {
    const ns = `team-${i}`;
    const lanes = namespaceLanes(ns);
    if (lanes.some((lane) => taken.has(lane))) continue;
    lanes.forEach((lane) => taken.add(lane));
    found.push(ns);
  }
  return found;
}

describe('registration budget fairness between namespaces (pure rule)', () => {
  it('first come, first served: one namespace books the whole horizon and a quiet one comes back later', () => {
    const item = new Item();
    let booked = 0;
    while (item.book(undefined, 0).kind === 'slot') booked++;
    expect(booked).toBe(spec.burst + spec.perSecond * 10);
    expect(item.book(undefined, 0).kind).toBe('later');
  });

  it('a namespace holds at most its share of slots it must wait for; another namespace books right behind them', () => {
    const [hog, quiet] = apart(2);
    const item = new Item();
    const hogSlots: number[] = [];
    for (let i = 0; i < 50; i++) {
      const booking = item.book(hog, 0);
      if (booking.kind !== 'slot') {
        // The hog's next turn comes when its latest slot is within a second of now.
        expect(booking).toEqual({ kind: 'behind', inMs: register.intervalMs });
        break;
      }
      hogSlots.push(booking.atMs);
    }
    // The burst at once, then slots up to 1 s (4 slots) plus one interval ahead.
    expect(hogSlots.filter((at) => at === 0)).toHaveLength(spec.burst);
    expect(Math.max(...hogSlots)).toBe(register.shareMs + register.intervalMs);
    // The quiet namespace's call goes right after them: 1.5 s, not 10 s or never.
    expect(item.book(quiet, 0)).toEqual({ kind: 'slot', atMs: 1_500 });
    // The hog books behind it when its turn comes.
    const later = item.book(hog, 250);
    expect(later).toEqual({ kind: 'slot', atMs: 1_750 });
  });

  it('alone, a namespace that keeps asking still gets the whole rate', () => {
    const [hog] = apart(1);
    const fair = new Item();
    const fcfs = new Item();
    const count = (item: Item, namespace: string | undefined) => {
      const starts: number[] = [];
      // Callers ask every 10 ms for a minute; a caller told to wait asks again later.
      for (let now = 0; now < 60_000; now += 10) {
        const booking = item.book(namespace, now);
        if (booking.kind === 'slot') starts.push(booking.atMs);
      }
      return starts.filter((at) => at < 60_000).length;
    };
    const fcfsSlots = count(fcfs, undefined);
    expect(count(fair, hog)).toBe(fcfsSlots);
    expect(fcfsSlots).toBe(spec.burst + spec.perSecond * 60 - 1);
  });

  it('with several busy namespaces, a quiet one waits about the share plus an interval per busy namespace, never the horizon', () => {
    const busy = apart(3);
    const [quiet] = apart(1, busy);
    const item = new Item();
    // Each busy namespace asks every 10 ms, in turn, for 30 s; the quiet one asks once a second.
    const quietWaits: number[] = [];
    for (let now = 0; now < 30_000; now += 10) {
      for (const ns of busy) item.book(ns, now);
      if (now % 1000 === 500) {
        const booking = item.book(quiet, now);
        expect(booking.kind).toBe('slot');
        if (booking.kind === 'slot') quietWaits.push(booking.atMs - now);
      }
    }
    const bound = register.shareMs + (busy.length + 1) * register.intervalMs;
    expect(Math.max(...quietWaits)).toBeLessThanOrEqual(bound);
    expect(Math.max(...quietWaits)).toBeLessThan(register.horizonMs / 4);
  });

  it('never lets more than burst + rate × t calls start within t seconds, whoever books', () => {
    const names = [...apart(3), undefined];
    const item = new Item();
    const starts: number[] = [];
    for (let now = 0; now < 20_000; now += 10) {
      const booking = item.book(names[(now / 10) % names.length], now);
      if (booking.kind === 'slot') starts.push(booking.atMs);
    }
    for (const from of starts) {
      for (const seconds of [0, 1, 5]) {
        const inWindow = starts.filter((s) => s >= from && s <= from + seconds * 1000).length;
        expect(inWindow).toBeLessThanOrEqual(spec.burst + spec.perSecond * seconds);
      }
    }
  });

  it('past the horizon, a namespace behind the others comes back through the queue', () => {
    const lanes = namespaceLanes('hog');
    const far = latestLaneHorizon(0, register) + register.horizonMs + 2_000;
    const values = { tat: register.toleranceMs + 500, lanes: lanes.map(() => far) };
    expect(bookFairSlot(values, 0, register)).toEqual({ kind: 'later', inMs: 2_000 });
    // A slot free at once is never refused, whatever the namespace holds.
    expect(bookFairSlot({ ...values, tat: 100 }, 0, register)).toMatchObject({ kind: 'slot' });
    // Without a namespace: first come, first served.
    expect(bookFairSlot({ tat: values.tat, lanes: [] }, 0, register)).toEqual(
      bookSlot(values.tat, 0, register),
    );
  });

  it('is limited by the lower of its two lanes, so sharing one lane with a busy namespace costs nothing', () => {
    const [a, b] = namespaceLanes('quiet');
    const far = latestLaneHorizon(0, register) + 1_000;
    const tat = register.toleranceMs + 500;
    expect(bookFairSlot({ tat, lanes: [far, undefined] }, 0, register).kind).toBe('slot');
    expect(bookFairSlot({ tat, lanes: [far, far] }, 0, register)).toEqual({
      kind: 'behind',
      inMs: 1_000,
    });
    expect(a).not.toBe(b);
  });

  it('keeps the item bounded: every namespace maps to one lane in each of two rows of 16', () => {
    const seen = new Set<string>();
    const rows: boolean[] = [];
    for (let i = 0; i < 2_000; i++) {
      const [first, second] = namespaceLanes(`namespace-${i}`);
      rows.push(Number(first.slice(1)) < 16 && Number(second.slice(1)) >= 16);
      seen.add(first).add(second);
    }
    expect(rows.every(Boolean)).toBe(true);
    expect([...seen].sort()).toEqual([...laneAttributes].sort());
    expect(namespaceLanes('team-a')).toEqual(namespaceLanes('team-a'));
  });

  it('the busy write: refused when the slot waits and a lane the namespace wrote last is past the share, lanes set to the new tat', () => {
    const lanes = namespaceLanes('hog');
    const fp = namespaceFingerprint('hog');
    const [f0, f1] = lanes.map(fingerprintAttribute) as [string, string];
    const write = budgetWrite(3_000, 0, register, lanes, 1, fp);
    expect(write.kind).toBe('advance');
    const latest = latestLaneHorizon(0, register);
    const over = { tat: 3_000, [lanes[0]]: latest + 1, [lanes[1]]: latest + 1, [f0]: fp, [f1]: fp };
    expect(applyBudgetWrite(over, write).update).toEqual({ booked: false, item: over });
    // One of its lanes past the share is enough: it is its own horizon.
    const oneOver = { ...over, [lanes[1]]: latest };
    expect(applyBudgetWrite(oneOver, write).update.booked).toBe(false);
    // Past the share, but written last by another namespace: says nothing of this one.
    const others = { ...over, [f0]: fp + 1, [f1]: fp + 1 };
    expect(applyBudgetWrite(others, write).update.booked).toBe(true);
    const within = { ...over, [lanes[0]]: latest, [lanes[1]]: latest };
    const lane = 3_250;
    expect(applyBudgetWrite(within, write).item).toEqual({
      tat: 3_250,
      [lanes[0]]: lane,
      [lanes[1]]: lane,
      [f0]: fp,
      [f1]: fp,
    });
    // Free at once: booked whatever the lanes say.
    const idleish = { ...over, tat: register.toleranceMs };
    expect(applyBudgetWrite(idleish, write).update).toEqual({
      booked: true,
      tat: register.toleranceMs + register.intervalMs,
    });
    const restart = budgetWrite(undefined, 5_000, register, lanes, 1, fp);
    expect(applyBudgetWrite({ tat: 4_000 }, restart).item).toEqual({
      tat: 5_250,
      [lanes[0]]: 5_250,
      [lanes[1]]: 5_250,
      [f0]: fp,
      [f1]: fp,
    });
  });
});
