import { randomUUID } from 'node:crypto';
import { errorMessage } from '../core/errors';
import type { Service } from '../core/objects';
import type { RuntimeContext } from './context';
import type { WorkMessage } from '../contract/work-messages';

/** A Service whose syncs have failed this long is counted as failing (FailingServices). */
export const failingAlarmSeconds = 15 * 60;

export interface SweepReport {
  readonly resyncs: number;
  readonly redriven: number;
  readonly orphansSeen: number;
  readonly orphansDeleted: number;
  /** Services whose syncs have failed for more than 15 minutes. */
  readonly failingServices: number;
}

/**
 * The periodic sweep (docs/design.md §3), one at a time:
 * - every owned Service gets a `resync` (Ensure ignoring the checkpoint): drift repair, e.g. a
 *   target group deleted by hand comes back;
 * - keys with failures, a dirty flag or an expired lease but no record are re-driven;
 * - resources tagged for this cluster whose Service UID has neither state nor a live Service are
 *   deleted once they have been seen orphaned for the grace period.
 */
export async function runSweep(ctx: RuntimeContext): Promise<SweepReport> {
  const acquired = await ctx.store.acquireRunLease(
    'sweep',
    ctx.newOwner(),
    ctx.config.leaseSeconds,
  );
  if (!acquired.acquired)
    return { resyncs: 0, redriven: 0, orphansSeen: 0, orphansDeleted: 0, failingServices: 0 };
  const now = ctx.syncDeps.clock.now().getTime();
  const items = await ctx.store.listServiceItems();
  // Read once: the pass ids and the orphan markers further down live on the same item.
  const book = await ctx.store.sweepBook();
  // A new resync pass id, recorded where only the functions write: the work queue honours a
  // `resync` (a full sync ignoring the checkpoint) only for this run or the one before it, whose
  // retries may still be on their way.
  const pass = randomUUID();
  await ctx.store.startResyncPass(pass, book.resyncPass);
  const messages: WorkMessage[] = [];
  let redriven = 0;
  for (const item of items) {
    if (item.hasRecord) {
      messages.push({ v: 1, kind: 'resync', key: item.key, reason: 'sweep', pass });
    } else if (
      item.failures > 0 ||
      item.dirty ||
      (item.leaseUntil !== undefined && item.leaseUntil < now)
    ) {
      messages.push({ v: 1, kind: 'service', key: item.key, reason: 'sweep re-drive' });
      redriven++;
    }
  }
  await ctx.queue.send(messages);
  // A gauge for the alarm that pages when Services stay broken: a run of failures this long has
  // outlasted every backoff step, so it will not clear by itself.
  const failingServices = items.filter(
    (item) =>
      item.failures > 0 &&
      item.failingSince !== undefined &&
      now - item.failingSince > failingAlarmSeconds * 1000,
  ).length;
  ctx.metrics.count('FailingServices', failingServices);

  const known = new Set(items.flatMap((item) => (item.uid ? [item.uid] : [])));
  let orphansSeen = 0;
  let orphansDeleted = 0;
  for (const [uid, service] of await ctx.provider.ownersInCluster()) {
    if (known.has(uid)) continue;
    const [namespace = '', name = ''] = service.split('/');
    const live = await ctx.syncDeps.kube.getService(namespace, name);
    if (live?.metadata?.uid === uid) continue;
    orphansSeen++;
    const firstSeen = book.orphansFirstSeen.get(uid);
    if (firstSeen === undefined) {
      await ctx.store.markOrphanSeen(uid, now);
      continue;
    }
    if (now - firstSeen < ctx.config.orphanGraceSeconds * 1000) continue;
    const owner: Service = { metadata: { namespace, name, uid } };
    try {
      const result = await ctx.provider.ensureLoadBalancerDeleted(owner, undefined);
      if (result.requeueAfterSeconds === undefined) {
        orphansDeleted++;
        await ctx.store.clearOrphan(uid);
        ctx.log.info('deleted orphaned load balancer resources', { serviceKey: service, uid });
      }
    } catch (error) {
      ctx.log.warn('could not delete orphaned resources; next sweep retries', {
        serviceKey: service,
        uid,
        error: errorMessage(error),
      });
    }
  }
  await ctx.store.finish(acquired.lease, 'keep', ctx.config.leaseSeconds);
  await ctx.store.recordSweepRun(now);
  const report = {
    resyncs: messages.length - redriven,
    redriven,
    orphansSeen,
    orphansDeleted,
    failingServices,
  };
  ctx.metrics.count('SweepResyncs', report.resyncs);
  ctx.metrics.count('SweepRedriven', report.redriven);
  ctx.metrics.count('SweepOrphansDeleted', report.orphansDeleted);
  ctx.log.info('sweep', { ...report });
  return report;
}

/** The resync passes a `resync` message may name (see runSweep). */
export async function currentResyncPasses(ctx: RuntimeContext): Promise<Set<string>> {
  const book = await ctx.store.sweepBook();
  return new Set(
    [book.resyncPass, book.previousResyncPass].filter((pass): pass is string => pass !== undefined),
  );
}
