import { ConditionalCheckFailedException } from '@aws-sdk/client-dynamodb';
import { UpdateCommand, type DynamoDBDocumentClient } from '@aws-sdk/lib-dynamodb';
import type { TatItem } from '../aws/registration-budget';
import { fingerprintAttribute, type BudgetWrite, type TatUpdate } from '../core/registration-slots';
import { registrationBudgetPk } from './table-layout';

/**
 * The budget item in the state table: pk `budget#elbv2-registration`, attribute `tat`, the
 * namespaces' booked horizons in `n0`…`n31`, who wrote each last in `f0`…`f31`, and their ticket
 * lines in `q0`…`q15` (80 numbers at most, whatever the namespaces: under 1 KB, one write unit).
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
    write.lanes.forEach((lane, i) => {
      names[`#l${i}`] = lane;
      names[`#f${i}`] = fingerprintAttribute(lane);
    });
    const owned = write.fingerprint !== undefined && write.lanes.length > 0;
    const setLanes = (value: string) =>
      write.lanes.map((_, i) => `, #l${i} = ${value}${owned ? `, #f${i} = :fp` : ''}`).join('');
    const usedNames = owned
      ? names
      : Object.fromEntries(Object.entries(names).filter(([key]) => key.startsWith('#l')));
    const fingerprint: Record<string, number> =
      owned && write.fingerprint !== undefined ? { ':fp': write.fingerprint } : {};
    if (write.kind === 'restart') {
      return this.update({
        ConditionExpression: 'attribute_not_exists(tat) OR tat < :now',
        UpdateExpression: `SET tat = :next${setLanes(':next')}`,
        ExpressionAttributeNames: usedNames,
        ExpressionAttributeValues: {
          ':now': write.nowMs,
          ':next': write.nextTat,
          ...fingerprint,
        },
      });
    }
    // Every SET reads the item as it was: each lane becomes the new tat. A lane the namespace
    // wrote last (its fingerprint) holds it back past `:lane`; when it wrote none, they hold it
    // back only all past `:foreign` (applyBudgetWrite's rule).
    const within = (i: number, bound: string) =>
      `attribute_not_exists(#l${i}) OR #l${i} <= ${bound}`;
    const lanes = write.lanes.map((_, i) => i);
    const foreign = lanes.map((i) => within(i, ':foreign')).join(' OR ');
    const fair =
      write.lanes.length === 0
        ? ''
        : owned
          ? ` AND (tat <= :immediate OR (${lanes
              .map((i) => `(NOT #f${i} = :fp OR ${within(i, ':lane')})`)
              .join(
                ' AND ',
              )} AND (${lanes.map((i) => `#f${i} = :fp`).join(' OR ')} OR ${foreign})))`
          : ` AND (tat <= :immediate OR ${foreign})`;
    return this.update({
      ConditionExpression: `tat >= :now AND tat <= :latest${fair}`,
      UpdateExpression: `SET tat = tat + :interval${setLanes('tat + :interval')}`,
      ExpressionAttributeNames: usedNames,
      ExpressionAttributeValues: {
        ':now': write.nowMs,
        ':latest': write.latestTat,
        ':interval': write.intervalMs,
        ...fingerprint,
        ...(write.lanes.length === 0
          ? {}
          : {
              ':immediate': write.immediateTat,
              ':foreign': write.latestForeignLane,
              ...(owned ? { ':lane': write.latestLane } : {}),
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
