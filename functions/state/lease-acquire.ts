import { ConditionalCheckFailedException } from '@aws-sdk/client-dynamodb';
import { UpdateCommand, type DynamoDBDocumentClient } from '@aws-sdk/lib-dynamodb';
import { parseKeptSlots } from '../core/registration-slots';
import type { GatedAcquireResult, RunGate } from '../runtime/ports';
import type { Clock } from '../sync/ports';
import { runGateCondition, tooSoonUntil } from './run-gate';
import { retryable } from './state-table';

/**
 * Takes the lease on an item for `ttlSeconds`, with a new fencing counter. When someone else holds
 * it, marks the item dirty so the holder runs once more, and reports not acquired. With a `gate`
 * (node sync's minimum interval), the same write also requires the last run to be far enough
 * back; refused for that, nothing is written and the result says when it will be.
 */
export async function acquireLease(
  doc: DynamoDBDocumentClient,
  tableName: string,
  clock: Clock,
  request: {
    readonly pk: string;
    readonly owner: string;
    readonly ttlSeconds: number;
    readonly gate?: RunGate | undefined;
  },
): Promise<GatedAcquireResult> {
  const { pk, owner, ttlSeconds, gate } = request;
  const now = clock.now().getTime();
  const gated = gate === undefined ? undefined : runGateCondition(gate, now);
  try {
    const result = await doc.send(
      new UpdateCommand({
        TableName: tableName,
        Key: { pk },
        ConditionExpression: `(attribute_not_exists(leaseOwner) OR leaseUntil < :now)${gated ? ` AND ${gated.condition}` : ''}`,
        UpdateExpression:
          'SET leaseOwner = :owner, leaseUntil = :until, fence = if_not_exists(fence, :zero) + :one, dirty = :false',
        ExpressionAttributeValues: {
          ':now': now,
          ':owner': owner,
          ':until': now + ttlSeconds * 1000,
          ':zero': 0,
          ':one': 1,
          ':false': false,
          ...gated?.values,
        },
        // What the last holder left: a leaseOwner still there means it never released.
        ReturnValues: 'ALL_OLD',
        ...(gated ? { ReturnValuesOnConditionCheckFailure: 'ALL_OLD' as const } : {}),
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
        keptSlots: parseKeptSlots(before.keptSlots),
      },
    };
  } catch (error) {
    if (!(error instanceof ConditionalCheckFailedException)) throw retryable(error, 'take lease');
    const dueAtMs = gate === undefined ? undefined : tooSoonUntil(error.Item, gate, now);
    if (dueAtMs !== undefined) return { acquired: false, tooSoon: true, dueAtMs };
  }
  try {
    const marked = await doc.send(
      new UpdateCommand({
        TableName: tableName,
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
    return acquireLease(doc, tableName, clock, request);
  }
}
