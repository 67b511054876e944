import {
  DescribeLoadBalancersCommand,
  ElasticLoadBalancingV2Client,
} from '@aws-sdk/client-elastic-load-balancing-v2';
import { afterAll, beforeAll, describe, expect, it, inject } from 'vitest';
import { translateAwsError } from '../../functions/aws/aws-errors';
import { boundedRetry } from '../../functions/aws/bounded-retry';
import { RequeueAfterError } from '../../functions/core/errors';
import { slotWaitBoundMs } from '../../functions/core/registration-slots';
import { MotoAccount } from '../../kit/moto';
import { AwsFaultProxy } from '../support/aws-fault-proxy';

/**
 * The SDK retry strategy the functions' clients use (functions/aws/bounded-retry.ts), on real SDK
 * clients against moto, with the answers moto never gives (throttling, a request timeout)
 * injected by a proxy in front of it.
 */
describe('bounded SDK retries (issue 37: no Lambda pays to wait)', () => {
  let proxy: AwsFaultProxy;
  const account = new MotoAccount();
  beforeAll(async () => {
    proxy = await AwsFaultProxy.start(inject('awsEndpoint'), { accountId: account.accountId });
  });
  afterAll(async () => {
    await proxy.stop();
  });

  function client(throttling: 'handBack' | 'retry') {
    return new ElasticLoadBalancingV2Client({
      ...account.config,
      endpoint: proxy.url,
      ...boundedRetry(5, throttling),
    });
  }

  it('a throttled ELBv2 call is not retried in place: it fails at once, and becomes a requeue of the pass', async () => {
    proxy.refused.length = 0;
    proxy.failNext('DescribeLoadBalancers', 'Throttling', 1);
    const started = performance.now();
    const error = await client('handBack')
      .send(new DescribeLoadBalancersCommand({}))
      .catch((e: unknown) => e);
    expect((error as Error).name).toBe('Throttling');
    expect(proxy.refused).toEqual(['DescribeLoadBalancers: Throttling']);
    expect(performance.now() - started).toBeLessThan(slotWaitBoundMs);
    expect(translateAwsError(error, 'describe load balancers')).toBeInstanceOf(RequeueAfterError);
  });

  it('a transient failure is retried after at most the bound each time', async () => {
    proxy.refused.length = 0;
    proxy.failNext('DescribeLoadBalancers', 'RequestTimeout', 3);
    const answer = await client('handBack').send(new DescribeLoadBalancersCommand({}));
    expect(proxy.refused).toHaveLength(3);
    expect(answer.$metadata.attempts).toBe(4);
    expect(answer.$metadata.totalRetryDelay ?? 0).toBeLessThanOrEqual(3 * slotWaitBoundMs);
  });

  it('a client that retries throttling (DynamoDB, SQS) waits at most the bound between attempts', async () => {
    proxy.refused.length = 0;
    proxy.failNext('DescribeLoadBalancers', 'Throttling', 2);
    const answer = await client('retry').send(new DescribeLoadBalancersCommand({}));
    expect(proxy.refused).toHaveLength(2);
    expect(answer.$metadata.attempts).toBe(3);
    expect(answer.$metadata.totalRetryDelay ?? 0).toBeLessThanOrEqual(2 * slotWaitBoundMs);
  });
});
