/**
 * The forwarder's heartbeat, end to end: the real forwarder sends to the real work queue (moto),
 * the real handler counts what the ForwarderQuiet alarm and the dashboard read. The alarm's own
 * shape (fewer than one heartbeat in 10 minutes, missing data breaching) is checked on the
 * synthesised template in test/infra/controller-stack.test.ts.
 */
import { SQSClient } from '@aws-sdk/client-sqs';
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { SqsWorkQueue } from '../../functions/queue/sqs-work-queue';
import { Forwarder } from '../../functions/forwarder/forwarder';
import { AwsCallRecorder } from '../../kit/aws-calls';
import type { WorkMessage } from '../../functions/contract/work-messages';
import { createRuntimeWorld, type RuntimeWorld } from '../support/runtime-world';
import { callerRoleOption } from '../../functions/aws/caller-role';

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
  const sqs = recorder.attach(
    world.account.client(SQSClient, { maxAttempts: 1, ...callerRoleOption('forwarder') }),
  );
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

  it('a forwarder that cannot list or watch is not silent, but its heartbeats count the failing watch and its failures', async () => {
    // The forwarder's list and watch of all Services fail (the functions read them by namespace).
    world.kube.failNextRequests(1_000, 403, { method: 'GET', path: /^\/api\/v1\/services$/ });
    startForwarder(1);
    await vi.waitFor(
      async () => {
        await world.handleOnce(1);
        expect(world.metrics.get('ForwarderHeartbeats')).toBeGreaterThanOrEqual(2);
        expect(world.metrics.get('ForwarderWatchFailures')).toBeGreaterThanOrEqual(2);
      },
      { timeout: 15_000 },
    );
    // A level per heartbeat (the alarm reads its Minimum): the Services watch at every heartbeat,
    // the first included (sent at start, before any list: a restarted pod that lost its watches
    // must not report a healthy 0 first), and the EndpointSlices watch, which starts once the
    // Services are listed; the Nodes watch too in the first, if sent before the Nodes list
    // completed.
    const beats = world.metrics.get('ForwarderHeartbeats');
    expect(world.metrics.get('ForwarderFailingWatches')).toBeGreaterThanOrEqual(2 * beats);
    expect(world.metrics.get('ForwarderFailingWatches')).toBeLessThanOrEqual(2 * beats + 1);
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

  it('a heartbeat queued while another is in flight does not report the same failed sends again', async () => {
    // A send we hold open decides the interleaving, so this does not depend on timing.
    const heartbeats: number[] = [];
    let calls = 0;
    let release: () => void = () => undefined;
    const held = new Promise<void>((resolve) => (release = resolve));
    const send = async (messages: WorkMessage[]): Promise<void> => {
      calls++;
      if (calls <= 2) throw new Error('injected send failure');
      const beat = messages.find((m) => m.kind === 'heartbeat');
      if (beat !== undefined && heartbeats.length === 0) await held;
      for (const m of messages) if (m.kind === 'heartbeat') heartbeats.push(m.sendFailures);
    };
    forwarder = new Forwarder({
      kubeConfig: world.kube.kubeConfig({ as: world.rbac?.forwarder }),
      claim: { loadBalancerClass: world.config.loadBalancerClass, claimClassless: false },
      nodePolicy: 'stable',
      send,
      // Backoff outlasts a heartbeat period, so a heartbeat is queued after both failures.
      sleep: () => new Promise((resolve) => setTimeout(resolve, 150)),
      heartbeatSeconds: 0.05,
    });
    forwarder.start();
    // The held heartbeat is in flight; wait until the next one is queued behind it.
    await vi.waitFor(() => expect(calls).toBeGreaterThanOrEqual(3));
    const beatsBefore = forwarder.publisher.metrics.forwarded;
    await new Promise((resolve) => setTimeout(resolve, 200));
    expect(forwarder.publisher.metrics.forwarded).toBe(beatsBefore);
    release();
    await vi.waitFor(() => expect(heartbeats.length).toBeGreaterThanOrEqual(3));
    // The held heartbeat carries both failures; every later one, none (not 2 again, nor -2).
    expect(heartbeats[0]).toBe(2);
    expect(heartbeats.slice(1)).toEqual(heartbeats.slice(1).map(() => 0));
  });
});
