import type { V1Service } from '@kubernetes/client-node';
import { afterEach, expect, it } from 'vitest';
import { trackedLabelLimits } from '../../functions/core/node-sync-plan';
import {
  nodeSelectorLimits,
  targetNodeLabelsAnnotation,
} from '../../functions/core/target-node-labels';
import { loadBalancerService } from '../support/kube-objects';
import { createRuntimeWorld, type RuntimeWorld } from '../support/runtime-world';
import { recordPending, recordScenario } from './support/summary';
import { createLoadBalancerServices, drainAll, endStateProblems } from './support/world';

let world: RuntimeWorld;

afterEach(async () => {
  await world.stop();
});

const attacker = 'tenant-x';
const longKey = (service: number, i: number) =>
  `${'p'.repeat(240)}.example.com/${'k'.repeat(50)}-${service}-${i}`;
/** Keys no node carries: 100 of them is ~32 KB, 10 is the most a selector may name. */
const selector = (service: number, keys: number) =>
  Array.from({ length: keys }, (_, i) => `${longKey(service, i)}=x`).join(',');
const withSelector =
  (value: string) =>
  (s: V1Service): V1Service => ({
    ...s,
    metadata: { ...s.metadata, annotations: { [targetNodeLabelsAnnotation]: value } },
  });

it('oversized node selectors: one namespace cannot stop node sync for the cluster', async () => {
  const oversized = Array.from({ length: 14 }, (_, i) => `wide-${i}`);
  const withinLimits = Array.from({ length: 4 }, (_, i) => `narrow-${i}`);
  recordPending(
    'adversarial: oversized node selectors',
    oversized.length + withinLimits.length + 1,
    '14 Services with 32 KB target-node-labels selectors and 4 with 10 long keys no node carries, in one namespace, and a Service in another that must get an added node',
  );
  world = await createRuntimeWorld({ backoffBaseSeconds: 1, backoffMaxSeconds: 4 });
  for (const [i, name] of oversized.entries()) {
    await world.api.createNamespacedService({
      namespace: attacker,
      body: withSelector(selector(i, 100))(loadBalancerService(name, attacker)),
    });
    await world.send({ v: 1, kind: 'service', key: `${attacker}/${name}` });
  }
  for (const [i, name] of withinLimits.entries()) {
    await world.api.createNamespacedService({
      namespace: attacker,
      body: withSelector(selector(100 + i, nodeSelectorLimits.labels))(
        loadBalancerService(name, attacker),
      ),
    });
    await world.send({ v: 1, kind: 'service', key: `${attacker}/${name}` });
  }
  await createLoadBalancerServices(world, ['good']);
  const first = await drainAll(world);

  // A node joins: it must reach the good Service, whatever the attacker's selectors hold.
  const added = await world.addNode();
  await world.send({ v: 1, kind: 'node', reason: 'node added' });
  const second = await drainAll(world);

  const problems: string[] = [];
  let answered = 0;
  const events = (await world.api.listNamespacedEvent({ namespace: attacker })).items;
  const limit = `over the limit of ${nodeSelectorLimits.characters}`;
  for (const name of oversized) {
    const warned = events.some(
      (e) =>
        e.involvedObject.name === name && e.type === 'Warning' && (e.message ?? '').includes(limit),
    );
    if (warned) answered++;
    else problems.push(`${attacker}/${name}: no Warning naming the limit`);
  }
  const owners = new Set(
    (await world.aws.ownedResources()).map((line) => /\((.*)\)$/.exec(line)?.[1] ?? line),
  );
  const leakedBy = oversized.filter((name) => owners.has(`${attacker}/${name}`));
  if (leakedBy.length > 0) problems.push(`refused Services own AWS resources: ${leakedBy.join()}`);
  // Within the limits a selector is served (an NLB with no targets, as no node matches).
  for (const name of withinLimits) {
    if (owners.has(`${attacker}/${name}`)) answered++;
    else problems.push(`${attacker}/${name}: served Service owns nothing`);
  }
  const stored = await world.runtime.store.getEligibleHosts();
  const storedKeys = stored?.labelKeys ?? [];
  if (storedKeys.length > 0) problems.push(`hosts#meta tracks ${storedKeys.length} label keys`);
  expect(JSON.stringify(stored).length).toBeLessThan(trackedLabelLimits.characters);

  const end = await endStateProblems(world, { good: [80, 443] }, [
    ...world.aws.hosts.map((h) => h.instanceId),
    added.instanceId,
  ]);
  const notGood = end.problems.filter((p) => !p.startsWith('not owned by any live Service'));
  const runs = oversized.length + withinLimits.length + 1;
  recordScenario({
    scenario: 'adversarial: oversized node selectors',
    runs,
    converged: answered + end.converged,
    leaked: leakedBy.length,
    lost: runs - answered - end.converged,
    how: `${oversized.length} Services whose target-node-labels name 100 keys of ~310 characters (~32 KB each; together 14× past the 400 KB of node sync's shared item before the limit) refused with a Warning naming the ${nodeSelectorLimits.characters}-character limit, owning nothing; ${withinLimits.length} with 10 such keys served with no targets, none of their keys stored; a node added then reaches a Service in another namespace`,
  });
  expect(first && second).toBe(true);
  expect(problems).toEqual([]);
  expect(notGood).toEqual([]);
  // The good Service's targets are every node, the added one included.
  expect(end.converged).toBe(1);
});
