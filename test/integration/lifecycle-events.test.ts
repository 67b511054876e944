import { randomUUID } from 'node:crypto';
import { PatchStrategy, setHeaderOptions } from '@kubernetes/client-node';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { readNlbState } from '../../functions/nlb/nlb-state';
import { eventSource, lifecycleEventProblem } from '../../functions/contract/lifecycle-events';
import { runSweep } from '../../functions/runtime/sweep';
import { createEventFeed, type DeliveredEvent, type EventFeed } from '../support/event-feed';
import { loadBalancerService } from '../support/kube-objects';
import { createRuntimeWorld, type RuntimeWorld } from '../support/runtime-world';

const merge = setHeaderOptions('Content-Type', PatchStrategy.MergePatch);
const key = 'default/web';

let world: RuntimeWorld;
let feed: EventFeed;

beforeEach(async () => {
  world = await createRuntimeWorld({ lifecycleEvents: { busName: 'platform' } });
  feed = await createEventFeed(world.account, 'platform');
});

afterEach(async () => {
  await world.stop();
});

/** Reads what the rule delivered; every event must be ours and valid against its schema. */
async function delivered(): Promise<DeliveredEvent[]> {
  const events = await feed.read();
  for (const event of events) {
    expect(event.source).toBe(eventSource);
    expect(
      lifecycleEventProblem({ detailType: event['detail-type'], detail: event.detail }),
    ).toBeUndefined();
    expect(event.detail.cluster).toBe(world.config.clusterName);
  }
  return events.sort((a, b) =>
    String(a.detail.occurredAt).localeCompare(String(b.detail.occurredAt)),
  );
}

const types = (events: readonly DeliveredEvent[]) => events.map((e) => e['detail-type']);
const ofType = (events: readonly DeliveredEvent[], type: string) =>
  events.find((e) => e['detail-type'] === type)?.detail;

async function patchService(body: object) {
  await world.api.patchNamespacedService({ name: 'web', namespace: 'default', body }, merge);
  await world.send({ v: 1, kind: 'service', key });
  await world.drain();
}

describe('lifecycle events on EventBridge (moto: a rule delivers them to SQS)', () => {
  it('create: LoadBalancerEnsured with the real NLB', async () => {
    await world.createService();
    const events = await delivered();
    expect(types(events)).toEqual(['LoadBalancerEnsured']);

    const state = readNlbState((await world.runtime.store.getService(key))?.provider);
    const service = await world.api.readNamespacedService({ name: 'web', namespace: 'default' });
    const ensured = ofType(events, 'LoadBalancerEnsured');
    expect(ensured).toMatchObject({
      namespace: 'default',
      name: 'web',
      uid: service.metadata?.uid,
      loadBalancerArn: state.loadBalancerArn,
      dnsName: state.dnsName,
      scheme: 'internal',
      securityGroupId: state.securityGroupId,
    });
    expect(ensured?.listeners).toEqual(
      [80, 443].map((port) => ({
        port,
        protocol: 'TCP',
        targetGroupArn: state.targetGroups?.[String(port)]?.arn,
      })),
    );
  });

  it('a change of the NLB (other ports): LoadBalancerEnsured again, with the new listeners', async () => {
    await world.createService();
    await delivered();
    await patchService({
      spec: { ports: [{ name: 'http', protocol: 'TCP', port: 8080, targetPort: 8080 }] },
    });
    const events = await delivered();
    expect(types(events)).toEqual(['LoadBalancerEnsured']);
    const listeners = ofType(events, 'LoadBalancerEnsured')?.listeners as { port: number }[];
    expect(listeners.map((l) => l.port)).toEqual([8080]);
  });

  it('the correlation id of an event is in the log lines of the sync that produced it', async () => {
    await world.createService();
    const ensured = ofType(await delivered(), 'LoadBalancerEnsured');
    const lines = world.log.lines.filter((l) => l.fields.correlationId === ensured?.correlationId);
    expect(lines.map((l) => l.message)).toContain('synced');
    expect(lines.every((l) => l.fields.serviceKey === key)).toBe(true);
  });

  it('host change: NodeSetChanged and LoadBalancerHostsUpdated name the instance added', async () => {
    await world.createService();
    await delivered();
    const added = await world.addNode();
    await world.send({ v: 1, kind: 'node', reason: 'node added' });
    await world.drain();
    const events = await delivered();
    expect(types(events)).toEqual(['NodeSetChanged', 'LoadBalancerHostsUpdated']);
    expect(ofType(events, 'NodeSetChanged')).toMatchObject({
      added: [added.instanceId],
      removed: [],
      eligibleHosts: 4,
    });
    expect(ofType(events, 'LoadBalancerHostsUpdated')).toMatchObject({
      name: 'web',
      added: [added.instanceId],
      removed: [],
    });
  });

  it('delete: LoadBalancerDeleted names the NLB that was deleted', async () => {
    await world.createService();
    const arn = ofType(await delivered(), 'LoadBalancerEnsured')?.loadBalancerArn;
    await world.api.deleteNamespacedService({ name: 'web', namespace: 'default' });
    await world.send({ v: 1, kind: 'service', key });
    await world.drain();
    const events = await delivered();
    expect(types(events)).toEqual(['LoadBalancerDeleted']);
    expect(ofType(events, 'LoadBalancerDeleted')).toMatchObject({
      name: 'web',
      loadBalancerArn: arn,
    });
  });

  it('a failed sync: LoadBalancerSyncFailed with the reason and the retry delay, then Ensured once it works', async () => {
    await world.api.createNamespacedService({
      namespace: 'default',
      body: loadBalancerService('web'),
    });
    world.aws.recorder.injectFault({ operation: 'CreateLoadBalancer', kind: 'server-error' });
    await world.send({ v: 1, kind: 'service', key });
    await world.handleOnce();
    let events = await delivered();
    const failed = ofType(events, 'LoadBalancerSyncFailed');
    expect(failed).toMatchObject({ name: 'web', terminal: false, retryInSeconds: 1 });
    expect(failed?.uid).not.toBe('');
    expect(String(failed?.reason)).toMatch(/create load balancer|InternalFailure|internal/i);

    world.aws.recorder.clearFaults();
    await world.drain(3);
    events = await delivered();
    expect(types(events)).toEqual(['LoadBalancerEnsured']);
  });

  it('a terminal failure (an invalid annotation) says so and gives no retry delay', async () => {
    await world.createService('web', {
      'service.beta.kubernetes.io/aws-load-balancer-scheme': 'sideways',
    });
    const failed = ofType(await delivered(), 'LoadBalancerSyncFailed');
    expect(failed).toMatchObject({ terminal: true });
    expect(failed).not.toHaveProperty('retryInSeconds');
  });

  it('a no-op sync, a forced resync of an unchanged NLB and a label-only change publish nothing', async () => {
    await world.createService();
    await delivered();
    world.aws.recorder.reset();
    // One at a time: in one batch they would collapse into a single resync.
    await world.send({ v: 1, kind: 'service', key });
    await world.drain();
    // The sweep's resync: a full sync ignoring the checkpoint that finds no drift.
    await runSweep(world.runtime);
    await world.drain();
    expect(world.metrics.get('Syncs{outcome=done,kind=resync}')).toBe(1);
    await patchService({ metadata: { labels: { team: 'payments' } } });
    expect(await delivered()).toEqual([]);
    expect(world.aws.recorder.count('PutEvents')).toBe(0);
  });

  it('events EventBridge rejects for a while are queued, offered again and delivered once each', async () => {
    world.aws.recorder.injectFault({ operation: 'PutEvents', kind: 'server-error', times: 8 });
    await world.createService();
    // The sync's publish spends six of the faults (three rounds of two SDK attempts) and queues
    // the event; the re-offer spends the last two and gets through on its second round.
    await world.drain(3);
    const events = await delivered();
    expect(types(events)).toEqual(['LoadBalancerEnsured']);
    expect(world.aws.recorder.attempts.filter((a) => a.operation === 'PutEvents')).toHaveLength(9);
    expect(world.metrics.get('LifecycleEventPublishFailures')).toBe(1);
    expect(world.metrics.get('LifecycleEventsPublished')).toBe(1);
    expect(world.metrics.get('LifecycleEventsDropped')).toBe(0);
    // The envelope's time is when it happened, not when the retry got through.
    for (const event of events) {
      expect(event.time).toBe(String(event.detail.occurredAt).replace(/\.\d{3}Z$/, 'Z'));
    }
  });

  it('an event still rejected after a day is given up: logged with its id, counted, off the queue', async () => {
    world.aws.recorder.injectFault({ operation: 'PutEvents', kind: 'server-error' });
    const old = deletedEvent(randomUUID(), {
      occurredAt: new Date(Date.now() - 25 * 3600 * 1000).toISOString(),
    });
    await world.runtime.store.putPendingEvents([old], new Date(Date.now() + 3600_000));
    await world.send({ v: 1, kind: 'event', id: old.detail.eventId });
    await world.drain();
    expect(world.metrics.get('LifecycleEventsDropped')).toBe(1);
    const line = world.log.lines.find((l) => l.message === 'lifecycle events dropped');
    expect(line?.fields.eventIds).toEqual([old.detail.eventId]);
    expect(await world.queueDepth()).toEqual({ visible: 0, inFlight: 0, delayed: 0 });
    expect(await world.runtime.store.getPendingEvents([old.detail.eventId])).toEqual([]);
  });
});

function deletedEvent(eventId: string, fields: { occurredAt?: string; cluster?: string } = {}) {
  return {
    detailType: 'LoadBalancerDeleted' as const,
    detail: {
      schemaVersion: 1 as const,
      eventId,
      occurredAt: fields.occurredAt ?? new Date().toISOString(),
      cluster: fields.cluster ?? world.config.clusterName,
      correlationId: 'c-old',
      namespace: 'default',
      name: 'gone',
      uid: 'u-gone',
    },
  };
}

describe('queued lifecycle events cannot be forged (issue 19)', () => {
  it('an event message names a stored event by id; once published, the stored copy goes', async () => {
    const stored = deletedEvent(randomUUID());
    await world.runtime.store.putPendingEvents([stored], new Date(Date.now() + 3600_000));
    await world.send({ v: 1, kind: 'event', id: stored.detail.eventId });
    await world.drain();
    expect(types(await delivered())).toEqual(['LoadBalancerDeleted']);
    expect(await world.runtime.store.getPendingEvents([stored.detail.eventId])).toEqual([]);
  });

  it('an id that names nothing in the state table publishes nothing: dropped and counted', async () => {
    await world.send({ v: 1, kind: 'event', id: randomUUID() });
    await world.drain();
    expect(await feed.read()).toEqual([]);
    expect(world.metrics.get('UnknownEventReferences')).toBe(1);
    expect(world.metrics.get('LifecycleEventsPublished')).toBe(0);
    expect(await world.queueDepth()).toEqual({ visible: 0, inFlight: 0, delayed: 0 });
  });

  it("a stored event of another cluster is not published under this cluster's source", async () => {
    const foreign = deletedEvent(randomUUID(), { cluster: 'someone-else' });
    await world.runtime.store.putPendingEvents([foreign], new Date(Date.now() + 3600_000));
    await world.send({ v: 1, kind: 'event', id: foreign.detail.eventId });
    await world.drain();
    expect(await feed.read()).toEqual([]);
    expect(world.metrics.get('UnknownEventReferences')).toBe(1);
  });

  it('a whole event on the queue (the old form, or a forgery such as a spoofed dnsName) goes to the DLQ unpublished', async () => {
    const forged = {
      detailType: 'LoadBalancerEnsured',
      detail: {
        ...deletedEvent(randomUUID()).detail,
        dnsName: 'attacker.example.com',
        scheme: 'internet-facing',
        listeners: [],
        loadBalancerArn: 'arn:aws:elasticloadbalancing:us-east-1:123456789012:loadbalancer/net/x/1',
      },
    };
    await world.send(JSON.stringify({ v: 1, kind: 'event', event: forged }));
    await world.drain();
    expect(await feed.read()).toEqual([]);
    const dead = await world.deadLetters();
    expect(dead).toHaveLength(1);
    expect(dead[0]?.problem).toMatch(/event/);
  });
});
