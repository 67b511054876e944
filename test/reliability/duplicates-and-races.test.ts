import { PatchStrategy, setHeaderOptions } from '@kubernetes/client-node';
import { afterEach, beforeEach, expect, it } from 'vitest';
import type { Service } from '../../functions/core/objects';
import type { WorkMessage } from '../../functions/contract/work-messages';
import { loadBalancerService } from '../support/kube-objects';
import { createRuntimeWorld, type RuntimeWorld } from '../support/runtime-world';
import { recordPending, recordScenario } from './support/summary';
import { createLoadBalancerServices, drainAll, endStateProblems } from './support/world';

const merge = setHeaderOptions('Content-Type', PatchStrategy.MergePatch);
const key = 'default/web';
let world: RuntimeWorld;
/** Every provider call with the Service it was for and when it ran: the exclusivity check. */
let spans: { key: string; method: string; start: number; end: number }[];

beforeEach(async () => {
  // Host updates through the work queue, so a test can hold one back and race it against a
  // spec change (node sync's own host updates take the same key lease: node-queue.test.ts).
  world = await createRuntimeWorld({
    backoffBaseSeconds: 1,
    backoffMaxSeconds: 4,
    directHostUpdates: 0,
    // A delivery that finds the key busy comes back when the lease runs out: drains wait that.
    leaseSeconds: 10,
  });
  spans = [];
  const provider = world.runtime.provider as unknown as Record<
    string,
    (service: Service, ...rest: unknown[]) => Promise<unknown>
  >;
  for (const method of ['ensureLoadBalancer', 'updateLoadBalancer', 'ensureLoadBalancerDeleted']) {
    const original = provider[method]!.bind(provider);
    provider[method] = async (service, ...rest) => {
      const span = {
        key: `${service.metadata?.namespace}/${service.metadata?.name}`,
        method,
        start: performance.now(),
        end: Number.POSITIVE_INFINITY,
      };
      spans.push(span);
      try {
        return await original(service, ...rest);
      } finally {
        span.end = performance.now();
      }
    };
  }
});

afterEach(async () => {
  await world.stop();
});

/** Pairs of provider calls for one key that ran at the same time (none may). */
function overlaps(): string[] {
  const found: string[] = [];
  spans.forEach((a, i) =>
    spans.slice(i + 1).forEach((b) => {
      if (a.key === b.key && a.start < b.end && b.start < a.end)
        found.push(`${a.key}: ${a.method} and ${b.method}`);
    }),
  );
  return found;
}

async function receiveOne(message: WorkMessage) {
  await world.send(message);
  const records = await world.receive(1);
  expect(records).toHaveLength(1);
  return records;
}

const results: { name: string; ok: boolean; leaked: number }[] = [];

/** Drains, checks the end state and the exclusivity, and records the run for the summary. */
async function check(
  name: string,
  wanted: Record<string, number[]>,
  extra: string[] = [],
  hosts?: readonly string[],
) {
  const drained = await drainAll(world);
  const end = await endStateProblems(world, wanted, hosts);
  const problems = [...extra, ...end.problems, ...overlaps(), ...(drained ? [] : ['not drained'])];
  results.push({ name, ok: problems.length === 0, leaked: end.leaked });
  recordScenario({
    scenario: 'duplicates and races',
    runs: results.length,
    converged: results.filter((r) => r.ok).length,
    leaked: results.reduce((sum, r) => sum + r.leaked, 0),
    lost: results.filter((r) => !r.ok).length,
    how,
  });
  expect(problems).toEqual([]);
}

const how =
  'a message twice in one batch and in two batches; two deliveries of one key handled at once; a host update racing a spec change; provider calls per key never overlap (timed spans)';

beforeEach(() => {
  // A test that throws before its check shows as lost; check() replaces this with the result.
  recordPending('duplicates and races', results.length + 1, how);
});

it('the same message twice in one batch is one sync', async () => {
  await world.api.createNamespacedService({
    namespace: 'default',
    body: loadBalancerService('web'),
  });
  await world.send({ v: 1, kind: 'service', key });
  await world.send({ v: 1, kind: 'service', key });
  const records = await world.receive(1);
  const more = records.length < 2 ? await world.receive(1) : [];
  expect([...records, ...more]).toHaveLength(2);
  await world.handle([...records, ...more]);
  const ensures = spans.filter((s) => s.method === 'ensureLoadBalancer').length;
  await check(
    'twice in one batch',
    { web: [80, 443] },
    ensures === 1 ? [] : [`${ensures} ensures`],
  );
});

it('the same message delivered again later changes nothing in AWS', async () => {
  await createLoadBalancerServices(world, ['web']);
  await drainAll(world);
  world.aws.recorder.reset();
  await world.send({ v: 1, kind: 'service', key });
  await drainAll(world);
  const calls = world.aws.recorder.count(undefined, 'ElasticLoadBalancingV2');
  await check('twice in two batches', { web: [80, 443] }, calls === 0 ? [] : [`${calls} calls`]);
});

it('two deliveries of one key at once: one sync at a time, a second pass, the busy delivery back when the lease runs out', async () => {
  await world.api.createNamespacedService({
    namespace: 'default',
    body: loadBalancerService('web'),
  });
  const first = await receiveOne({ v: 1, kind: 'service', key });
  const second = await receiveOne({ v: 1, kind: 'service', key });
  const [a, b] = await Promise.all([world.handle(first), world.handle(second)]);
  // The delivery that found the key busy is not acknowledged: it waits out the holder's lease.
  const failed = a.batchItemFailures.length + b.batchItemFailures.length;
  await check('concurrent deliveries', { web: [80, 443] }, [
    ...(failed === 1 ? [] : [`${failed} deliveries back on the queue, not the busy one alone`]),
    ...(world.metrics.get('BusyKeys') >= 1 ? [] : ['the second delivery was not turned away']),
  ]);
});

it('a node sync racing a spec change ends with the new ports on every node', async () => {
  await createLoadBalancerServices(world, ['web']);
  await drainAll(world);
  const [added] = await world.aws.addHosts(1);
  world.kube.store.create('nodes', '', {
    metadata: { name: added!.name },
    spec: { providerID: added!.providerID },
    status: { conditions: [{ type: 'Ready', status: 'True' }] },
  });
  await world.api.patchNamespacedService(
    {
      name: 'web',
      namespace: 'default',
      body: { spec: { ports: [{ name: 'http', protocol: 'TCP', port: 8080, targetPort: 8080 }] } },
    },
    merge,
  );
  // Node sync stores the new host set and queues a host update for the Service; that update
  // and the spec change are then handled at once, in two invocations.
  await world.handle(await receiveOne({ v: 1, kind: 'node', reason: 'node added' }));
  const hostUpdate = await world.receive(1);
  const spec = await receiveOne({ v: 1, kind: 'service', key });
  const busyBefore = world.metrics.get('BusyKeys');
  await Promise.all([world.handle(hostUpdate), world.handle(spec)]);
  const hosts = [...world.aws.hosts.map((h) => h.instanceId), added!.instanceId];
  await check(
    'node sync racing a spec change',
    { web: [8080] },
    [
      ...(hostUpdate.length === 1 && hostUpdate[0]!.body.includes('"hosts"')
        ? []
        : ['no host update was queued']),
      ...(world.metrics.get('BusyKeys') > busyBefore ? [] : ['the two did not meet']),
    ],
    hosts,
  );
});
