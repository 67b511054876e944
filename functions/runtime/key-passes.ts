import {
  beginPass,
  withRegistrationScope,
  type RegistrationScope,
} from '../aws/registration-budget';
import type { WorkMessage } from '../contract/work-messages';
import { errorMessage, failureClassOf } from '../core/errors';
import { parseServiceKey, type ServiceKey } from '../core/keys';
import type { Service } from '../core/objects';
import type { KubernetesApi } from '../sync/ports';
import type { EligibleHosts } from '../core/node-sync-plan';
import { backoffSeconds } from '../core/backoff';
import { dropDueSlots, pacedByKeptSlots } from '../core/registration-slots';
import type { SyncOutcome } from '../sync/outcome';
import { syncHosts } from '../sync/sync-hosts';
import { syncService } from '../sync/sync-service';
import { syncTargets } from '../sync/sync-targets';
import type { RuntimeContext } from './context';
import { newCollector, publishLifecycle } from './lifecycle-feed';
import type { FailureUpdate, FinishResult, Lease } from './ports';

/**
 * How many passes one key may take in a row while changes keep arriving (dirty flag) before the
 * worker hands the key back to the queue: bounded work per invocation, and no key holds a worker.
 */
export const maxPassesPerReceive = 5;
export type KeyMode = 'service' | 'hosts' | 'targets' | 'resync';

/** Where a key's passes come from: a queue message (its id, a sweep's pass), or node sync. */
export interface KeyOrigin {
  readonly messageId?: string | undefined;
  readonly pass?: string | undefined;
  /** Run by node sync itself (a direct host update), within its run's time. */
  readonly direct?: boolean;
  /** The eligible hosts node sync has just worked out, for its direct host updates. */
  readonly eligible?: EligibleHosts | undefined;
  /** How many times the message has been received (SQS's ApproximateReceiveCount). */
  readonly receiveCount?: number | undefined;
}

/** The longest a growing requeue-after delay gets (AWS throttling). */
export const maxGrowingRequeueSeconds = 16;

/**
 * A requeue-after delay: as asked, or, for one that grows (AWS throttling), doubled for each
 * earlier receive of the message, up to 16 s, with jitter so a crowd of keys throttled together
 * does not come back together.
 */
export function requeueSeconds(
  outcome: { readonly seconds: number; readonly grows?: boolean },
  receiveCount = 1,
  random: (() => number) | undefined = Math.random,
): number {
  if (outcome.grows !== true) return outcome.seconds;
  const doubled = outcome.seconds * 2 ** Math.min(4, Math.max(0, receiveCount - 1));
  const capped = Math.min(maxGrowingRequeueSeconds, doubled);
  return Math.max(1, Math.round(capped * (0.5 + (random ?? Math.random)() / 2)));
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
): Promise<KeyFollowUp> {
  return withRegistrationScope(key, (scope) => runPasses(key, modes, ctx, origin, scope));
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
  /** The registration budget's view of this key: the slots it keeps go in and out with its lease. */
  budget: RegistrationScope,
): Promise<KeyFollowUp> {
  const sweepPass = origin.pass;
  const lifecycle = newCollector(ctx);
  const fields = {
    serviceKey: key,
    ...(origin.messageId !== undefined ? { messageId: origin.messageId } : {}),
    correlationId: lifecycle.correlationId,
  };
  let mode = firstMode(modes);
  let held: Lease | undefined;
  // The live Service is read while the lease is being taken, for the first pass (issue 37: one
  // round trip less). Safe: a change after this read comes with a message of its own, which
  // either takes the lease after this holder or marks it dirty for one more pass.
  const firstPassKube = readingAhead(ctx.syncDeps.kube, key);
  try {
    const acquired = await ctx.store.acquireServiceLease(
      key,
      ctx.newOwner(),
      ctx.config.leaseSeconds,
    );
    if (!acquired.acquired) {
      // S5: a live holder sees the dirty flag and runs once more. The message is not done until
      // that pass has run, and a holder may die first: it comes back when the lease runs out,
      // and then finds the key free (a pass, usually a checkpoint hit) or held again (it waits).
      const seconds = secondsUntilExpiry(acquired.heldUntil, ctx.syncDeps.clock.now().getTime());
      ctx.log.info('key is busy; the holder will run again', { ...fields, comesBackIn: seconds });
      ctx.metrics.count('BusyKeys');
      return { message: again(mode, key, sweepPass), seconds };
    }
    const lease = acquired.lease;
    held = lease;
    budget.kept.push(...lease.keptSlots);
    // Back for change or registration slots (or a turn for them): its reads ride on those.
    if (pacedByKeptSlots(budget.kept)) budget.paced.add('describe');
    if ((mode === 'hosts' || mode === 'targets') && lease.pendingChange) {
      // A change the dead holder was asked to run and never did: a host update (or a targets
      // sync) skips the spec.
      ctx.metrics.count('EscalatedHostUpdates');
      if (origin.direct === true) {
        // Node sync's run has no time for a full sync: the work queue runs it, at once.
        await ctx.store.handBack(lease, 'keep', true, undefined, budget.kept);
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
    const retryAt = () => ctx.syncDeps.clock.now().getTime() + retryDelay * 1000;
    for (let passNumber = 1; passNumber <= maxPassesPerReceive; passNumber++) {
      beginPass(budget, ctx.syncDeps.clock.now().getTime());
      const deps = {
        ...ctx.syncDeps,
        kube: passNumber === 1 ? firstPassKube : ctx.syncDeps.kube,
        state: ctx.store.fencedBy(lease),
        lifecycle,
      };
      const started = ctx.syncDeps.clock.now().getTime();
      const checksAws = mode === 'resync' || (mode === 'service' && unverified);
      // After a failure or a takeover the record's targets may not be AWS's (a registration that
      // landed before the failure, or one that never did): a host update reads them from AWS.
      if (mode === 'hosts' && unverified) ctx.metrics.count('HostUpdatesFromAws');
      if (mode === 'targets' && unverified) ctx.metrics.count('TargetsSyncsFromAws');
      outcome =
        mode === 'hosts'
          ? await syncHosts(key, deps, { readTargets: unverified, eligible: origin.eligible })
          : mode === 'targets'
            ? await syncTargets(key, deps, { readTargets: unverified })
            : await syncService(key, deps, {
                ignoreCheckpoint: checksAws,
                finishing: mode !== 'resync' && unverified,
              });
      // A full sync that completed (or reported a spec it cannot serve, which clears the
      // checkpoint) vouches for the record; a pass that failed may have left AWS half-changed.
      if (
        mode !== 'hosts' &&
        mode !== 'targets' &&
        (outcome.kind === 'done' || outcome.kind === 'terminal')
      )
        unverified = false;
      if (outcome.kind === 'retry' || outcome.kind === 'busy') unverified = true;
      ctx.metrics.milliseconds('SyncLatency', ctx.syncDeps.clock.now().getTime() - started);
      ctx.metrics.count('Syncs', 1, { outcome: outcome.kind, kind: mode });
      logOutcome(ctx, outcome, { ...fields, mode, pass: passNumber });
      // A terminal outcome ends the retries too: a count left behind would have the sweep
      // re-drive the key (and repeat its Warning) for ever.
      failureUpdate =
        outcome.kind === 'done' || outcome.kind === 'terminal'
          ? 'reset'
          : outcome.kind === 'retry'
            ? 'increment'
            : 'keep';
      if (outcome.kind !== 'requeue-after')
        dropDueSlots(budget.kept, ctx.syncDeps.clock.now().getTime());
      finish = await ctx.store.finish(
        lease,
        failureUpdate,
        ctx.config.leaseSeconds,
        unverified,
        retryAt(),
        budget.kept,
      );
      if (finish.kind !== 'again') break;
      // Something changed during the pass: one more full sync covers whatever it was.
      mode = 'service';
      // Unless this pass waits for its turn (a slot, a rate): the full sync comes back then,
      // rather than run now into the same wait (issue 37).
      if (outcome.kind === 'requeue-after') break;
    }
    let handedBack = false;
    if (finish.kind === 'again') {
      // Changes kept coming for every pass allowed. The messages that brought them were
      // acknowledged as busy, so this one must come back: give the lease up and requeue the key,
      // at once unless the last pass asked for a backoff or a fixed delay (S5, S6).
      finish = await ctx.store.handBack(lease, failureUpdate, unverified, retryAt(), budget.kept);
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
        message: again(mode, key, sweepPass),
        seconds:
          outcome.kind === 'requeue-after'
            ? requeueSeconds(outcome, origin.receiveCount, ctx.random)
            : retryDelay,
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
      return { message: again(mode, key, sweepPass), seconds: delay };
    }
    // Said once per spec: a repeat (a sweep, the same message again) publishes nothing.
    if (outcome.kind === 'terminal' && outcome.repeated !== true) {
      lifecycle.syncFailed(key, outcome.error, { terminal: true });
    }
    await publishLifecycle(ctx, lifecycle.events);
    if (outcome.kind === 'requeue-after') {
      return {
        message: again(mode, key, sweepPass),
        seconds: requeueSeconds(outcome, origin.receiveCount, ctx.random),
      };
    }
    if (handedBack) return { message: again(mode, key, sweepPass), seconds: 0 };
    // Another holder's write came between this pass's read and its write (a release 0.1 holder,
    // say, whose lease this one cannot wait on): the pass it was refused comes back.
    if (outcome.kind === 'busy') {
      return { message: again(mode, key, sweepPass), seconds: ctx.config.leaseSeconds };
    }
    return undefined;
  } catch (error) {
    // Only invariant errors (bugs) and state-table outages get here: alarm, and retry slowly.
    ctx.log.error('sync failed unexpectedly', { ...fields, error: errorMessage(error) });
    ctx.metrics.count('UnexpectedFailures');
    // Best effort: a held lease would turn the key's next messages away as busy until it
    // expires, with this message (which covers them) still far off.
    if (held !== undefined) {
      await ctx.store.handBack(held, 'keep', true, undefined, budget.kept).catch(() => undefined);
    }
    lifecycle.syncFailed(key, error, { terminal: false, inSeconds: ctx.config.backoffMaxSeconds });
    await publishLifecycle(ctx, lifecycle.events).catch(() => undefined);
    return { message: again(mode, key, sweepPass), seconds: ctx.config.backoffMaxSeconds };
  }
}

/**
 * The Kubernetes API with the key's Service already asked for: the first `getService` of it gets
 * that answer (or its error), every other call goes through. A key that is not one reads nothing.
 */
function readingAhead(kube: KubernetesApi, key: ServiceKey): KubernetesApi {
  let parsed: { namespace: string; name: string };
  try {
    parsed = parseServiceKey(key);
  } catch {
    return kube;
  }
  let ahead: Promise<Service | undefined> | undefined = kube.getService(
    parsed.namespace,
    parsed.name,
  );
  // Not awaited when the key is busy: its failure then goes nowhere.
  ahead.catch(() => undefined);
  return {
    ...bindAll(kube),
    getService: (namespace, name) => {
      const answer = ahead;
      ahead = undefined;
      return answer !== undefined && namespace === parsed.namespace && name === parsed.name
        ? answer
        : kube.getService(namespace, name);
    },
  };
}

/** The port's methods bound to their object, so they survive being spread into another. */
function bindAll(kube: KubernetesApi): KubernetesApi {
  return {
    getService: (namespace, name) => kube.getService(namespace, name),
    addFinalizer: (service, finalizer) => kube.addFinalizer(service, finalizer),
    removeFinalizer: (service, finalizer) => kube.removeFinalizer(service, finalizer),
    patchServiceStatus: (service, status) => kube.patchServiceStatus(service, status),
    listNodes: () => kube.listNodes(),
    listEndpointSlices: (namespace, name) => kube.listEndpointSlices(namespace, name),
  };
}

/**
 * The pass a key's messages ask for: a full sync covers the others; a host update and a targets
 * sync together are a full sync too (one Ensure, rather than two partial passes).
 */
function firstMode(modes: ReadonlySet<KeyMode>): KeyMode {
  if (modes.has('resync')) return 'resync';
  if (modes.has('service') || (modes.has('hosts') && modes.has('targets'))) return 'service';
  return modes.has('targets') ? 'targets' : 'hosts';
}

/** The message that brings a key back in the same mode; a resync keeps the sweep run it came from. */
function again(mode: KeyMode, key: ServiceKey, sweepPass: string | undefined): WorkMessage {
  return mode === 'resync'
    ? { v: 1, kind: mode, key, ...(sweepPass ? { pass: sweepPass } : {}) }
    : { v: 1, kind: mode, key };
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
