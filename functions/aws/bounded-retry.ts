/**
 * The SDK retry strategy of every client the functions make (issue 37: no Lambda pays to wait).
 *
 * The SDK's own modes sleep where a Lambda is billed for it: `standard` backs a throttled call off
 * for up to 20 s, `adaptive` also holds calls on a client-side token bucket. Here a transient
 * failure (5xx, a reset connection) is retried at once-ish, after at most `slotWaitBoundMs`, with
 * the standard strategy's retry quota, so a failing dependency does not draw a retry storm.
 *
 * Throttling is not retried at all for the clients whose rate is ours to manage (ELBv2, EC2, the
 * tagging API): the error goes up, `translateAwsError` makes it a RequeueAfterError, and the key's
 * pass ends with its progress recorded and comes back through SQS in a moment, as it does for a
 * slot on the registration budget. For DynamoDB and SQS, whose throttling is brief (on-demand
 * capacity adapting) and whose calls carry the bookkeeping of that very hand-back, throttling is
 * retried with the same bounded delay.
 */
import { ConfiguredRetryStrategy } from '@smithy/core/retry';
import type { RetryErrorInfo, RetryStrategyV2, StandardRetryToken } from '@smithy/types';
import { slotWaitBoundMs } from '../core/registration-slots';

/** Full jitter on a doubling base, capped at the bound: 0–50 ms, 0–100 ms, 0–200 ms, 0–250 ms. */
export function boundedBackoffMs(attempt: number, random: () => number = Math.random): number {
  return Math.floor(random() * Math.min(slotWaitBoundMs, 25 * 2 ** attempt));
}

export class BoundedRetryStrategy implements RetryStrategyV2 {
  readonly mode = 'standard';
  private readonly standard: ConfiguredRetryStrategy;

  constructor(
    maxAttempts: number,
    private readonly options: { readonly retryThrottling: boolean },
  ) {
    this.standard = new ConfiguredRetryStrategy(maxAttempts, (attempt) =>
      boundedBackoffMs(attempt),
    );
  }

  acquireInitialRetryToken(scope: string): Promise<StandardRetryToken> {
    return this.standard.acquireInitialRetryToken(scope);
  }

  refreshRetryTokenForRetry(
    token: StandardRetryToken,
    errorInfo: RetryErrorInfo,
  ): Promise<StandardRetryToken> {
    if (errorInfo.errorType === 'THROTTLING' && !this.options.retryThrottling) {
      // The retry middleware rethrows the call's own error when no token is given.
      return Promise.reject(new Error('throttled: handed back to the queue, not retried here'));
    }
    return this.standard.refreshRetryTokenForRetry(token, errorInfo);
  }

  recordSuccess(token: StandardRetryToken): void {
    this.standard.recordSuccess(token);
  }
}

/**
 * The retry settings of a client: `handBack` for the AWS APIs whose rate is ours to manage (ELBv2,
 * EC2, tagging: throttling goes back to the queue), `retry` for DynamoDB, SQS and EventBridge.
 */
export function boundedRetry(
  maxAttempts: number,
  throttling: 'handBack' | 'retry',
): { readonly maxAttempts: number; readonly retryStrategy: BoundedRetryStrategy } {
  return {
    maxAttempts,
    retryStrategy: new BoundedRetryStrategy(maxAttempts, {
      retryThrottling: throttling === 'retry',
    }),
  };
}
