import {
  serviceLeasePk,
  type FailureUpdate,
  type FinishResult,
  type Lease,
} from '../aws/dynamo-state-store';
import { withRegistrationScope } from '../aws/registration-budget';
import type { WorkQueue } from '../aws/sqs-work-queue';
import { errorMessage, failureClassOf } from '../core/errors';
import type { LifecycleEvent } from '../events/lifecycle-events';
import type { ServiceKey } from '../core/keys';
import type { SyncOutcome } from '../sync/outcome';
import { syncHosts } from '../sync/sync-hosts';
import { syncService } from '../sync/sync-service';
import { backoffSeconds, type RuntimeContext } from './context';
import { parseWorkMessage, type WorkMessage } from './messages';
import { dropEvents, maxEventAgeSeconds, newCollector, publishLifecycle } from './lifecycle-feed';
import { moveToNodeQueue, runNodeMessages } from './node-messages';
import { currentResyncPasses } from './sweep';

/** A received SQS message, as the handler sees it. */
export interface QueueRecord {
  readonly messageId: string;
  readonly body: string;
  readonly receiptHandle: string;
  readonly receiveCount: number;
}

export interface BatchResult {
  readonly batchItemFailures: { readonly itemIdentifier: string }[];
}

/**
 * How many passes one key may take in a row while changes keep arriving (dirty flag) before the
 * worker hands the key back to the queue: bounded work per invocation, and no key holds a worker.
 */
export const maxPassesPerReceive = 5;
/**
 * After this many receives a retried message is replaced by a fresh delayed one, so the queue's
 * receive limit (and its DLQ) is kept for poison messages, never for throttling or a long outage.
 */
export const resendAfterReceives = 8;
/**
 * How long a key's passes may wait, in all, for slots on the shared registration budget: half the
 * functions' 60 s timeout, so waiting never runs a sync into it (the rest ends requeue-after).
 */
export const registrationWaitMs = 30_000;

export type KeyMode = 'service' | 'hosts' | 'resync';

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
 * A message that is not ours goes to the dead-letter queue at once (a retry cannot fix it), or is
 * dropped when there is none; either way it is logged and counted, and the batch goes on. Returns
 * true when it must come back because SQS would not take it (nothing is lost).
 */
export async function deadLetter(record: QueueRecord, problem: string, ctx: RuntimeContext) {
  const fields = { messageId: record.messageId, problem };
  try {
    const kept = await ctx.queue.deadLetter(record.body, problem);
    ctx.log.warn(
      kept ? 'malformed message moved to the DLQ' : 'dropping malformed message',
      fields,
    );
    return false;
  } catch (error) {
    ctx.log.error('could not move a malformed message to the DLQ; it comes back', {
      ...fields,
      error: errorMessage(error),
    });
    return true;
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
  const now = ctx.base.clock.now().getTime();
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
  const next = await runKey(key, modes, ctx, { messageId: primary.messageId, pass });
  if (next === undefined) return undefined;
  return await comeBackLater(primary, next.message, next.seconds, ctx).catch(
    () => primary.messageId,
  );
}

/** Where a key's passes come from: a queue message (its id, a sweep's pass), or node sync. */
export interface KeyOrigin {
  readonly messageId?: string | undefined;
  readonly pass?: string | undefined;
  /** Run by node sync itself (a direct host update), within its run's time. */
  readonly direct?: boolean;
}

/** What must happen to a key after its passes: nothing, or its message back after `seconds`. */
export type KeyFollowUp = { readonly message: WorkMessage; readonly seconds: number } | undefined;

/**
 * The passes of one key under its lease (S5, S6): a host update or a full sync, once more while
 * changes arrive (dirty flag), at most `maxPassesPerReceive` times. Returns the message that must
 * come back and when, if any; throws nothing but what bringing it back would.
 */
export function runKey(
  key: ServiceKey,
  modes: ReadonlySet<KeyMode>,
  ctx: RuntimeContext,
  origin: KeyOrigin = {},
  /**
   * When registration waits must end (epoch ms); by default `registrationWaitMs` from now. Node
   * sync passes the one deadline of its whole run, so its host updates never add up past it.
   */
  deadline = ctx.base.clock.now().getTime() + registrationWaitMs,
): Promise<KeyFollowUp> {
  return withRegistrationScope(key, deadline, () => runPasses(key, modes, ctx, origin));
}

/**
 * Seconds until a lease held until `heldUntil` has run out, and a second more: a message that
 * found the key busy comes back then, so a holder that died never takes the change with it.
 */
export function secondsUntilExpiry(heldUntil: number, now: number): number {
  return Math.min(maxDelaySeconds, Math.max(1, Math.ceil((heldUntil - now) / 1000) + 1));
}

/** SQS delays and visibility changes this runtime makes stay within SendMessage's 900 s. */
const maxDelaySeconds = 900;

async function runPasses(
  key: ServiceKey,
  modes: ReadonlySet<KeyMode>,
  ctx: RuntimeContext,
  origin: KeyOrigin,
): Promise<KeyFollowUp> {
  const pass = origin.pass;
  const lifecycle = newCollector(ctx);
  const fields = {
    serviceKey: key,
    ...(origin.messageId !== undefined ? { messageId: origin.messageId } : {}),
    correlationId: lifecycle.correlationId,
  };
  let mode: KeyMode = modes.has('resync') ? 'resync' : modes.has('service') ? 'service' : 'hosts';
  let held: Lease | undefined;
  try {
    const acquired = await ctx.store.acquire(
      serviceLeasePk(key),
      ctx.newOwner(),
      ctx.config.leaseSeconds,
    );
    if (!acquired.acquired) {
      // S5: a live holder sees the dirty flag and runs once more. The message is not done until
      // that pass has run, and a holder may die first: it comes back when the lease runs out,
      // and then finds the key free (a pass, usually a checkpoint hit) or held again (it waits).
      const seconds = secondsUntilExpiry(acquired.heldUntil, ctx.base.clock.now().getTime());
      ctx.log.info('key is busy; the holder will run again', { ...fields, comesBackIn: seconds });
      ctx.metrics.count('BusyKeys');
      return { message: again(mode, key, pass), seconds };
    }
    const lease = acquired.lease;
    held = lease;
    if (mode === 'hosts' && lease.pendingChange) {
      // A change the dead holder was asked to run and never did: a host update skips the spec.
      ctx.metrics.count('EscalatedHostUpdates');
      if (origin.direct === true) {
        // Node sync's run has no time for a full sync: the work queue runs it, at once.
        await ctx.store.handBack(lease, 'keep', true);
        return { message: { v: 1, kind: 'service', key }, seconds: 0 };
      }
      mode = 'service';
    }
    let outcome: SyncOutcome = { kind: 'done' };
    let finish: FinishResult & { failures?: number } = { kind: 'released' };
    let failureUpdate: FailureUpdate = 'keep';
    // Whether the record's checkpoint may not describe AWS (see DynamoStateStore's comment).
    let unverified = lease.unverified;
    // When a failed pass's retry is due: the count it ends with is one more than at the acquire.
    const retryDelay = backoffSeconds(
      lease.failures + 1,
      ctx.config.backoffBaseSeconds,
      ctx.config.backoffMaxSeconds,
    );
    const retryAt = () => ctx.base.clock.now().getTime() + retryDelay * 1000;
    for (let pass = 1; pass <= maxPassesPerReceive; pass++) {
      const deps = { ...ctx.base, state: ctx.store.fencedBy(lease), lifecycle };
      const started = ctx.base.clock.now().getTime();
      const checksAws = mode === 'resync' || (mode === 'service' && unverified);
      // After a failure or a takeover the record's targets may not be AWS's (a registration that
      // landed before the failure, or one that never did): a host update reads them from AWS.
      if (mode === 'hosts' && unverified) ctx.metrics.count('HostUpdatesFromAws');
      outcome =
        mode === 'hosts'
          ? await syncHosts(key, deps, { readTargets: unverified })
          : await syncService(key, deps, { ignoreCheckpoint: checksAws });
      // A full sync that completed (or reported a spec it cannot serve, which clears the
      // checkpoint) vouches for the record; a pass that failed may have left AWS half-changed.
      if (mode !== 'hosts' && (outcome.kind === 'done' || outcome.kind === 'terminal'))
        unverified = false;
      if (outcome.kind === 'retry' || outcome.kind === 'busy') unverified = true;
      ctx.metrics.milliseconds('SyncLatency', ctx.base.clock.now().getTime() - started);
      ctx.metrics.count('Syncs', 1, { outcome: outcome.kind, kind: mode });
      logOutcome(ctx, outcome, { ...fields, mode, pass });
      // A terminal outcome ends the retries too: a count left behind would have the sweep
      // re-drive the key (and repeat its Warning) for ever.
      failureUpdate =
        outcome.kind === 'done' || outcome.kind === 'terminal'
          ? 'reset'
          : outcome.kind === 'retry'
            ? 'increment'
            : 'keep';
      finish = await ctx.store.finish(
        lease,
        failureUpdate,
        ctx.config.leaseSeconds,
        unverified,
        retryAt(),
      );
      if (finish.kind !== 'again') break;
      // Something changed during the pass: one more full sync covers whatever it was.
      mode = 'service';
    }
    let handedBack = false;
    if (finish.kind === 'again') {
      // Changes kept coming for every pass allowed. The messages that brought them were
      // acknowledged as busy, so this one must come back: give the lease up and requeue the key,
      // at once unless the last pass asked for a backoff or a fixed delay (S5, S6).
      finish = await ctx.store.handBack(lease, failureUpdate, unverified, retryAt());
      handedBack = finish.kind === 'released';
      if (handedBack) {
        ctx.metrics.count('HandedBackKeys');
        ctx.log.info('changes kept arriving; the key goes back to the queue', fields);
      }
    }
    if (finish.kind === 'lost') {
      ctx.log.warn('lease expired during the sync; the newer holder owns the key', fields);
      await publishLifecycle(ctx, lifecycle.events);
      // The newer holder may be a host update, which runs no spec: what this pass left undone
      // comes back (and waits, busy, while that holder lasts).
      if (outcome.kind === 'done' || outcome.kind === 'terminal') return undefined;
      return {
        message: again(mode, key, pass),
        seconds: outcome.kind === 'requeue-after' ? outcome.seconds : retryDelay,
      };
    }
    if (outcome.kind === 'retry') {
      const delay = backoffSeconds(
        finish.failures ?? lease.failures + 1,
        ctx.config.backoffBaseSeconds,
        ctx.config.backoffMaxSeconds,
      );
      ctx.metrics.count('Retries');
      // By what fixes it, so quota, capacity, permission and dependency failures can page someone.
      ctx.metrics.count('RetryableFailures', 1, { class: failureClassOf(outcome.error) });
      lifecycle.syncFailed(key, outcome.error, { terminal: false, inSeconds: delay });
      await publishLifecycle(ctx, lifecycle.events);
      return { message: again(mode, key, pass), seconds: delay };
    }
    // Said once per spec: a repeat (a sweep, the same message again) publishes nothing.
    if (outcome.kind === 'terminal' && outcome.repeated !== true) {
      lifecycle.syncFailed(key, outcome.error, { terminal: true });
    }
    await publishLifecycle(ctx, lifecycle.events);
    if (outcome.kind === 'requeue-after') {
      return { message: again(mode, key, pass), seconds: outcome.seconds };
    }
    if (handedBack) return { message: again(mode, key, pass), seconds: 0 };
    // Another holder's write came between this pass's read and its write (a release 0.1 holder,
    // say, whose lease this one cannot wait on): the pass it was refused comes back.
    if (outcome.kind === 'busy') {
      return { message: again(mode, key, pass), seconds: ctx.config.leaseSeconds };
    }
    return undefined;
  } catch (error) {
    // Only invariant errors (bugs) and state-table outages get here: alarm, and retry slowly.
    ctx.log.error('sync failed unexpectedly', { ...fields, error: errorMessage(error) });
    ctx.metrics.count('UnexpectedFailures');
    // Best effort: a held lease would turn the key's next messages away as busy until it
    // expires, with this message (which covers them) still far off.
    if (held !== undefined) await ctx.store.handBack(held, 'keep', true).catch(() => undefined);
    lifecycle.syncFailed(key, error, { terminal: false, inSeconds: ctx.config.backoffMaxSeconds });
    await publishLifecycle(ctx, lifecycle.events).catch(() => undefined);
    return { message: again(mode, key, pass), seconds: ctx.config.backoffMaxSeconds };
  }
}

/** The message that brings a key back in the same mode; a resync keeps the sweep run it came from. */
function again(mode: KeyMode, key: ServiceKey, pass: string | undefined): WorkMessage {
  return mode === 'resync'
    ? { v: 1, kind: mode, key, ...(pass ? { pass } : {}) }
    : { v: 1, kind: mode, key };
}

/** Makes the key's message come back after `seconds`: a visibility change, or a fresh delayed copy. */
export async function comeBackLater(
  record: QueueRecord,
  message: WorkMessage,
  seconds: number,
  ctx: RuntimeContext,
  /** The queue the record came from. */
  queue: WorkQueue = ctx.queue,
): Promise<string | undefined> {
  // The record is one of the batch's messages for the key, but the pass that must run again may
  // be of another kind (a service sync run for a host-update record, say): returning the record
  // as it is would bring back a sync that does less than the one that failed.
  const received = parseWorkMessage(record.body);
  const sameKind = received.ok && received.message.kind === message.kind;
  if (!sameKind || record.receiveCount >= resendAfterReceives) {
    await queue.send([message], seconds);
    return undefined;
  }
  await queue.changeVisibility(record.receiptHandle, seconds);
  return record.messageId;
}

function logOutcome(
  ctx: RuntimeContext,
  outcome: SyncOutcome,
  fields: Record<string, unknown>,
): void {
  switch (outcome.kind) {
    case 'done':
      ctx.log.info('synced', fields);
      return;
    case 'requeue-after':
      ctx.log.info('sync requeued', {
        ...fields,
        seconds: outcome.seconds,
        reason: outcome.reason,
      });
      return;
    case 'terminal':
      if (outcome.repeated === true) {
        ctx.log.info('still waiting for the Service to change; already warned', fields);
        return;
      }
      ctx.log.warn('sync cannot proceed until the Service changes', {
        ...fields,
        error: errorMessage(outcome.error),
      });
      return;
    case 'busy':
      ctx.log.info('sync lost its lease', { ...fields, error: errorMessage(outcome.error) });
      return;
    case 'retry':
      ctx.log.warn('sync failed; will retry', {
        ...fields,
        error: errorMessage(outcome.error),
        failureClass: failureClassOf(outcome.error),
      });
      return;
  }
}
