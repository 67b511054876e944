/**
 * What the runtime (batch routing, key passes, node sync, sweep) needs from the outside world,
 * as interfaces: the state table, the queues, the lifecycle bus, logs and metrics. The adapters
 * in functions/state/, functions/queue/ and functions/nlb/ implement them; functions/wiring/ is
 * the only place that names those adapters.
 */
import type { LifecycleEvent } from '../contract/lifecycle-events';
import type { WorkMessage } from '../contract/work-messages';
import type { ServiceKey } from '../core/keys';
import type { KeptSlot } from '../core/registration-slots';
import type { Service } from '../core/objects';
import type { DeleteResult, StateStore } from '../sync/ports';

export type LogFields = Record<string, unknown>;
/** Structured logging: every line carries the Service key and message id when there is one. */
export interface RuntimeLog {
  info(message: string, fields?: LogFields): void;
  warn(message: string, fields?: LogFields): void;
  error(message: string, fields?: LogFields): void;
}

/** EMF metrics, by name; dimensions kept few (outcome, kind) so they stay cheap. */
export interface RuntimeMetrics {
  count(name: string, value?: number, dimensions?: Record<string, string>): void;
  milliseconds(name: string, value: number): void;
}

/** The work queue as the runtime needs it. */
export interface WorkQueue {
  /**
   * Sends messages (batched by 10), each with its fair-queue group (the Service's namespace); a
   * message SQS did not accept is retried, then reported. `delaySeconds`: one for all, or one per
   * message (SQS takes a delay per entry, so paced messages still go ten to a request).
   */
  send(messages: readonly WorkMessage[], delaySeconds?: number | readonly number[]): Promise<void>;
  /** Makes a received message visible again after `seconds` (the backoff of S6). */
  changeVisibility(receiptHandle: string, seconds: number): Promise<void>;
  /**
   * Puts a message that is not ours (malformed, unknown, oversize) on the dead-letter queue as it
   * came, with what is wrong in a message attribute: kept for inspection, never retried. Returns
   * false when no dead-letter queue is configured.
   */
  deadLetter(body: string, problem: string): Promise<boolean>;
  /**
   * Deletes received messages whose work is done (by receipt handle), before the batch they came
   * in returns: a crash later in that batch then cannot bring them back.
   */
  acknowledge(receiptHandles: readonly string[]): Promise<void>;
}

/**
 * Publishes lifecycle events; never throws. What is still rejected after its own retries is
 * handed back to be offered again; what EventBridge calls invalid is handed back to be dropped.
 */
export interface LifecyclePublisher {
  publish(events: readonly LifecycleEvent[]): Promise<{
    readonly published: number;
    readonly rejected: readonly LifecycleEvent[];
    readonly invalid: readonly LifecycleEvent[];
  }>;
}

export interface Lease {
  /** Which lease: the state adapter's name for the item it is kept on (opaque here). */
  readonly id: string;
  readonly owner: string;
  readonly fence: number;
  /** Failure count when the lease was taken. */
  readonly failures: number;
  /**
   * The record's checkpoint may not describe AWS: the last holder's lease expired unreleased (it
   * died or overran, possibly half-way through AWS changes), or a pass since then left it so.
   * The holder checks AWS instead of trusting the checkpoint (see the class comment).
   */
  readonly unverified: boolean;
  /**
   * A message marked the key dirty and the holder it counted on never ran the pass it asked for
   * (it died or overran): this holder owes that full sync, whatever its own message asks.
   */
  readonly pendingChange: boolean;
  /**
   * Registration-budget slots an earlier pass of the key booked and kept, too far off to wait
   * for (issue 37): this holder's calls use them instead of booking again. None on run leases.
   */
  readonly keptSlots: readonly KeptSlot[];
}

export type AcquireResult =
  | { readonly acquired: true; readonly lease: Lease }
  /** Held by someone else until `heldUntil` (epoch ms), now marked dirty. */
  | { readonly acquired: false; readonly heldUntil: number };

/**
 * Node sync's minimum interval, checked in the same write that takes its lease (issue 37: no
 * read before it): a run that ended less than `minIntervalMs` ago refuses the lease, unless a
 * trigger is a tick of the current chain (`chains`).
 */
export interface RunGate {
  readonly minIntervalMs: number;
  readonly chains: readonly string[];
}

/** A gated acquire: the lease, held by another, or too soon after the last run (until `dueAtMs`). */
export type GatedAcquireResult =
  AcquireResult | { readonly acquired: false; readonly tooSoon: true; readonly dueAtMs: number };

export type FinishResult =
  /** Released: nobody asked for another pass meanwhile. */
  | { readonly kind: 'released' }
  /** A message arrived during the pass (dirty flag): the lease is extended, run once more. */
  | { readonly kind: 'again' }
  /** The lease expired and someone else took it: our result is void. */
  | { readonly kind: 'lost' };

/** Failure counting applied when a lease is released (S6). */
export type FailureUpdate = 'reset' | 'increment' | 'keep';

/** A global run that one instance at a time may do. */
export type GlobalRun = 'node-sync' | 'sweep';

/** A Service key's state as the sweep sees it (record and lease items together). */
export interface ServiceItemSummary {
  readonly key: ServiceKey;
  readonly uid?: string;
  readonly hasRecord: boolean;
  readonly failures: number;
  readonly dirty: boolean;
  readonly leaseUntil?: number;
  /** When its current run of failures began (epoch ms). */
  readonly failingSince?: number;
}

/** Node sync's timer chain and coalescing, kept beside its lease. */
export interface NodeSyncTimer {
  /** The live tick chain's id; undefined before the first chain. */
  readonly chain?: string | undefined;
  /** When the last pass ended (epoch ms), 0 for never. */
  readonly lastRunAtMs: number;
  /** When the chain last ticked (epoch ms), 0 for never. */
  readonly lastTickAtMs: number;
}

/** The sweep's bookkeeping, kept beside its lease: its resync passes and orphans seen. */
export interface SweepBook {
  /** The last run's resync pass id, and the one before it: a `resync` may name either. */
  readonly resyncPass: string | undefined;
  readonly previousResyncPass: string | undefined;
  /** When each orphaned load balancer's owner UID was first seen orphaned (epoch ms). */
  readonly orphansFirstSeen: ReadonlyMap<string, number>;
}

/** The state table as the runtime uses it. */
export interface RuntimeStore {
  acquireServiceLease(key: ServiceKey, owner: string, ttlSeconds: number): Promise<AcquireResult>;
  acquireRunLease(run: GlobalRun, owner: string, ttlSeconds: number): Promise<AcquireResult>;
  /**
   * Node sync's lease, unless its last run ended within the gate's interval (and no trigger is
   * the current chain's tick): then nothing is written and it says when the interval is up. A
   * lease held by another run is marked dirty, as `acquireRunLease` does, only when not too soon.
   */
  acquireNodeSyncLease(
    owner: string,
    ttlSeconds: number,
    gate: RunGate,
  ): Promise<GatedAcquireResult>;
  finish(
    lease: Lease,
    failures: FailureUpdate,
    extendSeconds: number,
    unverified?: boolean,
    retryAt?: number,
    /** The slots the key keeps for its next pass (replacing what the lease item held). */
    keptSlots?: readonly KeptSlot[],
  ): Promise<FinishResult & { failures?: number }>;
  handBack(
    lease: Lease,
    failures: FailureUpdate,
    unverified?: boolean,
    retryAt?: number,
    keptSlots?: readonly KeptSlot[],
  ): Promise<FinishResult & { failures?: number }>;
  /** The use cases' view of the table, valid while `lease` is held. */
  fencedBy(lease: Lease): StateStore;
  listServiceItems(): Promise<ServiceItemSummary[]>;

  putPendingEvents(events: readonly LifecycleEvent[], expiresAt: Date): Promise<void>;
  getPendingEvents(eventIds: readonly string[]): Promise<LifecycleEvent[]>;
  deletePendingEvents(eventIds: readonly string[]): Promise<void>;

  nodeSyncTimer(): Promise<NodeSyncTimer>;
  recordNodeSyncRun(atMs: number): Promise<void>;
  /** Claims the one coalesced pass due at `untilMs`: true for the one caller that got it. */
  claimCoalescedPass(untilMs: number): Promise<boolean>;
  releaseCoalescedPass(): Promise<void>;
  recordTick(atMs: number): Promise<void>;
  startTimerChain(chain: string, atMs: number): Promise<void>;

  sweepBook(): Promise<SweepBook>;
  startResyncPass(pass: string, previous: string | undefined): Promise<void>;
  markOrphanSeen(uid: string, atMs: number): Promise<void>;
  clearOrphan(uid: string): Promise<void>;
  recordSweepRun(atMs: number): Promise<void>;
}

/** What the sweep asks of the load balancer provider to find and remove orphans. */
export interface OrphanCleanup {
  /** Owner UID → Service key of every resource tagged for this cluster. */
  ownersInCluster(): Promise<Map<string, string>>;
  ensureLoadBalancerDeleted(service: Service, status: undefined): Promise<DeleteResult>;
}
