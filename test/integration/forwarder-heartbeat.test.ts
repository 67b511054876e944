/**
 * The forwarder's heartbeat, end to end: the real forwarder sends to the real work queue (moto),
 * the real handler counts what the ForwarderQuiet alarm and the dashboard read. The alarm's own
 * shape (fewer than one heartbeat in 10 minutes, missing data breaching) is checked on the
 * synthesised template in test/infra/controller-stack.test.ts.
 */
import { SQSClient } from '@aws-sdk/client-sqs';
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { SqsWorkQueue } from '../../functions/aws/sqs-work-queue';
import { Forwarder } from '../../functions/forwarder/forwarder';
import { AwsCallRecorder } from '../support/aws-calls';
import { createRuntimeWorld, type RuntimeWorld } from '../support/runtime-world';

let world: RuntimeWorld;
let forwarder: Forwarder | undefined;
/** The forwarder's own SQS client, so faults hit its sends and not the test's receives. */
let recorder: AwsCallRecorder;

beforeEach(async () => {
  world = await createRuntimeWorld();
  recorder = new AwsCallRecorder();
});

afterEach(async () => {
  await forwarder?.stop(1000);
  forwarder = undefined;
  await world.stop();
});

function startForwarder(heartbeatSeconds: number) {
  const sqs = recorder.attach(world.account.client(SQSClient, { maxAttempts: 1 }));
  const queue = new SqsWorkQueue(sqs, world.config.queueUrl);
  forwarder = new Forwarder({
    // As in the cluster: its ServiceAccount, under the RBAC of infra/k8s.
    kubeConfig: world.kube.kubeConfig({ as: world.rbac?.forwarder }),
    claim: { loadBalancerClass: world.config.loadBalancerClass, claimClassless: false },
    nodePolicy: 'stable',
    send: (messages) => queue.send(messages),
    sleep: (ms) => new Promise((resolve) => setTimeout(resolve, Math.min(ms, 200))),
    heartbeatSeconds,
  });
  forwarder.start();
}

describe('forwarder heartbeat', () => {
  it('a live forwarder is counted as ForwarderHeartbeats; its failed sends as ForwarderSendFailures, once', async () => {
    recorder.injectFault({ operation: 'SendMessageBatch', kind: 'server-error', times: 2 });
    startForwarder(1);
    await vi.waitFor(
      async () => {
        await world.handleOnce(1);
        expect(world.metrics.get('ForwarderHeartbeats')).toBeGreaterThanOrEqual(2);
      },
      { timeout: 15_000 },
    );
    expect(world.metrics.get('ForwarderSendFailures')).toBe(2);
    expect(world.log.lines.filter((l) => l.level === 'error')).toEqual([]);
  });

  it('a forwarder that cannot send is silent: no heartbeat is counted, which is what the alarm reads', async () => {
    recorder.injectFault({ operation: 'SendMessageBatch', kind: 'server-error', times: 1_000 });
    startForwarder(1);
    await vi.waitFor(() =>
      expect(forwarder?.publisher.metrics.sendFailures).toBeGreaterThanOrEqual(3),
    );
    await world.handleOnce(1);
    expect(world.metrics.get('ForwarderHeartbeats')).toBe(0);
  });
});
