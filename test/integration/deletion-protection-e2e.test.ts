import { DescribeLoadBalancersCommand } from '@aws-sdk/client-elastic-load-balancing-v2';
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
  const found = await world.aws.clients.elbv2.send(new DescribeLoadBalancersCommand({}));
  return found.LoadBalancers?.length ?? 0;
}

async function warnings(): Promise<string[]> {
  const events = await world.api.listNamespacedEvent({ namespace: 'default' });
  return events.items.filter((e) => e.type === 'Warning').map((e) => e.message ?? '');
}

describe('deletion protection end to end (moto + fake API server)', () => {
  it('keeps the NLB and the finalizer with one Warning and no retry, until the annotation goes', async () => {
    const body = loadBalancerService('web');
    body.metadata = {
      ...body.metadata,
      annotations: { [attributes]: 'deletion_protection.enabled=true' },
    };
    await world.api.createNamespacedService({ namespace: 'default', body });
    await world.send({ v: 1, kind: 'service', key });
    await world.drain();
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
});
