import { afterEach, expect, it } from 'vitest';
import { createRuntimeWorld, type RuntimeWorld } from '../support/runtime-world';
import { seededRandom } from '../../kit/seeded-random';
import { recordPending, recordScenario } from './support/summary';
import { createLoadBalancerServices, drainAll, endStateProblems } from './support/world';

let world: RuntimeWorld;

afterEach(async () => {
  await world.stop();
});

it('throttling storm: 30 % of ELBv2 calls throttled for a while; every Service converges, nothing reaches the DLQ', async () => {
  // The backoff shrunk for the test (base 1 s, at most 4 s). The SDK does not retry throttling
  // (issue 37): each throttled pass ends requeue-after, with what it did recorded, and comes back
  // through SQS; it is no failure, so no backoff grows.
  const how =
    '5 Services created while 30 % of ELBv2 calls (seeded, the first 60 hits) answer Throttling, each a requeue of its pass; DLQ and account checked';
  recordPending('throttling storm', 5, how);
  world = await createRuntimeWorld({ backoffBaseSeconds: 1, backoffMaxSeconds: 4 });
  const names = Array.from({ length: 5 }, (_, i) => `storm-${i}`);
  world.aws.recorder.injectFault({
    service: 'ElasticLoadBalancingV2',
    operation: '*',
    kind: 'throttle',
    probability: 0.3,
    random: seededRandom(42),
    times: 60,
  });
  await createLoadBalancerServices(world, names);
  // Throttled passes come back later each time (2 s doubling to 16 s, jittered): the storm's 60
  // throttles take a couple of minutes to work through.
  const drained = await drainAll(world, 240_000);
  const { problems, converged, leaked } = await endStateProblems(
    world,
    Object.fromEntries(names.map((n) => [n, [80, 443]])),
  );
  const parked = await world.deadLetters();
  recordScenario({
    scenario: 'throttling storm',
    runs: names.length,
    converged,
    leaked,
    lost: names.length - converged + parked.length,
    how,
  });
  expect(drained).toBe(true);
  const throttled = world.log.lines.filter(
    (l) => l.message === 'sync requeued' && /^AWS throttled /.test(String(l.fields.reason)),
  );
  expect(throttled.length).toBeGreaterThan(0);
  expect(world.metrics.get('Retries')).toBe(0);
  expect(parked).toEqual([]);
  expect(problems).toEqual([]);
});
