import { randomBytes } from 'node:crypto';
import {
  ConditionalCheckFailedException,
  TransactionCanceledException,
} from '@aws-sdk/client-dynamodb';
import {
  BatchGetCommand,
  BatchWriteCommand,
  type BatchWriteCommandOutput,
  DeleteCommand,
  GetCommand,
  PutCommand,
  ScanCommand,
  TransactWriteCommand,
  UpdateCommand,
  type DynamoDBDocumentClient,
} from '@aws-sdk/lib-dynamodb';
import { BusyError, InvariantError, RetryableError, TerminalError } from '../core/errors';
import type { ServiceKey } from '../core/keys';
import type { EligibleHosts, ServiceHostsState } from '../core/node-sync-plan';
import { lifecycleEventProblem, type LifecycleEvent } from '../contract/lifecycle-events';
import type { Clock, ServiceRecord, StateStore } from '../sync/ports';
import type {
  AcquireResult,
  FailureUpdate,
  FinishResult,
  GlobalRun,
  Lease,
  NodeSyncTimer,
  RuntimeStore,
  ServiceItemSummary,
  SweepBook,
} from '../runtime/ports';
import { decodeRecord, encodeRecord } from './record-codec';

/**
 * The state table: one DynamoDB table, partition key `pk`.
 *
 * | pk                   | holds |
 * | `svc#<ns>/<name>`    | `recz` (the ServiceRecord, compressed: record-codec.ts), `uid`, `hostsHash`, `nodeSelector`; `ver`, a token new on every write; after a delete only `ver` and `expiresAt` (a tombstone). Release 0.1 wrote the record as JSON in `rec` |
 * | `svclease#<ns>/<name>` | the Service's lease: `leaseOwner`, `leaseUntil` (ms), `fence`, `dirty`, `unverified`; `failures`, `failingSince` (ms), `retryAt` (ms), `lastPassAt` |
 * | `lease#<name>`       | a lease for global work (`node-sync`, `sweep`) and that work's bookkeeping |
 * | `hosts#meta`         | the eligible host set's `hash`, `chunkKey`, `warnedNodes`, `labelKeys`, `labelsHash`, `chunks` |
 * | `kept#<namespace>`  | `keys`: the namespace's Service keys whose NLB deletion protection keeps (tenant policy counting) |
 * | `hosts#chunk#<chunkKey>#<i>` | part `i` of the host list named by the meta item's `chunkKey` (its `hash`, plus `.labelsHash` when labels are tracked), as JSON (items hold at most 400 KB) |
 * | `evt#<eventId>`      | a lifecycle event EventBridge has not taken yet (`event` as JSON), gone by `expiresAt` (TTL, epoch s) |
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
const chunkBytes = 350_000;
/** A Service's record item, compressed record and copied-out attributes: DynamoDB items hold 400 KB, less `pk` and `ver`. */
export const maxRecordBytes = 380 * 1024;

export const servicePk = (key: ServiceKey) => `svc#${key}`;
/** A namespace's load balancers kept by deletion protection: a string set `keys`. */
export const keptPk = (namespace: string) => `kept#${namespace}`;
/** A Service's lease: not `lease#`, which names the global leases. */
export const serviceLeasePk = (key: ServiceKey) => `svclease#${key}`;
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
export const pendingEventPk = (eventId: string) => `evt#${eventId}`;
export const leasePk = (name: string) => `lease#${name}`;
export const nodeSyncLeasePk = leasePk('node-sync');
export const sweepLeasePk = leasePk('sweep');
const orphanPrefix = 'orphan#';

export class DynamoStateStore implements RuntimeStore {
  /**
   * The host list last read, by the chunk key it was read under. Chunks are named by their
   * content (the set's hash), so a chunk key never names another list: a host update reads the
   * small meta item and reuses the list while the set is unchanged. At 5,000 nodes the list is
   * about 550 KB, some 140 read units a read, which every host update of a node change paid.
   */
  private hostChunks:
    | { readonly chunkKey: string; readonly count: number; readonly hosts: EligibleHosts['hosts'] }
    | undefined;

  /** Per lease, what its holder last saw of the record: the token its next write is conditioned on. */
  private readonly seen = new WeakMap<Lease, RecordSeen>();

  constructor(
    private readonly doc: DynamoDBDocumentClient,
    private readonly tableName: string,
    private readonly clock: Clock,
  ) {}

  /**
   * Takes the lease on an item for `ttlSeconds`, with a new fencing counter. When someone else holds
   * it, marks the item dirty so the holder runs once more, and reports not acquired.
   */
  async acquire(pk: string, owner: string, ttlSeconds: number): Promise<AcquireResult> {
    const now = this.clock.now().getTime();
    try {
      const result = await this.doc.send(
        new UpdateCommand({
          TableName: this.tableName,
          Key: { pk },
          ConditionExpression: 'attribute_not_exists(leaseOwner) OR leaseUntil < :now',
          UpdateExpression:
            'SET leaseOwner = :owner, leaseUntil = :until, fence = if_not_exists(fence, :zero) + :one, dirty = :false',
          ExpressionAttributeValues: {
            ':now': now,
            ':owner': owner,
            ':until': now + ttlSeconds * 1000,
            ':zero': 0,
            ':one': 1,
            ':false': false,
          },
          // What the last holder left: a leaseOwner still there means it never released.
          ReturnValues: 'ALL_OLD',
        }),
      );
      const before = result.Attributes ?? {};
      return {
        acquired: true,
        lease: {
          id: pk,
          owner,
          fence: Number(before.fence ?? 0) + 1,
          failures: Number(before.failures ?? 0),
          unverified: typeof before.leaseOwner === 'string' || before.unverified === true,
          pendingChange: before.dirty === true,
        },
      };
    } catch (error) {
      if (!(error instanceof ConditionalCheckFailedException)) throw retryable(error, 'take lease');
    }
    try {
      const marked = await this.doc.send(
        new UpdateCommand({
          TableName: this.tableName,
          Key: { pk },
          ConditionExpression: 'attribute_exists(leaseOwner) AND leaseUntil >= :now',
          UpdateExpression: 'SET dirty = :true',
          ExpressionAttributeValues: { ':now': now, ':true': true },
          // When the lease runs out: the caller's message waits that long, not for ever.
          ReturnValues: 'ALL_NEW',
        }),
      );
      return { acquired: false, heldUntil: Number(marked.Attributes?.leaseUntil ?? now) };
    } catch (error) {
      if (!(error instanceof ConditionalCheckFailedException)) throw retryable(error, 'mark dirty');
      // Released in between: try once more to take it.
      return this.acquire(pk, owner, ttlSeconds);
    }
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
  ): Promise<FinishResult & { failures?: number }> {
    const released = await this.release(lease, failures, {
      unlessDirty: true,
      unverified,
      retryAt,
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
  ): Promise<{ kind: 'released'; failures: number } | { kind: 'lost' }> {
    const released = await this.release(lease, failures, {
      unlessDirty: false,
      unverified,
      retryAt,
    });
    return released.kind === 'released' ? released : { kind: 'lost' };
  }

  private async release(
    lease: Lease,
    failures: FailureUpdate,
    options: { unlessDirty: boolean; unverified: boolean; retryAt?: number | undefined },
  ): Promise<{ kind: 'released'; failures: number } | { kind: 'refused' }> {
    const retryAt = failures === 'increment' ? options.retryAt : undefined;
    const seen = this.seen.get(lease);
    const sawNoRecord = seen !== undefined && !seen.hasRecord;
    // With no record there is no checkpoint to distrust: the mark would only keep the item.
    const unverified = options.unverified && !sawNoRecord;
    if (
      sawNoRecord &&
      failures !== 'increment' &&
      // Failures to keep make the conditional delete fail, a billed write for nothing.
      !(failures === 'keep' && lease.failures > 0) &&
      (await this.releaseByDeleting(lease, failures, options.unlessDirty))
    ) {
      if (seen?.legacyLeftover === true) await this.removeLegacyLeftover(lease.id);
      return { kind: 'released', failures: 0 };
    }
    // failingSince: when the current run of failures began, for the sweep's failing-Services gauge.
    const set = [
      ...(failures === 'reset' ? ['failures = :zero'] : []),
      ...(failures === 'increment'
        ? [
            'failures = if_not_exists(failures, :zero) + :one',
            'failingSince = if_not_exists(failingSince, :nowMs)',
          ]
        : []),
      ...(unverified ? ['unverified = :true'] : []),
      ...(retryAt !== undefined ? ['retryAt = :retryAt'] : []),
    ];
    const remove = [
      'leaseOwner',
      'leaseUntil',
      ...(failures === 'reset' ? ['failingSince', 'retryAt'] : []),
      ...(unverified ? [] : ['unverified']),
    ];
    const failureExpression = `${set.map((a) => `, ${a}`).join('')} REMOVE ${remove.join(', ')}`;
    try {
      const result = await this.doc.send(
        new UpdateCommand({
          TableName: this.tableName,
          Key: { pk: lease.id },
          ConditionExpression: options.unlessDirty
            ? 'leaseOwner = :owner AND fence = :fence AND dirty = :false'
            : 'leaseOwner = :owner AND fence = :fence',
          UpdateExpression: `SET lastPassAt = :now, dirty = :false${failureExpression}`,
          ExpressionAttributeValues: {
            ':owner': lease.owner,
            ':fence': lease.fence,
            ':false': false,
            ':now': this.clock.now().toISOString(),
            ...(failures !== 'keep' ? { ':zero': 0 } : {}),
            ...(failures === 'increment'
              ? { ':one': 1, ':nowMs': this.clock.now().getTime() }
              : {}),
            ...(unverified ? { ':true': true } : {}),
            ...(retryAt !== undefined ? { ':retryAt': retryAt } : {}),
          },
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
    const item = await this.get(keptPk(namespace));
    const keys: unknown = item?.keys;
    return keys instanceof Set ? [...(keys as Set<ServiceKey>)].sort() : [];
  }

  /** Reads the record without a lease (status views, uninstall): remembers nothing. */
  async getService(key: ServiceKey): Promise<ServiceRecord | undefined> {
    return parseRecord(await this.get(servicePk(key)));
  }

  async getItem(pk: string): Promise<Record<string, unknown> | undefined> {
    return this.get(pk);
  }

  /**
   * Reads the record for `lease`'s holder and remembers its `ver` for the holder's next write.
   * A live 0.1 lease on the item makes the key busy (its holder is marked dirty to run again).
   */
  private async getServiceFor(key: ServiceKey, lease: Lease): Promise<ServiceRecord | undefined> {
    const pk = servicePk(key);
    const item = await this.get(pk);
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

  async listServiceHosts(): Promise<ServiceHostsState[]> {
    const result: ServiceHostsState[] = [];
    // A scan bills every item it reads whatever the filter keeps: the lease items of Services
    // whose retry is due later come at no extra cost. Past retryAt the retry is overdue (its
    // message lost, say), and node sync takes the Service again.
    const failing = new Set<ServiceKey>();
    for await (const item of this.scan(
      // uid is written with every record, of either release, and removed with it.
      '(begins_with(pk, :svc) AND attribute_exists(uid)) OR (begins_with(pk, :lease) AND failures > :zero AND retryAt > :now)',
      { ':svc': 'svc#', ':lease': 'svclease#', ':zero': 0, ':now': this.clock.now().getTime() },
      'pk, hostsHash, nodeSelector',
    )) {
      if (String(item.pk).startsWith('svclease#')) {
        failing.add(String(item.pk).slice('svclease#'.length));
        continue;
      }
      const hash =
        typeof item.hostsHash === 'string' && item.hostsHash !== '' ? item.hostsHash : undefined;
      const selector =
        typeof item.nodeSelector === 'string' && item.nodeSelector !== ''
          ? item.nodeSelector
          : undefined;
      result.push({
        key: String(item.pk).slice('svc#'.length),
        hostsHash: hash,
        ...(selector !== undefined ? { nodeSelector: selector } : {}),
      });
    }
    return result.map((service) =>
      failing.has(service.key) ? { ...service, retryScheduled: true } : service,
    );
  }

  /** Every service item, for the sweep: key, whether a record exists, failures, dirty, lease expiry. */
  async listServiceItems(): Promise<ServiceItemSummary[]> {
    // One scan sees both item kinds of a key: the record item says whether there is a record,
    // the lease item has the lease and failures (a 0.1 record item has both).
    const records = new Map<ServiceKey, Record<string, unknown>>();
    const leases = new Map<ServiceKey, Record<string, unknown>>();
    for await (const item of this.scan(
      'begins_with(pk, :svc) OR begins_with(pk, :lease)',
      { ':svc': 'svc#', ':lease': 'svclease#' },
      'pk, uid, ver, failures, dirty, leaseUntil, failingSince',
    )) {
      const pk = String(item.pk);
      if (pk.startsWith('svc#')) records.set(pk.slice('svc#'.length), item);
      else leases.set(pk.slice('svclease#'.length), item);
    }
    const items: ServiceItemSummary[] = [];
    for (const key of new Set([...records.keys(), ...leases.keys()])) {
      const record = records.get(key);
      // uid is written with every record and absent from a tombstone.
      const hasRecord = typeof record?.uid === 'string';
      const lease = leases.get(key) ?? record;
      // A tombstone alone is nothing to sweep.
      if (!hasRecord && leases.get(key) === undefined && typeof record?.ver === 'string') continue;
      items.push({
        key,
        ...(hasRecord ? { uid: String(record?.uid) } : {}),
        hasRecord,
        failures: Number(lease?.failures ?? 0),
        dirty: lease?.dirty === true,
        ...(typeof lease?.leaseUntil === 'number' ? { leaseUntil: lease.leaseUntil } : {}),
        ...(typeof lease?.failingSince === 'number' ? { failingSince: lease.failingSince } : {}),
      });
    }
    return items;
  }

  async getEligibleHosts(): Promise<EligibleHosts | undefined> {
    const meta = await this.get('hosts#meta');
    if (meta === undefined) return undefined;
    const chunkKey = typeof meta.chunkKey === 'string' ? meta.chunkKey : String(meta.hash);
    const count = Number(meta.chunks ?? 0);
    let hosts: EligibleHosts['hosts'];
    const cached = this.hostChunks;
    if (cached?.chunkKey === chunkKey && cached.count === count) {
      hosts = [...cached.hosts];
    } else {
      const read = [];
      for (let i = 0; i < count; i++) {
        const chunk = await this.get(`hosts#chunk#${chunkKey}#${i}`);
        if (chunk === undefined) throw new RetryableError('eligible host set is being rewritten');
        read.push(...(JSON.parse(String(chunk.hosts)) as EligibleHosts['hosts']));
      }
      hosts = read;
      this.hostChunks = { chunkKey, count, hosts };
    }
    return {
      hosts,
      hash: String(meta.hash),
      warnedNodes: (meta.warnedNodes as string[] | undefined) ?? [],
      ...(Array.isArray(meta.labelKeys) && meta.labelKeys.length > 0
        ? { labelKeys: meta.labelKeys as string[], labelsHash: String(meta.labelsHash) }
        : {}),
    };
  }

  /**
   * Chunks are keyed by the set's hash and written before the meta item points at them, so a
   * reader never sees half a set. With a lease, the meta item is written in one transaction with a
   * check that the lease is still held, so a node sync whose lease was taken over cannot replace
   * the newer holder's set.
   */
  async putEligibleHosts(hosts: EligibleHosts, lease?: Lease): Promise<void> {
    const chunks: string[] = [];
    let current: unknown[] = [];
    let size = 2;
    for (const host of hosts.hosts) {
      const length = JSON.stringify(host).length + 1;
      if (size + length > chunkBytes && current.length > 0) {
        chunks.push(JSON.stringify(current));
        current = [];
        size = 2;
      }
      current.push(host);
      size += length;
    }
    chunks.push(JSON.stringify(current));
    // Chunks are named by their content: a relabelled node changes labelsHash, not hash, and a
    // reader must never see the chunks of one set under the meta item of another.
    const chunkKey =
      hosts.labelsHash === undefined ? hosts.hash : `${hosts.hash}.${hosts.labelsHash}`;
    try {
      for (const [i, chunk] of chunks.entries()) {
        await this.doc.send(
          new PutCommand({
            TableName: this.tableName,
            Item: { pk: `hosts#chunk#${chunkKey}#${i}`, hosts: chunk },
          }),
        );
      }
      const previous = await this.get('hosts#meta');
      const meta = {
        TableName: this.tableName,
        Item: {
          pk: 'hosts#meta',
          hash: hosts.hash,
          chunkKey,
          warnedNodes: [...hosts.warnedNodes],
          ...(hosts.labelKeys !== undefined && hosts.labelKeys.length > 0
            ? { labelKeys: [...hosts.labelKeys], labelsHash: hosts.labelsHash }
            : {}),
          chunks: chunks.length,
          updatedAt: this.clock.now().toISOString(),
        },
      };
      if (lease === undefined) {
        await this.doc.send(new PutCommand(meta));
      } else {
        await this.doc.send(
          new TransactWriteCommand({
            TransactItems: [
              {
                ConditionCheck: {
                  TableName: this.tableName,
                  Key: { pk: lease.id },
                  ConditionExpression: 'leaseOwner = :owner AND fence = :fence',
                  ExpressionAttributeValues: { ':owner': lease.owner, ':fence': lease.fence },
                },
              },
              { Put: meta },
            ],
          }),
        );
      }
      const previousKey =
        typeof previous?.chunkKey === 'string' ? previous.chunkKey : String(previous?.hash);
      if (previous !== undefined && previousKey !== chunkKey) {
        for (let i = 0; i < Number(previous.chunks ?? 0); i++) {
          await this.doc.send(
            new DeleteCommand({
              TableName: this.tableName,
              Key: { pk: `hosts#chunk#${previousKey}#${i}` },
            }),
          );
        }
      }
    } catch (error) {
      if (error instanceof TransactionCanceledException) {
        throw new BusyError(
          `lease on ${lease?.id ?? ''} was lost; not replacing the eligible host set`,
        );
      }
      throw retryable(error, 'store eligible hosts');
    }
  }

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
    await this.batchWrite(requests, 'keep lifecycle events');
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
          result = await this.doc.send(
            new BatchGetCommand({
              RequestItems: { [this.tableName]: { Keys: keys, ConsistentRead: true } },
            }),
          );
        } catch (error) {
          throw retryable(error, 'read lifecycle events');
        }
        for (const item of result.Responses?.[this.tableName] ?? []) {
          const event = parseStoredEvent(item.event);
          if (event !== undefined) found.push(event);
        }
        keys = result.UnprocessedKeys?.[this.tableName]?.Keys;
      }
    }
    return found;
  }

  async deletePendingEvents(eventIds: readonly string[]): Promise<void> {
    const requests = [...new Set(eventIds)].map((id) => ({
      DeleteRequest: { Key: { pk: pendingEventPk(id) } },
    }));
    await this.batchWrite(requests, 'remove published lifecycle events');
  }

  private async batchWrite(requests: readonly Record<string, unknown>[], action: string) {
    for (let i = 0; i < requests.length; i += 25) {
      let pending: Record<string, unknown>[] | undefined = requests.slice(i, i + 25);
      for (let attempt = 0; pending !== undefined && pending.length > 0; attempt++) {
        if (attempt > 4) throw new RetryableError(`state table: ${action}: throttled`);
        try {
          const result: BatchWriteCommandOutput = await this.doc.send(
            new BatchWriteCommand({ RequestItems: { [this.tableName]: pending } }),
          );
          pending = result.UnprocessedItems?.[this.tableName];
        } catch (error) {
          throw retryable(error, action);
        }
      }
    }
  }

  acquireServiceLease(key: ServiceKey, owner: string, ttlSeconds: number): Promise<AcquireResult> {
    return this.acquire(serviceLeasePk(key), owner, ttlSeconds);
  }

  acquireRunLease(run: GlobalRun, owner: string, ttlSeconds: number): Promise<AcquireResult> {
    return this.acquire(leasePk(run), owner, ttlSeconds);
  }

  // Node sync's bookkeeping lives on its lease item (`lease#node-sync`): `chain`, `lastTickAt`,
  // `lastRunAt` (ISO, for people) and `lastRunAtMs`, `coalescedUntil`.

  async nodeSyncTimer(): Promise<NodeSyncTimer> {
    const item = await this.getItem(nodeSyncLeasePk);
    return {
      chain: typeof item?.chain === 'string' ? item.chain : undefined,
      lastRunAtMs: typeof item?.lastRunAtMs === 'number' ? item.lastRunAtMs : 0,
      lastTickAtMs: typeof item?.lastTickAt === 'number' ? item.lastTickAt : 0,
    };
  }

  recordNodeSyncRun(atMs: number): Promise<void> {
    return this.setAttributes(nodeSyncLeasePk, {
      lastRunAt: new Date(atMs).toISOString(),
      lastRunAtMs: atMs,
    });
  }

  claimCoalescedPass(untilMs: number): Promise<boolean> {
    return this.claimUntil(nodeSyncLeasePk, 'coalescedUntil', untilMs);
  }

  releaseCoalescedPass(): Promise<void> {
    return this.removeAttributes(nodeSyncLeasePk, ['coalescedUntil']);
  }

  recordTick(atMs: number): Promise<void> {
    return this.setAttributes(nodeSyncLeasePk, { lastTickAt: atMs });
  }

  startTimerChain(chain: string, atMs: number): Promise<void> {
    return this.setAttributes(nodeSyncLeasePk, { chain, lastTickAt: atMs });
  }

  // The sweep's bookkeeping lives on its lease item (`lease#sweep`): `resyncPass`,
  // `previousResyncPass`, `lastRunAt` (ISO), and `orphan#<uid>` (epoch ms first seen) per orphan.

  async sweepBook(): Promise<SweepBook> {
    const item = await this.getItem(sweepLeasePk);
    const orphans = new Map<string, number>();
    for (const [name, value] of Object.entries(item ?? {})) {
      if (name.startsWith(orphanPrefix) && typeof value === 'number') {
        orphans.set(name.slice(orphanPrefix.length), value);
      }
    }
    return {
      resyncPass: typeof item?.resyncPass === 'string' ? item.resyncPass : undefined,
      previousResyncPass:
        typeof item?.previousResyncPass === 'string' ? item.previousResyncPass : undefined,
      orphansFirstSeen: orphans,
    };
  }

  startResyncPass(pass: string, previous: string | undefined): Promise<void> {
    return this.setAttributes(sweepLeasePk, {
      resyncPass: pass,
      ...(previous !== undefined ? { previousResyncPass: previous } : {}),
    });
  }

  markOrphanSeen(uid: string, atMs: number): Promise<void> {
    return this.setAttributes(sweepLeasePk, { [`${orphanPrefix}${uid}`]: atMs });
  }

  clearOrphan(uid: string): Promise<void> {
    return this.removeAttributes(sweepLeasePk, [`${orphanPrefix}${uid}`]);
  }

  recordSweepRun(atMs: number): Promise<void> {
    return this.setAttributes(sweepLeasePk, { lastRunAt: new Date(atMs).toISOString() });
  }

  /** Sets plain attributes on a global item (bookkeeping such as last run times). */
  async setAttributes(
    pk: string,
    values: Record<string, string | number | boolean>,
  ): Promise<void> {
    const names = Object.keys(values);
    await this.doc.send(
      new UpdateCommand({
        TableName: this.tableName,
        Key: { pk },
        UpdateExpression: `SET ${names.map((_, i) => `#n${i} = :v${i}`).join(', ')}`,
        ExpressionAttributeNames: Object.fromEntries(names.map((name, i) => [`#n${i}`, name])),
        ExpressionAttributeValues: Object.fromEntries(
          names.map((name, i) => [`:v${i}`, values[name]]),
        ),
      }),
    );
  }

  /**
   * Sets the time attribute `name` to `until` unless it already lies in the future: true for the
   * one caller that set it, false for the others (one conditional write each).
   */
  async claimUntil(pk: string, name: string, until: number): Promise<boolean> {
    try {
      await this.doc.send(
        new UpdateCommand({
          TableName: this.tableName,
          Key: { pk },
          ConditionExpression: 'attribute_not_exists(#n) OR #n < :now',
          UpdateExpression: 'SET #n = :until',
          ExpressionAttributeNames: { '#n': name },
          ExpressionAttributeValues: { ':now': this.clock.now().getTime(), ':until': until },
        }),
      );
      return true;
    } catch (error) {
      if (error instanceof ConditionalCheckFailedException) return false;
      throw retryable(error, `claim ${name}`);
    }
  }

  async removeAttributes(pk: string, names: readonly string[]): Promise<void> {
    if (names.length === 0) return;
    await this.doc.send(
      new UpdateCommand({
        TableName: this.tableName,
        Key: { pk },
        UpdateExpression: `REMOVE ${names.map((_, i) => `#n${i}`).join(', ')}`,
        ExpressionAttributeNames: Object.fromEntries(names.map((name, i) => [`#n${i}`, name])),
      }),
    );
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
    if (!lease.id.startsWith('svclease#')) return false;
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
    if (!pk.startsWith('svclease#')) return;
    await this.conditionalDelete(
      pk,
      'attribute_not_exists(leaseOwner) AND attribute_not_exists(unverified) AND (attribute_not_exists(failures) OR failures = :zero) AND (attribute_not_exists(dirty) OR dirty = :false)',
      { ':zero': 0, ':false': false },
    );
  }

  /** A release 0.1 `svc#` item with no record and no live 0.1 lease goes away. */
  private async removeLegacyLeftover(leasePk: string): Promise<void> {
    await this.conditionalDelete(
      servicePk(leasePk.slice('svclease#'.length)),
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

  private async get(pk: string): Promise<Record<string, unknown> | undefined> {
    try {
      const result = await this.doc.send(
        new GetCommand({ TableName: this.tableName, Key: { pk }, ConsistentRead: true }),
      );
      return result.Item;
    } catch (error) {
      throw retryable(error, 'read state');
    }
  }

  private async *scan(filter: string, values: Record<string, unknown>, projection: string) {
    let start: Record<string, unknown> | undefined;
    do {
      const page = await this.doc.send(
        new ScanCommand({
          TableName: this.tableName,
          FilterExpression: filter,
          ExpressionAttributeValues: values,
          ProjectionExpression: projection,
          ConsistentRead: true,
          ...(start ? { ExclusiveStartKey: start } : {}),
        }),
      );
      yield* page.Items ?? [];
      start = page.LastEvaluatedKey;
    } while (start !== undefined);
  }
}

/**
 * The record an item holds. `rec` is what release 0.1 wrote; our writes replace the item whole, so
 * an item with `rec` beside `recz` was written by 0.1 after us (a rollback) and `rec` is newer.
 * 0.1 removes `rec` and `uid` when it deletes a record but leaves `recz`, so `recz` counts only
 * with `uid` beside it.
 */
/**
 * A record's item attributes, or the TerminalError for a record DynamoDB would refuse on every
 * retry (the item over its size limit): the spec must shrink, so it is the user's to fix.
 */
function storedRecordAttributes(record: ServiceRecord): Record<string, string | Uint8Array> {
  const attributes = {
    recz: encodeRecord(record),
    uid: record.uid,
    hostsHash: record.hostsHash ?? '',
    // Beside the hash, for node sync's scan to compare each Service with the hosts it selects.
    nodeSelector: record.nodeSelector ?? '',
  };
  const bytes = Object.entries(attributes).reduce(
    (n, [name, value]) =>
      n + name.length + (typeof value === 'string' ? Buffer.byteLength(value) : value.byteLength),
    0,
  );
  if (bytes > maxRecordBytes) {
    throw new TerminalError(
      `the Service's state record would be ${Math.ceil(bytes / 1024)} KiB compressed, over the ${maxRecordBytes / 1024} KiB a state item can hold: use fewer ports, source ranges or load balancer annotations`,
    );
  }
  return attributes;
}

function parseRecord(item: Record<string, unknown> | undefined): ServiceRecord | undefined {
  if (typeof item?.rec === 'string') return JSON.parse(item.rec) as ServiceRecord;
  if (!(item?.recz instanceof Uint8Array) || typeof item.uid !== 'string') return undefined;
  try {
    return decodeRecord(item.recz);
  } catch (error) {
    // Written by a newer release (rolled back past a format change) or damaged: retrying cannot
    // help, and guessing could delete what the record names.
    throw new InvariantError(
      `state item ${String(item.pk)}: ${error instanceof Error ? error.message : String(error)}`,
    );
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

function retryable(error: unknown, action: string): RetryableError {
  return new RetryableError(
    `state table: ${action}: ${error instanceof Error ? error.message : String(error)}`,
    { cause: error },
  );
}
