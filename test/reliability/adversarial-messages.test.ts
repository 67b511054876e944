import { randomBytes, randomUUID } from 'node:crypto';
import { afterEach, expect, it } from 'vitest';
import { createEventFeed } from '../support/event-feed';
import { loadBalancerService } from '../support/kube-objects';
import { createRuntimeWorld, type RuntimeWorld } from '../support/runtime-world';
import { inventory } from './support/inventory';
import { recordPending, recordScenario } from './support/summary';
import { drainAll } from './support/world';

let world: RuntimeWorld;

afterEach(async () => {
  await world.stop();
});

const scenario = 'adversarial: spoofed lifecycle events and message floods';
const how =
  'anything that can send to the work queue, while team-b/web syncs: 20 lifecycle event ids that name nothing, a whole LoadBalancerEnsured with dnsName attacker.example.com, a stored event of another cluster, 50 resyncs of team-b/web (none from the sweep) and 50 node messages in a burst; plus a team-a Service whose state record would pass 380 KiB compressed (a 20,000-entry selector of random values). Judged: no forged event published, no AWS call for the floods, at most two Node lists for the burst, a Warning for the oversized Service and nothing of it in AWS, team-b/web converged';

it(`${scenario}: nothing forged is published, floods cost no AWS call, other namespaces unaffected`, async () => {
  const runs = 7;
  recordPending(scenario, runs, how);
  world = await createRuntimeWorld({
    lifecycleEvents: { busName: 'platform' },
    nodeSyncMinIntervalSeconds: 10,
  });
  const feed = await createEventFeed(world.account, 'platform');
  const problems: string[] = [];
  let handled = 0;

  // The other tenant's Service, synced before the flood and checked after it.
  await world.api.createNamespacedService({
    namespace: 'team-b',
    body: loadBalancerService('web', 'team-b'),
  });
  await world.send({ v: 1, kind: 'service', key: 'team-b/web' });
  await world.send({ v: 1, kind: 'node', reason: 'first pass' });
  await drainAll(world);
  const ensured = (await feed.read()).filter((e) => e['detail-type'] === 'LoadBalancerEnsured');
  if (ensured.length !== 1) problems.push(`team-b/web: ${ensured.length} Ensured events`);
  world.aws.recorder.reset();
  const nodeListsBefore = nodeLists();

  // The flood.
  for (let i = 0; i < 20; i++) await world.send({ v: 1, kind: 'event', id: randomUUID() });
  const forged = JSON.stringify({
    v: 1,
    kind: 'event',
    event: {
      detailType: 'LoadBalancerEnsured',
      detail: {
        schemaVersion: 1,
        eventId: randomUUID(),
        occurredAt: new Date().toISOString(),
        cluster: world.config.clusterName,
        correlationId: 'forged',
        namespace: 'team-b',
        name: 'web',
        uid: 'forged',
        dnsName: 'attacker.example.com',
        scheme: 'internet-facing',
        listeners: [],
        loadBalancerArn: 'arn:aws:elasticloadbalancing:us-east-1:123456789012:loadbalancer/net/x/1',
      },
    },
  });
  await world.send(forged);
  const foreign = {
    detailType: 'LoadBalancerDeleted' as const,
    detail: {
      schemaVersion: 1 as const,
      eventId: randomUUID(),
      occurredAt: new Date().toISOString(),
      cluster: 'another-cluster',
      correlationId: 'c',
      namespace: 'team-b',
      name: 'web',
      uid: 'u',
    },
  };
  await world.runtime.store.putPendingEvents([foreign], new Date(Date.now() + 3600_000));
  await world.send({ v: 1, kind: 'event', id: foreign.detail.eventId });
  for (let i = 0; i < 50; i++) await world.send({ v: 1, kind: 'resync', key: 'team-b/web' });
  for (let i = 0; i < 50; i++) await world.send({ v: 1, kind: 'node', reason: 'flood' });

  // A tenant's Service too large to record: refused before anything is created. Random values,
  // since the record is stored compressed and repeated text would fit.
  const huge = loadBalancerService('huge', 'team-a');
  huge.spec = {
    ...huge.spec,
    selector: Object.fromEntries(
      Array.from({ length: 20_000 }, (_, i) => [`k${i}`, randomBytes(18).toString('base64url')]),
    ),
  };
  await world.api.createNamespacedService({ namespace: 'team-a', body: huge });
  await world.send({ v: 1, kind: 'service', key: 'team-a/huge' });
  const drained = await drainAll(world);

  const published = await feed.read();
  const notOurs = published.filter(
    (e) =>
      e.detail.dnsName === 'attacker.example.com' || e.detail.cluster !== world.config.clusterName,
  );
  if (notOurs.length > 0) problems.push(`${notOurs.length} forged events published`);
  else handled++;
  if (world.metrics.get('UnknownEventReferences') !== 21)
    problems.push(`UnknownEventReferences ${world.metrics.get('UnknownEventReferences')}, not 21`);
  else handled++;
  const parked = await world.deadLetters();
  if (!parked.some((m) => m.body === forged))
    problems.push('the whole forged event is not in the DLQ');
  else handled++;
  const elbCalls = Object.entries(world.aws.recorder.byOperation()).filter(([op]) =>
    /^(ElasticLoadBalancingV2|EC2)\./.test(op),
  );
  if (elbCalls.length > 0) problems.push(`AWS calls during the flood: ${JSON.stringify(elbCalls)}`);
  else handled++;
  const passes = nodeLists() - nodeListsBefore;
  // One pass if the interval since the last had run out when the burst began, one for the rest.
  if (passes > 2) problems.push(`${passes} Node lists for the node burst of 50, more than 2`);
  else handled++;

  const warnings = await world.api.listNamespacedEvent({ namespace: 'team-a' });
  const warned = warnings.items.some(
    (e) =>
      e.involvedObject.name === 'huge' &&
      e.type === 'Warning' &&
      /state record would be \d+ KiB compressed, over the 380 KiB/.test(e.message ?? ''),
  );
  const found = await inventory(world.aws);
  if (!warned) problems.push('team-a/huge: no Warning naming the state record limit');
  if (found.loadBalancers.length !== 1 || found.targetGroups.length !== 2)
    problems.push(
      `resources beyond team-b/web: ${found.loadBalancers.length} NLBs, ${found.targetGroups.length} target groups`,
    );
  const leaked =
    Math.max(0, found.loadBalancers.length - 1) + Math.max(0, found.targetGroups.length - 2);
  if (warned && leaked === 0) handled++;
  const record = await world.runtime.store.getService('team-b/web');
  if (record?.checkpoint === undefined || found.loadBalancers.length < 1)
    problems.push('team-b/web: not converged');
  else handled++;

  recordScenario({ scenario, runs, converged: handled, leaked, lost: runs - handled, how });
  expect(drained).toBe(true);
  expect(problems).toEqual([]);
});

function nodeLists(): number {
  return world.kube.requests.filter((r) => r.method === 'GET' && r.path === '/api/v1/nodes').length;
}
