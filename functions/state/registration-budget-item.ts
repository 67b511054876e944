import { ConditionalCheckFailedException } from '@aws-sdk/client-dynamodb';
import { UpdateCommand, type DynamoDBDocumentClient } from '@aws-sdk/lib-dynamodb';
import type { TatItem } from '../aws/registration-budget';
import type { BudgetWrite, TatUpdate } from '../core/registration-slots';
import { registrationBudgetPk } from './table-layout';

/**
 * The budget item in the state table: pk `budget#elbv2-registration`, attribute `tat`, the
 * namespaces' booked horizons in `n0`…`n31` and their ticket lines in `q0`…`q15` (48 numbers at
 * most, whatever the namespaces: about 600 bytes, one write unit).
 */
export class DynamoTatItem implements TatItem {
  constructor(
    private readonly doc: DynamoDBDocumentClient,
    private readonly tableName: string,
    private readonly pk: string = registrationBudgetPk,
  ) {}

  write(write: BudgetWrite): Promise<TatUpdate> {
    if (write.kind === 'ticket') {
      return this.update({
        ConditionExpression: write.known === undefined ? 'attribute_not_exists(#q)' : '#q = :known',
        UpdateExpression: 'SET #q = :end',
        ExpressionAttributeNames: { '#q': write.attribute },
        ExpressionAttributeValues: {
          ':end': write.end,
          ...(write.known === undefined ? {} : { ':known': write.known }),
        },
        returns: write.attribute,
      });
    }
    const names: Record<string, string> = {};
    write.lanes.forEach((lane, i) => (names[`#l${i}`] = lane));
    const setLanes = write.lanes.map((_, i) => `, #l${i} = `);
    if (write.kind === 'restart') {
      return this.update({
        ConditionExpression: 'attribute_not_exists(tat) OR tat < :now',
        UpdateExpression: `SET tat = :next${setLanes.map((set) => `${set}:next`).join('')}`,
        ExpressionAttributeNames: names,
        ExpressionAttributeValues: {
          ':now': write.nowMs,
          ':next': write.nextTat,
        },
      });
    }
    // Every SET reads the item as it was: each lane becomes the new tat.
    const fair =
      write.lanes.length === 0
        ? ''
        : ` AND (tat <= :immediate${write.lanes
            .map((_, i) => ` OR attribute_not_exists(#l${i}) OR #l${i} <= :lane`)
            .join('')})`;
    return this.update({
      ConditionExpression: `tat >= :now AND tat <= :latest${fair}`,
      UpdateExpression: `SET tat = tat + :interval${setLanes.map((set) => `${set}tat + :interval`).join('')}`,
      ExpressionAttributeNames: names,
      ExpressionAttributeValues: {
        ':now': write.nowMs,
        ':latest': write.latestTat,
        ':interval': write.intervalMs,
        ...(write.lanes.length === 0
          ? {}
          : {
              ':immediate': write.immediateTat,
              ':lane': write.latestLane,
            }),
      },
    });
  }

  private async update(expression: {
    ConditionExpression: string;
    UpdateExpression: string;
    ExpressionAttributeNames: Record<string, string>;
    ExpressionAttributeValues: Record<string, number>;
    /** The attribute whose new value the write reports (`tat` but for a ticket). */
    returns?: string;
  }): Promise<TatUpdate> {
    const { ExpressionAttributeNames, returns = 'tat', ...rest } = expression;
    try {
      const result = await this.doc.send(
        new UpdateCommand({
          TableName: this.tableName,
          Key: { pk: this.pk },
          ...rest,
          ...(Object.keys(ExpressionAttributeNames).length > 0 ? { ExpressionAttributeNames } : {}),
          ReturnValues: 'UPDATED_NEW',
          ReturnValuesOnConditionCheckFailure: 'ALL_OLD',
        }),
      );
      return { booked: true, tat: Number(result.Attributes?.[returns]) };
    } catch (error) {
      if (!(error instanceof ConditionalCheckFailedException)) throw error;
      // The document client does not unmarshall the item a refused condition returns.
      const stored = (error.Item ?? {}) as Record<string, { N?: string } | undefined>;
      const item: Record<string, number | undefined> = {};
      for (const [name, value] of Object.entries(stored)) {
        if (value?.N !== undefined) item[name] = Number(value.N);
      }
      return { booked: false, item };
    }
  }
}
