import type {
  EventBridgeClient,
  PutEventsCommand as PutEventsCommandType,
} from '@aws-sdk/client-eventbridge';
import { eventSource, type LifecycleEvent } from '../contract/lifecycle-events';
import type { LifecyclePublisher } from '../runtime/ports';

/** PutEvents takes at most ten entries a call. */
const maxEntriesPerCall = 10;

export interface PublishReport {
  readonly published: number;
  /** Events still rejected after every attempt: handed back, never thrown. */
  readonly rejected: readonly LifecycleEvent[];
  /** Events EventBridge refused as invalid: no retry can help them. */
  readonly invalid: readonly LifecycleEvent[];
}

/** Entry errors that say the entry itself is wrong; anything else may pass on a later try. */
const invalidEntryCodes = new Set(['MalformedDetail', 'InvalidArgument', 'ValidationException']);

export interface EventBridgePublisherOptions {
  /** The bus name or ARN; `default` for the account's default bus. */
  readonly busName: string;
  readonly attempts?: number;
  readonly sleep?: (ms: number) => Promise<void>;
  readonly onFailure?: (rejected: number, reason: string) => void;
}

/**
 * Publishes lifecycle events with PutEvents, ten entries a call. PutEvents succeeds as a call
 * while rejecting single entries (throttling, internal errors), so rejected entries are retried on
 * their own, with backoff. Publishing never fails a sync: what is still rejected is reported.
 */
export class EventBridgePublisher implements LifecyclePublisher {
  /**
   * The client, or a function that makes it on first use: the EventBridge client is loaded only
   * by an instance that has an event to publish, not at every cold start.
   */
  constructor(
    private readonly client: EventBridgeClient | (() => Promise<EventBridgeClient>),
    private readonly options: EventBridgePublisherOptions,
  ) {}

  private sdk:
    | Promise<{ client: EventBridgeClient; PutEventsCommand: typeof PutEventsCommandType }>
    | undefined;

  private loaded() {
    this.sdk ??= Promise.all([
      typeof this.client === 'function' ? this.client() : Promise.resolve(this.client),
      import('@aws-sdk/client-eventbridge'),
    ]).then(([client, m]) => ({ client, PutEventsCommand: m.PutEventsCommand }));
    // A failed load is tried again at the next publish.
    this.sdk.catch(() => (this.sdk = undefined));
    return this.sdk;
  }

  async publish(events: readonly LifecycleEvent[]): Promise<PublishReport> {
    let published = 0;
    const rejected: LifecycleEvent[] = [];
    const invalid: LifecycleEvent[] = [];
    for (let i = 0; i < events.length; i += maxEntriesPerCall) {
      const result = await this.publishBatch(events.slice(i, i + maxEntriesPerCall));
      published += result.published;
      rejected.push(...result.rejected);
      invalid.push(...result.invalid);
    }
    return { published, rejected, invalid };
  }

  private async publishBatch(batch: readonly LifecycleEvent[]): Promise<PublishReport> {
    const attempts = this.options.attempts ?? 3;
    const sleep =
      this.options.sleep ?? ((ms: number) => new Promise((resolve) => setTimeout(resolve, ms)));
    let pending = [...batch];
    const invalid: LifecycleEvent[] = [];
    let reason = '';
    for (let attempt = 1; attempt <= attempts && pending.length > 0; attempt++) {
      if (attempt > 1) await sleep(100 * 2 ** (attempt - 2));
      try {
        const { client, PutEventsCommand } = await this.loaded();
        const result = await client.send(
          new PutEventsCommand({
            Entries: pending.map((event) => ({
              EventBusName: this.options.busName,
              Source: eventSource,
              DetailType: event.detailType,
              Detail: JSON.stringify(event.detail),
              // When it happened, not when it was sent: a retried event keeps its place in time.
              Time: new Date(event.detail.occurredAt),
            })),
          }),
        );
        const entries = result.Entries ?? [];
        const rejected: LifecycleEvent[] = [];
        pending.forEach((event, index) => {
          const entry = entries[index];
          if (entry?.EventId !== undefined) return;
          if (invalidEntryCodes.has(entry?.ErrorCode ?? '')) invalid.push(event);
          else rejected.push(event);
        });
        reason = entries.find((e) => e.ErrorCode !== undefined)?.ErrorCode ?? reason;
        pending = rejected;
      } catch (error) {
        reason = error instanceof Error ? error.name : String(error);
      }
    }
    if (pending.length + invalid.length > 0) {
      this.options.onFailure?.(pending.length + invalid.length, reason);
    }
    return {
      published: batch.length - pending.length - invalid.length,
      rejected: pending,
      invalid,
    };
  }
}
