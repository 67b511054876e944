import { randomUUID } from 'node:crypto';
import { errorMessage } from '../core/errors';
import { parseServiceKey, type ServiceKey } from '../core/keys';
import type { Service } from '../core/objects';
import {
  eventSchemaVersion,
  type LifecycleCommon,
  type LifecycleDetail,
  type LifecycleEvent,
} from '../contract/lifecycle-events';
import type { LifecycleRecorder, LoadBalancerSummary, TargetChanges } from '../sync/ports';
import type { RuntimeContext } from './context';

/** How long an event is offered again before it is given up: a day of a broken bus or grant. */
export const maxEventAgeSeconds = 24 * 60 * 60;

/**
 * Collects one sync's lifecycle facts as events, with the envelope the use cases do not know:
 * cluster, correlation id (also in the sync's log lines), event id and time.
 */
export class LifecycleCollector implements LifecycleRecorder {
  readonly events: LifecycleEvent[] = [];
  private subjectOf: Service | undefined;

  constructor(
    private readonly cluster: string,
    readonly correlationId: string,
    private readonly now: () => Date,
  ) {}

  subject(service: Service): void {
    this.subjectOf = service;
  }

  ensured(service: Service, summary: LoadBalancerSummary): void {
    this.events.push({
      detailType: 'LoadBalancerEnsured',
      detail: {
        ...this.serviceFields(service),
        dnsName: summary.dnsName,
        scheme: summary.scheme,
        listeners: summary.listeners.map((l) => ({
          port: l.port,
          protocol: l.protocol,
          targetGroupArn: l.targetGroupId,
        })),
        loadBalancerArn: summary.loadBalancerId,
        ...(summary.securityGroupId !== undefined
          ? { securityGroupId: summary.securityGroupId }
          : {}),
      },
    });
  }

  hostsUpdated(service: Service, targets: TargetChanges): void {
    this.events.push({
      detailType: 'LoadBalancerHostsUpdated',
      detail: {
        ...this.serviceFields(service),
        added: [...targets.added],
        removed: [...targets.removed],
      },
    });
  }

  deleted(service: Service, loadBalancerId: string | undefined): void {
    this.events.push({
      detailType: 'LoadBalancerDeleted',
      detail: {
        ...this.serviceFields(service),
        ...(loadBalancerId !== undefined ? { loadBalancerArn: loadBalancerId } : {}),
      },
    });
  }

  nodeSetChanged(change: TargetChanges & { readonly eligibleHosts: number }): void {
    this.events.push({
      detailType: 'NodeSetChanged',
      detail: {
        ...this.common(),
        added: [...change.added],
        removed: [...change.removed],
        eligibleHosts: change.eligibleHosts,
      },
    });
  }

  /**
   * A sync of `key` failed. The Service is the one the pass read, when it got that far; during an
   * API outage only the key is known, and the UID is left empty.
   */
  syncFailed(
    key: ServiceKey,
    error: unknown,
    retry: { terminal: true } | { terminal: false; inSeconds: number },
  ): void {
    const { namespace, name } = parseServiceKey(key);
    const seen = this.subjectOf?.metadata;
    const uid = seen?.namespace === namespace && seen.name === name ? (seen.uid ?? '') : '';
    this.events.push({
      detailType: 'LoadBalancerSyncFailed',
      detail: {
        ...this.common(),
        namespace,
        name,
        uid,
        reason: errorMessage(error).slice(0, 1024),
        terminal: retry.terminal,
        ...(retry.terminal ? {} : { retryInSeconds: Math.round(retry.inSeconds) }),
      },
    });
  }

  private serviceFields(service: Service): LifecycleDetail<'LoadBalancerDeleted'> {
    return {
      ...this.common(),
      namespace: service.metadata?.namespace ?? '',
      name: service.metadata?.name ?? '',
      uid: service.metadata?.uid ?? '',
    };
  }

  private common(): LifecycleCommon {
    return {
      schemaVersion: eventSchemaVersion,
      eventId: randomUUID(),
      occurredAt: this.now().toISOString(),
      cluster: this.cluster,
      correlationId: this.correlationId,
    };
  }
}

/** A collector for one sync (or node-sync pass) of this runtime. */
export function newCollector(ctx: RuntimeContext): LifecycleCollector {
  return new LifecycleCollector(ctx.config.clusterName, randomUUID(), () =>
    ctx.syncDeps.clock.now(),
  );
}

/**
 * Publishes what a sync collected. Never throws and never fails the sync: events EventBridge still
 * rejects after the publisher's retries go back on the work queue one per message and are offered
 * again after the backoff base, then with growing backoff (see processWorkBatch), so an EventBridge outage delays them but loses
 * none. Only if SQS refuses them too are they dropped, logged and counted.
 */
export async function publishLifecycle(
  ctx: RuntimeContext,
  events: readonly LifecycleEvent[],
): Promise<void> {
  if (ctx.lifecycle === undefined || events.length === 0) return;
  try {
    const { published, rejected, invalid } = await ctx.lifecycle.publish(events);
    if (published > 0) ctx.metrics.count('LifecycleEventsPublished', published);
    dropEvents(ctx, invalid, 'EventBridge refused them as invalid');
    if (rejected.length > 0) await queueAgain(ctx, rejected);
  } catch (error) {
    // The publisher does not throw; this is the last guard that keeps a sync from failing.
    dropEvents(ctx, events, errorMessage(error));
  }
}

/** Lifecycle events given up on: logged with their ids and counted, never silently. */
export function dropEvents(
  ctx: RuntimeContext,
  events: readonly LifecycleEvent[],
  reason: string,
): void {
  if (events.length === 0) return;
  ctx.metrics.count('LifecycleEventsDropped', events.length);
  ctx.log.error('lifecycle events dropped', {
    reason,
    eventIds: events.map((event) => event.detail.eventId),
  });
}

/**
 * Rejected events are kept in the state table and the queue carries only their ids: the functions
 * alone can write the table, so a forged `event` message publishes nothing (see contract/work-messages.ts).
 */
async function queueAgain(ctx: RuntimeContext, rejected: readonly LifecycleEvent[]) {
  ctx.metrics.count('LifecycleEventPublishFailures', rejected.length);
  const delay = ctx.config.backoffBaseSeconds;
  try {
    const expiresAt = new Date(ctx.syncDeps.clock.now().getTime() + maxEventAgeSeconds * 2000);
    await ctx.store.putPendingEvents(rejected, expiresAt);
    await ctx.queue.send(
      rejected.map((event) => ({ v: 1, kind: 'event', id: event.detail.eventId })),
      delay,
    );
    ctx.log.warn('lifecycle events not published yet; queued to try again', {
      count: rejected.length,
      retryInSeconds: delay,
    });
  } catch (error) {
    dropEvents(ctx, rejected, `neither EventBridge nor SQS took them: ${errorMessage(error)}`);
  }
}
