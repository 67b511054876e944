import { afterEach, expect, it, vi } from 'vitest';
import { SqsWorkQueue } from '../../functions/queue/sqs-work-queue';
import { Forwarder } from '../../functions/forwarder/forwarder';
import type { JsonObject } from '../../functions/local/fake-kube/patches';
import { loadBalancerService } from '../support/kube-objects';
import { createRuntimeWorld, type RuntimeWorld } from '../support/runtime-world';
import { recordPending, recordScenario } from './support/summary';
import { createLoadBalancerServices, drainAll, endStateProblems } from './support/world';

let world: RuntimeWorld;
let forwarder: Forwarder | undefined;

afterEach(async () => {
  await forwarder?.stop(5_000);
  forwarder = undefined;
  await world.stop();
});

it('a Kubernetes API outage during syncs: the syncs back off and finish once it returns', async () => {
  const how =
    'the API answers 503 to the first 9 reads and then to 6 status writes, after the NLBs exist, while 3 new Services sync; finalizer, status, NLB and DLQ checked after';
  recordPending('Kubernetes API outage during syncs', 3, how);
  world = await createRuntimeWorld({ backoffBaseSeconds: 1, backoffMaxSeconds: 4 });
  const names = ['api-0', 'api-1', 'api-2'];
  await createLoadBalancerServices(world, names);
  // First the syncs cannot read their Services; then, with the NLBs made, they cannot write the
  // status: the case where work done in AWS must not be lost.
  world.kube.failNextRequests(9, 503, { method: 'GET' });
  world.kube.failNextRequests(6, 503, { method: 'PATCH', path: /\/status$/ });
  const drained = await drainAll(world);
  const failedStatusWrites = world.kube.requests.filter(
    (r) => r.method === 'PATCH' && r.path.endsWith('/status') && r.status === 503,
  ).length;
  const end = await endStateProblems(world, Object.fromEntries(names.map((n) => [n, [80, 443]])));
  const finalized = await Promise.all(
    names.map(async (name) => {
      const live = await world.api.readNamespacedService({ name, namespace: 'default' });
      return (live.metadata?.finalizers ?? []).length > 0 && !!live.status?.loadBalancer?.ingress;
    }),
  );
  const parked = await world.deadLetters();
  recordScenario({
    scenario: 'Kubernetes API outage during syncs',
    runs: names.length,
    converged: finalized.filter(Boolean).length === names.length ? end.converged : 0,
    leaked: end.leaked,
    lost: names.length - end.converged + parked.length,
    how,
  });
  expect(failedStatusWrites).toBe(6);
  expect(drained).toBe(true);
  expect(world.metrics.get('Retries')).toBeGreaterThan(0);
  expect(end.problems).toEqual([]);
  expect(finalized).toEqual([true, true, true]);
  expect(parked).toEqual([]);
});

it('a Kubernetes API outage while forwarding: Services created meanwhile are queued once it returns', async () => {
  const how =
    'watches dropped, history compacted (410 Gone) and the next 30 API requests answer 503 while 3 Services are created; the forwarder must relist and queue them';
  recordPending('Kubernetes API outage while forwarding', 3, how);
  world = await createRuntimeWorld({ backoffBaseSeconds: 1, backoffMaxSeconds: 4 });
  forwarder = new Forwarder({
    // As in the cluster: its ServiceAccount, under the RBAC of infra/k8s.
    kubeConfig: world.kube.kubeConfig({ as: world.rbac?.forwarder }),
    claim: { loadBalancerClass: world.config.loadBalancerClass, claimClassless: true },
    nodePolicy: 'stable',
    send: (messages) => new SqsWorkQueue(world.sqs, world.config.queueUrl).send(messages),
    sleep: (ms) => new Promise((resolve) => setTimeout(resolve, Math.min(ms, 200))),
  });
  forwarder.start();
  await vi.waitFor(() => expect(forwarder?.ready).toBe(true), { timeout: 10_000 });
  await drainAll(world); // the node events of the first list

  // The API server goes away: watches end, the next 30 requests fail, and what happened
  // meanwhile is compacted away, so the forwarder cannot resume its watch and must relist.
  const before = world.kube.requests.length;
  world.kube.failNextRequests(30, 503);
  world.kube.dropWatches();
  const names = ['fwd-0', 'fwd-1', 'fwd-2'];
  for (const name of names) {
    const body = JSON.parse(JSON.stringify(loadBalancerService(name))) as JsonObject;
    world.kube.store.create('services', 'default', body);
  }
  world.kube.compact();
  // Back: the forwarder relists and queues what it missed.
  await vi.waitFor(
    async () => {
      const depth = await world.queueDepth();
      expect(depth.visible + depth.inFlight + depth.delayed).toBeGreaterThan(0);
    },
    { timeout: 30_000, interval: 200 },
  );
  const drained = await drainAll(world);
  const end = await endStateProblems(world, Object.fromEntries(names.map((n) => [n, [80, 443]])));
  recordScenario({
    scenario: 'Kubernetes API outage while forwarding',
    runs: names.length,
    converged: end.converged,
    leaked: end.leaked,
    lost: names.length - end.converged,
    how,
  });
  const during = world.kube.requests.slice(before);
  expect(during.filter((r) => r.status === 503)).toHaveLength(30);
  // A list (no watch parameter) of Services after the outage: the relist.
  expect(
    during.some(
      (r) => r.status === 200 && r.path.endsWith('/services') && r.query.get('watch') !== 'true',
    ),
  ).toBe(true);
  expect(drained).toBe(true);
  expect(end.problems).toEqual([]);
});
