import { randomUUID } from 'node:crypto';
import { leasePk } from '../aws/dynamo-state-store';
import { errorMessage } from '../core/errors';
import type { Service } from '../core/objects';
import type { RuntimeContext } from './context';
import type { WorkMessage } from './messages';

export const sweepLease = leasePk('sweep');
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
  const acquired = await ctx.store.acquire(sweepLease, ctx.newOwner(), ctx.config.leaseSeconds);
  if (!acquired.acquired)
    return { resyncs: 0, redriven: 0, orphansSeen: 0, orphansDeleted: 0, failingServices: 0 };
  const now = ctx.base.clock.now().getTime();
  const items = await ctx.store.listServiceItems();
  // Read once: the pass ids and the orphan markers further down live on the same item.
  const sweepItem = await ctx.store.getItem(sweepLease);
  const pass = await startResyncPass(ctx, sweepItem);
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
    const live = await ctx.base.kube.getService(namespace, name);
    if (live?.metadata?.uid === uid) continue;
    orphansSeen++;
    const marker = `orphan#${uid}`;
    const firstSeen = typeof sweepItem?.[marker] === 'number' ? sweepItem[marker] : undefined;
    if (firstSeen === undefined) {
      await ctx.store.setAttributes(sweepLease, { [marker]: now });
      continue;
    }
    if (now - firstSeen < ctx.config.orphanGraceSeconds * 1000) continue;
    const owner: Service = { metadata: { namespace, name, uid } };
    try {
      const result = await ctx.provider.ensureLoadBalancerDeleted(owner, undefined);
      if (result.requeueAfterSeconds === undefined) {
        orphansDeleted++;
        await ctx.store.removeAttributes(sweepLease, [marker]);
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
  await ctx.store.setAttributes(sweepLease, { lastRunAt: new Date(now).toISOString() });
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

/**
 * A new resync pass id, recorded where only the functions write: the work queue honours a
 * `resync` (a full sync ignoring the checkpoint) only for this run or the one before it, whose
 * retries may still be on their way.
 */
async function startResyncPass(
  ctx: RuntimeContext,
  before: Record<string, unknown> | undefined,
): Promise<string> {
  const pass = randomUUID();
  await ctx.store.setAttributes(sweepLease, {
    resyncPass: pass,
    ...(typeof before?.resyncPass === 'string' ? { previousResyncPass: before.resyncPass } : {}),
  });
  return pass;
}

/** The resync passes a `resync` message may name (see startResyncPass). */
export async function currentResyncPasses(ctx: RuntimeContext): Promise<Set<string>> {
  const item = await ctx.store.getItem(sweepLease);
  return new Set(
    [item?.resyncPass, item?.previousResyncPass].filter(
      (pass): pass is string => typeof pass === 'string',
    ),
  );
}
