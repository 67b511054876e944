import { describe, expect, it } from 'vitest';
import { hostSetOf, hostSetsEqual } from '../../../functions/core/hosts';
import { planNodeSync } from '../../../functions/core/node-sync-plan';
import { makeNode } from '../../../kit/core-objects';

const a = makeNode('a', { instanceId: 'i-0000000000000000a' });
const b = makeNode('b', { instanceId: 'i-0000000000000000b' });
const fargate = makeNode('fargate', {
  providerID: 'aws:///us-east-1a/x/fargate-ip-10-0-0-1.ec2.internal',
});

describe('host sets', () => {
  it('are equal for the same names and providerIDs in any order', () => {
    const h = (name: string, id: string) => ({
      name,
      providerID: `aws:///z/${id}`,
      instanceId: id,
    });
    expect(
      hostSetsEqual(
        hostSetOf([h('a', 'i-1'), h('b', 'i-2')]),
        hostSetOf([h('b', 'i-2'), h('a', 'i-1')]),
      ),
    ).toBe(true);
  });

  it('differ when a name keeps its node but the providerID changes', () => {
    const h = (id: string) => ({ name: 'a', providerID: `aws:///z/${id}`, instanceId: id });
    expect(hostSetsEqual(hostSetOf([h('i-1')]), hostSetOf([h('i-2')]))).toBe(false);
  });
});

describe('planNodeSync', () => {
  it('decides the eligible host set by policy', () => {
    const unready = makeNode('c', { ready: 'False', instanceId: 'i-0000000000000000c' });
    expect(
      planNodeSync([a, b, unready], 'stable', undefined, []).eligible.hosts.map((h) => h.name),
    ).toEqual(['a', 'b', 'c']);
    expect(
      planNodeSync([a, b, unready], 'seed', undefined, []).eligible.hosts.map((h) => h.name),
    ).toEqual(['a', 'b']);
  });

  it('names only the Services whose last-synced hosts differ, compared one by one', () => {
    const current = planNodeSync([a, b], 'stable', undefined, []).eligible;
    const old = planNodeSync([a], 'stable', undefined, []).eligible;
    const plan = planNodeSync([a, b], 'stable', current, [
      { key: 'ns/up-to-date', hostsHash: current.hash },
      { key: 'ns/stale', hostsHash: old.hash },
      { key: 'ns/never-ensured', hostsHash: undefined },
    ]);
    expect(plan.servicesToUpdate).toEqual(['ns/stale']);
    expect(plan.changed).toBe(false);
  });

  it('reports a changed set when a node joins', () => {
    const before = planNodeSync([a], 'stable', undefined, []).eligible;
    expect(planNodeSync([a, b], 'stable', before, []).changed).toBe(true);
  });

  it('warns once about a node that cannot be a target, not on every pass', () => {
    const first = planNodeSync([a, fargate], 'stable', undefined, []);
    expect(first.warnings).toHaveLength(1);
    expect(first.warnings[0]?.object).toMatchObject({ kind: 'Node', name: 'fargate' });
    expect(first.warnings[0]?.event).toMatchObject({
      type: 'Warning',
      reason: 'NodeNotEligibleForLoadBalancer',
    });
    const second = planNodeSync([a, fargate], 'stable', first.eligible, []);
    expect(second.warnings).toEqual([]);
    expect(second.changed).toBe(false);
  });
});
