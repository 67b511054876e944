import { randomUUID } from 'node:crypto';
import { planNodeSyncPass } from '../sync/sync-nodes';
import type { RuntimeContext } from './context';
import type { AcquireResult } from './ports';
import { newCollector, publishLifecycle } from './lifecycle-feed';
import type { WorkMessage } from '../contract/work-messages';
import { runKey, secondsUntilExpiry } from './key-passes';
import type { ServiceKey } from '../core/keys';
import type { EligibleHosts } from '../core/node-sync-plan';
import { inTurnsByNamespace, pacedDelaySeconds } from '../core/registration-slots';
import { defaultRegistrationBudget } from '../aws/registration-budget';
import { workQueueBatchingWindowSeconds } from '../contract/queue-limits';

/** Passes in a row while node changes keep arriving, before the work goes back to the queue. */
const maxPasses = 5;

/**
 * How long one node-sync run may keep taking passes and running host updates itself: half the
 * function's 60 s timeout. Nothing in a pass sleeps for a rate budget past 250 ms (issue 37), so
 * this bounds the run as a whole; past it, the work goes back to the queues.
 */
export const nodeSyncRunMs = 30_000;

/**
 * One node-sync pass under its lease (one at a time): list Nodes, store the eligible host set,
 * enqueue a host update for every Service whose LB has other hosts (S16). A node message that
 * finds the lease held marks it dirty, so the holder runs once more.
 *
 * The period: EventBridge cannot fire more often than once a minute, so the 100 s of the seed is a
 * self-renewing chain of delayed `node` tick messages (SQS delays up to 900 s), one chain at a
 * time; the one-minute schedule only restarts a chain that has gone quiet (see scheduleTick).
 */
export async function runNodeSync(
  ctx: RuntimeContext,
  triggers: readonly Extract<WorkMessage, { kind: 'node' }>[],
): Promise<NodeSyncRun> {
  const acquired = await takeLease(ctx, triggers);
  if (acquired === 'coalesced') return { kind: 'done' };
  if (!acquired.acquired) {
    // The running pass sees the dirty flag this acquire left and runs again; a tick of the
    // current chain must still schedule the next one, or the chain would stop here. The node
    // changes wait for the lease to run out, in case its holder died before that pass.
    ctx.metrics.count('BusyKeys');
    await continueChain(ctx, triggers);
    return {
      kind: 'busy',
      seconds: secondsUntilExpiry(acquired.heldUntil, ctx.syncDeps.clock.now().getTime()),
    };
  }
  const lease = acquired.lease;
  const lifecycle = newCollector(ctx);
  // One deadline for the whole run, not per pass or per key: past it, host updates take the work
  // queue and further passes a fresh message.
  const deadline = ctx.syncDeps.clock.now().getTime() + nodeSyncRunMs;
  const pastDeadline = () => ctx.syncDeps.clock.now().getTime() >= deadline;
  try {
    for (let pass = 1; pass <= maxPasses; pass++) {
      const started = ctx.syncDeps.clock.now().getTime();
      const result = await planNodeSyncPass({
        ...ctx.syncDeps,
        state: ctx.store.fencedBy(lease),
        lifecycle,
      });
      const direct =
        result.servicesToUpdate.length <= ctx.config.directHostUpdates && !pastDeadline();
      if (direct) {
        // Given the new set, they need not wait for it to be stored: both at once, and both
        // settled before the pass goes on (a failed store still fails the pass).
        const settled = await Promise.allSettled([
          result.store(),
          runHostUpdatesNow(ctx, result.servicesToUpdate, result.eligible),
        ]);
        const failed = settled.find((o): o is PromiseRejectedResult => o.status === 'rejected');
        if (failed !== undefined) throw failed.reason as Error;
      } else {
        // The work queue's host updates read the set back: stored first. They reach it spread
        // at the registration budget's rate, a namespace's turns spread over the whole span.
        await result.store();
        await sendPaced(ctx, inTurnsByNamespace(result.servicesToUpdate));
      }
      ctx.metrics.milliseconds('NodeSyncDuration', ctx.syncDeps.clock.now().getTime() - started);
      ctx.metrics.count('EligibleHosts', result.eligibleHosts);
      ctx.log.info('node sync', {
        eligibleHosts: result.eligibleHosts,
        changed: result.changed,
        hostUpdates: result.servicesToUpdate.length,
        hostUpdatesRun: direct ? 'here' : 'work queue',
        pass,
        correlationId: lifecycle.correlationId,
      });
      const finish = await ctx.store.finish(lease, 'keep', ctx.config.leaseSeconds);
      if (finish.kind !== 'again') break;
      if (pass === maxPasses || pastDeadline()) {
        // Node changes kept arriving (or the run's time is spent): a fresh message carries them
        // to the next pass, which the released lease lets anyone run at once.
        const handed = await ctx.store.handBack(lease, 'keep');
        if (handed.kind === 'released') {
          ctx.metrics.count('HandedBackKeys');
          await ctx.nodeQueue.send([
            { v: 1, kind: 'node', reason: 'node changes during node sync' },
          ]);
        }
        break;
      }
    }
  } catch (error) {
    // Give the lease back so the retry (after its backoff) is not turned away as busy.
    // Whatever the dirty flag says: the message that failed comes back and covers those changes.
    await ctx.store.handBack(lease, 'keep').catch(() => undefined);
    // What was stored before the failure happened; the retry will not see it as a change again.
    await publishLifecycle(ctx, lifecycle.events).catch(() => undefined);
    throw error;
  }
  await Promise.all([
    publishLifecycle(ctx, lifecycle.events),
    ctx.store.recordNodeSyncRun(ctx.syncDeps.clock.now().getTime()),
  ]);
  await continueChain(ctx, triggers);
  return { kind: 'done' };
}

/** How a node-sync run ended: done, or its lease held by another run until `seconds` from now. */
export type NodeSyncRun = { readonly kind: 'done' } | { readonly kind: 'busy'; seconds: number };

/**
 * One hop from a node change to the NLB: when the change touches few Services, node sync runs
 * their host updates itself, each under its key's lease, instead of a second trip through the work
 * queue (and its batching window). A busy key marks its holder dirty, which then runs a full sync;
 * a host update that must come back (a retry, a requeue) goes to the work queue as a host-update
 * message with its delay, where the key's backoff continues. Large fan-outs always take the work
 * queue, spread over its workers.
 */
async function runHostUpdatesNow(
  ctx: RuntimeContext,
  keys: readonly ServiceKey[],
  eligible: EligibleHosts,
): Promise<void> {
  if (keys.length === 0) return;
  ctx.metrics.count('DirectHostUpdates', keys.length);
  const followUps = await Promise.all(
    keys.map((key) => runKey(key, new Set(['hosts']), ctx, { direct: true, eligible })),
  );
  for (const followUp of followUps) {
    if (followUp !== undefined) await ctx.queue.send([followUp.message], followUp.seconds);
  }
}

async function sendPaced(ctx: RuntimeContext, keys: readonly ServiceKey[]): Promise<void> {
  const budget = ctx.config.registrationBudget ?? defaultRegistrationBudget;
  const delays =
    budget.perSecond > 0
      ? pacedDelaySeconds(keys.length, budget, 2, workQueueBatchingWindowSeconds)
      : keys.map(() => 0);
  const messages = keys.map((key): WorkMessage => ({
    v: 1,
    kind: 'hosts',
    key,
    reason: 'hosts changed',
  }));
  // In the order they are due, ten to a request whatever their delays.
  await ctx.queue.send(messages, delays);
}

/**
 * Node messages that are not the timer's tick, arriving within `nodeSyncMinIntervalSeconds` of
 * the last pass, are folded into one delayed message that runs a pass when the interval is up:
 * whoever can send to the queue (a forwarder, or anything else) gets at most one pass, one Node
 * list, per interval, for one refused write and at most one more conditional write per batch.
 * The interval is checked in the write that takes the lease (issue 37: no read before it).
 */
async function takeLease(
  ctx: RuntimeContext,
  triggers: readonly Extract<WorkMessage, { kind: 'node' }>[],
): Promise<AcquireResult | 'coalesced'> {
  const interval = ctx.config.nodeSyncMinIntervalSeconds * 1000;
  const owner = ctx.newOwner();
  if (interval === 0) {
    return ctx.store.acquireRunLease('node-sync', owner, ctx.config.leaseSeconds);
  }
  const chains = triggers.flatMap((t) => (t.chain === undefined ? [] : [t.chain]));
  const acquired = await ctx.store.acquireNodeSyncLease(owner, ctx.config.leaseSeconds, {
    minIntervalMs: interval,
    chains,
  });
  if (!('tooSoon' in acquired)) return acquired;
  const now = ctx.syncDeps.clock.now().getTime();
  ctx.metrics.count('CoalescedNodeMessages', triggers.length);
  if (await ctx.store.claimCoalescedPass(acquired.dueAtMs)) {
    try {
      await ctx.nodeQueue.send(
        [{ v: 1, kind: 'node', reason: 'node changes within the minimum interval' }],
        Math.max(1, Math.ceil((acquired.dueAtMs - now) / 1000)),
      );
    } catch (error) {
      // Give the claim back, or the retry of these messages would find it taken and be folded
      // into a pass that nothing is on its way to run.
      await ctx.store.releaseCoalescedPass().catch(() => undefined);
      throw error;
    }
  }
  return 'coalesced';
}

/** Keeps the timer chain going when one of the triggers is the current chain's tick. */
async function continueChain(
  ctx: RuntimeContext,
  triggers: readonly Extract<WorkMessage, { kind: 'node' }>[],
): Promise<void> {
  // A run no tick started (a node event's) has no chain to keep: no need to read the timer.
  if (triggers.every((t) => t.chain === undefined)) return;
  const timer = await ctx.store.nodeSyncTimer();
  const tick = triggers.find((t) => t.chain !== undefined && t.chain === timer.chain);
  if (tick?.chain === undefined) return;
  await ctx.store.recordTick(ctx.syncDeps.clock.now().getTime());
  await ctx.nodeQueue.send(
    [{ v: 1, kind: 'node', reason: 'tick', chain: tick.chain }],
    ctx.config.nodeSyncPeriodSeconds,
  );
}

/**
 * The one-minute schedule's job: if no tick has been seen for two periods (a lost message, a first
 * start), start a new chain; older chains then stop at their next tick because they no longer match.
 */
export async function scheduleTick(ctx: RuntimeContext): Promise<'started' | 'running'> {
  const timer = await ctx.store.nodeSyncTimer();
  const now = ctx.syncDeps.clock.now().getTime();
  if (
    timer.chain !== undefined &&
    now - timer.lastTickAtMs < 2 * ctx.config.nodeSyncPeriodSeconds * 1000
  )
    return 'running';
  const chain = randomUUID();
  await ctx.store.startTimerChain(chain, now);
  await ctx.nodeQueue.send([{ v: 1, kind: 'node', reason: 'tick', chain }]);
  ctx.log.info('node-sync timer chain started', { chain });
  return 'started';
}
