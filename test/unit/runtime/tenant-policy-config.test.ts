import { describe, expect, it } from 'vitest';
import { ConfigurationError, parseConfig } from '../../../functions/config';

const base = {
  clusterName: 'prod-eu',
  region: 'eu-west-1',
  queueUrl: 'https://sqs.eu-west-1.amazonaws.com/123456789012/work',
  tableName: 'controller-state',
  aws: { vpcId: 'vpc-0a1b2c3d' },
  kubernetes: { mode: 'kubeconfig' },
};

function problems(tenantPolicy: unknown): string[] {
  try {
    parseConfig({ ...base, tenantPolicy });
  } catch (error) {
    if (!(error instanceof ConfigurationError)) throw error;
    return error.message.split('\n').slice(1);
  }
  return [];
}

describe('the tenantPolicy setting', () => {
  it('accepts a policy with name and label rules and a default, and leaves it out when absent', () => {
    const config = parseConfig({
      ...base,
      tenantPolicy: {
        rules: [
          {
            name: 'shop',
            namespaces: ['shop', 'team-*'],
            internetFacing: true,
            certificateArns: ['arn:aws:acm:*:123456789012:certificate/*'],
            eipAllocations: ['eipalloc-0123456789abcdef0'],
            maxLoadBalancerServices: 5,
            maxListeners: 4,
            requireSubnetRoleTag: false,
          },
          {
            namespaceSelector: {
              matchLabels: { 'example.com/tier': 'gold' },
              matchExpressions: [{ key: 'env', operator: 'In', values: ['prod'] }],
            },
          },
        ],
        default: { internetFacing: false, maxLoadBalancerServices: 2 },
      },
    });
    expect(config.tenantPolicy?.rules).toHaveLength(2);
    expect(config.tenantPolicy?.default).toEqual({
      internetFacing: false,
      maxLoadBalancerServices: 2,
    });
    expect(parseConfig(base).tenantPolicy).toBeUndefined();
  });

  it.each<[string, unknown, RegExp]>([
    [
      'an unknown key in a rule',
      { rules: [{ namespaces: ['a'], internetFacng: false }] },
      /tenantPolicy\.rules\.0: Unrecognized key: "internetFacng"/,
    ],
    ['an unknown key at the top', { rule: [] }, /tenantPolicy: Unrecognized key: "rule"/],
    [
      'a certificate pattern that is not an ARN',
      { default: { certificateArns: ['*'] } },
      /tenantPolicy\.default\.certificateArns\.0: .*certificate ARN pattern/,
    ],
    [
      'a certificate pattern with a field too many',
      { default: { certificateArns: ['arn:aws:acm:*:123456789012:certificate:*:x'] } },
      /certificateArns\.0: .*certificate ARN pattern/,
    ],
    [
      'a bad namespace glob',
      { rules: [{ namespaces: ['Team_A'] }] },
      /tenantPolicy\.rules\.0\.namespaces\.0: .*namespace name/,
    ],
    [
      'a rule without selectors',
      { rules: [{ internetFacing: false }] },
      /tenantPolicy\.rules\.0: a rule needs namespaces or namespaceSelector/,
    ],
    [
      'selectors on the default rule',
      { default: { namespaces: ['a'] } },
      /tenantPolicy\.default: Unrecognized key: "namespaces"/,
    ],
    [
      'an empty selector',
      { rules: [{ namespaceSelector: {} }] },
      /namespaceSelector: give matchLabels or matchExpressions/,
    ],
    [
      'In without values',
      { rules: [{ namespaceSelector: { matchExpressions: [{ key: 'env', operator: 'In' }] } }] },
      /matchExpressions\.0: In and NotIn need values/,
    ],
    [
      'a bad Elastic IP pattern',
      { default: { eipAllocations: ['10.0.0.1'] } },
      /eipAllocations\.0: .*Elastic IP allocation ID/,
    ],
    [
      'more listeners than an NLB has',
      { default: { maxListeners: 51 } },
      /tenantPolicy\.default\.maxListeners: /,
    ],
  ])('names %s', (_, policy, expected) => {
    const found = problems(policy);
    expect(found.join('\n')).toMatch(expected);
  });
});
