import { describe, expect, it } from 'vitest';
import { nodeChangeAffectsHosts } from '../../../functions/core/enqueue-filters';
import { hostsSelectedBy } from '../../../functions/core/hosts';
import { planNodeSync, trackedLabelLimits } from '../../../functions/core/node-sync-plan';
import {
  nodeSelectorLimits,
  parseNodeLabelSelector,
  readNodeSelector,
  targetNodeLabelsAnnotation,
} from '../../../functions/core/target-node-labels';
import { makeNode, makeService } from '../../../kit/core-objects';

const ingress = { 'node-role/ingress': 'true', zone: 'a' };
const a = makeNode('a', { instanceId: 'i-0000000000000000a', labels: ingress });
const b = makeNode('b', { instanceId: 'i-0000000000000000b', labels: { zone: 'a' } });
const c = makeNode('c', { instanceId: 'i-0000000000000000c' });

function withLabels(value: string) {
  return makeService({ annotations: { [targetNodeLabelsAnnotation]: value } });
}

describe('target-node-labels annotation', () => {
  it('parses key=value pairs into one canonical selector, keys sorted', () => {
    expect(readNodeSelector(withLabels(' zone=a , node-role/ingress=true '))).toEqual({
      valid: true,
      selector: 'node-role/ingress=true,zone=a',
    });
    expect(readNodeSelector(makeService())).toEqual({ valid: true, selector: undefined });
    // Never "every node": the caller keeps the last selection.
    expect(readNodeSelector(withLabels('role'))).toEqual({ valid: false });
  });

  it.each([
    ['', 'expected key=value pairs'],
    ['zone', 'is not a key=value pair'],
    ['-bad=x', 'is not a valid label key'],
    ['zone=a b', 'is not a valid label value'],
    ['zone=a,zone=b', 'given two values'],
    ['Bad_Prefix/x=1', 'invalid prefix'],
  ])('refuses %j', (value, problem) => {
    const parsed = parseNodeLabelSelector(value);
    expect('problem' in parsed && parsed.problem).toContain(problem);
  });

  it('refuses a selector over the per-Service limits, naming the limit', () => {
    const pairs = (n: number) =>
      Array.from({ length: n }, (_, i) => `team.example.com/k${i}=v`).join(',');
    expect(parseNodeLabelSelector(pairs(nodeSelectorLimits.labels))).toHaveProperty('selector');
    expect(parseNodeLabelSelector(pairs(nodeSelectorLimits.labels + 1))).toEqual({
      problem: `the selector names ${nodeSelectorLimits.labels + 1} labels, over the limit of ${nodeSelectorLimits.labels}`,
    });
    // 100 long keys, 32 KB: refused from its length before a pair is parsed.
    const long = Array.from(
      { length: 100 },
      (_, i) => `${'p'.repeat(250)}/${'k'.repeat(60)}${i}=v`,
    );
    const value = long.join(',');
    expect(parseNodeLabelSelector(value)).toEqual({
      problem: `the selector is ${value.length} characters, over the limit of ${nodeSelectorLimits.characters}`,
    });
    expect(readNodeSelector(withLabels(value))).toEqual({ valid: false });
    // A selector stored before the limits still narrows its Service's targets (to none here).
    const stored = pairs(nodeSelectorLimits.labels + 1);
    const plan = planNodeSync([a, b], 'stable', undefined, []);
    expect(hostsSelectedBy(plan.eligible, stored).hosts).toEqual([]);
  });

  it('accepts an empty value, as Kubernetes labels may be empty', () => {
    expect(parseNodeLabelSelector('gpu=')).toEqual({ selector: { gpu: '' } });
  });
});

describe('per-Service host sets', () => {
  it('track only the label keys Services select by, and filter hosts by them', () => {
    const plan = planNodeSync([a, b, c], 'stable', undefined, [
      { key: 'ns/web', hostsHash: 'x', nodeSelector: 'node-role/ingress=true' },
    ]);
    expect(plan.eligible.labelKeys).toEqual(['node-role/ingress']);
    // zone is nobody's selector: it is not stored.
    expect(plan.eligible.hosts.map((h) => h.labels)).toEqual([
      { 'node-role/ingress': 'true' },
      undefined,
      undefined,
    ]);
    const selected = hostsSelectedBy(plan.eligible, 'node-role/ingress=true');
    expect(selected.hosts.map((h) => h.name)).toEqual(['a']);
    expect(selected.nodeSelector).toBe('node-role/ingress=true');
  });

  it('keep the whole-set hash for Services without a selector', () => {
    const plan = planNodeSync([a, b], 'stable', undefined, [
      { key: 'ns/web', hostsHash: 'x', nodeSelector: 'zone=a' },
    ]);
    const plain = planNodeSync([a, b], 'stable', undefined, []);
    expect(hostsSelectedBy(plan.eligible, undefined).hash).toBe(plain.eligible.hash);
  });

  it('name only the Services whose selection changed when a node joins or is relabelled', () => {
    const services = (hashes: { all: string; ingress: string; zone: string }) => [
      { key: 'ns/all', hostsHash: hashes.all },
      { key: 'ns/ingress', hostsHash: hashes.ingress, nodeSelector: 'node-role/ingress=true' },
      { key: 'ns/zone', hostsHash: hashes.zone, nodeSelector: 'zone=a' },
    ];
    const selectors = [
      { key: 'x', nodeSelector: 'node-role/ingress=true' },
      { key: 'y', nodeSelector: 'zone=a' },
    ];
    const before = planNodeSync([a, b, c], 'stable', undefined, selectors).eligible;
    const hashes = {
      all: before.hash,
      ingress: hostsSelectedBy(before, 'node-role/ingress=true').hash,
      zone: hostsSelectedBy(before, 'zone=a').hash,
    };
    // c gains zone=a: the zone Service only (the whole set's names and providerIDs are the same).
    const cInZone = makeNode('c', { instanceId: 'i-0000000000000000c', labels: { zone: 'a' } });
    const relabelled = planNodeSync([a, b, cInZone], 'stable', before, services(hashes));
    expect(relabelled.servicesToUpdate).toEqual(['ns/zone']);
    expect(relabelled.changed).toBe(true);
    expect(relabelled.eligible.hash).toBe(before.hash);
    expect(relabelled.eligible.labelsHash).not.toBe(before.labelsHash);

    // A new unlabelled node: only the Service that takes every node.
    const d = makeNode('d', { instanceId: 'i-0000000000000000d' });
    expect(planNodeSync([a, b, c, d], 'stable', before, services(hashes)).servicesToUpdate).toEqual(
      ['ns/all'],
    );
    // Nothing changed: nobody, and nothing to store.
    const same = planNodeSync([a, b, c], 'stable', before, services(hashes));
    expect(same.servicesToUpdate).toEqual([]);
    expect(same.changed).toBe(false);
  });

  it('report a change when a Service starts selecting by a new label key', () => {
    const before = planNodeSync([a, b], 'stable', undefined, []).eligible;
    const after = planNodeSync([a, b], 'stable', before, [
      { key: 'ns/web', hostsHash: undefined, nodeSelector: 'zone=a' },
    ]);
    expect(after.changed).toBe(true);
    expect(after.eligible.labelKeys).toEqual(['zone']);
  });
});

describe('the stored host set, shared by every Service', () => {
  const longKey = (service: number, i: number) =>
    `${'p'.repeat(200)}.example.com/${'k'.repeat(40)}-${service}-${i}`;
  const tenSelectors = (count: number) =>
    Array.from({ length: count }, (_, n) => ({
      key: `attacker/s${n}`,
      hostsHash: 'x',
      nodeSelector: Array.from(
        { length: nodeSelectorLimits.labels },
        (_, i) => `${longKey(n, i)}=v`,
      )
        .sort()
        .join(','),
    }));

  it('stores no label key that no node carries, however many Services select by such keys', () => {
    // Before: every selected key went into the one hosts#meta item (1,000 keys of ~260 characters).
    const plan = planNodeSync([a, b, c], 'stable', undefined, [
      ...tenSelectors(100),
      { key: 'victim/web', hostsHash: 'x', nodeSelector: 'zone=a' },
    ]);
    expect(plan.eligible.labelKeys).toEqual(['zone']);
    expect(JSON.stringify(plan.eligible).length).toBeLessThan(2_000);
  });

  it('caps the stored keys, while every Service is still compared on all of its labels', () => {
    const many = Object.fromEntries(
      Array.from({ length: trackedLabelLimits.keys + 10 }, (_, i) => [
        `k${String(i).padStart(4, '0')}`,
        'v',
      ]),
    );
    const labelled = makeNode('a', { instanceId: 'i-0000000000000000a', labels: many });
    const beyondCap = `k${String(trackedLabelLimits.keys + 5).padStart(4, '0')}=v`;
    const services = [
      {
        key: 'ns/many',
        hostsHash: 'x',
        nodeSelector: Object.keys(many)
          .map((k) => `${k}=v`)
          .join(','),
      },
      { key: 'ns/late', hostsHash: 'x', nodeSelector: beyondCap },
    ];
    const first = planNodeSync([labelled, b], 'stable', undefined, services);
    expect(first.eligible.labelKeys).toHaveLength(trackedLabelLimits.keys);
    expect(first.eligible.labelKeys).not.toContain(beyondCap.split('=')[0]);
    // The Service selecting by an unstored key still gets node a, not an empty selection.
    const withA = hostsSelectedBy(
      planNodeSync([labelled], 'stable', undefined, []).eligible,
      undefined,
    ).hash;
    const again = planNodeSync([labelled, b], 'stable', first.eligible, [
      { key: 'ns/late', hostsHash: withA, nodeSelector: beyondCap },
    ]);
    expect(again.servicesToUpdate).toEqual([]);
  });
});

describe('node changes the forwarder passes on', () => {
  it('include a relabelled eligible node, as a Service may select by that label', () => {
    const relabelled = makeNode('a', { instanceId: 'i-0000000000000000a', labels: { zone: 'b' } });
    expect(nodeChangeAffectsHosts(a, relabelled, 'stable')).toBe(true);
    expect(nodeChangeAffectsHosts(a, a, 'stable')).toBe(false);
  });
});
