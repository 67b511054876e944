/**
 * The serverless plumbing on virtual time, so the real runtime (processWorkBatch, runNodeSync) and
 * the real use cases run unchanged: an SQS queue with visibility timeouts, delays and fair-queue
 * delivery (behind the real SqsWorkQueue), the event source mapping's pollers, and a state table
 * with the lease semantics of DynamoStateStore. Every remote call takes the same fixed latency.
 */
import type { SQSClient } from '@aws-sdk/client-sqs';
import type { LifecycleEvent } from '../../functions/contract/lifecycle-events';
import type {
  AcquireResult,
  FailureUpdate,
  FinishResult,
  GatedAcquireResult,
  GlobalRun,
  Lease,
  NodeSyncTimer,
  RunGate,
  RuntimeStore,
  ServiceItemSummary,
  SweepBook,
} from '../../functions/runtime/ports';
import {
  keptPk,
  leasePk,
  nodeSyncLeasePk,
  serviceLeasePk,
  servicePk,
  sweepLeasePk,
} from '../../functions/state/table-layout';
import { BusyError } from '../../functions/core/errors';
import type { EligibleHosts, ServiceHostsState } from '../../functions/core/node-sync-plan';
import type { ServiceKey } from '../../functions/core/keys';
import type { RuntimeContext } from '../../functions/runtime/context';
import type { WorkMessage } from '../../functions/contract/work-messages';
import { messageGroupOf } from '../../functions/contract/work-message-group';
import { processWorkBatch } from '../../functions/runtime/work-batch';
import { type BatchResult, type QueueRecord } from '../../functions/runtime/queue-records';
import type { ServiceRecord, StateStore } from '../../functions/sync/ports';
import { storedRecordAttributes } from '../../functions/state/record-item';
import { parseKeptSlots, type KeptSlot } from '../../functions/core/registration-slots';
import type { LambdaMeter } from './meter';
import type { VirtualClock } from './virtual-clock';

interface QueuedMessage {
  readonly id: string;
  readonly body: string;
  /** MessageGroupId: the fair-queue tenant; none makes the message a tenant of its own. */
  readonly group: string | undefined;
  visibleAt: number;
  receiveCount: number;
  receipt: string;
  /** When a consumer took it, until it deletes it or changes its visibility. */
  processingSince: number | undefined;
}

export interface QueueStats {
  sends: number;
  receives: number;
  deletes: number;
  visibilityChanges: number;
  /** The most groups noisy at one receive (CloudWatch: ApproximateNumberOfNoisyGroups). */
  noisyGroupsPeak: number;
}

/**
 * SQS fair queues as AWS documents them ("How Amazon SQS fair queues work"): a group is a noisy
 * neighbour when it holds more than 10 % of the queue's in-flight messages and at least 30 of its
 * own, or more than 10 % of recent consumer time; while one is, consumers get the other groups'
 * messages first, and among noisy groups the one with the fewest in flight. A group that has sent
 * nothing for 5 minutes is quiet again. AWS calls the thresholds approximate and does not say
 * what "recent" is: the window here is our assumption.
 */
export const fairQueueModel = {
  inFlightShare: 0.1,
  minInFlight: 30,
  processingTimeShare: 0.1,
  processingWindowMs: 60_000,
  quietAfterIdleMs: 300_000,
} as const;

export interface FakeQueueOptions {
  /** Deliver as a fair queue (what AWS does with MessageGroupIds on a standard queue). */
  readonly fair?: boolean;
  /** Bills the functions' calls to the queue as time in a call. */
  readonly meter?: LambdaMeter | undefined;
}

/** A standard SQS queue on virtual time. */
export class FakeQueue {
  readonly stats: QueueStats = {
    sends: 0,
    receives: 0,
    deletes: 0,
    visibilityChanges: 0,
    noisyGroupsPeak: 0,
  };
  private readonly messages = new Map<string, QueuedMessage>();
  private readonly byReceipt = new Map<string, QueuedMessage>();
  private waiters: (() => void)[] = [];
  private nextId = 0;
  private readonly fair: boolean;
  private readonly meter: LambdaMeter | undefined;
  /** Consumer time spent per message that has finished, for the processing-time share. */
  private processed: { group: string; from: number; to: number }[] = [];
  private readonly lastSentAt = new Map<string, number>();

  constructor(
    private readonly clock: VirtualClock,
    private readonly latencyMs: number,
    private readonly visibilityTimeoutSeconds: number,
    options: FakeQueueOptions = {},
  ) {
    this.fair = options.fair ?? true;
    this.meter = options.meter;
  }

  /**
   * Looks like an SQSClient to SqsWorkQueue: SendMessageBatch, ChangeMessageVisibility and
   * DeleteMessageBatch.
   */
  asSqsClient(): SQSClient {
    return {
      send: async (command: object) => {
        const input = (command as { input: Record<string, unknown> }).input;
        const roundTrip = () => this.clock.sleep(this.latencyMs);
        await (this.meter === undefined ? roundTrip() : this.meter.call(roundTrip));
        switch (command.constructor.name) {
          case 'SendMessageBatchCommand': {
            this.stats.sends++;
            const entries = input.Entries as {
              MessageBody: string;
              DelaySeconds?: number;
              MessageGroupId?: string;
            }[];
            for (const entry of entries) {
              this.add(entry.MessageBody, entry.DelaySeconds ?? 0, entry.MessageGroupId);
            }
            return { Successful: entries.map((_, i) => ({ Id: String(i) })), Failed: [] };
          }
          case 'ChangeMessageVisibilityCommand': {
            this.stats.visibilityChanges++;
            const message = this.byReceipt.get(String(input.ReceiptHandle));
            if (message !== undefined) {
              this.endProcessing(message, this.clock.ms);
              this.setVisibleAt(message, this.clock.ms + Number(input.VisibilityTimeout) * 1000);
            }
            return {};
          }
          case 'DeleteMessageBatchCommand': {
            // A batch's messages deleted as their work ends (work-batch.ts); latency as above.
            const entries = input.Entries as { Id: string; ReceiptHandle: string }[];
            this.stats.deletes++;
            for (const entry of entries) {
              const message = this.byReceipt.get(entry.ReceiptHandle);
              if (message === undefined) continue;
              this.endProcessing(message, this.clock.ms);
              this.messages.delete(message.id);
              this.byReceipt.delete(entry.ReceiptHandle);
            }
            return { Successful: entries.map((entry) => ({ Id: entry.Id })), Failed: [] };
          }
          default:
            throw new Error(`bench fake SQS: ${command.constructor.name} is not implemented`);
        }
      },
    } as unknown as SQSClient;
  }

  /**
   * Messages as the forwarder's SendMessageBatch would leave them (one call of at most 10, after
   * its latency), each in its fair-queue group as SqsWorkQueue sends it.
   */
  async sendFromForwarder(messages: readonly WorkMessage[]): Promise<void> {
    await this.clock.sleep(this.latencyMs);
    this.stats.sends++;
    for (const message of messages) this.add(JSON.stringify(message), 0, messageGroupOf(message));
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

  /**
   * ReceiveMessage: up to `max` visible messages, hidden for the queue's visibility timeout;
   * oldest first, or as a fair queue picks them.
   */
  receive(max: number): QueueRecord[] {
    const now = this.clock.ms;
    const visible = [...this.messages.values()].filter((m) => m.visibleAt <= now);
    const chosen = this.fair ? this.fairPick(visible, max, now) : visible.slice(0, max);
    // A long poll that a message ends is billed with it. One that ends empty is the pollers'
    // standing cost (each of them every 20 s, whatever the load), not an event's: on AWS a message
    // ends one poller's wait, while here every idle poller wakes and tries.
    if (chosen.length > 0) this.stats.receives++;
    return chosen.map((message) => {
      // A consumer that let the visibility lapse spent that time on it.
      if (message.processingSince !== undefined) this.endProcessing(message, message.visibleAt);
      message.receiveCount++;
      message.processingSince = now;
      this.byReceipt.delete(message.receipt);
      message.receipt = `${message.id}#${message.receiveCount}`;
      this.byReceipt.set(message.receipt, message);
      this.setVisibleAt(message, now + this.visibilityTimeoutSeconds * 1000);
      return {
        messageId: message.id,
        body: message.body,
        receiptHandle: message.receipt,
        receiveCount: message.receiveCount,
      };
    });
  }

  /** Quiet groups' messages first, oldest first; then noisy groups, fewest in flight first. */
  private fairPick(visible: readonly QueuedMessage[], max: number, now: number): QueuedMessage[] {
    const { noisy, inFlight } = this.groupLoad(now);
    this.stats.noisyGroupsPeak = Math.max(this.stats.noisyGroupsPeak, noisy.size);
    const isNoisy = (m: QueuedMessage) => m.group !== undefined && noisy.has(m.group);
    const chosen = visible.filter((m) => !isNoisy(m)).slice(0, max);
    const waiting = new Map<string, QueuedMessage[]>();
    for (const m of visible) {
      if (m.group !== undefined && isNoisy(m))
        waiting.set(m.group, [...(waiting.get(m.group) ?? []), m]);
    }
    while (chosen.length < max && waiting.size > 0) {
      // Ties go to the group whose oldest waiting message is older (Map order is arrival order).
      let pick: string | undefined;
      for (const group of waiting.keys()) {
        if (pick === undefined || (inFlight.get(group) ?? 0) < (inFlight.get(pick) ?? 0))
          pick = group;
      }
      const queue = waiting.get(pick!)!;
      chosen.push(queue.shift()!);
      inFlight.set(pick!, (inFlight.get(pick!) ?? 0) + 1);
      if (queue.length === 0) waiting.delete(pick!);
    }
    return chosen;
  }

  /** Which groups are noisy neighbours now, and how many messages each has in flight. */
  private groupLoad(now: number): { noisy: Set<string>; inFlight: Map<string, number> } {
    const inFlight = new Map<string, number>();
    const busyMs = new Map<string, number>();
    let totalInFlight = 0;
    let totalBusyMs = 0;
    const since = now - fairQueueModel.processingWindowMs;
    this.processed = this.processed.filter((p) => p.to > since);
    const spend = (group: string, from: number, to: number) => {
      const ms = Math.max(0, to - Math.max(from, since));
      busyMs.set(group, (busyMs.get(group) ?? 0) + ms);
      totalBusyMs += ms;
    };
    for (const p of this.processed) spend(p.group, p.from, p.to);
    for (const m of this.messages.values()) {
      if (m.receiveCount === 0 || m.visibleAt <= now) continue;
      totalInFlight++;
      // A message without a group is a tenant of its own: it counts in the total only.
      if (m.group === undefined) continue;
      inFlight.set(m.group, (inFlight.get(m.group) ?? 0) + 1);
      if (m.processingSince !== undefined) spend(m.group, m.processingSince, now);
    }
    const noisy = new Set<string>();
    for (const [group, sentAt] of this.lastSentAt) {
      if (now - sentAt > fairQueueModel.quietAfterIdleMs) continue;
      const count = inFlight.get(group) ?? 0;
      const byConcurrency =
        count >= fairQueueModel.minInFlight && count > fairQueueModel.inFlightShare * totalInFlight;
      const byTime =
        totalBusyMs > 0 &&
        (busyMs.get(group) ?? 0) > fairQueueModel.processingTimeShare * totalBusyMs;
      if (byConcurrency || byTime) noisy.add(group);
    }
    return { noisy, inFlight };
  }

  private endProcessing(message: QueuedMessage, at: number): void {
    if (message.processingSince === undefined) return;
    if (message.group !== undefined && at > message.processingSince) {
      this.processed.push({ group: message.group, from: message.processingSince, to: at });
    }
    message.processingSince = undefined;
  }

  /** DeleteMessageBatch, as the event source mapping does for the records that succeeded. */
  async delete(records: readonly QueueRecord[]): Promise<void> {
    if (records.length === 0) return;
    await this.clock.sleep(this.latencyMs);
    this.stats.deletes++;
    for (const record of records) {
      const message = this.byReceipt.get(record.receiptHandle);
      if (message === undefined) continue;
      this.endProcessing(message, this.clock.ms);
      this.messages.delete(message.id);
      this.byReceipt.delete(record.receiptHandle);
    }
  }

  private add(body: string, delaySeconds: number, group: string | undefined): void {
    const id = `m-${++this.nextId}`;
    const message: QueuedMessage = {
      id,
      body,
      group,
      visibleAt: 0,
      receiveCount: 0,
      receipt: '',
      processingSince: undefined,
    };
    this.messages.set(id, message);
    if (group !== undefined) this.lastSentAt.set(group, this.clock.ms);
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

/** The host set's chunks one instance holds in memory, by the set's hash. */
interface ChunkCache {
  hash: string | undefined;
}

export interface StateStats {
  calls: number;
  /** DynamoDB on-demand write and read request units, by AWS's rounding (see `Units`). */
  wru: number;
  rru: number;
}

/**
 * Request units of one DynamoDB request: writes 1 per KB of the larger of the item before and
 * after (a refused conditional write too), strongly consistent reads 1 per 4 KB, transactions
 * twice, scans half (eventually consistent).
 */
interface Units {
  readonly wru: number;
  readonly rru: number;
}

const write = (wru: number): Units => ({ wru, rru: 0 });
const read = (rru: number): Units => ({ wru: 0, rru });

/** Units per `unitBytes` of the larger of two item versions (each as stored: JSON). */
function itemUnits(before: unknown, after: unknown, unitBytes: number): number {
  const size = (item: unknown) => (item === undefined ? 0 : JSON.stringify(item).length);
  return Math.max(1, Math.ceil(Math.max(size(before), size(after)) / unitBytes));
}

function chunkUnits(hosts: EligibleHosts | undefined, unitBytes: number): number {
  return Math.max(1, Math.ceil(JSON.stringify(hosts?.hosts ?? []).length / unitBytes));
}

/** How the state is laid out: release 0.1 kept each Service's lease on its record item. */
export interface StateLayout {
  readonly leaseOnRecord: boolean;
}

type Item = Record<string, unknown>;

/**
 * The state table with DynamoStateStore's semantics (a Service's lease on an item of its own,
 * with fencing counter and dirty flag, and failure counting; record writes conditioned on the
 * version read), one latency per DynamoDB request it would make.
 */
export class FakeStateTable implements RuntimeStore {
  readonly stats: StateStats = { calls: 0, wru: 0, rru: 0 };
  readonly items = new Map<string, Item>();
  private eligible: EligibleHosts | undefined;
  /** The fence of the node-sync run that stored the set (DynamoStateStore's meta item). */
  private eligibleFence: number | undefined;
  /** Per lease, the record version its holder last saw (DynamoStateStore's optimistic check). */
  private readonly seen = new WeakMap<Lease, { ver: number | undefined; hasRecord: boolean }>();
  private versions = 0;

  constructor(
    private readonly clock: VirtualClock,
    private readonly latencyMs: number,
    private readonly layout: StateLayout = { leaseOnRecord: false },
    private readonly meter?: LambdaMeter,
  ) {}

  /** Seeds a Service record without latency (the state before the node event). */
  seed(record: ServiceRecord): void {
    const pk = servicePk(record.key);
    this.items.set(pk, { pk, rec: structuredClone(record) });
  }

  /** The stored eligible host set's hash, read without a simulated call (for measurements). */
  get eligibleHash(): string | undefined {
    return this.eligible?.hash;
  }

  seedEligibleHosts(hosts: EligibleHosts): void {
    this.eligible = structuredClone(hosts);
  }

  record(key: ServiceKey): ServiceRecord | undefined {
    return this.items.get(servicePk(key))?.rec as ServiceRecord | undefined;
  }

  acquireServiceLease(key: ServiceKey, owner: string, ttlSeconds: number): Promise<AcquireResult> {
    return this.acquire(serviceLeasePk(key), owner, ttlSeconds);
  }

  acquireRunLease(run: GlobalRun, owner: string, ttlSeconds: number): Promise<AcquireResult> {
    return this.acquire(leasePk(run), owner, ttlSeconds);
  }

  /** As DynamoStateStore: the gate is part of the one conditional write, and writes nothing. */
  async acquireNodeSyncLease(
    owner: string,
    ttlSeconds: number,
    gate: RunGate,
  ): Promise<GatedAcquireResult> {
    const item = this.item(nodeSyncLeasePk);
    const nowCalendar = this.clock.now().getTime();
    const lastRun = typeof item.lastRunAtMs === 'number' ? item.lastRunAtMs : undefined;
    const tick = typeof item.chain === 'string' && gate.chains.includes(item.chain);
    if (lastRun !== undefined && !tick && lastRun + gate.minIntervalMs > nowCalendar) {
      await this.call(write(1));
      return { acquired: false, tooSoon: true, dueAtMs: lastRun + gate.minIntervalMs };
    }
    return this.acquire(nodeSyncLeasePk, owner, ttlSeconds);
  }

  private async acquire(pk: string, owner: string, ttlSeconds: number): Promise<AcquireResult> {
    await this.call(this.leaseWrite(pk));
    const now = this.clock.ms;
    const item = this.item(pk);
    if (item.leaseOwner === undefined || Number(item.leaseUntil) < now) {
      const unverified = item.leaseOwner !== undefined || item.unverified === true;
      const pendingChange = item.dirty === true;
      item.leaseOwner = owner;
      item.leaseUntil = now + ttlSeconds * 1000;
      item.fence = Number(item.fence ?? 0) + 1;
      item.dirty = false;
      return {
        acquired: true,
        lease: {
          id: pk,
          owner,
          fence: Number(item.fence),
          failures: Number(item.failures ?? 0),
          unverified,
          pendingChange,
          keptSlots: parseKeptSlots(item.keptSlots),
        },
      };
    }
    await this.call(this.leaseWrite(pk));
    item.dirty = true;
    return { acquired: false, heldUntil: Number(item.leaseUntil) };
  }

  async finish(
    lease: Lease,
    failures: FailureUpdate,
    ttlSeconds: number,
    unverified = false,
    _retryAt?: number,
    keptSlots: readonly KeptSlot[] = [],
  ): Promise<FinishResult & { failures?: number }> {
    await this.call(this.leaseWrite(lease.id));
    const item = this.item(lease.id);
    const holds = item.leaseOwner === lease.owner && item.fence === lease.fence;
    if (holds && item.dirty !== true)
      return this.release(lease, item, failures, unverified, keptSlots);
    await this.call(this.leaseWrite(lease.id));
    if (!holds) return { kind: 'lost' };
    item.dirty = false;
    item.leaseUntil = this.clock.ms + ttlSeconds * 1000;
    return { kind: 'again' };
  }

  /** Releases whatever the dirty flag says (one conditional write), as DynamoStateStore does. */
  async handBack(
    lease: Lease,
    failures: FailureUpdate,
    unverified = false,
    _retryAt?: number,
    keptSlots: readonly KeptSlot[] = [],
  ): Promise<FinishResult & { failures?: number }> {
    await this.call(this.leaseWrite(lease.id));
    const item = this.item(lease.id);
    if (item.leaseOwner !== lease.owner || item.fence !== lease.fence) return { kind: 'lost' };
    return this.release(lease, item, failures, unverified, keptSlots);
  }

  private release(
    lease: Lease,
    item: Item,
    failures: FailureUpdate,
    unverified: boolean,
    keptSlots: readonly KeptSlot[],
  ): FinishResult & { failures?: number } {
    delete item.leaseOwner;
    delete item.leaseUntil;
    if (keptSlots.length > 0) item.keptSlots = keptSlots.map((slot) => ({ ...slot }));
    else delete item.keptSlots;
    item.dirty = false;
    if (unverified) item.unverified = true;
    else delete item.unverified;
    if (failures === 'reset') item.failures = 0;
    if (failures === 'increment') item.failures = Number(item.failures ?? 0) + 1;
    // A Service's lease item goes once its holder saw the record gone: with no failures to
    // keep, the release is that DeleteItem (DynamoStateStore.releaseByDeleting).
    const seen = this.seen.get(lease);
    if (
      lease.id.startsWith(serviceLeasePk('')) &&
      seen?.hasRecord === false &&
      !item.failures &&
      !item.unverified &&
      item.keptSlots === undefined
    ) {
      this.items.delete(lease.id);
    }
    return { kind: 'released', failures: Number(item.failures ?? 0) };
  }

  /**
   * One function instance's view of the table: DynamoStateStore keeps the host set's chunks it
   * last read or wrote in memory (HostSetItems), so an instance that has them reads only the meta
   * item. `warm`: the instance has the current set already (the node-sync function's instances
   * read it at every tick of the timer chain, every 100 s).
   */
  instanceView(warm = false): RuntimeStore {
    const cache: ChunkCache = { hash: warm ? this.eligible?.hash : undefined };
    return {
      acquireServiceLease: (key, owner, ttl) => this.acquireServiceLease(key, owner, ttl),
      acquireRunLease: (run, owner, ttl) => this.acquireRunLease(run, owner, ttl),
      acquireNodeSyncLease: (owner, ttl, gate) => this.acquireNodeSyncLease(owner, ttl, gate),
      finish: (lease, failures, ttl, unverified, retryAt, kept) =>
        this.finish(lease, failures, ttl, unverified, retryAt, kept),
      handBack: (lease, failures, unverified, retryAt, kept) =>
        this.handBack(lease, failures, unverified, retryAt, kept),
      fencedBy: (lease) => this.fencedBy(lease, cache),
      listServiceItems: () => this.listServiceItems(),
      putPendingEvents: (events, expiresAt) => this.putPendingEvents(events, expiresAt),
      getPendingEvents: (ids) => this.getPendingEvents(ids),
      deletePendingEvents: (ids) => this.deletePendingEvents(ids),
      nodeSyncTimer: () => this.nodeSyncTimer(),
      recordNodeSyncRun: (atMs) => this.recordNodeSyncRun(atMs),
      claimCoalescedPass: (untilMs) => this.claimCoalescedPass(untilMs),
      releaseCoalescedPass: () => this.releaseCoalescedPass(),
      recordTick: (atMs) => this.recordTick(atMs),
      startTimerChain: (chain, atMs) => this.startTimerChain(chain, atMs),
      sweepBook: () => this.sweepBook(),
      startResyncPass: (pass, previous) => this.startResyncPass(pass, previous),
      markOrphanSeen: (uid, atMs) => this.markOrphanSeen(uid, atMs),
      clearOrphan: (uid) => this.clearOrphan(uid),
      recordSweepRun: (atMs) => this.recordSweepRun(atMs),
    };
  }

  fencedBy(lease: Lease, cache: ChunkCache = { hash: undefined }): StateStore {
    // The record item is written whole, conditioned on the version this lease's holder saw.
    const recordWrite = async (key: ServiceKey, rec: ServiceRecord | undefined) => {
      await this.call(write(this.recordUnits(this.items.get(servicePk(key)), { rec }, 1024)));
      const item = this.items.get(servicePk(key));
      if (lease.id !== serviceLeasePk(key) || item?.ver !== this.seen.get(lease)?.ver) {
        throw new BusyError(`${key} was written since lease ${lease.id} read it; not writing`);
      }
      const ver = ++this.versions;
      const pk = servicePk(key);
      this.items.set(pk, rec === undefined ? { pk, ver } : { pk, rec, ver });
      this.seen.set(lease, { ver, hasRecord: rec !== undefined });
    };
    const fenced = async (apply: () => void) => {
      // A transaction: the lease check and the meta item, each billed twice.
      await this.call(write(4));
      const item = this.item(lease.id);
      if (item.leaseOwner !== lease.owner || item.fence !== lease.fence) {
        throw new BusyError(`lease on ${lease.id} was lost (fence ${lease.fence}); not writing`);
      }
      apply();
    };
    return {
      getService: async (key) => {
        await this.call(read(this.recordUnits(this.items.get(servicePk(key)), undefined, 4096)));
        const item = this.items.get(servicePk(key));
        const rec = item?.rec;
        this.seen.set(lease, {
          ver: item?.ver as number | undefined,
          hasRecord: rec !== undefined,
        });
        return rec === undefined ? undefined : (structuredClone(rec) as ServiceRecord);
      },
      putService: (record) =>
        recordWrite(record.key, JSON.parse(JSON.stringify(record)) as ServiceRecord),
      checkStorable: () => undefined,
      // A tombstone stays (DynamoDB's TTL removes it a day later).
      deleteService: (key) => recordWrite(key, undefined),
      markKept: async (key, kept) => {
        await this.call(write(1));
        const item = this.item(keptPk(key.slice(0, key.indexOf('/'))));
        const keys = new Set((item.keys as string[] | undefined) ?? []);
        if (kept) keys.add(key);
        else keys.delete(key);
        item.keys = [...keys];
      },
      listServiceHosts: () => this.listServiceHosts(),
      getEligibleHosts: async () => {
        // The meta item, then the chunk (one chunk holds ~3,000 hosts) unless the instance has it.
        await this.call(read(1));
        if (this.eligible !== undefined && cache.hash !== this.eligible.hash)
          await this.call(read(chunkUnits(this.eligible, 4096)));
        cache.hash = this.eligible?.hash;
        return this.eligible === undefined ? undefined : structuredClone(this.eligible);
      },
      putEligibleHosts: async (hosts) => {
        // Chunk Put, meta Get, the meta Put (node sync's: fenced on the item itself; a Service
        // sync's first set: a TransactWrite with a check on its lease), old chunk Delete.
        await this.call(write(chunkUnits(hosts, 1024)));
        await this.call(read(1));
        if (lease.id === nodeSyncLeasePk) {
          await this.call(write(1));
          if (this.eligibleFence !== undefined && this.eligibleFence > lease.fence)
            throw new BusyError(`lease on ${lease.id} was lost; not replacing the host set`);
          this.eligible = structuredClone(hosts);
          this.eligibleFence = lease.fence;
        } else {
          await fenced(() => {
            this.eligible = structuredClone(hosts);
            this.eligibleFence = undefined;
          });
        }
        cache.hash = hosts.hash;
        await this.call(write(1));
      },
    };
  }

  // Each bookkeeping read or write is one request on the run's lease item, as in DynamoStateStore.

  async nodeSyncTimer(): Promise<NodeSyncTimer> {
    await this.call(read(1));
    const item = this.items.get(nodeSyncLeasePk);
    return {
      chain: typeof item?.chain === 'string' ? item.chain : undefined,
      lastRunAtMs: typeof item?.lastRunAtMs === 'number' ? item.lastRunAtMs : 0,
      lastTickAtMs: typeof item?.lastTickAt === 'number' ? item.lastTickAt : 0,
    };
  }

  async recordNodeSyncRun(atMs: number): Promise<void> {
    await this.call();
    Object.assign(this.item(nodeSyncLeasePk), { lastRunAtMs: atMs });
  }

  async claimCoalescedPass(untilMs: number): Promise<boolean> {
    await this.call();
    const item = this.item(nodeSyncLeasePk);
    // The runtime's clock (calendar ms), as the real store's condition compares it.
    if (
      typeof item.coalescedUntil === 'number' &&
      item.coalescedUntil >= this.clock.now().getTime()
    ) {
      return false;
    }
    item.coalescedUntil = untilMs;
    return true;
  }

  async releaseCoalescedPass(): Promise<void> {
    await this.call();
    delete this.item(nodeSyncLeasePk).coalescedUntil;
  }

  async recordTick(atMs: number): Promise<void> {
    await this.call();
    this.item(nodeSyncLeasePk).lastTickAt = atMs;
  }

  async startTimerChain(chain: string, atMs: number): Promise<void> {
    await this.call();
    Object.assign(this.item(nodeSyncLeasePk), { chain, lastTickAt: atMs });
  }

  async sweepBook(): Promise<SweepBook> {
    await this.call(read(1));
    const item = this.items.get(sweepLeasePk);
    return {
      resyncPass: typeof item?.resyncPass === 'string' ? item.resyncPass : undefined,
      previousResyncPass:
        typeof item?.previousResyncPass === 'string' ? item.previousResyncPass : undefined,
      orphansFirstSeen: new Map(
        Object.entries((item?.orphans as Record<string, number> | undefined) ?? {}),
      ),
    };
  }

  async startResyncPass(pass: string, previous: string | undefined): Promise<void> {
    await this.call();
    Object.assign(this.item(sweepLeasePk), {
      resyncPass: pass,
      ...(previous !== undefined ? { previousResyncPass: previous } : {}),
    });
  }

  async markOrphanSeen(uid: string, atMs: number): Promise<void> {
    await this.call();
    const item = this.item(sweepLeasePk);
    item.orphans = { ...(item.orphans as Record<string, number> | undefined), [uid]: atMs };
  }

  async clearOrphan(uid: string): Promise<void> {
    await this.call();
    const orphans = this.item(sweepLeasePk).orphans as Record<string, number> | undefined;
    if (orphans !== undefined) delete orphans[uid];
  }

  async recordSweepRun(_atMs: number): Promise<void> {
    await this.call();
  }

  // The benchmark runs no sweep: its scan is not modelled.
  listServiceItems(): Promise<ServiceItemSummary[]> {
    return Promise.reject(new Error("the benchmark does not model the sweep's scan"));
  }

  // The benchmark publishes no lifecycle events: the runtime's event queue is never used.
  putPendingEvents(_events: readonly LifecycleEvent[], _expiresAt: Date): Promise<void> {
    return Promise.reject(new Error('the benchmark keeps no pending lifecycle events'));
  }

  getPendingEvents(_eventIds: readonly string[]): Promise<LifecycleEvent[]> {
    return Promise.resolve([]);
  }

  deletePendingEvents(_eventIds: readonly string[]): Promise<void> {
    return Promise.resolve();
  }

  /** A Scan reads at most 1 MB per page: one request per MB of items. */
  private async listServiceHosts(): Promise<ServiceHostsState[]> {
    let bytes = 0;
    const result: ServiceHostsState[] = [];
    for (const item of this.items.values()) {
      const rec = item.rec as ServiceRecord | undefined;
      bytes += JSON.stringify(item).length;
      if (rec !== undefined)
        result.push({ key: rec.key, hostsHash: rec.hostsHash, nodeSelector: rec.nodeSelector });
    }
    const pages = Math.max(1, Math.ceil(bytes / 1_000_000));
    // Eventually consistent: half a unit per 4 KB read.
    for (let i = 0; i < pages; i++)
      await this.call(read(Math.ceil(Math.min(bytes, 1_000_000) / 4096) / 2));
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

  private async call(units: Units = write(1)): Promise<void> {
    this.stats.calls++;
    this.stats.wru += units.wru;
    this.stats.rru += units.rru;
    const roundTrip = () => this.clock.sleep(this.latencyMs);
    await (this.meter === undefined ? roundTrip() : this.meter.call(roundTrip));
  }

  /**
   * A write to a lease item: one unit, or, in release 0.1's layout (the lease on the record
   * item), what a write of the ~2.5 KB record item costs.
   */
  private leaseWrite(pk: string): Units {
    if (!this.layout.leaseOnRecord || !pk.startsWith(serviceLeasePk(''))) return write(1);
    const key = pk.slice(serviceLeasePk('').length);
    return write(Math.max(1, itemUnits(this.items.get(servicePk(key)), undefined, 1024)));
  }

  /**
   * Units of a Service's record item: as DynamoStateStore stores it (the record compressed,
   * state/record-item.ts), or, in release 0.1's layout, as JSON (0.1 wrote `rec` as text).
   */
  private recordUnits(before: Item | undefined, after: Item | undefined, unitBytes: number) {
    if (this.layout.leaseOnRecord) return itemUnits(before, after, unitBytes);
    const size = (item: Item | undefined) => {
      if (item === undefined) return 0;
      const rec = item.rec as ServiceRecord | undefined;
      // pk and the version token besides the record's attributes.
      const fixed = (typeof item.pk === 'string' ? item.pk.length : 0) + 2 + 'ver'.length + 36;
      if (rec === undefined) return fixed;
      return (
        fixed +
        Object.entries(storedRecordAttributes(rec)).reduce(
          (n, [name, value]) =>
            n +
            name.length +
            (typeof value === 'string' ? Buffer.byteLength(value) : value.byteLength),
          0,
        )
      );
    };
    return Math.max(1, Math.ceil(Math.max(size(before), size(after)) / unitBytes));
  }
}

/** Wraps every method of `target` so it first waits `latencyMs` (a remote API). */
export function withLatency<T extends object>(
  target: T,
  clock: VirtualClock,
  latencyMs: number,
  counter?: { calls: number },
  meter?: LambdaMeter,
): T {
  return new Proxy(target, {
    get(object, property, receiver) {
      const value: unknown = Reflect.get(object, property, receiver);
      if (typeof value !== 'function') return value;
      return async (...args: unknown[]) => {
        if (counter) counter.calls++;
        const roundTrip = () => clock.sleep(latencyMs);
        await (meter === undefined ? roundTrip() : meter.call(roundTrip, 'sync'));
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
  /** Bills each invocation's handler (GB-seconds, waiting share). */
  readonly meter?: LambdaMeter | undefined;
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
  /** The function's batch handler: the work queue's by default, processNodeBatch for the node queue. */
  handler: (
    records: readonly QueueRecord[],
    runtime: RuntimeContext,
  ) => Promise<BatchResult> = processWorkBatch,
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
        const result = await (options.meter === undefined
          ? handler(records, runtime)
          : options.meter.invoke(() => handler(records, runtime)));
        stats.busyMs += clock.ms - started;
        const failed = new Set(result.batchItemFailures.map((f) => f.itemIdentifier));
        await queue.delete(records.filter((r) => !failed.has(r.messageId)));
      }
    })();
  }
  return stats;
}
