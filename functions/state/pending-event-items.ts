import { BatchGetCommand } from '@aws-sdk/lib-dynamodb';
import { lifecycleEventProblem, type LifecycleEvent } from '../contract/lifecycle-events';
import { RetryableError } from '../core/errors';
import { retryable, type StateTable } from './state-table';
import { pendingEventPk } from './table-layout';

/** Lifecycle events EventBridge has not taken yet, one item each. */
export class PendingEventItems {
  constructor(private readonly table: StateTable) {}

  /**
   * Keeps lifecycle events that EventBridge has not taken yet, for the work queue's `event`
   * messages to name by id: anyone who can send to the queue can name an id, but only the
   * functions can write this table, so a forged message finds nothing to publish. DynamoDB's TTL
   * removes what is never published.
   */
  async putPendingEvents(events: readonly LifecycleEvent[], expiresAt: Date): Promise<void> {
    const expires = Math.ceil(expiresAt.getTime() / 1000);
    const requests = events.map((event) => ({
      PutRequest: {
        Item: {
          pk: pendingEventPk(event.detail.eventId),
          event: JSON.stringify(event),
          expiresAt: expires,
        },
      },
    }));
    await this.table.batchWrite(requests, 'keep lifecycle events');
  }

  /**
   * The pending events with these ids that are still stored and still valid; ids that name
   * nothing (published meanwhile, expired, or never ours) are left out.
   */
  async getPendingEvents(eventIds: readonly string[]): Promise<LifecycleEvent[]> {
    const found: LifecycleEvent[] = [];
    const unique = [...new Set(eventIds)];
    for (let i = 0; i < unique.length; i += 100) {
      let keys: Record<string, unknown>[] | undefined = unique
        .slice(i, i + 100)
        .map((id) => ({ pk: pendingEventPk(id) }));
      for (let attempt = 0; keys !== undefined && keys.length > 0; attempt++) {
        if (attempt > 4) throw new RetryableError('state table: read lifecycle events: throttled');
        let result;
        try {
          result = await this.table.doc.send(
            new BatchGetCommand({
              RequestItems: { [this.table.name]: { Keys: keys, ConsistentRead: true } },
            }),
          );
        } catch (error) {
          throw retryable(error, 'read lifecycle events');
        }
        for (const item of result.Responses?.[this.table.name] ?? []) {
          const event = parseStoredEvent(item.event);
          if (event !== undefined) found.push(event);
        }
        keys = result.UnprocessedKeys?.[this.table.name]?.Keys;
      }
    }
    return found;
  }

  async deletePendingEvents(eventIds: readonly string[]): Promise<void> {
    const requests = [...new Set(eventIds)].map((id) => ({
      DeleteRequest: { Key: { pk: pendingEventPk(id) } },
    }));
    await this.table.batchWrite(requests, 'remove published lifecycle events');
  }
}

function parseStoredEvent(text: unknown): LifecycleEvent | undefined {
  if (typeof text !== 'string') return undefined;
  try {
    const event = JSON.parse(text) as LifecycleEvent;
    return lifecycleEventProblem(event) === undefined ? event : undefined;
  } catch {
    return undefined;
  }
}
