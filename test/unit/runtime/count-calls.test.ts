import { describe, expect, it } from 'vitest';
import {
  ElasticLoadBalancingV2Client,
  RegisterTargetsCommand,
} from '@aws-sdk/client-elastic-load-balancing-v2';
import { RequeueAfterError } from '../../../functions/core/errors';
import { countCalls } from '../../../functions/wiring/wiring';
import type { RuntimeMetrics } from '../../../functions/runtime/ports';

function recordingMetrics() {
  const counts: string[] = [];
  const metrics: RuntimeMetrics = {
    count: (name, _value, dimensions) => counts.push(`${name} ${dimensions?.operation ?? ''}`),
    milliseconds: () => undefined,
  };
  return { counts, metrics };
}

/** An ELBv2 client whose requests are answered (or refused) before they leave the process. */
function clientAnswering(
  answer: () => Promise<never> | Promise<{ output: object }>,
  maxAttempts = 1,
) {
  const client = new ElasticLoadBalancingV2Client({
    region: 'us-east-1',
    credentials: { accessKeyId: 'test', secretAccessKey: 'test' },
    maxAttempts,
  });
  client.middlewareStack.add(() => async () => ({ ...(await answer()), response: {} }) as never, {
    step: 'finalizeRequest',
    priority: 'low',
  });
  return client;
}

const register = new RegisterTargetsCommand({ TargetGroupArn: 'arn:tg', Targets: [{ Id: 'i-1' }] });

describe('AwsCalls', () => {
  it('counts a call that was answered, and one that failed', async () => {
    const { counts, metrics } = recordingMetrics();
    const answered = clientAnswering(() => Promise.resolve({ output: { $metadata: {} } }));
    countCalls(answered, metrics);
    await answered.send(register);
    const failing = clientAnswering(() => Promise.reject(new Error('ThrottlingException')));
    countCalls(failing, metrics);
    await expect(failing.send(register)).rejects.toThrow('ThrottlingException');
    expect(counts).toEqual(['AwsCalls RegisterTargets', 'AwsCalls RegisterTargets']);
  });

  it('does not count a registration the shared budget turned away before sending it', async () => {
    const { counts, metrics } = recordingMetrics();
    // What the budget middleware of functions/aws/clients.ts throws when its slots are booked.
    const refused = clientAnswering(() => Promise.reject(new RequeueAfterError('budget', 3)));
    countCalls(refused, metrics);
    await expect(refused.send(register)).rejects.toBeInstanceOf(RequeueAfterError);
    expect(counts).toEqual([]);
  });

  it('counts a registration that was sent and throttled, even when the budget turns its retry away', async () => {
    const { counts, metrics } = recordingMetrics();
    let attempt = 0;
    const throttled = Object.assign(new Error('Rate exceeded'), {
      name: 'ThrottlingException',
      $metadata: { httpStatusCode: 400 },
    });
    const client = clientAnswering(
      () =>
        ++attempt === 1
          ? Promise.reject(throttled)
          : Promise.reject(new RequeueAfterError('budget', 3)),
      2,
    );
    countCalls(client, metrics);
    await expect(client.send(register)).rejects.toBeInstanceOf(RequeueAfterError);
    expect(attempt).toBe(2);
    expect(counts).toEqual(['AwsCalls RegisterTargets']);
  });
});
