import { describe, expect, it } from 'vitest';
import { instanceIdFromProviderID } from '../../../functions/core/hosts';
import { evaluateNode, isEligibleNode } from '../../../functions/core/node-policy';
import { makeNode, type NodeOptions } from '../../../kit/core-objects';

const excludeLabel = 'node.kubernetes.io/exclude-from-external-load-balancers';

describe('node policy "seed" (S15)', () => {
  it.each<[string, NodeOptions, boolean]>([
    ['a Ready node', {}, true],
    ['an unschedulable node', { unschedulable: true }, false],
    [
      'a node labelled node-role.kubernetes.io/master',
      { labels: { 'node-role.kubernetes.io/master': '' } },
      false,
    ],
    [
      'a node labelled alpha.service-controller.kubernetes.io/exclude-balancer',
      { labels: { 'alpha.service-controller.kubernetes.io/exclude-balancer': 'false' } },
      false,
    ],
    ['a node with no conditions', { conditions: [] }, false],
    ['a node whose Ready is False', { ready: 'False' }, false],
    ['a node whose Ready is Unknown', { ready: 'Unknown' }, false],
    [
      'a node with conditions but no Ready condition (kept, as in the seed)',
      { conditions: [{ type: 'MemoryPressure', status: 'False' }] },
      true,
    ],
    [
      'a node with the new exclusion label (the seed did not know it)',
      { labels: { [excludeLabel]: 'true' } },
      true,
    ],
  ])('%s → eligible %s', (_name, options, expected) => {
    expect(isEligibleNode(makeNode('n', options), 'seed')).toBe(expected);
  });
});

describe('node policy "stable" (default)', () => {
  it.each<[string, NodeOptions, boolean]>([
    ['a Ready node', {}, true],
    ['an unready node (the NLB health check decides)', { ready: 'False' }, true],
    ['a node without conditions', { conditions: [] }, true],
    ['an unschedulable (cordoned) node', { unschedulable: true }, true],
    [
      'a control-plane node with the master label',
      { labels: { 'node-role.kubernetes.io/master': '' } },
      true,
    ],
    ['exclusion label "true"', { labels: { [excludeLabel]: 'true' } }, false],
    ['exclusion label with an empty value', { labels: { [excludeLabel]: '' } }, false],
    ['exclusion label with an unparseable value', { labels: { [excludeLabel]: 'yes' } }, false],
    ['exclusion label "false"', { labels: { [excludeLabel]: 'false' } }, true],
    ['exclusion label "False"', { labels: { [excludeLabel]: 'False' } }, true],
    ['exclusion label "0"', { labels: { [excludeLabel]: '0' } }, true],
    [
      'the cluster-autoscaler deletion taint',
      {
        taints: [
          { key: 'ToBeDeletedByClusterAutoscaler', value: '1700000000', effect: 'NoSchedule' },
        ],
      },
      false,
    ],
    ['another taint', { taints: [{ key: 'dedicated', value: 'gpu', effect: 'NoSchedule' }] }, true],
    ['a node being deleted', { deleting: true }, false],
  ])('%s → eligible %s', (_name, options, expected) => {
    expect(isEligibleNode(makeNode('n', options), 'stable')).toBe(expected);
  });

  it('excludes nodes without an EC2 instance, with a Warning that says why', () => {
    const verdict = evaluateNode(
      makeNode('fargate-1', {
        providerID: 'aws:///us-east-1a/1234abcd/fargate-ip-10-0-1-2.ec2.internal',
      }),
      'stable',
    );
    expect(verdict).toMatchObject({ eligible: false, warn: true });
    expect(verdict.eligible ? '' : verdict.reason).toMatch(
      /fargate-1 has no EC2 instance in its providerID/,
    );
  });

  it('excluded-by-policy nodes carry no Warning (the user asked for it)', () => {
    const verdict = evaluateNode(makeNode('n', { labels: { [excludeLabel]: 'true' } }), 'stable');
    expect(verdict).toMatchObject({ eligible: false, warn: false });
  });

  it('an eligible node becomes a host with its instance ID', () => {
    const verdict = evaluateNode(makeNode('n', { instanceId: 'i-0123456789abcdef0' }), 'stable');
    expect(verdict).toEqual({
      eligible: true,
      host: {
        name: 'n',
        providerID: 'aws:///us-east-1a/i-0123456789abcdef0',
        instanceId: 'i-0123456789abcdef0',
      },
    });
  });
});

describe('instanceIdFromProviderID', () => {
  it.each([
    ['aws:///us-east-1a/i-0123456789abcdef0', 'i-0123456789abcdef0'],
    ['aws:///us-west-2b/i-12345678', 'i-12345678'],
    ['aws://us-west-2/us-west-2b/i-0123456789abcdef0', 'i-0123456789abcdef0'],
    ['aws:///i-0123456789abcdef0', 'i-0123456789abcdef0'],
    ['aws:///us-east-1a/1234abcd/fargate-ip-10-0-1-2.ec2.internal', undefined],
    ['eks-hybrid:///us-west-2/my-cluster/node-1', undefined],
    ['gce://project/zone/instance', undefined],
    ['aws:///us-east-1a/i-0123', undefined],
    ['aws:///us-east-1a/i-0123456789ABCDEF0', undefined],
    ['', undefined],
    [undefined, undefined],
  ])('%s → %s', (providerID, expected) => {
    expect(instanceIdFromProviderID(providerID)).toBe(expected);
  });
});
