/**
 * Each Lambda instance's own limit per ELBv2 API family, below AWS's token buckets (the values the
 * AWS Load Balancer Controller settled on, PR #4641, with Describe kept conservative). It bounds
 * one process; the event source mapping's maximum concurrency bounds the fleet, and
 * registrations, which every Service's host updates compete for, share one budget across
 * instances instead (registration-budget.ts) when there is one. What the fleet still offers AWS
 * beyond its bucket comes back throttled, and the throttled pass comes back through the queue
 * (aws-errors.ts), with what it did recorded.
 *
 * The same slot arithmetic as that budget (core/registration-slots.ts, GCRA), kept in memory: a
 * burst goes at once, then calls are spaced at the rate. A call sleeps at most
 * `slotWaitBoundMs` for its slot (issue 37); when its family is booked further ahead, the call
 * ends with RequeueAfterError and books nothing, so the key's pass ends with its progress
 * recorded and comes back through SQS when there is room, rather than a Lambda paying to wait in
 * line.
 */
import { RequeueAfterError } from '../core/errors';
import { bookSlot, slotWaitBoundMs, type SlotRule } from '../core/registration-slots';
import { systemTimer, type BudgetTimer } from './registration-budget';

/**
 * Rates per family, and bursts as large as AWS's own buckets ("Request throttling for the ELB
 * API": 20 for registrations and for changes, 40 for Describe*): one sync's calls (an update that
 * modifies a dozen attributes, say) go through in one pass instead of coming back for the rest.
 */
export const elbv2Families: readonly {
  readonly pattern: RegExp;
  readonly perSecond: number;
  readonly burst: number;
}[] = [
  { pattern: /^(Register|Deregister)Targets/, perSecond: 4, burst: 20 },
  { pattern: /^(Modify|Set|Add|Remove)/, perSecond: 3, burst: 20 },
  { pattern: /^Describe/, perSecond: 10, burst: 40 },
  { pattern: /./, perSecond: 5, burst: 20 },
];

export class ProcessRateLimiter {
  private readonly families: {
    readonly pattern: RegExp;
    readonly perSecond: number;
    readonly rule: SlotRule;
    tat: number | undefined;
  }[];

  constructor(private readonly timer: BudgetTimer = systemTimer) {
    this.families = elbv2Families.map(({ pattern, perSecond, burst }) => {
      const intervalMs = 1000 / perSecond;
      return {
        pattern,
        perSecond,
        rule: {
          intervalMs,
          toleranceMs: (burst - 1) * intervalMs,
          horizonMs: slotWaitBoundMs,
          shareMs: 0,
          ticketsAtShare: false,
        },
        tat: undefined,
      };
    });
  }

  /** Resolves at the call's slot (within the bound), or throws RequeueAfterError. */
  async take(operation: string): Promise<void> {
    const family = this.families.find((f) => f.pattern.test(operation));
    if (family === undefined) return;
    const nowMs = this.timer.nowMs();
    const booking = bookSlot(family.tat, nowMs, family.rule);
    if (booking.kind !== 'slot') {
      const aheadMs = booking.inMs + slotWaitBoundMs;
      const seconds = Math.max(1, Math.ceil(aheadMs / 1000));
      throw new RequeueAfterError(
        `this instance's limit for ${operation} (${family.perSecond.toFixed(2)}/s) is booked ${(aheadMs / 1000).toFixed(2)} s ahead; the sync comes back in ${seconds} s`,
        seconds,
      );
    }
    family.tat = booking.tat;
    if (booking.atMs > nowMs) await this.timer.sleep(booking.atMs - nowMs);
  }
}
