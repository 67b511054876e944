import {
  DescribeLoadBalancersCommand,
  DescribeTargetGroupsCommand,
  DescribeTargetHealthCommand,
} from '@aws-sdk/client-elastic-load-balancing-v2';
import { PatchStrategy, setHeaderOptions } from '@kubernetes/client-node';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { upstreamFinalizer } from '../../functions/core/claim';
import { loadBalancerService } from '../support/kube-objects';
import { createRuntimeWorld, type RuntimeWorld } from '../support/runtime-world';

const merge = setHeaderOptions('Content-Type', PatchStrategy.MergePatch);
const key = 'default/web';
const attributes = 'service.beta.kubernetes.io/aws-load-balancer-attributes';

let world: RuntimeWorld;

beforeEach(async () => {
  world = await createRuntimeWorld();
});

afterEach(async () => {
  await world.stop();
});

async function loadBalancers(): Promise<number> {
  const found = await world.aws.testClients.elbv2.send(new DescribeLoadBalancersCommand({}));
  return found.LoadBalancers?.length ?? 0;
}

/** Targets registered in every target group of the account's NLBs, by group. */
async function registeredTargets(): Promise<string[][]> {
  const groups = await world.aws.testClients.elbv2.send(new DescribeTargetGroupsCommand({}));
  const targets: string[][] = [];
  for (const group of groups.TargetGroups ?? []) {
    const health = await world.aws.testClients.elbv2.send(
      new DescribeTargetHealthCommand({ TargetGroupArn: group.TargetGroupArn }),
    );
    targets.push((health.TargetHealthDescriptions ?? []).map((d) => d.Target?.Id ?? ''));
  }
  return targets;
}

/** default/web with deletion protection, synced. */
async function createProtected(): Promise<void> {
  const body = loadBalancerService('web');
  body.metadata = {
    ...body.metadata,
    annotations: { [attributes]: 'deletion_protection.enabled=true' },
  };
  await world.api.createNamespacedService({ namespace: 'default', body });
  await world.send({ v: 1, kind: 'service', key });
  await world.drain();
}

async function warnings(): Promise<string[]> {
  const events = await world.api.listNamespacedEvent({ namespace: 'default' });
  return events.items.filter((e) => e.type === 'Warning').map((e) => e.message ?? '');
}

describe('deletion protection end to end (moto + fake API server)', () => {
  it('keeps the NLB and the finalizer with one Warning and no retry, until the annotation goes', async () => {
    await createProtected();
    expect(await loadBalancers()).toBe(1);

    await world.api.deleteNamespacedService({ name: 'web', namespace: 'default' });
    await world.send({ v: 1, kind: 'service', key });
    await world.drain();
    const held = await world.api.readNamespacedService({ name: 'web', namespace: 'default' });
    expect(held.metadata?.finalizers).toEqual([upstreamFinalizer]);
    expect(await loadBalancers()).toBe(1);
    const warned = await warnings();
    expect(warned).toHaveLength(1);
    expect(warned[0]).toContain('deletion_protection.enabled=true');
    // Its node ports go back to Kubernetes: the kept NLB must not route to whoever gets them next.
    expect(await registeredTargets()).toEqual([[], []]);
    // Terminal: nothing is left in the queue to retry it.
    expect(await world.queueDepth()).toEqual({ visible: 0, inFlight: 0, delayed: 0 });

    await world.api.patchNamespacedService(
      {
        name: 'web',
        namespace: 'default',
        body: { metadata: { annotations: { [attributes]: null } } },
      },
      merge,
    );
    await world.send({ v: 1, kind: 'service', key });
    await world.drain();
    expect(await loadBalancers()).toBe(0);
    expect(await world.aws.ownedResources()).toEqual([]);
    await expect(
      world.api.readNamespacedService({ name: 'web', namespace: 'default' }),
    ).rejects.toMatchObject({ code: 404 });
  });

  it('a Service turned ClusterIP keeps its protected NLB with no targets, so its freed node ports reach nobody', async () => {
    await createProtected();
    const before = await registeredTargets();
    expect(before.length).toBeGreaterThan(0);
    expect(before.every((ids) => ids.length === world.aws.hosts.length)).toBe(true);

    await world.api.patchNamespacedService(
      { name: 'web', namespace: 'default', body: { spec: { type: 'ClusterIP' } } },
      merge,
    );
    await world.send({ v: 1, kind: 'service', key });
    await world.drain();
    expect(await loadBalancers()).toBe(1);
    expect((await warnings()).join('\n')).toContain('is kept, with no targets');
    expect(await registeredTargets()).toEqual(before.map(() => []));
    // A node added meanwhile does not become a target of the kept NLB, nor costs it a call.
    const warned = (await warnings()).length;
    world.aws.recorder.reset();
    await world.addNode();
    await world.send({ v: 1, kind: 'node', reason: 'node added' });
    await world.drain();
    expect(world.aws.recorder.count('DescribeTargetHealth')).toBe(0);
    expect(world.aws.recorder.count('RegisterTargets')).toBe(0);
    expect((await warnings()).length).toBe(warned);
    expect(await registeredTargets()).toEqual(before.map(() => []));
  });
});
