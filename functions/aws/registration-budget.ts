import { AsyncLocalStorage } from 'node:async_hooks';
/**
 * One RegisterTargets/DeregisterTargets budget for every Lambda instance of the controller (and,
 * the same class on items of their own, one for ELBv2's Describe* calls and one for its other
 * changes: `defaultDescribeBudget`, `defaultChangeBudget`, issue 37).
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
 * Nobody waits long, and no Lambda pays to wait (issue 37): a call sleeps at most
 * `slotWaitBoundMs` (250 ms) for its slot. A slot further off is still booked, so nobody overtakes
 * it, and kept for the key (`RegistrationScope.kept`, stored with its lease); the pass ends
 * requeue-after, with its progress recorded, and the key's message comes back when the slot is
 * due, whose pass uses it without booking again. A slot further ahead than the lane's horizon is
 * not booked at all: the key comes back when the backlog is short enough (no failure counted, no
 * worker held). Deregistrations may book twice as far ahead as registrations: when the budget is
 * saturated, only removals still get in, so a node that left (or may no longer serve a Service)
 * leaves every NLB before new nodes join them.
 *
 * Fair between namespaces (issue 32, finding 9): the same write keeps each namespace's booked
 * horizon (the `tat` after its latest booking) in one of 32 lane attributes of the item. A
 * namespace whose latest slot is more than one second (`namespaceShareSlots`) ahead books no
 * further slot it would wait for: the caller waits, unbooked, until it may (or comes back then,
 * when that is further off than the bound), and then books behind
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
  namespaceTicketAttribute,
  nextTicket,
  activeNamespaces,
  type BudgetItemAttributes,
  bookedSlotTimes,
  bookFairSlot,
  blockTimes,
  budgetWrite,
  itemValues,
  laneHorizonSeconds,
  maxKeptSlots,
  namespaceLanes,
  namespaceFingerprint,
  budgetLaneOf,
  budgetLanes,
  dropTurns,
  slotRule,
  secondsUntilSlot,
  slotWaitBoundMs,
  useKeptSlot,
  type BudgetLane,
  type BudgetWrite,
  type KeptSlot,
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

/**
 * ELBv2's Describe* bucket refills at 10/s (burst 40, "Request throttling for the ELB API"); the
 * budget's burst of 20 leaves the other 20 for other tools and for blocks used early (`blockTimes`).
 * First come, first served (createRuntime): reads are a few per pass. perSecond 0 turns it off
 * (each process's own limit).
 */
export const defaultDescribeBudget: RegistrationBudgetSpec = { perSecond: 10, burst: 20 };

/**
 * The bucket of ELBv2's other actions (Create*, Modify*, Delete*, tags): 3/s, burst 20, as the
 * AWS Load Balancer Controller reads AWS's table (its PR #4641). A burst of 10 leaves half the
 * bucket, as for registrations. perSecond 0 turns it off.
 */
export const defaultChangeBudget: RegistrationBudgetSpec = { perSecond: 3, burst: 10 };

/** Books slots for the budget (the state table in AWS; virtual time in the benchmark). */
export interface BudgetStore {
  /**
   * `namespace`: whose booking it is (fair share); undefined: first come, first served. `count`
   * consecutive slots in one booking, judged as one (the first must be bookable).
   */
  book(nowMs: number, rule: SlotRule, namespace?: string, count?: number): Promise<Booking>;
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
  /** The write this instance has in flight, if any: its answer tells the item's `tat`. */
  private inFlight: Promise<unknown> | undefined;

  constructor(
    private readonly item: TatItem,
    /** The budget's clock, read again after waiting for a write in flight (none: `nowMs` stays). */
    private readonly now?: () => number,
  ) {}

  async book(nowMs: number, rule: SlotRule, namespace?: string, count = 1): Promise<Booking> {
    const lanes = namespace === undefined ? [] : namespaceLanes(namespace);
    const fingerprint = namespace === undefined ? undefined : namespaceFingerprint(namespace);
    // Knowing nothing current, the write guesses an idle item. Passes of one batch book side by
    // side: all would guess alike, and all but one be refused when the item is busy (simulated
    // node change on 50 Services: every booking's first write was refused). So they wait for the
    // answer to the write already on its way, which tells them `tat`.
    if (this.inFlight !== undefined && (this.lastTat === undefined || this.lastTat < nowMs)) {
      await this.inFlight;
      nowMs = this.now?.() ?? nowMs;
    }
    for (let attempt = 0; attempt < 4; attempt++) {
      // What the answer says of `tat` is learnt before anyone waiting for it goes on.
      const write = this.item
        .write(budgetWrite(this.lastTat, nowMs, rule, lanes, count, fingerprint))
        .then((stored) => {
          this.lastTat = stored.booked ? stored.tat : stored.item.tat;
          return stored;
        });
      const settled = write.then(
        () => undefined,
        () => undefined,
      );
      this.inFlight = settled;
      void settled.then(() => {
        if (this.inFlight === settled) this.inFlight = undefined;
      });
      const stored = await write;
      if (stored.booked) {
        const slots = bookedSlotTimes(stored.tat, count, nowMs, rule);
        return { kind: 'slot', atMs: slots[0]!, tat: stored.tat, slots };
      }
      // The other update may apply now; past the horizon, or behind the others, neither will.
      const booking = bookFairSlot(itemValues(stored.item, lanes, fingerprint, rule), nowMs, rule);
      if (booking.kind === 'behind' && namespace !== undefined) {
        return this.ticket(stored.item, namespace, nowMs + booking.inMs, count, rule, nowMs);
      }
      if (booking.kind !== 'slot') return booking;
    }
    // Contended beyond reason: come back in a moment rather than spin on the item.
    return { kind: 'later', inMs: rule.intervalMs };
  }

  /**
   * A namespace held back by its share takes a ticket on its line: its turn is after the callers
   * of the namespace that are already waiting, each one call's slots apart, so they come back one
   * after another instead of all at once when the share frees.
   */
  private async ticket(
    item: BudgetItemAttributes,
    namespace: string,
    turnAtMs: number,
    count: number,
    rule: SlotRule,
    nowMs: number,
  ): Promise<Booking> {
    const attribute = namespaceTicketAttribute(namespace);
    let known = item[attribute];
    // Each refused write returns the line's end: the next attempt queues behind it.
    for (let attempt = 0; attempt < 8; attempt++) {
      // Half the namespaces booking now: they finish while the line waits, and a ticket that
      // counts them all comes back late (simulated restore of 200: last create 27 % past the
      // floor, against 2 % at half, at 3.7 and 5 SQS requests a create).
      const namespaces = rule.ticketsAtShare ? activeNamespaces(item, nowMs) / 2 : 1;
      const ticket = nextTicket(known, turnAtMs, count, rule, namespaces);
      const stored = await this.item.write({
        kind: 'ticket',
        attribute,
        known,
        end: ticket.end,
        lanes: [],
      });
      if (stored.booked) return { kind: 'behind', inMs: ticket.turnAtMs - nowMs };
      known = stored.item[attribute];
    }
    return { kind: 'behind', inMs: turnAtMs - nowMs };
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
 * What the budget knows of the sync it books for: its key's namespace (fair share between
 * namespaces; none outside a key's sync: first come, first served) and the slots the key keeps,
 * which earlier passes booked and did not use yet (from its lease item). A slot booked now that
 * is too far off to wait for is added to `kept`; the runtime stores them with the lease.
 */
export interface RegistrationScope {
  readonly namespace: string | undefined;
  readonly kept: KeptSlot[];
  /**
   * How many calls of each lane the pass is about to make (`expectRegistrationCalls`): its first
   * booking of a lane books that many slots at once, so a pass that must come back for them
   * comes back once, not once per target group.
   */
  readonly expected: Record<BudgetLane, number>;
  /**
   * A booking in flight, per lane: calls the pass makes side by side (observe's reads) wait for
   * it and use its slots instead of each booking the pass's whole count.
   */
  readonly booking: Map<BudgetLane, Promise<unknown>>;
  /**
   * Lanes whose calls in this pass need no booking of their own: a host update's one DescribeTags
   * follows its registration booking, which paces it (4/s, within the Describe bucket's 10/s).
   */
  readonly paced: Set<BudgetLane>;
  /**
   * How many requests that may change AWS (ELBv2 and EC2 calls other than Describe*) this key's
   * passes have sent: a pass that sent none and must come back changed nothing (`noteSent`).
   */
  sent: number;
  /**
   * Slots of each lane the current pass has used (`beginPass` starts the count): a pass sent back
   * for a Describe slot repeats its reads, so it comes back with slots for all of them.
   */
  readonly used: Record<BudgetLane, number>;
  /**
   * When the current pass began (epoch ms): a kept slot still fresh then serves the whole pass,
   * however long its first reads take before the call that uses it (`useKeptSlot`).
   */
  passStartedMs?: number;
}

export const registrationScope = new AsyncLocalStorage<RegistrationScope>();

/** Runs a key's passes in a scope of their own; `run` gets it, to fill in and read the kept slots. */
export function withRegistrationScope<T>(key: string, run: (scope: RegistrationScope) => T): T {
  let namespace: string | undefined;
  try {
    namespace = parseServiceKey(key).namespace;
  } catch {
    // The sync refuses the key itself; its calls, if any, are unscoped.
  }
  const scope: RegistrationScope = {
    namespace,
    kept: [],
    expected: { register: 0, deregister: 0, describe: 0, change: 0 },
    booking: new Map(),
    paced: new Set(),
    sent: 0,
    used: { register: 0, deregister: 0, describe: 0, change: 0 },
  };
  return registrationScope.run(scope, () => run(scope));
}

/** A key's next pass begins at `nowMs`: it has used none of its slots yet. */
export function beginPass(scope: RegistrationScope, nowMs: number): void {
  for (const lane of budgetLanes) scope.used[lane] = 0;
  scope.passStartedMs = nowMs;
}

type RegistrationLane = 'register' | 'deregister';

/**
 * Says how many RegisterTargets and DeregisterTargets calls the current pass is about to make
 * (outside a key's sync: nothing to say). Calls it keeps slots for use them without booking again.
 */
export function expectRegistrationCalls(calls: Readonly<Record<RegistrationLane, number>>): void {
  expectBudgetCalls(calls);
}

/**
 * Says how many calls of each lane named the current pass is about to make: the first call of a
 * lane books that many slots at once (one write, not one per call), less those the key keeps.
 */
export function expectBudgetCalls(calls: Readonly<Partial<Record<BudgetLane, number>>>): void {
  const scope = registrationScope.getStore();
  if (scope === undefined) return;
  for (const lane of budgetLanes) {
    const count = calls[lane];
    if (count === undefined) continue;
    const kept = scope.kept.filter((slot) => slot.lane === lane && slot.turn !== true).length;
    scope.expected[lane] = Math.max(0, count - kept);
  }
}

/** Counts a request that may change AWS, sent within a key's sync (see `RegistrationScope.sent`). */
export function noteSent(operation: string): void {
  const scope = registrationScope.getStore();
  if (scope !== undefined && !/^(Describe|Get|List)/.test(operation)) scope.sent++;
}

/** How many requests that may change AWS the current key's passes have sent so far. */
export function sentSoFar(): number {
  return registrationScope.getStore()?.sent ?? 0;
}

/** The clients whose every request reaches `noteSent` (addRateLimits, countSentChanges). */
const countedClients = new WeakSet<object>();

export function markSendsCounted(client: object): void {
  countedClients.add(client);
}

/** Whether `sentSoFar` sees every request these clients send: otherwise it proves nothing. */
export function sendsCounted(...clients: readonly object[]): boolean {
  return clients.every((client) => countedClients.has(client));
}

/** The budget each ELBv2 client books its registrations on (addRateLimits attaches it). */
const budgetsByClient = new WeakMap<object, RegistrationBudget>();

export function attachRegistrationBudget(client: object, budget: RegistrationBudget): void {
  budgetsByClient.set(client, budget);
}

/** The budget of each lane an ELBv2 client's calls book on (addRateLimits attaches them). */
const laneBudgetsByClient = new WeakMap<object, Partial<Record<BudgetLane, RegistrationBudget>>>();

export function attachLaneBudgets(
  client: object,
  budgets: Partial<Record<BudgetLane, RegistrationBudget>>,
): void {
  laneBudgetsByClient.set(client, budgets);
}

/**
 * Says how many calls of each lane the current pass is about to make through `client` and starts
 * booking their slots at once, off the pass's critical path (`RegistrationBudget.prebook`).
 */
export function prebookBudgetCalls(
  client: object,
  calls: Readonly<Partial<Record<BudgetLane, number>>>,
): void {
  expectBudgetCalls(calls);
  const budgets = laneBudgetsByClient.get(client);
  for (const lane of budgetLanes) {
    if ((calls[lane] ?? 0) > 0) budgets?.[lane]?.prebook(lane);
  }
}

/**
 * Waits for the current pass's booking of `lane` on `client`'s budget (`prebookBudgetCalls`) and
 * ends the pass with the RequeueAfterError that brings it back when its first slot is further off
 * than a call may wait: before the pass spends any call it would repeat. Outside a key's sync, or
 * with no budget for the lane, nothing.
 */
export async function budgetSlotsDue(client: object, lane: BudgetLane): Promise<void> {
  await laneBudgetsByClient.get(client)?.[lane]?.due(lane);
}

/**
 * Books the slots of the RegisterTargets and DeregisterTargets calls the current pass is about to
 * make through `client`, before it makes any other call (`RegistrationBudget.reserve`); says how
 * many there will be when the client has no budget.
 */
export async function reserveRegistrationSlots(
  client: object,
  calls: Readonly<Record<RegistrationLane, number>>,
): Promise<void> {
  expectRegistrationCalls(calls);
  await budgetsByClient.get(client)?.reserve(calls);
}

/**
 * Runs a host update's reads after its registration booking (`reserveRegistrationSlots`) without
 * booking Describe slots of their own: that booking paces them already.
 */
export async function pacedByRegistrations<T>(run: () => Promise<T>): Promise<T> {
  const scope = registrationScope.getStore();
  if (scope === undefined || scope.paced.has('describe')) return run();
  scope.paced.add('describe');
  try {
    return await run();
  } finally {
    scope.paced.delete('describe');
  }
}

export interface RegistrationBudgetOptions {
  /**
   * Share the slots fairly between namespaces (the default); false: first come, first served, as
   * before issue 32 (the benchmark's comparison).
   */
  readonly perNamespace?: boolean;
  /** What the budget is called in messages: AWS's bucket it stands for. */
  readonly name?: string;
}

/**
 * Books a slot for each RegisterTargets/DeregisterTargets attempt. Sleeps at most
 * `slotWaitBoundMs` for it (issue 37); a slot further off is kept for the key and the call ends
 * with RequeueAfterError, so the key's message comes back when the slot is due and the next pass
 * uses it without booking again: nobody overtakes it, and no Lambda pays to wait.
 */
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
   * Resolves at the attempt's slot, at most `slotWaitBoundMs` from now. Throws RequeueAfterError
   * when the slot is further off (kept in the scope), when the budget is booked past the lane's
   * horizon or the namespace's turn is further off (nothing booked), and the store's own error
   * when it cannot be reached.
   */
  async take(operation: string): Promise<void> {
    const lane = budgetLaneOf(operation);
    const scope = registrationScope.getStore();
    const namespace = this.namespaceOf(scope);
    if (scope === undefined) {
      // Outside a key's sync nothing can be kept: one slot, waited for or given up.
      const [first] = await this.book(lane, 1, namespace, operation);
      if (first! - this.timer.nowMs() <= slotWaitBoundMs) return this.waitFor(first!);
      throw this.deferred(operation, first!, namespace);
    }
    // Another call of the pass (or its prebooking) is booking this lane's slots: use them.
    const inFlight = scope.booking.get(lane);
    if (inFlight !== undefined) {
      await inFlight;
      return this.take(operation);
    }
    const kept = useKeptSlot(scope.kept, lane, this.timer.nowMs(), scope.passStartedMs);
    if (kept.kind === 'use') {
      scope.used[lane]++;
      return this.waitFor(kept.atMs);
    }
    if (kept.kind === 'early') {
      const comeBackAt = lane === 'describe' ? await this.coverReads(scope) : kept.atMs;
      throw this.deferred(operation, comeBackAt, namespace);
    }
    // The pass's calls of this lane book their slots together, this call's first; a slot too
    // far off to wait for is kept for the key, which comes back for it.
    await this.bookInto(scope, lane, operation);
    return this.take(operation);
  }

  /**
   * Starts booking the slots a pass's calls of `lane` will need (`expectBudgetCalls`) while it
   * does something else (issue 37: the write off the critical path); its calls wait for the
   * booking and use its slots. Nothing when the key keeps slots of the lane or a booking is on.
   */
  prebook(lane: BudgetLane): void {
    const scope = registrationScope.getStore();
    if (scope === undefined || scope.booking.has(lane)) return;
    if (scope.kept.some((slot) => slot.lane === lane && slot.turn !== true)) return;
    if (scope.expected[lane] === 0) return;
    dropTurns(scope.kept, lane);
    // Its error, if any, reaches the pass through the first call that waits for it.
    this.bookInto(scope, lane, 'the sync').catch(() => undefined);
  }

  /** See `budgetSlotsDue`. */
  async due(lane: BudgetLane): Promise<void> {
    const scope = registrationScope.getStore();
    if (scope === undefined || scope.paced.has(lane)) return;
    await scope.booking.get(lane);
    const slots = scope.kept.filter((slot) => slot.lane === lane && slot.turn !== true);
    if (slots.length === 0) return;
    const first = Math.min(...slots.map((slot) => slot.atMs));
    if (first - this.timer.nowMs() > slotWaitBoundMs) {
      throw this.deferred('the sync', first, this.namespaceOf(scope));
    }
  }

  /** Books the lane's expected slots into the scope's kept slots (one write), as one booking. */
  private bookInto(scope: RegistrationScope, lane: BudgetLane, operation: string): Promise<void> {
    const count = Math.min(
      maxKeptSlots - scope.kept.length,
      this.spec.burst,
      Math.max(1, scope.expected[lane]),
    );
    const booking = this.book(lane, Math.max(1, count), this.namespaceOf(scope), operation).then(
      (slots) => {
        scope.expected[lane] = 0;
        // Reads and changes as one block, used from its first slot's time (`blockTimes`): the
        // pass's calls go side by side or one after another, and none is sent back for a slot a
        // few intervals on. Registrations each at their own time (see `reserve`).
        const times =
          lane === 'register' || lane === 'deregister'
            ? slots
            : blockTimes(slots, this.spec.burst, 'first');
        for (const atMs of times) scope.kept.push({ lane, atMs });
      },
    );
    const tracked = booking.finally(() => scope.booking.delete(lane));
    scope.booking.set(lane, tracked);
    return tracked;
  }

  /**
   * Books, before a pass makes any call, the slots its calls of both lanes will need (less those
   * the key keeps already), in one booking: a pass never holds half its slots while it waits for
   * the rest (they would go stale unused). The removals get the first slots, as they go first.
   * When that booking is refused and the pass also removes targets, the removals alone book on
   * their own, longer horizon: removals keep their priority on a saturated budget. When the first
   * slot is too far off to wait for, throws the RequeueAfterError that brings the key back for
   * it: the pass ends before spending any call it would repeat. Outside a key's sync, nothing.
   */
  async reserve(calls: Readonly<Record<RegistrationLane, number>>): Promise<void> {
    const scope = registrationScope.getStore();
    if (scope === undefined) return;
    const namespace = this.namespaceOf(scope);
    dropTurns(scope.kept, 'register');
    dropTurns(scope.kept, 'deregister');
    const room = () => maxKeptSlots - scope.kept.length;
    const missing = (lane: RegistrationLane) =>
      Math.max(0, calls[lane] - scope.kept.filter((slot) => slot.lane === lane).length);
    const deregister = Math.min(room(), missing('deregister'));
    const register = Math.min(room() - deregister, missing('register'));
    scope.expected.deregister = 0;
    scope.expected.register = 0;
    if (deregister + register > 0) {
      const lane: BudgetLane = register > 0 ? 'register' : 'deregister';
      let slots: readonly number[];
      try {
        slots = await this.book(lane, deregister + register, namespace, 'the sync');
      } catch (error) {
        if (lane === 'deregister' || deregister === 0) throw error;
        // The removals alone, on their own horizon; the additions book when their turn comes.
        slots = await this.book('deregister', deregister, namespace, 'DeregisterTargets');
      }
      // Each at its own time, not as a block: a pass's registrations are done once, not
      // repeated when it comes back, and used early they cost a quiet Service behind a burst of
      // 1,000 host updates its new node (66 s after the change, against 291 s as a block).
      slots.forEach((atMs, i) =>
        scope.kept.push({ lane: i < deregister ? 'deregister' : 'register', atMs }),
      );
    }
    const wanted = (['deregister', 'register'] as const).filter((lane) => calls[lane] > 0);
    const first = Math.min(
      ...scope.kept
        .filter((slot) => (wanted as readonly BudgetLane[]).includes(slot.lane))
        .map((slot) => slot.atMs),
    );
    if (first - this.timer.nowMs() > slotWaitBoundMs) {
      throw this.deferred('the sync', first, namespace);
    }
  }

  /**
   * A pass sent back for a Describe slot repeats every read it made: before it goes, it books
   * slots for those too (one write), and its kept Describe slots become one block, so the pass
   * that comes back has them all at once. Otherwise each return would use its few slots, book the
   * rest behind everyone else's and go back again, for ever (seen against moto with 50 updates).
   * Returns when the block is due.
   */
  private async coverReads(scope: RegistrationScope): Promise<number> {
    const missing = Math.min(scope.used.describe, maxKeptSlots - scope.kept.length);
    if (missing > 0) {
      const slots = await this.book('describe', missing, this.namespaceOf(scope), 'the sync');
      for (const atMs of slots) scope.kept.push({ lane: 'describe', atMs });
    }
    const reads = scope.kept.filter((slot) => slot.lane === 'describe' && slot.turn !== true);
    const times = blockTimes(
      reads.map((slot) => slot.atMs),
      this.spec.burst,
      'last',
    );
    for (let i = scope.kept.length - 1; i >= 0; i--) {
      if (reads.includes(scope.kept[i]!)) scope.kept.splice(i, 1);
    }
    for (const atMs of times) scope.kept.push({ lane: 'describe', atMs });
    return Math.min(...times);
  }

  private get name(): string {
    return this.options.name ?? 'ELBv2 registration budget';
  }

  private namespaceOf(scope: RegistrationScope | undefined): string | undefined {
    return this.options.perNamespace === false ? undefined : scope?.namespace;
  }

  /**
   * Books `count` consecutive slots of the lane (at most `slotWaitBoundMs` of waiting for the
   * namespace's turn); throws RequeueAfterError when the budget is booked past the lane's horizon
   * or the turn is further off.
   */
  private async book(
    lane: BudgetLane,
    count: number,
    namespace: string | undefined,
    operation: string,
  ): Promise<readonly number[]> {
    const rule = slotRule(this.spec, lane);
    // Turns are waited for within the bound all told, not per turn: callers of one namespace in
    // one instance can otherwise hand the turn back and forth for ever, each wait a short one.
    const startedMs = this.timer.nowMs();
    for (;;) {
      const nowMs = this.timer.nowMs();
      // This instance's callers of the namespace that already wait their turn go first.
      const queued = namespace === undefined ? undefined : this.turns.get(namespace);
      if (namespace !== undefined && queued !== undefined && queued > nowMs) {
        await this.waitTurn(namespace, queued + rule.intervalMs, operation, startedMs, lane);
        continue;
      }
      const booking = await this.store.book(nowMs, rule, namespace, count);
      if (booking.kind === 'later') {
        const seconds = Math.max(1, Math.ceil(booking.inMs / 1000));
        throw new RequeueAfterError(
          `the ${this.name} (${this.spec.perSecond}/s) is booked ${laneHorizonSeconds[lane]} s ahead${namespace === undefined ? '' : ` for namespace ${namespace}`}; ${operation} waits ${seconds} s`,
          seconds,
        );
      }
      if (booking.kind === 'behind') {
        // The namespace's turn: when its latest slot is within its share.
        await this.waitTurn(namespace ?? '', nowMs + booking.inMs, operation, startedMs, lane);
        continue;
      }
      return booking.slots ?? [booking.atMs];
    }
  }

  private async waitFor(atMs: number): Promise<void> {
    const wait = atMs - this.timer.nowMs();
    if (wait > 0) await this.timer.sleep(wait);
  }

  private deferred(operation: string, atMs: number, namespace: string | undefined) {
    const inMs = atMs - this.timer.nowMs();
    const seconds = secondsUntilSlot(atMs, this.timer.nowMs());
    return new RequeueAfterError(
      `${operation} has a slot on the ${this.name} (${this.spec.perSecond}/s${namespace === undefined ? '' : `, namespace ${namespace}`}) in ${(inMs / 1000).toFixed(2)} s, kept for this Service; the sync comes back for it in ${seconds} s`,
      seconds,
    );
  }

  /**
   * Waits until `turnMs` when that is within `slotWaitBoundMs` of when the booking began
   * (`startedMs`), holding the namespace's turn; further off, ends requeue-after (nothing is
   * booked, so nothing is kept).
   */
  private async waitTurn(
    namespace: string,
    turnMs: number,
    operation: string,
    startedMs: number,
    lane?: BudgetLane,
  ): Promise<void> {
    const nowMs = this.timer.nowMs();
    if (turnMs - startedMs > slotWaitBoundMs) {
      const seconds = Math.max(1, Math.ceil((turnMs - nowMs) / 1000));
      // The pass comes back for its turn: kept, so that nothing else holds it back on the way.
      const scope = registrationScope.getStore();
      if (scope !== undefined && lane !== undefined && scope.kept.length < maxKeptSlots)
        scope.kept.push({ lane, atMs: turnMs, turn: true });
      throw new RequeueAfterError(
        `namespace ${namespace} holds its share of the ${this.name} (${this.spec.perSecond}/s); ${operation} waits ${seconds} s`,
        seconds,
      );
    }
    this.takeTurn(namespace, turnMs);
    if (turnMs > nowMs) await this.timer.sleep(turnMs - nowMs);
  }

  private takeTurn(namespace: string, atMs: number): void {
    if (this.turns.size > 1000) {
      const nowMs = this.timer.nowMs();
      for (const [ns, turn] of this.turns) if (turn <= nowMs) this.turns.delete(ns);
    }
    this.turns.set(namespace, Math.max(atMs, this.turns.get(namespace) ?? 0));
  }
}
