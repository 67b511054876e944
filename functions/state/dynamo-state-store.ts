import { randomBytes } from 'node:crypto';
import { ConditionalCheckFailedException } from '@aws-sdk/client-dynamodb';
import {
  DeleteCommand,
  PutCommand,
  UpdateCommand,
  type DynamoDBDocumentClient,
} from '@aws-sdk/lib-dynamodb';
import { BusyError } from '../core/errors';
import type { ServiceKey } from '../core/keys';
import { maxKeptSlots, type KeptSlot } from '../core/registration-slots';
import type { EligibleHosts, ServiceHostsState } from '../core/node-sync-plan';
import type { LifecycleEvent } from '../contract/lifecycle-events';
import type { Clock, ServiceRecord, StateStore } from '../sync/ports';
import type {
  AcquireResult,
  GatedAcquireResult,
  RunGate,
  FailureUpdate,
  FinishResult,
  GlobalRun,
  Lease,
  NodeSyncTimer,
  RuntimeStore,
  ServiceItemSummary,
  SweepBook,
} from '../runtime/ports';
import { HostSetItems } from './host-set-items';
import { PendingEventItems } from './pending-event-items';
import { RunBookkeeping } from './run-bookkeeping';
import { parseRecord, storedRecordAttributes } from './record-item';
import { releaseUpdate } from './lease-release';
import { listServiceHosts, listServiceItems } from './service-scans';
import { retryable, StateTable } from './state-table';
import {
  keptPk,
  leasePk,
  nodeSyncLeasePk,
  serviceLeasePk,
  serviceLeasePrefix,
  servicePk,
} from './table-layout';
import { acquireLease } from './lease-acquire';

/**
 * Leases and records (the item families are in table-layout.ts).
 *
 * Why a Service's lease has an item of its own: DynamoDB bills a write by the larger of the item
 * before and after, per started KB. The record is a few KB, the lease item under 200 bytes, so
 * taking, extending and releasing the lease and marking it dirty cost 1 write unit each instead
 * of 3 or more.
 *
 * How record writes stay safe without the lease on the same item (a condition cannot read another
 * item outside a transaction, and a transaction bills each item twice): optimistic concurrency.
 * The lease's view remembers the `ver` it last read or wrote, and writes (`putService`, and
 * `deleteService`, which leaves a tombstone) only where `ver` is still that token, or absent when
 * it saw none. Tokens are never reused, so a holder whose lease expired can never overwrite what a
 * newer holder wrote, nor can a newer holder write on a read older than a stale holder's write:
 * either write fails with BusyError, and the failing holder marks its own lease dirty, so a holder
 * that still has its lease runs one more pass on a fresh read (a stale one finds its lease lost).
 * A stale write that lands before the newer holder read anything is not lost work: it records what
 * that holder did in AWS, and the newer holder reads it. The tombstone keeps a stale creator from
 * bringing a deleted record back; TTL removes it (free) a day later, long after any holder is gone
 * (a Lambda runs at most 15 minutes, a lease outlasts it).
 *
 * Why a known Service's record is written once per pass, after its AWS changes, and not also
 * before them with the checkpoint cleared: a pass that fails writes that itself, and a pass that
 * dies never releases its lease. Taking a lease that expired unreleased marks it `unverified`, as
 * does releasing it after a pass that failed or only updated hosts while unverified; a holder of
 * an unverified lease checks AWS (a drift check) instead of trusting the checkpoint, and only a
 * full sync that completes clears the mark. The mark rides on the acquire and release writes the
 * lease pays for anyway, so it costs no write; the record write it replaces cost 2–3 units.
 *
 * Release 0.1 kept the lease on the `svc#` item. Its items are read as records; a live 0.1 lease
 * on one (`leaseOwner` with `leaseUntil` not past) makes the key busy: the 0.1 holder is marked
 * dirty so it runs once more, and no write lands while it lasts. The first write replaces the
 * item whole, which drops the 0.1 lease attributes (its failure count restarts), and a 0.1 item
 * left with no record is deleted when a release finds the Service gone.
 */

/** How long a deleted record's tombstone stays (see the class comment). */
const tombstoneSeconds = 24 * 60 * 60;

/** What a lease's holder last saw of its Service's record item. */
interface RecordSeen {
  /** The `ver` token read or written; undefined when there was none. */
  readonly ver: string | undefined;
  readonly hasRecord: boolean;
  /** A 0.1 item with no record (only lease bookkeeping): removed once the Service is gone. */
  readonly legacyLeftover: boolean;
}

export class DynamoStateStore implements RuntimeStore {
  /** Per lease, what its holder last saw of the record: the token its next write is conditioned on. */
  private readonly seen = new WeakMap<Lease, RecordSeen>();

  private readonly table: StateTable;
  private readonly doc: DynamoDBDocumentClient;
  private readonly tableName: string;
  private readonly clock: Clock;
  private readonly hostSet: HostSetItems;
  private readonly pendingEvents: PendingEventItems;
  private readonly bookkeeping: RunBookkeeping;

  constructor(doc: DynamoDBDocumentClient, tableName: string, clock: Clock) {
    this.table = new StateTable(doc, tableName, clock);
    this.doc = doc;
    this.tableName = tableName;
    this.clock = clock;
    this.hostSet = new HostSetItems(this.table);
    this.pendingEvents = new PendingEventItems(this.table);
    this.bookkeeping = new RunBookkeeping(this.table);
  }

  /**
   * Takes the lease on an item (lease-acquire.ts): with a new fencing counter, or marks it dirty
   * for its holder, or, with a `gate`, refuses it as too soon after the last run.
   */
  acquire(pk: string, owner: string, ttlSeconds: number): Promise<AcquireResult>;
  acquire(
    pk: string,
    owner: string,
    ttlSeconds: number,
    gate: RunGate | undefined,
  ): Promise<GatedAcquireResult>;
  acquire(
    pk: string,
    owner: string,
    ttlSeconds: number,
    gate?: RunGate,
  ): Promise<GatedAcquireResult> {
    return acquireLease(this.doc, this.tableName, this.clock, { pk, owner, ttlSeconds, gate });
  }

  /**
   * Ends a pass: releases the lease and applies the failure update, unless the item was marked
   * dirty meanwhile, in which case the lease is extended and the caller runs again (S5).
   */
  async finish(
    lease: Lease,
    failures: FailureUpdate,
    ttlSeconds: number,
    unverified = false,
    /** With an increment: when the retry is due (epoch ms), for node sync to leave it until then. */
    retryAt?: number,
    /** Registration slots the key keeps for its next pass (`keptSlots`, written with the release). */
    keptSlots: readonly KeptSlot[] = [],
  ): Promise<FinishResult & { failures?: number }> {
    const released = await this.release(lease, failures, {
      unlessDirty: true,
      unverified,
      retryAt,
      keptSlots,
    });
    if (released.kind === 'released') return released;
    try {
      await this.fencedUpdate(lease, 'SET dirty = :false, leaseUntil = :until', {
        ':false': false,
        ':until': this.clock.now().getTime() + ttlSeconds * 1000,
      });
      return { kind: 'again' };
    } catch (error) {
      if (error instanceof BusyError) return { kind: 'lost' };
      throw error;
    }
  }

  /**
   * Releases the lease whatever the dirty flag says, applying the failure update. For a holder
   * that stops taking passes while changes keep arriving: it must requeue the key itself, since
   * the messages that set the flag were acknowledged as busy.
   */
  async handBack(
    lease: Lease,
    failures: FailureUpdate,
    unverified = false,
    retryAt?: number,
    keptSlots: readonly KeptSlot[] = [],
  ): Promise<{ kind: 'released'; failures: number } | { kind: 'lost' }> {
    const released = await this.release(lease, failures, {
      unlessDirty: false,
      unverified,
      retryAt,
      keptSlots,
    });
    return released.kind === 'released' ? released : { kind: 'lost' };
  }

  private async release(
    lease: Lease,
    failures: FailureUpdate,
    options: {
      unlessDirty: boolean;
      unverified: boolean;
      retryAt?: number | undefined;
      keptSlots: readonly KeptSlot[];
    },
  ): Promise<{ kind: 'released'; failures: number } | { kind: 'refused' }> {
    const retryAt = failures === 'increment' ? options.retryAt : undefined;
    const keptSlots = options.keptSlots.slice(0, maxKeptSlots);
    const seen = this.seen.get(lease);
    const sawNoRecord = seen !== undefined && !seen.hasRecord;
    // With no record there is no checkpoint to distrust: the mark would only keep the item.
    const unverified = options.unverified && !sawNoRecord;
    if (
      sawNoRecord &&
      failures !== 'increment' &&
      keptSlots.length === 0 &&
      // Failures to keep make the conditional delete fail, a billed write for nothing.
      !(failures === 'keep' && lease.failures > 0) &&
      (await this.releaseByDeleting(lease, failures, options.unlessDirty))
    ) {
      if (seen?.legacyLeftover === true) await this.removeLegacyLeftover(lease.id);
      return { kind: 'released', failures: 0 };
    }
    try {
      const result = await this.doc.send(
        new UpdateCommand({
          TableName: this.tableName,
          Key: { pk: lease.id },
          ...releaseUpdate(
            lease,
            { failures, unverified, retryAt, keptSlots, unlessDirty: options.unlessDirty },
            this.clock.now(),
          ),
          ReturnValues: 'ALL_NEW',
        }),
      );
      // Only a holder that saw the record gone removes the lease item, and only without failures
      // to keep: a conditional delete that fails is still a billed write.
      const left = result.Attributes ?? {};
      if (sawNoRecord && !(Number(left.failures ?? 0) > 0)) {
        await this.removeIfEmpty(lease.id);
        if (seen?.legacyLeftover === true) await this.removeLegacyLeftover(lease.id);
      }
      return { kind: 'released', failures: Number(left.failures ?? 0) };
    } catch (error) {
      if (error instanceof ConditionalCheckFailedException) return { kind: 'refused' };
      throw retryable(error, 'release lease');
    }
  }

  /**
   * The port the use cases see while holding `lease`: record writes are conditioned on what its
   * reads saw (see the class comment), the host set on the lease itself.
   */
  fencedBy(lease: Lease): StateStore {
    return {
      getService: (key) => this.getServiceFor(key, lease),
      putService: (record) => this.putService(record, lease),
      checkStorable: (record) => {
        storedRecordAttributes(record);
      },
      deleteService: (key) => this.deleteService(key, lease),
      markKept: (key, kept) => this.markKept(key, kept),
      listServiceHosts: () => this.listServiceHosts(),
      getEligibleHosts: () => this.getEligibleHosts(),
      putEligibleHosts: (hosts) => this.putEligibleHosts(hosts, lease),
    };
  }

  /**
   * One UpdateItem on the namespace's `kept#` item: ADD or DELETE the key in its string set. Only
   * deletes refused by deletion protection add, so the set holds the namespace's kept NLBs alone
   * (an item per namespace that ever kept one; emptied, it stays as a bare key).
   */
  async markKept(key: ServiceKey, kept: boolean): Promise<void> {
    const namespace = key.slice(0, key.indexOf('/'));
    try {
      await this.doc.send(
        new UpdateCommand({
          TableName: this.tableName,
          Key: { pk: keptPk(namespace) },
          UpdateExpression: kept ? 'ADD #keys :key' : 'DELETE #keys :key',
          ExpressionAttributeNames: { '#keys': 'keys' },
          ExpressionAttributeValues: { ':key': new Set([key]) },
        }),
      );
    } catch (error) {
      throw retryable(
        error,
        kept ? 'mark the load balancer kept' : 'unmark the kept load balancer',
      );
    }
  }

  /** The keys of the namespace's load balancers kept by deletion protection: one GetItem. */
  async keptLoadBalancers(namespace: string): Promise<ServiceKey[]> {
    const item = await this.table.get(keptPk(namespace));
    const keys: unknown = item?.keys;
    return keys instanceof Set ? [...(keys as Set<ServiceKey>)].sort() : [];
  }

  /** Reads the record without a lease (status views, uninstall): remembers nothing. */
  async getService(key: ServiceKey): Promise<ServiceRecord | undefined> {
    return parseRecord(await this.table.get(servicePk(key)));
  }

  async getItem(pk: string): Promise<Record<string, unknown> | undefined> {
    return this.table.get(pk);
  }

  /**
   * Reads the record for `lease`'s holder and remembers its `ver` for the holder's next write.
   * A live 0.1 lease on the item makes the key busy (its holder is marked dirty to run again).
   */
  private async getServiceFor(key: ServiceKey, lease: Lease): Promise<ServiceRecord | undefined> {
    const pk = servicePk(key);
    const item = await this.table.get(pk);
    const now = this.clock.now().getTime();
    if (typeof item?.leaseOwner === 'string' && Number(item.leaseUntil) >= now) {
      await this.markLegacyDirty(pk, item.leaseOwner, now);
      throw new BusyError(`${key} is held by a release 0.1 lease until ${Number(item.leaseUntil)}`);
    }
    const record = parseRecord(item);
    if (lease.id === serviceLeasePk(key)) {
      this.seen.set(lease, {
        ver: typeof item?.ver === 'string' ? item.ver : undefined,
        hasRecord: record !== undefined,
        legacyLeftover: item !== undefined && record === undefined && item.ver === undefined,
      });
    }
    return record;
  }

  /** Conditioned on the record `lease`'s holder last saw: BusyError when someone wrote since. */
  async putService(record: ServiceRecord, lease: Lease): Promise<void> {
    if (lease.id !== serviceLeasePk(record.key))
      throw new BusyError(`lease ${lease.id} does not cover ${record.key}`);
    await this.writeRecord(lease, record.key, storedRecordAttributes(record));
  }

  /** Leaves a tombstone, so a stale holder cannot bring the record back (see the class comment). */
  async deleteService(key: ServiceKey, lease: Lease): Promise<void> {
    if (lease.id !== serviceLeasePk(key))
      throw new BusyError(`lease ${lease.id} does not cover ${key}`);
    await this.writeRecord(lease, key, {
      expiresAt: Math.ceil(this.clock.now().getTime() / 1000) + tombstoneSeconds,
    });
  }

  /**
   * Replaces the record item whole (a 0.1 item loses its lease attributes with it) if its `ver`
   * is still what the holder saw and no 0.1 lease on it is live.
   */
  private async writeRecord(
    lease: Lease,
    key: ServiceKey,
    attributes: Record<string, string | number | Uint8Array>,
  ): Promise<void> {
    const seen = this.seen.get(lease);
    // 16 random bytes: never reused, and a third of a UUID's length in an item billed per KB.
    const ver = randomBytes(16).toString('base64url');
    const now = this.clock.now().getTime();
    try {
      await this.doc.send(
        new PutCommand({
          TableName: this.tableName,
          Item: { pk: servicePk(key), ...attributes, ver },
          ConditionExpression: `${seen?.ver === undefined ? 'attribute_not_exists(ver)' : 'ver = :seen'} AND (attribute_not_exists(leaseOwner) OR leaseUntil < :now)`,
          ExpressionAttributeValues: {
            ':now': now,
            ...(seen?.ver === undefined ? {} : { ':seen': seen.ver }),
          },
        }),
      );
    } catch (error) {
      if (!(error instanceof ConditionalCheckFailedException))
        throw retryable(error, 'write state');
      // Our next pass must read afresh; if the lease is lost meanwhile, there is none.
      await this.fencedUpdate(lease, 'SET dirty = :true', { ':true': true }).catch(
        (markError: unknown) => {
          if (!(markError instanceof BusyError)) throw markError;
        },
      );
      throw new BusyError(
        `${key} was written by another holder since lease ${lease.id} (fence ${lease.fence}) read it; not writing`,
      );
    }
    this.seen.set(lease, { ver, hasRecord: 'recz' in attributes, legacyLeftover: false });
  }

  /** Has a live 0.1 holder run once more, as its own acquire would have (S5). */
  private async markLegacyDirty(pk: string, owner: string, now: number): Promise<void> {
    try {
      await this.doc.send(
        new UpdateCommand({
          TableName: this.tableName,
          Key: { pk },
          ConditionExpression: 'leaseOwner = :owner AND leaseUntil >= :now',
          UpdateExpression: 'SET dirty = :true',
          ExpressionAttributeValues: { ':owner': owner, ':now': now, ':true': true },
        }),
      );
    } catch (error) {
      if (!(error instanceof ConditionalCheckFailedException)) throw retryable(error, 'mark dirty');
    }
  }

  listServiceHosts(): Promise<ServiceHostsState[]> {
    return listServiceHosts(this.table);
  }

  listServiceItems(): Promise<ServiceItemSummary[]> {
    return listServiceItems(this.table);
  }

  acquireServiceLease(key: ServiceKey, owner: string, ttlSeconds: number): Promise<AcquireResult> {
    return this.acquire(serviceLeasePk(key), owner, ttlSeconds);
  }

  acquireRunLease(run: GlobalRun, owner: string, ttlSeconds: number): Promise<AcquireResult> {
    return this.acquire(leasePk(run), owner, ttlSeconds);
  }

  acquireNodeSyncLease(
    owner: string,
    ttlSeconds: number,
    gate: RunGate,
  ): Promise<GatedAcquireResult> {
    return this.acquire(nodeSyncLeasePk, owner, ttlSeconds, gate);
  }

  getEligibleHosts(): Promise<EligibleHosts | undefined> {
    return this.hostSet.getEligibleHosts();
  }

  putEligibleHosts(hosts: EligibleHosts, lease?: Lease): Promise<void> {
    return this.hostSet.putEligibleHosts(hosts, lease);
  }

  putPendingEvents(events: readonly LifecycleEvent[], expiresAt: Date): Promise<void> {
    return this.pendingEvents.putPendingEvents(events, expiresAt);
  }

  getPendingEvents(eventIds: readonly string[]): Promise<LifecycleEvent[]> {
    return this.pendingEvents.getPendingEvents(eventIds);
  }

  deletePendingEvents(eventIds: readonly string[]): Promise<void> {
    return this.pendingEvents.deletePendingEvents(eventIds);
  }

  nodeSyncTimer(): Promise<NodeSyncTimer> {
    return this.bookkeeping.nodeSyncTimer();
  }

  recordNodeSyncRun(atMs: number): Promise<void> {
    return this.bookkeeping.recordNodeSyncRun(atMs);
  }

  claimCoalescedPass(untilMs: number): Promise<boolean> {
    return this.bookkeeping.claimCoalescedPass(untilMs);
  }

  releaseCoalescedPass(): Promise<void> {
    return this.bookkeeping.releaseCoalescedPass();
  }

  recordTick(atMs: number): Promise<void> {
    return this.bookkeeping.recordTick(atMs);
  }

  startTimerChain(chain: string, atMs: number): Promise<void> {
    return this.bookkeeping.startTimerChain(chain, atMs);
  }

  sweepBook(): Promise<SweepBook> {
    return this.bookkeeping.sweepBook();
  }

  startResyncPass(pass: string, previous: string | undefined): Promise<void> {
    return this.bookkeeping.startResyncPass(pass, previous);
  }

  markOrphanSeen(uid: string, atMs: number): Promise<void> {
    return this.bookkeeping.markOrphanSeen(uid, atMs);
  }

  clearOrphan(uid: string): Promise<void> {
    return this.bookkeeping.clearOrphan(uid);
  }

  recordSweepRun(atMs: number): Promise<void> {
    return this.bookkeeping.recordSweepRun(atMs);
  }

  /** Plain attributes on an item (tests and operator tooling; the runtime uses named methods). */
  setAttributes(pk: string, values: Record<string, string | number | boolean>): Promise<void> {
    return this.table.setAttributes(pk, values);
  }

  private async fencedUpdate(
    lease: Lease,
    expression: string,
    values: Record<string, unknown>,
  ): Promise<void> {
    try {
      await this.doc.send(
        new UpdateCommand({
          TableName: this.tableName,
          Key: { pk: lease.id },
          ConditionExpression: 'leaseOwner = :owner AND fence = :fence',
          UpdateExpression: expression,
          ExpressionAttributeValues: { ...values, ':owner': lease.owner, ':fence': lease.fence },
        }),
      );
    } catch (error) {
      if (error instanceof ConditionalCheckFailedException) {
        throw new BusyError(`lease on ${lease.id} was lost (fence ${lease.fence}); not writing`);
      }
      throw retryable(error, 'write state');
    }
  }

  /**
   * Releases a Service's lease by deleting its item, when its holder saw no record and has no
   * failures to keep: one write instead of a release and a delete. False when the condition
   * fails (dirty, failures left, or the lease lost); the caller then releases the usual way.
   */
  private async releaseByDeleting(
    lease: Lease,
    failures: FailureUpdate,
    unlessDirty: boolean,
  ): Promise<boolean> {
    if (!lease.id.startsWith(serviceLeasePrefix)) return false;
    const conditions = [
      'leaseOwner = :owner',
      'fence = :fence',
      ...(unlessDirty ? ['dirty = :false'] : []),
      ...(failures === 'keep' ? ['(attribute_not_exists(failures) OR failures = :zero)'] : []),
    ];
    try {
      await this.doc.send(
        new DeleteCommand({
          TableName: this.tableName,
          Key: { pk: lease.id },
          ConditionExpression: conditions.join(' AND '),
          ExpressionAttributeValues: {
            ':owner': lease.owner,
            ':fence': lease.fence,
            ...(unlessDirty ? { ':false': false } : {}),
            ...(failures === 'keep' ? { ':zero': 0 } : {}),
          },
        }),
      );
      return true;
    } catch (error) {
      if (error instanceof ConditionalCheckFailedException) return false;
      throw retryable(error, 'release lease');
    }
  }

  /** A Service lease item that holds nothing but failure bookkeeping at zero goes away. */
  private async removeIfEmpty(pk: string): Promise<void> {
    if (!pk.startsWith(serviceLeasePrefix)) return;
    await this.conditionalDelete(
      pk,
      'attribute_not_exists(leaseOwner) AND attribute_not_exists(unverified) AND attribute_not_exists(keptSlots) AND (attribute_not_exists(failures) OR failures = :zero) AND (attribute_not_exists(dirty) OR dirty = :false)',
      { ':zero': 0, ':false': false },
    );
  }

  /** A release 0.1 `svc#` item with no record and no live 0.1 lease goes away. */
  private async removeLegacyLeftover(leasePk: string): Promise<void> {
    await this.conditionalDelete(
      servicePk(leasePk.slice(serviceLeasePrefix.length)),
      'attribute_not_exists(rec) AND attribute_not_exists(ver) AND (attribute_not_exists(leaseOwner) OR leaseUntil < :now)',
      { ':now': this.clock.now().getTime() },
    );
  }

  private async conditionalDelete(
    pk: string,
    condition: string,
    values: Record<string, unknown>,
  ): Promise<void> {
    try {
      await this.doc.send(
        new DeleteCommand({
          TableName: this.tableName,
          Key: { pk },
          ConditionExpression: condition,
          ExpressionAttributeValues: values,
        }),
      );
    } catch (error) {
      if (!(error instanceof ConditionalCheckFailedException))
        throw retryable(error, 'remove empty item');
    }
  }
}
