/**
 * The serverless plumbing on virtual time, so the real runtime (processWorkBatch, runNodeSync) and
 * the real use cases run unchanged: an SQS queue with visibility timeouts and delays (behind the
 * real SqsWorkQueue), the event source mapping's pollers, and a state table with the lease
 * semantics of DynamoStateStore. Every remote call takes the same fixed latency.
 */
import type { SQSClient } from '@aws-sdk/client-sqs';
import type { DynamoStateStore, FinishResult, Lease } from '../../functions/aws/dynamo-state-store';
import { BusyError } from '../../functions/core/errors';
import type { EligibleHosts, ServiceHostsState } from '../../functions/core/node-sync-plan';
import type { ServiceKey } from '../../functions/core/keys';
import type { RuntimeContext } from '../../functions/runtime/context';
import { processWorkBatch, type QueueRecord } from '../../functions/runtime/process-work';
import type { ServiceRecord, StateStore } from '../../functions/sync/ports';
import type { VirtualClock } from './virtual-clock';

interface QueuedMessage {
  readonly id: string;
  readonly body: string;
  visibleAt: number;
  receiveCount: number;
  receipt: string;
}

export interface QueueStats {
  sends: number;
  receives: number;
  deletes: number;
  visibilityChanges: number;
}

/** A standard SQS queue on virtual time. */
export class FakeQueue {
  readonly stats: QueueStats = { sends: 0, receives: 0, deletes: 0, visibilityChanges: 0 };
  private readonly messages = new Map<string, QueuedMessage>();
  private readonly byReceipt = new Map<string, QueuedMessage>();
  private waiters: (() => void)[] = [];
  private nextId = 0;

  constructor(
    private readonly clock: VirtualClock,
    private readonly latencyMs: number,
    private readonly visibilityTimeoutSeconds: number,
  ) {}

  /** Looks like an SQSClient to SqsWorkQueue: SendMessageBatch and ChangeMessageVisibility. */
  asSqsClient(): SQSClient {
    return {
      send: async (command: object) => {
        const input = (command as { input: Record<string, unknown> }).input;
        await this.clock.sleep(this.latencyMs);
        switch (command.constructor.name) {
          case 'SendMessageBatchCommand': {
            this.stats.sends++;
            const entries = input.Entries as { MessageBody: string; DelaySeconds?: number }[];
            for (const entry of entries) this.add(entry.MessageBody, entry.DelaySeconds ?? 0);
            return { Successful: entries.map((_, i) => ({ Id: String(i) })), Failed: [] };
          }
          case 'ChangeMessageVisibilityCommand': {
            this.stats.visibilityChanges++;
            const message = this.byReceipt.get(String(input.ReceiptHandle));
            if (message !== undefined) {
              this.setVisibleAt(message, this.clock.ms + Number(input.VisibilityTimeout) * 1000);
            }
            return {};
          }
          default:
            throw new Error(`bench fake SQS: ${command.constructor.name} is not implemented`);
        }
      },
    } as unknown as SQSClient;
  }

  /** A message as the forwarder's SendMessageBatch would leave it (one call, after its latency). */
  async sendFromForwarder(body: string): Promise<void> {
    await this.clock.sleep(this.latencyMs);
    this.stats.sends++;
    this.add(body, 0);
  }

  get depth(): number {
    return this.messages.size;
  }

  visibleCount(): number {
    let n = 0;
    for (const m of this.messages.values()) if (m.visibleAt <= this.clock.ms) n++;
    return n;
  }

  /** Resolves when at least one message is visible (long polling). */
  waitVisible(): Promise<void> {
    if (this.visibleCount() > 0) return Promise.resolve();
    return new Promise((resolve) => this.waiters.push(resolve));
  }

  /** ReceiveMessage: up to `max` visible messages, hidden for the queue's visibility timeout. */
  receive(max: number): QueueRecord[] {
    this.stats.receives++;
    const now = this.clock.ms;
    const taken: QueueRecord[] = [];
    for (const message of this.messages.values()) {
      if (taken.length >= max) break;
      if (message.visibleAt > now) continue;
      message.receiveCount++;
      this.byReceipt.delete(message.receipt);
      message.receipt = `${message.id}#${message.receiveCount}`;
      this.byReceipt.set(message.receipt, message);
      this.setVisibleAt(message, now + this.visibilityTimeoutSeconds * 1000);
      taken.push({
        messageId: message.id,
        body: message.body,
        receiptHandle: message.receipt,
        receiveCount: message.receiveCount,
      });
    }
    return taken;
  }

  /** DeleteMessageBatch, as the event source mapping does for the records that succeeded. */
  async delete(records: readonly QueueRecord[]): Promise<void> {
    if (records.length === 0) return;
    await this.clock.sleep(this.latencyMs);
    this.stats.deletes++;
    for (const record of records) {
      const message = this.byReceipt.get(record.receiptHandle);
      if (message === undefined) continue;
      this.messages.delete(message.id);
      this.byReceipt.delete(record.receiptHandle);
    }
  }

  private add(body: string, delaySeconds: number): void {
    const id = `m-${++this.nextId}`;
    const message: QueuedMessage = { id, body, visibleAt: 0, receiveCount: 0, receipt: '' };
    this.messages.set(id, message);
    this.setVisibleAt(message, this.clock.ms + delaySeconds * 1000);
  }

  private setVisibleAt(message: QueuedMessage, at: number): void {
    message.visibleAt = at;
    const wake = () => {
      const waiters = this.waiters;
      this.waiters = [];
      for (const resolve of waiters) resolve();
    };
    if (at <= this.clock.ms) wake();
    else {
      void this.clock.sleep(at - this.clock.ms).then(() => {
        if (this.messages.has(message.id) && message.visibleAt <= this.clock.ms) wake();
      });
    }
  }
}

export interface StateStats {
  calls: number;
}

type Item = Record<string, unknown>;

/**
 * The state table with DynamoStateStore's semantics (lease with fencing counter and dirty flag,
 * failure counting, fenced writes), one latency per DynamoDB request it would make.
 */
export class FakeStateTable {
  readonly stats: StateStats = { calls: 0 };
  readonly items = new Map<string, Item>();
  private eligible: EligibleHosts | undefined;

  constructor(
    private readonly clock: VirtualClock,
    private readonly latencyMs: number,
  ) {}

  /** Seeds a Service record without latency (the state before the node event). */
  seed(record: ServiceRecord): void {
    this.items.set(`svc#${record.key}`, { pk: `svc#${record.key}`, rec: structuredClone(record) });
  }

  seedEligibleHosts(hosts: EligibleHosts): void {
    this.eligible = structuredClone(hosts);
  }

  record(key: ServiceKey): ServiceRecord | undefined {
    return this.items.get(`svc#${key}`)?.rec as ServiceRecord | undefined;
  }

  asStore(): DynamoStateStore {
    return this as unknown as DynamoStateStore;
  }

  async acquire(
    pk: string,
    owner: string,
    ttlSeconds: number,
  ): Promise<{ acquired: true; lease: Lease } | { acquired: false }> {
    await this.call();
    const now = this.clock.ms;
    const item = this.item(pk);
    if (item.leaseOwner === undefined || Number(item.leaseUntil) < now) {
      item.leaseOwner = owner;
      item.leaseUntil = now + ttlSeconds * 1000;
      item.fence = Number(item.fence ?? 0) + 1;
      item.dirty = false;
      return {
        acquired: true,
        lease: { pk, owner, fence: Number(item.fence), failures: Number(item.failures ?? 0) },
      };
    }
    await this.call();
    item.dirty = true;
    return { acquired: false };
  }

  async finish(
    lease: Lease,
    failures: 'reset' | 'increment' | 'keep',
    ttlSeconds: number,
  ): Promise<FinishResult & { failures?: number }> {
    await this.call();
    const item = this.item(lease.pk);
    const holds = item.leaseOwner === lease.owner && item.fence === lease.fence;
    if (holds && item.dirty !== true) {
      delete item.leaseOwner;
      delete item.leaseUntil;
      if (failures === 'reset') item.failures = 0;
      if (failures === 'increment') item.failures = Number(item.failures ?? 0) + 1;
      if (lease.pk.startsWith('svc#')) {
        // removeIfEmpty: one conditional DeleteItem.
        await this.call();
        if (item.rec === undefined && !item.failures) this.items.delete(lease.pk);
      }
      return { kind: 'released', failures: Number(item.failures ?? 0) };
    }
    await this.call();
    if (!holds) return { kind: 'lost' };
    item.dirty = false;
    item.leaseUntil = this.clock.ms + ttlSeconds * 1000;
    return { kind: 'again' };
  }

  fencedBy(lease: Lease): StateStore {
    const fenced = async (write: () => void) => {
      await this.call();
      const item = this.item(lease.pk);
      if (item.leaseOwner !== lease.owner || item.fence !== lease.fence) {
        throw new BusyError(`lease on ${lease.pk} was lost (fence ${lease.fence}); not writing`);
      }
      write();
    };
    return {
      getService: async (key) => {
        await this.call();
        const rec = this.items.get(`svc#${key}`)?.rec;
        return rec === undefined ? undefined : (structuredClone(rec) as ServiceRecord);
      },
      putService: (record) =>
        fenced(() => {
          const item = this.item(`svc#${record.key}`);
          item.rec = JSON.parse(JSON.stringify(record)) as ServiceRecord;
        }),
      deleteService: (key) =>
        fenced(() => {
          delete this.item(`svc#${key}`).rec;
        }),
      listServiceHosts: () => this.listServiceHosts(),
      getEligibleHosts: async () => {
        // The meta item, then the chunk (one chunk holds ~3,000 hosts).
        await this.call();
        await this.call();
        return this.eligible === undefined ? undefined : structuredClone(this.eligible);
      },
      putEligibleHosts: async (hosts) => {
        // Chunk Put, meta Get, TransactWrite (lease check + meta), old chunk Delete.
        await this.call();
        await this.call();
        await fenced(() => {
          this.eligible = structuredClone(hosts);
        });
        await this.call();
      },
    };
  }

  async getItem(pk: string): Promise<Record<string, unknown> | undefined> {
    await this.call();
    const item = this.items.get(pk);
    return item === undefined ? undefined : { ...item };
  }

  async setAttributes(pk: string, values: Record<string, string | number | boolean>) {
    await this.call();
    Object.assign(this.item(pk), values);
  }

  async removeAttributes(pk: string, names: readonly string[]) {
    await this.call();
    for (const name of names) delete this.item(pk)[name];
  }

  /** A Scan reads at most 1 MB per page: one request per MB of items. */
  private async listServiceHosts(): Promise<ServiceHostsState[]> {
    let bytes = 0;
    const result: ServiceHostsState[] = [];
    for (const item of this.items.values()) {
      const rec = item.rec as ServiceRecord | undefined;
      bytes += JSON.stringify(item).length;
      if (rec !== undefined) result.push({ key: rec.key, hostsHash: rec.hostsHash });
    }
    const pages = Math.max(1, Math.ceil(bytes / 1_000_000));
    for (let i = 0; i < pages; i++) await this.call();
    return result;
  }

  private item(pk: string): Item {
    let item = this.items.get(pk);
    if (item === undefined) {
      item = { pk };
      this.items.set(pk, item);
    }
    return item;
  }

  private async call(): Promise<void> {
    this.stats.calls++;
    await this.clock.sleep(this.latencyMs);
  }
}

/** Wraps every method of `target` so it first waits `latencyMs` (a remote API). */
export function withLatency<T extends object>(
  target: T,
  clock: VirtualClock,
  latencyMs: number,
  counter?: { calls: number },
): T {
  return new Proxy(target, {
    get(object, property, receiver) {
      const value: unknown = Reflect.get(object, property, receiver);
      if (typeof value !== 'function') return value;
      return async (...args: unknown[]) => {
        if (counter) counter.calls++;
        await clock.sleep(latencyMs);
        return (value as (...a: unknown[]) => unknown).apply(object, args);
      };
    },
  });
}

export interface EsmOptions {
  /** Event source mapping MaximumConcurrency: how many batches run at once. */
  readonly concurrency: number;
  readonly batchSize: number;
  /** MaximumBatchingWindowInSeconds, in ms. */
  readonly batchingWindowMs: number;
  /** Invoking a warm function instance. */
  readonly invokeMs: number;
}

export interface EsmStats {
  invocations: number;
  busyMs: number;
}

/**
 * The event source mapping: `concurrency` pollers, each with its own function instance (its own
 * runtime and so its own SDK clients and limiter), receiving batches and deleting what succeeded.
 */
export function runEventSourceMapping(
  queue: FakeQueue,
  clock: VirtualClock,
  runtimes: readonly RuntimeContext[],
  options: EsmOptions,
  stopped: () => boolean,
): EsmStats {
  const stats: EsmStats = { invocations: 0, busyMs: 0 };
  for (const runtime of runtimes.slice(0, options.concurrency)) {
    void (async () => {
      while (!stopped()) {
        await queue.waitVisible();
        if (stopped()) return;
        if (queue.visibleCount() < options.batchSize) await clock.sleep(options.batchingWindowMs);
        const records = queue.receive(options.batchSize);
        if (records.length === 0) continue;
        const started = clock.ms;
        await clock.sleep(options.invokeMs);
        stats.invocations++;
        const result = await processWorkBatch(records, runtime);
        stats.busyMs += clock.ms - started;
        const failed = new Set(result.batchItemFailures.map((f) => f.itemIdentifier));
        await queue.delete(records.filter((r) => !failed.has(r.messageId)));
      }
    })();
  }
  return stats;
}
