import type { LifecycleEvent } from '../contract/lifecycle-events';
import { parseWorkMessage, type WorkMessage } from '../contract/work-messages';
import { backoffSeconds } from '../core/backoff';
import { errorMessage } from '../core/errors';
import type { ServiceKey } from '../core/keys';
import type { RuntimeContext } from './context';
import { runKey, type KeyMode } from './key-passes';
import { dropEvents, maxEventAgeSeconds } from './lifecycle-feed';
import { moveToNodeQueue, runNodeMessages } from './node-messages';
import { comeBackLater, deadLetter, type BatchResult, type QueueRecord } from './queue-records';
import { currentResyncPasses } from './sweep';

/**
 * One work-queue batch (docs/design.md §3): malformed messages are counted and dropped, records
 * of one key collapse into one sync under the key's lease, node messages go to node sync once.
 * Failures are reported per record (partial batch response); the batch as a whole never throws.
 * Each unit's finished messages are deleted as it ends (BatchUnits), so a crash later in the batch
 * returns only unfinished ones.
 */
export async function processWorkBatch(
  records: readonly QueueRecord[],
  ctx: RuntimeContext,
): Promise<BatchResult> {
  const byKey = new Map<
    ServiceKey,
    { modes: Set<KeyMode>; records: QueueRecord[]; pass?: string }
  >();
  const nodeMessages: { record: QueueRecord; message: Extract<WorkMessage, { kind: 'node' }> }[] =
    [];
  const eventMessages: { record: QueueRecord; message: Extract<WorkMessage, { kind: 'event' }> }[] =
    [];
  const units = new BatchUnits(ctx);
  const heartbeats: QueueRecord[] = [];
  const parsedRecords = records.map((record) => ({
    record,
    parsed: parseWorkMessage(record.body),
  }));
  // Unread (the state table failing), no resync can be judged: they come back, rather than
  // being taken for forgeries and run as syncs that trust the checkpoint.
  const resyncPasses = parsedRecords.some((r) => r.parsed.ok && r.parsed.message.kind === 'resync')
    ? await currentResyncPasses(ctx).catch((error: unknown) => {
        ctx.log.warn('could not read the sweep pass ids; resync messages come back', {
          error: errorMessage(error),
        });
        return undefined;
      })
    : new Set<string>();
  for (const { record, parsed } of parsedRecords) {
    if (!parsed.ok) {
      ctx.metrics.count('MalformedMessages');
      units.add(
        [record],
        deadLetter(record, parsed.problem, ctx).then((failed) =>
          failed ? [record.messageId] : [],
        ),
      );
      continue;
    }
    const message = parsed.message;
    if (message.kind === 'node') {
      nodeMessages.push({ record, message });
      continue;
    }
    if (message.kind === 'event') {
      eventMessages.push({ record, message });
      continue;
    }
    if (message.kind === 'heartbeat') {
      // Sum of heartbeats per period: none for a while means the forwarder is gone (an alarm).
      ctx.metrics.count('ForwarderHeartbeats');
      ctx.metrics.count('ForwarderSendFailures', message.sendFailures);
      // A level, not a sum: read with Maximum, as FailingServices is.
      ctx.metrics.count('ForwarderPendingKeys', message.pending);
      // A forwarder before these fields says nothing, rather than 0: no datapoint, no alarm.
      if (message.watchFailures !== undefined)
        ctx.metrics.count('ForwarderWatchFailures', message.watchFailures);
      // A level too, 0 included: the alarm reads its Minimum (a watch failing at every heartbeat).
      if (message.failingWatches !== undefined)
        ctx.metrics.count('ForwarderFailingWatches', message.failingWatches);
      heartbeats.push(record);
      continue;
    }
    if (message.kind === 'resync' && resyncPasses === undefined) {
      const delay = backoffSeconds(
        record.receiveCount,
        ctx.config.backoffBaseSeconds,
        ctx.config.backoffMaxSeconds,
      );
      units.add(
        [record],
        comeBackLater(record, message, delay, ctx)
          .catch(() => record.messageId)
          .then((failed) => (failed === undefined ? [] : [failed])),
      );
      continue;
    }
    const group = byKey.get(message.key) ?? { modes: new Set<KeyMode>(), records: [] };
    if (
      message.kind === 'resync' &&
      (message.pass === undefined || !resyncPasses?.has(message.pass))
    ) {
      // Not sent by a sweep run we recorded (forged, or from before an upgrade): an ordinary
      // sync, which costs a checkpoint hit rather than a full round of AWS reads.
      ctx.metrics.count('UnverifiedResyncs');
      group.modes.add('service');
    } else {
      group.modes.add(message.kind);
      if (message.kind === 'resync') group.pass = message.pass;
    }
    group.records.push(record);
    byKey.set(message.key, group);
  }

  if (heartbeats.length > 0) units.add(heartbeats, Promise.resolve([]));
  for (const [key, group] of byKey) {
    units.add(
      group.records,
      processKey(key, group.modes, group.records, ctx, group.pass).then((failed) =>
        failed === undefined ? [] : [failed],
      ),
    );
  }
  if (nodeMessages.length > 0) {
    // A forwarder of release 0.1 still sends node messages here: they move to the node queue,
    // whose consumer (the node-sync function) is never behind a Service backlog.
    units.add(
      nodeMessages.map((m) => m.record),
      ctx.separateNodeQueue
        ? moveToNodeQueue(nodeMessages, ctx)
        : runNodeMessages(nodeMessages, ctx),
    );
  }
  if (eventMessages.length > 0) {
    units.add(
      eventMessages.map((m) => m.record),
      republishEvents(eventMessages, ctx),
    );
  }
  return { batchItemFailures: await units.settled() };
}

/**
 * The batch's units of work (a key's records, the node messages, …), run at once. A unit's
 * records that are done are deleted from the queue as soon as it ends, while other units still
 * run: an instance that dies later in the batch (out of memory, a timeout) then returns only the
 * messages whose work was unfinished, not its neighbours' (issue 32, finding 7). The last unit
 * to end leaves its records to the event source mapping, which deletes every record not reported
 * as failed when the handler returns; a single-unit batch makes no extra call.
 */
class BatchUnits {
  private readonly work: Promise<void>[] = [];
  private readonly failures: { itemIdentifier: string }[] = [];
  private running = 0;

  constructor(private readonly ctx: RuntimeContext) {}

  /** `done` resolves with the ids of `records` that must come back (reported as failed). */
  add(records: readonly QueueRecord[], done: Promise<readonly string[]>): void {
    this.running++;
    this.work.push(
      done.then(async (failed) => {
        this.running--;
        this.failures.push(...failed.map((itemIdentifier) => ({ itemIdentifier })));
        const finished = records.filter((record) => !failed.includes(record.messageId));
        if (this.running === 0 || finished.length === 0) return;
        this.ctx.metrics.count('EarlyAcknowledgedMessages', finished.length);
        // Best effort: the event source mapping deletes them when the batch returns anyway.
        await this.ctx.queue
          .acknowledge(finished.map((record) => record.receiptHandle))
          .catch((error: unknown) => {
            this.ctx.log.warn('could not delete finished messages early; the batch will', {
              messageIds: finished.map((record) => record.messageId),
              error: errorMessage(error),
            });
          });
      }),
    );
  }

  /** Waits for every unit; the batch's failures, for a partial batch response. */
  async settled(): Promise<{ itemIdentifier: string }[]> {
    await Promise.all(this.work);
    return this.failures;
  }
}

/**
 * Lifecycle events EventBridge rejected earlier, named by id and read back from the state table:
 * offered again; those still rejected come back after a backoff that grows with their receives
 * (never into the DLQ: past the resend limit a fresh copy replaces them). An id that names no
 * stored event (published meanwhile, expired, or forged by whoever can send to the queue) and an
 * event of another cluster are dropped and counted. Returns the message ids to report as failed.
 */
async function republishEvents(
  messages: readonly { record: QueueRecord; message: Extract<WorkMessage, { kind: 'event' }> }[],
  ctx: RuntimeContext,
): Promise<string[]> {
  const ids = messages.map((m) => m.message.id);
  if (ctx.lifecycle === undefined) {
    ctx.log.warn('dropping queued lifecycle events: publishing is switched off', {
      count: messages.length,
    });
    await ctx.store.deletePendingEvents(ids).catch(() => undefined);
    return [];
  }
  let stored: LifecycleEvent[];
  try {
    stored = await ctx.store.getPendingEvents(ids);
  } catch (error) {
    ctx.log.warn('could not read queued lifecycle events; they come back', {
      error: errorMessage(error),
    });
    return messages.map((m) => m.record.messageId);
  }
  const ours = stored.filter((event) => event.detail.cluster === ctx.config.clusterName);
  const unknown = ids.filter((id) => !ours.some((event) => event.detail.eventId === id));
  if (unknown.length > 0) {
    ctx.metrics.count('UnknownEventReferences', unknown.length);
    ctx.log.warn('queued lifecycle event ids name no stored event of this cluster; dropped', {
      eventIds: unknown.slice(0, 20),
      count: unknown.length,
    });
  }
  const { published, rejected, invalid } =
    ours.length > 0
      ? await ctx.lifecycle.publish(ours)
      : { published: 0, rejected: [], invalid: [] };
  if (published > 0) ctx.metrics.count('LifecycleEventsPublished', published);
  dropEvents(ctx, invalid, 'EventBridge refused them as invalid');
  const now = ctx.syncDeps.clock.now().getTime();
  const tooOld = rejected.filter(
    (event) => now - Date.parse(event.detail.occurredAt) > maxEventAgeSeconds * 1000,
  );
  dropEvents(ctx, tooOld, `still rejected after ${maxEventAgeSeconds / 3600} hours`);
  if (rejected.length > tooOld.length) {
    ctx.metrics.count('LifecycleEventPublishFailures', rejected.length - tooOld.length);
  }
  const retry = new Set(
    rejected.filter((event) => !tooOld.includes(event)).map((event) => event.detail.eventId),
  );
  const done = ids.filter((id) => !retry.has(id));
  // A removal that fails leaves the item to its TTL; its id is off the queue, so nothing repeats.
  if (done.length > 0) await ctx.store.deletePendingEvents(done).catch(() => undefined);
  const failed: string[] = [];
  for (const { record, message } of messages) {
    if (!retry.has(message.id)) continue;
    const delay = backoffSeconds(
      record.receiveCount,
      ctx.config.backoffBaseSeconds,
      ctx.config.backoffMaxSeconds,
    );
    const id = await comeBackLater(record, message, delay, ctx).catch(() => record.messageId);
    if (id !== undefined) failed.push(id);
  }
  return failed;
}

/** Returns the message id to report as failed (it comes back after its backoff), if any. */
async function processKey(
  key: ServiceKey,
  modes: Set<KeyMode>,
  records: readonly QueueRecord[],
  ctx: RuntimeContext,
  pass?: string,
): Promise<string | undefined> {
  const primary = records[0];
  if (primary === undefined) return undefined;
  const next = await runKey(key, modes, ctx, {
    messageId: primary.messageId,
    pass,
    receiveCount: primary.receiveCount,
  });
  if (next === undefined) return undefined;
  return await comeBackLater(primary, next.message, next.seconds, ctx).catch(
    () => primary.messageId,
  );
}
