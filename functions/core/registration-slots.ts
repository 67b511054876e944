/**
 * The registration budget's slot rule, pure (functions/aws/registration-budget.ts is the adapter
 * that stores it in one DynamoDB item; the benchmark keeps it on virtual time).
 *
 * Global part: the "generic cell rate algorithm". The item holds the theoretical arrival time `tat`
 * (epoch ms) of the next call at the budget's rate; a booking moves it on by one interval and the
 * caller waits for its slot. That is a token bucket of `burst` tokens refilled at `perSecond`.
 *
 * Fair part (issue 32, finding 9): first come, first served let one namespace book the whole
 * horizon ahead, so a Service in another namespace waited behind all of it. The item also keeps,
 * for each namespace, its booked horizon: the `tat` just after its latest booking. A namespace
 * whose latest slot is more than `shareMs` (1 s) ahead of now books no further slot it would have
 * to wait for until that slot comes within `shareMs`: it books behind what the other namespaces
 * booked meanwhile. A slot that is free at once (the burst) is never refused, so a namespace alone
 * still gets the whole rate; with several busy namespaces each holds at most one slot past its
 * share, the backlog stays about `shareMs` plus one interval per busy namespace, and a quiet
 * namespace's call waits that long, not the whole horizon.
 *
 * The horizons are kept per lane, not per namespace, so the item stays the same size whatever the
 * number of namespaces: each namespace hashes to one lane in each of two rows of 16 (a count-min
 * sketch), and its horizon is the lower of its two lanes. Two namespaces share both lanes with a
 * chance of 1 in 256 (more often with many busy namespaces); they are then limited as one, never
 * more than first come, first served.
 */

export interface RegistrationBudgetSpec {
  /** Calls per second shared by all instances. */
  readonly perSecond: number;
  /** Calls an idle budget lets through at once. */
  readonly burst: number;
}

/**
 * What a slot is for: a registration or a removal (the registration budget), a Describe* call,
 * or any other ELBv2 call that changes something (Create*, Modify*, Delete*, Set*, tags), each of
 * the last two on a budget of its own (issue 37: AWS's buckets are the account's, not a process's).
 */
export type BudgetLane = 'register' | 'deregister' | 'describe' | 'change';

export const budgetLanes: readonly BudgetLane[] = ['register', 'deregister', 'describe', 'change'];

/**
 * How far ahead each lane may book, in seconds: removals get a longer horizon than additions.
 * A change (a create's half-dozen calls) may book ten minutes ahead, within the 900 s an SQS
 * delay allows: in a restore of a thousand Services each create then comes back once, when its
 * slots are due, instead of every few seconds to find the budget still full. Reads too: with a
 * 30 s horizon, 200 updates' passes were refused together, came back together and were refused
 * again (26 SQS requests an update in the simulation, against 3 when each books its block).
 */
export const laneHorizonSeconds: Readonly<Record<BudgetLane, number>> = {
  register: 10,
  deregister: 20,
  describe: 600,
  change: 600,
};

/** The lane of an ELBv2 operation. */
export function budgetLaneOf(operation: string): BudgetLane {
  if (operation.startsWith('RegisterTargets')) return 'register';
  if (operation.startsWith('DeregisterTargets')) return 'deregister';
  if (operation.startsWith('Describe')) return 'describe';
  return 'change';
}

/**
 * How many slots past the burst one namespace may hold ahead of now before its next booking waits
 * behind the others' (4: one second at AWS's 4/s).
 */
export const namespaceShareSlots = 4;

/** The slot arithmetic's parameters for one lane, in ms. */
export interface SlotRule {
  /** Between two calls at the sustained rate. */
  readonly intervalMs: number;
  /** How far `tat` may run ahead of a call that still goes at once (the burst). */
  readonly toleranceMs: number;
  /** Slots further ahead than this are not booked. */
  readonly horizonMs: number;
  /** How far ahead of now one namespace's latest slot may be for it to book one it waits for. */
  readonly shareMs: number;
  /**
   * Whether a namespace's line spaces its callers at the namespace's share of the rate (the
   * change lane's creates and deletes, each back once for its block) rather than one call's
   * slots apart (registrations: node sync already paces its host updates, and spaced at the
   * share, callers held back again went to the back of a line that grew faster than it was
   * served: the last of 1,000 NLBs had a new node at 863 s, against 503 s).
   */
  readonly ticketsAtShare: boolean;
}

export function slotRule(spec: RegistrationBudgetSpec, lane: BudgetLane): SlotRule {
  const intervalMs = 1000 / spec.perSecond;
  return {
    intervalMs,
    toleranceMs: (Math.max(1, spec.burst) - 1) * intervalMs,
    horizonMs: laneHorizonSeconds[lane] * 1000,
    // A pass books its calls of a lane as one block: a namespace's share of the Describe and
    // change budgets is a burst's worth, so one pass (six reads, five creates) fits in it.
    shareMs:
      (lane === 'register' || lane === 'deregister'
        ? namespaceShareSlots
        : Math.max(namespaceShareSlots, spec.burst)) * intervalMs,
    ticketsAtShare: lane === 'change',
  };
}

export type Booking =
  /**
   * Booked: call at `atMs`; the item's `tat` becomes `tat`. A booking of several slots at once
   * also lists them all (`bookedSlotTimes`), `atMs` first.
   */
  | {
      readonly kind: 'slot';
      readonly atMs: number;
      readonly tat: number;
      readonly slots?: readonly number[];
    }
  /** Not booked: the next slot is past the horizon; try again in `inMs` (through the queue). */
  | { readonly kind: 'later'; readonly inMs: number }
  /**
   * Not booked: the namespace already holds its share of future slots; book again in `inMs`
   * (within the horizon, so the caller waits for it instead of going back to the queue).
   */
  | { readonly kind: 'behind'; readonly inMs: number };

/**
 * GCRA: a call at `nowMs` against the stored `tat` (undefined: never used). A `tat` in the past
 * means an idle budget: it restarts from now, so idle time never adds up beyond the burst.
 */
export function bookSlot(tat: number | undefined, nowMs: number, rule: SlotRule): Booking {
  const base = tat === undefined || tat < nowMs ? nowMs : tat;
  const atMs = Math.max(nowMs, base - rule.toleranceMs);
  if (atMs - nowMs > rule.horizonMs) return { kind: 'later', inMs: atMs - nowMs - rule.horizonMs };
  return { kind: 'slot', atMs, tat: base + rule.intervalMs };
}

/** The greatest stored `tat` that still gives a slot within the horizon (the busy update's guard). */
export function latestBookableTat(nowMs: number, rule: SlotRule): number {
  return nowMs + rule.toleranceMs + rule.horizonMs;
}

/** The greatest stored `tat` whose slot is free at once (no waiting, so no fairness check). */
export function latestImmediateTat(nowMs: number, rule: SlotRule): number {
  return nowMs + rule.toleranceMs;
}

/**
 * A lane holds its namespace's booked horizon: the `tat` just after the namespace's latest
 * booking. The namespace may book a slot it must wait for when that is at most this: its latest
 * slot (the horizon less one interval and the tolerance) within `shareMs` of now.
 */
export function latestLaneHorizon(nowMs: number, rule: SlotRule): number {
  return nowMs + rule.shareMs + rule.toleranceMs + rule.intervalMs;
}

/** The item's attributes a namespace's booked horizon is kept in: one per row. */
export function namespaceLanes(namespace: string): readonly [string, string] {
  const h = mix32(fnv1a(namespace));
  return [`n${h & 15}`, `n${16 + ((h >>> 16) & 15)}`];
}

/** Every lane attribute, so a reader knows the item's whole shape (32 numbers at most). */
export const laneAttributes: readonly string[] = Array.from({ length: 32 }, (_, i) => `n${i}`);

/**
 * Who last set a lane: `f<k>` beside `n<k>` holds the fingerprint of the namespace whose booking
 * wrote it. Namespaces share lanes (32 for any number of namespaces), and a lane another
 * namespace wrote last says nothing of this one's horizon: a quiet namespace both of whose lanes
 * a burst's namespaces also hash to was taken for one over its share, and queued behind them
 * (simulated: a quiet Service behind 1,000 host updates in 20 namespaces waited 151 s for its
 * node, and 64 s when foreign lanes were ignored, which let the burst's namespaces book past
 * their share and its last NLB took 727 s instead of 503 s). So a lane the namespace wrote last
 * holds it back past its share; when it wrote neither, they hold it back only past two shares:
 * a namespace over its share whose lanes others wrote since books at most one share more.
 */
export function fingerprintAttribute(lane: string): string {
  return `f${lane.slice(1)}`;
}

/** The lanes of `lanes` that the namespace of `fingerprint` wrote last (none without one). */
function ownLanes(
  item: BudgetItemAttributes,
  lanes: readonly string[],
  fingerprint: number | undefined,
): string[] {
  if (fingerprint === undefined) return [];
  return lanes.filter((lane) => item[fingerprintAttribute(lane)] === fingerprint);
}

/** A namespace's fingerprint: 1 to 65,535, from a hash independent of its lanes'. */
export function namespaceFingerprint(namespace: string): number {
  return (mix32(fnv1a(`fingerprint:${namespace}`)) % 65_535) + 1;
}

/** The stored values a booking reads: `tat`, and the namespace's lanes (none: no fairness). */
export interface BudgetItemValues {
  readonly tat: number | undefined;
  /**
   * The namespace's booked horizon as its lanes tell it: those it wrote last (`itemValues`).
   * None: no fairness, or nothing known of the namespace (not held back).
   */
  readonly lanes: readonly (number | undefined)[];
}

/**
 * The fair booking: the GCRA slot, unless the slot must be waited for and the namespace's latest
 * slot is already more than `shareMs` ahead. With no lanes (no namespace) it is `bookSlot`.
 */
export function bookFairSlot(item: BudgetItemValues, nowMs: number, rule: SlotRule): Booking {
  const booking = bookSlot(item.tat, nowMs, rule);
  if (booking.kind !== 'slot' || booking.atMs <= nowMs || item.lanes.length === 0) return booking;
  const horizon = Math.min(...item.lanes.map((lane) => lane ?? Number.NEGATIVE_INFINITY));
  const inMs = horizon - latestLaneHorizon(nowMs, rule);
  if (inMs <= 0) return booking;
  // Its latest slot comes within the share in `inMs`; past the horizon, come back through the queue.
  return inMs > rule.horizonMs
    ? { kind: 'later', inMs: inMs - rule.horizonMs }
    : { kind: 'behind', inMs };
}

/**
 * The budget item's two conditional writes, the only writes it gets, as data: DynamoTatItem turns
 * one into an UpdateItem, and `applyBudgetWrite` applies it in memory (the benchmark, the tests).
 * Both set every lane named to the new `tat`.
 */
export type BudgetWrite =
  /** Idle (or new): `tat = nextTat` if there is no `tat` or `tat < nowMs`. The slot is now. */
  | {
      readonly kind: 'restart';
      readonly nowMs: number;
      readonly nextTat: number;
      readonly lanes: readonly string[];
      /** Set on the lanes' fingerprint attributes with them (`fingerprintAttribute`). */
      readonly fingerprint?: number;
    }
  /**
   * Busy: `tat = tat + interval` if `nowMs <= tat <= latestTat`, and, unless the slot is free at
   * once (`tat <= immediateTat`), no lane this namespace wrote last (its fingerprint) is past
   * `latestLane`. The lanes become the new `tat`, and their fingerprints this namespace's.
   */
  | {
      readonly kind: 'advance';
      readonly nowMs: number;
      readonly latestTat: number;
      readonly intervalMs: number;
      readonly lanes: readonly string[];
      readonly fingerprint?: number;
      readonly immediateTat: number;
      readonly latestLane: number;
      /** The same for a namespace none of whose lanes is its own: `latestLane` plus a share. */
      readonly latestForeignLane: number;
    }
  /** A ticket: `attribute = end` if it is still `known` (undefined: absent). */
  | {
      readonly kind: 'ticket';
      readonly attribute: string;
      readonly known: number | undefined;
      readonly end: number;
      readonly lanes: readonly string[];
    };

/**
 * The times of `count` consecutive slots a write booked, ending the item at `tat`: each one
 * interval after the other, none before now (an idle budget's burst lets several go at once).
 */
export function bookedSlotTimes(
  tat: number,
  count: number,
  nowMs: number,
  rule: SlotRule,
): number[] {
  const first = tat - count * rule.intervalMs;
  return Array.from({ length: count }, (_, i) =>
    Math.max(nowMs, first + i * rule.intervalMs - rule.toleranceMs),
  );
}

/**
 * The attribute of a namespace's ticket line: when its next caller held back by the share may
 * try again. Tickets go one call's slots apart, so callers that must come back through the queue
 * come back one after another, at the rate the namespace could book, not all at once (issue 37:
 * they wait in SQS, not in a Lambda). One per first lane: namespaces that share it share a line.
 */
export function namespaceTicketAttribute(namespace: string): string {
  return `q${mix32(fnv1a(namespace)) & 15}`;
}

/**
 * A ticket after `known` (the line's end as last seen; undefined: none), not before `turnAtMs`:
 * the caller's turn, and the line's new end its `count` slots later at the namespace's share of
 * the rate, one of `namespaces` that book at once. Spaced one call's slots apart, the callers of
 * 20 namespaces sharing the change budget came back about once a round each until served (200
 * deletes: 10 SQS requests each in the simulation).
 */
export function nextTicket(
  known: number | undefined,
  turnAtMs: number,
  count: number,
  rule: SlotRule,
  namespaces = 1,
): { readonly turnAtMs: number; readonly end: number } {
  const turn = Math.max(known ?? 0, turnAtMs);
  return { turnAtMs: turn, end: turn + count * rule.intervalMs * Math.max(1, namespaces) };
}

/**
 * About how many namespaces have slots booked ahead of `nowMs`: each keeps its horizon in one
 * lane of each row of 16, so the busier row counts them (less those that share a lane).
 */
export function activeNamespaces(item: BudgetItemAttributes, nowMs: number): number {
  const row = (from: number) =>
    laneAttributes.slice(from, from + 16).filter((lane) => (item[lane] ?? 0) > nowMs).length;
  return Math.max(1, row(0), row(16));
}

/** The item's numbers by attribute: `tat` and the lanes. */
export type BudgetItemAttributes = Readonly<Record<string, number | undefined>>;

/** What a conditional write returns: the new `tat`, or the item that refused it. */
export type TatUpdate =
  | { readonly booked: true; readonly tat: number }
  | { readonly booked: false; readonly item: BudgetItemAttributes };

/** Plans the write for what this instance last saw of `tat` (undefined: nothing, or idle). */
export function budgetWrite(
  knownTat: number | undefined,
  nowMs: number,
  rule: SlotRule,
  lanes: readonly string[],
  /** Consecutive slots booked at once (a pass's calls of one lane); the first must be bookable. */
  count = 1,
  /** The namespace's (`namespaceFingerprint`), written on its lanes. */
  fingerprint?: number,
): BudgetWrite {
  const owner = fingerprint === undefined ? {} : { fingerprint };
  return knownTat === undefined || knownTat < nowMs
    ? {
        kind: 'restart',
        nowMs,
        nextTat: nowMs + rule.intervalMs * count,
        lanes,
        ...owner,
      }
    : {
        kind: 'advance',
        nowMs,
        latestTat: latestBookableTat(nowMs, rule),
        intervalMs: rule.intervalMs * count,
        lanes,
        ...owner,
        immediateTat: latestImmediateTat(nowMs, rule),
        latestLane: latestLaneHorizon(nowMs, rule),
        latestForeignLane: latestLaneHorizon(nowMs, rule) + rule.shareMs,
      };
}

/** A write applied as DynamoDB applies it: atomically, all of it or nothing. */
export function applyBudgetWrite(
  item: BudgetItemAttributes,
  write: BudgetWrite,
): { readonly update: TatUpdate; readonly item: BudgetItemAttributes } {
  if (write.kind === 'ticket') {
    if (item[write.attribute] !== write.known) return { update: { booked: false, item }, item };
    const updated = { ...item, [write.attribute]: write.end };
    return { update: { booked: true, tat: write.end }, item: updated };
  }
  const tat = item.tat;
  let next: number | undefined;
  if (write.kind === 'restart') {
    if (tat === undefined || tat < write.nowMs) next = write.nextTat;
  } else if (tat !== undefined && tat >= write.nowMs && tat <= write.latestTat) {
    const own = ownLanes(item, write.lanes, write.fingerprint);
    const past = (lane: string, latest: number) =>
      (item[lane] ?? Number.NEGATIVE_INFINITY) > latest;
    const fair =
      write.lanes.length === 0 ||
      tat <= write.immediateTat ||
      (own.length > 0
        ? !own.some((lane) => past(lane, write.latestLane))
        : !write.lanes.every((lane) => past(lane, write.latestForeignLane)));
    if (fair) next = tat + write.intervalMs;
  }
  if (next === undefined) return { update: { booked: false, item }, item };
  const updated: Record<string, number | undefined> = { ...item, tat: next };
  for (const lane of write.lanes) {
    updated[lane] = next;
    if (write.fingerprint !== undefined) updated[fingerprintAttribute(lane)] = write.fingerprint;
  }
  return { update: { booked: true, tat: next }, item: updated };
}

/** The values a booking reads, from a refused write's item. */
export function itemValues(
  item: BudgetItemAttributes,
  lanes: readonly string[],
  fingerprint: number | undefined,
  rule: SlotRule,
): BudgetItemValues {
  const own = ownLanes(item, lanes, fingerprint);
  if (own.length > 0) return { tat: item.tat, lanes: own.map((lane) => item[lane]) };
  // Others' lanes bound this namespace's horizon only loosely: a share more is allowed.
  return {
    tat: item.tat,
    lanes: lanes.map((lane) => {
      const value = item[lane];
      return value === undefined ? undefined : value - rule.shareMs;
    }),
  };
}

function fnv1a(text: string): number {
  let h = 0x811c9dc5;
  for (let i = 0; i < text.length; i++) {
    h ^= text.charCodeAt(i);
    h = Math.imul(h, 0x01000193);
  }
  return h >>> 0;
}

/** MurmurHash3's finaliser: every output bit depends on every input bit. */
function mix32(value: number): number {
  let h = value;
  h ^= h >>> 16;
  h = Math.imul(h, 0x85ebca6b);
  h ^= h >>> 13;
  h = Math.imul(h, 0xc2b2ae35);
  h ^= h >>> 16;
  return h >>> 0;
}

/**
 * The longest a call sleeps for its slot (issue 37): one interval at AWS's 4/s. A slot further
 * off is kept for the key and the pass ends; its message comes back through SQS when the slot is
 * due. A Lambda pays for every millisecond it sleeps, and a round trip through the queue (an SQS
 * visibility change, receive and delete, an invocation and the lease's writes) costs about what
 * half a second of a 512 MB function does: below that, sleeping is cheaper; above it, the queue.
 */
export const slotWaitBoundMs = 250;

/**
 * How late a kept slot may still be used: a pass that comes back through SQS arrives up to a
 * second after the whole-second delay it asked for (the event source's batching window). Used
 * late, kept slots bunch up: 2 s at 4/s is 8 calls, within the 10 tokens of AWS's bucket of 20
 * that the budget's burst leaves free. An older one is given up and a new one booked.
 */
export const keptSlotGraceMs = 2_000;

/** A slot booked for a key's registration and kept, across passes, until the key uses it. */
export interface KeptSlot {
  readonly lane: BudgetLane;
  /** When the call may go (epoch ms). */
  readonly atMs: number;
  /**
   * Not a slot but the namespace's turn to book one: a pass held back by its namespace's share
   * comes back for it, and its reads are not held back again on the way (`pacedByKeptSlots`).
   */
  readonly turn?: true;
}

/**
 * Whether a pass comes back for slots (or a turn) of a lane that paces it: its Describe* calls,
 * a few per change or registration, then go without slots of their own. Otherwise a pass that
 * waited for its change slots could wait for its reads on the way back and find the change slots
 * stale, and so on for ever (seen with 200 creates in 20 namespaces). A registration turn paces
 * nothing: no slot waits for the pass, and a namespace over its share comes back for turn after
 * turn, each time reading the NLB again (simulated tenant toggling the node labels of 100
 * Services every 5 s: 309 of 1,069 ELBv2 attempts throttled, all Describe*, against 34 of 804
 * with its reads on the Describe budget).
 */
export function pacedByKeptSlots(kept: readonly KeptSlot[]): boolean {
  return kept.some(
    (slot) =>
      slot.lane !== 'describe' &&
      !(slot.turn === true && (slot.lane === 'register' || slot.lane === 'deregister')),
  );
}

/**
 * Slot times as blocks of at most `burst` slots, each block usable from one time: its first slot's
 * (`first`, a fresh booking) or its last's (`last`, slots of several bookings merged: moving a slot
 * later never overdraws AWS's bucket). A pass's calls go side by side (observe's reads), so a slot
 * a few intervals ahead of the one due must not send the pass back through the queue: with moto
 * as the backend, 50 updates' passes each came back for "a slot in 1.08 s" and, their earlier
 * slots used up, booked further ones again, for ever. A block used early puts at most `burst`
 * calls on top of the budget's own burst: within AWS's bucket, whose burst the defaults halve.
 */
export function blockTimes(
  times: readonly number[],
  burst: number,
  from: 'first' | 'last',
): number[] {
  const size = Math.max(1, burst);
  const sorted = [...times].sort((a, b) => a - b);
  return sorted.map((_, i) => {
    const start = Math.floor(i / size) * size;
    const end = Math.min(sorted.length, start + size) - 1;
    return from === 'first' ? sorted[start]! : sorted[end]!;
  });
}

/** Takes the lane's turn markers out of `kept`: the pass is back, and books now. */
export function dropTurns(kept: KeptSlot[], lane: BudgetLane): void {
  for (let i = kept.length - 1; i >= 0; i--) {
    if (kept[i]!.lane === lane && kept[i]!.turn === true) kept.splice(i, 1);
  }
}

/** What a call does with the key's kept slots: use one, come back for one, or book its own. */
export type KeptSlotUse =
  | { readonly kind: 'use'; readonly atMs: number }
  | { readonly kind: 'early'; readonly atMs: number }
  | { readonly kind: 'none' };

/**
 * Takes the lane's earliest kept slot out of `kept` when it is due within `slotWaitBoundMs`
 * (or past, within the grace); leaves it there when it is further off. Slots past the grace are
 * dropped: the budget has moved on, and a fresh booking is fairer than a burst of stale ones.
 */
export function useKeptSlot(
  kept: KeptSlot[],
  lane: BudgetLane,
  nowMs: number,
  passStartedMs = nowMs,
): KeptSlotUse {
  dropTurns(kept, lane);
  // Stale by the pass's start, not the call's: a pass back for its slots reads for a second or
  // two before it calls (a delete's inventory), and slots lost on the way would send it back to
  // book again behind everyone, for ever (seen against moto: 50 deletes on the change budget).
  const staleBefore = Math.min(nowMs, passStartedMs) - keptSlotGraceMs;
  for (let i = kept.length - 1; i >= 0; i--) {
    if (kept[i]!.lane === lane && kept[i]!.atMs < staleBefore) kept.splice(i, 1);
  }
  let earliest = -1;
  kept.forEach((slot, i) => {
    if (slot.lane === lane && (earliest < 0 || slot.atMs < kept[earliest]!.atMs)) earliest = i;
  });
  if (earliest < 0) return { kind: 'none' };
  const slot = kept[earliest]!;
  if (slot.atMs - nowMs > slotWaitBoundMs) return { kind: 'early', atMs: slot.atMs };
  kept.splice(earliest, 1);
  return { kind: 'use', atMs: slot.atMs };
}

/**
 * The delay (whole seconds, at least 1: SQS delays are whole seconds) that brings a message back
 * no earlier than `slotWaitBoundMs` before a slot at `atMs`. Not earlier still, to allow for the
 * event source's batching window: under a burst batches fill at once, and a pass back before its
 * slot is bound costs a whole round trip more (seen against moto); late, it costs at most the
 * window, well within the kept slot's grace.
 */
export function secondsUntilSlot(atMs: number, nowMs: number): number {
  return Math.max(1, Math.ceil((atMs - nowMs - slotWaitBoundMs) / 1000));
}

/**
 * Drops the slots already due from `kept`, in place: what a pass that ran to its end (not one
 * that goes back for a slot) leaves unused was booked on a guess (observe's reads), and a due
 * slot kept would only let a later pass call without booking.
 */
export function dropDueSlots(kept: KeptSlot[], nowMs: number): void {
  for (let i = kept.length - 1; i >= 0; i--) if (kept[i]!.atMs <= nowMs) kept.splice(i, 1);
}

/**
 * The most slots one key keeps: a create's calls of every lane (about a dozen for two ports),
 * with room for a Service with more ports; the rest of a larger pass's calls book as they go.
 */
export const maxKeptSlots = 24;

/** Kept slots as stored on a lease item, read back defensively: anything malformed is dropped. */
export function parseKeptSlots(value: unknown): KeptSlot[] {
  if (!Array.isArray(value)) return [];
  const slots: KeptSlot[] = [];
  for (const entry of value as unknown[]) {
    if (typeof entry !== 'object' || entry === null) continue;
    const { lane, atMs, turn } = entry as { lane?: unknown; atMs?: unknown; turn?: unknown };
    if (budgetLanes.includes(lane as BudgetLane) && typeof atMs === 'number') {
      if (Number.isFinite(atMs))
        slots.push({ lane: lane as BudgetLane, atMs, ...(turn === true ? { turn } : {}) });
    }
  }
  return slots.slice(0, maxKeptSlots);
}

/**
 * When each of `count` host updates should reach the work queue so that their registrations find
 * free slots on arrival (issue 37): node sync knows every Service a node change touches, so it
 * spreads their messages at the budget's rate (the first ones within its burst at once) instead
 * of sending them all now to be turned back, and back again, by the budget. `callsEach`: the
 * registrations one update makes (two target groups, the common case; a guess: one that is wrong
 * only makes an update wait for its slot as it would anyway). Whole seconds, as SQS delays are,
 * rounded up (a late arrival finds its slot free), at most 900 s.
 *
 * `mergedSeconds`: the work queue's batching window. Messages that many seconds apart arrive in
 * one batch, whose passes book together; so the head start leaves that many seconds of the
 * rate in the burst. Paced at exactly the rate with the whole burst spent at once, every batch
 * but the first found half its slots too far off and sent those passes back (simulated node
 * change on 50 Services: 0.48 passes sent back per update, 0.02 with the margin).
 */
export function pacedDelaySeconds(
  count: number,
  spec: RegistrationBudgetSpec,
  callsEach = 2,
  mergedSeconds = 1,
): number[] {
  const headStart = Math.max(0, Math.max(1, spec.burst) - 1 - spec.perSecond * mergedSeconds);
  return Array.from({ length: count }, (_, k) => {
    const slot = k * callsEach - headStart;
    return Math.min(900, Math.max(0, Math.ceil(slot / spec.perSecond)));
  });
}

/**
 * Keys in turns by namespace (the first key of each namespace, then the second of each, ...), so
 * that paced messages spread each namespace's Services over the whole span, as its fair share of
 * the budget would.
 */
export function inTurnsByNamespace<K extends string>(keys: readonly K[]): K[] {
  const byNamespace = new Map<string, K[]>();
  for (const key of keys) {
    const namespace = key.slice(0, Math.max(0, key.indexOf('/')));
    byNamespace.set(namespace, [...(byNamespace.get(namespace) ?? []), key]);
  }
  const lines = [...byNamespace.values()];
  const longest = Math.max(0, ...lines.map((line) => line.length));
  const turns: K[] = [];
  for (let i = 0; i < longest; i++)
    for (const line of lines) if (i < line.length) turns.push(line[i]!);
  return turns;
}
