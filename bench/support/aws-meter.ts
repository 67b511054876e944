/**
 * SDK middleware that meters every AWS call of the runtime: per service and operation, how many,
 * how long, and for DynamoDB the read and write request units the call would consume on-demand,
 * estimated from item sizes with AWS's rounding (a write unit per 1 KB of the larger of the item
 * before and after, a strongly consistent read unit per 4 KB (half for an eventually consistent
 * one), transactions count twice, batch reads and writes per item; a failed conditional write
 * still consumes its units). Sizes come from the items the calls carry and
 * return; an UpdateItem that returns nothing is sized from the last size seen for its key.
 */
import { RequeueAfterError } from '../../functions/core/errors';
import type {
  HandlerExecutionContext,
  InitializeHandler,
  InitializeHandlerArguments,
  MetadataBearer,
  MiddlewareStack,
} from '@smithy/types';

export interface MeteredCall {
  readonly service: string;
  readonly operation: string;
  readonly at: number;
  readonly ms: number;
  readonly ok: boolean;
  readonly rru: number;
  readonly wru: number;
  readonly input: Record<string, unknown>;
  /** ReceiveMessage only: how many messages came back (0 is an idle poll). */
  readonly messages?: number;
}

interface Meterable {
  readonly middlewareStack: MiddlewareStack<object, MetadataBearer>;
}

/** DynamoDB's item size: attribute names plus values (strings by UTF-8 length, binary by length, numbers ~21 bytes max). */
export function itemBytes(value: unknown): number {
  if (value === null || value === undefined || typeof value === 'boolean') return 1;
  if (typeof value === 'string') return Buffer.byteLength(value);
  // Binary attributes (a compressed record) count their bytes.
  if (value instanceof Uint8Array) return value.byteLength;
  if (typeof value === 'number' || typeof value === 'bigint') {
    return Math.min(21, Math.ceil(String(value).replace(/[-.]/g, '').length / 2) + 1);
  }
  if (Array.isArray(value)) return 3 + value.reduce((n: number, v) => n + 1 + itemBytes(v), 0);
  if (typeof value === 'object') {
    return (
      3 +
      Object.entries(value as Record<string, unknown>).reduce(
        (n, [k, v]) => n + 1 + Buffer.byteLength(k) + itemBytes(v),
        0,
      )
    );
  }
  return 1;
}

/** The top-level attributes of an item, without the map overhead. */
function topLevelBytes(item: Record<string, unknown> | undefined): number {
  if (item === undefined) return 0;
  return Object.entries(item).reduce((n, [k, v]) => n + Buffer.byteLength(k) + itemBytes(v), 0);
}

const kb = (bytes: number, unit: number) => Math.max(1, Math.ceil(bytes / unit));

export class AwsMeter {
  readonly calls: MeteredCall[] = [];
  /** The last known size of each item, by partition key. */
  private readonly sizes = new Map<string, number>();

  attach<C extends Meterable>(client: C): C {
    client.middlewareStack.add(
      (next: InitializeHandler<object, MetadataBearer>, context: HandlerExecutionContext) =>
        async (args: InitializeHandlerArguments<object>) => {
          const service = (context.clientName ?? '').replace(/Client$/, '');
          const operation = (context.commandName ?? '').replace(/Command$/, '');
          const input = args.input as Record<string, unknown>;
          const started = performance.now();
          let output: unknown;
          let ok = false;
          let refused = false;
          try {
            const result = await next(args);
            output = result.output;
            ok = true;
            return result;
          } catch (error) {
            // Our own limits (a budget's slot kept for later, the per-process limiter) answer
            // before the request is sent: no AWS call to count or to price.
            refused = error instanceof RequeueAfterError;
            throw error;
          } finally {
            if (!refused) this.record(service, operation, input, output, ok, started);
          }
        },
      { step: 'initialize', priority: 'high', name: 'benchAwsMeter' },
    );
    return client;
  }

  private record(
    service: string,
    operation: string,
    input: Record<string, unknown>,
    output: unknown,
    ok: boolean,
    started: number,
  ): void {
    const units =
      service === 'DynamoDB' || service === 'DynamoDBDocument'
        ? this.capacity(operation, input, output as Record<string, unknown> | undefined, ok)
        : { rru: 0, wru: 0 };
    this.calls.push({
      service,
      operation,
      at: started,
      ms: performance.now() - started,
      ok,
      ...units,
      input,
      ...(operation === 'ReceiveMessage'
        ? {
            messages: (output as { Messages?: unknown[] } | undefined)?.Messages?.length ?? 0,
          }
        : {}),
    });
  }

  /** The last known sizes (bytes) of the items whose partition key starts with `prefix`. */
  itemSizes(prefix: string): number[] {
    return [...this.sizes].filter(([pk]) => pk.startsWith(prefix)).map(([, bytes]) => bytes);
  }

  /** Calls made since `mark` (an index into `calls`). */
  since(mark: number): MeteredCall[] {
    return this.calls.slice(mark);
  }

  private capacity(
    operation: string,
    input: Record<string, unknown>,
    output: Record<string, unknown> | undefined,
    ok: boolean,
  ): { rru: number; wru: number } {
    const pkOf = (key: unknown) => {
      const pk = (key as { pk?: unknown } | undefined)?.pk;
      return typeof pk === 'string' ? pk : '';
    };
    // GetItem → Get, TransactWriteItems → TransactWrite, BatchWriteItem → BatchWrite.
    switch (operation.replace(/Items?$/, '')) {
      case 'Get': {
        const item = output?.Item as Record<string, unknown> | undefined;
        if (item !== undefined) this.sizes.set(pkOf(input.Key), topLevelBytes(item));
        return { rru: kb(topLevelBytes(item), 4096), wru: 0 };
      }
      case 'Put': {
        const size = topLevelBytes(input.Item as Record<string, unknown>);
        const pk = pkOf(input.Item);
        const before = this.sizes.get(pk) ?? 0;
        if (ok) this.sizes.set(pk, size);
        return { rru: 0, wru: kb(Math.max(before, size), 1024) };
      }
      case 'Update': {
        const pk = pkOf(input.Key);
        const before = this.sizes.get(pk) ?? 0;
        const returned = output?.Attributes as Record<string, unknown> | undefined;
        const written = topLevelBytes(
          input.ExpressionAttributeValues as Record<string, unknown> | undefined,
        );
        const after = returned !== undefined ? topLevelBytes(returned) : Math.max(before, written);
        // A failed conditional update leaves the item as it was, and is charged for its size.
        if (!ok) return { rru: 0, wru: kb(before, 1024) };
        this.sizes.set(pk, after);
        return { rru: 0, wru: kb(Math.max(before, after), 1024) };
      }
      case 'Delete': {
        const pk = pkOf(input.Key);
        const before = this.sizes.get(pk) ?? 0;
        if (ok) this.sizes.delete(pk);
        return { rru: 0, wru: kb(before, 1024) };
      }
      case 'Scan': {
        const items = (output?.Items ?? []) as Record<string, unknown>[];
        const bytes = items.reduce(
          (n, item) => n + (this.sizes.get(pkOf(item)) ?? topLevelBytes(item)),
          0,
        );
        return { rru: kb(bytes, 4096), wru: 0 };
      }
      case 'BatchGet': {
        // Each key is a GetItem: a key that finds nothing still costs a unit, a key handed back
        // unprocessed costs nothing, and an eventually consistent read costs half.
        const tables = (input.RequestItems ?? {}) as Record<
          string,
          { Keys?: unknown[]; ConsistentRead?: boolean }
        >;
        const responses = (output?.Responses ?? {}) as Record<string, Record<string, unknown>[]>;
        const unprocessed = (output?.UnprocessedKeys ?? {}) as Record<string, { Keys?: unknown[] }>;
        let rru = 0;
        for (const [table, request] of Object.entries(tables)) {
          const found = new Map((responses[table] ?? []).map((item) => [pkOf(item), item]));
          const left = new Set((unprocessed[table]?.Keys ?? []).map(pkOf));
          const factor = request.ConsistentRead === true ? 1 : 0.5;
          for (const key of request.Keys ?? []) {
            const pk = pkOf(key);
            if (!ok || left.has(pk)) continue;
            const item = found.get(pk);
            if (item !== undefined) this.sizes.set(pk, topLevelBytes(item));
            rru += factor * kb(topLevelBytes(item), 4096);
          }
        }
        return { rru, wru: 0 };
      }
      case 'BatchWrite': {
        const tables = (input.RequestItems ?? {}) as Record<string, Record<string, unknown>[]>;
        const unprocessed = (output?.UnprocessedItems ?? {}) as Record<
          string,
          Record<string, unknown>[]
        >;
        const keyOf = (request: Record<string, unknown>) => {
          const put = request.PutRequest as { Item?: unknown } | undefined;
          const del = request.DeleteRequest as { Key?: unknown } | undefined;
          return pkOf(put?.Item ?? del?.Key);
        };
        let wru = 0;
        for (const [table, requests] of Object.entries(tables)) {
          // Requests DynamoDB hands back unprocessed were not written, and are not charged.
          const left = new Set((unprocessed[table] ?? []).map(keyOf));
          for (const request of requests) {
            const pk = keyOf(request);
            if (!ok || left.has(pk)) continue;
            const put = request.PutRequest as { Item?: Record<string, unknown> } | undefined;
            const before = this.sizes.get(pk) ?? 0;
            if (put?.Item !== undefined) {
              const size = topLevelBytes(put.Item);
              this.sizes.set(pk, size);
              wru += kb(Math.max(before, size), 1024);
            } else {
              this.sizes.delete(pk);
              wru += kb(before, 1024);
            }
          }
        }
        return { rru: 0, wru };
      }
      case 'TransactWrite': {
        // Twice the units of each entry, a condition check included, sized as a plain write is:
        // the larger of the item before and after.
        const entries = (input.TransactItems ?? []) as Record<string, Record<string, unknown>>[];
        let wru = 0;
        for (const entry of entries) {
          const put = entry.Put;
          const key =
            put?.Item ?? entry.ConditionCheck?.Key ?? entry.Update?.Key ?? entry.Delete?.Key;
          const pk = pkOf(key);
          const before = this.sizes.get(pk) ?? 0;
          const after = put ? topLevelBytes(put.Item as Record<string, unknown>) : before;
          if (ok && put) this.sizes.set(pk, after);
          if (ok && entry.Delete) this.sizes.delete(pk);
          wru += 2 * kb(Math.max(before, after), 1024);
        }
        return { rru: 0, wru };
      }
      default:
        return { rru: 0, wru: 0 };
    }
  }
}
