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
 * Cost: one DynamoDB write of a tiny item (1 WRU) per attempt, two when another instance changed
 * the item in between. When the table cannot be reached the per-process limiter decides (the
 * budget is a courtesy to AWS's bucket, which still protects itself by throttling).
 */
import { ConditionalCheckFailedException } from '@aws-sdk/client-dynamodb';
import { UpdateCommand, type DynamoDBDocumentClient } from '@aws-sdk/lib-dynamodb';
import { RequeueAfterError } from '../core/errors';

export const registrationBudgetPk = 'budget#elbv2-registration';

export interface RegistrationBudgetSpec {
  /** Calls per second shared by all instances. */
  readonly perSecond: number;
  /** Calls an idle budget lets through at once. */
  readonly burst: number;
}

/**
 * AWS's bucket refills at 4/s; a burst of 10 of its 20 tokens leaves room for the calls of other
 * tools and for arrival jitter, at a cost of 2.5 s on a long backlog.
 */
export const defaultRegistrationBudget: RegistrationBudgetSpec = { perSecond: 4, burst: 10 };

export type BudgetLane = 'register' | 'deregister';

/** How far ahead each lane may book, in seconds: removals get the longer horizon. */
export const laneHorizonSeconds: Readonly<Record<BudgetLane, number>> = {
  register: 10,
  deregister: 20,
};

/** The slot arithmetic's parameters for one lane, in ms. */
export interface SlotRule {
  /** Between two calls at the sustained rate. */
  readonly intervalMs: number;
  /** How far `tat` may run ahead of a call that still goes at once (the burst). */
  readonly toleranceMs: number;
  /** Slots further ahead than this are not booked. */
  readonly horizonMs: number;
}

export function slotRule(spec: RegistrationBudgetSpec, lane: BudgetLane): SlotRule {
  const intervalMs = 1000 / spec.perSecond;
  return {
    intervalMs,
    toleranceMs: (Math.max(1, spec.burst) - 1) * intervalMs,
    horizonMs: laneHorizonSeconds[lane] * 1000,
  };
}

export type Booking =
  /** Booked: call at `atMs`; the item's `tat` becomes `tat`. */
  | { readonly kind: 'slot'; readonly atMs: number; readonly tat: number }
  /** Not booked: the next slot is past the horizon; try again in `inMs`. */
  | { readonly kind: 'later'; readonly inMs: number };

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

/** Books slots for the budget (the state table in AWS; virtual time in the benchmark). */
export interface BudgetStore {
  book(nowMs: number, rule: SlotRule): Promise<Booking>;
}

/** What a conditional update of the budget item returns: the new `tat`, or the one that refused. */
export type TatUpdate =
  | { readonly booked: true; readonly tat: number }
  | { readonly booked: false; readonly tat: number | undefined };

/**
 * The budget item's two conditional updates, the only writes it gets. The benchmark implements
 * them on virtual time with the same conditions.
 */
export interface TatItem {
  /** Busy: `tat = tat + interval` if `nowMs <= tat <= latestTat`. */
  advance(nowMs: number, latestTat: number, intervalMs: number): Promise<TatUpdate>;
  /** Idle (or new): `tat = nextTat` if there is no `tat` or `tat < nowMs`. */
  restart(nowMs: number, nextTat: number): Promise<TatUpdate>;
}

/**
 * Books slots with one conditional update per call. Which update applies depends on `tat`, which
 * is not read first: the last value this instance saw picks one, and a refused update returns the
 * item's `tat`, which settles the choice (a second write at most, when another instance got there
 * in between).
 */
export class TatBudgetStore implements BudgetStore {
  private lastTat: number | undefined;

  constructor(private readonly item: TatItem) {}

  async book(nowMs: number, rule: SlotRule): Promise<Booking> {
    for (let attempt = 0; attempt < 4; attempt++) {
      const known = this.lastTat;
      const stored =
        known === undefined || known < nowMs
          ? await this.item.restart(nowMs, nowMs + rule.intervalMs)
          : await this.item.advance(nowMs, latestBookableTat(nowMs, rule), rule.intervalMs);
      this.lastTat = stored.tat;
      if (stored.booked) {
        const base = stored.tat - rule.intervalMs;
        return { kind: 'slot', atMs: Math.max(nowMs, base - rule.toleranceMs), tat: stored.tat };
      }
      // The other update may apply now; past the horizon, neither will.
      const booking = bookSlot(stored.tat, nowMs, rule);
      if (booking.kind === 'later') return booking;
    }
    // Contended beyond reason: come back in a moment rather than spin on the item.
    return { kind: 'later', inMs: rule.intervalMs };
  }
}

/** The budget item in the state table (pk `budget#elbv2-registration`, attribute `tat`). */
export class DynamoTatItem implements TatItem {
  constructor(
    private readonly doc: DynamoDBDocumentClient,
    private readonly tableName: string,
    private readonly pk: string = registrationBudgetPk,
  ) {}

  advance(nowMs: number, latestTat: number, intervalMs: number): Promise<TatUpdate> {
    return this.update({
      ConditionExpression: 'tat >= :now AND tat <= :latest',
      UpdateExpression: 'SET tat = tat + :interval',
      ExpressionAttributeValues: { ':now': nowMs, ':latest': latestTat, ':interval': intervalMs },
    });
  }

  restart(nowMs: number, nextTat: number): Promise<TatUpdate> {
    return this.update({
      ConditionExpression: 'attribute_not_exists(tat) OR tat < :now',
      UpdateExpression: 'SET tat = :next',
      ExpressionAttributeValues: { ':now': nowMs, ':next': nextTat },
    });
  }

  private async update(expression: {
    ConditionExpression: string;
    UpdateExpression: string;
    ExpressionAttributeValues: Record<string, number>;
  }): Promise<TatUpdate> {
    try {
      const result = await this.doc.send(
        new UpdateCommand({
          TableName: this.tableName,
          Key: { pk: this.pk },
          ...expression,
          ReturnValues: 'UPDATED_NEW',
          ReturnValuesOnConditionCheckFailure: 'ALL_OLD',
        }),
      );
      return { booked: true, tat: Number(result.Attributes?.tat) };
    } catch (error) {
      if (!(error instanceof ConditionalCheckFailedException)) throw error;
      // The document client does not unmarshall the item a refused condition returns.
      const tat = (error.Item as { tat?: { N?: string } } | undefined)?.tat?.N;
      return { booked: false, tat: tat === undefined ? undefined : Number(tat) };
    }
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
 * its function's timeout. Set around each key's passes (runtime/process-work.ts).
 */
export const registrationDeadline = new AsyncLocalStorage<number>();

/** Books a slot for each RegisterTargets/DeregisterTargets attempt and waits for it. */
export class RegistrationBudget {
  constructor(
    private readonly store: BudgetStore,
    readonly spec: RegistrationBudgetSpec,
    private readonly timer: BudgetTimer = systemTimer,
  ) {}

  /**
   * Resolves at the attempt's slot; throws RequeueAfterError when the budget is booked past the
   * lane's horizon, and the store's own error when it cannot be reached.
   */
  async take(operation: string): Promise<void> {
    const lane: BudgetLane = operation.startsWith('Deregister') ? 'deregister' : 'register';
    const nowMs = this.timer.nowMs();
    const rule = slotRule(this.spec, lane);
    // Within a sync, no slot past its registration deadline: the horizon bounds one call, and a
    // sync makes several one after another.
    const deadline = registrationDeadline.getStore();
    const horizonMs =
      deadline === undefined
        ? rule.horizonMs
        : Math.max(0, Math.min(rule.horizonMs, deadline - nowMs));
    const booking = await this.store.book(nowMs, { ...rule, horizonMs });
    if (booking.kind === 'later') {
      // Come back when the slot would be within the lane's own horizon, not the deadline's.
      const seconds = Math.max(1, Math.ceil((booking.inMs + horizonMs - rule.horizonMs) / 1000));
      throw new RequeueAfterError(
        `the ELBv2 registration budget (${this.spec.perSecond}/s) is booked ${laneHorizonSeconds[lane]} s ahead; ${operation} waits ${seconds} s`,
        seconds,
      );
    }
    const wait = booking.atMs - this.timer.nowMs();
    if (wait > 0) await this.timer.sleep(wait);
  }
}
