import { AsyncLocalStorage } from 'node:async_hooks';
/**
 * One RegisterTargets/DeregisterTargets budget for every Lambda instance of the controller.
 *
 * ELBv2 throttles registrations per account and Region with one token bucket (about 4 calls/s,
 * burst 20: "Request throttling for the ELB API", AWS docs). A limiter inside each process does not
 * bound a fleet: five instances at 4/s each offer 20/s to a 4/s bucket, and most attempts come back
 * throttled. So every attempt first books a slot on one small item of the state table
 * (`budget#elbv2-registration`), with the "generic cell rate algorithm": the item holds the
 * theoretical arrival time `tat` (epoch ms) of the next call at the budget's rate. Booking is one
 * conditional UpdateItem that moves `tat` on by one interval; the caller then waits for its slot.
 * That is a token bucket of `burst` tokens refilled at `perSecond` (an idle budget lets `burst`
 * calls through at once), but it needs no read before the write and no clock on the server.
 *
 * Nobody waits long: a slot further ahead than the lane's horizon is not booked, and the caller
 * gets a RequeueAfterError for about the time until the backlog is short enough (the key's message
 * comes back then, no failure counted, no worker held). Deregistrations may book twice as far
 * ahead as registrations: when the budget is saturated, only removals still get in, so a node that
 * left (or may no longer serve a Service) leaves every NLB before new nodes join them.
 *
 * Fair between namespaces (issue 32, finding 9): the same write keeps each namespace's booked
 * horizon (the `tat` after its latest booking) in one of 32 lane attributes of the item. A
 * namespace whose latest slot is more than one second (`namespaceShareSlots`) ahead books no
 * further slot it would wait for: the caller waits, unbooked, until it may, and then books behind
 * what other namespaces booked meanwhile. So one namespace cannot fill the horizon ahead of a
 * quiet Service elsewhere; alone, it still gets the whole rate. The rule and its reasons are in
 * core/registration-slots.ts; the namespace is its key's (`withRegistrationScope`).
 *
 * Cost: one DynamoDB write of a small item (1 WRU) per attempt, two when another instance changed
 * the item in between; a call waiting its namespace's turn writes again when the turn comes, and
 * once more each time another instance's call of the same namespace took the turn first. When
 * the table cannot be reached the per-process limiter decides (the budget is a courtesy to AWS's
 * bucket, which still protects itself by throttling).
 */
import { RequeueAfterError } from '../core/errors';
import { parseServiceKey } from '../core/keys';
import {
  bookFairSlot,
  budgetWrite,
  itemValues,
  laneHorizonSeconds,
  namespaceLanes,
  slotRule,
  type BudgetLane,
  type BudgetWrite,
  type Booking,
  type RegistrationBudgetSpec,
  type SlotRule,
  type TatUpdate,
} from '../core/registration-slots';

/**
 * AWS's bucket refills at 4/s; a burst of 10 of its 20 tokens leaves room for the calls of other
 * tools and for arrival jitter, at a cost of 2.5 s on a long backlog.
 */
export const defaultRegistrationBudget: RegistrationBudgetSpec = { perSecond: 4, burst: 10 };

/** Books slots for the budget (the state table in AWS; virtual time in the benchmark). */
export interface BudgetStore {
  /** `namespace`: whose booking it is (fair share); undefined: first come, first served. */
  book(nowMs: number, rule: SlotRule, namespace?: string): Promise<Booking>;
}

/**
 * The budget item's conditional writes (core/registration-slots.ts, `BudgetWrite`). The benchmark
 * applies them on virtual time with `applyBudgetWrite`.
 */
export interface TatItem {
  write(write: BudgetWrite): Promise<TatUpdate>;
}

/**
 * Books slots with one conditional update per call. Which update applies depends on `tat`, which
 * is not read first: the last value this instance saw picks one, and a refused update returns the
 * item, which settles the choice (a second write at most, when another instance got there in
 * between) or says the namespace must book behind the others.
 */
export class TatBudgetStore implements BudgetStore {
  private lastTat: number | undefined;

  constructor(private readonly item: TatItem) {}

  async book(nowMs: number, rule: SlotRule, namespace?: string): Promise<Booking> {
    const lanes = namespace === undefined ? [] : namespaceLanes(namespace);
    for (let attempt = 0; attempt < 4; attempt++) {
      const stored = await this.item.write(budgetWrite(this.lastTat, nowMs, rule, lanes));
      if (stored.booked) {
        this.lastTat = stored.tat;
        const base = stored.tat - rule.intervalMs;
        return { kind: 'slot', atMs: Math.max(nowMs, base - rule.toleranceMs), tat: stored.tat };
      }
      this.lastTat = stored.item.tat;
      // The other update may apply now; past the horizon, or behind the others, neither will.
      const booking = bookFairSlot(itemValues(stored.item, lanes), nowMs, rule);
      if (booking.kind !== 'slot') return booking;
    }
    // Contended beyond reason: come back in a moment rather than spin on the item.
    return { kind: 'later', inMs: rule.intervalMs };
  }
}

/** Time as the budget needs it: epoch ms, and a way to wait (virtual in the benchmark). */
export interface BudgetTimer {
  nowMs(): number;
  sleep(ms: number): Promise<void>;
}

export const systemTimer: BudgetTimer = {
  nowMs: () => Date.now(),
  sleep: (ms) => new Promise((resolve) => setTimeout(resolve, ms)),
};

/**
 * The time (ms, the budget timer's clock) by which the current sync's registrations must have
 * their slots: a sync that would wait longer in total ends requeue-after instead of running into
 * its function's timeout. Set around each key's passes (runtime/key-passes.ts).
 */
export const registrationDeadline = new AsyncLocalStorage<number>();

/**
 * The namespace the current sync books for (its key's), so that the budget shares its slots
 * fairly between namespaces. Set with the deadline around each key's passes; none (a call outside
 * a key's sync): first come, first served.
 */
export const registrationNamespace = new AsyncLocalStorage<string>();

/** Runs a key's passes with its registration deadline and namespace. */
export function withRegistrationScope<T>(key: string, deadlineMs: number, run: () => T): T {
  let namespace: string | undefined;
  try {
    namespace = parseServiceKey(key).namespace;
  } catch {
    // The sync refuses the key itself; its calls, if any, are unscoped.
  }
  const withDeadline = () => registrationDeadline.run(deadlineMs, run);
  return namespace === undefined
    ? withDeadline()
    : registrationNamespace.run(namespace, withDeadline);
}

export interface RegistrationBudgetOptions {
  /**
   * Share the slots fairly between namespaces (the default); false: first come, first served, as
   * before issue 32 (the benchmark's comparison).
   */
  readonly perNamespace?: boolean;
}

/** Books a slot for each RegisterTargets/DeregisterTargets attempt and waits for it. */
export class RegistrationBudget {
  /**
   * Per namespace, when this instance's last caller waiting behind the other namespaces tries
   * again: its callers take turns one interval apart instead of all writing at the same moment.
   */
  private readonly turns = new Map<string, number>();

  constructor(
    private readonly store: BudgetStore,
    readonly spec: RegistrationBudgetSpec,
    private readonly timer: BudgetTimer = systemTimer,
    private readonly options: RegistrationBudgetOptions = {},
  ) {}

  /**
   * Resolves at the attempt's slot; throws RequeueAfterError when the budget is booked past the
   * lane's horizon, and the store's own error when it cannot be reached. A namespace that holds
   * its share of future slots waits, unbooked, until it may book again (behind the bookings other
   * namespaces made meanwhile), within the same horizon.
   */
  async take(operation: string): Promise<void> {
    const lane: BudgetLane = operation.startsWith('Deregister') ? 'deregister' : 'register';
    const rule = slotRule(this.spec, lane);
    const namespace =
      this.options.perNamespace === false ? undefined : registrationNamespace.getStore();
    const startedMs = this.timer.nowMs();
    // A caller of a namespace whose callers here already wait their turn queues behind them.
    const queued = namespace === undefined ? undefined : this.turns.get(namespace);
    if (namespace !== undefined && queued !== undefined && queued > startedMs) {
      await this.waitTurn(namespace, queued + rule.intervalMs, startedMs, rule, operation);
    }
    for (;;) {
      const nowMs = this.timer.nowMs();
      // Within a sync, no slot past its registration deadline: the horizon bounds one call, and
      // a sync makes several one after another. Waiting behind other namespaces counts too.
      const deadline = registrationDeadline.getStore();
      const horizonMs = Math.max(
        0,
        Math.min(
          rule.horizonMs - (nowMs - startedMs),
          deadline === undefined ? Number.POSITIVE_INFINITY : deadline - nowMs,
        ),
      );
      const booking = await this.store.book(nowMs, { ...rule, horizonMs }, namespace);
      if (booking.kind === 'later') {
        // Come back when the slot would be within the lane's own horizon, not the deadline's.
        const seconds = Math.max(1, Math.ceil((booking.inMs + horizonMs - rule.horizonMs) / 1000));
        throw new RequeueAfterError(
          `the ELBv2 registration budget (${this.spec.perSecond}/s) is booked ${laneHorizonSeconds[lane]} s ahead${namespace === undefined ? '' : ` for namespace ${namespace}`}; ${operation} waits ${seconds} s`,
          seconds,
        );
      }
      if (booking.kind === 'behind') {
        // The namespace's turn: when its latest slot is within its share, and one interval
        // after this instance's callers of it that wait already.
        const last = namespace === undefined ? undefined : this.turns.get(namespace);
        const turnMs = Math.max(
          nowMs + booking.inMs,
          last !== undefined && last > nowMs ? last + rule.intervalMs : 0,
        );
        await this.waitTurn(namespace ?? '', turnMs, startedMs, rule, operation);
        continue;
      }
      const wait = booking.atMs - this.timer.nowMs();
      if (wait > 0) await this.timer.sleep(wait);
      return;
    }
  }

  /** Waits until `turnMs`, holding the turn, or ends requeue-after when that is past the horizon. */
  private async waitTurn(
    namespace: string,
    turnMs: number,
    startedMs: number,
    rule: SlotRule,
    operation: string,
  ): Promise<void> {
    const deadline = registrationDeadline.getStore();
    if (turnMs - startedMs > rule.horizonMs || (deadline !== undefined && turnMs > deadline)) {
      const seconds = Math.max(1, Math.ceil((turnMs - startedMs - rule.horizonMs) / 1000));
      throw new RequeueAfterError(
        `namespace ${namespace} holds its share of the ELBv2 registration budget (${this.spec.perSecond}/s); ${operation} waits ${seconds} s`,
        seconds,
      );
    }
    this.takeTurn(namespace, turnMs);
    await this.timer.sleep(turnMs - this.timer.nowMs());
  }

  private takeTurn(namespace: string, atMs: number): void {
    if (this.turns.size > 1000) {
      const nowMs = this.timer.nowMs();
      for (const [ns, turn] of this.turns) if (turn <= nowMs) this.turns.delete(ns);
    }
    this.turns.set(namespace, Math.max(atMs, this.turns.get(namespace) ?? 0));
  }
}
