import { PatchStrategy, setHeaderOptions } from '@kubernetes/client-node';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { targetNodeLabelsAnnotation } from '../../functions/core/target-node-labels';
import { createRuntimeWorld, targetsOf, type RuntimeWorld } from '../support/runtime-world';

const merge = setHeaderOptions('Content-Type', PatchStrategy.MergePatch);

let world: RuntimeWorld;

beforeEach(async () => {
  world = await createRuntimeWorld();
});

afterEach(async () => {
  await world.stop();
});

const targetsOfService = (name: string) => targetsOf(world, `default/${name}`);

async function labelNode(index: number, labels: Record<string, string | null>) {
  await world.api.patchNode(
    { name: world.aws.hosts[index]!.name, body: { metadata: { labels } } },
    merge,
  );
}

const ids = (...indexes: number[]) => indexes.map((i) => world.aws.hosts[i]!.instanceId).sort();

describe('aws-load-balancer-target-node-labels (moto + fake API server)', () => {
  it('makes only matching nodes targets, per Service, and moves one node with one RegisterTargets per target group', async () => {
    await labelNode(0, { 'example.com/role': 'ingress' });
    await world.createService('all');
    await world.createService('picky', {
      [targetNodeLabelsAnnotation]: 'example.com/role=ingress',
    });
    expect(await targetsOfService('all')).toEqual([ids(0, 1, 2), ids(0, 1, 2)]);
    expect(await targetsOfService('picky')).toEqual([ids(0), ids(0)]);

    // A relabelled node joins the picky Service only: its two target groups, one call each.
    await labelNode(1, { 'example.com/role': 'ingress' });
    world.aws.recorder.reset();
    await world.send({ v: 1, kind: 'node', reason: 'node changed' });
    await world.drain();
    expect(await targetsOfService('picky')).toEqual([ids(0, 1), ids(0, 1)]);
    expect(await targetsOfService('all')).toEqual([ids(0, 1, 2), ids(0, 1, 2)]);
    expect(world.aws.recorder.count('RegisterTargets')).toBe(2);
    expect(world.aws.recorder.count('DeregisterTargets')).toBe(0);

    // An unlabelled node joins the Service that takes every node, and not the picky one.
    const added = await world.addNode();
    world.aws.recorder.reset();
    await world.send({ v: 1, kind: 'node', reason: 'node added' });
    await world.drain();
    expect((await targetsOfService('all'))[0]).toContain(added.instanceId);
    expect(await targetsOfService('picky')).toEqual([ids(0, 1), ids(0, 1)]);
    expect(world.aws.recorder.count('RegisterTargets')).toBe(2);

    // Losing the label takes the node out of the picky Service's target groups only.
    await labelNode(0, { 'example.com/role': null });
    world.aws.recorder.reset();
    await world.send({ v: 1, kind: 'node', reason: 'node changed' });
    await world.drain();
    expect(await targetsOfService('picky')).toEqual([ids(1), ids(1)]);
    expect(world.aws.recorder.count('DeregisterTargets')).toBe(2);
    expect(world.aws.recorder.count('RegisterTargets')).toBe(0);
  });

  it('follows a changed selector on the next service sync, before node sync has seen the label', async () => {
    await labelNode(2, { zone: 'b' });
    await world.createService('picky', {
      [targetNodeLabelsAnnotation]: 'example.com/role=ingress',
    });
    // No node carries the label yet: the Service has no targets, and says so.
    expect(await targetsOfService('picky')).toEqual([[], []]);

    await world.api.patchNamespacedService(
      {
        name: 'picky',
        namespace: 'default',
        body: { metadata: { annotations: { [targetNodeLabelsAnnotation]: 'zone=b' } } },
      },
      merge,
    );
    await world.send({ v: 1, kind: 'service', key: 'default/picky' });
    await world.drain();
    expect(await targetsOfService('picky')).toEqual([ids(2), ids(2)]);

    // Node sync now tracks `zone` and finds the Service up to date: no host update.
    world.aws.recorder.reset();
    await world.send({ v: 1, kind: 'node', reason: 'tick' });
    await world.drain();
    expect(world.aws.recorder.count('RegisterTargets')).toBe(0);
    expect((await world.runtime.store.getEligibleHosts())?.labelKeys).toEqual(['zone']);
  });

  it('keeps the last selection when the annotation is broken later: host updates never widen to every node', async () => {
    await labelNode(0, { 'example.com/role': 'ingress' });
    await world.createService('picky', {
      [targetNodeLabelsAnnotation]: 'example.com/role=ingress',
    });
    await world.api.patchNamespacedService(
      {
        name: 'picky',
        namespace: 'default',
        body: { metadata: { annotations: { [targetNodeLabelsAnnotation]: 'example.com/role' } } },
      },
      merge,
    );
    await world.send({ v: 1, kind: 'service', key: 'default/picky' });
    await world.drain();
    const events = await world.api.listNamespacedEvent({ namespace: 'default' });
    expect(events.items.some((e) => e.type === 'Warning')).toBe(true);

    // A node joins with the label: the host update keeps to the last valid selection.
    const added = await world.addNode();
    await world.api.patchNode(
      { name: added.name, body: { metadata: { labels: { 'example.com/role': 'ingress' } } } },
      merge,
    );
    await world.send({ v: 1, kind: 'node', reason: 'node added' });
    await world.drain();
    const expected = [...ids(0), added.instanceId].sort();
    expect(await targetsOfService('picky')).toEqual([expected, expected]);
  });

  it('refuses an invalid selector with a Warning and creates nothing', async () => {
    await world.createService('bad', { [targetNodeLabelsAnnotation]: 'role' });
    const events = await world.api.listNamespacedEvent({ namespace: 'default' });
    const warning = events.items.find((e) => e.type === 'Warning');
    expect(warning?.message).toContain(targetNodeLabelsAnnotation);
    expect(warning?.message).toContain('is not a key=value pair');
    expect(world.aws.recorder.count('CreateLoadBalancer')).toBe(0);
  });
});
