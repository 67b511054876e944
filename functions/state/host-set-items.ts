import {
  ConditionalCheckFailedException,
  TransactionCanceledException,
} from '@aws-sdk/client-dynamodb';
import { DeleteCommand, PutCommand, TransactWriteCommand } from '@aws-sdk/lib-dynamodb';
import { BusyError, RetryableError } from '../core/errors';
import type { EligibleHosts } from '../core/node-sync-plan';
import type { Lease } from '../runtime/ports';
import { retryable, type StateTable } from './state-table';
import { hostChunkPk, hostSetMetaPk, nodeSyncLeasePk } from './table-layout';

/** Host list chunks stay under DynamoDB's 400 KB item limit. */
const chunkBytes = 350_000;

/** The eligible host set: a meta item and the chunks of the host list it names. */
export class HostSetItems {
  /**
   * The host list last read, by the chunk key it was read under. Chunks are named by their
   * content (the set's hash), so a chunk key never names another list: a host update reads the
   * small meta item and reuses the list while the set is unchanged. At 5,000 nodes the list is
   * about 550 KB, some 140 read units a read, which every host update of a node change paid.
   */
  private hostChunks:
    | { readonly chunkKey: string; readonly count: number; readonly hosts: EligibleHosts['hosts'] }
    | undefined;

  constructor(private readonly table: StateTable) {}

  async getEligibleHosts(): Promise<EligibleHosts | undefined> {
    const meta = await this.table.get(hostSetMetaPk);
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
        const chunk = await this.table.get(hostChunkPk(chunkKey, i));
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
        await this.table.doc.send(
          new PutCommand({
            TableName: this.table.name,
            Item: { pk: hostChunkPk(chunkKey, i), hosts: chunk },
          }),
        );
      }
      const previous = await this.table.get(hostSetMetaPk);
      const meta = {
        TableName: this.table.name,
        Item: {
          pk: hostSetMetaPk,
          hash: hosts.hash,
          chunkKey,
          warnedNodes: [...hosts.warnedNodes],
          ...(hosts.labelKeys !== undefined && hosts.labelKeys.length > 0
            ? { labelKeys: [...hosts.labelKeys], labelsHash: hosts.labelsHash }
            : {}),
          chunks: chunks.length,
          updatedAt: this.table.clock.now().toISOString(),
        },
      };
      if (lease === undefined) {
        await this.table.doc.send(new PutCommand(meta));
      } else if (lease.id !== nodeSyncLeasePk) {
        // The first set a Service's sync stores (node sync never ran): once, checked on its lease.
        await this.table.doc.send(
          new TransactWriteCommand({
            TransactItems: [
              {
                ConditionCheck: {
                  TableName: this.table.name,
                  Key: { pk: lease.id },
                  ConditionExpression: 'leaseOwner = :owner AND fence = :fence',
                  ExpressionAttributeValues: { ':owner': lease.owner, ':fence': lease.fence },
                },
              },
              { Put: meta },
            ],
          }),
        );
      } else {
        // Node sync's: the meta item keeps the fence of the run that wrote it, and a run whose
        // lease was taken over (a lower fence) cannot replace a newer run's set. One conditional
        // Put (1 write unit), where a transaction with a check on the lease item costs four
        // (issue 37). A set a Service's sync stored carries no fence.
        await this.table.doc.send(
          new PutCommand({
            ...meta,
            Item: { ...meta.Item, fence: lease.fence },
            ConditionExpression: 'attribute_not_exists(fence) OR fence <= :fence',
            ExpressionAttributeValues: { ':fence': lease.fence },
          }),
        );
      }
      const previousKey =
        typeof previous?.chunkKey === 'string' ? previous.chunkKey : String(previous?.hash);
      if (previous !== undefined && previousKey !== chunkKey) {
        for (let i = 0; i < Number(previous.chunks ?? 0); i++) {
          await this.table.doc.send(
            new DeleteCommand({
              TableName: this.table.name,
              Key: { pk: hostChunkPk(previousKey, i) },
            }),
          );
        }
      }
    } catch (error) {
      if (
        error instanceof ConditionalCheckFailedException ||
        error instanceof TransactionCanceledException
      ) {
        throw new BusyError(
          `lease on ${lease?.id ?? ''} was lost; not replacing the eligible host set`,
        );
      }
      throw retryable(error, 'store eligible hosts');
    }
  }
}
