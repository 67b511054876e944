import type { KeptSlot } from '../core/registration-slots';
import type { FailureUpdate, Lease } from '../runtime/ports';

/** What a lease's release writes besides giving the lease up. */
export interface ReleaseChanges {
  readonly failures: FailureUpdate;
  readonly unverified: boolean;
  /** When an incremented failure's retry is due (epoch ms). */
  readonly retryAt: number | undefined;
  /** Registration slots the key keeps for its next pass. */
  readonly keptSlots: readonly KeptSlot[];
  /** Only if nobody marked the item dirty during the pass (`finish`), or whatever it says. */
  readonly unlessDirty: boolean;
}

/**
 * The one conditional UpdateItem that releases a lease (DynamoStateStore.release): held by this
 * owner and fence; the failure count, the unverified mark, the retry time and the kept slots
 * written in the same request, so keeping them costs no extra unit.
 */
export function releaseUpdate(lease: Lease, changes: ReleaseChanges, now: Date) {
  const { failures, unverified, retryAt, keptSlots } = changes;
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
    ...(keptSlots.length > 0 ? ['keptSlots = :keptSlots'] : []),
  ];
  const remove = [
    'leaseOwner',
    'leaseUntil',
    ...(keptSlots.length > 0 ? [] : ['keptSlots']),
    ...(failures === 'reset' ? ['failingSince', 'retryAt'] : []),
    ...(unverified ? [] : ['unverified']),
  ];
  return {
    ConditionExpression: changes.unlessDirty
      ? 'leaseOwner = :owner AND fence = :fence AND dirty = :false'
      : 'leaseOwner = :owner AND fence = :fence',
    UpdateExpression: `SET lastPassAt = :now, dirty = :false${set.map((a) => `, ${a}`).join('')} REMOVE ${remove.join(', ')}`,
    ExpressionAttributeValues: {
      ':owner': lease.owner,
      ':fence': lease.fence,
      ':false': false,
      ':now': now.toISOString(),
      ...(failures !== 'keep' ? { ':zero': 0 } : {}),
      ...(failures === 'increment' ? { ':one': 1, ':nowMs': now.getTime() } : {}),
      ...(unverified ? { ':true': true } : {}),
      ...(retryAt !== undefined ? { ':retryAt': retryAt } : {}),
      ...(keptSlots.length > 0
        ? { ':keptSlots': keptSlots.map(({ lane, atMs }) => ({ lane, atMs })) }
        : {}),
    },
  };
}
