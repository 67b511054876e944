import type { NodeSyncTimer, SweepBook } from '../runtime/ports';
import type { StateTable } from './state-table';
import { nodeSyncLeasePk, orphanAttribute, sweepLeasePk } from './table-layout';

/** What node sync and the sweep keep beside their leases: one item each, one request a call. */
export class RunBookkeeping {
  constructor(private readonly table: StateTable) {}

  // Node sync's bookkeeping lives on its lease item (`lease#node-sync`): `chain`, `lastTickAt`,
  // `lastRunAt` (ISO, for people) and `lastRunAtMs`, `coalescedUntil`.

  async nodeSyncTimer(): Promise<NodeSyncTimer> {
    const item = await this.table.get(nodeSyncLeasePk);
    return {
      chain: typeof item?.chain === 'string' ? item.chain : undefined,
      lastRunAtMs: typeof item?.lastRunAtMs === 'number' ? item.lastRunAtMs : 0,
      lastTickAtMs: typeof item?.lastTickAt === 'number' ? item.lastTickAt : 0,
    };
  }

  recordNodeSyncRun(atMs: number): Promise<void> {
    return this.table.setAttributes(nodeSyncLeasePk, {
      lastRunAt: new Date(atMs).toISOString(),
      lastRunAtMs: atMs,
    });
  }

  claimCoalescedPass(untilMs: number): Promise<boolean> {
    return this.table.claimUntil(nodeSyncLeasePk, 'coalescedUntil', untilMs);
  }

  releaseCoalescedPass(): Promise<void> {
    return this.table.removeAttributes(nodeSyncLeasePk, ['coalescedUntil']);
  }

  recordTick(atMs: number): Promise<void> {
    return this.table.setAttributes(nodeSyncLeasePk, { lastTickAt: atMs });
  }

  startTimerChain(chain: string, atMs: number): Promise<void> {
    return this.table.setAttributes(nodeSyncLeasePk, { chain, lastTickAt: atMs });
  }

  // The sweep's bookkeeping lives on its lease item (`lease#sweep`): `resyncPass`,
  // `previousResyncPass`, `lastRunAt` (ISO), and `orphan#<uid>` (epoch ms first seen) per orphan.

  async sweepBook(): Promise<SweepBook> {
    const item = await this.table.get(sweepLeasePk);
    const orphans = new Map<string, number>();
    for (const [name, value] of Object.entries(item ?? {})) {
      if (name.startsWith(orphanAttribute('')) && typeof value === 'number') {
        orphans.set(name.slice(orphanAttribute('').length), value);
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
    return this.table.setAttributes(sweepLeasePk, {
      resyncPass: pass,
      ...(previous !== undefined ? { previousResyncPass: previous } : {}),
    });
  }

  markOrphanSeen(uid: string, atMs: number): Promise<void> {
    return this.table.setAttributes(sweepLeasePk, { [orphanAttribute(uid)]: atMs });
  }

  clearOrphan(uid: string): Promise<void> {
    return this.table.removeAttributes(sweepLeasePk, [orphanAttribute(uid)]);
  }

  recordSweepRun(atMs: number): Promise<void> {
    return this.table.setAttributes(sweepLeasePk, { lastRunAt: new Date(atMs).toISOString() });
  }
}
