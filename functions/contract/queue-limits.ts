/* What the runtime and the CDK construct agree on about the queues and the fleet's size. */

/**
 * ELBv2 throttles per account and Region, so the fleet's concurrency is what bounds its call rate:
 * a per-process limiter does not (docs/design.md §3). A worker makes its ELBv2 calls one by one,
 * each capped by the client-side limits (RegisterTargets 4/s, Modify 3/s): in practice at most
 * about this many calls per second.
 */
export const elbv2CallsPerSecondPerWorker = 4;

/** AWS's floor for an SQS event source mapping's MaximumConcurrency. */
const minimumConcurrency = 2;
const maximumConcurrency = 1000;

/**
 * The work queue's event source mapping maximum concurrency for a budget of ELBv2 calls per second
 * that this controller may use (leave the rest of the account's bucket to other tools).
 */
export function eventSourceMaxConcurrency(elbv2CallsPerSecondBudget: number): number {
  const workers = Math.floor(elbv2CallsPerSecondBudget / elbv2CallsPerSecondPerWorker);
  return Math.min(maximumConcurrency, Math.max(minimumConcurrency, workers));
}
/**
 * After this many receives a retried message is replaced by a fresh delayed one, so the queue's
 * receive limit (and its DLQ) is kept for poison messages, never for throttling or a long outage.
 */
export const resendAfterReceives = 8;

/**
 * The work queue's event source batching window: a message waits up to this long after it is
 * visible before a batch that is not full is handed over. A key that comes back for a kept
 * registration slot asks to be visible this much before the slot (registration-budget.ts).
 */
export const workQueueBatchingWindowSeconds = 1;
