import { ConditionalCheckFailedException } from '@aws-sdk/client-dynamodb';
import {
  BatchWriteCommand,
  type BatchWriteCommandOutput,
  GetCommand,
  ScanCommand,
  UpdateCommand,
  type DynamoDBDocumentClient,
} from '@aws-sdk/lib-dynamodb';
import { RetryableError } from '../core/errors';
import type { Clock } from '../sync/ports';

/** The table and the plain item operations every item family uses. */
export class StateTable {
  constructor(
    readonly doc: DynamoDBDocumentClient,
    readonly name: string,
    readonly clock: Clock,
  ) {}

  /** Sets plain attributes on a global item (bookkeeping such as last run times). */
  async setAttributes(
    pk: string,
    values: Record<string, string | number | boolean>,
  ): Promise<void> {
    const names = Object.keys(values);
    await this.doc.send(
      new UpdateCommand({
        TableName: this.name,
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
          TableName: this.name,
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
        TableName: this.name,
        Key: { pk },
        UpdateExpression: `REMOVE ${names.map((_, i) => `#n${i}`).join(', ')}`,
        ExpressionAttributeNames: Object.fromEntries(names.map((name, i) => [`#n${i}`, name])),
      }),
    );
  }

  async batchWrite(requests: readonly Record<string, unknown>[], action: string) {
    for (let i = 0; i < requests.length; i += 25) {
      let pending: Record<string, unknown>[] | undefined = requests.slice(i, i + 25);
      for (let attempt = 0; pending !== undefined && pending.length > 0; attempt++) {
        if (attempt > 4) throw new RetryableError(`state table: ${action}: throttled`);
        try {
          const result: BatchWriteCommandOutput = await this.doc.send(
            new BatchWriteCommand({ RequestItems: { [this.name]: pending } }),
          );
          pending = result.UnprocessedItems?.[this.name];
        } catch (error) {
          throw retryable(error, action);
        }
      }
    }
  }

  async get(pk: string): Promise<Record<string, unknown> | undefined> {
    try {
      const result = await this.doc.send(
        new GetCommand({ TableName: this.name, Key: { pk }, ConsistentRead: true }),
      );
      return result.Item;
    } catch (error) {
      throw retryable(error, 'read state');
    }
  }

  async *scan(filter: string, values: Record<string, unknown>, projection: string) {
    let start: Record<string, unknown> | undefined;
    do {
      const page = await this.doc.send(
        new ScanCommand({
          TableName: this.name,
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

export function retryable(error: unknown, action: string): RetryableError {
  return new RetryableError(
    `state table: ${action}: ${error instanceof Error ? error.message : String(error)}`,
    { cause: error },
  );
}
