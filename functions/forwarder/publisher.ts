import { messageGroupOf } from '../contract/work-message-group';
import type { WorkMessage } from '../contract/work-messages';

export interface PublisherMetrics {
  forwarded: number;
  sendFailures: number;
}

export interface PublisherOptions {
  /** Distinct pending keys held before enqueue waits (back-pressure on the watch). */
  readonly capacity: number;
  readonly maxBackoffMs: number;
  readonly sleep: (ms: number) => Promise<void>;
  readonly now?: () => number;
  readonly onSendError?: (error: unknown) => void;
  /**
   * Fills in a message as it leaves the buffer, so figures it reports (a heartbeat's failed
   * sends) are read when it is sent, not when it was queued behind a send still in flight.
   */
  readonly prepare?: (message: WorkMessage) => WorkMessage;
  /** Each batch SQS took, after it left the buffer, as it was sent. */
  readonly onSent?: (messages: readonly WorkMessage[]) => void;
}

/**
 * A bounded buffer of work messages keyed by what they are about: a Service key already pending
 * is not sent twice, and node triggers coalesce into one. A pending `service` message for a key
 * also stands for its `targets` message: the full sync it asks for reads the EndpointSlices too
 * (a full sync covers the other passes, runtime/key-passes.ts), and it reads them after it is
 * sent, so after any slice change seen while it was pending. A loop sends batches of 10; a batch SQS
 * does not take stays pending and is retried with capped, jittered backoff (at-least-once). When
 * the buffer is full, `enqueue` waits, which slows the watch rather than dropping work.
 *
 * Batches take turns between fair-queue groups (namespaces, node sync), oldest first within each,
 * so a namespace that changes thousands of Services at once does not hold back another
 * namespace's one change in this buffer either.
 */
export class Publisher {
  readonly metrics: PublisherMetrics = { forwarded: 0, sendFailures: 0 };
  private readonly pending = new Map<string, WorkMessage>();
  /** Pending ids per group, oldest first; the group sent from last is moved to the back. */
  private readonly groups = new Map<string, Set<string>>();
  private readonly spaceWaiters: (() => void)[] = [];
  private wake: (() => void) | undefined;
  private running = false;
  private loop: Promise<void> | undefined;
  /** When the current run of failed sends began (ms since epoch); undefined after a success. */
  private failingSinceMs: number | undefined;

  constructor(
    private readonly send: (messages: WorkMessage[]) => Promise<void>,
    private readonly options: PublisherOptions,
  ) {}

  get depth(): number {
    return this.pending.size;
  }

  /** How long every send has failed, in ms; 0 while sends go through. */
  get failingForMs(): number {
    if (this.failingSinceMs === undefined) return 0;
    return this.now() - this.failingSinceMs;
  }

  private now(): number {
    return (this.options.now ?? Date.now)();
  }

  async enqueue(message: WorkMessage): Promise<void> {
    const id = idOf(message);
    const pendingService =
      message.kind === 'targets' ? this.pending.get(`service:${message.key}`) : undefined;
    if (message.kind === 'targets' && pendingService !== undefined) {
      // The full sync covers the targets, unless that message is in flight and its sync has read
      // the slices already: a new copy goes out once more after it (see `sent`).
      this.pending.set(`service:${message.key}`, { ...pendingService });
      return;
    }
    if (message.kind === 'service') this.drop(`targets:${message.key}`);
    // A heartbeat never waits for room: a full buffer is what it must report.
    while (
      message.kind !== 'heartbeat' &&
      !this.pending.has(id) &&
      this.pending.size >= this.options.capacity
    ) {
      await new Promise<void>((resolve) => this.spaceWaiters.push(resolve));
    }
    if (!this.pending.has(id)) {
      const group = messageGroupOf(message);
      const ids = this.groups.get(group) ?? new Set<string>();
      ids.add(id);
      this.groups.set(group, ids);
    }
    this.pending.set(id, message);
    this.wake?.();
  }

  /** Up to `size` pending entries, one group after another in turn. */
  private nextBatch(size: number): [string, WorkMessage][] {
    const batch: [string, WorkMessage][] = [];
    const turns = [...this.groups].map(([group, ids]) => ({ group, ids: ids.values() }));
    const served: string[] = [];
    while (batch.length < size && turns.length > 0) {
      for (let i = 0; i < turns.length && batch.length < size;) {
        const turn = turns[i]!;
        const next = turn.ids.next();
        if (next.done === true) {
          turns.splice(i, 1);
          continue;
        }
        const message = this.pending.get(next.value);
        if (message !== undefined) batch.push([next.value, message]);
        if (!served.includes(turn.group)) served.push(turn.group);
        i++;
      }
    }
    // Next time the groups that got nothing go first.
    for (const group of served) {
      const ids = this.groups.get(group);
      this.groups.delete(group);
      if (ids !== undefined) this.groups.set(group, ids);
    }
    return batch;
  }

  private sent(id: string, message: WorkMessage): void {
    // A newer message for the same id arrived meanwhile (or it was dropped): keep that one.
    if (this.pending.get(id) !== message) return;
    this.drop(id);
  }

  /** Removes a pending message (one in flight is then not retried if its send fails). */
  private drop(id: string): void {
    const message = this.pending.get(id);
    if (message === undefined) return;
    this.pending.delete(id);
    const group = messageGroupOf(message);
    const ids = this.groups.get(group);
    ids?.delete(id);
    if (ids?.size === 0) this.groups.delete(group);
  }

  start(): void {
    if (this.running) return;
    this.running = true;
    this.loop = this.run();
  }

  /** Stops after sending what is pending, or after `timeoutMs`; returns how many were left. */
  async stop(timeoutMs: number): Promise<number> {
    const deadline = Date.now() + timeoutMs;
    while (this.pending.size > 0 && Date.now() < deadline) {
      this.wake?.();
      await this.options.sleep(50);
    }
    this.running = false;
    this.wake?.();
    await this.loop;
    return this.pending.size;
  }

  private async run(): Promise<void> {
    let failures = 0;
    while (this.running) {
      if (this.pending.size === 0) {
        await new Promise<void>((resolve) => {
          this.wake = resolve;
        });
        this.wake = undefined;
        continue;
      }
      const batch = this.nextBatch(10);
      const prepare = this.options.prepare ?? ((message: WorkMessage) => message);
      const outgoing = batch.map(([, message]) => prepare(message));
      try {
        await this.send(outgoing);
        for (const [id, message] of batch) this.sent(id, message);
        this.metrics.forwarded += batch.length;
        failures = 0;
        this.failingSinceMs = undefined;
        this.options.onSent?.(outgoing);
        while (this.spaceWaiters.length > 0 && this.pending.size < this.options.capacity)
          this.spaceWaiters.shift()?.();
      } catch (error) {
        failures++;
        this.metrics.sendFailures++;
        this.failingSinceMs ??= this.now();
        this.options.onSendError?.(error);
        const ceiling = Math.min(this.options.maxBackoffMs, 100 * 2 ** Math.min(failures, 10));
        await this.options.sleep(ceiling / 2 + Math.random() * (ceiling / 2));
      }
    }
  }
}

/** What a message is about: one pending message per id. */
function idOf(message: WorkMessage): string {
  switch (message.kind) {
    case 'node':
    case 'heartbeat':
      return message.kind;
    case 'event':
      return `event:${message.id}`;
    default:
      return `${message.kind}:${message.key}`;
  }
}
