import { PatchStrategy, setHeaderOptions } from '@kubernetes/client-node';
import { afterEach, expect, it } from 'vitest';
import { lifecycleEventProblem } from '../../functions/contract/lifecycle-events';
import { createEventFeed } from '../support/event-feed';
import { createRuntimeWorld, type RuntimeWorld } from '../support/runtime-world';
import { recordPending, recordScenario } from './support/summary';
import { createLoadBalancerServices, drainAll } from './support/world';

const merge = setHeaderOptions('Content-Type', PatchStrategy.MergePatch);
let world: RuntimeWorld;

afterEach(async () => {
  await world.stop();
});

it('lifecycle events: EventBridge fails for a while; every event arrives once, and the last one per Service is its end state', async () => {
  const how =
    'PutEvents fails 40 times while 4 Services are created, and 40 more while one is changed and one deleted; the feed (a rule to SQS) must hold each event once, in order by occurredAt';
  recordPending('lifecycle events during an EventBridge outage', 4, how);
  world = await createRuntimeWorld({
    lifecycleEvents: { busName: 'platform' },
    backoffBaseSeconds: 1,
    backoffMaxSeconds: 4,
  });
  const feed = await createEventFeed(world.account, 'platform');
  world.aws.recorder.injectFault({ operation: 'PutEvents', kind: 'server-error', times: 40 });

  const names = ['ev-0', 'ev-1', 'ev-2', 'ev-3'];
  await createLoadBalancerServices(world, names);
  await drainAll(world);
  const failuresBefore = world.metrics.get('LifecycleEventPublishFailures');
  // ev-1 gets other ports, ev-2 is deleted, during a second outage.
  world.aws.recorder.injectFault({ operation: 'PutEvents', kind: 'server-error', times: 40 });
  await world.api.patchNamespacedService(
    {
      name: 'ev-1',
      namespace: 'default',
      body: { spec: { ports: [{ name: 'http', protocol: 'TCP', port: 8080, targetPort: 8080 }] } },
    },
    merge,
  );
  await world.api.deleteNamespacedService({ name: 'ev-2', namespace: 'default' });
  await world.send({ v: 1, kind: 'service', key: 'default/ev-1' });
  await world.send({ v: 1, kind: 'service', key: 'default/ev-2' });
  const drained = await drainAll(world);

  const delivered = await feed.read();
  const expected: Record<string, string[]> = {
    'ev-0': ['LoadBalancerEnsured'],
    'ev-1': ['LoadBalancerEnsured', 'LoadBalancerEnsured'],
    'ev-2': ['LoadBalancerEnsured', 'LoadBalancerDeleted'],
    'ev-3': ['LoadBalancerEnsured'],
  };
  const byService: Record<string, { type: string; at: string; id: string }[]> = {};
  for (const event of delivered) {
    expect(
      lifecycleEventProblem({ detailType: event['detail-type'], detail: event.detail }),
    ).toBeUndefined();
    const name = String(event.detail.name);
    (byService[name] ??= []).push({
      type: event['detail-type'],
      at: String(event.detail.occurredAt),
      id: String(event.detail.eventId),
    });
  }
  const ids = delivered.map((e) => String(e.detail.eventId));
  const duplicates = ids.length - new Set(ids).size;
  let converged = 0;
  let missing = 0;
  const problems: string[] = [];
  for (const [name, types] of Object.entries(expected)) {
    // Ordered by when they happened, as a consumer would: the last one is the end state.
    const got = (byService[name] ?? []).sort((a, b) => a.at.localeCompare(b.at)).map((e) => e.type);
    missing += Math.max(0, types.length - got.length);
    if (JSON.stringify(got) === JSON.stringify(types)) converged++;
    else problems.push(`${name}: ${got.join(', ')} (expected ${types.join(', ')})`);
  }
  recordScenario({
    scenario: 'lifecycle events during an EventBridge outage',
    runs: names.length,
    converged,
    leaked: 0,
    // Missing events, and events beyond the six expected (duplicates included), are lost work.
    lost: missing + Math.max(0, delivered.length - Object.values(expected).flat().length),
    how,
  });
  expect(drained).toBe(true);
  expect(failuresBefore).toBeGreaterThan(0);
  // The change and the delete met the second outage too.
  expect(world.metrics.get('LifecycleEventPublishFailures')).toBeGreaterThan(failuresBefore);
  expect(world.metrics.get('LifecycleEventsDropped')).toBe(0);
  expect(duplicates).toBe(0);
  expect(problems).toEqual([]);
});
