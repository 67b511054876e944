import { DescribeTargetHealthCommand } from '@aws-sdk/client-elastic-load-balancing-v2';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { readNlbState, toProviderState } from '../../functions/nlb/nlb-state';
import type { Service } from '../../functions/core/objects';
import { loadBalancerService } from '../support/kube-objects';
import { createRuntimeWorld, type RuntimeWorld } from '../support/runtime-world';

const key = 'default/web';
let world: RuntimeWorld;

beforeEach(async () => {
  world = await createRuntimeWorld();
});

afterEach(async () => {
  await world.stop();
});

describe('target groups too large to record (moto + fake API server)', () => {
  it('a host update reads unrecorded targets with one DescribeTargetHealth per group, registers only the new node, and runs no full Ensure', async () => {
    await world.api.createNamespacedService({
      namespace: 'default',
      body: loadBalancerService('web'),
    });
    await world.send({ v: 1, kind: 'service', key });
    await world.drain();
    const record = await world.runtime.store.getService(key);
    // What a record of a Service on thousands of nodes holds: groups without target lists.
    const state = readNlbState(record?.provider);
    for (const tg of Object.values(state.targetGroups ?? {})) delete tg.targets;
    const added = await world.addNode();
    const service = (await world.api.readNamespacedService({
      name: 'web',
      namespace: 'default',
    })) as Service;
    const hosts = [...world.aws.hosts, added];

    world.aws.recorder.reset();
    const result = await world.runtime.provider.updateLoadBalancer(
      service,
      hosts,
      toProviderState(state),
    );

    expect(world.aws.recorder.count('DescribeTargetHealth')).toBe(2);
    expect(world.aws.recorder.count('RegisterTargets')).toBe(2);
    expect(world.aws.recorder.count('DeregisterTargets')).toBe(0);
    expect(world.aws.recorder.count('DescribeLoadBalancers')).toBe(0);
    const groups = Object.values(readNlbState(result.state).targetGroups ?? {});
    expect(groups).toHaveLength(2);
    for (const group of groups) {
      const health = await world.aws.testClients.elbv2.send(
        new DescribeTargetHealthCommand({ TargetGroupArn: group.arn }),
      );
      expect((health.TargetHealthDescriptions ?? []).map((d) => d.Target?.Id).sort()).toEqual(
        hosts.map((h) => h.instanceId).sort(),
      );
    }
  });
});
